//! The quantized gathers' definition as code: one value at a time, straight from the rules in
//! the module docs, for tests to compare the compiled kernels against.

use half::{bf16, f16};

use super::{GgufFormat, Quantization, QuantizedLayout};
use crate::error::{Error, Result};
use crate::ir::{DType, OutOfRange, unravel};

/// The output bytes (native-endian, C order) of the quantized gather `layout` on `data` (the
/// stored `uint8` bytes), `indices` and `scales` (native-endian) and, if the signature has
/// them, `zero_points`.
///
/// Indices are resolved in row-major order, once for each position of the dims before the
/// gather axis, as the kernels do. When the output is empty each index is checked once instead,
/// as for the other gathers (see [`crate::interp`]): nothing is read from data then, whatever
/// its other dims.
///
/// # Errors
/// [`Error::BufferMismatch`] if a buffer's length is not the layout's;
/// [`Error::IndexOutOfRange`] for the first bad index under [`OutOfRange::Error`] (and
/// [`OutOfRange::Clamp`] into an empty dim); [`Error::Allocation`] if the output cannot be
/// allocated.
pub fn interpret_quantized(
    layout: &QuantizedLayout,
    data: &[u8],
    indices: &[u8],
    scales: &[u8],
    zero_points: Option<&[u8]>,
) -> Result<Vec<u8>> {
    let sig = layout.signature();
    let zero_points = layout.check_buffers(data, indices, scales, zero_points)?;
    let mut output = Vec::new();
    output
        .try_reserve_exact(layout.output_bytes)
        .map_err(|_| Error::Allocation {
            what: "the output",
            bytes: layout.output_bytes,
        })?;
    let d = &sig.data_shape;
    let g = layout.gather_axis;
    if layout.output_bytes == 0 {
        check_each_index_once(layout, indices)?;
        return Ok(output);
    }
    let outer: usize = d[..g].iter().product();
    let inner: usize = d[g + 1..].iter().product();
    let element = sig.dtype.size();
    for o in 0..outer {
        for i in 0..layout.index_count() {
            let raw = sig.index_type.read(indices, i);
            let Some(row) = sig.policy.resolve(raw, d[g]) else {
                if sig.policy.out_of_range == OutOfRange::Zero {
                    output.resize(output.len() + inner * element, 0);
                    continue;
                }
                return Err(index_error(layout, i, raw));
            };
            for t in 0..inner {
                let flat = (o * d[g] + row) * inner + t;
                let value = match sig.quantization {
                    Quantization::Block(_) => block_value(layout, data, scales, zero_points, flat),
                    Quantization::Gguf(format) => gguf_value(format, d[1], data, flat),
                };
                push(&mut output, sig.dtype, value);
            }
        }
    }
    Ok(output)
}

/// The rule for an empty output: each index checked once, in row-major order, unless the
/// policy zero-fills whatever is out of range (then nothing is checked).
fn check_each_index_once(layout: &QuantizedLayout, indices: &[u8]) -> Result<()> {
    let sig = layout.signature();
    if sig.policy.out_of_range == OutOfRange::Zero {
        return Ok(());
    }
    let dim = sig.data_shape[layout.gather_axis];
    for i in 0..layout.index_count() {
        let raw = sig.index_type.read(indices, i);
        if sig.policy.resolve(raw, dim).is_none() {
            return Err(index_error(layout, i, raw));
        }
    }
    Ok(())
}

/// The error for index `i` (row-major), of value `raw`, which the policy rejects.
fn index_error(layout: &QuantizedLayout, i: usize, raw: i128) -> Error {
    let sig = layout.signature();
    let g = layout.gather_axis;
    Error::IndexOutOfRange {
        op: sig.op_name(),
        position: unravel(i, &sig.indices_shape),
        value: raw,
        data_dim: g,
        dim_size: sig.data_shape[g],
    }
}

/// The dequantized value of logical data element `flat` under block quantization.
fn block_value(
    layout: &QuantizedLayout,
    data: &[u8],
    scales: &[u8],
    zero_points: Option<&[u8]>,
    flat: usize,
) -> f32 {
    let sig = layout.signature();
    let bits = layout.bits();
    let q = packed(data, flat, bits);
    // The scale's coordinates are the value's, with the quantize axis divided by the block.
    let mut coords = unravel(flat, &sig.data_shape);
    coords[layout.quantize_axis] /= layout.block_size;
    let scales_shape = layout.scales_shape();
    let scale_index = coords
        .iter()
        .zip(scales_shape)
        .fold(0, |n, (&c, &dim)| n * dim + c);
    let scale = read_float(scales, scale_index, sig.dtype);
    let zero_point = match zero_points {
        Some(zp) => {
            // Zero points pack along the scales' last axis, each row whole bytes.
            let (row_len, row_bytes) = layout.zero_point_row();
            let (row, column) = (scale_index / row_len, scale_index % row_len);
            let first = row * row_bytes * (8 / usize::from(bits));
            packed(zp, first + column, bits)
        }
        None => layout.default_zero_point(),
    };
    (q - zero_point) as f32 * scale
}

/// Value `n` of bytes holding `bits`-bit unsigned values, low bits first.
fn packed(bytes: &[u8], n: usize, bits: u8) -> i32 {
    match bits {
        4 => i32::from((bytes[n / 2] >> (4 * (n % 2))) & 0xf),
        _ => i32::from(bytes[n]),
    }
}

/// The dequantized value of logical element `flat` of a GGUF table with `row_len` values a row.
fn gguf_value(format: GgufFormat, row_len: usize, data: &[u8], flat: usize) -> f32 {
    let (row, column) = (flat / row_len, flat % row_len);
    let values = GgufFormat::BLOCK_VALUES;
    let row_bytes = row_len / values * format.block_bytes();
    let block = row * row_bytes + column / values * format.block_bytes();
    let d = f16::from_le_bytes([data[block], data[block + 1]]).to_f32();
    let j = column % values;
    let q = match format {
        GgufFormat::Q4_0 => {
            let byte = data[block + 2 + j % 16];
            i32::from(if j < 16 { byte & 0xf } else { byte >> 4 }) - 8
        }
        GgufFormat::Q8_0 => i32::from(data[block + 2 + j] as i8),
    };
    q as f32 * d
}

/// Element `i` of native-endian floats of type `dtype`, as `f32` (exactly).
pub(crate) fn read_float(bytes: &[u8], i: usize, dtype: DType) -> f32 {
    let size = dtype.size();
    let b = &bytes[i * size..(i + 1) * size];
    match dtype {
        DType::F16 => f16::from_ne_bytes([b[0], b[1]]).to_f32(),
        DType::Bf16 => bf16::from_ne_bytes([b[0], b[1]]).to_f32(),
        _ => f32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
    }
}

/// Appends `value` rounded once to `dtype` (nearest, ties to even), native-endian.
fn push(output: &mut Vec<u8>, dtype: DType, value: f32) {
    match dtype {
        DType::F16 => output.extend_from_slice(&f16::from_f32(value).to_ne_bytes()),
        DType::Bf16 => output.extend_from_slice(&bf16::from_f32(value).to_ne_bytes()),
        _ => output.extend_from_slice(&value.to_ne_bytes()),
    }
}
