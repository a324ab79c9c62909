//! The flags shared by `run`, `explain` and `bench`: op, flavor, attributes, policy, shapes and
//! types, and how they become an [`OpSignature`] (their values are parsed in `values.rs`);
//! the quantized gathers' and the scatters' own flags are in `quantized.rs` and `scatter.rs`.

mod quantized;
mod scatter;

use clap::{Args, ValueEnum};
use gather_jit::scatter::{Reduction, ScatterFlavor};
use gather_jit::{
    DType, Flavor, GgufFormat, IndexType, NegativeIndices, Op, Options, OutOfRange, Signature,
};

use crate::failure::{Failure, Result};
use crate::op_kernel::OpSignature;
use crate::values::{
    FlavorName, Shape, flavor_parser, parse_count, parse_dtype, parse_gguf_format,
    parse_index_type, parse_integer, parse_shape, reduction_parser,
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
    /// ScatterND: index tuples select the slices updates overwrite or reduce into
    /// (--reduction)
    ScatterNd,
    /// ScatterElements: one element per index along --axis (--reduction)
    ScatterElements,
    /// OpenVINO ScatterUpdate-3: whole slices along --axis, the inverse of Gather
    ScatterUpdate,
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
            OpKind::ScatterNd => "scatter-nd",
            OpKind::ScatterElements => "scatter-elements",
            OpKind::ScatterUpdate => "scatter-update",
        }
    }

    /// Whether the op is a quantized gather (packed inputs of its own, `quantized.rs`).
    pub fn is_quantized(self) -> bool {
        matches!(self, OpKind::GatherBlockQuantized | OpKind::GatherGguf)
    }

    /// Whether the op is a scatter (a third input, the updates; `scatter.rs`).
    pub fn is_scatter(self) -> bool {
        matches!(
            self,
            OpKind::ScatterNd | OpKind::ScatterElements | OpKind::ScatterUpdate
        )
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
    /// tensorrt for their index rules; the scatters take onnx, tensorrt or an
    /// openvino-scatter* flavor [default: onnx; for the quantized ops, the op's own rule; for
    /// scatter-update, openvino-scatterupdate3, the one flavor that defines it]
    #[arg(long, value_parser = flavor_parser())]
    pub flavor: Option<FlavorName>,
    /// Axis of data to gather or scatter along (gather, gather-elements, scatter-elements,
    /// scatter-update); negative counts from the rank [default: 0]
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
    /// How an update combines with the element it lands on (scatters), among those the flavor
    /// defines; add is sum, mul is prod [default: none]
    #[arg(long, value_parser = reduction_parser())]
    pub reduction: Option<Reduction>,
    /// Whether data's elements take part in the reduction (scatters;
    /// openvino-scatterelementsupdate12 alone takes false) [default: true]
    #[arg(long, value_name = "BOOL", value_parser = clap::value_parser!(bool))]
    pub use_init_val: Option<bool>,
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
        let name = self.flavor.unwrap_or(FlavorName::from(Flavor::Onnx));
        let defined = match (name.gather(), name.scatter()) {
            (
                Some(Flavor::OpenvinoGather1 | Flavor::OpenvinoGather7 | Flavor::OpenvinoGather8),
                _,
            ) => Some(OpKind::Gather),
            (Some(Flavor::OpenvinoGatherNd5 | Flavor::OpenvinoGatherNd8), _) => {
                Some(OpKind::GatherNd)
            }
            (Some(Flavor::OpenvinoGatherElements6), _) => Some(OpKind::GatherElements),
            (
                _,
                Some(
                    ScatterFlavor::OpenvinoScatterNdUpdate3
                    | ScatterFlavor::OpenvinoScatterNdUpdate15,
                ),
            ) => Some(OpKind::ScatterNd),
            (
                _,
                Some(
                    ScatterFlavor::OpenvinoScatterElementsUpdate3
                    | ScatterFlavor::OpenvinoScatterElementsUpdate12,
                ),
            ) => Some(OpKind::ScatterElements),
            (_, Some(ScatterFlavor::OpenvinoScatterUpdate3)) => Some(OpKind::ScatterUpdate),
            // Flavors defining several operators (onnx, tensorrt) need --op.
            _ => None,
        };
        defined.ok_or_else(|| {
            Failure::usage(format!(
                "--op is required with --flavor {name} (gather, gather-elements, gather-nd, \
                 scatter-nd or scatter-elements)"
            ))
        })
    }

    /// The flavor of the plain gathers: `--flavor`, else onnx.
    ///
    /// # Errors
    /// `--flavor` names a scatter flavor only.
    pub fn flavor(&self) -> Result<Flavor> {
        let Some(name) = self.flavor else {
            return Ok(Flavor::Onnx);
        };
        name.gather().ok_or_else(|| {
            Failure::usage(format!(
                "--flavor {name} is a scatter flavor; the gathers take {}",
                Flavor::ALL.map(Flavor::name).join(", ")
            ))
        })
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
        updates_shape: Option<&[usize]>,
    ) -> Result<OpSignature> {
        let kind = self.kind()?;
        if kind.is_scatter() {
            if zero_points {
                return Err(Failure::usage(format!(
                    "--zero-points does not apply to --op {} (it has no such input)",
                    kind.flag()
                )));
            }
            let sig = self.scatter_signature(
                [data_shape, indices_shape],
                updates_shape,
                dtype,
                index_type,
            )?;
            return Ok(OpSignature::Scatter(sig));
        }
        if updates_shape.is_some() {
            return Err(Failure::usage(format!(
                "--updates-shape does not apply to --op {} (only the scatters have updates)",
                kind.flag()
            )));
        }
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
        if let Some(flag) = self.quantized_flag().or(self.scatter_flag()) {
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
            OpKind::ScatterNd | OpKind::ScatterElements | OpKind::ScatterUpdate => {
                return Err(Failure::usage(format!(
                    "--op {} is a scatter, which this command does not run",
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
            flavor: self.flavor()?,
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
    /// Shape of indices, e.g. 2x1 or [2,1] (required, but with `bench --indices FILE`, whose
    /// shape it is)
    #[arg(long, value_name = "SHAPE", value_parser = parse_shape, allow_hyphen_values = true)]
    pub indices_shape: Option<Shape>,
    /// Element type of data and output: f16 bf16 f32 f64 i8 u8 i16 u16 i32 u32 i64 u64 bool,
    /// or numpy's, ONNX's or OpenVINO's name (float32, int64, bfloat16, bool_, FP16, ...)
    #[arg(long, default_value = "f32", value_parser = parse_dtype, allow_hyphen_values = true)]
    pub dtype: DType,
    /// Integer type of the indices: i8 u8 i16 u16 i32 u32 i64 u64, or numpy's, ONNX's or
    /// OpenVINO's name (int32, int64, uint8, I64, ...) [default: i64; with `bench --indices
    /// FILE`, the file's]
    #[arg(long, value_parser = parse_index_type, allow_hyphen_values = true)]
    pub index_type: Option<IndexType>,
    /// gather-block-quantized: a signature with zero points (`run` takes a ZERO_POINTS file)
    #[arg(long)]
    pub zero_points: bool,
    /// Shape of updates (scatters) [default: the one the op's rule derives from data's and
    /// indices' shapes]
    #[arg(long, value_name = "SHAPE", value_parser = parse_shape, allow_hyphen_values = true)]
    pub updates_shape: Option<Shape>,
}

impl SignatureArgs {
    /// The signature these flags and `op` describe (`--data-shape` is the logical shape of a
    /// quantized op's data).
    ///
    /// # Errors
    /// As [`OpArgs::op_signature`].
    pub fn signature(&self, op: &OpArgs) -> Result<OpSignature> {
        let indices_shape = self
            .indices_shape
            .as_ref()
            .ok_or_else(|| Failure::usage("--indices-shape is required"))?;
        let index_type = self.index_type.unwrap_or(IndexType::I64);
        self.signature_with_indices(op, &indices_shape.0, index_type)
    }

    /// The signature with the indices' shape and type given (as a file of indices has them)
    /// instead of `--indices-shape` and `--index-type`.
    ///
    /// # Errors
    /// As [`OpArgs::op_signature`].
    pub fn signature_with_indices(
        &self,
        op: &OpArgs,
        indices_shape: &[usize],
        index_type: IndexType,
    ) -> Result<OpSignature> {
        op.op_signature(
            &self.data_shape.0,
            indices_shape,
            (self.dtype, index_type),
            self.zero_points,
            self.updates_shape.as_ref().map(|shape| &shape.0[..]),
        )
    }
}
