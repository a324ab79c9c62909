//! The error for an index the compiled code rejected: the code reports only where the
//! rejected tuple (or, in a banded plan, index) lies; this finds the first bad index, in
//! row-major order of the indices, and its value.
#![allow(
    unsafe_code,
    reason = "reads the indices of a failed raw call to name the bad one"
)]

use super::Kernel;
use crate::error::Error;
use crate::ir::{OutOfRange, unravel};

impl Kernel {
    /// The error for the rejected index that the code (or `call_bands`) reported at element
    /// `position`. Out of line: a tiny kernel's call then keeps only the branch to it.
    ///
    /// # Safety
    /// `indices` points to the whole indices buffer, readable.
    #[cold]
    #[inline(never)]
    pub(super) unsafe fn rejected(&self, indices: *const u8, position: u64) -> Error {
        let index_type = self.signature().index_type;
        // SAFETY: the caller's contract makes the whole indices buffer readable.
        let all = unsafe { std::slice::from_raw_parts(indices, self.plan.indices_bytes as usize) };
        let position = match self.plan.band {
            // Bands visit indices column band by column band: find the gather's first
            // rejected index in row-major order, which is at or before `position`.
            Some(_) => self.first_rejected_before(all, position as usize),
            // The code reports the rejected tuple; its first bad coordinate is the error.
            None => self.first_rejected_in_tuple(all, position as usize),
        };
        self.index_error(position, index_type.read(all, position))
    }

    /// The first index in row-major order of the whole gather that a banded kernel rejects,
    /// given that the one at `found` is rejected (a range of bands meets its bad indices
    /// column band by column band, and an earlier one may lie in another range).
    fn first_rejected_before(&self, indices: &[u8], found: usize) -> usize {
        let dim = self.plan.lookup.coordinates[0].dim_size;
        (0..found)
            .find(|&position| self.rejects(indices, position, dim))
            .unwrap_or(found)
    }

    /// The position of the first coordinate the policy rejects in the tuple that starts at
    /// element `tuple` of the indices, which the code reported.
    fn first_rejected_in_tuple(&self, indices: &[u8], tuple: usize) -> usize {
        let size = self.signature().index_type.size();
        let first = (self.plan.lookup.coordinates.iter())
            .map(|c| (tuple + c.index_offset as usize / size, c.dim_size))
            .find(|&(position, dim)| self.rejects(indices, position, dim))
            .map(|(position, _)| position);
        debug_assert!(
            first.is_some(),
            "the code rejected a tuple the policy accepts"
        );
        first.unwrap_or(tuple)
    }

    /// Whether the policy rejects the index at element `position` of the indices, into a dim
    /// of `dim` (an error, not a zero-filled slice).
    fn rejects(&self, indices: &[u8], position: usize, dim: u64) -> bool {
        let sig = self.signature();
        let raw = sig.index_type.read(indices, position);
        sig.policy.resolve(raw, dim as usize).is_none()
            && sig.policy.out_of_range != OutOfRange::Zero
    }

    /// The error for the index at element `position` of the indices, whose value is `value`.
    fn index_error(&self, position: usize, value: i128) -> Error {
        let sig = self.signature();
        let position = unravel(position, &sig.indices_shape);
        let data_dim = self.validated.indexed_data_dim(&position);
        Error::IndexOutOfRange {
            op: sig.op.name(),
            position,
            value,
            data_dim,
            dim_size: sig.data_shape[data_dim],
        }
    }
}
