//! The hand-written copy routines: the helpers compiled kernels call for large slices
//! ([`prefetch_copy`] and its AVX twin, [`stream_copy`]) and for the rows of a band
//! ([`prefetch_rows`]), and the packing of a band's rows before the kernel walks them
//! ([`pack_band`]). Each touches exactly the bytes it is given; prefetches may point anywhere.
#![allow(
    unsafe_code,
    reason = "the copy routines kernels call read and write raw buffers the kernel's contract sizes"
)]

use crate::specialize::Band;

/// Asks the CPU to bring `indices_bytes` from `indices` and `output_bytes` from `output` (for
/// writing) into the cache. The rows loop of a band calls it for the row it walks
/// `PREFETCH_ROWS_AHEAD` rows later (`codegen/lower/mod.rs`) (see there).
///
/// The addresses may be anything: prefetches never fault.
pub(crate) extern "C" fn prefetch_rows(
    indices: *const u8,
    indices_bytes: usize,
    output: *const u8,
    output_bytes: usize,
) {
    prefetch_lines::<false>(indices, indices_bytes.min(PREFETCH_ROW_LIMIT_BYTES));
    prefetch_lines::<true>(output, output_bytes.min(PREFETCH_ROW_LIMIT_BYTES));
}

/// At most this many bytes of a band row's indices and output are prefetched by
/// [`prefetch_rows`].
const PREFETCH_ROW_LIMIT_BYTES: usize = 4096;

/// Copies `len` bytes from `source` to `dest` as the kernels copy large slices (see
/// [`prefetch_copy`]), prefetching the start of `next` as it goes: for Rust code around the
/// kernels, such as the packing of a band.
///
/// # Safety
/// As [`prefetch_copy`].
pub(crate) unsafe fn copy_prefetching(
    dest: *mut u8,
    source: *const u8,
    len: usize,
    next: *const u8,
) {
    // SAFETY: forwarded from this function's contract; the helper suits the host.
    unsafe { prefetch_copy_for_host()(dest, source, len, next) }
}

/// Prefetches the cache lines of the first `bytes` from `start`, for writing when `FOR_WRITE`
/// (`prefetchw`). Any address will do: prefetches never fault. A no-op off x86-64.
fn prefetch_lines<const FOR_WRITE: bool>(start: *const u8, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_ET0, _MM_HINT_T0, _mm_prefetch};
        for line in (0..bytes).step_by(64) {
            let address = start.wrapping_add(line).cast::<i8>();
            // SAFETY: a prefetch is only a hint: it never faults, whatever the address
            // (`wrapping_add` keeps the pointer arithmetic itself defined); SSE is part of
            // x86-64.
            unsafe {
                if FOR_WRITE {
                    _mm_prefetch::<_MM_HINT_ET0>(address)
                } else {
                    _mm_prefetch::<_MM_HINT_T0>(address)
                }
            };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (start, bytes);
}

/// At most this many bytes of the next slice are prefetched by [`prefetch_copy`], two cache
/// lines per 128 bytes copied; beyond that the hardware prefetcher catches on by itself
/// (`cargo bench --bench gather -- S5/jit`).
#[cfg(target_arch = "x86_64")]
const PREFETCH_LIMIT_BYTES: usize = 4096;

/// The signature of [`prefetch_copy`] and [`prefetch_copy_avx`]: `(dest, source, len, next)`.
pub(crate) type PrefetchCopy = unsafe extern "C" fn(*mut u8, *const u8, usize, *const u8);

/// The copy helper for slices copied with a prefetch of the next ([`prefetch_copy`] or, where
/// the host has AVX, [`prefetch_copy_avx`]): the one the kernels link and
/// [`copy_prefetching`] calls.
pub(crate) fn prefetch_copy_for_host() -> PrefetchCopy {
    #[cfg(target_arch = "x86_64")]
    {
        if host_is_amd() {
            return prefetch_memcpy;
        }
        if std::arch::is_x86_feature_detected!("avx") {
            return prefetch_copy_avx;
        }
    }
    prefetch_copy
}

/// Whether the host's processor is AMD's, whose `rep movsb` (glibc's `memcpy` for large
/// copies) copies rows in step or out of step alike and about twice as fast as this module's
/// own loops (`cargo bench --bench gather -- 'S5/|copy_out_of_step'`), unlike Intel's, for
/// which the own loops exist.
#[cfg(target_arch = "x86_64")]
fn host_is_amd() -> bool {
    static AMD: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AMD.get_or_init(|| {
        // Leaf 0 names the vendor in ebx, edx, ecx: "AuthenticAMD".
        let leaf = std::arch::x86_64::__cpuid(0);
        let word = |bytes: &[u8; 4]| u32::from_le_bytes(*bytes);
        (leaf.ebx, leaf.edx, leaf.ecx) == (word(b"Auth"), word(b"enti"), word(b"cAMD"))
    })
}

