//! Quantized cases: a fuzz input whose first byte is [`SELECTOR`] or more (but for the
//! scatters' `0xD0..=0xEF`) becomes a [`QuantizedCase`] (a `GatherBlockQuantized` or GGUF
//! signature, its stored data, scales, zero points and indices, and how to call it), checked
//! like the gathers: the JIT ([`QuantizedKernel`]) against `interpret_quantized`, byte for
//! byte, errors included.
//!
//! What one case checks:
//! 1. An invalid signature: `QuantizedKernel::compile` returns exactly `validate`'s error.
//! 2. A valid one compiles; if its buffers are small enough to run ([`runnable`]),
//!    `run_bytes` equals the interpreter (output bytes, NaN payloads included, or the same
//!    error).
//! 3. The raw `call` on copies at odd addresses gives the same result and writes nothing
//!    around the output; so do two `call_range`s split at a point the case picks, and
//!    `run_bytes_parallel` on 2 and 3 threads; in fuzzing builds, `call` on buffers that each end right before an
//!    inaccessible page (an absent zero-points or GGUF scales buffer is an empty one there).
//! 4. The typed `run` on ndarray views of each of the four tensors (C or Fortran order,
//!    reversed, strided or broadcast along an axis) equals the interpreter on the bytes the
//!    views stand for.
//! 5. Sometimes one buffer of the wrong length (or a zero-points buffer too many or too few):
//!    `run_bytes` returns the interpreter's `BufferMismatch`; or the typed `run` with the wrong
//!    element or index type, which must be refused with the type error.

use gather_jit::interp::interpret_quantized;
use gather_jit::ir::MAX_RANK;
use gather_jit::quant::{Quantization, QuantizedLayout};
use gather_jit::{
    BlockQuantization, DType, Error, GgufFormat, IndexElement, IndexPolicy, IndexType,
    NegativeIndices, OutOfRange, QuantizedKernel, QuantizedSignature,
};
use ndarray::{ArrayD, ArrayViewD, Axis, IxDyn, ShapeBuilder, Slice};

use super::{DEEP_DIMS, DIMS, FromBytes, Reader, SENTINEL, index_value, placed};

/// First bytes from this one on select a quantized case (a quarter of all inputs), but for
/// `0xD0..=0xEF`, the scatters' (`super::scatter`): `0xC0..=0xCF` (structured shapes) and
/// `0xF0..=0xFF` (raw shapes), an eighth of all inputs.
pub const SELECTOR: u8 = 0xC0;

/// Valid cases run only if data, scales and zero points together are at most this many bytes
/// (the fuzzer fills them for each run)...
pub const MAX_INPUT_BYTES: usize = 1 << 22;

/// ... the output is at most this many bytes (the interpreter goes one value at a time) ...
pub const MAX_OUTPUT_BYTES: usize = 1 << 18;

/// ... and there are at most this many indices.
pub const MAX_INDICES: usize = 1 << 14;

/// Sizes of the quantize axis in structured mode: around the block sizes, and 0.
const QUANTIZE_DIMS: [usize; 16] = [
    0, 1, 2, 8, 15, 16, 17, 31, 32, 33, 48, 64, 65, 128, 130, 256,
];

/// Block sizes: the valid powers of two (huge ones too) and invalid sizes.
const BLOCK_SIZES: [usize; 16] = [
    16,
    16,
    16,
    32,
    32,
    64,
    128,
    256,
    1024,
    1 << 40,
    1 << 63,
    0,
    8,
    24,
    48,
    usize::MAX,
];

/// GGUF row lengths in structured mode: whole blocks mostly, some not.
const GGUF_ROW_LENS: [usize; 16] = [
    0, 32, 32, 64, 96, 128, 256, 320, 512, 4096, 1, 16, 31, 33, 48, 32,
];

/// Hostile dims of raw mode (validation must reject or bound them; see the gathers').
const HUGE_DIMS: [usize; 6] = [
    usize::MAX,
    1 << 32,
    1 << 62,
    (1 << 62) - 1,
    1 << 61,
    (1 << 63) - 1,
];

/// How the typed API sees one tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QView {
    /// A C-contiguous array.
    Plain,
    /// A Fortran-order array.
    Fortran,
    /// Axis `k` reversed (a negative stride).
    Reversed(usize),
    /// Every other element of an array twice as long along axis `k`.
    Strided(usize),
    /// Broadcast along axis `k` (stride 0): stands for its first entry repeated.
    Broadcast(usize),
}

impl QView {
    pub(super) fn decode(byte: u8) -> QView {
        let axis = usize::from(byte >> 3);
        match byte % 8 {
            0..=2 => QView::Plain,
            3 => QView::Fortran,
            4 => QView::Reversed(axis),
            5 | 6 => QView::Strided(axis),
            _ => QView::Broadcast(axis),
        }
    }
}

/// What a case does besides the plain runs: one buffer of the wrong length, or a typed call
/// with the wrong type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mismatch {
    /// Nothing wrong.
    None,
    /// Data one byte longer (or shorter, if `shorter`).
    Data { shorter: bool },
    /// Indices one byte longer or shorter.
    Indices { shorter: bool },
    /// Scales one byte longer or shorter.
    Scales { shorter: bool },
    /// The output one byte longer or shorter.
    Output { shorter: bool },
    /// A zero-points buffer where none is expected, or none where one is.
    ZeroPoints,
    /// The typed `run` with `f64` elements.
    ElementType,
    /// The typed `run` with another index type.
    IndexType,
}

