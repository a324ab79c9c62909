//! Buffers for `gather-jit bench` allocated as numpy allocates its arrays: large ones are
//! advised transparent huge pages before they are first touched.
//!
//! numpy (`_set_madvise_hugepage`, on by default on Linux) calls `madvise(MADV_HUGEPAGE)` on
//! every array of 4 MiB or more, so the peers of `benches/peers/compare.py`, which all read
//! numpy buffers, get 2 MiB pages wherever the kernel's THP mode is `madvise`. A gather that
//! reads rows scattered over a large table then takes far fewer TLB misses (S5: about 20 % in
//! a model on a host in that mode). Without the same advice here, the comparison would measure
//! the allocator, not the kernels.

use std::fmt::Display;

use crate::buffer;
use crate::failure::Result;

/// Arrays of at least this many bytes are advised (numpy's threshold).
const HUGE_PAGE_MIN_BYTES: usize = 4 << 20;

/// An empty buffer with room for `len` bytes; when `advise` and `len` is at least 4 MiB, its
/// pages are advised huge before first use (a no-op off Linux, or where the kernel refuses).
///
/// # Errors
/// The allocation failed (`what` names the buffer).
pub fn with_capacity(len: usize, advise: bool, what: impl Display) -> Result<Vec<u8>> {
    let mut buffer = buffer::with_capacity(len, what)?;
    if advise && len >= HUGE_PAGE_MIN_BYTES {
        advise_huge_pages(buffer.as_mut_ptr(), len);
    }
    Ok(buffer)
}

/// A zeroed buffer of `len` bytes from [`with_capacity`].
///
/// # Errors
/// As [`with_capacity`].
pub fn zeroed(len: usize, advise: bool, what: impl Display) -> Result<Vec<u8>> {
    let mut buffer = with_capacity(len, advise, what)?;
    buffer.resize(len, 0);
    Ok(buffer)
}

#[cfg(target_os = "linux")]
fn advise_huge_pages(start: *mut u8, len: usize) {
    const PAGE: usize = 4096;
    // madvise takes whole pages: the page-aligned part of the allocation.
    let first = (start as usize).next_multiple_of(PAGE);
    let end = (start as usize).saturating_add(len) / PAGE * PAGE;
    if end > first {
        // SAFETY: `first..end` lies within this process's live allocation of `len` bytes from
        // `start`; MADV_HUGEPAGE only changes how its pages are backed, never their contents
        // or validity, and a failure (an old kernel, THP off) is harmless and ignored.
        unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE) };
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_start: *mut u8, _len: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_zeroed_or_refused() {
        for (len, advise) in [(0, true), (5, true), (5 << 20, true), (5 << 20, false)] {
            assert_eq!(zeroed(len, advise, "a test").unwrap(), vec![0u8; len]);
            assert!(with_capacity(len, advise, "a test").unwrap().capacity() >= len);
        }
        assert!(zeroed(usize::MAX, true, "a test").is_err());
    }
}
