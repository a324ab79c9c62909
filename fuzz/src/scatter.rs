//! Scatter cases: a fuzz input whose first byte is in [`FIRST`]`..=`[`LAST`] becomes a
//! [`ScatterCase`] (a ScatterND, ScatterElements or ScatterUpdate signature of any flavor,
//! reduction, element and index type, its data, indices and updates, and how to call it),
//! checked like the gathers: the JIT ([`ScatterKernel`]) against `interpret_scatter`, errors
//! included.
//!
//! What one case checks:
//! 1. An invalid signature: `ScatterKernel::compile` (and a cache) returns exactly
//!    `validate`'s error.
//! 2. A valid one compiles (its layout is `validate`'s; `explain` names it); if its tensors
//!    are small enough to run ([`runnable`]), every path below equals the interpreter: output
//!    bytes equal (NaN payloads aside under `sum`, `sub`, `prod` and `mean`, where which NaN
//!    an operation on two NaNs returns is the ISA's choice; bit for bit under `none`, `min` and
//!    `max`, which return an operand), errors equal, as values and as text.
//! 3. Out of place and in place, through `run_bytes`, `run_bytes_in_place`, their parallel
//!    forms on 2 and 3 threads, the raw `call` and `call_in_place_parallel` on copies at odd
//!    addresses (nothing written around any buffer, the inputs unchanged) and, in fuzzing
//!    builds, `call` and `call_in_place` on buffers that each end right before an
//!    inaccessible page. After an error the output is unwritten, and in place data is byte
//!    for byte as it was.
//! 4. The typed `run` and `run_in_place` on ndarray views of each tensor (C or Fortran order,
//!    reversed, strided, broadcast; in place, a broadcast data view is plain) against the
//!    interpreter on the bytes the views stand for; in place, the gaps of a strided view are
//!    untouched.
//! 5. Sometimes one buffer of the wrong length (`BufferMismatch`, the interpreter's for data,
//!    indices and updates), or a typed call with the wrong element type, index type or
//!    updates shape (the type or shape error, data untouched).
//! 6. For one case in four, the kernel also comes from a `KernelCache` (a miss, a hit and a
//!    lent hit), runs after the cache is dropped and is then held by the caller alone; for
//!    one in eight, `clif` prints.
//!
//! Hostile shapes: zero dims, ranks around [`MAX_RANK`] (past it too), and in structured mode
//! with the hostile flag, dims of `2^32`, `2^62`, `2^62 - 1` or `usize::MAX` among shapes
//! derived to be valid, so that a byte size that overflows must be a validation error and an
//! empty tensor with huge dims must run (and fast). Hostile indices: out of range either
//! side, the index type's extremes, negative under flavors that refuse them, duplicates
//! (which TensorRT's flavor refuses).

use std::sync::Arc;

use gather_jit::interp::{interpret_scatter, interpret_scatter_in_place};
use gather_jit::ir::MAX_RANK;
use gather_jit::scatter::{
    Reduction, ResolvedScatter, ScatterFlavor, ScatterLayout, ScatterOp, ScatterSignature,
};
use gather_jit::{
    DType, Element, Error, IndexElement, IndexType, KernelCache, NegativeIndices, ScatterKernel,
};
use ndarray::{ArrayD, IxDyn};

use super::quantized::{QView, Rng, Viewed, float_bytes, ndarray_holds};
use super::{DEEP, DIMS, FromBytes, HUGE_DIMS, Reader, SENTINEL, index_value, placed};

/// The first byte of a scatter input...
pub const FIRST: u8 = 0xD0;
/// ... and the last (an eighth of all inputs, taken from the quantized cases' range).
pub const LAST: u8 = 0xEF;

/// Valid cases run only if data, indices and updates each have at most this many elements
/// (the interpreter goes one element at a time).
pub const MAX_ELEMENTS: usize = 1 << 14;

/// Whether `bytes` decode to a scatter case.
pub fn is_scatter(bytes: &[u8]) -> bool {
    bytes.first().is_some_and(|b| (FIRST..=LAST).contains(b))
}

/// What a case does besides the plain runs: one buffer of the wrong length, or a typed call
/// with the wrong type or shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScatterMismatch {
    /// Nothing wrong.
    None,
    /// Data one byte longer (or shorter, if `shorter`), out of place and in place.
    Data { shorter: bool },
    /// Indices one byte longer or shorter.
    Indices { shorter: bool },
    /// Updates one byte longer or shorter.
    Updates { shorter: bool },
    /// The output one byte longer or shorter.
    Output { shorter: bool },
    /// The typed calls with `f64` elements (`f32` for an `f64` signature).
    ElementType,
    /// The typed calls with another index type.
    IndexType,
    /// The typed calls with updates of another shape (the same elements).
    UpdatesShape,
}

impl ScatterMismatch {
    fn decode(byte: u8) -> ScatterMismatch {
        let shorter = byte & 0x80 != 0;
        match byte % 16 {
            0 => ScatterMismatch::Data { shorter },
            1 => ScatterMismatch::Indices { shorter },
            2 => ScatterMismatch::Updates { shorter },
            3 => ScatterMismatch::Output { shorter },
            4 => ScatterMismatch::ElementType,
            5 => ScatterMismatch::IndexType,
            6 => ScatterMismatch::UpdatesShape,
            _ => ScatterMismatch::None,
        }
    }
}

/// One decoded scatter case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScatterCase {
    /// The signature (valid or not).
    pub signature: ScatterSignature,
    /// Data bytes (empty unless the case runs).
    pub data: Vec<u8>,
    /// Index bytes (native-endian `signature.index_type`).
    pub indices: Vec<u8>,
    /// Update bytes.
    pub updates: Vec<u8>,
    /// Views of data, indices and updates for the typed calls.
    pub views: [QView; 3],
    /// Byte offsets (0..=7) of data, indices, updates and output from an 8-aligned address,
    /// for the raw calls.
    pub misalign: [usize; 4],
    /// Threads of the raw parallel in-place call (2 or 3).
    pub threads: usize,
    /// The wrong buffer, type or shape of this case, if any.
    pub mismatch: ScatterMismatch,
    /// Whether the kernel also comes from a cache.
    pub cached: bool,
    /// Whether `clif` prints.
    pub clif: bool,
}

/// The flavors that define `op`, in [`ScatterFlavor::ALL`] order.
pub fn flavors_for(op: ScatterOp) -> Vec<ScatterFlavor> {
    ScatterFlavor::ALL
        .into_iter()
        .filter(|f| f.supports(op.name()))
        .collect()
}

/// Header flags (byte 3).
mod flag {
    /// `use_init_val = false` (where the flavor has it, or anywhere with [`ANYWHERE`]).
    pub const NO_INIT: u8 = 0x01;
    /// Bits 1-2: 0 or 1 the flavor's negative-index rule, 2 wrap, 3 invalid.
    pub const NEGATIVE_SHIFT: u8 = 1;
    /// Structured: the axis written from the end (negative).
    pub const NEGATIVE_AXIS: u8 = 0x08;
    /// Structured: dims may be huge (`HUGE_DIMS`), one byte in eight.
    pub const HOSTILE: u8 = 0x10;
    /// Index kinds limited to in-range and wrapped negative values.
    pub const CLEAN: u8 = 0x20;
    /// Indices step through their dim (`(value + position) % size`): fewer duplicates.
    pub const STEPPED: u8 = 0x40;
    /// With [`NO_INIT`]: `use_init_val = false` under any flavor (a validation error).
    pub const ANYWHERE: u8 = 0x80;
}

