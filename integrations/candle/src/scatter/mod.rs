//! [`JitScatter`]: candle's `scatter`, `scatter_add` and `index_add`, out of place
//! ([`CustomOp3`](candle_core::CustomOp3), with a backward pass) and in place
//! ([`InplaceOp3`](candle_core::InplaceOp3)), run by gather-jit's
//! scatter kernels. `plan.rs` maps each onto the kernels, `ops.rs` implements candle's op traits
//! by element type.

mod ops;
mod plan;

use std::mem::MaybeUninit;
use std::sync::Arc;

use candle_core::backend::{BackendDevice, BackendStorage};
use candle_core::{CpuStorage, Layout, Shape, Tensor, WithDType};
use gather_jit::{DType, IndexType, KernelCache};

use ops::OntoZeros;
pub(crate) use plan::Kind;
use plan::{Dest, Operands};

use crate::error::{allocation, msg};
use crate::layout::{as_bytes_mut, contiguous, element_count};
use crate::{IndexRules, JitGather};

/// A candle scatter as a custom op run by gather-jit's scatter kernels, compiled for the
/// shapes, types and rules of the call and cached.
///
/// - [`JitScatter::scatter`]: `Tensor::scatter` (ONNX ScatterElements): `source[i, j, ..]`
///   lands in data at the same coordinates but the `dim` one, which is `indices[i, j, ..]`; of
///   two updates of one element the later in row-major order wins.
/// - [`JitScatter::scatter_add`]: `Tensor::scatter_add`, adding instead.
/// - [`JitScatter::index_add`]: `Tensor::index_add`: 1-D ids, slice `i` of `source` along `dim`
///   is added to slice `ids[i]` of data.
///
/// Updates are applied in candle's order (row-major over the indices; for `index_add` the ids
/// in order), so float sums round as candle's CPU loops round them, bit for bit. Under
/// [`IndexRules::Candle`] an id at its type's maximum is skipped, a negative or out-of-range one
/// is an error naming its position and value, found before anything is written: an in-place
/// call that fails leaves data unchanged (candle's own may have applied the updates before the
/// bad index).
///
/// Data and source of any candle dtype but the sub-byte ones; `f8e4m3` sums run candle's own
/// loop (gather-jit has no 8-bit float arithmetic). Indices `u8`, `u32`, `i16`, `i32`, `i64`.
///
/// ```
/// use candle_core::{Device, Tensor};
/// use gather_jit_candle::JitScatter;
///
/// let data = Tensor::zeros((3, 2), candle_core::DType::F32, &Device::Cpu)?;
/// let ids = Tensor::new(&[2u32, 0, 2], &Device::Cpu)?;
/// let rows = Tensor::new(&[[1f32, 2.], [3., 4.], [5., 6.]], &Device::Cpu)?;
/// let sum = JitScatter::index_add(0).apply(&data, &ids, &rows)?;
/// assert_eq!(sum.to_vec2::<f32>()?, [[3., 4.], [0., 0.], [6., 8.]]);
/// # Ok::<(), candle_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct JitScatter {
    kind: Kind,
    rules: IndexRules,
    cache: Option<Arc<KernelCache>>,
}

impl JitScatter {
    /// `Tensor::scatter(ids, source, dim)`: `ids` and `source` of one shape, of data's rank, each
    /// dim but `dim` at most data's.
    pub fn scatter(dim: usize) -> JitScatter {
        JitScatter::new(Kind::Scatter { dim })
    }

    /// `Tensor::scatter_add(ids, source, dim)`: as [`JitScatter::scatter`], adding.
    pub fn scatter_add(dim: usize) -> JitScatter {
        JitScatter::new(Kind::ScatterAdd { dim })
    }

    /// `Tensor::index_add(ids, source, dim)`: 1-D `ids`, `source` of data's shape but `dim`, which
    /// has one slice an id.
    pub fn index_add(dim: usize) -> JitScatter {
        JitScatter::new(Kind::IndexAdd { dim })
    }

    /// GatherND's gradient: ScatterND with `batch_dims`, summing.
    pub(crate) fn scatter_nd_add(batch_dims: usize) -> JitScatter {
        JitScatter::new(Kind::ScatterNdAdd { batch_dims })
    }

    pub(crate) fn new(kind: Kind) -> JitScatter {
        JitScatter {
            kind,
            rules: IndexRules::Candle,
            cache: None,
        }
    }

    /// The same op under other index rules ([`IndexRules::Candle`] by default): ONNX's wrap
    /// negative ids; a policy may drop out-of-range ids' updates (`Zero`) or clamp them.
    pub fn with_rules(mut self, rules: IndexRules) -> JitScatter {
        self.rules = rules;
        self
    }

