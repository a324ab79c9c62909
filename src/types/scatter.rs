//! The scatters' part of the shared vocabulary: whose rules apply ([`ScatterFlavor`]), how an
//! update combines with what is already there ([`Reduction`]), and how a reduction rounds
//! ([`TieBreak`], [`Bf16Rounding`]).
//!
//! Beside the gathers' flavors and policies, so that `error`, `codegen` and `quant` name them
//! without importing the scatter family; `gather_jit::scatter` re-exports them.

use std::fmt;

use super::{DType, NegativeIndices, OpName};

/// The framework and operator version whose rules a scatter follows. See
/// `docs/semantics.md#scatters`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScatterFlavor {
    /// ONNX ScatterND-18 and ScatterElements-18 (older opsets, and the deprecated `Scatter`, are
    /// subsets): reductions none, add, mul, max, min; negative indices wrap.
    Onnx,
    /// OpenVINO ScatterNDUpdate-3: no reduction; negative indices wrap, as OpenVINO's reference
    /// and CPU plugin do (the spec asks for `[0, s-1]`).
    OpenvinoScatterNdUpdate3,
    /// OpenVINO ScatterNDUpdate-15: reductions none, sum, sub, prod, min, max; negative indices
    /// wrap.
    OpenvinoScatterNdUpdate15,
    /// OpenVINO ScatterElementsUpdate-3: no reduction; negative indices wrap, as OpenVINO's
    /// reference and CPU plugin do (the spec asks for `[0, s-1]`).
    OpenvinoScatterElementsUpdate3,
    /// OpenVINO ScatterElementsUpdate-12: reductions none, sum, prod, min, max, mean, and
    /// `use_init_val`; negative indices wrap.
    OpenvinoScatterElementsUpdate12,
    /// OpenVINO ScatterUpdate-3: whole slices along `axis`, no reduction; a negative index is an
    /// error (the spec and the CPU plugin agree; the reference does not check).
    OpenvinoScatterUpdate3,
    /// TensorRT `IScatterLayer`, modes `kELEMENT` (ScatterElements) and `kND` (ScatterND): no
    /// reduction; negative indices are errors, and so are two updates of one element (TensorRT
    /// calls that undefined behaviour).
    TensorRt,
}

impl ScatterFlavor {
    /// Every scatter flavor, in a stable order.
    pub const ALL: [ScatterFlavor; 7] = [
        ScatterFlavor::Onnx,
        ScatterFlavor::OpenvinoScatterNdUpdate3,
        ScatterFlavor::OpenvinoScatterNdUpdate15,
        ScatterFlavor::OpenvinoScatterElementsUpdate3,
        ScatterFlavor::OpenvinoScatterElementsUpdate12,
        ScatterFlavor::OpenvinoScatterUpdate3,
        ScatterFlavor::TensorRt,
    ];

