//! The reference interpreters: the oracles every other path is tested against, [`interpret`]
//! for the gathers (and [`interpret_at`], the same at chosen output elements),
//! [`interpret_quantized`] for the quantized gathers and [`interpret_scatter`] /
//! [`interpret_scatter_in_place`] for the scatters.
//!
//! Written straight from the specs' formulas, one output element at a time, with coordinates
//! unravelled by hand. It shares nothing with the specialiser or the code generator (only the
//! validated signature and [`IndexPolicy::resolve`](crate::ir::IndexPolicy::resolve), the
//! one-line index rule), and is slow on purpose: it is meant to be obviously correct.
//!
//! Error order: under [`OutOfRange::Error`] every index is checked, in row-major order of the
//! indices tensor, before anything is gathered, and the first bad one is reported, whether or
//! not the output is empty. (Under `Clamp` an index into an empty dimension is reported too.)

use crate::error::{Error, Result};
use crate::ir::{Flavor, OutOfRange, ResolvedOp, Validated, unravel};

/// The quantized gathers' interpreter (it lives beside their definition in `quant/`).
pub use crate::quant::interpret_quantized;
/// The scatters' interpreter, in place and out of place (it lives beside their definition in
/// `scatter/`).
pub use crate::scatter::{interpret_scatter, interpret_scatter_in_place};

/// Runs the op of `signature` on native-endian, C-contiguous byte buffers.
///
/// # Errors
/// [`Error::BufferMismatch`] if a buffer's length does not match its shape and type;
/// [`Error::IndexOutOfRange`] for the first bad index when the policy reports them;
/// [`Error::Allocation`] if the output cannot be allocated.
pub fn interpret(signature: &Validated, data: &[u8], indices: &[u8]) -> Result<Vec<u8>> {
    check_inputs(signature, data, indices)?;
    let element = signature.signature().dtype.size();
    let mut out = zeroed(signature.output_len() * element)?;
    for flat in 0..signature.output_len() {
        write_element(signature, data, indices, flat, &mut out[flat * element..]);
    }
    Ok(out)
}

/// The output elements at `positions` (row-major element offsets into the output), in that
/// order, as [`interpret`] computes them and after the same checks, without the rest of the
/// output: the oracle of a large output at a sample of its elements, which `gather-jit layer`
/// checks when the whole output would keep the interpreter busy for seconds.
///
/// # Errors
/// As [`interpret`]: every index is checked, whatever `positions` are.
///
/// # Panics
/// A position not below the output's length ([`Validated::output_len`]).
pub fn interpret_at(
    signature: &Validated,
    data: &[u8],
    indices: &[u8],
    positions: &[usize],
) -> Result<Vec<u8>> {
    check_inputs(signature, data, indices)?;
    let element = signature.signature().dtype.size();
    let mut out = zeroed(positions.len() * element)?;
    for (i, &flat) in positions.iter().enumerate() {
        assert!(
            flat < signature.output_len(),
            "output element {flat} of {}",
            signature.output_len()
        );
        write_element(signature, data, indices, flat, &mut out[i * element..]);
    }
    Ok(out)
}

/// Checks the buffers' lengths, then every index (see [`check_indices`]).
fn check_inputs(signature: &Validated, data: &[u8], indices: &[u8]) -> Result<()> {
    let sig = signature.signature();
    check_len("data", data, signature.data_len() * sig.dtype.size())?;
    check_len(
        "indices",
        indices,
        signature.indices_len() * sig.index_type.size(),
    )?;
    check_indices(signature, indices)
}

/// `bytes` zeros, or an allocation error: a valid signature's output may be larger than
/// memory, and that is an error, not an abort.
fn zeroed(bytes: usize) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    out.try_reserve_exact(bytes)
        .map_err(|_| Error::Allocation {
            what: "the output",
            bytes,
        })?;
    out.resize(bytes, 0);
    Ok(out)
}

