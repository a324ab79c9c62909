//! From a candle scatter to the gather-jit scatter kernels that compute it, and their calls.
//!
//! - `scatter` and `scatter_add` are ONNX ScatterElements along `dim` (reduction none or sum)
//!   on the caller's indices and source as they are.
//! - `index_add` has no kernel of its own: ScatterUpdate is the op (whole slices along `dim`)
//!   but no flavor defines it with a sum, so it is ScatterND with sum on data seen as
//!   `[P, A, Q]` (`P` the dims before `dim`, `A` its size, `Q` the dims after): with `P == 1`
//!   the ids are the index tuples as they are (`[n, 1]`) and each adds a row of `Q` elements;
//!   with `P > 1` the same kernel runs on each of the `P` blocks, or, when a block's updates are
//!   too few to pay for a call, ScatterElements along 1 with the ids broadcast to the source's
//!   shape.
//! - GatherND's gradient is ScatterND with sum, batch dims folded into the tuples.
//!
//! Each update lands on its element in the order candle's CPU loops apply them (row-major
//! over the indices, and for `index_add` the ids in order), so sums round as candle's do.
//! Ids the index rules drop (candle's: an id at its type's maximum) or move (a clamp, a
//! wrap the kernel does not do) are resolved here first and the survivors packed: ScatterND
//! on full coordinate tuples for ScatterElements, packed ids and slices for the others.

use std::borrow::Cow;
use std::mem::MaybeUninit;

use gather_jit::ir::{OpName, unravel};
use gather_jit::scatter::{Reduction, ScatterOp, ScatterSignature};
use gather_jit::{DType, IndexType, KernelCache, NegativeIndices, OutOfRange, ScatterKernel};

use crate::IndexRules;
use crate::error::{allocation, buffer_mismatch, from_jit, index_out_of_range, msg};
use crate::layout::element_count;

/// Below this many elements per block, `index_add` with dims before `dim` runs one
/// ScatterElements on broadcast ids rather than one ScatterND call per block: a call's fixed
/// cost is then more than its work.
const MIN_BLOCK_ELEMENTS: usize = 64;

/// What a candle scatter computes (`dim`, `batch_dims` normalised).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `Tensor::scatter`: ScatterElements along `dim`; of two updates of one element the later
    /// wins.
    Scatter { dim: usize },
    /// `Tensor::scatter_add`: ScatterElements along `dim`, summing.
    ScatterAdd { dim: usize },
    /// `Tensor::index_add`: 1-D ids pick the slices of `dim` each source slice is added to.
    IndexAdd { dim: usize },
    /// The gradient of GatherND with `batch_dims`: ScatterND, summing.
    ScatterNdAdd { batch_dims: usize },
}

impl Kind {
    /// Whether updates add to the element (rather than replace it).
    pub(crate) fn sums(self) -> bool {
        !matches!(self, Kind::Scatter { .. })
    }

    fn reduction(self) -> Reduction {
        if self.sums() {
            Reduction::Sum
        } else {
            Reduction::None
        }
    }

    /// The op named in errors about an index.
    fn op_name(self) -> OpName {
        match self {
            Kind::Scatter { .. } | Kind::ScatterAdd { .. } => OpName::ScatterElements,
            Kind::IndexAdd { .. } => OpName::ScatterUpdate,
            Kind::ScatterNdAdd { .. } => OpName::ScatterNd,
        }
    }
}

/// The operands of a call: C-contiguous bytes and their shapes.
pub(crate) struct Operands<'a> {
    pub(crate) dtype: DType,
    pub(crate) data_dims: &'a [usize],
    pub(crate) index_type: IndexType,
    pub(crate) indices: &'a [u8],
    pub(crate) indices_dims: &'a [usize],
    pub(crate) updates: &'a [u8],
    pub(crate) updates_dims: &'a [usize],
}

/// Where a scatter writes.
pub(crate) enum Dest<'a> {
    /// Out of place: `out`, uninitialised and as long as `data`, becomes `data` with the
    /// updates applied.
    Copy {
        data: &'a [u8],
        out: &'a mut [MaybeUninit<u8>],
    },
    /// In place: the updates are applied to `data`.
    InPlace(&'a mut [u8]),
}