/// Decodes a scatter case (`bytes[0]` in `FIRST..=LAST`); never panics. A signature that is
/// invalid, or valid but too big to run ([`runnable`]), gets no buffers.
///
/// Layout: selector (op `byte % 3`: ScatterND, ScatterElements, ScatterUpdate; raw shapes when
/// both `0x0C` bits are set), flavor (from `0xF0` on any of the seven, else one that defines
/// the op), reduction (from `0xF0` on any of the seven, else one the flavor defines), flags
/// (see `flag`), dtype (13), index type (8), the values' style, their seed, two misalignment
/// bytes, three view bytes, the mismatch byte, an extras byte (cache, `clif`, threads); then
/// the shapes (`structured_shapes` or `raw_shapes`); then two bytes per index, as the
/// gathers'.
pub fn decode(bytes: &[u8]) -> ScatterCase {
    let mut r = Reader { bytes, pos: 0 };
    let selector = r.byte();
    let raw = selector & 0x0C == 0x0C;
    let kind = selector % 3;
    let flavor_byte = r.byte();
    let reduction_byte = r.byte();
    let flags = r.byte();
    let dtype = DType::ALL[usize::from(r.byte() % 13)];
    let index_type = IndexType::ALL[usize::from(r.byte() % 8)];
    let style = r.byte();
    let seed = r.byte();
    let m = u16::from_le_bytes([r.byte(), r.byte()]);
    let misalign = [0, 3, 6, 9].map(|shift| usize::from((m >> shift) & 7));
    let views = [r.byte(), r.byte(), r.byte()].map(QView::decode);
    let mismatch = ScatterMismatch::decode(r.byte());
    let extras = r.byte();

    let (op, data, indices, updates) = if raw {
        raw_shapes(kind, &mut r)
    } else {
        structured_shapes(kind, flags, &mut r)
    };
    let flavor = if flavor_byte >= 0xF0 {
        ScatterFlavor::ALL[usize::from(flavor_byte % 7)]
    } else {
        let flavors = flavors_for(op);
        flavors[usize::from(flavor_byte) % flavors.len()]
    };
    let reduction = if reduction_byte >= 0xF0 {
        Reduction::ALL[usize::from(reduction_byte % 7)]
    } else {
        let reductions = flavor.reductions();
        reductions[usize::from(reduction_byte) % reductions.len()]
    };
    let mut signature = ScatterSignature::new(op, &data, &indices, &updates)
        .with_flavor(flavor)
        .with_reduction(reduction)
        .with_dtype(dtype)
        .with_index_type(index_type);
    if flags & flag::NO_INIT != 0 && (flavor.has_use_init_val() || flags & flag::ANYWHERE != 0) {
        signature = signature.with_use_init_val(false);
    }
    match (flags >> flag::NEGATIVE_SHIFT) & 3 {
        2 => signature = signature.with_negative(NegativeIndices::Wrap),
        3 => signature = signature.with_negative(NegativeIndices::Invalid),
        _ => {}
    }

    let mut case = ScatterCase {
        signature,
        data: Vec::new(),
        indices: Vec::new(),
        updates: Vec::new(),
        views,
        misalign,
        threads: 2 + usize::from(extras >> 7),
        mismatch,
        cached: extras & 3 == 3,
        clif: (extras >> 2) & 7 == 7,
    };
    if let Ok(layout) = case.signature.validate()
        && runnable(&layout)
    {
        let mut rng = Rng(u64::from(seed) | (u64::from(style) << 8));
        case.data = values(dtype, layout.data_len(), style, &mut rng);
        case.updates = values(dtype, layout.updates_len(), style >> 2, &mut rng);
        case.indices = index_bytes(&layout, flags, &mut r);
    }
    case
}

/// Whether [`ScatterCase::check`] runs a valid signature (data, indices and updates within
/// [`MAX_ELEMENTS`]).
pub fn runnable(layout: &ScatterLayout) -> bool {
    layout.data_len() <= MAX_ELEMENTS
        && layout.indices_len() <= MAX_ELEMENTS
        && layout.updates_len() <= MAX_ELEMENTS
}

/// An op with its three shapes.
type Shapes = (ScatterOp, Vec<usize>, Vec<usize>, Vec<usize>);

/// Shapes built to be valid for every flavor of the op (updates derived from data and
/// indices), so that most time goes to code generation and runs; then one byte that may
/// perturb the updates shape (an `UpdatesShapeMismatch`, or OpenVINO's `[1]` for a scalar).
///
/// Bytes: rank (1..=6, or 60..=69 of mostly unit dims from [`DEEP`] on), data's dims, then
/// ScatterND: depth `k` (`1 + byte % rank`), grid rank (0..=2) and dims; ScatterElements:
/// axis, a byte whose low bit keeps the other dims equal to data's, one byte per dim (the
/// axis's a dim, the others shrunk); ScatterUpdate: axis, indices rank (0..=3) and dims.
fn structured_shapes(kind: u8, flags: u8, r: &mut Reader<'_>) -> Shapes {
    let hostile = flags & flag::HOSTILE != 0;
    let (rank, deep) = r.structured_rank();
    let dim = |r: &mut Reader<'_>| match (hostile, deep) {
        (false, _) => r.structured_dim(deep),
        (true, true) => [0, 1, 1, 1, 1, 2, 3, 1 << 32][usize::from(r.byte() % 8)],
        // Small (zero included), or one in eight huge.
        (true, false) => match r.byte() {
            b @ 0xE0.. => HUGE_DIMS[usize::from(b % 4)],
            b => DIMS[usize::from(b % 16)],
        },
    };
    let data: Vec<usize> = (0..rank).map(|_| dim(r)).collect();
    let negative = flags & flag::NEGATIVE_AXIS != 0;
    let axis_attribute = |axis: usize| match negative {
        true => axis as i64 - rank as i64,
        false => axis as i64,
    };
    let (op, indices, mut updates) = match kind {
        0 => {
            let k = 1 + usize::from(r.byte()) % rank;
            let grid_rank = usize::from(r.byte() % 3);
            let grid: Vec<usize> = (0..grid_rank).map(|_| dim(r)).collect();
            let indices = [&grid[..], &[k]].concat();
            let updates = [&grid[..], &data[k..]].concat();
            (ScatterOp::Nd, indices, updates)
        }
        1 => {
            let axis = usize::from(r.byte()) % rank;
            let equal = r.byte() & 1 == 1;
            let indices: Vec<usize> = data
                .iter()
                .enumerate()
                .map(|(d, &size)| {
                    if d == axis {
                        dim(r)
                    } else {
                        let shrink = r.byte();
                        match equal || size == 0 {
                            true => size,
                            false => usize::from(shrink) % (size.min(255) + 1),
                        }
                    }
                })
                .collect();
            let op = ScatterOp::Elements {
                axis: axis_attribute(axis),
            };
            (op, indices.clone(), indices)
        }
        _ => {
            let axis = usize::from(r.byte()) % rank;
            let indices_rank = usize::from(r.byte() % 4);
            let indices: Vec<usize> = (0..indices_rank).map(|_| dim(r)).collect();
            let updates = [&data[..axis], &indices[..], &data[axis + 1..]].concat();
            let op = ScatterOp::Update {
                axis: axis_attribute(axis),
            };
            (op, indices, updates)
        }
    };
    let perturb = r.byte();
    match perturb % 16 {
        15 if !updates.is_empty() => {
            let d = usize::from(perturb >> 4) % updates.len();
            updates[d] = updates[d].wrapping_add(1);
        }
        14 => updates.push(1),
        13 => {
            updates.pop();
        }
        // OpenVINO ScatterNDUpdate's scalar updates as a tensor of one element (valid only
        // where the expected shape is empty, under that flavor).
        12 if updates.is_empty() => updates.push(1),
        _ => {}
    }
    (op, data, indices, updates)
}

