//! The scatters' reference interpreter: the oracle a compiled scatter is tested against.
//!
//! Written from the specs' formulas, one update element at a time, with coordinates unravelled
//! by hand; it shares only the validated layout, [`IndexPolicy::resolve`] and the arithmetic of
//! `reduce.rs` with the rest of the crate, and is slow on purpose.
//!
//! Order of work, the same for the in-place and out-of-place calls: buffer lengths; every index
//! in row-major order of `indices` (the first bad one is the error); duplicates, where the
//! flavor forbids them; every allocation. Only then is anything written, so a call that fails
//! leaves the caller's data untouched. Updates then apply in row-major order of `updates`,
//! which is the order of their indices: with `none` the last of several updates of one element
//! wins, a reduction folds them in that order, and `mean` divides once they are all in.

use std::collections::HashMap;

use super::reduce::{self, Arithmetic};
use super::{Reduction, ResolvedScatter, ScatterLayout};
use crate::error::{Error, Result};
use crate::ir::unravel;
use crate::types::{IndexPolicy, OutOfRange};

/// Runs the scatter of `layout` out of place on native-endian, C-contiguous byte buffers: the
/// result is a copy of `data` with the updates applied.
///
/// # Errors
/// [`Error::BufferMismatch`] if a buffer's length does not match its shape and type;
/// [`Error::IndexOutOfRange`] for the first bad index (row-major); [`Error::DuplicateIndex`]
/// for two updates of one element under a flavor that forbids them; [`Error::Allocation`] if
/// the output or the interpreter's own tables cannot be allocated.
pub fn interpret_scatter(
    layout: &ScatterLayout,
    data: &[u8],
    indices: &[u8],
    updates: &[u8],
) -> Result<Vec<u8>> {
    let plan = Plan::new(layout, data.len(), indices, updates)?;
    let mut out = Vec::new();
    // The output is as large as data, which a valid signature allows beyond memory.
    out.try_reserve_exact(data.len())
        .map_err(|_| Error::Allocation {
            what: "the output",
            bytes: data.len(),
        })?;
    out.extend_from_slice(data);
    plan.apply(&mut out, updates);
    Ok(out)
}

/// Runs the scatter of `layout` in place: `data` becomes the output. On an error `data` is
/// unchanged, byte for byte (everything is checked and allocated before the first write).
///
/// # Errors
/// As [`interpret_scatter`].
pub fn interpret_scatter_in_place(
    layout: &ScatterLayout,
    data: &mut [u8],
    indices: &[u8],
    updates: &[u8],
) -> Result<()> {
    let plan = Plan::new(layout, data.len(), indices, updates)?;
    plan.apply(data, updates);
    Ok(())
}

/// Everything checked and allocated: what remains cannot fail.
struct Plan<'a> {
    layout: &'a ScatterLayout,
    /// Every index, resolved into its dimension (row-major over `indices`).
    resolved: Vec<usize>,
    /// Under `mean`: the number of updates of each data element (zeros, filled by `apply`).
    counts: Vec<u64>,
}

