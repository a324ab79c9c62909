//! The flags shared by `run`, `explain` and `bench`: op, flavor, attributes, policy, shapes and
//! types, and how they become an [`OpSignature`] (their values are parsed in `values.rs`).

use clap::{Args, ValueEnum};
use gather_jit::quant::Quantization;
use gather_jit::{
    BlockQuantization, DType, Flavor, GgufFormat, IndexType, NegativeIndices, Op, Options,
    OutOfRange, QuantizedSignature, Signature,
};

use crate::failure::{Failure, Result};
use crate::op_kernel::OpSignature;
use crate::values::{
    Shape, flavor_parser, parse_count, parse_dtype, parse_gguf_format, parse_index_type,
    parse_integer, parse_shape,
};

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