/// Any ranks (0..=6, or around the limit) and dims (small, zero or huge) for the three
/// shapes, and an axis in `-7..=7`: mostly validation errors.
fn raw_shapes(kind: u8, r: &mut Reader<'_>) -> Shapes {
    let data = r.raw_shape(Reader::raw_dim);
    let indices = r.raw_shape(Reader::raw_dim);
    let updates = r.raw_shape(Reader::raw_dim);
    let op = match kind {
        0 => ScatterOp::Nd,
        1 => ScatterOp::Elements {
            axis: r.attribute(),
        },
        _ => ScatterOp::Update {
            axis: r.attribute(),
        },
    };
    (op, data, indices, updates)
}

/// `f64` bit patterns worth an element: zeros, ones, infinities, quiet and signalling NaNs
/// with payloads and signs, subnormals, extremes, integers around `2^53`.
const SPECIAL_F64: [u64; 16] = [
    0x0000_0000_0000_0000,
    0x8000_0000_0000_0000,
    0x3FF0_0000_0000_0000,
    0xBFF0_0000_0000_0000,
    0x7FF0_0000_0000_0000,
    0xFFF0_0000_0000_0000,
    0x7FF8_0000_0000_0000,
    0x7FF0_0000_0000_0001,
    0x7FF4_5678_9ABC_DEF0,
    0xFFF8_0000_0000_0001,
    0x0000_0000_0000_0001,
    0x000F_FFFF_FFFF_FFFF,
    0x0010_0000_0000_0000,
    0x7FEF_FFFF_FFFF_FFFF,
    0x4340_0000_0000_0000, // 2^53
    0x3FD5_5555_5555_5555, // 1/3
];

/// `count` elements of `dtype`, native-endian. Floats: `style` 0 ordinary (near 1), 1 one in
/// eight special, 2 all special, 3 any bits (`f16`, `bf16` and `f32` as the quantized
/// scales). Integers: 0 small (`-3..=3`), 1 one in eight any bits, else any bits. `bool`: 0
/// or 1 (the only valid bytes).
fn values(dtype: DType, count: usize, style: u8, rng: &mut Rng) -> Vec<u8> {
    match dtype {
        DType::F32 | DType::F16 | DType::Bf16 => return float_bytes(dtype, count, style, rng),
        _ => {}
    }
    let size = dtype.size();
    let mut out = Vec::with_capacity(count * size);
    for _ in 0..count {
        let r = rng.next();
        let any = match style % 4 {
            0 => false,
            1 => rng.next().is_multiple_of(8),
            _ => true,
        };
        match dtype {
            DType::Bool => out.push((r & 1) as u8),
            DType::F64 => {
                let bits = match (style % 4, any) {
                    (3, _) => r,
                    (2, _) | (1, true) => SPECIAL_F64[r as usize % SPECIAL_F64.len()],
                    _ => {
                        // Exponents within 2^-12..=2^12, either sign.
                        let exponent = 1023 - 12 + (r >> 40) % 25;
                        (r & (1 << 63)) | (exponent << 52) | (r & 0xF_FFFF_FFFF_FFFF)
                    }
                };
                out.extend(bits.to_ne_bytes());
            }
            _ => {
                let value = if any { r as i64 } else { (r % 7) as i64 - 3 };
                match size {
                    1 => out.extend((value as i8).to_ne_bytes()),
                    2 => out.extend((value as i16).to_ne_bytes()),
                    4 => out.extend((value as i32).to_ne_bytes()),
                    _ => out.extend(value.to_ne_bytes()),
                }
            }
        }
    }
    out
}

/// One index per element of indices, from two input bytes each (a kind and a value, as the
/// gathers'), relative to the size of the data dim it indexes; with [`flag::CLEAN`] only the
/// in-range and wrapped-negative kinds, with [`flag::STEPPED`] `(value + position) % size`.
/// When the input runs out, the choices read so far repeat (so duplicates are common).
fn index_bytes(layout: &ScatterLayout, flags: u8, r: &mut Reader<'_>) -> Vec<u8> {
    let sig = layout.signature();
    let index_type = sig.index_type;
    let choices: Vec<[u8; 2]> = r
        .remaining()
        .chunks_exact(2)
        .map(|c| [c[0], c[1]])
        .collect();
    let count = layout.indices_len();
    let mut out = Vec::with_capacity(count * index_type.size());
    for flat in 0..count {
        let dim = match layout.op() {
            ResolvedScatter::Nd { index_depth } => flat % index_depth,
            ResolvedScatter::Elements { axis } | ResolvedScatter::Update { axis } => axis,
        };
        let size = sig.data_shape[dim];
        let [kind, value] = if choices.is_empty() {
            [0, 0]
        } else {
            choices[flat % choices.len()]
        };
        let index = if flags & flag::STEPPED != 0 && size > 0 {
            ((usize::from(value) + flat) % size) as i128
        } else if flags & flag::CLEAN != 0 {
            index_value([kind % 9, value], size, index_type)
        } else {
            index_value([kind, value], size, index_type)
        };
        index_type.encode_wrapping(index, &mut out);
    }
    out
}

/// Decodes `bytes` (a scatter input) and checks it.
pub fn check(bytes: &[u8]) {
    decode(bytes).check();
}

/// `bytes` with every NaN element of a float `dtype` replaced by one pattern.
fn canonical_nans(dtype: DType, bytes: &[u8]) -> Vec<u8> {
    let size = dtype.size();
    let is_nan = |e: &[u8]| match dtype {
        DType::F32 => f32::from_ne_bytes(e.try_into().expect("4 bytes")).is_nan(),
        DType::F64 => f64::from_ne_bytes(e.try_into().expect("8 bytes")).is_nan(),
        DType::F16 => half::f16::from_ne_bytes(e.try_into().expect("2 bytes")).is_nan(),
        DType::Bf16 => half::bf16::from_ne_bytes(e.try_into().expect("2 bytes")).is_nan(),
        _ => false,
    };
    bytes
        .chunks(size)
        .flat_map(|e| match e.len() == size && is_nan(e) {
            true => vec![0xFF; size],
            false => e.to_vec(),
        })
        .collect()
}

impl ScatterCase {
    /// What the case exercises, for the corpus summary: `scatter invalid: <category>`,
    /// `scatter valid, compiled only (large)`, `scatter ran: <op> <reduction>` or
    /// `scatter ran: <op> <error category>`.
    pub fn kind(&self) -> String {
        let sig = &self.signature;
        match sig.validate() {
            Err(e) => format!("scatter invalid: {}", e.category()),
            Ok(l) if !runnable(&l) => "scatter valid, compiled only (large)".to_string(),
            Ok(l) => match interpret_scatter(&l, &self.data, &self.indices, &self.updates) {
                Ok(_) => format!("scatter ran: {} {}", sig.op.name(), sig.reduction),
                Err(e) => format!("scatter ran: {} {}", sig.op.name(), e.category()),
            },
        }
    }

    /// Whether two outputs may differ in their NaNs' payloads: under the reductions that
    /// compute (`none`, `min` and `max` return one of their operands, bit for bit).
    fn nan_payloads_free(&self) -> bool {
        matches!(
            self.signature.reduction,
            Reduction::Sum | Reduction::Sub | Reduction::Prod | Reduction::Mean
        )
    }

