//! Differential fuzzing of gather-jit: an arbitrary byte string becomes a gather [`Case`]
//! (signature, data, indices, how to call), which runs through the JIT and through the
//! reference interpreter; their results must be identical, errors included.
//!
//! This file is shared: the libFuzzer target `fuzz_targets/differential.rs` calls [`check`],
//! and the integration tests (`tests/fuzz_replay.rs`) include it with `#[path]` to replay the
//! corpus and the crashes kept as regression tests. It depends on nothing but `gather_jit`,
//! `ndarray` and `half`.
//!
//! What one case checks (see `docs/safety.md`):
//! 1. An invalid signature: `Kernel::compile` returns exactly `Signature::validate`'s error.
//! 2. A valid one: `Kernel::run_bytes` equals `interp::interpret` (bytes, or the same error).
//! 3. The raw `Kernel::call_range`, on buffers at odd addresses, split in two ranges at a
//!    point chosen by the input, gives the same result.
//! 4. `Kernel::run_bytes_parallel` with 1 to 4 threads gives the same result.
//! 5. The typed `Kernel::run` on ndarray views (C or Fortran order, reversed, strided, or
//!    broadcast data or indices) gives the same result as the interpreter on the bytes the
//!    view stands for.
//! 6. After an index error the output holds the correct prefix and the caller's bytes after
//!    it (the documented partial-write contract of `call_range`), for 2 and 3.
//! 7. The plan does no more lookups than output elements or indices (no wasted walks).
//! 9. Where the plan can be banded (`specialize::Band`), the banded kernel (forced by a
//!    `Tuning`) agrees too, through `run_bytes`, split `call_range`s, `run_bytes_parallel` and
//!    (in fuzzing builds) guard-page buffers.
//! 8. In fuzzing builds only (`cfg(fuzzing)`, set by cargo-fuzz): `Kernel::call` on buffers
//!    that each end right before an inaccessible page, so that any read or write past the end
//!    of an input or of the output crashes.
//! 10. For one case in four, the kernel comes from a `KernelCache` too (a miss, a hit and a
//!     lent hit), is run after the cache is dropped, and must then be held by the caller
//!     alone: a dropped cache keeps nothing alive.
//!
//! Ranks reach past [`MAX_RANK`] (a structured rank byte of `0xF6` or more gives ranks
//! 60..=69 of mostly unit dims, so GatherND index tuples up to the limit's depth run).
//!
//! 11. An input whose first byte is [`quantized::SELECTOR`] (`0xC0`) or more (but for
//!     item 12's) is a quantized gather instead (`GatherBlockQuantized` or GGUF rows): [`quantized`] decodes and checks
//!     it against `interpret_quantized` the same way (validation errors, `run_bytes`, the raw
//!     `call` misaligned and at guard pages, the typed `run` on views, wrong lengths and
//!     types). The gathers' first bytes are below it (the kept corpus's were moved there, to
//!     the value with the same meaning).
//! 12. An input whose first byte is in `0xD0..=0xEF` (taken from the quantized range, where
//!     no kept input started) is a scatter instead (ScatterND, ScatterElements, ScatterUpdate
//!     of every flavor, reduction, dtype and index type): [`scatter`] decodes and checks it
//!     against `interpret_scatter` out of place and in place, sequential and parallel, raw,
//!     on bytes and on views, with hostile shapes and indices.

use gather_jit::interp::interpret;
use std::sync::Arc;

use gather_jit::ir::MAX_RANK;
use gather_jit::{
    DType, Element, Flavor, IndexElement, IndexPolicy, IndexType, Kernel, KernelCache,
    NegativeIndices, Op, OutOfRange, Signature, Tuning,
};
use ndarray::{ArrayD, ArrayViewD, Axis, IxDyn, ShapeBuilder, Slice};

#[path = "quantized.rs"]
pub mod quantized;

#[path = "scatter.rs"]
pub mod scatter;

/// Cases whose tensors are bigger than this (elements) are compiled but not run, to keep the
/// interpreter (one allocation per element) fast.
pub const MAX_ELEMENTS: usize = 1 << 14;

/// Byte written over the output before a run, to see what a failed run left untouched.
pub const SENTINEL: u8 = 0xA5;

/// Small dimension sizes: mostly tiny, some around the JIT's unroll factors (8, 9), one whose
/// slice crosses the 512-byte memcpy threshold (130 x 4 bytes), and zero.
const DIMS: [usize; 16] = [0, 1, 1, 2, 2, 3, 3, 4, 5, 6, 7, 8, 9, 13, 17, 130];

/// Hostile sizes a raw-mode dim byte can also name (validation must reject or bound them).
/// (`2^62 - 1` bytes twice is just valid; `2^62` twice is one byte too many.)
const HUGE_DIMS: [usize; 4] = [usize::MAX, 1 << 32, 1 << 62, (1 << 62) - 1];

/// One decoded test case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    /// The signature (valid or not).
    pub signature: Signature,
    /// Data bytes (empty when the signature is invalid or too big to run).
    pub data: Vec<u8>,
    /// Index bytes (native-endian `signature.index_type`).
    pub indices: Vec<u8>,
    /// Where to split the outer loop, as a fraction `split / 255` of its extent.
    pub split: u8,
    /// Byte offsets (0..=7) of data, indices and output from an 8-aligned address.
    pub misalign: [usize; 3],
    /// Whether the typed API gets Fortran-order (non-contiguous) arrays.
    pub fortran: bool,
}