impl<'a> Plan<'a> {
    fn new(
        layout: &'a ScatterLayout,
        data_bytes: usize,
        indices: &[u8],
        updates: &[u8],
    ) -> Result<Plan<'a>> {
        let sig = layout.signature();
        let element = sig.dtype.size();
        check_len("data", data_bytes, layout.data_len() * element)?;
        check_len(
            "indices",
            indices.len(),
            layout.indices_len() * sig.index_type.size(),
        )?;
        check_len("updates", updates.len(), layout.updates_len() * element)?;
        let resolved = resolve_indices(layout, indices)?;
        if sig.flavor.forbids_duplicates() {
            check_duplicates(layout, &resolved)?;
        }
        let counts = if sig.reduction == Reduction::Mean {
            zeroed(layout.data_len(), "the mean's update counts")?
        } else {
            Vec::new()
        };
        Ok(Plan {
            layout,
            resolved,
            counts,
        })
    }

    /// Applies every update to `out` (a copy of data, or data itself).
    fn apply(mut self, out: &mut [u8], updates: &[u8]) {
        let sig = self.layout.signature();
        let element = sig.dtype.size();
        let arithmetic = Arithmetic {
            reduction: sig.reduction,
            ties: sig.flavor.tie_break(),
            bf16: sig.flavor.bf16_rounding(),
        };
        let at = |flat: usize| flat * element..(flat + 1) * element;
        if !sig.use_init_val && sig.reduction != Reduction::None {
            // use_init_val = false: every element an update lands on starts from the
            // reduction's neutral value instead of data's.
            for u in 0..self.layout.updates_len() {
                let t = self.target(u);
                reduce::write_neutral(sig.dtype, sig.reduction, &mut out[at(t)]);
            }
        }
        for u in 0..self.layout.updates_len() {
            let t = self.target(u);
            reduce::combine(sig.dtype, arithmetic, &mut out[at(t)], &updates[at(u)]);
            if let Some(count) = self.counts.get_mut(t) {
                *count += 1;
            }
        }
        let with_init = u64::from(sig.use_init_val);
        for (t, &count) in self.counts.iter().enumerate() {
            if count > 0 {
                reduce::finish_mean(
                    sig.dtype,
                    arithmetic.bf16,
                    &mut out[at(t)],
                    count + with_init,
                );
            }
        }
    }

    /// The data element (row-major offset) that update element `u` lands on.
    fn target(&self, u: usize) -> usize {
        let sig = self.layout.signature();
        let data = &sig.data_shape;
        match self.layout.op() {
            ResolvedScatter::Nd { index_depth: k } => {
                // updates[t, j] -> data[indices[t, 0..k], j]
                let slice = self.layout.slice_len();
                let (t, j) = (u / slice, u % slice);
                ravel(&self.resolved[t * k..(t + 1) * k], &data[..k]) * slice + j
            }
            ResolvedScatter::Elements { axis } => {
                // updates[p] -> data[p with p[axis] = indices[p]]
                let mut p = unravel(u, &sig.updates_shape);
                p[axis] = self.resolved[u];
                ravel(&p, data)
            }
            ResolvedScatter::Update { axis } => {
                // updates[a, i, b] -> data[a, indices[i], b]
                let q = sig.indices_shape.len();
                let p = unravel(u, &sig.updates_shape);
                let i = ravel(&p[axis..axis + q], &sig.indices_shape);
                let source = [&p[..axis], &[self.resolved[i]], &p[axis + q..]].concat();
                ravel(&source, data)
            }
        }
    }
}

/// Every index resolved into its dimension, in row-major order; the first bad one is the error.
fn resolve_indices(layout: &ScatterLayout, indices: &[u8]) -> Result<Vec<usize>> {
    let sig = layout.signature();
    let policy = IndexPolicy {
        negative: sig.negative,
        out_of_range: OutOfRange::Error,
    };
    let mut resolved = zeroed(layout.indices_len(), "the resolved indices")?;
    for (flat, slot) in resolved.iter_mut().enumerate() {
        let value = sig.index_type.read(indices, flat);
        let data_dim = match layout.op() {
            ResolvedScatter::Nd { index_depth } => flat % index_depth,
            ResolvedScatter::Elements { axis } | ResolvedScatter::Update { axis } => axis,
        };
        let dim_size = sig.data_shape[data_dim];
        *slot = policy
            .resolve(value, dim_size)
            .ok_or_else(|| index_error(layout, indices, flat))?;
    }
    Ok(resolved)
}

/// The error for the index at element position `flat` of `indices`, which is out of range.
pub(crate) fn index_error(layout: &ScatterLayout, indices: &[u8], flat: usize) -> Error {
    let sig = layout.signature();
    let data_dim = match layout.op() {
        ResolvedScatter::Nd { index_depth } => flat % index_depth,
        ResolvedScatter::Elements { axis } | ResolvedScatter::Update { axis } => axis,
    };
    Error::IndexOutOfRange {
        op: sig.op.name(),
        position: unravel(flat, &sig.indices_shape),
        value: sig.index_type.read(indices, flat),
        data_dim,
        dim_size: sig.data_shape[data_dim],
    }
}

/// Under a flavor that forbids duplicate indices, the error for the first duplicate among
/// `indices` (all of them in range).
///
/// # Errors
/// [`Error::DuplicateIndex`]; [`Error::Allocation`] if the tables of the check cannot be.
pub(crate) fn check_no_duplicates(layout: &ScatterLayout, indices: &[u8]) -> Result<()> {
    if !layout.signature().flavor.forbids_duplicates() {
        return Ok(());
    }
    let resolved = resolve_indices(layout, indices)?;
    check_duplicates(layout, &resolved)
}

