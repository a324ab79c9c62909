//! Quantized gathers: rows of a quantized table, dequantized as they are gathered.
//!
//! Two storage forms, one op each:
//! - **Block quantization** (ONNX Runtime's `com.microsoft::GatherBlockQuantized`): `data` is
//!   `uint8`, its last axis packed (`bits = 4`: two values per byte, the even one in the low
//!   nibble); one scale per `block_size` values along `quantize_axis`, and optionally one zero
//!   point per scale, packed as `data` along the scales' last axis. A value is
//!   `(q - zero_point) * scale`, computed in `f32` and rounded once to the scales' type, which
//!   is the output's; the zero point is 8 (4 bits) or 128 (8 bits) when there is none.
//! - **GGUF rows** (llama.cpp's `get_rows`): `data` is `[rows, bytes_per_row]` of raw blocks of
//!   32 values: `Q4_0` is an `f16` scale `d` then 16 bytes, value `j < 16` the low nibble of
//!   byte `j` and value `16 + j` its high nibble, each `(nibble - 8) * d`; `Q8_0` is `d` then
//!   32 `i8`, each `q * d`.
//!
//! Shapes are the logical (dequantized) ones: the output is Gather's rule on them. This file
//! owns the signature and its validation ([`QuantizedLayout`]: every buffer's shape and size);
//! `shape.rs` the shape rules (stored to logical data, the output), `interp.rs` the definition
//! as code, `lower/` the loop nest. Compiling, caching and calling go through the machinery
//! every op shares ([`crate::QuantizedKernel`], [`crate::KernelCache`]).

mod interp;
pub(crate) mod lower;
mod shape;

use std::fmt;

use crate::error::{Error, Result};
use crate::ir::checks;
use crate::ir::{DType, IndexPolicy, IndexType, NegativeIndices, OpName, OutOfRange};

pub use interp::interpret_quantized;
use shape::{gguf_rank, values_per_byte};
pub use shape::{logical_data_shape, quantized_output_shape};

/// The attributes of ONNX Runtime's `GatherBlockQuantized`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlockQuantization {
    /// The axis of data the indices select along; negative counts from data's rank.
    pub gather_axis: i64,
    /// The axis along which `block_size` consecutive values share a scale; negative counts
    /// from data's rank.
    pub quantize_axis: i64,
    /// Values per scale: a power of two, at least 16.
    pub block_size: usize,
    /// Bits per value: 4 or 8.
    pub bits: u8,
    /// Whether a zero-points tensor is passed (else 8 for 4 bits, 128 for 8 bits).
    pub zero_points: bool,
}

impl Default for BlockQuantization {
    /// ONNX Runtime's defaults: gather axis 0, quantize axis 1, block size 128, 4 bits.
    fn default() -> Self {
        BlockQuantization {
            gather_axis: 0,
            quantize_axis: 1,
            block_size: 128,
            bits: 4,
            zero_points: false,
        }
    }
}

/// A GGUF block format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GgufFormat {
    /// 32 values as an `f16` scale and 16 bytes of nibbles (18 bytes).
    Q4_0,
    /// 32 values as an `f16` scale and 32 `i8` (34 bytes).
    Q8_0,
}

impl GgufFormat {
    /// Values per block.
    pub const BLOCK_VALUES: usize = 32;

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        match self {
            GgufFormat::Q4_0 => 18,
            GgufFormat::Q8_0 => 34,
        }
    }

    /// The name as GGUF spells it (`q4_0`, `q8_0`).
    pub fn name(self) -> &'static str {
        match self {
            GgufFormat::Q4_0 => "q4_0",
            GgufFormat::Q8_0 => "q8_0",
        }
    }

    /// The format named `name` (`q4_0`, `Q4_0`, `q8_0`, `Q8_0`).
    pub fn from_name(name: &str) -> Option<GgufFormat> {
        match name.to_ascii_lowercase().as_str() {
            "q4_0" => Some(GgufFormat::Q4_0),
            "q8_0" => Some(GgufFormat::Q8_0),
            _ => None,
        }
    }
}

/// How the table is quantized.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Quantization {
    /// ONNX Runtime's `GatherBlockQuantized`.
    Block(BlockQuantization),
    /// Rows of GGUF blocks (`data` is `[rows, bytes_per_row]`, gathered along rows).
    Gguf(GgufFormat),
}