/// How the typed API's views of data and indices are laid out: chosen by the case's
/// `fortran` flag and `split` (so that the input format, and the kept corpus, stay as
/// they were).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViewKind {
    /// Both C-contiguous (`fortran == false`) or both Fortran order.
    Plain,
    /// Data with its axis `k` reversed (a negative stride).
    ReversedData(usize),
    /// Indices that are every other element of a twice-as-long axis `k`.
    StridedIndices(usize),
    /// Data broadcast along axis `k` (stride 0): the bytes it stands for repeat its first
    /// entry along that axis.
    BroadcastData(usize),
    /// Indices broadcast along axis `k`.
    BroadcastIndices(usize),
}

/// Deep ranks: a structured rank byte at or above this gives rank `60 + (byte - DEEP)`.
const DEEP: u8 = 0xF6;

/// The dims of a deep shape (one of them per byte modulo 8): mostly 1, so that its tensors
/// stay small.
const DEEP_DIMS: [usize; 8] = [1, 1, 1, 1, 1, 1, 2, 3];

/// Reads the input byte by byte; past its end every read is 0.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.bytes.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    fn remaining(&self) -> &[u8] {
        self.bytes.get(self.pos..).unwrap_or(&[])
    }

    fn small_dim(&mut self) -> usize {
        DIMS[usize::from(self.byte() % 16)]
    }

    /// A dim in raw mode: usually small, sometimes hostile.
    fn raw_dim(&mut self) -> usize {
        match self.byte() {
            b @ 0xFC..=0xFF => HUGE_DIMS[usize::from(b - 0xFC)],
            b => DIMS[usize::from(b % 16)],
        }
    }

    /// A structured rank and whether it is deep: `1..=6`, or from a byte of [`DEEP`] on
    /// `MAX_RANK - 4` and up (60..=69), around the rank limit.
    fn structured_rank(&mut self) -> (usize, bool) {
        match self.byte() {
            b @ DEEP.. => (MAX_RANK - 4 + usize::from(b - DEEP), true),
            b => (1 + usize::from(b % 6), false),
        }
    }

    /// A dim of a structured shape: one of [`DEEP_DIMS`] in a deep one, else small.
    fn structured_dim(&mut self, deep: bool) -> usize {
        match deep {
            true => DEEP_DIMS[usize::from(self.byte() % 8)],
            false => self.small_dim(),
        }
    }

    /// A shape of raw mode: a rank byte (see [`raw_rank`]), then a dim from `dim` each.
    fn raw_shape(&mut self, dim: impl Fn(&mut Self) -> usize) -> Vec<usize> {
        let rank = raw_rank(self.byte());
        (0..rank).map(|_| dim(self)).collect()
    }

    /// A small signed attribute in `-7..=7`.
    fn attribute(&mut self) -> i64 {
        i64::from(self.byte() as i8 % 8)
    }
}

/// A rank of raw mode (the quantized and scatter cases'): 0..=6, or around [`MAX_RANK`]
/// (61..=68) for the highest bytes.
fn raw_rank(byte: u8) -> usize {
    match byte {
        0xF8..=0xFF => MAX_RANK - 3 + usize::from(byte - 0xF8),
        b => usize::from(b % 7),
    }
}

/// The flavors that define `op`, in [`Flavor::ALL`] order.
fn flavors_for(op: &Op) -> Vec<Flavor> {
    Flavor::ALL
        .into_iter()
        .filter(|f| f.supports(op.name()))
        .collect()
}

/// Decodes a gather case; never panics. A signature that is invalid, or valid but too big to
/// run ([`MAX_ELEMENTS`]), gets no data or indices: [`Case::check`] only compiles it. (Only the
/// first byte's high bit and its value modulo 3 count, so [`check`] leaves the values from
/// [`quantized::SELECTOR`] on to quantized cases.)
pub fn decode(bytes: &[u8]) -> Case {
    let mut r = Reader { bytes, pos: 0 };
    let op_byte = r.byte();
    let structured = op_byte & 0x80 == 0;
    let flavor_byte = r.byte();
    let policy_byte = r.byte();
    let dtype = DType::ALL[usize::from(r.byte() % 13)];
    let index_type = IndexType::ALL[usize::from(r.byte() % 8)];
    let (op, data_shape, indices_shape) = if structured {
        structured_op(op_byte % 3, flavor_byte, &mut r)
    } else {
        raw_op(op_byte % 3, &mut r)
    };
    let flavor = if flavor_byte >= 0xF0 {
        // Any flavor, even one that does not define the op (a validation error).
        Flavor::ALL[usize::from(flavor_byte % 8)]
    } else {
        let flavors = flavors_for(&op);
        flavors[usize::from(flavor_byte) % flavors.len()]
    };
    let mut signature = Signature::new(op, &data_shape, &indices_shape)
        .with_flavor(flavor)
        .with_dtype(dtype)
        .with_index_type(index_type);
    // 0 keeps the flavor's default policy; 1..=6 name one of the six explicitly.
    if let Some(p) = (policy_byte % 7).checked_sub(1) {
        signature = signature.with_policy(IndexPolicy {
            negative: [NegativeIndices::Wrap, NegativeIndices::Invalid][usize::from(p / 3)],
            out_of_range: [OutOfRange::Error, OutOfRange::Zero, OutOfRange::Clamp]
                [usize::from(p % 3)],
        });
    }
    let split = r.byte();
    let layout = r.byte();
    let misalign = [
        usize::from(layout & 7),
        usize::from((layout >> 3) & 7),
        usize::from(layout.rotate_left(2) & 7),
    ];
    let fortran = layout & 0x40 != 0;
    let seed = r.byte();
    let mut case = Case {
        signature,
        data: Vec::new(),
        indices: Vec::new(),
        split,
        misalign,
        fortran,
    };
    if let Ok(validated) = case.signature.validate()
        && runnable(&validated)
    {
        case.data = data_bytes(dtype, validated.data_len(), seed);
        case.indices = index_bytes(&case.signature, &validated, &mut r);
    }
    case
}

