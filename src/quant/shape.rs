//! The quantized gathers' shape rules, generic over [`Dim`] as the plain gathers' rule is: the
//! logical (dequantized) data shape from the stored one, and the output shape (Gather's
//! composition along the gather axis). [`QuantizedLayout`](super::QuantizedLayout)'s
//! validation, gather-jit-candle and the CLI call these rather than derive shapes of their own.

use super::{GgufFormat, Quantization};
use crate::error::{Error, Result};
use crate::ir::{Dim, OpName, checks, gather_shape};

impl Quantization {
    /// The operator that stores its table this way.
    pub(crate) fn op_name(self) -> OpName {
        match self {
            Quantization::Block(_) => OpName::GatherBlockQuantized,
            Quantization::Gguf(_) => OpName::GatherGguf,
        }
    }
}

/// Values per stored byte of block quantization with `bits` bits a value: two 4-bit values,
/// one 8-bit value.
pub(super) fn values_per_byte(op: OpName, bits: u8) -> Result<usize> {
    match bits {
        4 | 8 => Ok(usize::from(8 / bits)),
        _ => Err(Error::InvalidQuantization {
            op,
            what: format!("bits must be 4 or 8, not {bits}"),
        }),
    }
}

/// A GGUF table is `[rows, row_len]` (logical) or `[rows, bytes_per_row]` (stored).
pub(super) fn gguf_rank(op: OpName, rank: usize) -> Result<()> {
    if rank != 2 {
        return Err(Error::InvalidQuantization {
            op,
            what: format!("data must be [rows, row_len], not rank {rank}"),
        });
    }
    Ok(())
}

/// The logical (dequantized) shape of quantized data stored as `uint8` of shape `stored`: the
/// last dim times the values per byte (block quantization: 2 for 4 bits, 1 for 8), or a GGUF
/// row's bytes as values (`[rows, bytes_per_row]` of whole blocks, 32 values a block). This is
/// the shape a [`QuantizedSignature`](super::QuantizedSignature) takes. Generic over [`Dim`] as the plain gathers' rule
/// ([`crate::ir::output_shape`]) is.
///
/// ```
/// use gather_jit::quant::{BlockQuantization, GgufFormat, Quantization, logical_data_shape};
///
/// let q4 = Quantization::Block(BlockQuantization::default());
/// assert_eq!(logical_data_shape(q4, &[10usize, 64])?, [10, 128]);
/// let gguf = Quantization::Gguf(GgufFormat::Q8_0);
/// assert_eq!(logical_data_shape(gguf, &[10usize, 68])?, [10, 64]);
/// # Ok::<(), gather_jit::Error>(())
/// ```
///
/// # Errors
/// Stored data of rank 0 ([`Error::RankTooSmall`]); bits other than 4 or 8
/// ([`Error::InvalidQuantization`], as validation words it); a GGUF shape other than `[rows, bytes_per_row]`
/// of whole blocks ([`Error::InvalidQuantization`]); a logical dim that overflows
/// ([`Error::SizeOverflow`]).
pub fn logical_data_shape<D: Dim>(quantization: Quantization, stored: &[D]) -> Result<Vec<D>> {
    let op = quantization.op_name();
    checks::min_rank(op, "data", stored.len(), 1)?;
    let mut logical = stored.to_vec();
    let last = stored.len() - 1;
    let overflow = || checks::size_overflow("data", D::values(stored));
    match quantization {
        Quantization::Block(q) => {
            let per_byte = values_per_byte(op, q.bits)?;
            logical[last] = stored[last]
                .checked_mul_value(per_byte)
                .ok_or_else(overflow)?;
        }
        Quantization::Gguf(format) => {
            let blocks = (stored.len() == 2)
                .then(|| stored[1].exact_div_value(format.block_bytes()))
                .flatten()
                .ok_or_else(|| Error::InvalidQuantization {
                    op,
                    what: format!(
                        "stored data must be uint8 [rows, bytes_per_row] of whole {} blocks \
                         ({} bytes each), not {stored:?}",
                        format.name(),
                        format.block_bytes()
                    ),
                })?;
            logical[1] = blocks
                .checked_mul_value(GgufFormat::BLOCK_VALUES)
                .ok_or_else(overflow)?;
        }
    }
    Ok(logical)
}