impl Mismatch {
    fn decode(byte: u8) -> Mismatch {
        let shorter = byte & 0x80 != 0;
        match byte % 16 {
            0 => Mismatch::Data { shorter },
            1 => Mismatch::Indices { shorter },
            2 => Mismatch::Scales { shorter },
            3 => Mismatch::Output { shorter },
            4 => Mismatch::ZeroPoints,
            5 => Mismatch::ElementType,
            6 => Mismatch::IndexType,
            _ => Mismatch::None,
        }
    }
}

/// One decoded quantized case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuantizedCase {
    /// The signature (valid or not).
    pub signature: QuantizedSignature,
    /// The stored data (empty unless the case runs).
    pub data: Vec<u8>,
    /// Index bytes (native-endian `signature.index_type`).
    pub indices: Vec<u8>,
    /// Scale bytes (native-endian `signature.dtype`; none for GGUF).
    pub scales: Vec<u8>,
    /// The stored zero points, if the signature has them.
    pub zero_points: Option<Vec<u8>>,
    /// Views of data, indices, scales and zero points for the typed `run`.
    pub views: [QView; 4],
    /// Byte offsets (0..=7) of data, indices, scales, zero points and output from an 8-aligned
    /// address, for the raw `call`.
    pub misalign: [usize; 5],
    /// The wrong buffer or type of this case, if any.
    pub mismatch: Mismatch,
}