/// Whether [`Case::check`] runs a valid signature (all tensors within [`MAX_ELEMENTS`]).
pub fn runnable(validated: &gather_jit::ir::Validated) -> bool {
    validated.data_len() <= MAX_ELEMENTS
        && validated.indices_len() <= MAX_ELEMENTS
        && validated.output_len() <= MAX_ELEMENTS
}

/// A signature built to be valid for most flavors (shapes derived from one another, the
/// attributes in range), so that most fuzzing time goes to code generation.
fn structured_op(kind: u8, flavor_byte: u8, r: &mut Reader<'_>) -> (Op, Vec<usize>, Vec<usize>) {
    let (rank, deep) = r.structured_rank();
    let data: Vec<usize> = (0..rank).map(|_| r.structured_dim(deep)).collect();
    let pick = usize::from(r.byte());
    let negative_attributes = r.byte() & 1 == 1;
    match kind {
        0 => {
            let axis = pick % rank;
            let op = Op::Gather {
                axis: 0,
                batch_dims: 0,
            };
            let flavors = flavors_for(&op);
            let flavor = flavors[usize::from(flavor_byte) % flavors.len()];
            let b = (pick / 7) % (max_gather_batch_dims(flavor, axis) + 1);
            let extra = usize::from(r.byte() % 4);
            let mut indices = data[..b].to_vec();
            indices.extend((0..extra).map(|_| r.small_dim()));
            let batch_dims = gather_batch_dims(flavor, b, indices.len(), negative_attributes);
            let axis = if negative_attributes {
                axis as i64 - rank as i64
            } else {
                axis as i64
            };
            (Op::Gather { axis, batch_dims }, data, indices)
        }
        1 => {
            let axis = pick % rank;
            let equal = r.byte();
            let indices = data
                .iter()
                .enumerate()
                .map(|(d, &size)| {
                    let shrink = r.byte();
                    if d == axis {
                        DIMS[usize::from(shrink % 16)]
                    } else if equal & 1 == 1 || size == 0 {
                        size
                    } else {
                        usize::from(shrink) % (size + 1)
                    }
                })
                .collect();
            let axis = if negative_attributes {
                axis as i64 - rank as i64
            } else {
                axis as i64
            };
            (Op::GatherElements { axis }, data, indices)
        }
        _ => {
            let b = pick % rank;
            let depth = 1 + usize::from(r.byte()) % (rank - b);
            let extra = usize::from(r.byte() % 3);
            let mut indices = data[..b].to_vec();
            indices.extend((0..extra).map(|_| r.small_dim()));
            indices.push(depth);
            let op = Op::GatherNd {
                batch_dims: b as i64,
            };
            (op, data, indices)
        }
    }
}

/// Any shapes and attributes: mostly invalid signatures, to compare validation errors, and a
/// few hostile sizes.
fn raw_op(kind: u8, r: &mut Reader<'_>) -> (Op, Vec<usize>, Vec<usize>) {
    let data_rank = usize::from(r.byte() % 7);
    let data = (0..data_rank).map(|_| r.raw_dim()).collect();
    let indices_rank = usize::from(r.byte() % 7);
    let indices = (0..indices_rank).map(|_| r.raw_dim()).collect();
    let op = match kind {
        0 => Op::Gather {
            axis: r.attribute(),
            batch_dims: r.attribute(),
        },
        1 => Op::GatherElements {
            axis: r.attribute(),
        },
        _ => Op::GatherNd {
            batch_dims: r.attribute(),
        },
    };
    (op, data, indices)
}

/// Data bytes that differ from their neighbours (a wrong source offset shows) and are never
/// zero (a missed zero-fill shows); `bool` data is 0 or 1, the only valid `bool` bytes.
fn data_bytes(dtype: DType, elements: usize, seed: u8) -> Vec<u8> {
    let bytes = elements * dtype.size();
    (0..bytes)
        .map(|i| {
            let x = (i as u8).wrapping_mul(31).wrapping_add(seed);
            if dtype == DType::Bool { x >> 7 } else { x | 1 }
        })
        .collect()
}

/// One index per element of the indices, from two input bytes each (a kind and a value),
/// relative to the size of the data dim it indexes. When the input runs out, the choices
/// read so far repeat.
fn index_bytes(
    signature: &Signature,
    validated: &gather_jit::ir::Validated,
    r: &mut Reader<'_>,
) -> Vec<u8> {
    let index_type = signature.index_type;
    let choices: Vec<[u8; 2]> = r
        .remaining()
        .chunks_exact(2)
        .map(|c| [c[0], c[1]])
        .collect();
    let mut out = Vec::with_capacity(validated.indices_len() * index_type.size());
    for flat in 0..validated.indices_len() {
        let position = unravel(flat, &signature.indices_shape);
        let size = signature.data_shape[validated.indexed_data_dim(&position)];
        let choice = if choices.is_empty() {
            [0, 0]
        } else {
            choices[flat % choices.len()]
        };
        index_type.encode_wrapping(index_value(choice, size, index_type), &mut out);
    }
    out
}