/// Divides each element of `output` whose count (the same position in `counts`) is above
/// zero by that count, plus one with `use_init_val`: what ends a `mean` after its sums.
pub(crate) fn finish_means(layout: &ScatterLayout, output: &mut [u8], counts: &[u64]) {
    let sig = layout.signature();
    let element = sig.dtype.size();
    let with_init = u64::from(sig.use_init_val);
    let rounding = sig.flavor.bf16_rounding();
    for (value, &count) in output.chunks_exact_mut(element).zip(counts) {
        if count > 0 {
            reduce::finish_mean(sig.dtype, rounding, value, count + with_init);
        }
    }
}

/// Under a flavor that forbids them: the first update (row-major) of an element an earlier one
/// already wrote is an error naming both.
fn check_duplicates(layout: &ScatterLayout, resolved: &[usize]) -> Result<()> {
    let sig = layout.signature();
    let writes = match layout.op() {
        // A tuple writes a whole slice; two tuples' slices are the same or disjoint.
        ResolvedScatter::Nd { index_depth } if layout.slice_len() > 0 => {
            resolved.len() / index_depth
        }
        ResolvedScatter::Elements { .. } => resolved.len(),
        // Empty slices write nothing; no flavor of ScatterUpdate forbids duplicates.
        ResolvedScatter::Nd { .. } | ResolvedScatter::Update { .. } => return Ok(()),
    };
    let mut first_writer: HashMap<usize, usize> = HashMap::new();
    first_writer
        .try_reserve(writes)
        .map_err(|_| Error::Allocation {
            what: "the duplicate check's table",
            bytes: writes.saturating_mul(2 * size_of::<usize>()),
        })?;
    for w in 0..writes {
        let (key, target) = write_of(layout, resolved, w);
        if let Some(&earlier) = first_writer.get(&key) {
            return Err(Error::DuplicateIndex {
                op: sig.op.name(),
                flavor: sig.flavor,
                first: write_position(layout, earlier),
                second: write_position(layout, w),
                target,
            });
        }
        first_writer.insert(key, w);
    }
    Ok(())
}

/// Write `w` of ScatterND (tuple `w`) or ScatterElements (index `w`): the data offset it
/// starts at and the data coordinates (ScatterND: the tuple's).
fn write_of(layout: &ScatterLayout, resolved: &[usize], w: usize) -> (usize, Vec<usize>) {
    let sig = layout.signature();
    match layout.op() {
        ResolvedScatter::Nd { index_depth: k } => {
            let coords = resolved[w * k..(w + 1) * k].to_vec();
            (ravel(&coords, &sig.data_shape[..k]), coords)
        }
        ResolvedScatter::Elements { axis } | ResolvedScatter::Update { axis } => {
            let mut p = unravel(w, &sig.indices_shape);
            p[axis] = resolved[w];
            (ravel(&p, &sig.data_shape), p)
        }
    }
}

/// Where write `w` is in indices (ScatterND: the tuple's position, without the last dim).
fn write_position(layout: &ScatterLayout, w: usize) -> Vec<usize> {
    let indices = &layout.signature().indices_shape;
    match layout.op() {
        ResolvedScatter::Nd { .. } => unravel(w, &indices[..indices.len() - 1]),
        _ => unravel(w, indices),
    }
}

/// A vector of `len` default values, or [`Error::Allocation`].
fn zeroed<T: Default + Clone>(len: usize, what: &'static str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| Error::Allocation {
        what,
        bytes: len.saturating_mul(size_of::<T>()),
    })?;
    v.resize(len, T::default());
    Ok(v)
}

fn check_len(what: &'static str, actual: usize, expected: usize) -> Result<()> {
    if actual != expected {
        return Err(Error::BufferMismatch {
            what,
            expected: format!("{expected} bytes"),
            actual: format!("{actual} bytes"),
        });
    }
    Ok(())
}

/// Row-major element offset of `coords` in `shape`.
fn ravel(coords: &[usize], shape: &[usize]) -> usize {
    coords
        .iter()
        .zip(shape)
        .fold(0, |acc, (&c, &d)| acc * d + c)
}