/// Splitmix64: the case's data, scales and zero points from a seed the input chooses.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(super) fn fill(&mut self, bytes: &mut [u8]) {
        for chunk in bytes.chunks_mut(8) {
            let word = self.next().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

/// `f32` bit patterns worth a scale: zeros, ones, infinities, quiet and signalling NaNs with
/// payloads and signs, subnormals, extremes, the edges of `f16`'s range, and products that
/// land on rounding ties of `f16` and `bf16`.
const SPECIAL_F32: [u32; 24] = [
    0x0000_0000,
    0x8000_0000,
    0x3F80_0000,
    0xBF80_0000,
    0x7F80_0000,
    0xFF80_0000,
    0x7FC0_0000,
    0x7F80_0001,
    0x7FA1_2345,
    0xFFC0_0001,
    0xFF80_4321,
    0x0000_0001,
    0x007F_FFFF,
    0x0080_0000,
    0x7F7F_FFFF,
    0x477F_E000, // 65504, f16's largest
    0x477F_F000, // 65520: rounds to f16 infinity
    0x3F80_8000, // a bf16 tie
    0x3F81_8000, // a bf16 tie, odd
    0x3F80_1000, // an f16 tie
    0x3380_0000, // 2^-24, f16's smallest subnormal
    0x3300_0000, // 2^-25: a tie to f16 zero
    0x3EAA_AAAB, // 1/3
    0x4B80_0000,
];

/// `f16` bit patterns worth a scale (signalling NaNs among them).
const SPECIAL_F16: [u16; 16] = [
    0x0000, 0x8000, 0x3C00, 0xBC00, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0x7D55, 0xFE01, 0x0001, 0x03FF,
    0x0400, 0x7BFF, 0x3555, 0x1000,
];

/// `bf16` bit patterns worth a scale.
const SPECIAL_BF16: [u16; 16] = [
    0x0000, 0x8000, 0x3F80, 0xBF80, 0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0x7FA1, 0xFFC1, 0x0001, 0x007F,
    0x0080, 0x7F7F, 0x3EAB, 0x4B80,
];

/// One float of `dtype` (`F32`, `F16` or `Bf16`) as bits: `mode` 0 an ordinary value near 1,
/// 1 a special pattern, else any bits.
fn float_bits(dtype: DType, mode: u64, rng: &mut Rng) -> u32 {
    let r = rng.next();
    let sign = (r >> 63) as u32;
    let spread = (r >> 32) as u32 % 25; // exponents within 2^-12..=2^12
    match (dtype, mode) {
        (DType::F16, 0) => (sign << 15) | ((9 + (spread >> 1)) << 10) | (r as u32 & 0x3FF),
        (DType::Bf16, 0) => (sign << 15) | ((115 + spread) << 7) | (r as u32 & 0x7F),
        (_, 0) => (sign << 31) | ((115 + spread) << 23) | (r as u32 & 0x7F_FFFF),
        (DType::F16, 1) => u32::from(SPECIAL_F16[r as usize % SPECIAL_F16.len()]),
        (DType::Bf16, 1) => u32::from(SPECIAL_BF16[r as usize % SPECIAL_BF16.len()]),
        (_, 1) => SPECIAL_F32[r as usize % SPECIAL_F32.len()],
        (DType::F16 | DType::Bf16, _) => r as u32 & 0xFFFF,
        _ => r as u32,
    }
}

/// `count` floats of `dtype`, native-endian: `style` 0 all ordinary, 1 one in eight special,
/// 2 all special, 3 any bits.
pub(super) fn float_bytes(dtype: DType, count: usize, style: u8, rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::with_capacity(count * dtype.size());
    for _ in 0..count {
        let mode = match style % 4 {
            0 => 0,
            1 if rng.next().is_multiple_of(8) => 1,
            1 => 0,
            2 => 1,
            _ => 2,
        };
        let bits = float_bits(dtype, mode, rng);
        if dtype.size() == 2 {
            out.extend((bits as u16).to_ne_bytes());
        } else {
            out.extend(bits.to_ne_bytes());
        }
    }
    out
}

/// Whether the first byte of `bytes` is in the quantized cases' range (which
/// [`crate::is_quantized`] shares with the scatter cases).
pub fn in_range(bytes: &[u8]) -> bool {
    bytes.first().is_some_and(|&b| b >= SELECTOR)
}

/// A dim of raw mode: usually small, sometimes hostile.
fn raw_dim(r: &mut Reader<'_>) -> usize {
    match r.byte() {
        b @ 0xFA..=0xFF => HUGE_DIMS[usize::from(b - 0xFA)],
        b @ 0xF0..=0xF9 => QUANTIZE_DIMS[usize::from(b % 16)],
        b => DIMS[usize::from(b % 16)],
    }
}

/// Decodes a quantized case (`bytes[0] >= SELECTOR`); never panics. A signature that is
/// invalid, or valid but too big to run ([`runnable`]), gets no buffers.
///
/// Layout: selector (`0x30` bits both set: raw shapes), form (block quantization, or GGUF
/// `Q4_0`/`Q8_0` for one in four), policy (0: the form's default, else one of six), dtype
/// (mostly `F32`/`F16`/`Bf16`, one in eight any of the 13), index type, bits (4 or 8; from
/// `0xF0` on any of 0..=9), block size, flags (zero points, negative gather and quantize
/// axes), four view bytes, the mismatch byte, two misalignment bytes, two seed bytes (data,
/// scales, zero points), the scales' style; then the shapes and attributes; then two bytes per
/// index, as the gathers'.
pub fn decode(bytes: &[u8]) -> QuantizedCase {
    let mut r = Reader { bytes, pos: 0 };
    let selector = r.byte();
    let raw = selector & 0x30 == 0x30;
    let form = r.byte();
    let policy_byte = r.byte();
    let dtype_byte = r.byte();
    let dtype = match dtype_byte % 8 {
        0..=2 => DType::F32,
        3 | 4 => DType::F16,
        5 | 6 => DType::Bf16,
        _ => DType::ALL[usize::from(dtype_byte >> 3) % DType::ALL.len()],
    };
    let index_type = IndexType::ALL[usize::from(r.byte() % 8)];
    let bits_byte = r.byte();
    let bits = if bits_byte >= 0xF0 {
        bits_byte % 10
    } else {
        [4, 8][usize::from(bits_byte & 1)]
    };
    let block_size = BLOCK_SIZES[usize::from(r.byte() % 16)];
    let flags = r.byte();
    let views = [r.byte(), r.byte(), r.byte(), r.byte()].map(QView::decode);
    let mismatch = Mismatch::decode(r.byte());
    let m = u16::from_le_bytes([r.byte(), r.byte()]);
    let misalign = [0, 3, 6, 9, 12].map(|shift| usize::from((m >> shift) & 7));
    let seed = u64::from_le_bytes([r.byte(), r.byte(), 0, 0, 0, 0, 0, 0]);
    let style = r.byte();

    let gguf = form % 4 == 3;
    let mut signature = if gguf {
        let format = [GgufFormat::Q4_0, GgufFormat::Q8_0][usize::from((form >> 2) & 1)];
        let (data_shape, indices_shape): (Vec<usize>, Vec<usize>) = if raw {
            (r.raw_shape(raw_dim), r.raw_shape(raw_dim))
        } else {
            let rows = r.small_dim();
            let row_len = GGUF_ROW_LENS[usize::from(r.byte() % 16)];
            let extra = usize::from(r.byte() % 4);
            (
                vec![rows, row_len],
                (0..extra).map(|_| r.small_dim()).collect(),
            )
        };
        // Through the struct: raw mode's data may be of any rank.
        QuantizedSignature {
            data_shape,
            ..QuantizedSignature::gguf(format, 0, 0, &indices_shape)
        }
    } else {
        let (data_shape, indices_shape, gather_axis, quantize_axis) = if raw {
            let data = r.raw_shape(raw_dim);
            let indices = r.raw_shape(raw_dim);
            (data, indices, r.attribute(), r.attribute())
        } else {
            structured_block(bits, flags, &mut r)
        };
        QuantizedSignature::block_quantized(
            &data_shape,
            &indices_shape,
            BlockQuantization {
                gather_axis,
                quantize_axis,
                block_size,
                bits,
                zero_points: flags & 1 == 1,
            },
        )
    };
    signature = signature.with_dtype(dtype).with_index_type(index_type);
    // 0 keeps the form's default policy; 1..=6 name one of the six explicitly.
    if let Some(p) = (policy_byte % 7).checked_sub(1) {
        signature = signature.with_policy(IndexPolicy {
            negative: [NegativeIndices::Wrap, NegativeIndices::Invalid][usize::from(p / 3)],
            out_of_range: [OutOfRange::Error, OutOfRange::Zero, OutOfRange::Clamp]
                [usize::from(p % 3)],
        });
    }

    let mut case = QuantizedCase {
        signature,
        data: Vec::new(),
        indices: Vec::new(),
        scales: Vec::new(),
        zero_points: None,
        views,
        misalign,
        mismatch,
    };
    if let Ok(layout) = case.signature.validate()
        && runnable(&layout)
    {
        case.fill(&layout, seed, style, &mut r);
    }
    case
}

/// Block-quantization shapes built to be mostly valid: data rank 1..=4 (or 61..=68 of mostly
/// unit dims), the quantize axis sized around the block sizes, the last dim even for 4 bits,
/// 0..=3 index dims; returns data and indices shapes and the gather and quantize axes.
fn structured_block(bits: u8, flags: u8, r: &mut Reader<'_>) -> (Vec<usize>, Vec<usize>, i64, i64) {
    let rank_byte = r.byte();
    let deep = rank_byte >= 0xF8;
    let rank = if deep {
        MAX_RANK - 3 + usize::from(rank_byte - 0xF8)
    } else {
        1 + usize::from(rank_byte % 4)
    };
    let g = usize::from(r.byte()) % rank;
    let q = usize::from(r.byte()) % rank;
    let mut data: Vec<usize> = (0..rank)
        .map(|k| {
            let b = r.byte();
            match (k == q, deep) {
                (true, _) => QUANTIZE_DIMS[usize::from(b % 16)],
                (false, true) => DEEP_DIMS[usize::from(b % 8)],
                (false, false) => DIMS[usize::from(b % 16)],
            }
        })
        .collect();
    if bits == 4 && !data[rank - 1].is_multiple_of(2) {
        data[rank - 1] += 1;
    }
    let extra = usize::from(r.byte() % 4);
    let indices = (0..extra)
        .map(|_| match deep {
            true => [1, 2][usize::from(r.byte() & 1)],
            false => r.small_dim(),
        })
        .collect();
    let axis = |a: usize, negative: bool| {
        if negative {
            a as i64 - rank as i64
        } else {
            a as i64
        }
    };
    (
        data,
        indices,
        axis(g, flags & 2 != 0),
        axis(q, flags & 4 != 0),
    )
}

/// Whether a valid signature's buffers are small enough to fill and run (see
/// [`MAX_INPUT_BYTES`], [`MAX_OUTPUT_BYTES`], [`MAX_INDICES`]).
pub fn runnable(layout: &QuantizedLayout) -> bool {
    let inputs = layout
        .data_bytes()
        .saturating_add(layout.scales_bytes())
        .saturating_add(layout.zero_points_bytes());
    inputs <= MAX_INPUT_BYTES
        && layout.output_bytes() <= MAX_OUTPUT_BYTES
        && elements(&layout.signature().indices_shape) <= MAX_INDICES
}

/// Whether ndarray can make an array of `shape` (its nonzero dims multiply to at most
/// `isize::MAX`).
pub(super) fn ndarray_holds(shape: &[usize]) -> bool {
    shape
        .iter()
        .filter(|&&d| d != 0)
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .is_some_and(|n| n <= isize::MAX as usize)
}

/// The number of elements of `shape` (of a validated layout: it fits).
fn elements(shape: &[usize]) -> usize {
    shape.iter().product()
}

impl QuantizedCase {
    /// Fills data, scales and zero points from the seed, and indices from the rest of the
    /// input (relative to the gather axis's size, as the gathers').
    fn fill(&mut self, layout: &QuantizedLayout, seed: u64, style: u8, r: &mut Reader<'_>) {
        let sig = &self.signature;
        let mut rng = Rng(seed ^ (u64::from(style) << 16));
        self.data = vec![0; layout.data_bytes()];
        rng.fill(&mut self.data);
        if let Quantization::Gguf(format) = sig.quantization {
            // Each block's scale `d`, an `f16`, from the same styles as the scales.
            let scales = float_bytes(
                DType::F16,
                self.data.len() / format.block_bytes(),
                style,
                &mut rng,
            );
            for (block, d) in self
                .data
                .chunks_exact_mut(format.block_bytes())
                .zip(scales.chunks_exact(2))
            {
                let d = u16::from_ne_bytes([d[0], d[1]]);
                block[..2].copy_from_slice(&d.to_le_bytes());
            }
        } else {
            self.scales = float_bytes(sig.dtype, elements(layout.scales_shape()), style, &mut rng);
        }
        self.zero_points = layout.zero_points_bytes_shape().map(|_| {
            let mut zp = vec![0; layout.zero_points_bytes()];
            rng.fill(&mut zp);
            zp
        });
        let rank = sig.data_shape.len() as i64;
        let axis = match sig.quantization {
            Quantization::Block(q) if q.gather_axis < 0 => q.gather_axis + rank,
            Quantization::Block(q) => q.gather_axis,
            Quantization::Gguf(_) => 0,
        };
        let size = sig.data_shape[axis as usize];
        let choices: Vec<[u8; 2]> = r
            .remaining()
            .chunks_exact(2)
            .map(|c| [c[0], c[1]])
            .collect();
        let count = elements(&sig.indices_shape);
        let mut indices = Vec::with_capacity(count * sig.index_type.size());
        for flat in 0..count {
            let choice = if choices.is_empty() {
                [0, 0]
            } else {
                choices[flat % choices.len()]
            };
            sig.index_type
                .encode_wrapping(index_value(choice, size, sig.index_type), &mut indices);
        }
        self.indices = indices;
    }

    /// What the case exercises, for the corpus summary: `invalid: <category>`, `compiled
    /// only`, or `ran: <op> <policy>` / `ran: <op> <error category>`.
    pub fn kind(&self) -> String {
        let sig = &self.signature;
        match sig.validate() {
            Err(e) => format!("quantized invalid: {}", e.category()),
            Ok(l) if !runnable(&l) => "quantized valid, compiled only (large)".to_string(),
            Ok(l) => match self.interpret(&l, &self.inputs()) {
                Ok(_) => format!(
                    "quantized ran: {} {:?}",
                    sig.op_name(),
                    sig.policy.out_of_range
                ),
                Err(e) => format!("quantized ran: {} {}", sig.op_name(), e.category()),
            },
        }
    }

    /// The case's buffers.
    fn inputs(&self) -> Inputs {
        Inputs {
            data: self.data.clone(),
            indices: self.indices.clone(),
            scales: self.scales.clone(),
            zero_points: self.zero_points.clone(),
        }
    }

    fn interpret(&self, layout: &QuantizedLayout, inputs: &Inputs) -> gather_jit::Result<Vec<u8>> {
        interpret_quantized(
            layout,
            &inputs.data,
            &inputs.indices,
            &inputs.scales,
            inputs.zero_points.as_deref(),
        )
    }

    /// Runs every path and asserts they agree with the interpreter.
    pub fn check(&self) {
        let sig = &self.signature;
        let layout = match sig.validate() {
            Ok(layout) => layout,
            Err(expected) => {
                let actual = QuantizedKernel::compile(sig).err();
                assert_eq!(
                    actual.as_ref(),
                    Some(&expected),
                    "compile vs validate\n{}",
                    self.replay()
                );
                return;
            }
        };
        let kernel = QuantizedKernel::compile(sig)
            .unwrap_or_else(|e| panic!("a valid signature must compile: {e}\n{}", self.replay()));
        assert_eq!(kernel.layout(), &layout, "{}", self.replay());
        assert_eq!(kernel.output_shape(), layout.output_shape());
        if !runnable(&layout) {
            return;
        }
        let inputs = self.inputs();
        let expected = self.interpret(&layout, &inputs);
        let output_len = layout.output_bytes();

        let mut output = vec![SENTINEL; output_len];
        let actual = kernel.run_bytes(
            &self.data,
            &self.indices,
            &self.scales,
            self.zero_points.as_deref(),
            &mut output,
        );
        self.compare("run_bytes", &expected, actual, &output);

        let (actual, output) = self.call_misaligned(&kernel, output_len);
        self.compare("call (misaligned)", &expected, actual, &output);

        // Split: two `call_range`s at a point the case picks, then 2 and 3 threads.
        let split = self.misalign[0] as u64 % (kernel.outer_extent() + 1);
        let mut output = vec![SENTINEL; output_len];
        let actual = self.call_split(&kernel, split, &mut output);
        self.compare("call_range (split)", &expected, actual, &output);
        for threads in [2, 3] {
            let mut output = vec![SENTINEL; output_len];
            let actual = kernel.run_bytes_parallel(
                &self.data,
                &self.indices,
                &self.scales,
                self.zero_points.as_deref(),
                &mut output,
                threads,
            );
            self.compare("run_bytes_parallel", &expected, actual, &output);
        }

        #[cfg(fuzzing)]
        {
            let (actual, output) = self.call_guarded(&kernel, output_len);
            self.compare("call (guard pages)", &expected, actual, &output);
        }

        self.check_typed(&kernel, &layout, &expected);
        self.check_mismatch(&kernel, &layout, output_len);
    }

    /// Asserts that `actual` (with `output`) from `path` agrees with the interpreter's
    /// `expected`.
    #[track_caller]
    fn compare(
        &self,
        path: &str,
        expected: &gather_jit::Result<Vec<u8>>,
        actual: gather_jit::Result<()>,
        output: &[u8],
    ) {
        match (expected, actual) {
            (Ok(e), Ok(())) => {
                if e[..] != output[..] {
                    let at = e.iter().zip(output).position(|(x, y)| x != y).unwrap_or(0);
                    let size = self.signature.dtype.size();
                    let from = at / size * size;
                    let upto = (from + size).min(e.len()).min(output.len());
                    panic!(
                        "{path}: output differs from the interpreter at byte {at}: interpreter \
                         {:02x?}, JIT {:02x?} (lengths {} and {})\n{}",
                        &e[from..upto],
                        &output[from..upto],
                        e.len(),
                        output.len(),
                        self.replay()
                    );
                }
            }
            (Err(e), Err(a)) => assert_eq!(e, &a, "{path}: errors differ\n{}", self.replay()),
            (e, a) => panic!(
                "{path}: interpreter {:?} but JIT {:?}\n{}",
                e.as_ref().map(|v| v.len()),
                a,
                self.replay()
            ),
        }
    }

    /// `call_range` on `0..split`, then (if that succeeded) on `split..outer_extent()`.
    fn call_split(
        &self,
        kernel: &QuantizedKernel,
        split: u64,
        output: &mut [u8],
    ) -> gather_jit::Result<()> {
        let zp = self
            .zero_points
            .as_ref()
            .map_or(std::ptr::null(), |zp| zp.as_ptr());
        for range in [0..split, split..kernel.outer_extent()] {
            // SAFETY: `run_bytes` accepted these buffers (each has the layout's length, a null
            // zero-points pointer goes with a signature without them), `output` has the
            // output's length, and both ranges lie within `0..outer_extent()`.
            unsafe {
                kernel.call_range(
                    self.data.as_ptr(),
                    self.indices.as_ptr(),
                    self.scales.as_ptr(),
                    zp,
                    output.as_mut_ptr(),
                    range,
                )
            }?;
        }
        Ok(())
    }

    /// `call` on copies at odd addresses; the bytes around the output must stay untouched.
    fn call_misaligned(
        &self,
        kernel: &QuantizedKernel,
        output_len: usize,
    ) -> (gather_jit::Result<()>, Vec<u8>) {
        let [d, i, s, z, o] = self.misalign;
        let (data, data_at) = placed(&self.data, d);
        let (indices, indices_at) = placed(&self.indices, i);
        let (scales, scales_at) = placed(&self.scales, s);
        let zero_points = self.zero_points.as_ref().map(|zp| placed(zp, z));
        let (mut output, output_at) = placed(&vec![SENTINEL; output_len], o);
        let zp = zero_points
            .as_ref()
            .map_or(std::ptr::null(), |(zp, at)| zp[*at..].as_ptr());
        // SAFETY: each buffer holds the layout's byte length from its offset (copies of the
        // case's buffers, which `run_bytes` accepted; `output` has `output_len` bytes); a null
        // zero-points pointer goes with a signature without them; distinct allocations.
        let result = unsafe {
            kernel.call(
                data[data_at..].as_ptr(),
                indices[indices_at..].as_ptr(),
                scales[scales_at..].as_ptr(),
                zp,
                output[output_at..].as_mut_ptr(),
            )
        };
        let margins = output[..output_at]
            .iter()
            .chain(&output[output_at + output_len..]);
        if margins.into_iter().any(|&b| b != 0) {
            panic!("call wrote outside the output\n{}", self.replay());
        }
        output.drain(..output_at);
        output.truncate(output_len);
        (result, output)
    }

    /// `call` on copies of every buffer that each end right before a `PROT_NONE` page; an
    /// absent zero-points buffer (and GGUF's scales) is an empty one, so any read of it
    /// crashes.
    #[cfg(fuzzing)]
    fn call_guarded(
        &self,
        kernel: &QuantizedKernel,
        output_len: usize,
    ) -> (gather_jit::Result<()>, Vec<u8>) {
        use super::guard::Guarded;
        let data = Guarded::new(&self.data);
        let indices = Guarded::new(&self.indices);
        let scales = Guarded::new(&self.scales);
        let zero_points = Guarded::new(self.zero_points.as_deref().unwrap_or(&[]));
        let mut output = Guarded::new(&vec![SENTINEL; output_len]);
        // SAFETY: each mapping holds exactly the layout's byte length before its guard page
        // (copies of buffers `run_bytes` accepted; an absent buffer is never read, and its
        // pointer is the guard page, not null); distinct mappings.
        let result = unsafe {
            kernel.call(
                data.as_ptr(),
                indices.as_ptr(),
                scales.as_ptr(),
                zero_points.as_ptr(),
                output.as_mut_ptr(),
            )
        };
        (result, output.to_vec())
    }

    /// The typed `run` on the case's views, against the interpreter on the bytes they stand
    /// for.
    fn check_typed(
        &self,
        kernel: &QuantizedKernel,
        layout: &QuantizedLayout,
        expected: &gather_jit::Result<Vec<u8>>,
    ) {
        // ndarray holds no array whose nonzero dims multiply past `isize::MAX`, even an empty
        // one (`[0, 2^62, 4]`): no view of such a tensor can be passed.
        let shapes = [
            layout.data_bytes_shape(),
            &self.signature.indices_shape,
            layout.scales_shape(),
            layout.zero_points_bytes_shape().unwrap_or(&[]),
        ];
        if !shapes.into_iter().all(ndarray_holds) {
            return;
        }
        let (actual, inputs) = typed_run(kernel, self, self.mismatch);
        let path = format!("run ({:?})", self.views);
        let view_expected;
        let expected = if inputs == self.inputs() {
            expected
        } else {
            view_expected = self.interpret(layout, &inputs);
            &view_expected
        };
        match actual {
            Ok(output) => self.compare(&path, expected, Ok(()), &output),
            Err(e) => self.compare(&path, expected, Err(e), &[]),
        }
    }

    /// One buffer of the wrong length through `run_bytes`: the interpreter, given the same
    /// buffers, names the same mismatch.
    fn check_mismatch(
        &self,
        kernel: &QuantizedKernel,
        layout: &QuantizedLayout,
        output_len: usize,
    ) {
        let mut inputs = self.inputs();
        let mut output_len = output_len;
        let resize = |buffer: &mut Vec<u8>, shorter: bool| {
            if shorter && !buffer.is_empty() {
                buffer.pop();
            } else {
                buffer.push(SENTINEL);
            }
        };
        match self.mismatch {
            Mismatch::Data { shorter } => resize(&mut inputs.data, shorter),
            Mismatch::Indices { shorter } => resize(&mut inputs.indices, shorter),
            Mismatch::Scales { shorter } => resize(&mut inputs.scales, shorter),
            Mismatch::ZeroPoints => {
                inputs.zero_points = match inputs.zero_points {
                    Some(_) => None,
                    None => Some(vec![0; 1]),
                }
            }
            Mismatch::Output { shorter } => {
                output_len = match (shorter, output_len) {
                    (true, n) if n > 0 => n - 1,
                    (_, n) => n + 1,
                };
            }
            // Checked in the typed run.
            Mismatch::None | Mismatch::ElementType | Mismatch::IndexType => return,
        }
        let mut output = vec![SENTINEL; output_len];
        let actual = kernel.run_bytes(
            &inputs.data,
            &inputs.indices,
            &inputs.scales,
            inputs.zero_points.as_deref(),
            &mut output,
        );
        if let Mismatch::Output { .. } = self.mismatch {
            let want = layout.output_bytes();
            let (want, got) = (format!("{want} bytes"), format!("{output_len} bytes"));
            assert!(
                matches!(
                    &actual,
                    Err(Error::BufferMismatch { what: "output", expected, actual, .. })
                        if *expected == want && *actual == got
                ),
                "an output of {got} for {want}: {actual:?}\n{}",
                self.replay()
            );
            return;
        }
        let expected = self.interpret(layout, &inputs);
        assert!(
            matches!(expected, Err(Error::BufferMismatch { .. })),
            "{:?}: the interpreter accepted a wrong buffer: {expected:?}\n{}",
            self.mismatch,
            self.replay()
        );
        self.compare(
            &format!("run_bytes ({:?})", self.mismatch),
            &expected,
            actual,
            &output,
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
            "QuantizedCase {{\n    signature: {:?},\n    data: {},\n    indices: {},\n    \
             scales: {},\n    zero_points: {},\n    views: {:?},\n    misalign: {:?},\n    \
             mismatch: Mismatch::{:?},\n}}\n(signature {})",
            self.signature,
            bytes(&self.data),
            bytes(&self.indices),
            bytes(&self.scales),
            self.zero_points
                .as_deref()
                .map_or("None".to_string(), |zp| format!("Some({})", bytes(zp))),
            self.views,
            self.misalign,
            self.mismatch,
            self.signature,
        )
    }
}

/// A case's four buffers (or the bytes a set of views stands for).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Inputs {
    data: Vec<u8>,
    indices: Vec<u8>,
    scales: Vec<u8>,
    zero_points: Option<Vec<u8>>,
}