/// The value of one index: valid, wrapped, just outside either end, or an extreme of the type.
fn index_value([kind, value]: [u8; 2], size: usize, index_type: IndexType) -> i128 {
    let s = size as i128;
    let v = i128::from(value);
    let (min, max) = (
        i128::from(index_type.min_value()),
        i128::from(index_type.max_value()),
    );
    match kind % 16 {
        0..=6 if s > 0 => v % s,
        7 | 8 if s > 0 => -(v % s) - 1,
        0..=8 => v,
        9 => s + v % 3,
        10 => -s - 1 - v % 3,
        11 => min + v % 2,
        12 => max - v % 2,
        13 => -1,
        14 => i128::from(value as i8) * 0x0101_0101_0101_0101,
        _ => 0,
    }
}

/// Row-major coordinates of element `flat` of `shape` (the test's own copy).
fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut coords = vec![0; shape.len()];
    for (c, &d) in coords.iter_mut().zip(shape).rev() {
        *c = flat % d;
        flat /= d;
    }
    coords
}

/// The largest `batch_dims` a Gather of `flavor` takes along `axis`: none for ONNX and
/// OpenVINO Gather-1, at most one (and not past the axis) for TensorRT, up to the axis for
/// OpenVINO Gather-7/8. Shared with the property tests, which include this file.
pub fn max_gather_batch_dims(flavor: Flavor, axis: usize) -> usize {
    match flavor {
        Flavor::OpenvinoGather7 | Flavor::OpenvinoGather8 => axis,
        Flavor::TensorRt => axis.min(1),
        _ => 0,
    }
}

/// `b` batch dims as a Gather attribute, written from the end of the indices' rank when
/// `negative` and the flavor allows it (OpenVINO Gather-7/8).
pub fn gather_batch_dims(flavor: Flavor, b: usize, indices_rank: usize, negative: bool) -> i64 {
    match flavor {
        Flavor::OpenvinoGather7 | Flavor::OpenvinoGather8 if negative => {
            b as i64 - indices_rank as i64
        }
        _ => b as i64,
    }
}

/// Whether `bytes` decode to a quantized case: a first byte from [`quantized::SELECTOR`] on,
/// outside the scatter cases' [`scatter::FIRST`]`..=`[`scatter::LAST`].
pub fn is_quantized(bytes: &[u8]) -> bool {
    quantized::in_range(bytes) && !scatter::is_scatter(bytes)
}

/// Decodes `bytes` and checks the case (a scatter one for first bytes in
/// [`scatter::FIRST`]`..=`[`scatter::LAST`], a quantized one for the others from
/// [`quantized::SELECTOR`] on, else a gather); panics (with a replayable description) on any
/// disagreement between the JIT and the interpreter.
pub fn check(bytes: &[u8]) {
    if scatter::is_scatter(bytes) {
        scatter::check(bytes);
    } else if is_quantized(bytes) {
        quantized::decode(bytes).check();
    } else {
        decode(bytes).check();
    }
}

impl Case {
    /// The tuning of the check's second, banded kernel: bands any table the plan's rules
    /// allow, into a scratch budget that varies with `split`.
    pub fn banded_tuning(&self) -> Tuning {
        Tuning::bands_always(64 + u64::from(self.split) * 37)
    }

    /// The layout of the typed API's views (see [`ViewKind`]).
    pub fn view_kind(&self) -> ViewKind {
        let data_rank = self.signature.data_shape.len().max(1);
        let indices_rank = self.signature.indices_shape.len().max(1);
        let axis = usize::from(self.split >> 3);
        match (self.fortran, self.split % 4) {
            (_, 0 | 1) => ViewKind::Plain,
            (false, 2) => ViewKind::ReversedData(axis % data_rank),
            (false, _) => ViewKind::BroadcastData(axis % data_rank),
            (true, 2) => ViewKind::StridedIndices(axis % indices_rank),
            (true, _) => ViewKind::BroadcastIndices(axis % indices_rank),
        }
    }

