//! The gather IR: one explicit description of an op signature.
//!
//! A [`Signature`] names the op and its attributes, the framework [`Flavor`] whose rules apply,
//! the [`IndexPolicy`] (negative and out-of-range indices), the element and index types and the
//! shapes. It is plain data, hashable, and is the key of the kernel cache. [`Signature::validate`]
//! (in `shape.rs`) is the one function that checks it and infers the output shape, through the
//! output-shape rule that every dim type shares ([`output_shape`], in `rule.rs`) and the checks
//! that every op family's validation shares (`checks.rs`).

pub(crate) mod checks;
mod rule;
mod shape;

use std::fmt;

pub(crate) use crate::types::ShapeDisplay;
pub use crate::types::{
    DType, Flavor, IndexPolicy, IndexType, MAX_RANK, NegativeIndices, OpName, OutOfRange,
};
pub(crate) use rule::gather_shape;
pub use rule::{Dim, ResolvedOp, ShapeRule, output_shape};
pub use shape::Validated;

/// The gather operator and its attributes, as written by the framework (not yet normalised).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// `Gather`: whole slices along `axis`, with `batch_dims` leading dims shared by data and
    /// indices (OpenVINO Gather-7/8, TensorRT `num_elementwise_dims`; 0 elsewhere).
    Gather {
        /// Axis of `data` that the indices select along; negative counts from data's rank.
        axis: i64,
        /// Number of leading batch dims; negative counts from the indices' rank (Gather-7/8).
        batch_dims: i64,
    },
    /// `GatherElements`: one element per index along `axis`; the output has the indices' shape.
    GatherElements {
        /// Axis of `data` that the indices select along; negative counts from data's rank.
        axis: i64,
    },
    /// `GatherND`: index tuples of length `indices.shape[-1]` select slices of `data`.
    GatherNd {
        /// Number of leading batch dims shared by data and indices.
        batch_dims: i64,
    },
}

impl Op {
    /// The operator's name as the frameworks spell it (`Gather`, `GatherElements`, `GatherND`).
    pub fn name(&self) -> OpName {
        match self {
            Op::Gather { .. } => OpName::Gather,
            Op::GatherElements { .. } => OpName::GatherElements,
            Op::GatherNd { .. } => OpName::GatherNd,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Gather { axis, batch_dims } => {
                write!(f, "Gather(axis={axis}, batch_dims={batch_dims})")
            }
            Op::GatherElements { axis } => write!(f, "GatherElements(axis={axis})"),
            Op::GatherNd { batch_dims } => write!(f, "GatherND(batch_dims={batch_dims})"),
        }
    }
}

/// A complete gather op signature: everything that decides the generated code.
///
/// Buffers are C-contiguous (row-major) and native-endian. Build one with
/// [`Signature::gather`], [`Signature::gather_elements`] or [`Signature::gather_nd`], then adjust
/// with the `with_*` methods; the policy starts as the flavor's default.
#[derive(Clone, Debug, Eq)]
pub struct Signature {
    /// The operator and its raw attributes.
    pub op: Op,
    /// Whose rules apply.
    pub flavor: Flavor,
    /// Negative and out-of-range index handling.
    pub policy: IndexPolicy,
    /// Element type of data and output.
    pub dtype: DType,
    /// Integer type of the indices.
    pub index_type: IndexType,
    /// Shape of `data`.
    pub data_shape: Vec<usize>,
    /// Shape of `indices`.
    pub indices_shape: Vec<usize>,
    /// What memory the output is, call after call: decides the kind of stores.
    pub output_memory: OutputMemory,
}

/// The memory a kernel writes its output into, as the caller uses it from call to call. It
/// changes the stores the kernel makes, never its result.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OutputMemory {
    /// The caller reuses its output buffers (or does not say): outputs larger than a quarter
    /// of the last-level cache are written with streaming stores, which skip reading the
    /// destination lines (`cargo bench --bench gather -- S4/`).
    #[default]
    Reused,
    /// Each call writes into memory allocated for it, as a runtime's fresh output tensor: its
    /// pages are zeroed by the kernel when first touched, which leaves them in cache, so plain
    /// stores are cheaper than streaming ones there (`cargo bench -p gather-jit-tract --bench
    /// ops -- S4/`).
    Fresh,
}

// A cache hit hashes and compares one signature per request. Equality goes one dim at a time
// (the derived impl compares a shape with a `memcmp` call, slower for shapes of a few dims).
impl PartialEq for Signature {
    fn eq(&self, other: &Signature) -> bool {
        // Destructured, so that a new field cannot be left out of the cache key.
        let Signature {
            op,
            flavor,
            policy,
            dtype,
            index_type,
            data_shape,
            indices_shape,
            output_memory,
        } = self;
        let same_dims =
            |a: &[usize], b: &[usize]| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y);
        // The indices' shape first: signatures of one op in one model differ most often there
        // (batch and sequence lengths), and a cache's thread view compares against its latest
        // signature before it hashes.
        same_dims(indices_shape, &other.indices_shape)
            && same_dims(data_shape, &other.data_shape)
            && *op == other.op
            && *flavor == other.flavor
            && *policy == other.policy
            && *dtype == other.dtype
            && *index_type == other.index_type
            && *output_memory == other.output_memory
    }
}