/// An array laid out for a [`QView`], holding the values of a row-major tensor.
pub(super) struct Viewed<T> {
    storage: ArrayD<T>,
    shape: Vec<usize>,
    kind: QView,
}

impl<T: Copy> Viewed<T> {
    /// `values` (row-major, of `shape`) laid out as `kind` says; `fill` pads a strided
    /// layout's gaps. A kind whose axis is out of range or empty (or a strided view of an
    /// empty array) is plain.
    pub(super) fn new(shape: &[usize], values: &[T], kind: QView, fill: T) -> Viewed<T> {
        let c = ArrayViewD::from_shape(IxDyn(shape), values).expect("length matches the shape");
        let has = |axis: usize| shape[axis] > 0;
        // The axis counts modulo the rank (none for rank 0).
        let kind = match kind {
            QView::Reversed(_) | QView::Strided(_) | QView::Broadcast(_) if shape.is_empty() => {
                QView::Plain
            }
            QView::Reversed(a) => QView::Reversed(a % shape.len()),
            QView::Strided(a) => QView::Strided(a % shape.len()),
            QView::Broadcast(a) => QView::Broadcast(a % shape.len()),
            k => k,
        };
        let kind = match kind {
            QView::Reversed(a) | QView::Broadcast(a) if !has(a) => QView::Plain,
            QView::Strided(a) if !has(a) || values.is_empty() => QView::Plain,
            k => k,
        };
        let storage = match kind {
            QView::Plain => c.to_owned(),
            QView::Fortran => {
                let mut f = ArrayD::from_elem(IxDyn(shape).f(), fill);
                f.assign(&c);
                f
            }
            QView::Reversed(a) => {
                // Stored reversed: the view's negative stride reads the values in order.
                let mut reversed = c.to_owned();
                reversed.invert_axis(Axis(a));
                reversed.as_standard_layout().into_owned()
            }
            QView::Strided(a) => {
                let mut wide_shape = shape.to_vec();
                wide_shape[a] *= 2;
                let mut wide = ArrayD::from_elem(IxDyn(&wide_shape), fill);
                wide.slice_axis_mut(Axis(a), Slice::new(0, None, 2))
                    .assign(&c);
                wide
            }
            QView::Broadcast(a) => c.slice_axis(Axis(a), Slice::from(0..1)).to_owned(),
        };
        Viewed {
            storage,
            shape: shape.to_vec(),
            kind,
        }
    }