    /// Runs every path and asserts they agree with the interpreter.
    pub fn check(&self) {
        let sig = &self.signature;
        let validated = match sig.validate() {
            Ok(v) => v,
            Err(expected) => {
                let actual = Kernel::compile(sig).err();
                assert_eq!(
                    actual.as_ref(),
                    Some(&expected),
                    "compile vs validate\n{}",
                    self.replay()
                );
                return;
            }
        };
        let kernel = Kernel::compile(sig)
            .unwrap_or_else(|e| panic!("a valid signature must compile: {e}\n{}", self.replay()));
        assert_eq!(kernel.output_shape(), validated.output_shape());
        // Each lookup writes at least one output element or (check-only walks) reads an
        // index once, so a plan never needs more lookups than that. (A fuzz finding, fixed in
        // 4a1169d: a Gather with a 0 dim after the axis walked `data[batch..axis] x indices`
        // lookups for an empty output; see `EMPTY_SLICE_WALK_INPUT` in the tests.)
        let bound = validated.output_len().max(validated.indices_len()) as u64;
        let lookups = kernel.plan().lookups();
        assert!(
            lookups <= bound,
            "{lookups} lookups for {} output elements and {} indices\n{}",
            validated.output_len(),
            validated.indices_len(),
            self.replay()
        );
        if !runnable(&validated) {
            return;
        }
        let expected = interpret(&validated, &self.data, &self.indices);
        let output_len = validated.output_len() * sig.dtype.size();

        self.check_raw_paths(&kernel, &expected, output_len);

        // The typed ndarray API on views of the case's layout (it returns no output on an
        // error); a broadcast view stands for other bytes, which the interpreter gets too.
        let view = self.view_kind();
        let (data, indices) = broadcast_bytes(sig, &self.data, &self.indices, view);
        let view_expected = match (&data, &indices) {
            (None, None) => None,
            _ => Some(interpret(
                &validated,
                data.as_deref().unwrap_or(&self.data),
                indices.as_deref().unwrap_or(&self.indices),
            )),
        };
        let run_expected = view_expected.as_ref().unwrap_or(&expected);
        let path = format!("run ({view:?}, fortran {})", self.fortran);
        match typed_run(&kernel, &self.data, &self.indices, self.fortran, view) {
            Ok(output) => self.compare(&path, run_expected, Ok(()), Some(&output)),
            Err(e) => self.compare(&path, run_expected, Err(e), None),
        }

        if self.split % 4 == 3 {
            self.check_dropped_cache(&expected, output_len);
        }

        // The same signature banded (a GatherElements gathered band of columns by band, which
        // by default only a table of megabytes is), if its plan allows bands at all.
        let banded = Kernel::compile_tuned(sig, self.banded_tuning())
            .unwrap_or_else(|e| panic!("a valid signature must compile: {e}\n{}", self.replay()));
        if banded.plan().band.is_some() {
            self.check_raw_paths(&banded, &expected, output_len);
        }
    }

    /// Gets the kernel from a new cache (a miss, a hit and a lent hit), drops the cache, and
    /// checks that the caller's handle is then the kernel's only holder and still runs right.
    fn check_dropped_cache(&self, expected: &gather_jit::Result<Vec<u8>>, output_len: usize) {
        let cache = KernelCache::new(4);
        let kernel = cache
            .get(&self.signature)
            .unwrap_or_else(|e| panic!("a valid signature must compile: {e}\n{}", self.replay()));
        let again = cache.get(&self.signature).expect("cached");
        assert!(
            Arc::ptr_eq(&kernel, &again),
            "a hit returns the same kernel"
        );
        drop(again);
        let lent = cache.with(&self.signature, |k| std::ptr::eq(k, &*kernel));
        assert_eq!(lent, Ok(true), "a lent hit is the same kernel");
        drop(cache);
        assert_eq!(
            Arc::strong_count(&kernel),
            1,
            "a dropped cache still holds the kernel\n{}",
            self.replay()
        );
        let mut output = vec![SENTINEL; output_len];
        let actual = kernel.run_bytes(&self.data, &self.indices, &mut output);
        let output = actual.is_ok().then_some(&output[..]);
        self.compare(
            "run_bytes after the cache was dropped",
            expected,
            actual,
            output,
        );
    }

    /// Runs `kernel` through `run_bytes`, two `call_range`s on misaligned copies,
    /// `run_bytes_parallel` and (in fuzzing builds) buffers that end at a guard page, and
    /// compares each with the interpreter's `expected`. After an error the output is compared
    /// (the partial-write contract) only where the kernel promises a prefix: not for the
    /// parallel split, and nowhere for a banded kernel, which writes band by band.
    #[track_caller]
    fn check_raw_paths(
        &self,
        kernel: &Kernel,
        expected: &gather_jit::Result<Vec<u8>>,
        output_len: usize,
    ) {
        let banded = kernel.plan().band.is_some();
        let label = |path: &str| {
            if banded {
                format!("{path} (banded)")
            } else {
                path.to_string()
            }
        };
        // Whether to compare the output: always after success; after an error only where a
        // prefix is promised.
        let keep = |ok: bool, prefix: bool| ok || (prefix && !banded);

        // The safe byte API.
        let mut output = vec![SENTINEL; output_len];
        let actual = kernel.run_bytes(&self.data, &self.indices, &mut output);
        let output = keep(actual.is_ok(), true).then_some(&output[..]);
        self.compare(&label("run_bytes"), expected, actual, output);

        // The raw API on misaligned copies, in two ranges.
        let (actual, output) = self.call_split(kernel, output_len);
        let output = keep(actual.is_ok(), true).then_some(&output[..]);
        self.compare(&label("call_range"), expected, actual, output);

        // The parallel split: on an error any part of the output may have been written.
        let threads = 1 + usize::from(self.split % 4);
        let mut output = vec![SENTINEL; output_len];
        let actual = kernel.run_bytes_parallel(&self.data, &self.indices, &mut output, threads);
        let output = keep(actual.is_ok(), false).then_some(&output[..]);
        self.compare(&label("run_bytes_parallel"), expected, actual, output);

        // Buffers that end at a guard page.
        #[cfg(fuzzing)]
        {
            let (actual, output) = self.call_guarded(kernel, output_len);
            let output = keep(actual.is_ok(), true).then_some(&output[..]);
            self.compare(&label("call (guard pages)"), expected, actual, output);
        }
    }