/// Everything a quantized gather kernel is specialised on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct QuantizedSignature {
    /// The storage form and its attributes.
    pub quantization: Quantization,
    /// The logical (dequantized) shape of data.
    pub data_shape: Vec<usize>,
    /// The shape of indices.
    pub indices_shape: Vec<usize>,
    /// The type of the indices.
    pub index_type: IndexType,
    /// The output's element type (`F32`, `F16` or `Bf16`); for block quantization also the
    /// scales' type.
    pub dtype: DType,
    /// What negative and out-of-range indices do.
    pub policy: IndexPolicy,
}

impl QuantizedSignature {
    /// `GatherBlockQuantized` on logical data of `data_shape`, with `f32` scales and output,
    /// `i64` indices, and ONNX Runtime's negative indices (they wrap); an out-of-range index
    /// is an error (ONNX Runtime writes zeros instead: [`OutOfRange::Zero`]).
    pub fn block_quantized(
        data_shape: &[usize],
        indices_shape: &[usize],
        quantization: BlockQuantization,
    ) -> QuantizedSignature {
        QuantizedSignature {
            quantization: Quantization::Block(quantization),
            data_shape: data_shape.to_vec(),
            indices_shape: indices_shape.to_vec(),
            index_type: IndexType::I64,
            dtype: DType::F32,
            policy: IndexPolicy {
                negative: NegativeIndices::Wrap,
                out_of_range: OutOfRange::Error,
            },
        }
    }

    /// Rows of a GGUF table of `rows` rows of `row_len` values, `f32` output, `i64` indices;
    /// as llama.cpp, a negative index is out of range, and out of range is an error.
    pub fn gguf(
        format: GgufFormat,
        rows: usize,
        row_len: usize,
        indices_shape: &[usize],
    ) -> QuantizedSignature {
        QuantizedSignature {
            quantization: Quantization::Gguf(format),
            data_shape: vec![rows, row_len],
            indices_shape: indices_shape.to_vec(),
            index_type: IndexType::I64,
            dtype: DType::F32,
            policy: IndexPolicy {
                negative: NegativeIndices::Invalid,
                out_of_range: OutOfRange::Error,
            },
        }
    }

    /// With output (and, for block quantization, scales) of type `dtype`.
    pub fn with_dtype(mut self, dtype: DType) -> QuantizedSignature {
        self.dtype = dtype;
        self
    }

    /// With indices of type `index_type`.
    pub fn with_index_type(mut self, index_type: IndexType) -> QuantizedSignature {
        self.index_type = index_type;
        self
    }

    /// With the index policy `policy`.
    pub fn with_policy(mut self, policy: IndexPolicy) -> QuantizedSignature {
        self.policy = policy;
        self
    }

    /// The operator's name.
    pub fn op_name(&self) -> OpName {
        match self.quantization {
            Quantization::Block(_) => OpName::GatherBlockQuantized,
            Quantization::Gguf(_) => OpName::GatherGguf,
        }
    }

    /// Checks the attributes and shapes and works out every buffer's shape.
    ///
    /// # Errors
    /// [`Error::InvalidQuantization`] for attributes or shapes the storage form cannot have;
    /// [`Error::AxisOutOfRange`], [`Error::RankTooSmall`], [`Error::RankTooLarge`] and
    /// [`Error::SizeOverflow`] as for the other gathers.
    pub fn validate(&self) -> Result<QuantizedLayout> {
        QuantizedLayout::new(self)
    }
}

impl fmt::Display for QuantizedSignature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.quantization {
            Quantization::Block(q) => write!(
                f,
                "GatherBlockQuantized(gather_axis={}, quantize_axis={}, block_size={}, bits={}{})",
                q.gather_axis,
                q.quantize_axis,
                q.block_size,
                q.bits,
                if q.zero_points { ", zero_points" } else { "" }
            )?,
            Quantization::Gguf(format) => write!(f, "GatherGGUF({})", format.name())?,
        }
        write!(
            f,
            " data {:?} indices {:?}:{} -> {} ({})",
            self.data_shape,
            self.indices_shape,
            self.index_type.name(),
            self.dtype.name(),
            self.policy
        )
    }
}

