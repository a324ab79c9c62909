//! The vocabulary every module names: element and index types, operator names, framework
//! flavors and their index policies, the scatters' flavors, reductions and rounding
//! (`scatter.rs`), and the rank limit.
//!
//! A leaf: it imports nothing of the crate, so that `error` can name these types in its
//! messages without importing `ir` or an op family, which build on both.

mod scatter;

use std::fmt;

pub use scatter::{Bf16Rounding, Reduction, ScatterFlavor, TieBreak};

/// The most dims a tensor of a valid signature (data, indices or output) may have: numpy's
/// limit, far above any model's. Compile time grows faster than linearly with a GatherND
/// index tuple's depth (one unrolled check per coordinate); at this limit the deepest tuple
/// still compiles in under 10 ms (`cargo bench --bench gather -- compile/deepest`).
pub const MAX_RANK: usize = 64;

/// The operators without their attributes, for messages and dispatch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OpName {
    /// `Gather`.
    Gather,
    /// `GatherElements`.
    GatherElements,
    /// `GatherND`.
    GatherNd,
    /// ONNX Runtime's `GatherBlockQuantized` (see [`crate::QuantizedSignature`]).
    GatherBlockQuantized,
    /// Rows of GGUF blocks, as llama.cpp's `get_rows` (see [`crate::QuantizedSignature`]).
    GatherGguf,
    /// `ScatterND` (OpenVINO `ScatterNDUpdate`, TensorRT `kND`; see [`crate::scatter`]).
    ScatterNd,
    /// `ScatterElements` (OpenVINO `ScatterElementsUpdate`, TensorRT `kELEMENT`, ONNX's
    /// deprecated `Scatter`).
    ScatterElements,
    /// OpenVINO `ScatterUpdate`: whole slices along `axis`, the inverse of Gather.
    ScatterUpdate,
}

impl fmt::Display for OpName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OpName::Gather => "Gather",
            OpName::GatherElements => "GatherElements",
            OpName::GatherNd => "GatherND",
            OpName::GatherBlockQuantized => "GatherBlockQuantized",
            OpName::GatherGguf => "GatherGGUF",
            OpName::ScatterNd => "ScatterND",
            OpName::ScatterElements => "ScatterElements",
            OpName::ScatterUpdate => "ScatterUpdate",
        })
    }
}

/// The framework and operator version whose rules apply. See `docs/semantics.md`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Flavor {
    /// ONNX Gather-13, GatherElements-13, GatherND-13.
    Onnx,
    /// OpenVINO Gather-1 (no batch_dims).
    OpenvinoGather1,
    /// OpenVINO Gather-7 (batch_dims, negative counts from the indices' rank).
    OpenvinoGather7,
    /// OpenVINO Gather-8 (as Gather-7; negative indices wrap, out of range gives zeros).
    OpenvinoGather8,
    /// OpenVINO GatherND-5 (batch dims flattened into one output dim).
    OpenvinoGatherNd5,
    /// OpenVINO GatherND-8 (batch dims kept in the output).
    OpenvinoGatherNd8,
    /// OpenVINO GatherElements-6 (non-axis dims must be equal).
    OpenvinoGatherElements6,
    /// TensorRT `IGatherLayer`: DEFAULT = Gather, ELEMENT = GatherElements, ND = GatherND;
    /// `batch_dims` is `num_elementwise_dims`.
    TensorRt,
}

impl Flavor {
    /// Every flavor, in a stable order.
    pub const ALL: [Flavor; 8] = [
        Flavor::Onnx,
        Flavor::OpenvinoGather1,
        Flavor::OpenvinoGather7,
        Flavor::OpenvinoGather8,
        Flavor::OpenvinoGatherNd5,
        Flavor::OpenvinoGatherNd8,
        Flavor::OpenvinoGatherElements6,
        Flavor::TensorRt,
    ];