    pub(super) fn view(&self) -> ArrayViewD<'_, T> {
        match self.kind {
            QView::Plain | QView::Fortran => self.storage.view(),
            QView::Reversed(a) => {
                let mut v = self.storage.view();
                v.invert_axis(Axis(a));
                v
            }
            QView::Strided(a) => self.storage.slice_axis(Axis(a), Slice::new(0, None, 2)),
            QView::Broadcast(_) => self
                .storage
                .broadcast(IxDyn(&self.shape))
                .expect("a unit axis broadcasts"),
        }
    }

    /// The view, writable (the scatters' in-place `run_in_place`); `None` for a broadcast,
    /// whose elements alias one another.
    pub(super) fn view_mut(&mut self) -> Option<ndarray::ArrayViewMutD<'_, T>> {
        match self.kind {
            QView::Plain | QView::Fortran => Some(self.storage.view_mut()),
            QView::Reversed(a) => {
                let mut v = self.storage.view_mut();
                v.invert_axis(Axis(a));
                Some(v)
            }
            QView::Strided(a) => Some(self.storage.slice_axis_mut(Axis(a), Slice::new(0, None, 2))),
            QView::Broadcast(_) => None,
        }
    }
}

impl<T: FromBytes> Viewed<T> {
    pub(super) fn from_bytes(shape: &[usize], bytes: &[u8], kind: QView, fill: &[u8]) -> Viewed<T> {
        let size = fill.len();
        let values: Vec<T> = bytes.chunks_exact(size).map(T::from_bytes).collect();
        Viewed::new(shape, &values, kind, T::from_bytes(fill))
    }