/// What an index means under the rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Resolved {
    /// The coordinate it names.
    At(usize),
    /// Its update is dropped (candle's type maximum, or out of range under a zeroing policy).
    Dropped,
    /// An error.
    Bad,
}

fn resolve(rules: IndexRules, index_type: IndexType, value: i128, size: usize) -> Resolved {
    if rules == IndexRules::Candle && value == index_type.max_value() as i128 {
        return Resolved::Dropped;
    }
    let policy = rules.policy();
    match policy.resolve(value, size) {
        Some(at) => Resolved::At(at),
        None if policy.out_of_range == OutOfRange::Zero => Resolved::Dropped,
        None => Resolved::Bad,
    }
}

/// Whether some index may need resolving before a kernel runs: the kernel treats every
/// in-range value as a coordinate, so candle's maximum is read as one where it is in range
/// (`u8` ids into a dim of more than 255).
fn maximum_in_range(rules: IndexRules, index_type: IndexType, sizes: &[usize]) -> bool {
    rules == IndexRules::Candle
        && sizes
            .iter()
            .any(|&size| size as u128 > index_type.max_value() as u128)
}

/// Runs `kind` on `operands` into `dest`.
///
/// # Errors
/// Shapes the op rejects, a bad index (its position and value), an allocation that fails.
/// Nothing is written on an error but where a kernel that runs block by block fails in a
/// later block, which only an allocation failure can cause (the indices are checked first).
pub(crate) fn run(
    kind: Kind,
    rules: IndexRules,
    cache: &KernelCache,
    operands: &Operands<'_>,
    dest: &mut Dest<'_>,
) -> candle_core::Result<()> {
    match kind {
        Kind::Scatter { dim } | Kind::ScatterAdd { dim } => {
            elements(kind, dim, rules, cache, operands, dest)
        }
        Kind::IndexAdd { dim } => index_add(dim, rules, cache, operands, dest),
        Kind::ScatterNdAdd { batch_dims } => scatter_nd(batch_dims, rules, cache, operands, dest),
    }
}

/// One kernel call (or `repeat` of them on consecutive blocks of data and updates, with the
/// same indices).
struct Job<'a> {
    signature: ScatterSignature,
    indices: Cow<'a, [u8]>,
    updates: Cow<'a, [u8]>,
    repeat: usize,
}

impl Job<'_> {
    fn new<'a>(
        signature: ScatterSignature,
        indices: Cow<'a, [u8]>,
        updates: Cow<'a, [u8]>,
    ) -> Job<'a> {
        Job {
            signature,
            indices,
            updates,
            repeat: 1,
        }
    }
}

/// A signature of the crate's fixed choices: ONNX rules (ScatterND and ScatterElements are
/// both ONNX's), the types and the kind's reduction. Indices of `index_type` other than the
/// caller's were resolved here, in range: no negative one to wrap.
fn signature(
    op: ScatterOp,
    kind: Kind,
    rules: IndexRules,
    operands: &Operands<'_>,
    index_type: IndexType,
    shapes: [&[usize]; 3],
) -> ScatterSignature {
    let [data, indices, updates] = shapes;
    let negative = if index_type == operands.index_type {
        rules.policy().negative
    } else {
        NegativeIndices::Invalid
    };
    ScatterSignature::new(op, data, indices, updates)
        .with_reduction(kind.reduction())
        .with_dtype(operands.dtype)
        .with_index_type(index_type)
        .with_negative(negative)
}