    /// The flavor's name as used by the CLI and the conformance files (e.g. `openvino-gather8`).
    pub fn name(self) -> &'static str {
        match self {
            Flavor::Onnx => "onnx",
            Flavor::OpenvinoGather1 => "openvino-gather1",
            Flavor::OpenvinoGather7 => "openvino-gather7",
            Flavor::OpenvinoGather8 => "openvino-gather8",
            Flavor::OpenvinoGatherNd5 => "openvino-gathernd5",
            Flavor::OpenvinoGatherNd8 => "openvino-gathernd8",
            Flavor::OpenvinoGatherElements6 => "openvino-gatherelements6",
            Flavor::TensorRt => "tensorrt",
        }
    }

    /// Parses a flavor name (the inverse of [`Flavor::name`]).
    pub fn from_name(name: &str) -> Option<Flavor> {
        Flavor::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Whether this flavor defines `op` (an OpenVINO flavor names one operator version). The
    /// scatters have flavors of their own ([`crate::scatter::ScatterFlavor`]).
    pub fn supports(self, op: OpName) -> bool {
        match self {
            Flavor::Onnx | Flavor::TensorRt => matches!(
                op,
                OpName::Gather | OpName::GatherElements | OpName::GatherNd
            ),
            Flavor::OpenvinoGather1 | Flavor::OpenvinoGather7 | Flavor::OpenvinoGather8 => {
                op == OpName::Gather
            }
            Flavor::OpenvinoGatherNd5 | Flavor::OpenvinoGatherNd8 => op == OpName::GatherNd,
            Flavor::OpenvinoGatherElements6 => op == OpName::GatherElements,
        }
    }

    /// The index policy the framework's reference implementation applies.
    ///
    /// Where a spec and the reference disagree, this follows the reference (see
    /// `docs/semantics.md`): OpenVINO's Gather kernel, shared by versions 1, 7 and 8, wraps
    /// negatives and zero-fills out-of-range slices; its GatherND wraps negatives. Its
    /// GatherElements rejects negatives, as the GatherElements-6 spec says (the CPU plugin
    /// wraps them; the reference and the spec are followed here).
    pub fn default_policy(self) -> IndexPolicy {
        use NegativeIndices::*;
        use OutOfRange::*;
        let (negative, out_of_range) = match self {
            Flavor::Onnx => (Wrap, Error),
            Flavor::OpenvinoGather1 | Flavor::OpenvinoGather7 | Flavor::OpenvinoGather8 => {
                (Wrap, Zero)
            }
            Flavor::OpenvinoGatherNd5 | Flavor::OpenvinoGatherNd8 => (Wrap, Error),
            Flavor::OpenvinoGatherElements6 => (Invalid, Error),
            Flavor::TensorRt => (Invalid, Error),
        };
        IndexPolicy {
            negative,
            out_of_range,
        }
    }
}

impl fmt::Display for Flavor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a negative index means.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NegativeIndices {
    /// `i` in `[-s, -1]` means `i + s` (s = the size of the dimension it indexes); below `-s`
    /// it is out of range.
    Wrap,
    /// Every negative index is out of range.
    Invalid,
}

/// What an out-of-range index does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OutOfRange {
    /// The call fails, reporting the position in the indices tensor and the value of the first
    /// bad index (in row-major order of the indices).
    Error,
    /// The slice (GatherND: the whole tuple's slice; GatherElements: the element) becomes zeros.
    Zero,
    /// The index is clamped to `[0, s-1]` (XLA's rule); an index into an empty dimension is
    /// still an error, as there is nothing to clamp to.
    Clamp,
}

/// How indices are interpreted: explicit in the IR, chosen by the flavor by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IndexPolicy {
    /// What a negative index means.
    pub negative: NegativeIndices,
    /// What an index outside the dimension does.
    pub out_of_range: OutOfRange,
}

impl IndexPolicy {
    /// Applies the policy to one index value `raw` into a dimension of size `dim`.
    ///
    /// Returns `Some(i)` with `0 <= i < dim` for the element to read, or `None` when the slice
    /// is bad: the caller zero-fills under [`OutOfRange::Zero`] and reports an error otherwise.
    pub fn resolve(self, raw: i128, dim: usize) -> Option<usize> {
        let dim = dim as i128;
        let normalised = if raw < 0 && self.negative == NegativeIndices::Wrap {
            raw + dim
        } else {
            raw
        };
        if (0..dim).contains(&normalised) {
            return Some(normalised as usize);
        }
        match self.out_of_range {
            OutOfRange::Clamp if dim > 0 => Some(normalised.clamp(0, dim - 1) as usize),
            _ => None,
        }
    }
}

