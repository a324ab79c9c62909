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

/// The bytes of a mutable slice of candle elements.
pub(crate) fn as_bytes_mut<T: WithDType>(values: &mut [T]) -> &mut [u8] {
    // SAFETY: as in `as_bytes`, and any bytes written are a valid `T`: candle's element types
    // are plain numbers, every bit pattern of which is a value.
    unsafe {
        std::slice::from_raw_parts_mut(
            values.as_mut_ptr().cast::<u8>(),
            std::mem::size_of_val(values),
        )
    }
}

/// The tensor `layout` describes within `storage`, C-contiguous: borrowed when the layout is
/// contiguous (any start offset), packed into a new buffer otherwise (strided, transposed,
/// broadcast views).
///
/// # Errors
/// A shape whose element count or byte size overflows (candle's own `elem_count` wraps, and a
/// stride-0 view of one element can claim any shape), a copy that cannot be allocated, or a
/// layout that reaches outside `storage`.
pub(crate) fn contiguous<'a, T: WithDType>(
    storage: &'a [T],
    layout: &Layout,
    what: &'static str,
) -> candle_core::Result<Cow<'a, [u8]>> {
    let dims = layout.dims();
    let contiguous = layout.is_contiguous();
    let too_large = || {
        let copy = if contiguous {
            ""
        } else {
            "could not allocate a contiguous copy of "
        };
        msg(format!(
            "{copy}{what} of shape {dims:?} ({}-byte elements): more elements or bytes than fit \
             in memory",
            size_of::<T>()
        ))
    };
    // Checked here: candle's `elem_count` and `contiguous_offsets` wrap on such shapes.
    let count = element_count(dims).ok_or_else(too_large)?;
    let bytes = count
        .checked_mul(size_of::<T>())
        .filter(|&bytes| bytes <= isize::MAX as usize)
        .ok_or_else(too_large)?;
    let runs_past = || msg(format!("{what}: layout {layout:?} runs past its storage"));
    if contiguous {
        let start = layout.start_offset();
        let values = start
            .checked_add(count)
            .and_then(|end| storage.get(start..end))
            .ok_or_else(runs_past)?;
        return Ok(Cow::Borrowed(as_bytes(values)));
    }
    let mut packed: Vec<u8> = Vec::new();
    packed
        .try_reserve_exact(bytes)
        .map_err(|_| allocation(&format!("a contiguous copy of {what}"), bytes))?;
    if bytes > 0 {
        pack(storage, layout, &mut packed, bytes, what)?.ok_or_else(runs_past)?;
    }
    Ok(Cow::Owned(packed))
}

/// The number of elements of a tensor of shape `dims`, `None` if it overflows `usize`.
pub(crate) fn element_count(dims: &[usize]) -> Option<usize> {
    dims.iter()
        .try_fold(1usize, |count, &dim| count.checked_mul(dim))
}

/// Appends the bytes of the non-empty view `layout` to `out` in row-major order, exactly
/// `bytes` of them, which `out` has room for; `Ok(None)` if the layout reaches outside
/// `storage` or does not hold exactly `bytes` bytes. `out` never grows past the room it has:
/// a size misjudged by the caller is an error, not a reallocation.
fn pack<T: WithDType>(
    storage: &[T],
    layout: &Layout,
    out: &mut Vec<u8>,
    bytes: usize,
    what: &'static str,
) -> candle_core::Result<Option<()>> {
    let dims = layout.dims();
    let strides = layout.stride();
    let Some(limit) = out
        .len()
        .checked_add(bytes)
        .filter(|&limit| limit <= out.capacity())
    else {
        return Ok(None);
    };
    if strides.len() != dims.len() {
        return Ok(None);
    }
    let outer = dims.len().saturating_sub(1);
    let mut position: Vec<usize> = Vec::new();
    position.try_reserve_exact(outer).map_err(|_| {
        allocation(
            &format!("the position in {what}"),
            outer.saturating_mul(size_of::<usize>()),
        )
    })?;
    position.resize(outer, 0);
    let walked = walk(
        storage,
        dims,
        strides,
        layout.start_offset(),
        &mut position,
        out,
        limit,
    );
    Ok(walked.filter(|()| out.len() == limit))
}

/// [`pack`]'s loop: the view of `dims` and `strides` from `start`, appended to `out` up to
/// `limit` bytes, `position` the odometer over the outer dims (all zeros).
fn walk<T: WithDType>(
    storage: &[T],
    dims: &[usize],
    strides: &[usize],
    mut start: usize,
    position: &mut [usize],
    out: &mut Vec<u8>,
    limit: usize,
) -> Option<()> {
    let outer = position.len();
    // The innermost dim is copied as one run when its stride is 1.
    let (inner, inner_stride) = match dims.len() {
        0 => (1, 1),
        rank => (dims[rank - 1], strides[rank - 1]),
    };
    loop {
        if inner_stride == 1 {
            put(out, limit, storage.get(start..start.checked_add(inner)?)?)?;
        } else {
            for i in 0..inner {
                let at = start.checked_add(i.checked_mul(inner_stride)?)?;
                put(out, limit, storage.get(at..at.checked_add(1)?)?)?;
            }
        }
        // Odometer over the outer dims, moving `start` by their strides.
        let mut dim = outer;
        loop {
            if dim == 0 {
                return Some(());
            }
            dim -= 1;
            if position[dim] + 1 < dims[dim] {
                position[dim] += 1;
                start = start.checked_add(strides[dim])?;
                break;
            }
            // Back to this dim's first position.
            start = start.checked_sub(strides[dim].checked_mul(position[dim])?)?;
            position[dim] = 0;
        }
    }
}

/// Appends `values` to `out` if they fit within `limit` bytes (within its capacity, so
/// `extend_from_slice` never reallocates); `None` if not.
fn put<T: WithDType>(out: &mut Vec<u8>, limit: usize, values: &[T]) -> Option<()> {
    let values = as_bytes(values);
    if values.len() > limit - out.len() {
        return None;
    }
    out.extend_from_slice(values);
    Some(())
}

#[cfg(test)]
mod tests {
    use candle_core::{Layout, Shape};

    use super::{contiguous, pack};

    /// A transposed 2 x 3 view of `0..6`: `[[0, 3], [1, 4], [2, 5]]`.
    fn transposed() -> Layout {
        Layout::new(Shape::from((3, 2)), vec![1, 3], 0)
    }

    #[test]
    fn pack_never_grows_past_the_room_it_was_given() {
        let storage: Vec<u8> = (0..6).collect();
        for room in [0, 1, 5] {
            let mut out: Vec<u8> = Vec::new();
            out.try_reserve_exact(room).expect("a few bytes");
            let capacity = out.capacity();
            let packed = pack(&storage, &transposed(), &mut out, room, "data").expect("no error");
            assert_eq!(packed, None, "6 bytes do not fit in {room}");
            assert_eq!(out.capacity(), capacity, "no reallocation");
            assert!(out.len() <= room);
        }
    }

    #[test]
    fn pack_refuses_a_view_smaller_than_its_room() {
        let storage: Vec<u8> = (0..6).collect();
        let mut out: Vec<u8> = Vec::with_capacity(7);
        let packed = pack(&storage, &transposed(), &mut out, 7, "data").expect("no error");
        assert_eq!(packed, None, "6 bytes are not the 7 expected");
    }

    #[test]
    fn a_transposed_view_is_packed_in_row_major_order() {
        let storage: Vec<u8> = (0..6).collect();
        let packed = contiguous(&storage, &transposed(), "data").expect("packed");
        assert_eq!(&*packed, [0, 3, 1, 4, 2, 5]);
    }
}