// The hash folds the whole signature into one word before the hasher sees it. Each word is
// multiplied independently of the running value, which only takes a rotate and a xor per
// word, so the multiplies overlap; fed word by word, Fx's hasher chains a dependent multiply
// per word (half of a hit's time: `cargo bench --bench gather -- S9/cache_hit`).
impl std::hash::Hash for Signature {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        const ODD: u64 = 0x9e37_79b9_7f4a_7c15;
        // Destructured, so that a new field cannot be left out of the cache key.
        let Signature {
            op,
            flavor,
            policy:
                IndexPolicy {
                    negative,
                    out_of_range,
                },
            dtype,
            index_type,
            data_shape,
            indices_shape,
            output_memory,
        } = self;
        let (op, first, second) = match *op {
            Op::Gather { axis, batch_dims } => (0, axis, batch_dims),
            Op::GatherElements { axis } => (1, axis, 0),
            Op::GatherNd { batch_dims } => (2, 0, batch_dims),
        };
        // A rank takes a byte here (ranks of valid signatures are at most `MAX_RANK`; longer
        // shapes share their low byte, and equality still tells them apart).
        let kinds = op
            | (*output_memory as u64) << 4
            | (*flavor as u64) << 8
            | (*negative as u64) << 16
            | (*out_of_range as u64) << 24
            | (*dtype as u64) << 32
            | (*index_type as u64) << 40
            | (data_shape.len() as u64 & 0xff) << 48
            | (indices_shape.len() as u64 & 0xff) << 56;
        let fold = |folded: u64, word: u64| folded.rotate_left(23) ^ word.wrapping_mul(ODD);
        // Plain loops: an iterator chain here compiled to an out-of-line fold of twice the
        // instructions.
        let mut folded = fold(fold(fold(0, kinds), first as u64), second as u64);
        for shape in [data_shape, indices_shape] {
            for &dim in shape {
                folded = fold(folded, dim as u64);
            }
        }
        state.write_u64(folded);
    }
}

impl Signature {
    /// A signature for `op` with ONNX rules, `f32` data and `i64` indices.
    pub fn new(op: Op, data_shape: &[usize], indices_shape: &[usize]) -> Signature {
        Signature {
            op,
            flavor: Flavor::Onnx,
            policy: Flavor::Onnx.default_policy(),
            dtype: DType::F32,
            index_type: IndexType::I64,
            data_shape: data_shape.to_vec(),
            indices_shape: indices_shape.to_vec(),
            output_memory: OutputMemory::Reused,
        }
    }

    /// `Gather` along `axis` with `batch_dims` (ONNX rules, f32, i64 indices).
    pub fn gather(
        data_shape: &[usize],
        indices_shape: &[usize],
        axis: i64,
        batch_dims: i64,
    ) -> Signature {
        Signature::new(Op::Gather { axis, batch_dims }, data_shape, indices_shape)
    }

    /// `GatherElements` along `axis` (ONNX rules, f32, i64 indices).
    pub fn gather_elements(data_shape: &[usize], indices_shape: &[usize], axis: i64) -> Signature {
        Signature::new(Op::GatherElements { axis }, data_shape, indices_shape)
    }

    /// `GatherND` with `batch_dims` (ONNX rules, f32, i64 indices).
    pub fn gather_nd(data_shape: &[usize], indices_shape: &[usize], batch_dims: i64) -> Signature {
        Signature::new(Op::GatherNd { batch_dims }, data_shape, indices_shape)
    }

    /// Sets the flavor and resets the policy to that flavor's default.
    pub fn with_flavor(mut self, flavor: Flavor) -> Signature {
        self.flavor = flavor;
        self.policy = flavor.default_policy();
        self
    }

    /// Overrides the index policy.
    pub fn with_policy(mut self, policy: IndexPolicy) -> Signature {
        self.policy = policy;
        self
    }

    /// Overrides what negative indices mean.
    pub fn with_negative(mut self, negative: NegativeIndices) -> Signature {
        self.policy.negative = negative;
        self
    }

    /// Overrides what out-of-range indices do.
    pub fn with_out_of_range(mut self, out_of_range: OutOfRange) -> Signature {
        self.policy.out_of_range = out_of_range;
        self
    }

    /// Sets the element type.
    pub fn with_dtype(mut self, dtype: DType) -> Signature {
        self.dtype = dtype;
        self
    }

    /// Sets the index type.
    pub fn with_index_type(mut self, index_type: IndexType) -> Signature {
        self.index_type = index_type;
        self
    }

    /// Says what memory the output is from call to call (see [`OutputMemory`]).
    pub fn with_output_memory(mut self, output_memory: OutputMemory) -> Signature {
        self.output_memory = output_memory;
        self
    }
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} [{}] data {}:{} indices {}:{} ({})",
            self.op,
            self.flavor,
            ShapeDisplay(&self.data_shape),
            self.dtype,
            ShapeDisplay(&self.indices_shape),
            self.index_type,
            self.policy
        )
    }
}

/// The row-major coordinates of element `flat` of a tensor of `shape` (the inverse of
/// `sum(coords[i] * stride[i])`): how an error names the position of a bad index.
///
/// A `flat` past the element count wraps in the first dim; a zero dim (a tensor without
/// elements, which has no positions) gives coordinate 0 rather than dividing by zero.
///
/// ```
/// use gather_jit::ir::unravel;
///
/// assert_eq!(unravel(7, &[2, 3, 2]), [1, 0, 1]);
/// assert_eq!(unravel(5, &[2, 3]), [1, 2]);
/// // No division by a zero dim: its coordinate is 0.
/// assert_eq!(unravel(4, &[2, 0, 3])[1], 0);
/// ```
pub fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut coords = vec![0; shape.len()];
    for (c, &d) in coords.iter_mut().zip(shape).rev() {
        if d > 0 {
            *c = flat % d;
            flat /= d;
        }
    }
    coords
}
