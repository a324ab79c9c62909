//! gather-jit's kernels for [candle](candle_core): `index_select`, `gather` (GatherElements),
//! `gather_nd` and `take` (ONNX Gather) on [`Tensor`]s as candle custom ops, an
//! [`Embedding`] that stands in for `candle_nn::Embedding`, and a [`QuantizedEmbedding`] over a
//! GGUF `Q4_0`/`Q8_0` `QTensor` that dequantizes only the rows it gathers; and the write half,
//! candle's `scatter`, `scatter_add` and `index_add` ([`JitScatter`]), out of place and in place.
//!
//! Each call asks a [`KernelCache`](gather_jit::KernelCache) (gather-jit's process-wide one
//! unless [`JitGather::with_cache`] gives another) for the kernel of its shapes, dtypes and
//! index rules, compiled on first use, reads contiguous inputs in place (strided ones are
//! packed first) and writes a new output, allocated once. Every failure, a bad index
//! included, is a [`candle_core::Error`] whose message names what went wrong and where.
//!
//! The gathers and the scatters have backward passes: a gather's output that tracks gradients
//! (its data a `Var`, say) gets data's gradient from the scatter that inverts it (`index_add`
//! for `index_select`, `take` and [`Embedding`], `scatter_add` for `gather`, ScatterND with a
//! sum for `gather_nd`), run by gather-jit's scatter kernels into zeros; a scatter's, from the
//! gather that reads back what its source wrote. The gathers' gradients are candle's own bit
//! for bit (the sums fold in candle's order), so a model trains as with candle's ops.
//!
//! ```
//! use candle_core::{Device, Tensor, Var};
//! use gather_jit_candle::GatherJitExt;
//!
//! let table = Var::new(&[[0f32, 1.], [2., 3.], [4., 5.]], &Device::Cpu)?;
//! let ids = Tensor::new(&[2u32, 0, 2], &Device::Cpu)?;
//! let loss = table.jit_index_select(&ids, 0)?.sum_all()?;
//! let grads = loss.backward()?;
//! // Row 2 was read twice, row 1 never.
//! let grad = grads.get(&table).expect("the table's gradient");
//! assert_eq!(grad.to_vec2::<f32>()?, [[1., 1.], [0., 0.], [2., 2.]]);
//! # Ok::<(), candle_core::Error>(())
//! ```
//!
//! ```
//! use candle_core::{Device, Tensor};
//! use gather_jit_candle::GatherJitExt;
//!
//! let data = Tensor::arange(0u32, 12, &Device::Cpu)?.reshape((3, 4))?;
//! // As `data.index_select(&ids, 0)`, bit for bit.
//! let ids = Tensor::new(&[2u32, 0], &Device::Cpu)?;
//! assert_eq!(data.jit_index_select(&ids, 0)?.to_vec2::<u32>()?, [[8, 9, 10, 11], [0, 1, 2, 3]]);
//! // As `data.gather(&ids, 1)`.
//! let ids = Tensor::new(&[[3i64], [0], [1]], &Device::Cpu)?;
//! assert_eq!(data.jit_gather(&ids, 1)?.to_vec2::<u32>()?, [[3], [4], [9]]);
//! // GatherND: one (row, column) pair per output element.
//! let ids = Tensor::new(&[[2i64, 3], [0, 1]], &Device::Cpu)?;
//! assert_eq!(data.jit_gather_nd(&ids, 0)?.to_vec1::<u32>()?, [11, 1]);
//! // As `table.index_add(&ids, &rows, 0)`: rows 0 and 2 of `rows` both add to row 2.
//! let table = Tensor::zeros((3, 2), candle_core::DType::F32, &Device::Cpu)?;
//! let rows = Tensor::new(&[[1f32, 1.], [2., 2.], [3., 3.]], &Device::Cpu)?;
//! let ids = Tensor::new(&[2u32, 0, 2], &Device::Cpu)?;
//! let sums = table.jit_index_add(&ids, &rows, 0)?;
//! assert_eq!(sums.to_vec2::<f32>()?, [[2., 2.], [0., 0.], [4., 4.]]);
//! // A bad index is an error with its position and value, never a panic.
//! let ids = Tensor::new(&[0u32, 3], &Device::Cpu)?;
//! let error = data.jit_index_select(&ids, 0).unwrap_err();
//! assert!(error.to_string().contains("index 3 at position [1]"), "{error}");
//! # Ok::<(), candle_core::Error>(())
//! ```
//!
//! # Index rules
//!
//! By default ([`IndexRules::Candle`]) the ops accept and reject what candle's CPU ops do: a
//! negative or out-of-range index is an error, and an index equal to its type's maximum
//! selects zeros (a scatter drops its update). [`IndexRules::Onnx`] lets negative indices count
//! from the end; [`IndexRules::Policy`] takes any gather-jit policy (zeros, or a scatter's
//! dropped update, or clamping for out-of-range indices). A gradient keeps its op's rules.
//!
//! # Where the ops differ from candle's
//!
//! - Strided inputs are accepted: candle's CPU `index_select` and `gather` return
//!   `RequiresContiguous` for a non-contiguous data tensor (and `gather` for such indices),
//!   its scatters for non-contiguous indices or source (the scatters' in-place forms still
//!   need contiguous data).
//! - `gather` with indices smaller than data in a non-`dim` dim follows ONNX GatherElements:
//!   output element `[i, j, ..]` reads data at the same coordinates but the `dim` one, which
//!   candle 0.11's CPU `gather` only does when the smaller dims are the first or the last.
//! - Indices may also be `i16` or `i32`, which candle's CPU ops reject (but for `scatter_add`
//!   and `index_add`). `scatter` and `scatter_add` take indices and source smaller than data in
//!   dims other than `dim` (ONNX ScatterElements), which candle rejects.
//! - The ops are CPU-only; on another device the ones candle has (`index_select`, `gather`,
//!   `take`, the embedding and the scatters) run candle's own op, under [`IndexRules::Candle`].
//! - Scatters never write part of their updates before an error: an in-place call with a bad
//!   index leaves data unchanged, where candle's loop has applied the updates before it.
//! - `scatter_add`'s gradient with respect to data is the upstream gradient; candle 0.11's own
//!   masks the elements the source was added to (the gradient of `scatter`, which candle's
//!   `scatter` does not mask) and fails when the source is smaller than data.
//! - `index_add_set`: `index_add` in place, which candle does not have.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod embedding;
mod error;
mod layout;
mod op;
mod quantized;
mod scatter;