/// A validated [`QuantizedSignature`] and the shapes of its buffers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct QuantizedLayout {
    signature: QuantizedSignature,
    /// The resolved gather axis.
    pub(crate) gather_axis: usize,
    /// The resolved quantize axis (the last one for GGUF).
    pub(crate) quantize_axis: usize,
    /// Values per scale (32 for GGUF).
    pub(crate) block_size: usize,
    /// Scales along the quantize axis: `ceil(data_shape[quantize_axis] / block_size)`.
    pub(crate) blocks: usize,
    data_bytes_shape: Vec<usize>,
    scales_shape: Vec<usize>,
    zero_points_bytes_shape: Option<Vec<usize>>,
    output_shape: Vec<usize>,
    pub(crate) data_bytes: usize,
    pub(crate) indices_bytes: usize,
    pub(crate) scales_bytes: usize,
    pub(crate) zero_points_bytes: usize,
    pub(crate) output_bytes: usize,
}

impl QuantizedLayout {
    fn new(sig: &QuantizedSignature) -> Result<QuantizedLayout> {
        let op = sig.op_name();
        let invalid = |what: String| Err(Error::InvalidQuantization { op, what });
        if !matches!(sig.dtype, DType::F32 | DType::F16 | DType::Bf16) {
            return invalid(format!(
                "the output (and scales) must be float32, float16 or bfloat16, not {}",
                sig.dtype.name()
            ));
        }
        let d = &sig.data_shape;
        let rank = d.len();
        checks::max_rank(op, "data", rank)?;
        checks::max_rank(op, "indices", sig.indices_shape.len())?;
        checks::min_rank(op, "data", rank, 1)?;
        let (gather_axis, quantize_axis, block_size, data_bytes_shape, scales_shape, zp) =
            match sig.quantization {
                Quantization::Block(q) => {
                    let per_byte = values_per_byte(op, q.bits)?;
                    if q.block_size < 16 || !q.block_size.is_power_of_two() {
                        return invalid(format!(
                            "block_size must be a power of two of at least 16, not {}",
                            q.block_size
                        ));
                    }
                    let g = checks::normalise_axis(op, q.gather_axis, rank)?;
                    let qa = checks::normalise_axis(op, q.quantize_axis, rank)?;
                    let last = d[rank - 1];
                    if !last.is_multiple_of(per_byte) {
                        return invalid(format!(
                            "data's last dim is {last}: {}-bit values pack {per_byte} to a \
                             byte along it, so it must be a multiple of {per_byte}",
                            q.bits
                        ));
                    }
                    let mut stored = d.clone();
                    stored[rank - 1] = last / per_byte;
                    let mut scales = d.clone();
                    scales[qa] = d[qa].div_ceil(q.block_size);
                    let zp = q.zero_points.then(|| {
                        let mut zp = scales.clone();
                        zp[rank - 1] = zp[rank - 1].div_ceil(per_byte);
                        zp
                    });
                    (g, qa, q.block_size, stored, scales, zp)
                }
                Quantization::Gguf(format) => {
                    gguf_rank(op, rank)?;
                    let values = GgufFormat::BLOCK_VALUES;
                    if !d[1].is_multiple_of(values) {
                        return invalid(format!(
                            "a row of {} values is not a whole number of {}-value {} blocks",
                            d[1],
                            values,
                            format.name()
                        ));
                    }
                    let stored = vec![d[0], d[1] / values * format.block_bytes()];
                    (0, 1, values, stored, Vec::new(), None)
                }
            };
        // The rank and the axis are checked above, so this adds no error of its own.
        let output_shape = quantized_output_shape(sig.quantization, d, &sig.indices_shape)?;
        checks::max_rank(op, "output", output_shape.len())?;
        // The logical data must be addressable too: the kernel counts in values.
        checks::check_size("data", d, 1)?;
        let element = sig.dtype.size();
        Ok(QuantizedLayout {
            signature: sig.clone(),
            gather_axis,
            quantize_axis,
            block_size,
            blocks: d[quantize_axis].div_ceil(block_size),
            data_bytes: checks::check_size("data", &data_bytes_shape, 1)?,
            indices_bytes: checks::check_size(
                "indices",
                &sig.indices_shape,
                sig.index_type.size(),
            )?,
            scales_bytes: if scales_shape.is_empty() {
                0
            } else {
                checks::check_size("scales", &scales_shape, element)?
            },
            zero_points_bytes: match &zp {
                Some(zp) => checks::check_size("zero_points", zp, 1)?,
                None => 0,
            },
            output_bytes: checks::check_size("output", &output_shape, element)?,
            data_bytes_shape,
            scales_shape,
            zero_points_bytes_shape: zp,
            output_shape,
        })
    }

    /// The signature.
    pub fn signature(&self) -> &QuantizedSignature {
        &self.signature
    }