/// Calls a job's kernel(s) on `dest`. The outer error is this crate's check of the buffers,
/// the inner one the kernel's (a bad index, which the caller may still act on).
fn execute(
    cache: &KernelCache,
    job: &Job<'_>,
    dest: &mut Dest<'_>,
) -> candle_core::Result<Result<(), gather_jit::Error>> {
    let kernel = match cache.get_scatter(&job.signature) {
        Ok(kernel) => kernel,
        Err(error) => return Ok(Err(error)),
    };
    let element = job.signature.dtype.size();
    let layout = kernel.layout();
    let data_bytes = layout.data_len() * element;
    let updates_bytes = layout.updates_len() * element;
    let indices_bytes = layout.indices_len() * job.signature.index_type.size();
    let total = data_bytes * job.repeat;
    let (data_len, out_len) = match dest {
        Dest::Copy { data, out } => (data.len(), out.len()),
        Dest::InPlace(data) => (data.len(), data.len()),
    };
    for (what, actual, expected) in [
        ("data", data_len, total),
        ("output", out_len, total),
        ("indices", job.indices.len(), indices_bytes),
        ("updates", job.updates.len(), updates_bytes * job.repeat),
    ] {
        if actual != expected {
            return Err(buffer_mismatch(what, expected, actual));
        }
    }
    if job.repeat == 1 {
        return Ok(call_once(&kernel, &job.indices, &job.updates, dest));
    }
    // Block by block, in place: out of place copies data first.
    let data: &mut [u8] = match dest {
        Dest::InPlace(data) => data,
        Dest::Copy { data, out } => {
            // SAFETY: `out` holds `data.len()` bytes (checked above), `data` is initialised
            // and the two do not overlap (`out` is borrowed mutably while `data` is shared).
            unsafe {
                std::ptr::copy_nonoverlapping(data.as_ptr(), out.as_mut_ptr().cast(), data.len());
            }
            // SAFETY: every byte of `out` was just written, and `out` is borrowed mutably for
            // the slice's lifetime.
            unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr().cast::<u8>(), out.len()) }
        }
    };
    if data_bytes == 0 || updates_bytes == 0 {
        return Ok(Ok(()));
    }
    for (block, updates) in data
        .chunks_exact_mut(data_bytes)
        .zip(job.updates.chunks_exact(updates_bytes))
    {
        if let Err(error) = kernel.run_bytes_in_place(block, &job.indices, updates) {
            return Ok(Err(error));
        }
    }
    Ok(Ok(()))
}

fn call_once(
    kernel: &ScatterKernel,
    indices: &[u8],
    updates: &[u8],
    dest: &mut Dest<'_>,
) -> Result<(), gather_jit::Error> {
    match dest {
        Dest::InPlace(data) => kernel.run_bytes_in_place(data, indices, updates),
        Dest::Copy { data, out } => {
            // SAFETY: `data`, `indices` and `updates` hold exactly the bytes of the kernel's
            // shapes and types, `out` has room for data's (checked by `execute`); `out` is
            // new memory, so it overlaps none of them; no alignment is required.
            unsafe {
                kernel.call(
                    data.as_ptr(),
                    indices.as_ptr(),
                    updates.as_ptr(),
                    out.as_mut_ptr().cast(),
                )
            }
        }
    }
}

/// `dest` made to hold data unchanged (when no update survives).
fn copy_only(dest: &mut Dest<'_>) {
    if let Dest::Copy { data, out } = dest {
        // SAFETY: as in `execute`: `out` is as long as `data` (the callers' `Operands` and
        // `Dest` come from one tensor) and does not overlap it.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                out.as_mut_ptr().cast(),
                data.len().min(out.len()),
            );
        }
    }
}

/// `scatter` and `scatter_add`: the kernel on the caller's indices; where it meets an index the
/// rules drop or move, the resolved survivors as ScatterND.
fn elements(
    kind: Kind,
    dim: usize,
    rules: IndexRules,
    cache: &KernelCache,
    operands: &Operands<'_>,
    dest: &mut Dest<'_>,
) -> candle_core::Result<()> {
    let op = ScatterOp::Elements {
        axis: attribute(dim)?,
    };
    let shapes = [
        operands.data_dims,
        operands.indices_dims,
        operands.updates_dims,
    ];
    let job = Job::new(
        signature(op, kind, rules, operands, operands.index_type, shapes),
        Cow::Borrowed(operands.indices),
        Cow::Borrowed(operands.updates),
    );
    // Shapes first: the slow path assumes them valid.
    job.signature.validate().map_err(from_jit)?;
    let size = operands.data_dims[dim];
    let resolve_first = maximum_in_range(rules, operands.index_type, &[size])
        && contains_maximum(operands.indices, operands.index_type);
    if !resolve_first {
        match execute(cache, &job, dest)? {
            Ok(()) => return Ok(()),
            Err(gather_jit::Error::IndexOutOfRange { value, .. })
                if resolve(rules, operands.index_type, value, size) != Resolved::Bad => {}
            Err(error) => return Err(from_jit(error)),
        }
    }
    // Every index resolved: full coordinate tuples of the survivors, in order.
    let element = operands.dtype.size();
    let count = operands.indices.len() / operands.index_type.size();
    let mut packed = Packed::new(count, operands.data_dims.len(), element)?;
    for flat in 0..count {
        let value = operands.index_type.read(operands.indices, flat);
        let mut position = unravel(flat, operands.indices_dims);
        match resolve(rules, operands.index_type, value, size) {
            Resolved::Bad => {
                return Err(index_out_of_range(
                    kind.op_name(),
                    &position,
                    value,
                    dim,
                    size,
                ));
            }
            Resolved::Dropped => continue,
            Resolved::At(at) => position[dim] = at,
        }
        packed.push(&position, &operands.updates[flat * element..][..element]);
    }
    packed.run(kind, rules, cache, operands, dest)
}