/// The output shape of a quantized gather on logical data of dims `data` and indices of dims
/// `indices`: Gather's rule along the gather axis (`data[:axis] + indices + data[axis+1:]`;
/// a GGUF table's rows, axis 0). Generic over [`Dim`] as [`crate::ir::output_shape`] is.
///
/// ```
/// use gather_jit::quant::{GgufFormat, Quantization, quantized_output_shape};
///
/// let gguf = Quantization::Gguf(GgufFormat::Q4_0);
/// assert_eq!(quantized_output_shape(gguf, &[1000usize, 64], &[2, 3])?, [2, 3, 64]);
/// # Ok::<(), gather_jit::Error>(())
/// ```
///
/// # Errors
/// Data of rank 0 ([`Error::RankTooSmall`]), a gather axis out of range
/// ([`Error::AxisOutOfRange`]), GGUF data of a rank other than 2
/// ([`Error::InvalidQuantization`]).
pub fn quantized_output_shape<D: Dim>(
    quantization: Quantization,
    data: &[D],
    indices: &[D],
) -> Result<Vec<D>> {
    let op = quantization.op_name();
    let rank = data.len();
    checks::min_rank(op, "data", rank, 1)?;
    let axis = match quantization {
        Quantization::Block(q) => checks::normalise_axis(op, q.gather_axis, rank)?,
        Quantization::Gguf(_) => {
            gguf_rank(op, rank)?;
            0
        }
    };
    Ok(gather_shape(data, indices, axis))
}

// Expected shapes written by hand from ONNX Runtime's GatherBlockQuantized (two 4-bit values a
// byte along the last axis) and GGUF's block sizes (Q4_0 18 bytes, Q8_0 34, 32 values each).
#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::BlockQuantization;

    fn block(bits: u8, gather_axis: i64) -> Quantization {
        Quantization::Block(BlockQuantization {
            bits,
            gather_axis,
            ..BlockQuantization::default()
        })
    }

    #[test]
    fn stored_shapes_unpack_to_the_logical_ones() {
        assert_eq!(
            logical_data_shape(block(4, 0), &[10usize, 64]),
            Ok(vec![10, 128])
        );
        assert_eq!(
            logical_data_shape(block(8, 0), &[10usize, 64]),
            Ok(vec![10, 64])
        );
        assert_eq!(logical_data_shape(block(4, 0), &[7usize]), Ok(vec![14]));
        let q4 = Quantization::Gguf(GgufFormat::Q4_0);
        let q8 = Quantization::Gguf(GgufFormat::Q8_0);
        assert_eq!(logical_data_shape(q4, &[3usize, 36]), Ok(vec![3, 64]));
        assert_eq!(logical_data_shape(q8, &[3usize, 34]), Ok(vec![3, 32]));
    }

    #[test]
    fn stored_shapes_that_cannot_be_are_errors() {
        let q8 = Quantization::Gguf(GgufFormat::Q8_0);
        let e = logical_data_shape(q8, &[2usize, 33]).expect_err("not whole blocks");
        assert_eq!(
            e.to_string(),
            "GatherGGUF: stored data must be uint8 [rows, bytes_per_row] of whole q8_0 blocks \
             (34 bytes each), not [2, 33]"
        );
        assert!(logical_data_shape(q8, &[68usize]).is_err());
        let e = logical_data_shape(block(3, 0), &[2usize, 4]).expect_err("3 bits");
        assert_eq!(
            e.to_string(),
            "GatherBlockQuantized: bits must be 4 or 8, not 3"
        );
        let e = logical_data_shape::<usize>(block(4, 0), &[]).expect_err("rank 0");
        assert_eq!(e.category(), "rank too small");
        let e = logical_data_shape(block(4, 0), &[usize::MAX]).expect_err("overflow");
        assert_eq!(e.category(), "size overflow");
    }

    #[test]
    fn the_output_is_gathers_along_the_gather_axis() {
        assert_eq!(
            quantized_output_shape(block(4, 1), &[4usize, 8], &[2, 3]),
            Ok(vec![4, 2, 3])
        );
        assert_eq!(
            quantized_output_shape(block(4, -2), &[4usize, 8], &[5]),
            Ok(vec![5, 8])
        );
        let q4 = Quantization::Gguf(GgufFormat::Q4_0);
        assert_eq!(
            quantized_output_shape(q4, &[100usize, 64], &[2, 3]),
            Ok(vec![2, 3, 64])
        );
        let e = quantized_output_shape(block(4, 2), &[4usize, 8], &[1]).expect_err("axis 2");
        assert_eq!(e.category(), "axis out of range");
        let e = quantized_output_shape(q4, &[4usize, 8, 2], &[1]).expect_err("rank 3");
        assert_eq!(e.category(), "invalid quantization");
    }
}
