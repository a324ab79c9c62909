//! [`JitGather`]: one gather-jit kernel behind candle's [`CustomOp2`].

use std::cell::RefCell;
use std::sync::Arc;

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp2, Layout, Shape, Tensor, WithDType};
use gather_jit::ir::OpName;
use gather_jit::ir::{output_shape, unravel};
use gather_jit::{
    DType, Flavor, IndexPolicy, IndexType, Kernel, KernelCache, NegativeIndices, Op, OutOfRange,
    OutputMemory, Signature,
};

use crate::JitScatter;
use crate::error::{from_jit, msg};
use crate::layout::contiguous;

thread_local! {
    /// Each thread's last call: repeating it (a generation loop's step) runs its kernel
    /// without asking the cache, and another call reuses its shape buffers.
    static LAST_CALL: RefCell<Option<LastCall>> = const { RefCell::new(None) };
}

/// A thread's last call: its signature, the cache asked and the kernel the cache gave.
///
/// The kernel is held until the thread's next call on other shapes or its exit, even if the
/// cache evicts it meanwhile: one kernel a thread, the price of a repeated call that touches
/// no shared memory (the cache's hit path swaps a flag and stamps the entry).
struct LastCall {
    signature: Signature,
    /// The cache's address, only compared: the kernel came from the op's own cache.
    cache: *const KernelCache,
    kernel: Option<Arc<Kernel>>,
}

/// Which index values are valid and what they select.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IndexRules {
    /// candle's own rules, those of `Tensor::index_select` and `Tensor::gather` on the CPU: a
    /// negative or out-of-range index is an error, and an index equal to its type's maximum
    /// (`u8` 255, `u32` 4294967295, `i64` `i64::MAX`) selects zeros, even where it would be in
    /// range. `gather_nd` follows them too: such an index zeros its tuple's whole slice.
    #[default]
    Candle,
    /// ONNX's rules (Gather-13, GatherElements-13, GatherND-13): a negative index counts from
    /// the end of its dim, an out-of-range one is an error; no value is special.
    Onnx,
    /// Any gather-jit index policy (out-of-range indices as zeros, clamped, ...); no value is
    /// special.
    Policy(IndexPolicy),
}

impl IndexRules {
    /// The gather-jit policy the kernel is compiled with (before candle's maximum-value rule).
    pub fn policy(self) -> IndexPolicy {
        match self {
            IndexRules::Candle => IndexPolicy {
                negative: NegativeIndices::Invalid,
                out_of_range: OutOfRange::Error,
            },
            IndexRules::Onnx => IndexPolicy {
                negative: NegativeIndices::Wrap,
                out_of_range: OutOfRange::Error,
            },
            IndexRules::Policy(policy) => policy,
        }
    }
}

/// The op and its (normalised) attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// `Tensor::index_select`: 1-D indices along `dim`.
    IndexSelect { dim: usize },
    /// ONNX Gather (numpy's `take`): indices of any rank along `dim`.
    Take { dim: usize },
    /// `Tensor::gather` (ONNX GatherElements) along `dim`.
    Gather { dim: usize },
    /// ONNX GatherND with `batch_dims`.
    GatherNd { batch_dims: usize },
}

/// A gather as a candle custom op ([`CustomOp2`]: data, then indices), run by a kernel that
/// gather-jit compiles for the shapes, types and rules of the call and caches.
///
/// Inputs may have any layout: contiguous tensors (at any start offset) are read in place,
/// others are packed first. Data of any candle dtype but the sub-byte ones (`f6`, `f4`,
/// `f8e8m0`); indices `u8`, `u32`, `i64` (as candle), and also `i16`, `i32`.
///
/// Each thread keeps the kernel of its last call: repeating that call (the same shapes,
/// types, rules and cache, as a generation loop does every token) skips the cache's lookup.
/// That kernel stays alive until the thread's next call on other shapes, or its exit, even
/// if the cache evicts it meanwhile: one kernel a thread.
///
/// ```
/// use candle_core::{Device, Tensor};
/// use gather_jit_candle::{IndexRules, JitGather};
///
/// let data = Tensor::arange(0f32, 6., &Device::Cpu)?.reshape((3, 2))?;
/// let ids = Tensor::new(&[2i64, -3], &Device::Cpu)?;
/// // ONNX rules: -3 counts from the end of dim 0.
/// let rows = JitGather::index_select(0).with_rules(IndexRules::Onnx).apply(&data, &ids)?;
/// assert_eq!(rows.to_vec2::<f32>()?, [[4., 5.], [0., 1.]]);
/// # Ok::<(), candle_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct JitGather {
    kind: Kind,
    rules: IndexRules,
    cache: Option<Arc<KernelCache>>,
}