use candle_core::Tensor;
use candle_core::shape::Dim;

pub use embedding::Embedding;
pub use op::{IndexRules, JitGather};
pub use quantized::QuantizedEmbedding;
pub use scatter::JitScatter;

/// `data.index_select(indices, dim)` by a gather-jit kernel, under candle's index rules.
///
/// # Errors
/// As candle's: indices not 1-D or of a type that cannot index, `dim` out of range, a bad
/// index (with its position and value).
pub fn index_select<D: Dim>(
    data: &Tensor,
    indices: &Tensor,
    dim: D,
) -> candle_core::Result<Tensor> {
    let dim = dim.to_index(data.shape(), "index-select")?;
    JitGather::index_select(dim).apply(data, indices)
}

/// ONNX Gather along `dim` (numpy's `take`): `indices` of any rank, output shape
/// `data[..dim] + indices + data[dim + 1..]`, under candle's index rules.
///
/// # Errors
/// As [`index_select`], without its rank rule.
pub fn take<D: Dim>(data: &Tensor, indices: &Tensor, dim: D) -> candle_core::Result<Tensor> {
    let dim = dim.to_index(data.shape(), "take")?;
    JitGather::take(dim).apply(data, indices)
}

/// `data.gather(indices, dim)` (ONNX GatherElements) by a gather-jit kernel, under candle's
/// index rules.
///
/// # Errors
/// As candle's: ranks that differ, an indices dim larger than data's (but along `dim`), a bad
/// index (with its position and value).
pub fn gather<D: Dim>(data: &Tensor, indices: &Tensor, dim: D) -> candle_core::Result<Tensor> {
    let dim = dim.to_index(data.shape(), "gather")?;
    JitGather::gather(dim).apply(data, indices)
}

/// ONNX GatherND with `batch_dims`: the last dim of `indices` holds tuples indexing data's
/// dims after the batch dims; output shape `indices[..-1] + data[batch_dims + indices[-1]..]`.
/// Under candle's index rules (an index at its type's maximum zeros its tuple's slice).
///
/// # Errors
/// Batch dims that differ or exceed a rank, a tuple longer than data has dims, a bad index
/// (with its position and value).
pub fn gather_nd(
    data: &Tensor,
    indices: &Tensor,
    batch_dims: usize,
) -> candle_core::Result<Tensor> {
    JitGather::gather_nd(batch_dims).apply(data, indices)
}