/// `index_add`: the ids checked (and, if the rules drop or move some, resolved and packed with
/// their source slices), then ScatterND on `[P, A, Q]`.
fn index_add(
    dim: usize,
    rules: IndexRules,
    cache: &KernelCache,
    operands: &Operands<'_>,
    dest: &mut Dest<'_>,
) -> candle_core::Result<()> {
    let (data_dims, source_dims) = (operands.data_dims, operands.updates_dims);
    let count = match operands.indices_dims {
        [count] => *count,
        other => {
            return Err(msg(format!(
                "index-add: ids must be 1-D, got shape {other:?}"
            )));
        }
    };
    let shapes_match = dim < data_dims.len()
        && source_dims.len() == data_dims.len()
        && source_dims[dim] == count
        && (0..data_dims.len()).all(|d| d == dim || data_dims[d] == source_dims[d]);
    if !shapes_match {
        return Err(msg(format!(
            "index-add: source of shape {source_dims:?} does not match data {data_dims:?} with \
             dim {dim} of {count} ids"
        )));
    }
    let size = data_dims[dim];
    let before = element_count(&data_dims[..dim]).ok_or_else(|| too_large("data"))?;
    let after = element_count(&data_dims[dim + 1..]).ok_or_else(|| too_large("data"))?;
    // Each id checked in order: the first bad one is the error, as candle's loop reports it.
    let mut resolved_all = true;
    for i in 0..count {
        let value = operands.index_type.read(operands.indices, i);
        match resolve(rules, operands.index_type, value, size) {
            Resolved::Bad => {
                return Err(index_out_of_range(
                    OpName::ScatterUpdate,
                    &[i],
                    value,
                    dim,
                    size,
                ));
            }
            Resolved::At(at) if at as i128 == value => {}
            _ => resolved_all = false,
        }
    }
    if before == 0 || after == 0 {
        copy_only(dest);
        return Ok(());
    }
    let (ids, index_type, updates, kept) = if resolved_all {
        (
            Cow::Borrowed(operands.indices),
            operands.index_type,
            Cow::Borrowed(operands.updates),
            count,
        )
    } else {
        let (ids, updates, kept) = pack_ids(rules, operands, count, size, before, after)?;
        (Cow::Owned(ids), IndexType::I64, Cow::Owned(updates), kept)
    };
    if kept == 0 {
        copy_only(dest);
        return Ok(());
    }
    let block = kept.saturating_mul(after);
    let job = if before == 1 || block >= MIN_BLOCK_ELEMENTS {
        // ScatterND: each id a tuple of one coordinate into `[A, Q]`, block by block.
        let mut job = Job::new(
            signature(
                ScatterOp::Nd,
                Kind::IndexAdd { dim },
                rules,
                operands,
                index_type,
                [&[size, after], &[kept, 1], &[kept, after]],
            ),
            ids,
            updates,
        );
        job.repeat = before;
        job
    } else {
        // ScatterElements along 1 of `[P, A, Q]`, the ids broadcast to the source's shape.
        let elements = before
            .checked_mul(block)
            .ok_or_else(|| too_large("the broadcast ids"))?;
        let mut broadcast = try_vec::<u8>(elements.saturating_mul(8), "the broadcast ids")?;
        for _ in 0..before {
            for i in 0..kept {
                let id = index_type.read(&ids, i) as i64;
                for _ in 0..after {
                    broadcast.extend_from_slice(&id.to_ne_bytes());
                }
            }
        }
        let shape = [before, kept, after];
        Job::new(
            signature(
                ScatterOp::Elements { axis: 1 },
                Kind::IndexAdd { dim },
                rules,
                operands,
                IndexType::I64,
                [&[before, size, after], &shape, &shape],
            ),
            Cow::Owned(broadcast),
            updates,
        )
    };
    execute(cache, &job, dest)?.map_err(from_jit)
}