    /// The same op taking its kernels from `cache` instead of gather-jit's process-wide one.
    pub fn with_cache(mut self, cache: Arc<KernelCache>) -> JitScatter {
        self.cache = Some(cache);
        self
    }

    pub(crate) fn with_cache_of(mut self, cache: Option<Arc<KernelCache>>) -> JitScatter {
        self.cache = cache;
        self
    }

    /// The op's index rules.
    pub fn rules(&self) -> IndexRules {
        self.rules
    }

    fn cache(&self) -> &KernelCache {
        self.cache.as_deref().unwrap_or(KernelCache::global())
    }

    /// The gather that reads back what this scatter's source wrote (under its rules): the
    /// gradient of the source.
    fn source_gather(&self) -> JitGather {
        let gather = match self.kind {
            Kind::Scatter { dim } | Kind::ScatterAdd { dim } => JitGather::gather(dim),
            Kind::IndexAdd { dim } => JitGather::index_select(dim),
            Kind::ScatterNdAdd { batch_dims } => JitGather::gather_nd(batch_dims),
        };
        let gather = gather.with_rules(self.rules);
        match &self.cache {
            Some(cache) => gather.with_cache(cache.clone()),
            None => gather,
        }
    }

    /// `data` with `source` scattered into it, a new tensor. When one of the operands tracks
    /// gradients, the result does too ([`CustomOp3::bwd`](candle_core::CustomOp3::bwd)). On a device other than the CPU,
    /// under candle's rules, candle's own op runs.
    ///
    /// # Errors
    /// Shapes the op rejects, dtypes that differ, a bad index (with its position and value),
    /// an output that cannot be allocated.
    pub fn apply(
        &self,
        data: &Tensor,
        indices: &Tensor,
        source: &Tensor,
    ) -> candle_core::Result<Tensor> {
        if !data.device().is_cpu() && self.rules == IndexRules::Candle {
            match self.kind {
                Kind::Scatter { dim } => return data.scatter(indices, source, dim),
                Kind::ScatterAdd { dim } => return data.scatter_add(indices, source, dim),
                Kind::IndexAdd { dim } => return data.index_add(indices, source, dim),
                Kind::ScatterNdAdd { .. } => {}
            }
        }
        if data.track_op() || indices.track_op() || source.track_op() {
            data.apply_op3(indices, source, self.clone())
        } else {
            data.apply_op3_no_bwd(indices, source, self)
        }
    }

    /// `source` scattered into `data` itself, which must be contiguous and share no storage
    /// with the other operands (as candle's `scatter_set`, `scatter_add_set`). No gradient is
    /// recorded. On an error `data` is unchanged.
    ///
    /// # Errors
    /// As [`JitScatter::apply`], and a `data` that is not contiguous.
    pub fn apply_in_place(
        &self,
        data: &Tensor,
        indices: &Tensor,
        source: &Tensor,
    ) -> candle_core::Result<()> {
        if !data.device().is_cpu() && self.rules == IndexRules::Candle {
            match self.kind {
                Kind::Scatter { dim } => return data.scatter_set(indices, source, dim),
                Kind::ScatterAdd { dim } => return data.scatter_add_set(indices, source, dim),
                Kind::IndexAdd { dim } => {
                    let sum = data.index_add(indices, source, dim)?;
                    return data.slice_set(&sum, 0, 0);
                }
                Kind::ScatterNdAdd { .. } => {}
            }
        }
        if data.elem_count() == 0 {
            // Nothing to write (candle refuses an empty in-place destination); the indices are
            // checked all the same.
            return data.apply_op3_no_bwd(indices, source, self).map(|_| ());
        }
        data.inplace_op3(indices, source, self)
    }

    /// The scatter into zeros of `shape` (the gradient of a gather): a new tensor of
    /// `updates`' dtype.
    pub(crate) fn onto_zeros(
        &self,
        shape: &Shape,
        indices: &Tensor,
        updates: &Tensor,
    ) -> candle_core::Result<Tensor> {
        if !updates.device().is_cpu() && self.rules == IndexRules::Candle {
            let zeros = Tensor::zeros(shape, updates.dtype(), updates.device())?;
            return self.apply(&zeros, indices, updates);
        }
        let op = OntoZeros {
            scatter: self.clone(),
            shape: shape.dims().to_vec(),
        };
        indices.apply_op2_no_bwd(updates, &op)
    }

