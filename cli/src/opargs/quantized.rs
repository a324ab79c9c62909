//! The quantized gathers' flags: how `--bits`, `--block-size`, `--format` and the axes become a
//! [`Quantization`] and a [`QuantizedSignature`].

use gather_jit::quant::Quantization;
use gather_jit::{
    BlockQuantization, DType, Flavor, IndexType, NegativeIndices, OutOfRange, QuantizedSignature,
};

use super::{Negative, Oob, OpArgs, OpKind};
use crate::failure::{Failure, Result};

impl OpArgs {
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
        if let Some(flag) = self.scatter_flag() {
            return Err(reject(flag));
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
        let mut policy = match self.flavor.map(|name| (name, name.gather())) {
            None => sig.policy,
            Some((_, Some(flavor @ (Flavor::Onnx | Flavor::TensorRt)))) => flavor.default_policy(),
            Some((other, _)) => {
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
    pub(super) fn quantized_flag(&self) -> Option<&'static str> {
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
}