    /// The bytes the view stands for, row-major.
    pub(super) fn bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for &v in self.view().iter() {
            v.to_bytes(&mut out);
        }
        out
    }

    /// Every byte of the storage (the view's elements and, for a strided view, the gaps
    /// between them), in the storage's logical order.
    pub(super) fn storage_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for &v in self.storage.iter() {
            v.to_bytes(&mut out);
        }
        out
    }
}

/// The typed `run` with the Rust types of the kernel's signature on the case's views: the
/// output bytes, and the input bytes the views stand for. With `Mismatch::ElementType` or
/// `Mismatch::IndexType` it also checks that the wrong type is refused.
fn typed_run(
    kernel: &QuantizedKernel,
    case: &QuantizedCase,
    mismatch: Mismatch,
) -> (gather_jit::Result<Vec<u8>>, Inputs) {
    macro_rules! by_index {
        ($t:ty) => {
            match kernel.signature().index_type {
                IndexType::I8 => run_as::<$t, i8>(kernel, case, mismatch),
                IndexType::U8 => run_as::<$t, u8>(kernel, case, mismatch),
                IndexType::I16 => run_as::<$t, i16>(kernel, case, mismatch),
                IndexType::U16 => run_as::<$t, u16>(kernel, case, mismatch),
                IndexType::I32 => run_as::<$t, i32>(kernel, case, mismatch),
                IndexType::U32 => run_as::<$t, u32>(kernel, case, mismatch),
                IndexType::I64 => run_as::<$t, i64>(kernel, case, mismatch),
                IndexType::U64 => run_as::<$t, u64>(kernel, case, mismatch),
            }
        };
    }
    match kernel.signature().dtype {
        DType::F16 => by_index!(half::f16),
        DType::Bf16 => by_index!(half::bf16),
        DType::F32 => by_index!(f32),
        other => unreachable!("a valid quantized signature's dtype is a float, not {other:?}"),
    }
}

