//! Buffers for `gather-jit bench` allocated as numpy allocates its arrays: large ones are
//! advised transparent huge pages before they are first touched.
//!
//! numpy (`_set_madvise_hugepage`, on by default on Linux) calls `madvise(MADV_HUGEPAGE)` on
//! every array of 4 MiB or more, so the peers of `benches/peers/compare.py`, which all read
//! numpy buffers, get 2 MiB pages wherever the kernel's THP mode is `madvise`. A gather that
//! reads rows scattered over a large table then takes far fewer TLB misses (S5: about 20 % in
//! a model on a host in that mode). Without the same advice here, the comparison would measure
//! the allocator, not the kernels.

/// Arrays of at least this many bytes are advised (numpy's threshold).
const HUGE_PAGE_MIN_BYTES: usize = 4 << 20;

/// A zeroed buffer of `len` bytes; when `advise` and `len` is at least 4 MiB, its pages are
/// advised huge before first use (a no-op off Linux, or where the kernel refuses).
pub fn zeroed(len: usize, advise: bool) -> Vec<u8> {
    let mut buffer = Vec::with_capacity(len);
    if advise && len >= HUGE_PAGE_MIN_BYTES {
        advise_huge_pages(buffer.as_mut_ptr(), len);
    }
    buffer.resize(len, 0);
    buffer
}

/// A copy of `bytes` in a buffer from [`zeroed`].
pub fn copied(bytes: &[u8], advise: bool) -> Vec<u8> {
    copied_at(0, bytes, advise)
}

/// A copy of `bytes` starting `offset` bytes into a buffer from [`zeroed`] (`offset` zeros
/// before it).
pub fn copied_at(offset: usize, bytes: &[u8], advise: bool) -> Vec<u8> {
    let mut buffer = zeroed(offset + bytes.len(), advise);
    buffer[offset..].copy_from_slice(bytes);
    buffer
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
    fn buffers_hold_what_they_were_given() {
        for (len, advise) in [(0, true), (5, true), (5 << 20, true), (5 << 20, false)] {
            assert_eq!(zeroed(len, advise), vec![0u8; len]);
            let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            assert_eq!(copied(&bytes, advise), bytes);
            for offset in [1, 16, 4095] {
                let shifted = copied_at(offset, &bytes, advise);
                assert!(shifted[..offset].iter().all(|&b| b == 0), "offset {offset}");
                assert_eq!(shifted[offset..], bytes[..], "offset {offset}");
            }
        }
    }
}