impl fmt::Display for IndexPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let negative = match self.negative {
            NegativeIndices::Wrap => "wrap",
            NegativeIndices::Invalid => "invalid",
        };
        let oob = match self.out_of_range {
            OutOfRange::Error => "error",
            OutOfRange::Zero => "zero",
            OutOfRange::Clamp => "clamp",
        };
        write!(f, "negative={negative}, oob={oob}")
    }
}

/// Element type of `data` (and of the output). Gather moves bytes: only the size reaches the
/// generated code; the type is kept for the typed API and messages. Strings are not supported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs, reason = "the variants are the type names")]
pub enum DType {
    F16,
    Bf16,
    F32,
    F64,
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    Bool,
}

impl DType {
    /// Every element type.
    pub const ALL: [DType; 13] = [
        DType::F16,
        DType::Bf16,
        DType::F32,
        DType::F64,
        DType::I8,
        DType::U8,
        DType::I16,
        DType::U16,
        DType::I32,
        DType::U32,
        DType::I64,
        DType::U64,
        DType::Bool,
    ];

    /// Size of one element in bytes (1, 2, 4 or 8).
    pub fn size(self) -> usize {
        match self {
            DType::I8 | DType::U8 | DType::Bool => 1,
            DType::F16 | DType::Bf16 | DType::I16 | DType::U16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
        }
    }

    /// Short name (`f32`, `bf16`, `bool`, ...), as the CLI spells it.
    pub fn name(self) -> &'static str {
        match self {
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I16 => "i16",
            DType::U16 => "u16",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::I64 => "i64",
            DType::U64 => "u64",
            DType::Bool => "bool",
        }
    }

    /// Parses a short name (`f32`) or an ONNX-style long name (`float32`, `int64`, `bfloat16`).
    pub fn from_name(name: &str) -> Option<DType> {
        let long = match name {
            "float16" => "f16",
            "bfloat16" => "bf16",
            "float32" | "float" => "f32",
            "float64" | "double" => "f64",
            "int8" => "i8",
            "uint8" => "u8",
            "int16" => "i16",
            "uint16" => "u16",
            "int32" => "i32",
            "uint32" => "u32",
            "int64" => "i64",
            "uint64" => "u64",
            other => other,
        };
        DType::ALL.into_iter().find(|d| d.name() == long)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Integer type of the indices (every type OpenVINO allows).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs, reason = "the variants are the type names")]
pub enum IndexType {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
}

impl IndexType {
    /// Every index type.
    pub const ALL: [IndexType; 8] = [
        IndexType::I8,
        IndexType::U8,
        IndexType::I16,
        IndexType::U16,
        IndexType::I32,
        IndexType::U32,
        IndexType::I64,
        IndexType::U64,
    ];

    /// Size of one index in bytes.
    pub fn size(self) -> usize {
        match self {
            IndexType::I8 | IndexType::U8 => 1,
            IndexType::I16 | IndexType::U16 => 2,
            IndexType::I32 | IndexType::U32 => 4,
            IndexType::I64 | IndexType::U64 => 8,
        }
    }

    /// Whether the type is signed (negative values exist).
    pub fn is_signed(self) -> bool {
        matches!(
            self,
            IndexType::I8 | IndexType::I16 | IndexType::I32 | IndexType::I64
        )
    }

