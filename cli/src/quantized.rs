//! What the quantized gathers (`--op gather-block-quantized`, `--op gather-gguf`) need of their
//! own: their inputs are packed `uint8` data, scales and zero points rather than one data
//! tensor. `run` reads them into a signature here, `bench` draws them here; everything else
//! goes through the commands' one path ([`crate::op_kernel`]).

use gather_jit::ir::Validated;
use gather_jit::quant::{Quantization, QuantizedLayout};
use gather_jit::{DType, QuantizedSignature, Signature};
use gather_jit_workloads::XorShift;
use half::{bf16, f16};

use crate::buffer;
use crate::failure::{Failure, Result};
use crate::npy::Array;
use crate::npz::ArrayPath;
use crate::opargs::OpArgs;

/// The logical (dequantized) data shape of stored `uint8` data of `stored` shape.
///
/// # Errors
/// GGUF rows that are not whole blocks; data of rank 0.
fn logical_shape(quantization: Quantization, stored: &[usize], data: &str) -> Result<Vec<usize>> {
    gather_jit::quant::logical_data_shape(quantization, stored).map_err(|error| match error {
        // Block quantization's only such error is its bits, an attribute: worded as
        // validation words it, whatever the data.
        gather_jit::Error::InvalidQuantization {
            op: gather_jit::ir::OpName::GatherBlockQuantized,
            ..
        } => Failure::from(error),
        // The stored shape's: the file is named, as for the other inputs.
        _ => Failure::usage(format!("{data}: {error}")),
    })
}

/// An input array and where it was read from.
pub struct Input {
    /// Where it was read from.
    pub path: ArrayPath,
    /// The array.
    pub array: Array,
}

/// The signature of a quantized `run` on these arrays: packed `uint8` data and zero points,
/// integer indices, scales whose type is the output's (`f32` for GGUF), their shapes checked
/// against the data's.
///
/// # Errors
/// Data or zero points that are not `uint8`, indices that are not integers, scales that are
/// not floats, an invalid quantization or signature, scales or zero points of the wrong shape.
pub fn signature_of(
    op: &OpArgs,
    quantization: Quantization,
    (data, indices): (&Input, &Input),
    scales: Option<&Input>,
    zero_points: Option<&Input>,
) -> Result<QuantizedSignature> {
    require_u8(&data.array, &data.path)?;
    let index_type = indices.array.element.index_type().ok_or_else(|| {
        Failure::usage(format!(
            "{}: indices must have an integer type",
            indices.path
        ))
    })?;
    let dtype = match scales {
        Some(scales) => match scales.array.element.dtype() {
            Some(d @ (DType::F32 | DType::F16 | DType::Bf16)) => d,
            _ => {
                return Err(Failure::usage(format!(
                    "{}: scales must be float32, float16 or bfloat16",
                    scales.path
                )));
            }
        },
        None => DType::F32,
    };
    if let Some(zp) = zero_points {
        require_u8(&zp.array, &zp.path)?;
    }
    let logical = logical_shape(quantization, &data.array.shape, &data.path.to_string())?;
    let sig = op.quantized_signature(
        quantization,
        &logical,
        &indices.array.shape,
        dtype,
        index_type,
    )?;
    let layout = sig.validate()?;
    if let Some(scales) = scales {
        check_shape(
            &scales.path,
            &scales.array.shape,
            layout.scales_shape(),
            "scales",
        )?;
    }
    if let (Some(zp), Some(shape)) = (zero_points, layout.zero_points_bytes_shape()) {
        check_shape(&zp.path, &zp.array.shape, shape, "zero points")?;
    }
    Ok(sig)
}

fn require_u8(array: &Array, path: &ArrayPath) -> Result<()> {
    if array.element.dtype() == Some(DType::U8) {
        return Ok(());
    }
    Err(Failure::usage(format!(
        "{path}: quantized data and zero points must be uint8 (packed), not {}",
        array
            .element
            .dtype()
            .map_or("an unsupported type", DType::name)
    )))
}

fn check_shape(path: &ArrayPath, actual: &[usize], expected: &[usize], what: &str) -> Result<()> {
    if actual == expected {
        return Ok(());
    }
    Err(Failure::usage(format!(
        "{path}: {what} of shape {actual:?} do not fit the data: expected {expected:?}"
    )))
}

/// The Gather whose valid indices are the quantized gather's: Gather along the gather axis of
/// the logical data (the indices select along one dim of data, as Gather's do), so that both
/// families draw their random indices by one rule ([`crate::random::push_valid_indices`]).
///
/// # Errors
/// The logical data is too large for a Gather signature.
pub fn index_rule(layout: &QuantizedLayout) -> Result<Validated> {
    let sig = layout.signature();
    let axis = layout.gather_axis() as i64;
    let gather = Signature::gather(&sig.data_shape, &sig.indices_shape, axis, 0)
        .with_index_type(sig.index_type)
        .with_policy(sig.policy);
    Ok(gather.validate()?)
}

/// Random packed data becomes valid GGUF blocks: each block's `f16` scale made finite (and
/// small). Block-quantized data is valid as drawn.
pub fn finite_block_scales(layout: &QuantizedLayout, data: &mut [u8]) {
    if let Quantization::Gguf(format) = layout.signature().quantization {
        for block in data.chunks_mut(format.block_bytes()) {
            let d = f16::from_f32(f32::from(block[0]) / 4096.0);
            block[..2].copy_from_slice(&d.to_le_bytes());
        }
    }
}

/// Random finite scales, and random zero points where the signature has them (even as an empty
/// buffer).
///
/// # Errors
/// No memory for them.
pub fn random_scales(
    layout: &QuantizedLayout,
    rng: &mut XorShift,
) -> Result<(Vec<u8>, Option<Vec<u8>>)> {
    let sig = layout.signature();
    let mut scales = buffer::zeroed(layout.scales_bytes(), "the scales")?;
    for scale in scales.chunks_mut(sig.dtype.size()) {
        let value = (rng.next_u64() % 1000) as f32 / 8192.0;
        match sig.dtype {
            DType::F16 => scale.copy_from_slice(&f16::from_f32(value).to_ne_bytes()),
            DType::Bf16 => scale.copy_from_slice(&bf16::from_f32(value).to_ne_bytes()),
            _ => scale.copy_from_slice(&value.to_ne_bytes()),
        }
    }
    let zero_points = if layout.zero_points_bytes_shape().is_some() {
        let mut zp = buffer::zeroed(layout.zero_points_bytes(), "the zero points")?;
        rng.fill(&mut zp);
        Some(zp)
    } else {
        None
    };
    Ok((scales, zero_points))
}