    /// The shape of the stored data (`uint8`): the logical shape with the last dim packed, or
    /// `[rows, bytes_per_row]` for GGUF.
    pub fn data_bytes_shape(&self) -> &[usize] {
        &self.data_bytes_shape
    }

    /// The shape of the scales (block quantization; empty for GGUF, whose scales are inside
    /// the blocks).
    pub fn scales_shape(&self) -> &[usize] {
        &self.scales_shape
    }

    /// The shape of the stored zero points (`uint8`, packed as data), if the signature has
    /// them.
    pub fn zero_points_bytes_shape(&self) -> Option<&[usize]> {
        self.zero_points_bytes_shape.as_deref()
    }

    /// The output's shape.
    pub fn output_shape(&self) -> &[usize] {
        &self.output_shape
    }

    /// The gather axis, resolved (0 for GGUF).
    pub fn gather_axis(&self) -> usize {
        self.gather_axis
    }

    /// Bytes of the stored data.
    pub fn data_bytes(&self) -> usize {
        self.data_bytes
    }

    /// Bytes of the indices.
    pub fn indices_bytes(&self) -> usize {
        self.indices_bytes
    }

    /// Bytes of the scales (0 for GGUF).
    pub fn scales_bytes(&self) -> usize {
        self.scales_bytes
    }

    /// Bytes of the stored zero points (0 without them).
    pub fn zero_points_bytes(&self) -> usize {
        self.zero_points_bytes
    }

    /// Bytes of the output.
    pub fn output_bytes(&self) -> usize {
        self.output_bytes
    }

    /// The block quantization's bits per value (4 for `Q4_0`, 8 for `Q8_0`).
    pub(crate) fn bits(&self) -> u8 {
        match self.signature.quantization {
            Quantization::Block(q) => q.bits,
            Quantization::Gguf(GgufFormat::Q4_0) => 4,
            Quantization::Gguf(GgufFormat::Q8_0) => 8,
        }
    }

    /// The zero point used when none is passed (GGUF: 8 for `Q4_0`, 0 for `Q8_0`'s signed
    /// values).
    pub(crate) fn default_zero_point(&self) -> i32 {
        match self.signature.quantization {
            Quantization::Block(q) if q.bits == 4 => 8,
            Quantization::Block(_) => 128,
            Quantization::Gguf(GgufFormat::Q4_0) => 8,
            Quantization::Gguf(GgufFormat::Q8_0) => 0,
        }
    }

    /// Whether zero points are passed.
    pub(crate) fn has_zero_points(&self) -> bool {
        self.zero_points_bytes_shape.is_some()
    }

    /// Values in a stored row of zero points (the scales' last dim, before packing).
    pub(crate) fn zero_point_row(&self) -> (usize, usize) {
        let last = self.scales_shape.last().copied().unwrap_or(0);
        let bytes = self
            .zero_points_bytes_shape
            .as_ref()
            .and_then(|zp| zp.last().copied())
            .unwrap_or(0);
        (last, bytes)
    }

    /// Checks the buffers' lengths against this layout; returns the zero points, given
    /// exactly when the signature has them.
    pub(crate) fn check_buffers<'z>(
        &self,
        data: &[u8],
        indices: &[u8],
        scales: &[u8],
        zero_points: Option<&'z [u8]>,
    ) -> Result<Option<&'z [u8]>> {
        let check = |what: &'static str, actual: usize, expected: usize| {
            if actual == expected {
                Ok(())
            } else {
                Err(Error::BufferMismatch {
                    what,
                    expected: format!("{expected} bytes"),
                    actual: format!("{actual} bytes"),
                })
            }
        };
        check("data", data.len(), self.data_bytes)?;
        check("indices", indices.len(), self.indices_bytes)?;
        check("scales", scales.len(), self.scales_bytes)?;
        match (zero_points, self.has_zero_points()) {
            (Some(zp), true) => {
                check("zero_points", zp.len(), self.zero_points_bytes)?;
                Ok(Some(zp))
            }
            (None, false) => Ok(None),
            (Some(_), false) => Err(Error::BufferMismatch {
                what: "zero_points",
                expected: "none (the signature has no zero points)".into(),
                actual: "a buffer".into(),
            }),
            (None, true) => Err(Error::BufferMismatch {
                what: "zero_points",
                expected: format!("{} bytes", self.zero_points_bytes),
                actual: "none".into(),
            }),
        }
    }

    /// Number of indices.
    pub(crate) fn index_count(&self) -> usize {
        self.signature.indices_shape.iter().product()
    }
}
