//! [`Embedding`]: `candle_nn::Embedding` with the lookup done by a gather-jit kernel.

use std::sync::Arc;

use candle_core::{Module, Tensor};
use gather_jit::KernelCache;

use crate::{IndexRules, JitGather};

/// A drop-in for `candle_nn::Embedding`: the same constructor, accessor and [`Module`]
/// behaviour (`forward(ids)` has shape `ids.dims() + [hidden_size]`, bit-identical values, the
/// same ids rejected), with the lookup a gather-jit kernel.
///
/// The ids are gathered in their own shape (ONNX Gather along dim 0), without candle's
/// flatten and reshape.
///
/// ```
/// use candle_core::{Device, Module, Tensor};
/// use gather_jit_candle::Embedding;
///
/// let table = Tensor::arange(0f32, 12., &Device::Cpu)?.reshape((4, 3))?;
/// let embedding = Embedding::new(table, 3);
/// let ids = Tensor::new(&[[3u32, 0], [1, 1]], &Device::Cpu)?;
/// let out = embedding.forward(&ids)?;
/// assert_eq!(out.dims(), [2, 2, 3]);
/// assert_eq!(out.to_vec3::<f32>()?[0][0], [9., 10., 11.]);
/// # Ok::<(), candle_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Embedding {
    embeddings: Tensor,
    hidden_size: usize,
    lookup: JitGather,
}

impl Embedding {
    /// An embedding of `hidden_size` wide rows of the table `embeddings` (`[vocabulary,
    /// hidden_size]`), as `candle_nn::Embedding::new`.
    pub fn new(embeddings: Tensor, hidden_size: usize) -> Embedding {
        Embedding {
            embeddings,
            hidden_size,
            lookup: JitGather::take(0),
        }
    }

    /// The table.
    pub fn embeddings(&self) -> &Tensor {
        &self.embeddings
    }

    /// The width of a row.
    pub fn hidden_size(&self) -> usize {
        self.hidden_size
    }

    /// The same embedding under other index rules ([`IndexRules::Candle`] by default, as
    /// `candle_nn::Embedding`).
    pub fn with_rules(mut self, rules: IndexRules) -> Embedding {
        self.lookup = self.lookup.with_rules(rules);
        self
    }

    /// The same embedding taking its kernels from `cache` instead of the process-wide one.
    pub fn with_cache(mut self, cache: Arc<KernelCache>) -> Embedding {
        self.lookup = self.lookup.with_cache(cache);
        self
    }
}

impl Module for Embedding {
    fn forward(&self, ids: &Tensor) -> candle_core::Result<Tensor> {
        let rows = self.lookup.apply(&self.embeddings, ids)?;
        // candle_nn's shape: the gather's already, unless the table is not `[_, hidden_size]`
        // (then the reshape fails or folds, as candle_nn's does).
        let dims = rows.dims();
        let (id_dims, row_dims) = dims.split_at(dims.len().min(ids.rank()));
        if id_dims == ids.dims() && row_dims == [self.hidden_size] {
            return Ok(rows);
        }
        let mut shape = ids.dims().to_vec();
        shape.push(self.hidden_size);
        rows.reshape(shape)
    }
}