    /// `call_range(0..split)` then `call_range(split..extent)` on buffers at odd addresses;
    /// stops at the first error, as one call would (for a banded kernel too, whose failing
    /// range names the gather's first bad index even when it lies in a later band).
    fn call_split(&self, kernel: &Kernel, output_len: usize) -> (gather_jit::Result<()>, Vec<u8>) {
        let [d, i, o] = self.misalign;
        let (data, data_at) = placed(&self.data, d);
        let (indices, indices_at) = placed(&self.indices, i);
        let (mut output, output_at) = placed(&vec![SENTINEL; output_len], o);
        let extent = kernel.outer_extent();
        let split = extent * u64::from(self.split) / 255;
        let output_ptr = output[output_at..].as_mut_ptr();
        let mut result = Ok(());
        for range in [0..split, split..extent] {
            // SAFETY: each buffer holds the signature's byte length from its offset (`data`
            // and `indices` are copies of slices `run_bytes` accepted, `output` has
            // `output_len` bytes); they are three distinct allocations; the ranges lie within
            // the outer extent and run one after the other on this thread.
            result = unsafe {
                kernel.call_range(
                    data[data_at..].as_ptr(),
                    indices[indices_at..].as_ptr(),
                    output_ptr,
                    range,
                )
            };
            if result.is_err() {
                break;
            }
        }
        // The kernel wrote nothing outside the output (`placed` zeroed the margins).
        let margins = output[..output_at]
            .iter()
            .chain(&output[output_at + output_len..]);
        if margins.into_iter().any(|&b| b != 0) {
            panic!("call_range wrote outside the output\n{}", self.replay());
        }
        output.drain(..output_at);
        output.truncate(output_len);
        (result, output)
    }

    /// `call` on copies of the inputs and an output that each end right before a
    /// `PROT_NONE` page.
    #[cfg(fuzzing)]
    fn call_guarded(
        &self,
        kernel: &Kernel,
        output_len: usize,
    ) -> (gather_jit::Result<()>, Vec<u8>) {
        let data = guard::Guarded::new(&self.data);
        let indices = guard::Guarded::new(&self.indices);
        let mut output = guard::Guarded::new(&vec![SENTINEL; output_len]);
        // SAFETY: each mapping holds exactly the signature's byte length before its guard
        // page (`data` and `indices` are copies of slices `run_bytes` accepted); they are
        // distinct mappings; zero-length buffers point at their (non-null) guard page.
        let result = unsafe { kernel.call(data.as_ptr(), indices.as_ptr(), output.as_mut_ptr()) };
        (result, output.to_vec())
    }

    /// Asserts that `actual` (with `output`) from `path` agrees with the interpreter's
    /// `expected`; after an index error, checks the partial-write contract.
    #[track_caller]
    fn compare(
        &self,
        path: &str,
        expected: &gather_jit::Result<Vec<u8>>,
        actual: gather_jit::Result<()>,
        output: Option<&[u8]>,
    ) {
        match (expected, actual) {
            (Ok(e), Ok(())) => {
                let a = output.expect("a successful run has an output");
                if e[..] != a[..] {
                    let at = e.iter().zip(a).position(|(x, y)| x != y).unwrap_or(0);
                    panic!(
                        "{path}: output differs from the interpreter at byte {at}\n{}",
                        self.replay()
                    );
                }
            }
            (Err(e), Err(a)) => {
                assert_eq!(e, &a, "{path}: errors differ\n{}", self.replay());
                if let Some(output) = output {
                    self.check_partial_output(path, output);
                }
            }
            (e, a) => panic!(
                "{path}: interpreter {:?} but JIT {:?}\n{}",
                e.as_ref().map(|v| v.len()),
                a,
                self.replay()
            ),
        }
    }

    /// After an index error, `Kernel::call_range` promises: the slices before the bad lookup
    /// were written, the rest of the output is as the caller left it. So the output agrees
    /// with the interpreter's result for some prefix and is all [`SENTINEL`] after it. (The
    /// reference is the same signature under `OutOfRange::Zero`, which gives the same bytes
    /// wherever the index is good; under `Clamp` a failing run fails on its first lookup.)
    #[track_caller]
    fn check_partial_output(&self, path: &str, output: &[u8]) {
        let zero = self
            .signature
            .clone()
            .with_out_of_range(OutOfRange::Zero)
            .validate()
            .expect("the policy does not affect validation");
        let reference = interpret(&zero, &self.data, &self.indices)
            .expect("OutOfRange::Zero never fails on buffers of the right length");
        let prefix = reference
            .iter()
            .zip(output)
            .take_while(|(r, o)| r == o)
            .count();
        if let Some(at) = output[prefix..].iter().position(|&b| b != SENTINEL) {
            panic!(
                "{path}: after an index error, output byte {} was written but is neither the \
                 correct value nor the caller's byte\n{}",
                prefix + at,
                self.replay()
            );
        }
    }

    /// Rust source that rebuilds this case, for a regression test.
    pub fn replay(&self) -> String {
        let s = &self.signature;
        format!(
            "Case {{\n    signature: Signature::new(Op::{:?}, &{:?}, &{:?})\n        .with_flavor(Flavor::{:?})\n        .with_policy(IndexPolicy {{ negative: NegativeIndices::{:?}, out_of_range: OutOfRange::{:?} }})\n        .with_dtype(DType::{:?})\n        .with_index_type(IndexType::{:?}),\n    data: vec!{:?},\n    indices: vec!{:?},\n    split: {},\n    misalign: {:?},\n    fortran: {},\n}}\n(signature {s})",
            s.op,
            s.data_shape,
            s.indices_shape,
            s.flavor,
            s.policy.negative,
            s.policy.out_of_range,
            s.dtype,
            s.index_type,
            self.data,
            self.indices,
            self.split,
            self.misalign,
            self.fortran,
        )
    }
}