impl JitGather {
    /// `Tensor::index_select(ids, dim)`: 1-D `ids` pick slices of `dim`; the output is data's
    /// shape with `dim` replaced by the number of ids.
    pub fn index_select(dim: usize) -> JitGather {
        JitGather::new(Kind::IndexSelect { dim })
    }

    /// ONNX Gather (numpy's `take`): `ids` of any rank pick slices of `dim`; the output shape
    /// is `data[..dim] + ids + data[dim + 1..]`, without candle's flatten and reshape.
    pub fn take(dim: usize) -> JitGather {
        JitGather::new(Kind::Take { dim })
    }

    /// `Tensor::gather(ids, dim)` (ONNX GatherElements): `ids` has data's rank, each non-`dim`
    /// dim at most data's, and the output its shape.
    pub fn gather(dim: usize) -> JitGather {
        JitGather::new(Kind::Gather { dim })
    }

    /// ONNX GatherND: the last dim of `ids` holds tuples that index the dims of data after
    /// its first `batch_dims` (which data and `ids` share); the output shape is
    /// `ids[..-1] + data[batch_dims + ids[-1]..]`.
    pub fn gather_nd(batch_dims: usize) -> JitGather {
        JitGather::new(Kind::GatherNd { batch_dims })
    }

    fn new(kind: Kind) -> JitGather {
        JitGather {
            kind,
            rules: IndexRules::Candle,
            cache: None,
        }
    }

    /// The same op under other index rules ([`IndexRules::Candle`] by default).
    pub fn with_rules(mut self, rules: IndexRules) -> JitGather {
        self.rules = rules;
        self
    }

    /// The same op taking its kernels from `cache` instead of gather-jit's process-wide one.
    pub fn with_cache(mut self, cache: Arc<KernelCache>) -> JitGather {
        self.cache = Some(cache);
        self
    }

    /// The op's index rules.
    pub fn rules(&self) -> IndexRules {
        self.rules
    }

    fn cache(&self) -> &KernelCache {
        self.cache.as_deref().unwrap_or(KernelCache::global())
    }

    /// Runs the op on `data` and `indices`. On a device other than the CPU, under candle's
    /// rules, `index_select`, `take` and `gather` run candle's own op; otherwise the op is
    /// CPU-only.
    ///
    /// # Errors
    /// A shape, dtype or attribute the op rejects, a bad index (with its position and value)
    /// or an output that cannot be allocated.
    pub fn apply(&self, data: &Tensor, indices: &Tensor) -> candle_core::Result<Tensor> {
        if !data.device().is_cpu() && self.rules == IndexRules::Candle {
            match self.kind {
                Kind::IndexSelect { dim } => return data.index_select(indices, dim),
                Kind::Gather { dim } => return data.gather(indices, dim),
                Kind::Take { dim } if dim < data.rank() => {
                    let take = Op::Gather {
                        axis: attribute(dim)?,
                        batch_dims: 0,
                    };
                    let (_, dims) = output_shape(take, Flavor::Onnx, data.dims(), indices.dims())
                        .map_err(from_jit)?;
                    return data
                        .index_select(&indices.flatten_all()?, dim)?
                        .reshape(dims);
                }
                Kind::Take { .. } | Kind::GatherNd { .. } => {}
            }
        }
        if data.track_op() || indices.track_op() {
            data.apply_op2(indices, self.clone())
        } else {
            data.apply_op2_no_bwd(indices, self)
        }
    }