    fn name(&self) -> &'static str {
        match self.kind {
            Kind::Scatter { .. } => "gather-jit-scatter",
            Kind::ScatterAdd { .. } => "gather-jit-scatter-add",
            Kind::IndexAdd { .. } => "gather-jit-index-add",
            Kind::ScatterNdAdd { .. } => "gather-jit-scatter-nd-add",
        }
    }

    /// The dim candle's own op takes, for `f8e4m3` sums.
    fn candle_dim(&self) -> candle_core::Result<usize> {
        match self.kind {
            Kind::ScatterAdd { dim } | Kind::IndexAdd { dim }
                if self.rules == IndexRules::Candle =>
            {
                Ok(dim)
            }
            _ => Err(msg(format!(
                "{}: f8e4m3 sums run candle's own loop, under candle's index rules only",
                self.name()
            ))),
        }
    }

    /// An `f8e4m3` sum by candle's own loop (gather-jit has no 8-bit float arithmetic), on
    /// contiguous copies of the operands as that loop requires: a new contiguous storage.
    fn f8_sum(
        &self,
        data: &CpuStorage,
        data_layout: &Layout,
        indices: (&CpuStorage, &Layout),
        source: (&CpuStorage, &Layout),
    ) -> candle_core::Result<CpuStorage> {
        let dim = self.candle_dim()?;
        let (ids, ids_layout) = packed(indices.0, indices.1)?;
        let (source, source_layout) = packed(source.0, source.1)?;
        let (mut out, layout) = packed(data, data_layout)?;
        if let Kind::IndexAdd { .. } = self.kind {
            return out.index_add(&layout, &ids, &ids_layout, &source, &source_layout, dim);
        }
        out.scatter_add_set(&layout, &ids, &ids_layout, &source, &source_layout, dim)?;
        Ok(out)
    }

    /// Runs the op on contiguous bytes of `T` into `dest`.
    fn run<T: WithDType>(
        &self,
        dtype: DType,
        data_dims: &[usize],
        indices: (&CpuStorage, &Layout),
        updates: (&[T], &Layout),
        dest: &mut Dest<'_>,
    ) -> candle_core::Result<()> {
        let (ids, ids_layout) = indices;
        let (index_bytes, index_type) = index_bytes(self.name(), ids, ids_layout)?;
        let updates_bytes = contiguous(updates.0, updates.1, "source")?;
        let operands = Operands {
            dtype,
            data_dims,
            index_type,
            indices: &index_bytes,
            indices_dims: ids_layout.dims(),
            updates: &updates_bytes,
            updates_dims: updates.1.dims(),
        };
        plan::run(self.kind, self.rules, self.cache(), &operands, dest)
    }

    /// Out of place: a new storage holding `data` with the updates applied.
    fn out_of_place<T: WithDType>(
        &self,
        dtype: DType,
        data: (&[T], &Layout),
        indices: (&CpuStorage, &Layout),
        updates: (&[T], &Layout),
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let data_bytes = contiguous(data.0, data.1, "data")?;
        let count = data_bytes.len() / size_of::<T>();
        if data_bytes.len() >= SPARSE_COPY_BYTES {
            // New zeros and data's pages copied in but those all zeros (a gradient table),
            // then the scatter in place: the allocator's fresh zero pages the copy skips are
            // never touched.
            let mut output = zeroed::<T>(count)?;
            copy_nonzero_pages(&data_bytes, as_bytes_mut(&mut output));
            let mut dest = Dest::InPlace(as_bytes_mut(&mut output));
            self.run(dtype, data.1.dims(), indices, updates, &mut dest)?;
            return Ok((T::to_cpu_storage_owned(output), data.1.shape().clone()));
        }
        let mut output: Vec<T> = Vec::new();
        output
            .try_reserve_exact(count)
            .map_err(|_| allocation("the output", data_bytes.len()))?;
        let spare = &mut output.spare_capacity_mut()[..count];
        // SAFETY: the spare capacity is `count` elements of `T`, so `data_bytes.len()` bytes,
        // uninitialised bytes are valid `MaybeUninit<u8>`, and the slice borrows `output`
        // mutably.
        let out = unsafe {
            std::slice::from_raw_parts_mut(
                spare.as_mut_ptr().cast::<MaybeUninit<u8>>(),
                data_bytes.len(),
            )
        };
        let mut dest = Dest::Copy {
            data: &data_bytes,
            out,
        };
        self.run(dtype, data.1.dims(), indices, updates, &mut dest)?;
        // SAFETY: a run that returns `Ok` wrote every byte of `out` (the data copied, then the
        // updates), which is the first `count` elements of the capacity.
        unsafe { output.set_len(count) };
        Ok((T::to_cpu_storage_owned(output), data.1.shape().clone()))
    }

    /// In place, on the contiguous `data` its layout describes.
    fn in_place<T: WithDType>(
        &self,
        dtype: DType,
        data: (&mut [T], &Layout),
        indices: (&CpuStorage, &Layout),
        updates: (&[T], &Layout),
    ) -> candle_core::Result<()> {
        let (storage, layout) = data;
        let Some((start, end)) = layout.contiguous_offsets() else {
            return Err(msg(format!(
                "{}: in place, data must be contiguous (as candle's own requires)",
                self.name()
            )));
        };
        let data = storage
            .get_mut(start..end)
            .ok_or_else(|| msg(format!("{}: data runs past its storage", self.name())))?;
        let mut dest = Dest::InPlace(as_bytes_mut(data));
        self.run(dtype, layout.dims(), indices, updates, &mut dest)
    }

    /// Into new zeros of `shape`.
    fn onto_zeros_typed<T: WithDType>(
        &self,
        dtype: DType,
        shape: &[usize],
        indices: (&CpuStorage, &Layout),
        updates: (&[T], &Layout),
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let count = element_count(shape)
            .ok_or_else(|| msg(format!("{}: zeros of shape {shape:?}", self.name())))?;
        let mut zeros = zeroed::<T>(count)?;
        let mut dest = Dest::InPlace(as_bytes_mut(&mut zeros));
        self.run(dtype, shape, indices, updates, &mut dest)?;
        Ok((T::to_cpu_storage_owned(zeros), Shape::from(shape)))
    }
}

