//! The flags shared by `run`, `explain` and `bench`: op, flavor, attributes, policy, shapes and
//! types, and how they become a [`Signature`].

use std::fmt;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, ValueEnum};
use gather_jit::{
    BlockQuantization, DType, Flavor, GgufFormat, IndexType, NegativeIndices, Op, Options,
    OutOfRange, Quantization, QuantizedSignature, Signature,
};

use crate::failure::{Failure, Result};
use crate::op_kernel::OpSignature;

/// The operator, as `--op` spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OpKind {
    /// Gather: whole slices along --axis (TensorRT mode DEFAULT).
    Gather,
    /// GatherElements: one element per index along --axis (TensorRT mode ELEMENT).
    GatherElements,
    /// GatherND: index tuples select slices (TensorRT mode ND).
    GatherNd,
    /// ONNX Runtime's GatherBlockQuantized: rows of uint8-packed 4- or 8-bit blocks with
    /// scales (--bits, --block-size, --gather-axis, --quantize-axis)
    GatherBlockQuantized,
    /// Rows of GGUF Q4_0 / Q8_0 blocks, as llama.cpp's get_rows (--format)
    GatherGguf,
}

impl OpKind {
    /// The spelling of `--op`.
    pub fn flag(self) -> &'static str {
        match self {
            OpKind::Gather => "gather",
            OpKind::GatherElements => "gather-elements",
            OpKind::GatherNd => "gather-nd",
            OpKind::GatherBlockQuantized => "gather-block-quantized",
            OpKind::GatherGguf => "gather-gguf",
        }
    }

    /// Whether the op is a quantized gather (packed inputs of its own, `quantized.rs`).
    pub fn is_quantized(self) -> bool {
        matches!(self, OpKind::GatherBlockQuantized | OpKind::GatherGguf)
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
    /// Whose rules apply (for tensorrt the mode follows --op); the quantized ops take onnx or
    /// tensorrt for their index rules [default: onnx; for the quantized ops, the op's own rule]
    #[arg(long, value_parser = flavor_parser())]
    pub flavor: Option<Flavor>,
    /// Axis of data to gather along (gather, gather-elements); negative counts from the rank [default: 0]
    #[arg(long, allow_hyphen_values = true, value_parser = parse_integer)]
    pub axis: Option<i64>,
    /// Leading batch dims shared by data and indices (gather, gather-nd); for tensorrt the number of element-wise dims [default: 0]
    #[arg(long, allow_hyphen_values = true, value_parser = parse_integer)]
    pub batch_dims: Option<i64>,
    /// What a negative index means [default: the flavor's rule]
    #[arg(long, value_enum)]
    pub negative: Option<Negative>,
    /// What an out-of-range index does [default: the flavor's rule]
    #[arg(long, value_enum)]
    pub oob: Option<Oob>,
    /// Bits per value (gather-block-quantized): 4 or 8
    #[arg(long, allow_hyphen_values = true, value_parser = clap::value_parser!(u8))]
    pub bits: Option<u8>,
    /// Values per scale along the quantize axis (gather-block-quantized): a power of two, at
    /// least 16
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = parse_count)]
    pub block_size: Option<u64>,
    /// Axis of data the indices select along (gather-block-quantized) [default: 0]
    #[arg(long, allow_hyphen_values = true, value_parser = parse_integer)]
    pub gather_axis: Option<i64>,
    /// Axis along which a block of values shares a scale (gather-block-quantized) [default: 1]
    #[arg(long, allow_hyphen_values = true, value_parser = parse_integer)]
    pub quantize_axis: Option<i64>,
    /// GGUF block format (gather-gguf): q4_0 or q8_0
    #[arg(long, value_parser = parse_gguf_format)]
    pub format: Option<GgufFormat>,
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
        match self.flavor() {
            Flavor::OpenvinoGather1 | Flavor::OpenvinoGather7 | Flavor::OpenvinoGather8 => {
                Ok(OpKind::Gather)
            }
            Flavor::OpenvinoGatherNd5 | Flavor::OpenvinoGatherNd8 => Ok(OpKind::GatherNd),
            Flavor::OpenvinoGatherElements6 => Ok(OpKind::GatherElements),
            // Flavors defining several operators (onnx, tensorrt) need --op.
            _ => Err(Failure::usage(format!(
                "--op is required with --flavor {} (gather, gather-elements or gather-nd)",
                self.flavor()
            ))),
        }
    }

    /// The flavor of the plain gathers: `--flavor`, else onnx.
    pub fn flavor(&self) -> Flavor {
        self.flavor.unwrap_or(Flavor::Onnx)
    }

    /// The signature of any op on these (logical) shapes and types, `zero_points` for a
    /// block-quantized signature with zero points (`--zero-points`).
    ///
    /// # Errors
    /// As [`OpArgs::signature`] and [`OpArgs::quantization`]; `--zero-points` with an op
    /// other than gather-block-quantized.
    pub fn op_signature(
        &self,
        data_shape: &[usize],
        indices_shape: &[usize],
        (dtype, index_type): (DType, IndexType),
        zero_points: bool,
    ) -> Result<OpSignature> {
        let kind = self.kind()?;
        if kind.is_quantized() {
            let quantization = self.quantization(zero_points)?;
            let sig = self.quantized_signature(
                quantization,
                data_shape,
                indices_shape,
                dtype,
                index_type,
            )?;
            return Ok(OpSignature::Quantized(sig));
        }
        if zero_points {
            return Err(Failure::usage(format!(
                "--zero-points does not apply to --op {} (it has no such input)",
                kind.flag()
            )));
        }
        let sig = self.signature(data_shape, indices_shape, dtype, index_type)?;
        Ok(OpSignature::Plain(sig))
    }

    /// The quantized gather's storage form and attributes, with zero points if `zero_points`.
    ///
    /// # Errors
    /// Not a quantized op; a required attribute missing (`--bits`, `--block-size`,
    /// `--format`); an attribute of another op given.
    pub fn quantization(&self, zero_points: bool) -> Result<Quantization> {
        let kind = self.kind()?;
        let reject = |flag: &str| {
            Failure::usage(format!(
                "--{flag} does not apply to --op {} (it has no such attribute)",
                kind.flag()
            ))
        };
        if self.axis.is_some() {
            return Err(reject("axis"));
        }
        if self.batch_dims.is_some() {
            return Err(reject("batch-dims"));
        }
        match kind {
            OpKind::GatherBlockQuantized => {
                if self.format.is_some() {
                    return Err(reject("format"));
                }
                let required = |flag: &str, accepted: &str| {
                    Failure::usage(format!(
                        "--{flag} is required with --op gather-block-quantized ({accepted})"
                    ))
                };
                let bits = self.bits.ok_or_else(|| required("bits", "4 or 8"))?;
                let block_size = self
                    .block_size
                    .ok_or_else(|| required("block-size", "a power of two, at least 16"))?;
                Ok(Quantization::Block(BlockQuantization {
                    gather_axis: self.gather_axis.unwrap_or(0),
                    quantize_axis: self.quantize_axis.unwrap_or(1),
                    block_size: usize::try_from(block_size).unwrap_or(usize::MAX),
                    bits,
                    zero_points,
                }))
            }
            OpKind::GatherGguf => {
                for (flag, given) in [
                    ("bits", self.bits.is_some()),
                    ("block-size", self.block_size.is_some()),
                    ("gather-axis", self.gather_axis.is_some()),
                    ("quantize-axis", self.quantize_axis.is_some()),
                    ("zero-points", zero_points),
                ] {
                    if given {
                        return Err(reject(flag));
                    }
                }
                let format = self.format.ok_or_else(|| {
                    Failure::usage("--format is required with --op gather-gguf (q4_0 or q8_0)")
                })?;
                Ok(Quantization::Gguf(format))
            }
            other => Err(Failure::usage(format!(
                "--op {} is not a quantized gather",
                other.flag()
            ))),
        }
    }

    /// The quantized signature on these shapes (`data_shape` logical) and types (not yet
    /// validated). Its index rule is the op's own (ONNX Runtime's, llama.cpp's), or that of
    /// `--flavor` where given, with the `--negative` / `--oob` overrides.
    ///
    /// # Errors
    /// A flavor that names one OpenVINO operator.
    pub fn quantized_signature(
        &self,
        quantization: Quantization,
        data_shape: &[usize],
        indices_shape: &[usize],
        dtype: DType,
        index_type: IndexType,
    ) -> Result<QuantizedSignature> {
        let sig = match quantization {
            Quantization::Block(q) => {
                QuantizedSignature::block_quantized(data_shape, indices_shape, q)
            }
            Quantization::Gguf(format) => {
                let rows = data_shape.first().copied().unwrap_or(0);
                let row_len = data_shape.get(1).copied().unwrap_or(0);
                let mut sig = QuantizedSignature::gguf(format, rows, row_len, indices_shape);
                // Validation reports a rank other than 2 on the shape as given.
                sig.data_shape = data_shape.to_vec();
                sig
            }
        };
        let mut policy = match self.flavor {
            None => sig.policy,
            Some(flavor @ (Flavor::Onnx | Flavor::TensorRt)) => flavor.default_policy(),
            Some(other) => {
                return Err(Failure::usage(format!(
                    "--flavor {other} names one OpenVINO operator, not {}: the quantized ops \
                     take --flavor onnx or tensorrt (their index rules), or none (the op's own)",
                    sig.op_name()
                )));
            }
        };
        if let Some(negative) = self.negative {
            policy.negative = match negative {
                Negative::Wrap => NegativeIndices::Wrap,
                Negative::Invalid => NegativeIndices::Invalid,
            };
        }
        if let Some(oob) = self.oob {
            policy.out_of_range = match oob {
                Oob::Error => OutOfRange::Error,
                Oob::Zero => OutOfRange::Zero,
                Oob::Clamp => OutOfRange::Clamp,
            };
        }
        Ok(sig
            .with_policy(policy)
            .with_dtype(dtype)
            .with_index_type(index_type))
    }

    /// Whether a quantized-only flag was given (an error with the other ops).
    fn quantized_flag(&self) -> Option<&'static str> {
        [
            ("bits", self.bits.is_some()),
            ("block-size", self.block_size.is_some()),
            ("gather-axis", self.gather_axis.is_some()),
            ("quantize-axis", self.quantize_axis.is_some()),
            ("format", self.format.is_some()),
        ]
        .into_iter()
        .find_map(|(flag, given)| given.then_some(flag))
    }

    /// The op with its attributes.
    ///
    /// # Errors
    /// `--axis` with gather-nd or `--batch-dims` with gather-elements, which those ops lack;
    /// a quantized op (see [`OpArgs::quantization`]) or one of its flags.
    pub fn op(&self) -> Result<Op> {
        let kind = self.kind()?;
        let reject = |flag: &str| {
            Failure::usage(format!(
                "--{flag} does not apply to --op {} (it has no such attribute)",
                kind.flag()
            ))
        };
        if let Some(flag) = self.quantized_flag() {
            return Err(reject(flag));
        }
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
            OpKind::GatherBlockQuantized | OpKind::GatherGguf => {
                return Err(Failure::usage(format!(
                    "--op {} is a quantized gather, which this command does not run",
                    kind.flag()
                )));
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
            flavor: self.flavor(),
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

/// Shapes and types of a signature given on the command line (`explain`, `bench`), and whether
/// it has zero points.
#[derive(Args, Clone, Debug)]
pub struct SignatureArgs {
    /// Shape of data: 2x3x4, 2,3,4 or [2,3,4] (0 is an empty dim; scalar or [] is rank 0)
    #[arg(long, value_name = "SHAPE", value_parser = parse_shape, allow_hyphen_values = true)]
    pub data_shape: Shape,
    /// Shape of indices, e.g. 2x1 or [2,1]
    #[arg(long, value_name = "SHAPE", value_parser = parse_shape, allow_hyphen_values = true)]
    pub indices_shape: Shape,
    /// Element type of data and output: f16 bf16 f32 f64 i8 u8 i16 u16 i32 u32 i64 u64 bool,
    /// or numpy's, ONNX's or OpenVINO's name (float32, int64, bfloat16, bool_, FP16, ...)
    #[arg(long, default_value = "f32", value_parser = parse_dtype, allow_hyphen_values = true)]
    pub dtype: DType,
    /// Integer type of the indices: i8 u8 i16 u16 i32 u32 i64 u64, or numpy's, ONNX's or
    /// OpenVINO's name (int32, int64, uint8, I64, ...)
    #[arg(long, default_value = "i64", value_parser = parse_index_type, allow_hyphen_values = true)]
    pub index_type: IndexType,
    /// gather-block-quantized: a signature with zero points (`run` takes a ZERO_POINTS file)
    #[arg(long)]
    pub zero_points: bool,
}

impl SignatureArgs {
    /// The signature these flags and `op` describe (`--data-shape` is the logical shape of a
    /// quantized op's data).
    ///
    /// # Errors
    /// As [`OpArgs::op_signature`].
    pub fn signature(&self, op: &OpArgs) -> Result<OpSignature> {
        op.op_signature(
            &self.data_shape.0,
            &self.indices_shape.0,
            (self.dtype, self.index_type),
            self.zero_points,
        )
    }
}

/// A tensor shape as written on the command line: `2x3x4`, `2,3,4`, `[2,3,4]`, `(2, 3, 4)`;
/// `0` for an empty dim; `scalar`, `[]` or `()` for rank 0.
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

/// The shape forms [`parse_shape`] takes, for its errors.
const SHAPE_FORMS: &str = "expected a shape such as 2x3x4, 2,3,4 or [2,3,4] \
     (0 is an empty dim; scalar or [] is rank 0)";

/// Parses a GGUF block format: `q4_0` or `q8_0` (any case).
///
/// # Errors
/// Anything else, naming the accepted forms.
pub fn parse_gguf_format(text: &str) -> Result<GgufFormat, String> {
    GgufFormat::from_name(text.trim())
        .ok_or_else(|| format!("expected a GGUF block format: q4_0 or q8_0, not '{text}'"))
}

/// Parses a shape in this crate's spelling (`2x3x4`), numpy's and ONNX's (`2,3,4`, `[2, 3, 4]`,
/// `(2, 3, 4)`, `(3,)`) or as rank 0 (`scalar`, `[]`, `()`).
///
/// # Errors
/// Anything else, naming the accepted forms.
pub fn parse_shape(text: &str) -> Result<Shape, String> {
    let text = text.trim();
    if text == "scalar" {
        return Ok(Shape(Vec::new()));
    }
    let bracketed = [('[', ']'), ('(', ')')]
        .into_iter()
        .find_map(|(open, close)| text.strip_prefix(open)?.strip_suffix(close));
    let dims = match bracketed {
        // A list or tuple may end in a comma, as numpy prints `(3,)`.
        Some(inner) => {
            let inner = inner.trim();
            if inner.is_empty() {
                return Ok(Shape(Vec::new()));
            }
            inner.strip_suffix(',').unwrap_or(inner)
        }
        None => text,
    };
    let separator = if dims.contains(',') { ',' } else { 'x' };
    dims.split(separator)
        .map(|dim| {
            let dim = dim.trim();
            if dim.is_empty() || !dim.bytes().all(|b| b.is_ascii_digit()) {
                return Err(SHAPE_FORMS.to_string());
            }
            dim.parse::<usize>()
                .map_err(|_| format!("dim {dim} is too large ({SHAPE_FORMS})"))
        })
        .collect::<Result<Vec<usize>, String>>()
        .map(Shape)
}

/// `--flavor`: the library's flavor names, listed in `--help`.
pub fn flavor_parser() -> impl TypedValueParser<Value = Flavor> {
    PossibleValuesParser::new(Flavor::ALL.map(Flavor::name))
        .map(|name| Flavor::from_name(&name).expect("a listed flavor name"))
}

/// Other names of the element types, as numpy (`float32`, `bool_`), ONNX's `TensorProto`
/// (`FLOAT16`, `DOUBLE`, `INT64`) and OpenVINO (`FP32`, `boolean`) write them; matched
/// ignoring case, like the IR's own names (`f32`, and OpenVINO's `I64`, `BF16`).
const DTYPE_SPELLINGS: [(&str, DType); 20] = [
    ("float16", DType::F16),
    ("half", DType::F16),
    ("fp16", DType::F16),
    ("bfloat16", DType::Bf16),
    ("float32", DType::F32),
    ("fp32", DType::F32),
    ("float64", DType::F64),
    ("double", DType::F64),
    ("fp64", DType::F64),
    ("int8", DType::I8),
    ("uint8", DType::U8),
    ("int16", DType::I16),
    ("uint16", DType::U16),
    ("int32", DType::I32),
    ("uint32", DType::U32),
    ("int64", DType::I64),
    ("uint64", DType::U64),
    ("bool_", DType::Bool),
    ("boolean", DType::Bool),
    ("bool8", DType::Bool),
];

/// The element type `text` names, in any spelling of [`DTYPE_SPELLINGS`] or the IR's own.
pub fn dtype_named(text: &str) -> Option<DType> {
    let lower = text.trim().to_ascii_lowercase();
    DType::from_name(&lower).or_else(|| {
        DTYPE_SPELLINGS
            .iter()
            .find(|(name, _)| *name == lower)
            .map(|&(_, dtype)| dtype)
    })
}

/// `--dtype`: an element type in the IR's spelling or numpy's, ONNX's or OpenVINO's.
///
/// # Errors
/// An unknown name, or `float` (f32 to ONNX, float64 to numpy), naming the accepted forms.
pub fn parse_dtype(text: &str) -> Result<DType, String> {
    if text.trim().eq_ignore_ascii_case("float") {
        return Err(
            "'float' is 32-bit in ONNX but 64-bit in numpy: write f32 (float32) or \
                    f64 (float64)"
                .to_string(),
        );
    }
    dtype_named(text).ok_or_else(|| {
        format!(
            "expected an element type: {} (or numpy's, ONNX's or OpenVINO's name such as \
             float32, int64, float16, bfloat16, bool_, FP32)",
            DType::ALL.map(DType::name).join(" ")
        )
    })
}

/// `--index-type`: an integer type in the IR's spelling or numpy's, ONNX's or OpenVINO's.
///
/// # Errors
/// A name that is not an integer type, naming the accepted forms.
pub fn parse_index_type(text: &str) -> Result<IndexType, String> {
    dtype_named(text)
        .and_then(|dtype| IndexType::from_name(dtype.name()))
        .ok_or_else(|| {
            format!(
                "expected an integer index type: {} (or numpy's, ONNX's or OpenVINO's name \
                 such as int32, int64, uint8, I64)",
                IndexType::ALL.map(IndexType::name).join(" ")
            )
        })
}

/// An integer flag (`--axis -1`, `--batch-dims 1`).
///
/// # Errors
/// Anything but an integer that fits in 64 bits.
pub fn parse_integer(text: &str) -> Result<i64, String> {
    text.trim()
        .parse()
        .map_err(|_| "expected an integer such as 1 or -1".to_string())
}

/// A count or a seed (`--seed 7`, `--time-ms 300`).
///
/// # Errors
/// Anything but a whole number from 0 to 2^64-1.
pub fn parse_count(text: &str) -> Result<u64, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("expected a whole number from 0 to {}", u64::MAX))
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
        for (numpy, dims) in [
            ("2,3,4", vec![2, 3, 4]),
            ("[2,3,4]", vec![2, 3, 4]),
            ("[2, 3, 4]", vec![2, 3, 4]),
            ("(2, 3, 4)", vec![2, 3, 4]),
            ("(3,)", vec![3]),
            ("[]", vec![]),
            ("()", vec![]),
        ] {
            assert_eq!(parse_shape(numpy), Ok(Shape(dims)), "{numpy}");
        }
        for bad in [
            "",
            "2x",
            "x2",
            "2xx3",
            "2,,3",
            "2x3,4",
            "[2,3",
            "[,]",
            "-1",
            "[-1]",
            "2x3.0",
            "99999999999999999999999",
        ] {
            assert!(parse_shape(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn dtypes_in_every_spelling() {
        for (text, dtype) in [
            ("f32", DType::F32),
            ("float32", DType::F32),
            ("FP32", DType::F32),
            ("FLOAT16", DType::F16),
            ("bfloat16", DType::Bf16),
            ("BF16", DType::Bf16),
            ("double", DType::F64),
            ("bool_", DType::Bool),
            ("boolean", DType::Bool),
            ("INT64", DType::I64),
            ("u8", DType::U8),
        ] {
            assert_eq!(parse_dtype(text), Ok(dtype), "{text}");
        }
        assert!(parse_dtype("float").unwrap_err().contains("numpy"));
        assert!(parse_dtype("f8").is_err());
        assert_eq!(parse_index_type("int32"), Ok(IndexType::I32));
        assert_eq!(parse_index_type("I64"), Ok(IndexType::I64));
        assert!(parse_index_type("float32").is_err());
    }
}