/// A copy of `bytes` inside a new buffer, starting at an address that is `misalign` (0..=7)
/// bytes past a multiple of 8; returns the buffer and the copy's offset in it.
fn placed(bytes: &[u8], misalign: usize) -> (Vec<u8>, usize) {
    let mut buffer = vec![0u8; bytes.len() + 16];
    let base = buffer.as_ptr() as usize;
    let at = (8 - base % 8) % 8 + misalign;
    buffer[at..at + bytes.len()].copy_from_slice(bytes);
    (buffer, at)
}

/// Element (and index) types built from their native-endian bytes, for the typed API.
trait FromBytes: Element {
    fn from_bytes(bytes: &[u8]) -> Self;
    fn to_bytes(self, out: &mut Vec<u8>);
}

macro_rules! from_bytes {
    ($($t:ty),*) => {$(
        impl FromBytes for $t {
            fn from_bytes(bytes: &[u8]) -> Self {
                <$t>::from_ne_bytes(bytes.try_into().expect("element size"))
            }
            fn to_bytes(self, out: &mut Vec<u8>) {
                out.extend(self.to_ne_bytes());
            }
        }
    )*};
}
from_bytes!(
    f32,
    f64,
    i8,
    u8,
    i16,
    u16,
    i32,
    u32,
    i64,
    u64,
    half::f16,
    half::bf16
);

impl FromBytes for bool {
    fn from_bytes(bytes: &[u8]) -> Self {
        bytes[0] != 0
    }
    fn to_bytes(self, out: &mut Vec<u8>) {
        out.push(u8::from(self));
    }
}

/// The bytes that data and indices stand for under a broadcast view (`None`: unchanged):
/// each entry along the broadcast axis repeats the first.
fn broadcast_bytes(
    sig: &Signature,
    data: &[u8],
    indices: &[u8],
    view: ViewKind,
) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    match view {
        ViewKind::BroadcastData(axis) if sig.data_shape.get(axis).is_some_and(|&d| d > 0) => (
            Some(repeat_first(data, &sig.data_shape, axis, sig.dtype.size())),
            None,
        ),
        ViewKind::BroadcastIndices(axis) if sig.indices_shape.get(axis).is_some_and(|&d| d > 0) => {
            (
                None,
                Some(repeat_first(
                    indices,
                    &sig.indices_shape,
                    axis,
                    sig.index_type.size(),
                )),
            )
        }
        _ => (None, None),
    }
}

/// `bytes` (row-major elements of `size` bytes, of `shape`) with every entry along `axis`
/// replaced by the first.
fn repeat_first(bytes: &[u8], shape: &[usize], axis: usize, size: usize) -> Vec<u8> {
    let inner: usize = shape[axis + 1..].iter().product::<usize>() * size;
    let outer: usize = shape[..axis].iter().product();
    let block = inner * shape[axis];
    let mut out = bytes.to_vec();
    for o in 0..outer {
        let first = o * block;
        for k in 1..shape[axis] {
            out.copy_within(first..first + inner, first + k * inner);
        }
    }
    out
}

/// `Kernel::run` with the Rust types of the kernel's signature, on views laid out as `view`
/// says, returning the output bytes.
pub fn typed_run(
    kernel: &Kernel,
    data: &[u8],
    indices: &[u8],
    fortran: bool,
    view: ViewKind,
) -> gather_jit::Result<Vec<u8>> {
    macro_rules! by_index {
        ($t:ty) => {
            match kernel.signature().index_type {
                IndexType::I8 => run_as::<$t, i8>(kernel, data, indices, fortran, view),
                IndexType::U8 => run_as::<$t, u8>(kernel, data, indices, fortran, view),
                IndexType::I16 => run_as::<$t, i16>(kernel, data, indices, fortran, view),
                IndexType::U16 => run_as::<$t, u16>(kernel, data, indices, fortran, view),
                IndexType::I32 => run_as::<$t, i32>(kernel, data, indices, fortran, view),
                IndexType::U32 => run_as::<$t, u32>(kernel, data, indices, fortran, view),
                IndexType::I64 => run_as::<$t, i64>(kernel, data, indices, fortran, view),
                IndexType::U64 => run_as::<$t, u64>(kernel, data, indices, fortran, view),
            }
        };
    }
    match kernel.signature().dtype {
        DType::F16 => by_index!(half::f16),
        DType::Bf16 => by_index!(half::bf16),
        DType::F32 => by_index!(f32),
        DType::F64 => by_index!(f64),
        DType::I8 => by_index!(i8),
        DType::U8 => by_index!(u8),
        DType::I16 => by_index!(i16),
        DType::U16 => by_index!(u16),
        DType::I32 => by_index!(i32),
        DType::U32 => by_index!(u32),
        DType::I64 => by_index!(i64),
        DType::U64 => by_index!(u64),
        DType::Bool => by_index!(bool),
    }
}

/// An array of `shape` holding `values` in row-major order, stored in C or Fortran order.
fn array<T: Copy>(shape: &[usize], values: &[T], fortran: bool) -> ArrayD<T> {
    let c = ArrayViewD::from_shape(IxDyn(shape), values).expect("length matches the shape");
    if !fortran {
        return c.to_owned();
    }
    let mut f = ArrayD::from_shape_vec(IxDyn(shape).f(), values.to_vec()).expect("same length");
    f.assign(&c);
    f
}