    /// The flavor's name as the CLI and the conformance files spell it
    /// (`openvino-scatterndupdate15`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ScatterFlavor::Onnx => "onnx",
            ScatterFlavor::OpenvinoScatterNdUpdate3 => "openvino-scatterndupdate3",
            ScatterFlavor::OpenvinoScatterNdUpdate15 => "openvino-scatterndupdate15",
            ScatterFlavor::OpenvinoScatterElementsUpdate3 => "openvino-scatterelementsupdate3",
            ScatterFlavor::OpenvinoScatterElementsUpdate12 => "openvino-scatterelementsupdate12",
            ScatterFlavor::OpenvinoScatterUpdate3 => "openvino-scatterupdate3",
            ScatterFlavor::TensorRt => "tensorrt",
        }
    }

    /// Parses a flavor name (the inverse of [`ScatterFlavor::name`]).
    pub fn from_name(name: &str) -> Option<ScatterFlavor> {
        ScatterFlavor::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Whether this flavor defines `op` (an OpenVINO flavor names one operator version).
    pub fn supports(self, op: OpName) -> bool {
        match self {
            ScatterFlavor::Onnx | ScatterFlavor::TensorRt => {
                matches!(op, OpName::ScatterNd | OpName::ScatterElements)
            }
            ScatterFlavor::OpenvinoScatterNdUpdate3 | ScatterFlavor::OpenvinoScatterNdUpdate15 => {
                op == OpName::ScatterNd
            }
            ScatterFlavor::OpenvinoScatterElementsUpdate3
            | ScatterFlavor::OpenvinoScatterElementsUpdate12 => op == OpName::ScatterElements,
            ScatterFlavor::OpenvinoScatterUpdate3 => op == OpName::ScatterUpdate,
        }
    }

    /// The reductions the flavor defines, `None` first.
    pub fn reductions(self) -> &'static [Reduction] {
        use Reduction::*;
        match self {
            ScatterFlavor::Onnx => &[None, Sum, Prod, Max, Min],
            ScatterFlavor::OpenvinoScatterNdUpdate15 => &[None, Sum, Sub, Prod, Min, Max],
            ScatterFlavor::OpenvinoScatterElementsUpdate12 => &[None, Sum, Prod, Min, Max, Mean],
            ScatterFlavor::OpenvinoScatterNdUpdate3
            | ScatterFlavor::OpenvinoScatterElementsUpdate3
            | ScatterFlavor::OpenvinoScatterUpdate3
            | ScatterFlavor::TensorRt => &[None],
        }
    }

    /// The reductions the flavor defines, as its framework spells them (for messages).
    pub(crate) fn reductions_text(self) -> &'static str {
        match self {
            ScatterFlavor::Onnx => "it has none, add, mul, max, min",
            ScatterFlavor::OpenvinoScatterNdUpdate15 => "it has none, sum, sub, prod, min, max",
            ScatterFlavor::OpenvinoScatterElementsUpdate12 => {
                "it has none, sum, prod, min, max, mean"
            }
            _ => "it has none only",
        }
    }

    /// Whether `use_init_val = false` means anything (ScatterElementsUpdate-12 only).
    pub fn has_use_init_val(self) -> bool {
        self == ScatterFlavor::OpenvinoScatterElementsUpdate12
    }

    /// What a negative index means under this flavor by default (an out-of-range index is
    /// always an error).
    pub fn default_negative(self) -> NegativeIndices {
        match self {
            ScatterFlavor::OpenvinoScatterUpdate3 | ScatterFlavor::TensorRt => {
                NegativeIndices::Invalid
            }
            _ => NegativeIndices::Wrap,
        }
    }

    /// Whether two updates of one data element are an error (TensorRT: undefined behaviour)
    /// rather than applied in index order.
    pub fn forbids_duplicates(self) -> bool {
        self == ScatterFlavor::TensorRt
    }

    /// Which operand `min` and `max` return when the two compare equal (`-0.0` and `+0.0`) or
    /// are unordered (a NaN): each framework's reference kernel decides differently.
    pub fn tie_break(self) -> TieBreak {
        match self {
            // std::max(out, upd) / std::min(out, upd) in OpenVINO's reference.
            ScatterFlavor::OpenvinoScatterNdUpdate15 => TieBreak::Current,
            // `out > upd ? out : upd` in ONNX Runtime's kernels and in OpenVINO's
            // ScatterElementsUpdate-12 reference; the other flavors have no min or max.
            _ => TieBreak::Update,
        }
    }
}

impl ScatterFlavor {
    /// How an arithmetic result in `f32` becomes a `bf16` element under this flavor.
    pub fn bf16_rounding(self) -> Bf16Rounding {
        match self {
            ScatterFlavor::Onnx | ScatterFlavor::TensorRt => Bf16Rounding::NearestEven,
            _ => Bf16Rounding::OpenVino,
        }
    }
}