/// `data.scatter(indices, source, dim)` (ONNX ScatterElements) by a gather-jit kernel, under
/// candle's index rules: a new tensor, data with each element of `source` written where
/// `indices` puts it along `dim` (of two writes of one element the later wins).
///
/// # Errors
/// Ranks that differ, `indices` and `source` of different shapes, a dim of theirs larger than
/// data's (but along `dim`), dtypes that differ, a bad index (with its position and value).
pub fn scatter<D: Dim>(
    data: &Tensor,
    indices: &Tensor,
    source: &Tensor,
    dim: D,
) -> candle_core::Result<Tensor> {
    let dim = dim.to_index(data.shape(), "scatter")?;
    JitScatter::scatter(dim).apply(data, indices, source)
}

/// `data.scatter_add(indices, source, dim)` (ONNX ScatterElements with `add`) by a gather-jit
/// kernel, under candle's index rules: as [`scatter`], adding, in candle's order.
///
/// # Errors
/// As [`scatter`].
pub fn scatter_add<D: Dim>(
    data: &Tensor,
    indices: &Tensor,
    source: &Tensor,
    dim: D,
) -> candle_core::Result<Tensor> {
    let dim = dim.to_index(data.shape(), "scatter-add")?;
    JitScatter::scatter_add(dim).apply(data, indices, source)
}

/// `data.index_add(ids, source, dim)` by gather-jit kernels, under candle's index rules: a new
/// tensor, data with slice `i` of `source` along `dim` added to slice `ids[i]`, in order.
///
/// # Errors
/// `ids` not 1-D, `source` not of data's shape with `ids.len()` along `dim`, dtypes that
/// differ, a bad id (with its position and value).
pub fn index_add<D: Dim>(
    data: &Tensor,
    ids: &Tensor,
    source: &Tensor,
    dim: D,
) -> candle_core::Result<Tensor> {
    let dim = dim.to_index(data.shape(), "index-add")?;
    JitScatter::index_add(dim).apply(data, ids, source)
}

/// [`scatter`] into `data` itself, as `Tensor::scatter_set`: `data` must be contiguous and
/// share no storage with the other operands. On an error `data` is unchanged.
///
/// # Errors
/// As [`scatter`].
pub fn scatter_set<D: Dim>(
    data: &Tensor,
    indices: &Tensor,
    source: &Tensor,
    dim: D,
) -> candle_core::Result<()> {
    let dim = dim.to_index(data.shape(), "scatter-set")?;
    JitScatter::scatter(dim).apply_in_place(data, indices, source)
}

/// [`scatter_add`] into `data` itself, as `Tensor::scatter_add_set`. On an error `data` is
/// unchanged.
///
/// # Errors
/// As [`scatter`].
pub fn scatter_add_set<D: Dim>(
    data: &Tensor,
    indices: &Tensor,
    source: &Tensor,
    dim: D,
) -> candle_core::Result<()> {
    let dim = dim.to_index(data.shape(), "scatter-add-set")?;
    JitScatter::scatter_add(dim).apply_in_place(data, indices, source)
}

/// [`index_add`] into `data` itself (candle has no in-place `index_add`): the work is the
/// source's size, not data's. On an error `data` is unchanged.
///
/// # Errors
/// As [`index_add`].
pub fn index_add_set<D: Dim>(
    data: &Tensor,
    ids: &Tensor,
    source: &Tensor,
    dim: D,
) -> candle_core::Result<()> {
    let dim = dim.to_index(data.shape(), "index-add-set")?;
    JitScatter::index_add(dim).apply_in_place(data, ids, source)
}

/// The ops as methods of [`Tensor`], under candle's index rules.
pub trait GatherJitExt {
    /// [`index_select`] on `self`.
    ///
    /// # Errors
    /// As [`index_select`].
    fn jit_index_select<D: Dim>(&self, indices: &Tensor, dim: D) -> candle_core::Result<Tensor>;

    /// [`take`] on `self`.
    ///
    /// # Errors
    /// As [`take`].
    fn jit_take<D: Dim>(&self, indices: &Tensor, dim: D) -> candle_core::Result<Tensor>;

