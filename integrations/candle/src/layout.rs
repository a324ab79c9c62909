//! From a candle storage and its [`Layout`] to the C-contiguous bytes a kernel reads: a slice
//! of the storage when the layout is contiguous, a packed copy otherwise.

use std::borrow::Cow;

use candle_core::{Layout, WithDType};

use crate::error::{allocation, msg};

/// The bytes of a slice of candle elements.
pub(crate) fn as_bytes<T: WithDType>(values: &[T]) -> &[u8] {
    // SAFETY: candle's element types are plain numbers (integers, IEEE and bf16/f8 floats):
    // no padding, every byte initialised, and `u8` has no alignment to keep.
    unsafe {
        std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
    }
}

/// The tensor `layout` describes within `storage`, C-contiguous: borrowed when the layout is
/// contiguous (any start offset), packed into a new buffer otherwise (strided, transposed,
/// broadcast views).
pub(crate) fn contiguous<'a, T: WithDType>(
    storage: &'a [T],
    layout: &Layout,
    what: &'static str,
) -> candle_core::Result<Cow<'a, [u8]>> {
    if let Some((start, end)) = layout.contiguous_offsets() {
        let values = storage
            .get(start..end)
            .ok_or_else(|| msg(format!("{what}: layout {layout:?} runs past its storage")))?;
        return Ok(Cow::Borrowed(as_bytes(values)));
    }
    let bytes = layout.shape().elem_count() * size_of::<T>();
    let mut packed: Vec<u8> = Vec::new();
    packed
        .try_reserve_exact(bytes)
        .map_err(|_| allocation(what, bytes))?;
    if bytes > 0 {
        pack(storage, layout, &mut packed)
            .ok_or_else(|| msg(format!("{what}: layout {layout:?} runs past its storage")))?;
    }
    Ok(Cow::Owned(packed))
}

/// Appends the bytes of the non-empty view `layout` to `out` in row-major order; `None` if
/// the layout reaches outside `storage`.
fn pack<T: WithDType>(storage: &[T], layout: &Layout, out: &mut Vec<u8>) -> Option<()> {
    let dims = layout.dims();
    let strides = layout.stride();
    let rank = dims.len();
    // The innermost dim is copied as one run when its stride is 1.
    let (inner, inner_stride) = match rank {
        0 => (1, 1),
        _ => (dims[rank - 1], strides[rank - 1]),
    };
    let outer = rank.saturating_sub(1);
    let mut position = vec![0usize; outer];
    let mut start = layout.start_offset();
    loop {
        if inner_stride == 1 {
            out.extend_from_slice(as_bytes(storage.get(start..start.checked_add(inner)?)?));
        } else {
            for i in 0..inner {
                let at = start.checked_add(i.checked_mul(inner_stride)?)?;
                out.extend_from_slice(as_bytes(storage.get(at..at + 1)?));
            }
        }
        // Odometer over the outer dims, moving `start` by their strides.
        let mut dim = outer;
        loop {
            if dim == 0 {
                return Some(());
            }
            dim -= 1;
            position[dim] += 1;
            start += strides[dim];
            if position[dim] < dims[dim] {
                break;
            }
            start -= strides[dim] * dims[dim];
            position[dim] = 0;
        }
    }
}