/// Writes output element `flat` to the start of `out` (zero-filled, which a zeroed slice
/// stays).
fn write_element(signature: &Validated, data: &[u8], indices: &[u8], flat: usize, out: &mut [u8]) {
    let sig = signature.signature();
    let element = sig.dtype.size();
    let data_shape = &sig.data_shape;
    let indices_shape = &sig.indices_shape;
    let policy = sig.policy;
    let index_at = |coords: &[usize]| sig.index_type.read(indices, ravel(coords, indices_shape));

    let o = unravel(flat, signature.output_shape());
    // The data coordinates this output element reads, or None for a zero-filled slice.
    let source: Option<Vec<usize>> = match signature.op() {
        ResolvedOp::Gather { axis, batch_dims } => {
            // output[o] = data[o[:axis], indices[o[:b], o[axis..axis+q-b]], o[axis+q-b..]]
            let q_rest = indices_shape.len() - batch_dims;
            let index_coords = [&o[..batch_dims], &o[axis..axis + q_rest]].concat();
            policy
                .resolve(index_at(&index_coords), data_shape[axis])
                .map(|i| [&o[..axis], &[i], &o[axis + q_rest..]].concat())
        }
        ResolvedOp::GatherElements { axis } => {
            // output[o] = data[o with o[axis] replaced by indices[o]]
            policy
                .resolve(index_at(&o), data_shape[axis])
                .map(|i| [&o[..axis], &[i], &o[axis + 1..]].concat())
        }
        ResolvedOp::GatherNd {
            batch_dims,
            index_depth,
        } => gather_nd_source(signature, &o, batch_dims, index_depth, &index_at),
    };
    if let Some(source) = source {
        let from = ravel(&source, data_shape) * element;
        out[..element].copy_from_slice(&data[from..from + element]);
    }
}

/// GatherND: `output[batch, t, s] = data[batch, indices[batch, t, :], s]`.
fn gather_nd_source(
    signature: &Validated,
    o: &[usize],
    b: usize,
    depth: usize,
    index_at: &dyn Fn(&[usize]) -> i128,
) -> Option<Vec<usize>> {
    let sig = signature.signature();
    let indices_shape = &sig.indices_shape;
    let data_shape = &sig.data_shape;
    // GatherND-5 flattened the batch dims into one output dim: expand it back.
    let o: Vec<usize> = if sig.flavor == Flavor::OpenvinoGatherNd5 && b > 0 {
        [&unravel(o[0], &indices_shape[..b])[..], &o[1..]].concat()
    } else {
        o.to_vec()
    };
    let tuple_rank = indices_shape.len() - 1; // batch dims + the tuple grid
    let mut source = o[..b].to_vec();
    for j in 0..depth {
        let coords = [&o[..tuple_rank], &[j]].concat();
        source.push(sig.policy.resolve(index_at(&coords), data_shape[b + j])?);
    }
    source.extend_from_slice(&o[tuple_rank..]);
    Some(source)
}

/// Checks every index in row-major order; reports the first one the policy rejects.
fn check_indices(signature: &Validated, indices: &[u8]) -> Result<()> {
    let sig = signature.signature();
    if sig.policy.out_of_range == OutOfRange::Zero {
        return Ok(());
    }
    let shape = &sig.indices_shape;
    for flat in 0..signature.indices_len() {
        let position = unravel(flat, shape);
        let data_dim = signature.indexed_data_dim(&position);
        let dim_size = sig.data_shape[data_dim];
        let value = sig.index_type.read(indices, flat);
        if sig.policy.resolve(value, dim_size).is_none() {
            return Err(Error::IndexOutOfRange {
                op: sig.op.name(),
                position,
                value,
                data_dim,
                dim_size,
            });
        }
    }
    Ok(())
}

fn check_len(what: &'static str, buffer: &[u8], expected: usize) -> Result<()> {
    if buffer.len() != expected {
        return Err(Error::BufferMismatch {
            what,
            expected: format!("{expected} bytes"),
            actual: format!("{} bytes", buffer.len()),
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