    /// The gradient of data: `grad` (of the output's shape) scattered back, summing, into
    /// zeros of data's shape, through the indices as the gather resolved them.
    fn data_grad(
        &self,
        data: &Tensor,
        indices: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<Tensor> {
        if data.elem_count() == 0 {
            // Nothing to scatter into (and candle's index_select checks no id then).
            return data.zeros_like();
        }
        let (scatter, indices, grad) = match self.kind {
            Kind::IndexSelect { dim } => {
                (JitScatter::index_add(dim), indices.clone(), grad.clone())
            }
            Kind::Take { dim } => {
                // Gather's output `data[..dim] + ids + data[dim + 1..]` folds back to
                // index_select's: flat ids, one slice each.
                let mut dims = data.dims().to_vec();
                dims[dim] = indices.elem_count();
                (
                    JitScatter::index_add(dim),
                    indices.flatten_all()?,
                    grad.reshape(dims)?,
                )
            }
            Kind::Gather { dim } => (JitScatter::scatter_add(dim), indices.clone(), grad.clone()),
            Kind::GatherNd { batch_dims } => (
                JitScatter::scatter_nd_add(batch_dims),
                indices.clone(),
                grad.clone(),
            ),
        };
        scatter
            .with_rules(self.rules)
            .with_cache_of(self.cache.clone())
            .onto_zeros(data.shape(), &indices, &grad)
    }

    /// The gather-jit op of a call with indices of shape `indices`.
    fn op(&self, indices: &[usize]) -> candle_core::Result<Op> {
        Ok(match self.kind {
            Kind::IndexSelect { dim } => {
                if indices.len() != 1 {
                    return Err(msg(format!(
                        "index-select: indices must be 1-D, got shape {indices:?}"
                    )));
                }
                Op::Gather {
                    axis: attribute(dim)?,
                    batch_dims: 0,
                }
            }
            Kind::Take { dim } => Op::Gather {
                axis: attribute(dim)?,
                batch_dims: 0,
            },
            Kind::Gather { dim } => Op::GatherElements {
                axis: attribute(dim)?,
            },
            Kind::GatherNd { batch_dims } => Op::GatherNd {
                batch_dims: attribute(batch_dims)?,
            },
        })
    }

    /// The gather on C-contiguous `data` and `indices`, under the op's rules.
    ///
    /// `kernel` holds the signature's kernel if the caller has it, and the kernel the call
    /// ran on return.
    fn forward<T: WithDType>(
        &self,
        data: &[u8],
        indices: &[u8],
        signature: &Signature,
        kernel: &mut Option<Arc<Kernel>>,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let candle = self.rules == IndexRules::Candle;
        if let (true, Kind::IndexSelect { dim } | Kind::Take { dim }) = (candle, self.kind)
            && dim < signature.data_shape.len()
            && signature.data_shape[..dim].contains(&0)
        {
            // candle's index_select never reads an id when the dims before `dim` are empty, so
            // none is an error; gather-jit would check them all.
            let (_, shape) = output_shape(
                signature.op,
                signature.flavor,
                &signature.data_shape,
                &signature.indices_shape,
            )
            .map_err(from_jit)?;
            return Ok((T::to_cpu_storage_owned(Vec::new()), Shape::from(shape)));
        }
        let maximum = signature.index_type.max_value() as u128;
        // Where the type's maximum is a valid index (u8 ids into a dim of more than 255), the
        // kernel would read that row: look for the value first.
        if candle
            && signature.data_shape.iter().any(|&d| d as u128 > maximum)
            && contains_maximum(indices, signature.index_type)
        {
            return self.forward_with_maxima::<T>(data, indices, signature);
        }
        let kernel = match kernel {
            Some(kernel) => kernel,
            None => kernel.insert(self.cache().get(signature).map_err(from_jit)?),
        };
        match run::<T>(kernel, data, indices)? {
            Ok(output) => Ok(output),
            // A maximum is out of range wherever the check above did not run: the kernel stops
            // at the first one, and the slow path takes over.
            Err(gather_jit::Error::IndexOutOfRange { value, .. })
                if candle && value == maximum as i128 =>
            {
                self.forward_with_maxima::<T>(data, indices, signature)
            }
            Err(error) => Err(from_jit(error)),
        }
    }

    /// candle's rules when some index is its type's maximum: every other index is checked
    /// here (the first bad one in row-major order is the error, as the kernel would report
    /// it), then the gather runs on `i64` indices with each maximum turned into `-1`, under a
    /// policy that zeros out-of-range slices.
    fn forward_with_maxima<T: WithDType>(
        &self,
        data: &[u8],
        indices: &[u8],
        signature: &Signature,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let index_type = signature.index_type;
        let maximum = index_type.max_value() as i128;
        let count = indices.len() / index_type.size();
        // Eight bytes an index: more than `usize` holds for 1-byte indices past 2^61.
        let wide_bytes = count.checked_mul(8).ok_or_else(|| {
            msg(format!(
                "could not allocate the indices as i64: {count} of them are more bytes than \
                 fit in memory"
            ))
        })?;
        let mut wide: Vec<u8> = Vec::new();
        wide.try_reserve_exact(wide_bytes)
            .map_err(|_| crate::error::allocation("the indices as i64", wide_bytes))?;
        let depth = signature.indices_shape.last().copied().unwrap_or(1).max(1);
        for flat in 0..count {
            let value = index_type.read(indices, flat);
            let wide_value = if value == maximum {
                -1
            } else {
                let (op, data_dim) = match self.kind {
                    Kind::IndexSelect { dim } | Kind::Take { dim } => (OpName::Gather, dim),
                    Kind::Gather { dim } => (OpName::GatherElements, dim),
                    // Saturating: the attribute is not validated yet (a dim past data's
                    // rank has size 0 below, so its index is the error either way).
                    Kind::GatherNd { batch_dims } => {
                        (OpName::GatherNd, batch_dims.saturating_add(flat % depth))
                    }
                };
                let dim_size = signature.data_shape.get(data_dim).copied().unwrap_or(0);
                if value < 0 || value >= dim_size as i128 {
                    return Err(crate::error::index_out_of_range(
                        op,
                        &unravel(flat, &signature.indices_shape),
                        value,
                        data_dim,
                        dim_size,
                    ));
                }
                value as i64
            };
            wide.extend_from_slice(&wide_value.to_ne_bytes());
        }
        let zeroing = signature
            .clone()
            .with_index_type(IndexType::I64)
            .with_policy(IndexPolicy {
                negative: NegativeIndices::Invalid,
                out_of_range: OutOfRange::Zero,
            });
        self.cache()
            .with(&zeroing, |kernel| run::<T>(kernel, data, &wide))
            .map_err(from_jit)??
            .map_err(from_jit)
    }

    /// Packs the operands and runs the gather for data elements of type `T`.
    fn typed<T: WithDType>(
        &self,
        data: &[T],
        data_layout: &Layout,
        dtype: DType,
        indices: &CpuStorage,
        indices_layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (indices, index_type) = match indices {
            CpuStorage::U8(ids) => (contiguous(ids, indices_layout, "indices")?, IndexType::U8),
            CpuStorage::U32(ids) => (contiguous(ids, indices_layout, "indices")?, IndexType::U32),
            CpuStorage::I16(ids) => (contiguous(ids, indices_layout, "indices")?, IndexType::I16),
            CpuStorage::I32(ids) => (contiguous(ids, indices_layout, "indices")?, IndexType::I32),
            CpuStorage::I64(ids) => (contiguous(ids, indices_layout, "indices")?, IndexType::I64),
            other => {
                return Err(msg(format!(
                    "{}: indices must be u8, u32, i16, i32 or i64, not {:?}",
                    self.name(),
                    other.dtype()
                )));
            }
        };
        let op = self.op(indices_layout.dims())?;
        let data = contiguous(data, data_layout, "data")?;
        let (data_dims, indices_dims) = (data_layout.dims(), indices_layout.dims());
        let policy = self.rules.policy();
        let cache: *const KernelCache = self.cache();
        let remembered = LAST_CALL.try_with(|last| {
            // Borrowed already only if the call re-entered itself: no fast path then.
            let mut last = last.try_borrow_mut().ok()?;
            let last = last.get_or_insert_with(|| LastCall {
                // Each call's output is a new candle storage.
                signature: Signature::gather(&[], &[], 0, 0)
                    .with_output_memory(OutputMemory::Fresh),
                cache,
                kernel: None,
            });
            let signature = &mut last.signature;
            let same = last.cache == cache
                && same_dims(&signature.indices_shape, indices_dims)
                && same_dims(&signature.data_shape, data_dims)
                && signature.op == op
                && signature.flavor == Flavor::Onnx
                && signature.policy == policy
                && signature.dtype == dtype
                && signature.index_type == index_type;
            if !same {
                last.cache = cache;
                last.kernel = None;
                signature.op = op;
                signature.flavor = Flavor::Onnx;
                signature.policy = policy;
                signature.dtype = dtype;
                signature.index_type = index_type;
                signature.data_shape.clear();
                signature.data_shape.extend_from_slice(data_dims);
                signature.indices_shape.clear();
                signature.indices_shape.extend_from_slice(indices_dims);
            }
            Some(self.forward::<T>(&data, &indices, &last.signature, &mut last.kernel))
        });
        match remembered {
            Ok(Some(result)) => result,
            // The thread is being torn down, or the slot is in use.
            _ => {
                let signature = Signature::new(op, data_dims, indices_dims)
                    .with_flavor(Flavor::Onnx)
                    .with_policy(policy)
                    .with_dtype(dtype)
                    .with_index_type(index_type)
                    .with_output_memory(OutputMemory::Fresh);
                self.forward::<T>(&data, &indices, &signature, &mut None)
            }
        }
    }
}

impl CustomOp2 for JitGather {
    fn name(&self) -> &'static str {
        match self.kind {
            Kind::IndexSelect { .. } => "gather-jit-index-select",
            Kind::Take { .. } => "gather-jit-take",
            Kind::Gather { .. } => "gather-jit-gather",
            Kind::GatherNd { .. } => "gather-jit-gather-nd",
        }
    }