    /// [`gather`] on `self`.
    ///
    /// # Errors
    /// As [`gather`].
    fn jit_gather<D: Dim>(&self, indices: &Tensor, dim: D) -> candle_core::Result<Tensor>;

    /// [`gather_nd`] on `self`.
    ///
    /// # Errors
    /// As [`gather_nd`].
    fn jit_gather_nd(&self, indices: &Tensor, batch_dims: usize) -> candle_core::Result<Tensor>;

    /// [`scatter`] on `self`.
    ///
    /// # Errors
    /// As [`scatter`].
    fn jit_scatter<D: Dim>(
        &self,
        indices: &Tensor,
        source: &Tensor,
        dim: D,
    ) -> candle_core::Result<Tensor>;

    /// [`scatter_add`] on `self`.
    ///
    /// # Errors
    /// As [`scatter_add`].
    fn jit_scatter_add<D: Dim>(
        &self,
        indices: &Tensor,
        source: &Tensor,
        dim: D,
    ) -> candle_core::Result<Tensor>;

    /// [`index_add`] on `self`.
    ///
    /// # Errors
    /// As [`index_add`].
    fn jit_index_add<D: Dim>(
        &self,
        ids: &Tensor,
        source: &Tensor,
        dim: D,
    ) -> candle_core::Result<Tensor>;

    /// [`scatter_set`] on `self`.
    ///
    /// # Errors
    /// As [`scatter_set`].
    fn jit_scatter_set<D: Dim>(
        &self,
        indices: &Tensor,
        source: &Tensor,
        dim: D,
    ) -> candle_core::Result<()>;

    /// [`scatter_add_set`] on `self`.
    ///
    /// # Errors
    /// As [`scatter_add_set`].
    fn jit_scatter_add_set<D: Dim>(
        &self,
        indices: &Tensor,
        source: &Tensor,
        dim: D,
    ) -> candle_core::Result<()>;

    /// [`index_add_set`] on `self`.
    ///
    /// # Errors
    /// As [`index_add_set`].
    fn jit_index_add_set<D: Dim>(
        &self,
        ids: &Tensor,
        source: &Tensor,
        dim: D,
    ) -> candle_core::Result<()>;
}

impl GatherJitExt for Tensor {
    fn jit_index_select<D: Dim>(&self, indices: &Tensor, dim: D) -> candle_core::Result<Tensor> {
        index_select(self, indices, dim)
    }

    fn jit_take<D: Dim>(&self, indices: &Tensor, dim: D) -> candle_core::Result<Tensor> {
        take(self, indices, dim)
    }

    fn jit_gather<D: Dim>(&self, indices: &Tensor, dim: D) -> candle_core::Result<Tensor> {
        gather(self, indices, dim)
    }

    fn jit_gather_nd(&self, indices: &Tensor, batch_dims: usize) -> candle_core::Result<Tensor> {
        gather_nd(self, indices, batch_dims)
    }

    fn jit_scatter<D: Dim>(
        &self,
        indices: &Tensor,
        source: &Tensor,
        dim: D,
    ) -> candle_core::Result<Tensor> {
        scatter(self, indices, source, dim)
    }

    fn jit_scatter_add<D: Dim>(
        &self,
        indices: &Tensor,
        source: &Tensor,
        dim: D,
    ) -> candle_core::Result<Tensor> {
        scatter_add(self, indices, source, dim)
    }

    fn jit_index_add<D: Dim>(
        &self,
        ids: &Tensor,
        source: &Tensor,
        dim: D,
    ) -> candle_core::Result<Tensor> {
        index_add(self, ids, source, dim)
    }

    fn jit_scatter_set<D: Dim>(
        &self,
        indices: &Tensor,
        source: &Tensor,
        dim: D,
    ) -> candle_core::Result<()> {
        scatter_set(self, indices, source, dim)
    }

    fn jit_scatter_add_set<D: Dim>(
        &self,
        indices: &Tensor,
        source: &Tensor,
        dim: D,
    ) -> candle_core::Result<()> {
        scatter_add_set(self, indices, source, dim)
    }

    fn jit_index_add_set<D: Dim>(
        &self,
        ids: &Tensor,
        source: &Tensor,
        dim: D,
    ) -> candle_core::Result<()> {
        index_add_set(self, ids, source, dim)
    }
}