/// From this size on, an out-of-place scatter's output comes zeroed from the allocator (fresh
/// pages, not cleared by a pass of stores) and data's all-zero pages are not copied into it.
const SPARSE_COPY_BYTES: usize = 8 << 20;

/// Copies `from` into `to`, as long and all zeros, but for the 4 KiB runs of `from` that are
/// zeros too: their part of `to` is left untouched. Each run is read once (a branch-free OR,
/// which vectorises), then copied from the cache if it is not zero.
fn copy_nonzero_pages(from: &[u8], to: &mut [u8]) {
    const RUN: usize = 4096;
    for (from, to) in from.chunks(RUN).zip(to.chunks_mut(RUN)) {
        if from.iter().fold(0u8, |any, &byte| any | byte) != 0 {
            to.copy_from_slice(from);
        }
    }
}

/// A contiguous copy of the tensor `layout` describes in `storage`, and its layout.
fn packed(storage: &CpuStorage, layout: &Layout) -> candle_core::Result<(CpuStorage, Layout)> {
    let shape = layout.shape();
    let mut out = storage.device().zeros_impl(shape, storage.dtype())?;
    storage.copy_strided_src(&mut out, 0, layout)?;
    Ok((out, Layout::contiguous(shape)))
}

/// `count` zeros, allocated zeroed (pages the scatter never touches are never written).
fn zeroed<T: WithDType>(count: usize) -> candle_core::Result<Vec<T>> {
    let layout = std::alloc::Layout::array::<T>(count)
        .map_err(|_| allocation("zeros", count.saturating_mul(size_of::<T>())))?;
    if layout.size() == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: the layout has a non-zero size (checked above).
    let pointer = unsafe { std::alloc::alloc_zeroed(layout) };
    if pointer.is_null() {
        return Err(allocation("zeros", layout.size()));
    }
    // SAFETY: `pointer` was allocated by the global allocator with `T`'s array layout for
    // `count` elements, so length and capacity `count` describe it; all-zero bytes are a valid
    // `T` (candle's element types are integers and IEEE-style floats, whose zero is all zero
    // bits).
    Ok(unsafe { Vec::from_raw_parts(pointer.cast::<T>(), count, count) })
}

/// The indices as C-contiguous bytes and their type.
fn index_bytes<'a>(
    name: &str,
    ids: &'a CpuStorage,
    layout: &Layout,
) -> candle_core::Result<(std::borrow::Cow<'a, [u8]>, IndexType)> {
    Ok(match ids {
        CpuStorage::U8(ids) => (contiguous(ids, layout, "indices")?, IndexType::U8),
        CpuStorage::U32(ids) => (contiguous(ids, layout, "indices")?, IndexType::U32),
        CpuStorage::I16(ids) => (contiguous(ids, layout, "indices")?, IndexType::I16),
        CpuStorage::I32(ids) => (contiguous(ids, layout, "indices")?, IndexType::I32),
        CpuStorage::I64(ids) => (contiguous(ids, layout, "indices")?, IndexType::I64),
        other => {
            return Err(msg(format!(
                "{name}: indices must be u8, u32, i16, i32 or i64, not {:?}",
                other.dtype()
            )));
        }
    })
}