    fn cpu_fwd(
        &self,
        data: &CpuStorage,
        data_layout: &Layout,
        indices: &CpuStorage,
        indices_layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        // gather-jit moves bytes, so a type is named by its size: f8e4m3 travels as u8.
        match data {
            CpuStorage::U8(d) => self.typed(d, data_layout, DType::U8, indices, indices_layout),
            CpuStorage::U32(d) => self.typed(d, data_layout, DType::U32, indices, indices_layout),
            CpuStorage::I16(d) => self.typed(d, data_layout, DType::I16, indices, indices_layout),
            CpuStorage::I32(d) => self.typed(d, data_layout, DType::I32, indices, indices_layout),
            CpuStorage::I64(d) => self.typed(d, data_layout, DType::I64, indices, indices_layout),
            CpuStorage::BF16(d) => self.typed(d, data_layout, DType::Bf16, indices, indices_layout),
            CpuStorage::F16(d) => self.typed(d, data_layout, DType::F16, indices, indices_layout),
            CpuStorage::F32(d) => self.typed(d, data_layout, DType::F32, indices, indices_layout),
            CpuStorage::F64(d) => self.typed(d, data_layout, DType::F64, indices, indices_layout),
            CpuStorage::F8E4M3(d) => self.typed(d, data_layout, DType::U8, indices, indices_layout),
            other => Err(msg(format!(
                "{}: data of dtype {:?} is not supported",
                self.name(),
                other.dtype()
            ))),
        }
    }