/// [`prefetch_copy`] by `memcpy`, after prefetching the start of `next`: for AMD hosts (see
/// [`host_is_amd`]).
///
/// # Safety
/// As [`prefetch_copy`].
#[cfg(target_arch = "x86_64")]
unsafe extern "C" fn prefetch_memcpy(
    dest: *mut u8,
    source: *const u8,
    len: usize,
    next: *const u8,
) {
    prefetch_lines::<false>(next, len.min(PREFETCH_LIMIT_BYTES));
    // SAFETY: forwarded from this function's contract.
    unsafe { std::ptr::copy_nonoverlapping(source, dest, len) };
}

/// Copies `len` bytes in 128-byte chunks, calling `copy_chunk(offset)` for each (the last one
/// overlapping the one before when 128 does not divide `len`, which rewrites the same bytes),
/// and prefetches the cache lines of `next`, and for writing those of `next_dest`, at the same
/// offsets as it goes, up to [`PREFETCH_LIMIT_BYTES`]: the prefetches spread over the copy
/// instead of queueing before it. Callers pass as `next_dest` the bytes just after their
/// destination, where the next slice goes when slices are written one after another (the
/// output of most gathers, a packed band); prefetching them for writing saves a little on S5.
///
/// # Safety
/// `len` is at least 128, and `copy_chunk(at)` is sound for every `at` with `at + 128 <= len`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn copy_prefetching_next(
    len: usize,
    next: *const u8,
    next_dest: *const u8,
    mut copy_chunk: impl FnMut(usize),
) {
    debug_assert!(len >= 128, "copy_prefetching_next of {len} bytes");
    let prefetch_end = len.min(PREFETCH_LIMIT_BYTES);
    let mut done = 0;
    while done + 128 <= len {
        if done < prefetch_end {
            prefetch_lines::<false>(next.wrapping_add(done), 128);
            prefetch_lines::<true>(next_dest.wrapping_add(done), 128);
        }
        copy_chunk(done);
        done += 128;
    }
    if done < len {
        copy_chunk(len - 128);
    }
}

/// Copies `len` bytes from `source` to `dest`, bringing the start of `next` (the slice the
/// following lookup copies) into the cache as it goes, so that its latency overlaps this copy.
/// Generated code calls it (or [`prefetch_copy_avx`]) for slices too large to inline: random
/// rows of a large table miss the cache, and the prefetch overlaps the next row's misses with
/// this copy. Its own loop, not glibc's `memcpy`, whose `rep movsb` is several times slower
/// when output and data are out of step by a few bytes (`cargo bench --bench gather --
/// 'S5/|copy_out_of_step'`).
///
/// # Safety
/// `source` is readable and `dest` writable for `len` bytes, and the two do not overlap.
/// `next` may be any address: prefetches never fault.
unsafe extern "C" fn prefetch_copy(dest: *mut u8, source: *const u8, len: usize, next: *const u8) {
    #[cfg(target_arch = "x86_64")]
    if len >= 128 {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_storeu_si128};
        let copy_chunk = |at: usize| {
            for lane in (0..128).step_by(16) {
                // SAFETY: `at + 128 <= len` (`copy_prefetching_next`'s promise) keeps both
                // accesses within the caller's ranges; unaligned moves; SSE2 is part of x86-64.
                unsafe {
                    let chunk = _mm_loadu_si128(source.add(at + lane).cast::<__m128i>());
                    _mm_storeu_si128(dest.add(at + lane).cast::<__m128i>(), chunk);
                }
            }
        };
        // SAFETY: `len >= 128`; `copy_chunk` is sound for every chunk within `len` (above).
        unsafe { copy_prefetching_next(len, next, dest.wrapping_add(len), copy_chunk) };
        return;
    }
    prefetch_lines::<false>(next, len);
    // SAFETY: forwarded from this function's contract.
    unsafe { std::ptr::copy_nonoverlapping(source, dest, len) };
}