/// The ids `index_add` keeps, resolved, as `i64`, with their source slices packed
/// (`[before, kept, after]`): `(ids, updates, kept)`.
fn pack_ids(
    rules: IndexRules,
    operands: &Operands<'_>,
    count: usize,
    size: usize,
    before: usize,
    after: usize,
) -> candle_core::Result<(Vec<u8>, Vec<u8>, usize)> {
    let element = operands.dtype.size();
    let mut ids = try_vec::<u8>(count * 8, "the ids kept")?;
    let mut kept_rows = try_vec::<usize>(count, "the ids kept")?;
    for i in 0..count {
        let value = operands.index_type.read(operands.indices, i);
        if let Resolved::At(at) = resolve(rules, operands.index_type, value, size) {
            ids.extend_from_slice(&(at as i64).to_ne_bytes());
            kept_rows.push(i);
        }
    }
    let kept = kept_rows.len();
    let row = after * element;
    let bytes = before
        .checked_mul(kept)
        .and_then(|n| n.checked_mul(row))
        .ok_or_else(|| too_large("the source slices kept"))?;
    let mut updates = try_vec::<u8>(bytes, "the source slices kept")?;
    for p in 0..before {
        for &i in &kept_rows {
            updates.extend_from_slice(&operands.updates[(p * count + i) * row..][..row]);
        }
    }
    Ok((ids, updates, kept))
}

/// GatherND's gradient: ScatterND on the caller's indices when nothing needs resolving and
/// there are no batch dims; otherwise full tuples (batch coordinates first) of the tuples kept.
fn scatter_nd(
    batch_dims: usize,
    rules: IndexRules,
    cache: &KernelCache,
    operands: &Operands<'_>,
    dest: &mut Dest<'_>,
) -> candle_core::Result<()> {
    let (data_dims, ids_dims) = (operands.data_dims, operands.indices_dims);
    let depth = ids_dims.last().copied().unwrap_or(0);
    let shapes_ok = ids_dims.len() > batch_dims
        && depth >= 1
        && data_dims.len() >= batch_dims + depth
        && data_dims[..batch_dims] == ids_dims[..batch_dims];
    if !shapes_ok {
        return Err(msg(format!(
            "scatter-nd: indices of shape {ids_dims:?} do not index data of shape \
             {data_dims:?} with {batch_dims} batch dims"
        )));
    }
    let kind = Kind::ScatterNdAdd { batch_dims };
    let count = operands.indices.len() / operands.index_type.size();
    let tuples = count / depth;
    let mut resolved_all = true;
    for flat in 0..count {
        let value = operands.index_type.read(operands.indices, flat);
        let data_dim = batch_dims + flat % depth;
        match resolve(rules, operands.index_type, value, data_dims[data_dim]) {
            Resolved::Bad => {
                return Err(index_out_of_range(
                    kind.op_name(),
                    &unravel(flat, ids_dims),
                    value,
                    data_dim,
                    data_dims[data_dim],
                ));
            }
            Resolved::At(at) if at as i128 == value => {}
            _ => resolved_all = false,
        }
    }
    if batch_dims == 0 && resolved_all {
        let job = Job::new(
            signature(
                ScatterOp::Nd,
                kind,
                rules,
                operands,
                operands.index_type,
                [data_dims, ids_dims, operands.updates_dims],
            ),
            Cow::Borrowed(operands.indices),
            Cow::Borrowed(operands.updates),
        );
        return execute(cache, &job, dest)?.map_err(from_jit);
    }
    let width = batch_dims + depth;
    let slice_bytes = element_count(&data_dims[width..])
        .and_then(|n| n.checked_mul(operands.dtype.size()))
        .ok_or_else(|| too_large("data"))?;
    if operands.updates.len() != tuples.saturating_mul(slice_bytes) {
        return Err(msg(format!(
            "scatter-nd: updates of shape {:?} do not match indices {ids_dims:?}",
            operands.updates_dims
        )));
    }
    let tuple_dims = &ids_dims[..ids_dims.len() - 1];
    let mut packed = Packed::new(tuples, width, slice_bytes)?;
    'tuples: for t in 0..tuples {
        let mut tuple = unravel(t, tuple_dims);
        tuple.truncate(batch_dims);
        for j in 0..depth {
            let value = operands.index_type.read(operands.indices, t * depth + j);
            match resolve(rules, operands.index_type, value, data_dims[batch_dims + j]) {
                Resolved::At(at) => tuple.push(at),
                _ => continue 'tuples,
            }
        }
        packed.push(&tuple, &operands.updates[t * slice_bytes..][..slice_bytes]);
    }
    packed.run(kind, rules, cache, operands, dest)
}