/// Calls `f` with a view of `array` laid out as `kind` says for this input (`is_data`):
/// reversed or broadcast along an axis, or every other element of a twice-as-long copy.
/// Values are those of `array`, except that a broadcast repeats the first entry along its
/// axis (see [`repeat_first`]).
fn with_view<T: Copy, R>(
    array: &ArrayD<T>,
    kind: ViewKind,
    is_data: bool,
    f: impl FnOnce(ArrayViewD<'_, T>) -> R,
) -> R {
    let shape = array.shape();
    let has = |axis: usize| axis < shape.len() && shape[axis] > 0;
    match kind {
        ViewKind::ReversedData(axis) if is_data && has(axis) => {
            // Reversed twice: the view's negative stride reads `array`'s values.
            let mut source = array.to_owned();
            source.invert_axis(Axis(axis));
            let source = source.as_standard_layout().into_owned();
            let mut view = source.view();
            view.invert_axis(Axis(axis));
            f(view)
        }
        ViewKind::StridedIndices(axis) if !is_data && has(axis) && !array.is_empty() => {
            let mut wide_shape = shape.to_vec();
            wide_shape[axis] *= 2;
            let fill = array.iter().next().copied();
            let fill = fill.expect("a non-empty array has a first element");
            let mut wide = ArrayD::from_elem(IxDyn(&wide_shape), fill);
            wide.slice_axis_mut(Axis(axis), Slice::new(0, None, 2))
                .assign(array);
            f(wide.slice_axis(Axis(axis), Slice::new(0, None, 2)))
        }
        ViewKind::BroadcastData(axis) if is_data && has(axis) => {
            let first = array.slice_axis(Axis(axis), Slice::from(0..1));
            f(first
                .broadcast(array.raw_dim())
                .expect("a unit axis broadcasts"))
        }
        ViewKind::BroadcastIndices(axis) if !is_data && has(axis) => {
            let first = array.slice_axis(Axis(axis), Slice::from(0..1));
            f(first
                .broadcast(array.raw_dim())
                .expect("a unit axis broadcasts"))
        }
        _ => f(array.view()),
    }
}

fn run_as<T: FromBytes, I: IndexElement + FromBytes>(
    kernel: &Kernel,
    data: &[u8],
    indices: &[u8],
    fortran: bool,
    view: ViewKind,
) -> gather_jit::Result<Vec<u8>> {
    let sig = kernel.signature();
    let data: Vec<T> = data
        .chunks_exact(sig.dtype.size())
        .map(T::from_bytes)
        .collect();
    let indices: Vec<I> = indices
        .chunks_exact(sig.index_type.size())
        .map(I::from_bytes)
        .collect();
    let data = array(&sig.data_shape, &data, fortran);
    let indices = array(&sig.indices_shape, &indices, fortran);
    let out = with_view(&data, view, true, |data| {
        with_view(&indices, view, false, |indices| kernel.run(data, indices))
    })?;
    if out.shape() != kernel.output_shape() {
        panic!(
            "{}: output shape {:?}, expected {:?}",
            kernel.signature(),
            out.shape(),
            kernel.output_shape()
        );
    }
    let mut bytes = Vec::with_capacity(out.len() * sig.dtype.size());
    for &v in out.iter() {
        v.to_bytes(&mut bytes);
    }
    Ok(bytes)
}

/// Buffers followed by an inaccessible page (fuzzing builds only: `libc` is a dependency of
/// the fuzz crate, not of the tests that include this file).
#[cfg(fuzzing)]
mod guard {
    const PAGE: usize = 4096;

    /// A copy of some bytes, placed to end exactly where a `PROT_NONE` page begins.
    pub struct Guarded {
        base: *mut libc::c_void,
        map_len: usize,
        start: *mut u8,
        len: usize,
    }

    impl Guarded {
        pub fn new(bytes: &[u8]) -> Guarded {
            let data_pages = bytes.len().div_ceil(PAGE).max(1);
            let map_len = (data_pages + 1) * PAGE;
            // SAFETY: an anonymous private mapping; the result is checked below.
            let base = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    map_len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            assert_ne!(base, libc::MAP_FAILED, "mmap failed");
            let guard_at = data_pages * PAGE;
            // SAFETY: the last page lies inside the mapping just made.
            let status = unsafe {
                libc::mprotect(
                    base.cast::<u8>().add(guard_at).cast(),
                    PAGE,
                    libc::PROT_NONE,
                )
            };
            assert_eq!(status, 0, "mprotect failed");
            // SAFETY: `guard_at - len` is within the mapping (`len <= data_pages * PAGE`), and
            // the `len` bytes from there are readable and writable.
            let start = unsafe {
                let start = base.cast::<u8>().add(guard_at - bytes.len());
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), start, bytes.len());
                start
            };
            Guarded {
                base,
                map_len,
                start,
                len: bytes.len(),
            }
        }

        pub fn as_ptr(&self) -> *const u8 {
            self.start
        }

        pub fn as_mut_ptr(&mut self) -> *mut u8 {
            self.start
        }

        pub fn to_vec(&self) -> Vec<u8> {
            // SAFETY: `start..start + len` is readable (see `new`).
            unsafe { std::slice::from_raw_parts(self.start, self.len) }.to_vec()
        }
    }

    impl Drop for Guarded {
        fn drop(&mut self) {
            // SAFETY: unmaps exactly the mapping made in `new`; no pointer into it outlives
            // `self` (the kernel call that used it has returned).
            unsafe { libc::munmap(self.base, self.map_len) };
        }
    }
}
