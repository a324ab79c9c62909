//! One gather split across threads: [`Kernel::call_parallel`] runs ranges of the outer loop
//! (or of a banded plan's band rows) on the crate's worker pool.
#![allow(
    unsafe_code,
    reason = "hands disjoint ranges of the caller's raw buffers to worker threads"
)]

use std::sync::OnceLock;

use super::Kernel;
use crate::error::{Error, Result};
use crate::pool;

/// Outputs of at least this many bytes are split across threads when the thread count is left
/// to the kernel: below it a second thread gains little over its hand-off (`gather-jit bench
/// --threads 1|2` on outputs of growing size).
pub const PARALLEL_MIN_BYTES: u64 = 128 << 10;

impl Kernel {
    /// Runs the whole gather split into `threads` ranges of the outer loop, run by the calling
    /// thread and the crate's worker threads (one per further core; idle workers spin for a
    /// while before sleeping). `threads == 0` chooses: one range per core when the output is
    /// at least [`PARALLEL_MIN_BYTES`], else one. More ranges than cores are
    /// shared out among them. While another thread's parallel call runs, the ranges run on
    /// the calling thread alone. The bytes written equal one [`Kernel::call`]'s.
    ///
    /// A runtime with its own thread pool can instead split the range itself with
    /// [`Kernel::call_range`].
    ///
    /// # Safety
    /// As [`Kernel::call`]; additionally no other thread touches `output` during the call.
    ///
    /// # Errors
    /// As [`Kernel::call`]: the first rejected index in row-major order of the indices (every
    /// range stops at its own first bad index, and the first of their errors is reported).
    /// After an error, any part of the output may have been written.
    pub unsafe fn call_parallel(
        &self,
        data: *const u8,
        indices: *const u8,
        output: *mut u8,
        threads: usize,
    ) -> Result<()> {
        // One thread asked for (or chosen): no split to work out.
        let (threads, units, granule) = match self.threads_for(threads) {
            0 | 1 => (1, 0, 0),
            _ => self.parallel_split(threads),
        };
        if threads <= 1 {
            // SAFETY: forwarded contract.
            return unsafe { self.call(data, indices, output) };
        }
        // Addresses cross threads as integers; each part writes a disjoint part of `output`.
        let (data, indices, output) = (data as usize, indices as usize, output as usize);
        let results: Vec<OnceLock<Result<()>>> = (0..threads).map(|_| OnceLock::new()).collect();
        // In u128: `units * parts` may exceed u64 (both come from the caller); each bound is
        // at most `units`, so it fits u64 again.
        let bound = |t: usize| (u128::from(units) * t as u128 / threads as u128) as u64 * granule;
        pool::run(threads, &|part| {
            let cells = bound(part)..bound(part + 1);
            // SAFETY: forwarded contract; the parts partition all cells, so concurrent calls
            // write disjoint output bytes and only read the inputs, and `pool::run` returns
            // only after every part has finished.
            let result = unsafe {
                self.call_cells(
                    data as *const u8,
                    indices as *const u8,
                    output as *mut u8,
                    cells,
                )
            };
            let _ = results[part].set(result);
        });
        // The first bad index in row-major order: the earliest range's, except in a banded
        // plan, whose ranges are column bands.
        let errors = results
            .into_iter()
            .filter_map(|slot| slot.into_inner().and_then(Result::err));
        let position = |error: &Error| match error {
            Error::IndexOutOfRange { position, .. } => Some(position.clone()),
            _ => None,
        };
        match errors.min_by_key(position) {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// How many parts (threads) `call_parallel(.., threads)` splits the gather into: `threads`
    /// (or one per core for 0, see there), at most one per unit of work (an iteration of the
    /// outer loop; a row of a band for a banded plan), at least one.
    pub fn parallel_parts(&self, threads: usize) -> usize {
        self.parallel_split(threads).0
    }

    /// `(parts, units, cells per unit)` of `call_parallel(.., threads)`: whole bands are split
    /// first; only with more threads than bands are the rows of a band split too (each part
    /// then packs the bands it meets).
    fn parallel_split(&self, threads: usize) -> (usize, u64, u64) {
        let cells = self.outer_extent() * self.cells_per_iteration();
        let band_cells = self.band_loops().map_or(1, |loops| loops.rows.extent);
        let threads = self.threads_for(threads);
        let granule = if threads as u64 <= cells / band_cells {
            band_cells
        } else {
            1
        };
        let units = cells / granule;
        (threads.min(units.max(1) as usize), units, granule)
    }

    /// The number of threads `call_parallel(.., threads)` uses before capping by the work.
    fn threads_for(&self, threads: usize) -> usize {
        match threads {
            0 if self.plan.output_bytes >= PARALLEL_MIN_BYTES => pool::threads(),
            0 => 1,
            n => n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::specialize::Tuning;

    #[test]
    fn batched_bands_split_across_threads_and_ranges() {
        use crate::interp::interpret;
        use crate::ir::Signature;
        // 3 batches of a [9, 64] f32 table along axis 1, 2 bands each: 1..16 threads split
        // batches, bands and rows; the bad index lies in the last batch only.
        let signature = Signature::gather_elements(&[3, 9, 64], &[3, 9, 64], 1);
        let kernel =
            Kernel::compile_tuned(&signature, Tuning::bands_always(9 * 128)).expect("compiles");
        assert_eq!(
            kernel.plan().loops.len(),
            4,
            "batches, bands, rows, columns"
        );
        assert_eq!(kernel.outer_extent(), 3, "three batches");
        assert_eq!(
            kernel.parallel_parts(4),
            4,
            "bands are split, not only batches"
        );
        assert_eq!(
            kernel.parallel_parts(100),
            3 * 9 * 2,
            "at most a part per band row"
        );
        let len = 3 * 9 * 64;
        let data: Vec<u8> = (0..len * 4).map(|i| (i * 7 % 251) as u8).collect();
        let mut raw: Vec<i64> = (0..len).map(|i| (i * 5 % 9) as i64).collect();
        let validated = signature.validate().expect("valid");
        for bad in [None, Some((2 * 9 * 64 + 4 * 64 + 40, 9))] {
            if let Some((at, value)) = bad {
                raw[at] = value;
            }
            let indices: Vec<u8> = raw.iter().flat_map(|v| v.to_ne_bytes()).collect();
            let expected = interpret(&validated, &data, &indices);
            for threads in 1..=16 {
                let mut output = vec![0xEEu8; len * 4];
                let actual = kernel
                    .run_bytes_parallel(&data, &indices, &mut output, threads)
                    .map(|()| output);
                assert_eq!(actual, expected, "{threads} threads, bad index {bad:?}");
            }
            // One range per batch, in order: the first two always succeed.
            let mut output = vec![0xEEu8; len * 4];
            for batch in 0..3 {
                // SAFETY: the buffers hold the signature's sizes and do not overlap; the
                // range lies within the outer loop.
                let result = unsafe {
                    kernel.call_range(
                        data.as_ptr(),
                        indices.as_ptr(),
                        output.as_mut_ptr(),
                        batch..batch + 1,
                    )
                };
                let expected_result = match (&expected, batch) {
                    (Err(e), 2) => Err(e.to_string()),
                    _ => Ok(()),
                };
                assert_eq!(
                    result.map_err(|e| e.to_string()),
                    expected_result,
                    "batch {batch}"
                );
            }
        }
    }

    #[test]
    fn more_threads_than_bands_split_the_rows_of_bands() {
        use crate::interp::interpret;
        use crate::ir::Signature;
        // 2 bands of 32 f32 columns, 9 rows: 16 threads give parts of one or two rows, most
        // of them starting and ending inside a band.
        let signature = Signature::gather_elements(&[9, 64], &[9, 64], 0);
        let kernel =
            Kernel::compile_tuned(&signature, Tuning::bands_always(9 * 128)).expect("compiles");
        assert_eq!(kernel.outer_extent(), 2, "two bands");
        let data: Vec<u8> = (0..9 * 64 * 4).map(|i| (i * 7 % 251) as u8).collect();
        let mut raw: Vec<i64> = (0..9 * 64).map(|i| (i * 5 % 9) as i64).collect();
        let validated = signature.validate().expect("valid");
        for bad in [None, Some((7 * 64 + 40, 9)), Some((2 * 64 + 3, -10))] {
            if let Some((at, value)) = bad {
                raw[at] = value;
            }
            let indices: Vec<u8> = raw.iter().flat_map(|v| v.to_ne_bytes()).collect();
            let expected = interpret(&validated, &data, &indices);
            for threads in [1, 2, 3, 5, 16] {
                let mut output = vec![0xEEu8; 9 * 64 * 4];
                let actual = kernel
                    .run_bytes_parallel(&data, &indices, &mut output, threads)
                    .map(|()| output);
                assert_eq!(actual, expected, "{threads} threads, bad index {bad:?}");
            }
        }
    }
}