/// The survivors of a scatter as ScatterND operands: each a full tuple of `width` coordinates
/// (`i64`, the first `width` dims of data) and its slice of the updates (the rest of data's
/// dims), in the order pushed.
struct Packed {
    width: usize,
    tuples: Vec<u8>,
    updates: Vec<u8>,
    kept: usize,
}

impl Packed {
    /// Room for `count` tuples of `width` coordinates and slices of `slice_bytes`.
    fn new(count: usize, width: usize, slice_bytes: usize) -> candle_core::Result<Packed> {
        Ok(Packed {
            width,
            tuples: try_vec(count.saturating_mul(width * 8), "the index tuples")?,
            updates: try_vec(count.saturating_mul(slice_bytes), "the updates kept")?,
            kept: 0,
        })
    }

    fn push(&mut self, tuple: &[usize], slice: &[u8]) {
        for &coordinate in tuple {
            self.tuples
                .extend_from_slice(&(coordinate as i64).to_ne_bytes());
        }
        self.updates.extend_from_slice(slice);
        self.kept += 1;
    }

    /// ScatterND of `kind` on the tuples kept into `dest` (data unchanged if none was).
    fn run(
        self,
        kind: Kind,
        rules: IndexRules,
        cache: &KernelCache,
        operands: &Operands<'_>,
        dest: &mut Dest<'_>,
    ) -> candle_core::Result<()> {
        if self.kept == 0 {
            copy_only(dest);
            return Ok(());
        }
        let mut updates_dims = vec![self.kept];
        updates_dims.extend_from_slice(&operands.data_dims[self.width..]);
        let job = Job::new(
            signature(
                ScatterOp::Nd,
                kind,
                rules,
                operands,
                IndexType::I64,
                [operands.data_dims, &[self.kept, self.width], &updates_dims],
            ),
            Cow::Owned(self.tuples),
            Cow::Owned(self.updates),
        );
        execute(cache, &job, dest)?.map_err(from_jit)
    }
}

/// Whether some index in `indices` is its type's maximum.
fn contains_maximum(indices: &[u8], index_type: IndexType) -> bool {
    let maximum = index_type.max_value() as i128;
    (0..indices.len() / index_type.size()).any(|i| index_type.read(indices, i) == maximum)
}

/// An empty vector with room for `count` elements, or the allocation error naming `what`.
fn try_vec<T>(count: usize, what: &str) -> candle_core::Result<Vec<T>> {
    let mut vec = Vec::new();
    vec.try_reserve_exact(count)
        .map_err(|_| allocation(what, count.saturating_mul(size_of::<T>())))?;
    Ok(vec)
}

fn too_large(what: &str) -> candle_core::Error {
    msg(format!("{what}: more elements than fit in memory"))
}

/// An attribute as gather-jit's `i64`.
fn attribute(value: usize) -> candle_core::Result<i64> {
    i64::try_from(value).map_err(|_| msg(format!("attribute {value} does not fit in i64")))
}