    /// The gradient of data, by the scatter that inverts the gather: `index_add` for
    /// `index_select` and `take`, `scatter_add` for `gather`, ScatterND with sum for
    /// `gather_nd`, each into zeros, through gather-jit's scatter kernels; the indices have none.
    fn bwd(
        &self,
        data: &Tensor,
        indices: &Tensor,
        _result: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        Ok((Some(self.data_grad(data, indices, grad)?), None))
    }
}

/// Whether two shapes are equal, dim by dim (a shape of a few dims compares faster so than
/// through `memcmp`).
fn same_dims(a: &[usize], b: &[usize]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// An attribute as gather-jit's `i64`.
fn attribute(value: usize) -> candle_core::Result<i64> {
    i64::try_from(value).map_err(|_| msg(format!("attribute {value} does not fit in i64")))
}

/// Whether some index in `indices` is its type's maximum.
fn contains_maximum(indices: &[u8], index_type: IndexType) -> bool {
    let maximum = index_type.max_value() as i128;
    match index_type {
        IndexType::U8 | IndexType::I8 => indices.contains(&(maximum as u8)),
        _ => (0..indices.len() / index_type.size()).any(|i| index_type.read(indices, i) == maximum),
    }
}

/// Runs `kernel` on C-contiguous `data` and `indices` into an output allocated here, once, and
/// never initialised but by the kernel. The outer error is this crate's check of the buffers,
/// the inner one the kernel's (a bad index, which the caller may still act on).
fn run<T: WithDType>(
    kernel: &Kernel,
    data: &[u8],
    indices: &[u8],
) -> candle_core::Result<gather_jit::Result<(CpuStorage, Shape)>> {
    let validated = kernel.validated();
    let element = size_of::<T>();
    debug_assert_eq!(element, validated.signature().dtype.size());
    check_len("data", data.len(), validated.data_len() * element)?;
    let index_bytes = validated.indices_len() * validated.signature().index_type.size();
    check_len("indices", indices.len(), index_bytes)?;
    let count = validated.output_len();
    let mut output: Vec<T> = Vec::new();
    output
        .try_reserve_exact(count)
        .map_err(|_| crate::error::allocation("the output", count * element))?;
    // SAFETY: `data` and `indices` hold exactly the signature's bytes (checked above), the
    // output has room for its `count` elements of the signature's size, and the three do not
    // overlap (the output is new); none needs alignment.
    let called =
        unsafe { kernel.call(data.as_ptr(), indices.as_ptr(), output.as_mut_ptr().cast()) };
    if let Err(error) = called {
        return Ok(Err(error));
    }
    // SAFETY: a call that returns `Ok` has written every output element (a gather writes each
    // one, from data or as zeros), and `count` is within the capacity reserved above.
    unsafe { output.set_len(count) };
    Ok(Ok((
        T::to_cpu_storage_owned(output),
        Shape::from(kernel.output_shape()),
    )))
}

fn check_len(what: &'static str, actual: usize, expected: usize) -> candle_core::Result<()> {
    if actual == expected {
        return Ok(());
    }
    Err(crate::error::buffer_mismatch(what, expected, actual))
}