fn run_as<T: FromBytes, I: IndexElement + FromBytes>(
    kernel: &QuantizedKernel,
    case: &QuantizedCase,
    mismatch: Mismatch,
) -> (gather_jit::Result<Vec<u8>>, Inputs) {
    let layout = kernel.layout();
    let sig = kernel.signature();
    let [dv, iv, sv, zv] = case.views;
    let data = Viewed::<u8>::from_bytes(layout.data_bytes_shape(), &case.data, dv, &[0x5A]);
    let index_fill = vec![0x5A; sig.index_type.size()];
    let indices = Viewed::<I>::from_bytes(&sig.indices_shape, &case.indices, iv, &index_fill);
    // GGUF: no scales, an empty view.
    let scales_shape = match sig.quantization {
        Quantization::Gguf(_) => &[0][..],
        Quantization::Block(_) => layout.scales_shape(),
    };
    let scale_fill = vec![0x5A; sig.dtype.size()];
    let scales = Viewed::<T>::from_bytes(scales_shape, &case.scales, sv, &scale_fill);
    let zero_points = match (&case.zero_points, layout.zero_points_bytes_shape()) {
        (Some(zp), Some(shape)) => Some(Viewed::<u8>::from_bytes(shape, zp, zv, &[0x5A])),
        _ => None,
    };
    let inputs = Inputs {
        data: data.bytes(),
        indices: indices.bytes(),
        scales: scales.bytes(),
        zero_points: zero_points.as_ref().map(Viewed::bytes),
    };
    let zp_view = zero_points.as_ref().map(Viewed::view);
    match mismatch {
        Mismatch::ElementType => {
            let scales = ArrayD::<f64>::zeros(IxDyn(scales_shape));
            let e = kernel.run(data.view(), indices.view(), scales.view(), zp_view.clone());
            assert!(
                matches!(
                    &e,
                    Err(Error::DTypeMismatch { what: "output", expected, actual: DType::F64, .. })
                        if *expected == sig.dtype
                ),
                "f64 elements: {:?}\n{}",
                e.map(|a| a.len()),
                case.replay()
            );
        }
        Mismatch::IndexType => {
            let (e, other) = if I::INDEX_TYPE == IndexType::I64 {
                let idx = ArrayD::<i32>::zeros(IxDyn(&sig.indices_shape));
                let e = kernel.run(data.view(), idx.view(), scales.view(), zp_view.clone());
                (e, IndexType::I32)
            } else {
                let idx = ArrayD::<i64>::zeros(IxDyn(&sig.indices_shape));
                let e = kernel.run(data.view(), idx.view(), scales.view(), zp_view.clone());
                (e, IndexType::I64)
            };
            assert!(
                matches!(
                    &e,
                    Err(Error::IndexTypeMismatch { expected, actual, .. })
                        if *expected == sig.index_type && *actual == other
                ),
                "{other:?} indices: {:?}\n{}",
                e.map(|a| a.len()),
                case.replay()
            );
        }
        _ => {}
    }
    let out = kernel.run(data.view(), indices.view(), scales.view(), zp_view);
    let out = out.map(|out| {
        assert_eq!(
            out.shape(),
            layout.output_shape(),
            "run's output shape\n{}",
            case.replay()
        );
        let mut bytes = Vec::with_capacity(out.len() * sig.dtype.size());
        for &v in out.iter() {
            v.to_bytes(&mut bytes);
        }
        bytes
    });
    (out, inputs)
}