impl fmt::Display for ScatterFlavor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How an update combines with the element it lands on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reduction {
    /// The update replaces the element (with duplicates, the last in index order wins).
    None,
    /// `element + update` (ONNX `add`; logical or on `bool`).
    Sum,
    /// `element - update` (ScatterNDUpdate-15; logical xor on `bool`).
    Sub,
    /// `element * update` (ONNX `mul`; logical and on `bool`).
    Prod,
    /// The smaller of the two (logical and on `bool`).
    Min,
    /// The larger of the two (logical or on `bool`).
    Max,
    /// The mean of the element (if `use_init_val`) and every update landing on it
    /// (ScatterElementsUpdate-12; integers round down; not on `bool`).
    Mean,
}

impl Reduction {
    /// Every reduction.
    pub const ALL: [Reduction; 7] = [
        Reduction::None,
        Reduction::Sum,
        Reduction::Sub,
        Reduction::Prod,
        Reduction::Min,
        Reduction::Max,
        Reduction::Mean,
    ];

    /// The name as OpenVINO spells it (`none`, `sum`, `sub`, `prod`, `min`, `max`, `mean`).
    pub fn name(self) -> &'static str {
        match self {
            Reduction::None => "none",
            Reduction::Sum => "sum",
            Reduction::Sub => "sub",
            Reduction::Prod => "prod",
            Reduction::Min => "min",
            Reduction::Max => "max",
            Reduction::Mean => "mean",
        }
    }

    /// Parses a reduction name: OpenVINO's, or ONNX's `add` (= `sum`) and `mul` (= `prod`).
    pub fn from_name(name: &str) -> Option<Reduction> {
        match name {
            "add" => Some(Reduction::Sum),
            "mul" => Some(Reduction::Prod),
            other => Reduction::ALL.into_iter().find(|r| r.name() == other),
        }
    }

    /// Whether the reduction is defined on elements of `dtype` (every one is but `mean` on
    /// `bool`, which ScatterElementsUpdate-12 leaves out).
    pub fn defined_on(self, dtype: DType) -> bool {
        !(self == Reduction::Mean && dtype == DType::Bool)
    }
}

impl fmt::Display for Reduction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which operand `min` and `max` keep when neither is strictly smaller (equal values such as
/// `-0.0` and `+0.0`, or a NaN on either side). Only floats can tell the two apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TieBreak {
    /// The update: `max = if current > update { current } else { update }` (ONNX Runtime,
    /// OpenVINO ScatterElementsUpdate-12).
    Update,
    /// The current element: `max = if current < update { update } else { current }` (C++
    /// `std::max(current, update)`, OpenVINO ScatterNDUpdate-15).
    Current,
}

/// How a `bf16` reduction rounds its `f32` result (every framework computes `bf16` arithmetic
/// in `f32` and rounds once per update).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bf16Rounding {
    /// IEEE round to nearest, ties to even (ONNX's reference through `ml_dtypes`).
    NearestEven,
    /// OpenVINO's `ov::bfloat16(float)`: with `b` the `f32` bits,
    /// `(b + ((b & 0x1_0000) >> 1)) >> 16` in wrapping 32-bit arithmetic. It rounds half up
    /// when the kept last bit is 1 and truncates when it is 0, so it differs from IEEE
    /// rounding when the kept last bit is 0 and the dropped bits are above one half
    /// (`1.005859375` becomes `1.0`, not `1.0078125`). Its reference and CPU plugin both use it.
    OpenVino,
}

impl Bf16Rounding {
    /// The `bf16` bits of `value` under this rounding.
    pub fn round(self, value: f32) -> u16 {
        match self {
            Bf16Rounding::NearestEven => half::bf16::from_f32(value).to_bits(),
            Bf16Rounding::OpenVino => {
                let bits = value.to_bits();
                (bits.wrapping_add((bits & 0x1_0000) >> 1) >> 16) as u16
            }
        }
    }
}
