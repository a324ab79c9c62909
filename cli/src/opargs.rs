//! The flags shared by `run`, `explain` and `bench`: op, flavor, attributes, policy, shapes and
//! types, and how they become a [`Signature`].

use std::fmt;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, ValueEnum};
use gather_jit::{DType, Flavor, IndexType, NegativeIndices, Op, Options, OutOfRange, Signature};

use crate::failure::{Failure, Result};

/// The operator, as `--op` spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OpKind {
    /// Gather: whole slices along --axis (TensorRT mode DEFAULT).
    Gather,
    /// GatherElements: one element per index along --axis (TensorRT mode ELEMENT).
    GatherElements,
    /// GatherND: index tuples select slices (TensorRT mode ND).
    GatherNd,
}

impl OpKind {
    fn flag(self) -> &'static str {
        match self {
            OpKind::Gather => "gather",
            OpKind::GatherElements => "gather-elements",
            OpKind::GatherNd => "gather-nd",
        }
    }
}

/// `--negative`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Negative {
    /// `-s..=-1` count from the end of the dimension.
    Wrap,
    /// Every negative index is out of range.
    Invalid,
}

/// `--oob`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Oob {
    /// Fail, naming the position and value of the first bad index.
    Error,
    /// The slice of a bad index becomes zeros.
    Zero,
    /// Clamp to `0..=s-1`.
    Clamp,
}

/// The operator, whose rules apply, and its attributes.
#[derive(Args, Clone, Debug)]
pub struct OpArgs {
    /// The operator [default: the one the flavor defines; required for onnx and tensorrt]
    #[arg(long, value_enum)]
    pub op: Option<OpKind>,
    /// Whose rules apply (for tensorrt the mode follows --op)
    #[arg(long, default_value = "onnx", value_parser = flavor_parser())]
    pub flavor: Flavor,
    /// Axis of data to gather along (gather, gather-elements); negative counts from the rank [default: 0]
    #[arg(long, allow_negative_numbers = true)]
    pub axis: Option<i64>,
    /// Leading batch dims shared by data and indices (gather, gather-nd); for tensorrt the number of element-wise dims [default: 0]
    #[arg(long, allow_negative_numbers = true)]
    pub batch_dims: Option<i64>,
    /// What a negative index means [default: the flavor's rule]
    #[arg(long, value_enum)]
    pub negative: Option<Negative>,
    /// What an out-of-range index does [default: the flavor's rule]
    #[arg(long, value_enum)]
    pub oob: Option<Oob>,
}

impl OpArgs {
    /// The operator: `--op`, or the one an OpenVINO flavor defines.
    ///
    /// # Errors
    /// Without `--op` under a flavor that defines all three.
    pub fn kind(&self) -> Result<OpKind> {
        if let Some(kind) = self.op {
            return Ok(kind);
        }
        match self.flavor {
            Flavor::OpenvinoGather1 | Flavor::OpenvinoGather7 | Flavor::OpenvinoGather8 => {
                Ok(OpKind::Gather)
            }
            Flavor::OpenvinoGatherNd5 | Flavor::OpenvinoGatherNd8 => Ok(OpKind::GatherNd),
            Flavor::OpenvinoGatherElements6 => Ok(OpKind::GatherElements),
            // Flavors defining several operators (onnx, tensorrt) need --op.
            _ => Err(Failure::usage(format!(
                "--op is required with --flavor {} (gather, gather-elements or gather-nd)",
                self.flavor
            ))),
        }
    }

    /// The op with its attributes.
    ///
    /// # Errors
    /// `--axis` with gather-nd or `--batch-dims` with gather-elements, which those ops lack.
    pub fn op(&self) -> Result<Op> {
        let kind = self.kind()?;
        let reject = |flag: &str| {
            Failure::usage(format!(
                "--{flag} does not apply to --op {} (it has no such attribute)",
                kind.flag()
            ))
        };
        Ok(match kind {
            OpKind::Gather => Op::Gather {
                axis: self.axis.unwrap_or(0),
                batch_dims: self.batch_dims.unwrap_or(0),
            },
            OpKind::GatherElements => {
                if self.batch_dims.is_some() {
                    return Err(reject("batch-dims"));
                }
                Op::GatherElements {
                    axis: self.axis.unwrap_or(0),
                }
            }
            OpKind::GatherNd => {
                if self.axis.is_some() {
                    return Err(reject("axis"));
                }
                Op::GatherNd {
                    batch_dims: self.batch_dims.unwrap_or(0),
                }
            }
        })
    }