    /// Short name (`i64`, `u8`, ...).
    pub fn name(self) -> &'static str {
        match self {
            IndexType::I8 => "i8",
            IndexType::U8 => "u8",
            IndexType::I16 => "i16",
            IndexType::U16 => "u16",
            IndexType::I32 => "i32",
            IndexType::U32 => "u32",
            IndexType::I64 => "i64",
            IndexType::U64 => "u64",
        }
    }

    /// Parses a short (`i64`) or long (`int64`) name.
    pub fn from_name(name: &str) -> Option<IndexType> {
        let short = DType::from_name(name)?.name();
        IndexType::ALL.into_iter().find(|t| t.name() == short)
    }

    /// The smallest value the type holds.
    pub fn min_value(self) -> i64 {
        match self {
            IndexType::I8 => i8::MIN.into(),
            IndexType::I16 => i16::MIN.into(),
            IndexType::I32 => i32::MIN.into(),
            IndexType::I64 => i64::MIN,
            IndexType::U8 | IndexType::U16 | IndexType::U32 | IndexType::U64 => 0,
        }
    }

    /// The largest value the type holds.
    pub fn max_value(self) -> u64 {
        match self {
            IndexType::I8 => i8::MAX as u64,
            IndexType::U8 => u8::MAX as u64,
            IndexType::I16 => i16::MAX as u64,
            IndexType::U16 => u16::MAX as u64,
            IndexType::I32 => i32::MAX as u64,
            IndexType::U32 => u32::MAX as u64,
            IndexType::I64 => i64::MAX as u64,
            IndexType::U64 => u64::MAX,
        }
    }

    /// Appends `value` in this type, native-endian; returns `false` (appending nothing) if it
    /// does not fit.
    pub fn try_encode(self, value: i128, out: &mut Vec<u8>) -> bool {
        macro_rules! push {
            ($t:ty) => {
                match <$t>::try_from(value) {
                    Ok(v) => out.extend_from_slice(&v.to_ne_bytes()),
                    Err(_) => return false,
                }
            };
        }
        match self {
            IndexType::I8 => push!(i8),
            IndexType::U8 => push!(u8),
            IndexType::I16 => push!(i16),
            IndexType::U16 => push!(u16),
            IndexType::I32 => push!(i32),
            IndexType::U32 => push!(u32),
            IndexType::I64 => push!(i64),
            IndexType::U64 => push!(u64),
        }
        true
    }

    /// Appends `value` in this type, native-endian, truncated like a C cast (so `-1` as `u8`
    /// is 255): for building hostile indices in tests.
    #[cfg(feature = "unstable")]
    #[doc(hidden)]
    pub fn encode_wrapping(self, value: i128, out: &mut Vec<u8>) {
        match self {
            IndexType::I8 => out.extend((value as i8).to_ne_bytes()),
            IndexType::U8 => out.extend((value as u8).to_ne_bytes()),
            IndexType::I16 => out.extend((value as i16).to_ne_bytes()),
            IndexType::U16 => out.extend((value as u16).to_ne_bytes()),
            IndexType::I32 => out.extend((value as i32).to_ne_bytes()),
            IndexType::U32 => out.extend((value as u32).to_ne_bytes()),
            IndexType::I64 => out.extend((value as i64).to_ne_bytes()),
            IndexType::U64 => out.extend((value as u64).to_ne_bytes()),
        }
    }

    /// Reads the index at element position `i` of a native-endian buffer, widened losslessly.
    ///
    /// # Panics
    /// If `bytes` is shorter than `(i + 1) * self.size()`.
    pub fn read(self, bytes: &[u8], i: usize) -> i128 {
        let size = self.size();
        let b = &bytes[i * size..(i + 1) * size];
        match self {
            IndexType::I8 => i8::from_ne_bytes([b[0]]) as i128,
            IndexType::U8 => b[0] as i128,
            IndexType::I16 => i16::from_ne_bytes([b[0], b[1]]) as i128,
            IndexType::U16 => u16::from_ne_bytes([b[0], b[1]]) as i128,
            IndexType::I32 => i32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as i128,
            IndexType::U32 => u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as i128,
            IndexType::I64 => i64::from_ne_bytes(b.try_into().expect("8 bytes")) as i128,
            IndexType::U64 => u64::from_ne_bytes(b.try_into().expect("8 bytes")) as i128,
        }
    }
}

impl fmt::Display for IndexType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Writes a shape as `[2, 3, 4]`.
pub(crate) struct ShapeDisplay<'a>(pub &'a [usize]);

impl fmt::Display for ShapeDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}