/// [`prefetch_copy`] with 32-byte moves, for hosts with AVX.
///
/// # Safety
/// As [`prefetch_copy`], and the host has AVX.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe extern "C" fn prefetch_copy_avx(
    dest: *mut u8,
    source: *const u8,
    len: usize,
    next: *const u8,
) {
    use std::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm256_storeu_si256};
    if len < 128 {
        // SAFETY: forwarded from this function's contract.
        return unsafe { prefetch_copy(dest, source, len, next) };
    }
    let copy_chunk = |at: usize| {
        for lane in (0..128).step_by(32) {
            // SAFETY: `at + 128 <= len` (`copy_prefetching_next`'s promise) keeps both
            // accesses within the caller's ranges; unaligned moves; the caller guarantees AVX.
            unsafe {
                let chunk = _mm256_loadu_si256(source.add(at + lane).cast::<__m256i>());
                _mm256_storeu_si256(dest.add(at + lane).cast::<__m256i>(), chunk);
            }
        }
    };
    // SAFETY: `len >= 128`; `copy_chunk` is sound for every chunk within `len` (above).
    unsafe { copy_prefetching_next(len, next, dest.wrapping_add(len), copy_chunk) };
}

/// Copies `len` bytes from `source` to `dest` with non-temporal stores (on x86-64; a plain
/// copy elsewhere). Generated code calls it for large slices of large outputs (`Lookup::streaming`).
///
/// # Safety
/// `source` is readable and `dest` writable for `len` bytes, and the two do not overlap.
pub(crate) unsafe extern "C" fn stream_copy(dest: *mut u8, source: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        // Streaming stores need 16-byte aligned destinations: copy a head to get there.
        let head = dest.align_offset(16).min(len);
        // SAFETY: `head <= len`; the caller guarantees both ranges for `len` bytes.
        unsafe { std::ptr::copy_nonoverlapping(source, dest, head) };
        let mut done = head;
        while done + 16 <= len {
            // SAFETY: `done + 16 <= len` keeps both accesses in range; `dest + done` is 16-byte
            // aligned (advanced from an aligned start by 16s); SSE2 is part of x86-64.
            unsafe {
                let chunk = _mm_loadu_si128(source.add(done).cast::<__m128i>());
                _mm_stream_si128(dest.add(done).cast::<__m128i>(), chunk);
            }
            done += 16;
        }
        // SAFETY: the tail `done..len` is within both ranges.
        unsafe { std::ptr::copy_nonoverlapping(source.add(done), dest.add(done), len - done) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: forwarded from this function's contract.
    unsafe {
        std::ptr::copy_nonoverlapping(source, dest, len)
    };
}

/// How many rows ahead [`pack_band`] prefetches its source. The rows of a band are usually a
/// page or more apart, where the hardware prefetchers do not follow; 8 rows ahead is a few
/// percent faster than none, 16 slower (`cargo bench --bench gather -- S7/jit`).
const PACK_PREFETCH_ROWS_AHEAD: usize = 8;

/// Grows `scratch` (fallibly) to hold `band` packed, so that [`pack_band`] allocates nothing;
/// it never shrinks. `Err` carries the bytes that could not be allocated.
pub(crate) fn grow_band_scratch(scratch: &mut Vec<u128>, band: Band) -> Result<(), usize> {
    let words = (band.rows * band.row_bytes).div_ceil(16) as usize;
    if let Some(more) = words.checked_sub(scratch.len()) {
        scratch.try_reserve_exact(more).map_err(|_| words * 16)?;
        scratch.resize(words, 0);
    }
    Ok(())
}

/// Copies `band.rows` rows of `band.row_bytes` bytes, `band.row_stride` bytes apart from
/// `source` on, into `scratch`, packed (`row_bytes` apart), and returns where they start.
/// The source rows [`PACK_PREFETCH_ROWS_AHEAD`] ahead are prefetched (past the last row
/// too: a prefetch never faults).
///
/// # Safety
/// `source + r * row_stride .. + row_bytes` is readable for every `r < rows`, and `rows *
/// row_bytes` fits in `isize` (both hold for a plan's band, whose rows lie inside data);
/// `scratch` holds at least `rows * row_bytes` bytes ([`grow_band_scratch`]).
pub(crate) unsafe fn pack_band(
    source: *const u8,
    band: Band,
    scratch: &mut Vec<u128>,
) -> *const u8 {
    let (rows, row_stride, row_bytes) = (
        band.rows as usize,
        band.row_stride as usize,
        band.row_bytes as usize,
    );
    debug_assert!(scratch.len() * 16 >= rows * row_bytes, "scratch not grown");
    let dest = scratch.as_mut_ptr().cast::<u8>();
    for row in 0..rows {
        let ahead = (row + PACK_PREFETCH_ROWS_AHEAD).wrapping_mul(row_stride);
        let ahead = source.wrapping_add(ahead);
        // SAFETY: the caller guarantees the source row and that the destination row lies
        // within `scratch`; `scratch` is ours, so they do not overlap;
        // `ahead` is only prefetched.
        unsafe {
            copy_prefetching(
                dest.add(row * row_bytes),
                source.add(row * row_stride),
                row_bytes,
                ahead,
            )
        };
    }
    dest
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both copy helpers (the AVX one where the host has it), at lengths around their
    /// 128-byte chunks and at every alignment of source and destination: exactly `len` bytes
    /// land, the bytes after them stay, whatever `next` points at.
    #[test]
    fn prefetch_copy_copies_exactly_len_bytes_whatever_next_points_at() {
        #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
        let mut helpers: Vec<(&str, PrefetchCopy)> = vec![("sse2", prefetch_copy)];
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx") {
            helpers.push(("avx", prefetch_copy_avx));
        }
        let source: Vec<u8> = (0..6000).map(|i| (i % 251) as u8).collect();
        for (name, copy) in helpers {
            for len in [
                0, 1, 63, 64, 127, 128, 129, 255, 513, 1000, 3072, 4096, 4097, 5000,
            ] {
                for (from, to) in [(0, 0), (16, 0), (0, 16), (1, 7), (33, 48)] {
                    for next in [
                        std::ptr::null(),
                        usize::MAX as *const u8,
                        source.as_ptr().wrapping_add(1 << 40),
                        source.as_ptr(),
                    ] {
                        let mut dest = vec![0xEEu8; to + len + 200];
                        // SAFETY: `source[from..from + len]` and `dest[to..to + len]` are in
                        // bounds and do not overlap; the AVX helper is listed only where the
                        // host has AVX; `next` is only prefetched, which never faults.
                        unsafe {
                            copy(
                                dest.as_mut_ptr().add(to),
                                source.as_ptr().add(from),
                                len,
                                next,
                            )
                        };
                        let case = format!("{name}: len {len}, from {from}, to {to}, {next:?}");
                        assert_eq!(dest[to..to + len], source[from..from + len], "{case}");
                        assert!(dest[..to].iter().all(|&b| b == 0xEE), "before: {case}");
                        assert!(dest[to + len..].iter().all(|&b| b == 0xEE), "after: {case}");
                    }
                }
            }
        }
    }

    #[test]
    fn prefetch_rows_takes_any_address() {
        let buffer = vec![7u8; 4096];
        for address in [
            std::ptr::null(),
            usize::MAX as *const u8,
            buffer.as_ptr().wrapping_add(1 << 40),
            buffer.as_ptr(),
        ] {
            prefetch_rows(address, 1 << 20, address, 4096);
        }
        assert!(buffer.iter().all(|&b| b == 7), "prefetching writes nothing");
    }

    #[test]
    fn pack_band_packs_rows_and_reuses_its_buffer() {
        let source: Vec<u8> = (0..4096).map(|i| (i % 253) as u8).collect();
        let mut scratch = Vec::new();
        for (rows, row_stride, row_bytes) in [(0, 64, 16), (3, 100, 7), (16, 256, 64), (1, 0, 4096)]
        {
            let band = Band {
                rows,
                row_stride,
                row_bytes,
            };
            grow_band_scratch(&mut scratch, band).expect("a few KiB");
            // SAFETY: every row `r * row_stride .. + row_bytes` lies within `source`, and the
            // scratch was just grown to the band.
            let packed = unsafe { pack_band(source.as_ptr(), band, &mut scratch) };
            let (rows, row_stride, row_bytes) =
                (rows as usize, row_stride as usize, row_bytes as usize);
            // SAFETY: `pack_band` wrote `rows * row_bytes` bytes at `packed`, inside `scratch`.
            let packed = unsafe { std::slice::from_raw_parts(packed, rows * row_bytes) };
            let expected: Vec<u8> = (0..rows)
                .flat_map(|r| &source[r * row_stride..r * row_stride + row_bytes])
                .copied()
                .collect();
            assert_eq!(
                packed, expected,
                "{rows} rows of {row_bytes}, {row_stride} apart"
            );
        }
        assert_eq!(scratch.len(), 4096 / 16, "grown to the largest band only");
    }
}