    /// The full signature on these shapes and types (not yet validated).
    ///
    /// # Errors
    /// As [`OpArgs::op`].
    pub fn signature(
        &self,
        data_shape: &[usize],
        indices_shape: &[usize],
        dtype: DType,
        index_type: IndexType,
    ) -> Result<Signature> {
        let options = Options {
            flavor: self.flavor,
            dtype,
            index_type,
            policy: None,
        };
        let mut sig = options.signature(self.op()?, data_shape, indices_shape);
        if let Some(negative) = self.negative {
            sig = sig.with_negative(match negative {
                Negative::Wrap => NegativeIndices::Wrap,
                Negative::Invalid => NegativeIndices::Invalid,
            });
        }
        if let Some(oob) = self.oob {
            sig = sig.with_out_of_range(match oob {
                Oob::Error => OutOfRange::Error,
                Oob::Zero => OutOfRange::Zero,
                Oob::Clamp => OutOfRange::Clamp,
            });
        }
        Ok(sig)
    }
}

/// Shapes and types of a signature given on the command line (`explain`, `bench`).
#[derive(Args, Clone, Debug)]
pub struct SignatureArgs {
    /// Shape of data, e.g. 2x3x4 (0 is an empty dim, `scalar` is rank 0)
    #[arg(long, value_name = "SHAPE", value_parser = parse_shape, allow_hyphen_values = true)]
    pub data_shape: Shape,
    /// Shape of indices, e.g. 2x1
    #[arg(long, value_name = "SHAPE", value_parser = parse_shape, allow_hyphen_values = true)]
    pub indices_shape: Shape,
    /// Element type of data and output
    #[arg(long, default_value = "f32", value_parser = dtype_parser())]
    pub dtype: DType,
    /// Integer type of the indices
    #[arg(long, default_value = "i64", value_parser = index_type_parser())]
    pub index_type: IndexType,
}

impl SignatureArgs {
    /// The signature these flags and `op` describe.
    ///
    /// # Errors
    /// As [`OpArgs::signature`].
    pub fn signature(&self, op: &OpArgs) -> Result<Signature> {
        op.signature(
            &self.data_shape.0,
            &self.indices_shape.0,
            self.dtype,
            self.index_type,
        )
    }
}

/// A tensor shape as written on the command line: `2x3x4`, `0` for an empty dim, `scalar`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape(pub Vec<usize>);

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("scalar");
        }
        let dims: Vec<String> = self.0.iter().map(usize::to_string).collect();
        f.write_str(&dims.join("x"))
    }
}

/// Parses `2x3x4` / `0` / `scalar`.
///
/// # Errors
/// Anything else, with the expected form.
pub fn parse_shape(text: &str) -> Result<Shape, String> {
    if text == "scalar" {
        return Ok(Shape(Vec::new()));
    }
    let expected =
        "expected dims joined by 'x' such as 2x3x4 (0 is an empty dim, 'scalar' is rank 0)";
    text.split('x')
        .map(|dim| {
            if dim.is_empty() || !dim.bytes().all(|b| b.is_ascii_digit()) {
                return Err(expected.to_string());
            }
            dim.parse::<usize>()
                .map_err(|_| format!("dim {dim} is too large ({expected})"))
        })
        .collect::<Result<Vec<usize>, String>>()
        .map(Shape)
}

/// `--flavor`: the library's flavor names, listed in `--help`.
pub fn flavor_parser() -> impl TypedValueParser<Value = Flavor> {
    PossibleValuesParser::new(Flavor::ALL.map(Flavor::name))
        .map(|name| Flavor::from_name(&name).expect("a listed flavor name"))
}

/// `--dtype`: `f16 bf16 f32 f64 i8 u8 i16 u16 i32 u32 i64 u64 bool`.
pub fn dtype_parser() -> impl TypedValueParser<Value = DType> {
    PossibleValuesParser::new(DType::ALL.map(DType::name))
        .map(|name| DType::from_name(&name).expect("a listed dtype name"))
}

/// `--index-type`: `i8 u8 i16 u16 i32 u32 i64 u64`.
pub fn index_type_parser() -> impl TypedValueParser<Value = IndexType> {
    PossibleValuesParser::new(IndexType::ALL.map(IndexType::name))
        .map(|name| IndexType::from_name(&name).expect("a listed index type name"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse_and_print() {
        assert_eq!(parse_shape("2x3x4"), Ok(Shape(vec![2, 3, 4])));
        assert_eq!(parse_shape("0"), Ok(Shape(vec![0])));
        assert_eq!(parse_shape("scalar"), Ok(Shape(vec![])));
        assert_eq!(Shape(vec![2, 0]).to_string(), "2x0");
        assert_eq!(Shape(vec![]).to_string(), "scalar");
        for bad in [
            "",
            "2x",
            "x2",
            "2xx3",
            "2,3",
            "-1",
            "2x3.0",
            "99999999999999999999999",
        ] {
            assert!(parse_shape(bad).is_err(), "{bad:?}");
        }
    }
}