    /// Runs every path and asserts they agree with the interpreter.
    pub fn check(&self) {
        let sig = &self.signature;
        let layout = match sig.validate() {
            Ok(layout) => layout,
            Err(expected) => {
                let actual = ScatterKernel::compile(sig).err();
                assert_eq!(
                    actual.as_ref(),
                    Some(&expected),
                    "compile vs validate\n{}",
                    self.replay()
                );
                if self.cached {
                    let cached = KernelCache::new(2).get_scatter(sig).err();
                    assert_eq!(
                        cached,
                        Some(expected),
                        "cache vs validate\n{}",
                        self.replay()
                    );
                }
                return;
            }
        };
        let kernel = ScatterKernel::compile(sig)
            .unwrap_or_else(|e| panic!("a valid signature must compile: {e}\n{}", self.replay()));
        assert_eq!(kernel.layout(), &layout, "{}", self.replay());
        assert_eq!(kernel.signature(), sig);
        assert_eq!(kernel.output_shape(), &sig.data_shape[..]);
        assert!(!kernel.machine_code().is_empty(), "{}", self.replay());
        let explained = kernel.explain();
        assert!(
            explained.contains(&sig.to_string()),
            "explain does not name the signature:\n{explained}\n{}",
            self.replay()
        );
        if self.clif {
            let clif = kernel.clif();
            assert!(
                clif.as_ref().is_ok_and(|text| text.contains("function")),
                "clif: {clif:?}\n{}",
                self.replay()
            );
        }
        for threads in 0..4 {
            for in_place in [false, true] {
                let parts = kernel.parallel_parts(threads, in_place);
                assert!(
                    parts >= 1 && (threads == 0 || parts <= threads),
                    "{parts} parts for {threads} threads\n{}",
                    self.replay()
                );
            }
        }
        if !runnable(&layout) {
            return;
        }
        let expected = interpret_scatter(&layout, &self.data, &self.indices, &self.updates);
        // The interpreter's two entry points agree, and its in-place one keeps its promise.
        let mut data = self.data.clone();
        let in_place = interpret_scatter_in_place(&layout, &mut data, &self.indices, &self.updates);
        self.compare_in_place("interpret_scatter_in_place", &expected, in_place, &data);

        self.check_bytes(&kernel, &expected);
        self.check_raw(&kernel, &expected);
        #[cfg(fuzzing)]
        self.check_guarded(&kernel, &expected);
        self.check_typed(&kernel, &layout);
        self.check_mismatch(&kernel, &layout);
        if self.cached {
            self.check_dropped_cache(&expected);
        }
    }

    /// Asserts that an out-of-place `actual` (with `output`, which was [`SENTINEL`] before
    /// the call) from `path` agrees with the interpreter's `expected`; after an error the
    /// output is unwritten.
    #[track_caller]
    fn compare(
        &self,
        path: &str,
        expected: &gather_jit::Result<Vec<u8>>,
        actual: gather_jit::Result<()>,
        output: &[u8],
    ) {
        self.compare_with(
            path,
            expected,
            actual,
            output,
            &vec![SENTINEL; output.len()],
        );
    }

    /// As [`ScatterCase::compare`] for an in-place call on a copy of the case's data: after
    /// an error `data` is the case's, byte for byte.
    #[track_caller]
    fn compare_in_place(
        &self,
        path: &str,
        expected: &gather_jit::Result<Vec<u8>>,
        actual: gather_jit::Result<()>,
        data: &[u8],
    ) {
        self.compare_with(path, expected, actual, data, &self.data);
    }

    /// The comparison: bytes equal (NaN payloads aside where [`Self::nan_payloads_free`]),
    /// or errors equal as values and as text, with `output` then equal to `before`.
    #[track_caller]
    fn compare_with(
        &self,
        path: &str,
        expected: &gather_jit::Result<Vec<u8>>,
        actual: gather_jit::Result<()>,
        output: &[u8],
        before: &[u8],
    ) {
        let dtype = self.signature.dtype;
        match (expected, actual) {
            (Ok(e), Ok(())) => {
                let (e, a) = match self.nan_payloads_free() {
                    true => (canonical_nans(dtype, e), canonical_nans(dtype, output)),
                    false => (e.clone(), output.to_vec()),
                };
                if e != a {
                    let at = e.iter().zip(&a).position(|(x, y)| x != y).unwrap_or(0);
                    let size = dtype.size();
                    let from = at / size * size;
                    let upto = (from + size).min(e.len()).min(output.len());
                    panic!(
                        "{path}: output differs from the interpreter at byte {at} (element {}): \
                         interpreter {:02x?}, JIT {:02x?} (lengths {} and {})\n{}",
                        at / size,
                        &e[from..upto],
                        &output[from.min(output.len())..upto],
                        e.len(),
                        output.len(),
                        self.replay()
                    );
                }
            }
            (Err(e), Err(a)) => {
                assert_eq!(e, &a, "{path}: errors differ\n{}", self.replay());
                assert_eq!(e.to_string(), a.to_string(), "{path}: messages differ");
                if output != before {
                    let at = output.iter().zip(before).position(|(x, y)| x != y);
                    panic!(
                        "{path}: a call that failed ({a}) wrote byte {at:?} (lengths {} and \
                         {})\n{}",
                        output.len(),
                        before.len(),
                        self.replay()
                    );
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

    /// The safe byte API: out of place and in place, sequential and on 2 and 3 threads.
    fn check_bytes(&self, kernel: &ScatterKernel, expected: &gather_jit::Result<Vec<u8>>) {
        for threads in [1, 2, 3] {
            let mut output = vec![SENTINEL; self.data.len()];
            let actual = match threads {
                1 => kernel.run_bytes(&self.data, &self.indices, &self.updates, &mut output),
                n => kernel.run_bytes_parallel(
                    &self.data,
                    &self.indices,
                    &self.updates,
                    &mut output,
                    n,
                ),
            };
            self.compare(
                &format!("run_bytes on {threads} thread(s)"),
                expected,
                actual,
                &output,
            );
            let mut data = self.data.clone();
            let actual = match threads {
                1 => kernel.run_bytes_in_place(&mut data, &self.indices, &self.updates),
                n => kernel.run_bytes_in_place_parallel(&mut data, &self.indices, &self.updates, n),
            };
            self.compare_in_place(
                &format!("run_bytes_in_place on {threads} thread(s)"),
                expected,
                actual,
                &data,
            );
        }
    }

    /// The raw calls on copies at odd addresses (`call` out of place, `call_in_place_parallel`
    /// on the case's threads): nothing around a buffer written, the inputs unchanged.
    fn check_raw(&self, kernel: &ScatterKernel, expected: &gather_jit::Result<Vec<u8>>) {
        let [d, i, u, o] = self.misalign;
        let len = self.data.len();
        let (data, data_at) = placed(&self.data, d);
        let (indices, indices_at) = placed(&self.indices, i);
        let (updates, updates_at) = placed(&self.updates, u);
        let (mut output, output_at) = placed(&vec![SENTINEL; len], o);
        let originals = (data.clone(), indices.clone(), updates.clone());
        // SAFETY: each buffer holds the layout's byte length from its offset (copies of the
        // case's buffers, which `run_bytes` takes; `output` has data's length); four distinct
        // allocations.
        let actual = unsafe {
            kernel.call(
                data[data_at..].as_ptr(),
                indices[indices_at..].as_ptr(),
                updates[updates_at..].as_ptr(),
                output[output_at..].as_mut_ptr(),
            )
        };
        let unchanged = (&data, &indices, &updates) == (&originals.0, &originals.1, &originals.2);
        assert!(unchanged, "call wrote to an input\n{}", self.replay());
        let margins = output[..output_at].iter().chain(&output[output_at + len..]);
        if margins.into_iter().any(|&b| b != 0) {
            panic!("call wrote outside the output\n{}", self.replay());
        }
        self.compare(
            "call (misaligned)",
            expected,
            actual,
            &output[output_at..output_at + len],
        );

        let mut data = data;
        // SAFETY: as above; data is written in place, through its own allocation.
        let actual = unsafe {
            kernel.call_in_place_parallel(
                data[data_at..].as_mut_ptr(),
                indices[indices_at..].as_ptr(),
                updates[updates_at..].as_ptr(),
                self.threads,
            )
        };
        let unchanged = (&indices, &updates) == (&originals.1, &originals.2);
        assert!(
            unchanged,
            "call_in_place wrote to an input\n{}",
            self.replay()
        );
        let margins = data[..data_at].iter().chain(&data[data_at + len..]);
        if margins.into_iter().any(|&b| b != 0) {
            panic!("call_in_place wrote outside data\n{}", self.replay());
        }
        self.compare_in_place(
            &format!(
                "call_in_place_parallel on {} threads (misaligned)",
                self.threads
            ),
            expected,
            actual,
            &data[data_at..data_at + len],
        );
    }

    /// `call` and `call_in_place` on copies of every buffer that each end right before a
    /// `PROT_NONE` page.
    #[cfg(fuzzing)]
    fn check_guarded(&self, kernel: &ScatterKernel, expected: &gather_jit::Result<Vec<u8>>) {
        use super::guard::Guarded;
        let data = Guarded::new(&self.data);
        let indices = Guarded::new(&self.indices);
        let updates = Guarded::new(&self.updates);
        let mut output = Guarded::new(&vec![SENTINEL; self.data.len()]);
        // SAFETY: each mapping holds exactly the layout's byte length before its guard page
        // (copies of buffers `run_bytes` takes); distinct mappings.
        let actual = unsafe {
            kernel.call(
                data.as_ptr(),
                indices.as_ptr(),
                updates.as_ptr(),
                output.as_mut_ptr(),
            )
        };
        self.compare("call (guard pages)", expected, actual, &output.to_vec());
        let mut data = data;
        // SAFETY: as above; data is written in place.
        let actual =
            unsafe { kernel.call_in_place(data.as_mut_ptr(), indices.as_ptr(), updates.as_ptr()) };
        self.compare_in_place(
            "call_in_place (guard pages)",
            expected,
            actual,
            &data.to_vec(),
        );
    }

    /// Gets the kernel from a new cache (a miss, a hit and a lent hit), drops the cache, and
    /// checks that the caller's handle is then the kernel's only holder and still runs right.
    fn check_dropped_cache(&self, expected: &gather_jit::Result<Vec<u8>>) {
        let cache = KernelCache::new(4);
        let kernel = cache
            .get_scatter(&self.signature)
            .unwrap_or_else(|e| panic!("a valid signature must compile: {e}\n{}", self.replay()));
        let again = cache.get_scatter(&self.signature).expect("cached");
        assert!(
            Arc::ptr_eq(&kernel, &again),
            "a hit returns the same kernel"
        );
        drop(again);
        let lent = cache.with_scatter(&self.signature, |k| std::ptr::eq(k, &*kernel));
        assert_eq!(lent, Ok(true), "a lent hit is the same kernel");
        drop(cache);
        assert_eq!(
            Arc::strong_count(&kernel),
            1,
            "a dropped cache still holds the kernel\n{}",
            self.replay()
        );
        let mut data = self.data.clone();
        let actual = kernel.run_bytes_in_place(&mut data, &self.indices, &self.updates);
        self.compare_in_place(
            "run_bytes_in_place after the cache was dropped",
            expected,
            actual,
            &data,
        );
    }

    /// The typed `run` and `run_in_place` on the case's views, against the interpreter on
    /// the bytes the views stand for.
    fn check_typed(&self, kernel: &ScatterKernel, layout: &ScatterLayout) {
        let sig = &self.signature;
        let shapes = [&sig.data_shape, &sig.indices_shape, &sig.updates_shape];
        if !shapes.into_iter().all(|s| ndarray_holds(s)) {
            return;
        }
        macro_rules! by_index {
            ($t:ty) => {
                match sig.index_type {
                    IndexType::I8 => typed::<$t, i8>(self, kernel, layout),
                    IndexType::U8 => typed::<$t, u8>(self, kernel, layout),
                    IndexType::I16 => typed::<$t, i16>(self, kernel, layout),
                    IndexType::U16 => typed::<$t, u16>(self, kernel, layout),
                    IndexType::I32 => typed::<$t, i32>(self, kernel, layout),
                    IndexType::U32 => typed::<$t, u32>(self, kernel, layout),
                    IndexType::I64 => typed::<$t, i64>(self, kernel, layout),
                    IndexType::U64 => typed::<$t, u64>(self, kernel, layout),
                }
            };
        }
        match sig.dtype {
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

    /// One buffer of the wrong length through `run_bytes` and `run_bytes_in_place`: the
    /// interpreter, given the same buffers, names the same mismatch; data stays as it was.
    fn check_mismatch(&self, kernel: &ScatterKernel, layout: &ScatterLayout) {
        let (mut data, mut indices, mut updates) = (
            self.data.clone(),
            self.indices.clone(),
            self.updates.clone(),
        );
        let mut output_len = self.data.len();
        let resize = |buffer: &mut Vec<u8>, shorter: bool| {
            if shorter && !buffer.is_empty() {
                buffer.pop();
            } else {
                buffer.push(SENTINEL);
            }
        };
        match self.mismatch {
            ScatterMismatch::Data { shorter } => resize(&mut data, shorter),
            ScatterMismatch::Indices { shorter } => resize(&mut indices, shorter),
            ScatterMismatch::Updates { shorter } => resize(&mut updates, shorter),
            ScatterMismatch::Output { shorter } => {
                output_len = match (shorter, output_len) {
                    (true, n) if n > 0 => n - 1,
                    (_, n) => n + 1,
                };
                let mut output = vec![SENTINEL; output_len];
                let actual = kernel.run_bytes(&data, &indices, &updates, &mut output);
                let (want, got) = (
                    format!("{} bytes", self.data.len()),
                    format!("{output_len} bytes"),
                );
                assert!(
                    matches!(
                        &actual,
                        Err(Error::BufferMismatch { what: "output", expected, actual, .. })
                            if *expected == want && *actual == got
                    ),
                    "an output of {got} for {want}: {actual:?}\n{}",
                    self.replay()
                );
                assert!(output.iter().all(|&b| b == SENTINEL), "{}", self.replay());
                return;
            }
            // Checked in the typed calls.
            ScatterMismatch::None
            | ScatterMismatch::ElementType
            | ScatterMismatch::IndexType
            | ScatterMismatch::UpdatesShape => return,
        }
        let expected = interpret_scatter(layout, &data, &indices, &updates);
        assert!(
            matches!(expected, Err(Error::BufferMismatch { .. })),
            "{:?}: the interpreter accepted a wrong buffer: {:?}\n{}",
            self.mismatch,
            expected.map(|v| v.len()),
            self.replay()
        );
        let mut output = vec![SENTINEL; output_len];
        let actual = kernel.run_bytes(&data, &indices, &updates, &mut output);
        self.compare(
            &format!("run_bytes ({:?})", self.mismatch),
            &expected,
            actual,
            &output,
        );
        let before = data.clone();
        let mut in_place = data;
        let actual = kernel.run_bytes_in_place(&mut in_place, &indices, &updates);
        let expected_in_place =
            interpret_scatter_in_place(layout, &mut before.clone(), &indices, &updates);
        self.compare_with(
            &format!("run_bytes_in_place ({:?})", self.mismatch),
            &expected_in_place.map(|()| before.clone()),
            actual,
            &in_place,
            &before,
        );
    }

    /// Rust source that rebuilds this case, for a regression test (buffers over 4 KiB are
    /// only counted).
    pub fn replay(&self) -> String {
        let bytes = |b: &[u8]| {
            if b.len() <= 4096 {
                format!("vec!{b:?}")
            } else {
                format!("/* {} bytes */", b.len())
            }
        };
        format!(
            "ScatterCase {{\n    signature: {:?},\n    data: {},\n    indices: {},\n    \
             updates: {},\n    views: {:?},\n    misalign: {:?},\n    threads: {},\n    \
             mismatch: ScatterMismatch::{:?},\n    cached: {},\n    clif: {},\n}}\n\
             (signature {})",
            self.signature,
            bytes(&self.data),
            bytes(&self.indices),
            bytes(&self.updates),
            self.views,
            self.misalign,
            self.threads,
            self.mismatch,
            self.cached,
            self.clif,
            self.signature,
        )
    }
}

/// The typed calls with the Rust types of the kernel's signature: `run` on the case's three
/// views and `run_in_place` on a writable data view (a broadcast one made plain), each
/// against the interpreter on the bytes the views stand for; with a type or shape mismatch,
/// first the wrong call, which must be refused and leave data untouched.
fn typed<T: FromBytes, I: IndexElement + FromBytes>(
    case: &ScatterCase,
    kernel: &ScatterKernel,
    layout: &ScatterLayout,
) {
    let sig = &case.signature;
    let [dv, iv, uv] = case.views;
    let fill = vec![0x5A; sig.dtype.size()];
    let index_fill = vec![0x5A; sig.index_type.size()];
    let data = Viewed::<T>::from_bytes(&sig.data_shape, &case.data, dv, &fill);
    let indices = Viewed::<I>::from_bytes(&sig.indices_shape, &case.indices, iv, &index_fill);
    let updates = Viewed::<T>::from_bytes(&sig.updates_shape, &case.updates, uv, &fill);
    let (data_bytes, index_bytes, update_bytes) = (data.bytes(), indices.bytes(), updates.bytes());
    let expected = interpret_scatter(layout, &data_bytes, &index_bytes, &update_bytes);
    let views = format!("{:?}", case.views);

    if case.mismatch != ScatterMismatch::None {
        typed_mismatch::<T, I>(case, kernel, &data, &indices, &updates);
    }

    let out = kernel.run(data.view(), indices.view(), updates.view());
    let out = out.map(|out| {
        assert_eq!(
            out.shape(),
            &sig.data_shape[..],
            "run's output shape\n{}",
            case.replay()
        );
        let mut bytes = Vec::with_capacity(out.len() * sig.dtype.size());
        for &v in out.iter() {
            v.to_bytes(&mut bytes);
        }
        bytes
    });
    let path = format!("run ({views})");
    match out {
        Ok(output) => case.compare(&path, &expected, Ok(()), &output),
        Err(e) => case.compare(&path, &expected, Err(e), &[]),
    }

    // In place: a broadcast data view cannot be written, a plain one stands in.
    let dv = match dv {
        QView::Broadcast(_) => QView::Plain,
        k => k,
    };
    let mut target = Viewed::<T>::from_bytes(&sig.data_shape, &case.data, dv, &fill);
    let before = target.storage_bytes();
    let expected = interpret_scatter(layout, &case.data, &index_bytes, &update_bytes);
    let view = target.view_mut().expect("a writable view");
    let actual = kernel.run_in_place(view, indices.view(), updates.view());
    let path = format!("run_in_place ({views})");
    match (&expected, &actual) {
        (Ok(e), Ok(())) => {
            case.compare(&path, &expected, Ok(()), &target.bytes());
            // Everything else in the storage (a strided view's gaps) is as it was.
            let wanted = Viewed::<T>::from_bytes(&sig.data_shape, e, dv, &fill);
            let (wanted, got) = (wanted.storage_bytes(), target.storage_bytes());
            let (wanted, got) = match case.nan_payloads_free() {
                true => (
                    canonical_nans(sig.dtype, &wanted),
                    canonical_nans(sig.dtype, &got),
                ),
                false => (wanted, got),
            };
            assert!(
                wanted == got,
                "{path}: the view's storage outside it changed\n{}",
                case.replay()
            );
        }
        _ => {
            let storage = target.storage_bytes();
            case.compare_with(&path, &expected, actual, &storage, &before);
        }
    }
}

/// The typed calls with the wrong element type, index type or updates shape: refused with the
/// type or shape error, data untouched.
fn typed_mismatch<T: FromBytes, I: IndexElement + FromBytes>(
    case: &ScatterCase,
    kernel: &ScatterKernel,
    data: &Viewed<T>,
    indices: &Viewed<I>,
    updates: &Viewed<T>,
) {
    let sig = &case.signature;
    match case.mismatch {
        ScatterMismatch::ElementType => {
            fn wrong<W: Element + Default>(
                case: &ScatterCase,
                kernel: &ScatterKernel,
                indices: ndarray::ArrayViewD<'_, impl IndexElement>,
            ) {
                let sig = &case.signature;
                let data = ArrayD::<W>::from_elem(IxDyn(&sig.data_shape), W::default());
                let updates = ArrayD::<W>::from_elem(IxDyn(&sig.updates_shape), W::default());
                let out = kernel.run(data.view(), indices.clone(), updates.view());
                let refused = |e: &gather_jit::Result<()>| {
                    matches!(
                        e,
                        Err(Error::DTypeMismatch { what: "data", expected, actual, .. })
                            if *expected == sig.dtype && *actual == W::DTYPE
                    )
                };
                assert!(
                    refused(&out.map(|_| ())),
                    "{:?} elements accepted\n{}",
                    W::DTYPE,
                    case.replay()
                );
                let mut target = data.clone();
                let e = kernel.run_in_place(target.view_mut(), indices, updates.view());
                assert!(
                    refused(&e),
                    "{:?} elements accepted\n{}",
                    W::DTYPE,
                    case.replay()
                );
            }
            match sig.dtype {
                DType::F64 => wrong::<f32>(case, kernel, indices.view()),
                _ => wrong::<f64>(case, kernel, indices.view()),
            }
        }
        ScatterMismatch::IndexType => {
            let other = if I::INDEX_TYPE == IndexType::I64 {
                IndexType::I32
            } else {
                IndexType::I64
            };
            let (out, in_place) = if other == IndexType::I32 {
                let wrong = ArrayD::<i32>::zeros(IxDyn(&sig.indices_shape));
                let out = kernel.run(data.view(), wrong.view(), updates.view());
                let mut target = data.view().to_owned();
                let e = kernel.run_in_place(target.view_mut(), wrong.view(), updates.view());
                (out.map(|_| ()), e)
            } else {
                let wrong = ArrayD::<i64>::zeros(IxDyn(&sig.indices_shape));
                let out = kernel.run(data.view(), wrong.view(), updates.view());
                let mut target = data.view().to_owned();
                let e = kernel.run_in_place(target.view_mut(), wrong.view(), updates.view());
                (out.map(|_| ()), e)
            };
            for e in [out, in_place] {
                assert!(
                    matches!(
                        &e,
                        Err(Error::IndexTypeMismatch { expected, actual, .. })
                            if *expected == sig.index_type && *actual == other
                    ),
                    "{other:?} indices: {e:?}\n{}",
                    case.replay()
                );
            }
        }
        ScatterMismatch::UpdatesShape => {
            // The same elements in another shape: flat, or flat with a unit axis if it was.
            let len: usize = sig.updates_shape.iter().product();
            let shape = match sig.updates_shape.len() {
                1 => vec![len, 1],
                _ => vec![len],
            };
            let flat =
                ArrayD::from_shape_vec(IxDyn(&shape), updates.view().iter().copied().collect())
                    .expect("the same number of elements");
            let out = kernel.run(data.view(), indices.view(), flat.view());
            let mut target = data.view().to_owned();
            let before = target.clone();
            let e = kernel.run_in_place(target.view_mut(), indices.view(), flat.view());
            for e in [out.map(|_| ()), e] {
                assert!(
                    matches!(
                        &e,
                        Err(Error::BufferMismatch {
                            what: "updates",
                            ..
                        })
                    ),
                    "updates of shape {shape:?}: {e:?}\n{}",
                    case.replay()
                );
            }
            let same = target.iter().zip(&before).all(|(a, b)| {
                let (mut x, mut y) = (Vec::new(), Vec::new());
                a.to_bytes(&mut x);
                b.to_bytes(&mut y);
                x == y
            });
            assert!(same, "a refused run_in_place wrote data\n{}", case.replay());
        }
        _ => {}
    }
}

/// The bytes of a structured seed's header and shapes, the inverse of [`decode`] for the
/// choices a seed names.
struct SeedBuilder {
    op: ScatterOp,
    flavor: ScatterFlavor,
    reduction: Reduction,
    flags: u8,
    dtype: DType,
    index_type: IndexType,
    /// Style, seed, two misalignment bytes, three view bytes, mismatch, extras.
    tail: [u8; 9],
}

impl SeedBuilder {
    fn new(op: ScatterOp, flavor: ScatterFlavor, reduction: Reduction) -> SeedBuilder {
        SeedBuilder {
            op,
            flavor,
            reduction,
            flags: 0,
            dtype: DType::F32,
            index_type: IndexType::I64,
            tail: [0, 1, 0, 0, 0, 0, 0, 7, 0],
        }
    }

    /// The header, then `shape` (structured shape bytes, see [`structured_shapes`]), then
    /// `choices` (two bytes per index).
    fn bytes(&self, shape: &[u8], choices: &[u8]) -> Vec<u8> {
        let kind = match self.op {
            ScatterOp::Nd => 0,
            ScatterOp::Elements { .. } => 1,
            ScatterOp::Update { .. } => 2,
        };
        let selector = (FIRST..=FIRST + 2)
            .find(|b| b % 3 == kind)
            .expect("three consecutive bytes");
        let position = |found: Option<usize>, what: &str| -> u8 {
            u8::try_from(found.unwrap_or_else(|| panic!("{what} not found"))).expect("small")
        };
        let flavors = flavors_for(self.op);
        // A flavor that does not define the op, or a reduction it lacks: the "any" bytes.
        let flavor = match flavors.iter().position(|&f| f == self.flavor) {
            Some(p) => position(Some(p), "flavor"),
            // 0xF0 + n with (0xF0 + n) % 7 = the flavor's position (0xF0 % 7 = 2).
            None => {
                let p = position(
                    ScatterFlavor::ALL.iter().position(|&f| f == self.flavor),
                    "flavor",
                );
                0xF0 + (p + 5) % 7
            }
        };
        let reduction = match self
            .flavor
            .reductions()
            .iter()
            .position(|&r| r == self.reduction)
        {
            Some(p) => position(Some(p), "reduction"),
            None => {
                // 0xF0 + n with (0xF0 + n) % 7 = the reduction's position (0xF0 % 7 = 2).
                let p = position(
                    Reduction::ALL.iter().position(|&r| r == self.reduction),
                    "reduction",
                );
                0xF0 + (p + 5) % 7
            }
        };
        let dtype = position(DType::ALL.iter().position(|&d| d == self.dtype), "dtype");
        let index_type = position(
            IndexType::ALL.iter().position(|&t| t == self.index_type),
            "index type",
        );
        let mut out = vec![selector, flavor, reduction, self.flags, dtype, index_type];
        out.extend(self.tail);
        out.extend(shape);
        out.extend(choices);
        out
    }
}

/// The structured dim byte of `dim` (one of [`DIMS`], or with the hostile flag one of
/// [`HUGE_DIMS`]).
fn dim_byte(dim: usize) -> u8 {
    if let Some(p) = DIMS.iter().position(|&d| d == dim) {
        return p as u8;
    }
    let p = HUGE_DIMS
        .iter()
        .position(|&d| d == dim)
        .expect("a known dim");
    0xE0 + p as u8
}

/// Seeds of the scatter part of the corpus, by name: every op under every flavor that
/// defines it, with every reduction of the flavor (and `use_init_val = false` where it
/// exists), the dtypes and index types in turn, small shapes and valid indices with
/// duplicates (distinct under TensorRT); then hostile shapes, hostile indices, validation
/// errors, wrong buffers and types, and the long-slice paths. `examples/scatter_seeds.rs`
/// writes them into `corpus/differential`.
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut seeds = Vec::new();
    let mut turn = 0usize;
    // Nd: data [4, 3], k = 1, grid [3]: indices [3, 1], updates [3, 3].
    let nd_shape = [1, dim_byte(4), dim_byte(3), 0, 1, dim_byte(3), 0];
    // Elements: data [3, 4], axis 1, dims equal, along the axis 2: indices = updates = [3, 2].
    let elements_shape = [1, dim_byte(3), dim_byte(4), 1, 1, 0, dim_byte(2), 0];
    // Update: data [4, 3], axis 0, indices [2]: updates [2, 3].
    let update_shape = [1, dim_byte(4), dim_byte(3), 0, 1, dim_byte(2), 0];
    for op in [
        ScatterOp::Nd,
        ScatterOp::Elements { axis: 1 },
        ScatterOp::Update { axis: 0 },
    ] {
        for flavor in flavors_for(op) {
            for &reduction in flavor.reductions() {
                for init in [true, false] {
                    if !init && !flavor.has_use_init_val() {
                        continue;
                    }
                    let mut seed = SeedBuilder::new(op, flavor, reduction);
                    seed.dtype = DType::ALL[turn % DType::ALL.len()];
                    if !reduction.defined_on(seed.dtype) {
                        turn += 1;
                        seed.dtype = DType::ALL[turn % DType::ALL.len()];
                    }
                    seed.index_type = IndexType::ALL[turn % IndexType::ALL.len()];
                    seed.flags = if init { 0 } else { flag::NO_INIT };
                    // Values: ordinary, a few special, all special, any bits, in turn.
                    seed.tail[0] = (turn % 4) as u8 | ((turn / 4 % 4) as u8) << 2;
                    seed.tail[1] = turn as u8;
                    seed.tail[2] = (turn * 37) as u8;
                    seed.tail[3] = (turn * 11) as u8;
                    seed.tail[4..7].copy_from_slice(&[
                        turn as u8,
                        (turn * 3) as u8,
                        (turn * 5) as u8,
                    ]);
                    seed.tail[8] = turn as u8;
                    let (shape, choices): (&[u8], Vec<u8>) = match op {
                        ScatterOp::Nd => (&nd_shape, vec![0, 1, 0, 3, 0, 1]),
                        ScatterOp::Elements { .. } => (&elements_shape, vec![0, 3, 0, 1, 0, 2]),
                        ScatterOp::Update { .. } => (&update_shape, vec![0, 2, 0, 2]),
                    };
                    let choices = if flavor.forbids_duplicates() {
                        seed.flags |= flag::STEPPED;
                        vec![0, 0]
                    } else {
                        choices
                    };
                    let name = format!(
                        "{}-{}-{}{}",
                        op.name(),
                        flavor,
                        reduction,
                        if init { "" } else { "-no-init" }
                    );
                    seeds.push((name, seed.bytes(shape, &choices)));
                    turn += 1;
                }
            }
        }
    }

    let named = |name: &str, bytes: Vec<u8>| (name.to_string(), bytes);
    let nd = |flavor| SeedBuilder::new(ScatterOp::Nd, flavor, Reduction::None);
    let elements =
        |flavor| SeedBuilder::new(ScatterOp::Elements { axis: 0 }, flavor, Reduction::None);
    let update = || {
        SeedBuilder::new(
            ScatterOp::Update { axis: 0 },
            ScatterFlavor::OpenvinoScatterUpdate3,
            Reduction::None,
        )
    };
    let hostile = |mut s: SeedBuilder| {
        s.flags |= flag::HOSTILE;
        s
    };
    let huge = dim_byte(1 << 32);
    // Empty tensors with huge dims: valid, nothing to write, and a call must be quick.
    seeds.push(named(
        "hostile-elements-empty-huge",
        hostile(elements(ScatterFlavor::Onnx)).bytes(&[1, huge, 0, 1, 1, 0, 0, 0], &[]),
    ));
    seeds.push(named(
        "hostile-update-empty-huge",
        hostile(update()).bytes(&[2, huge, dim_byte(3), 0, 1, 1, dim_byte(2), 0], &[0, 1]),
    ));
    seeds.push(named(
        "hostile-nd-empty-slice-huge",
        hostile(nd(ScatterFlavor::Onnx))
            .bytes(&[2, dim_byte(3), huge, 0, 0, 1, dim_byte(2), 0], &[0, 1]),
    ));
    // A byte size past isize::MAX: a validation error.
    seeds.push(named(
        "hostile-nd-size-overflow",
        hostile(nd(ScatterFlavor::Onnx)).bytes(&[1, dim_byte(1 << 62), dim_byte(4), 0, 0, 0], &[]),
    ));
    // Ranks at the limit (64, valid, unit dims) and past it (65).
    let deep = |rank: usize| -> Vec<u8> {
        let mut shape = vec![DEEP + (rank + 4 - MAX_RANK) as u8];
        shape.extend(std::iter::repeat_n(0, rank));
        // ScatterElements along axis 0, dims equal (1 along the axis too).
        shape.extend([0, 1]);
        shape.extend(std::iter::repeat_n(1, rank));
        shape.push(0);
        shape
    };
    seeds.push(named(
        "deep-elements-rank-64",
        elements(ScatterFlavor::OpenvinoScatterElementsUpdate3).bytes(&deep(MAX_RANK), &[0, 0]),
    ));
    seeds.push(named(
        "deep-elements-rank-65",
        elements(ScatterFlavor::Onnx).bytes(&deep(MAX_RANK + 1), &[0, 0]),
    ));
    // Hostile indices: past the end, before the start, the type's extremes.
    for (name, kind) in [
        ("past-end", 9u8),
        ("before-start", 10),
        ("min", 11),
        ("max", 12),
    ] {
        let mut s = nd(ScatterFlavor::OpenvinoScatterNdUpdate15);
        s.reduction = Reduction::Sum;
        s.index_type = IndexType::I16;
        seeds.push(named(
            &format!("index-{name}"),
            s.bytes(&nd_shape, &[0, 1, kind, 2, 0, 0]),
        ));
    }
    // A negative index where the flavor refuses them (ScatterUpdate-3), and where the
    // signature overrides the flavor to refuse them.
    seeds.push(named(
        "index-negative-update3",
        update().bytes(&update_shape, &[7, 1]),
    ));
    let mut s = nd(ScatterFlavor::Onnx);
    s.flags = 3 << flag::NEGATIVE_SHIFT;
    seeds.push(named("index-negative-refused", s.bytes(&nd_shape, &[7, 0])));
    // TensorRT: two updates of one element.
    seeds.push(named(
        "tensorrt-duplicate",
        nd(ScatterFlavor::TensorRt).bytes(&nd_shape, &[0, 1]),
    ));
    let mut s = elements(ScatterFlavor::TensorRt);
    s.op = ScatterOp::Elements { axis: 1 };
    seeds.push(named(
        "tensorrt-elements-duplicate",
        s.bytes(&elements_shape, &[0, 2]),
    ));
    // OpenVINO's scalar updates: ScatterNDUpdate-3 of data [2, 2] with k = 2 and no grid,
    // updates [1] (valid there, a shape mismatch under ONNX).
    let scalar = [1, dim_byte(2), dim_byte(2), 1, 0, 12];
    seeds.push(named(
        "openvino-scalar-updates",
        nd(ScatterFlavor::OpenvinoScatterNdUpdate3).bytes(&scalar, &[0, 1]),
    ));
    seeds.push(named(
        "onnx-scalar-updates-refused",
        nd(ScatterFlavor::Onnx).bytes(&scalar, &[0, 1]),
    ));
    // Validation errors: the updates shape, a flavor without the op, a reduction the
    // flavor lacks, use_init_val = false elsewhere, mean on bool.
    let mut perturbed = nd_shape;
    perturbed[6] = 0x1F;
    seeds.push(named(
        "updates-shape-mismatch",
        nd(ScatterFlavor::Onnx).bytes(&perturbed, &[]),
    ));
    seeds.push(named(
        "flavor-mismatch",
        nd(ScatterFlavor::OpenvinoScatterUpdate3).bytes(&nd_shape, &[]),
    ));
    let mut s = nd(ScatterFlavor::Onnx);
    s.reduction = Reduction::Mean;
    seeds.push(named("reduction-unsupported", s.bytes(&nd_shape, &[])));
    let mut s = nd(ScatterFlavor::Onnx);
    s.reduction = Reduction::Sum;
    s.flags = flag::NO_INIT | flag::ANYWHERE;
    seeds.push(named("use-init-val-unsupported", s.bytes(&nd_shape, &[])));
    let mut s = SeedBuilder::new(
        ScatterOp::Elements { axis: 1 },
        ScatterFlavor::OpenvinoScatterElementsUpdate12,
        Reduction::Mean,
    );
    s.dtype = DType::Bool;
    seeds.push(named("mean-on-bool", s.bytes(&elements_shape, &[])));
    // Raw shapes: independent ranks and dims (here a valid ScatterND and a hostile one).
    let mut raw = nd(ScatterFlavor::Onnx).bytes(&[2, 1, 1, 2, 1, 1, 2, 1, 1], &[0, 0]);
    raw[0] = 0xDE; // 0xDE % 3 = 0: ScatterND, raw
    seeds.push(named("raw-nd", raw));
    let mut raw = nd(ScatterFlavor::Onnx).bytes(&[2, 0xFF, 0, 2, 0xFD, 1, 2, 0xFE, 0], &[]);
    raw[0] = 0xDE;
    seeds.push(named("raw-nd-hostile", raw));
    // Wrong buffers and types.
    for (name, mismatch) in [
        ("data", 0x00),
        ("indices-shorter", 0x81),
        ("updates", 0x02),
        ("output-shorter", 0x83),
        ("element-type", 4),
        ("index-type", 5),
        ("updates-shape", 6),
    ] {
        let mut s = elements(ScatterFlavor::OpenvinoScatterElementsUpdate12);
        s.op = ScatterOp::Elements { axis: 1 };
        s.reduction = Reduction::Max;
        s.dtype = DType::Bf16;
        s.index_type = IndexType::U8;
        s.tail[7] = mismatch;
        seeds.push(named(
            &format!("mismatch-{name}"),
            s.bytes(&elements_shape, &[0, 3, 0, 1]),
        ));
    }
    // Long slices: 130 f32 (520 bytes: memcpy under none, 16-byte lanes with a tail under
    // sum), f64 under prod, u8 under min (130 bytes inline), on views.
    let long = [1, dim_byte(3), dim_byte(130), 0, 1, dim_byte(4), 0];
    for (reduction, dtype) in [
        (Reduction::None, DType::F32),
        (Reduction::Sum, DType::F32),
        (Reduction::Prod, DType::F64),
        (Reduction::Min, DType::U8),
        (Reduction::Sub, DType::I16),
    ] {
        let mut s = nd(ScatterFlavor::OpenvinoScatterNdUpdate15);
        s.reduction = reduction;
        s.dtype = dtype;
        s.tail[4..7].copy_from_slice(&[3, 4 | 1 << 3, 5 | 1 << 3]);
        s.tail[8] = 0xFF; // the cache, clif, 3 threads
        seeds.push(named(
            &format!("long-slice-{reduction}-{dtype}"),
            s.bytes(&long, &[0, 2, 0, 0, 0, 2, 0, 1]),
        ));
    }
    seeds
}
