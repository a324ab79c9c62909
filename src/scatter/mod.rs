//! Scatters: the write half of the gathers. ScatterND, ScatterElements and ScatterUpdate copy
//! `data` and write `updates` into it at the places `indices` name, optionally combining each
//! update with the element it lands on (a [`Reduction`]).
//!
//! A [`ScatterSignature`] names the op and its attributes, the framework [`ScatterFlavor`]
//! whose rules apply, the reduction, the element and index types and the three shapes.
//! [`ScatterSignature::validate`] (in `layout.rs`) checks it against the flavor's shape rules
//! and returns a [`ScatterLayout`], which the reference interpreter ([`interpret_scatter`],
//! [`interpret_scatter_in_place`], in `interp.rs`) runs. `reduce.rs` holds the arithmetic of
//! one update (each dtype, each reduction, each flavor's ties), the part a compiled kernel has
//! to match bit for bit. `docs/semantics.md#scatters` has the rules flavor by flavor.
//!
//! ```
//! use gather_jit::scatter::{Reduction, ScatterFlavor, ScatterSignature, interpret_scatter};
//!
//! // ONNX ScatterND with reduction add: two updates of row 1 fold in index order.
//! let layout = ScatterSignature::scatter_nd(&[3, 2], &[3, 1], &[3, 2])
//!     .with_reduction(Reduction::Sum)
//!     .validate()?;
//! let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
//! let indices: Vec<u8> = [1i64, -2, 0].iter().flat_map(|x| x.to_ne_bytes()).collect();
//! let out = interpret_scatter(
//!     &layout,
//!     &bytes(&[0.0, 0.0, 1.0, 1.0, 2.0, 2.0]),
//!     &indices,
//!     &bytes(&[10.0, 20.0, 30.0, 40.0, 50.0, 60.0]),
//! )?;
//! assert_eq!(out, bytes(&[50.0, 60.0, 41.0, 61.0, 2.0, 2.0]));
//!
//! // TensorRT forbids two updates of one element: the error names both positions.
//! let layout = ScatterSignature::scatter_nd(&[3, 2], &[2, 1], &[2, 2])
//!     .with_flavor(ScatterFlavor::TensorRt)
//!     .validate()?;
//! let indices: Vec<u8> = [2i64, 2].iter().flat_map(|x| x.to_ne_bytes()).collect();
//! let err = interpret_scatter(&layout, &bytes(&[0.0; 6]), &indices, &bytes(&[1.0; 4]));
//! assert_eq!(
//!     err.unwrap_err().to_string(),
//!     "ScatterND: indices at positions [0] and [1] both write data at [2] \
//!      (flavor tensorrt forbids duplicate indices)"
//! );
//! # Ok::<(), gather_jit::Error>(())
//! ```

mod interp;
mod layout;
pub(crate) mod lower;
mod reduce;

use std::fmt;

use crate::types::{DType, IndexType, NegativeIndices, OpName, ShapeDisplay};

// The scatters' flavors, reductions and rounding belong to the shared vocabulary; their
// public path is this module, beside the signature that takes them.
pub use crate::types::{Bf16Rounding, Reduction, ScatterFlavor, TieBreak};
pub(crate) use interp::{check_no_duplicates, finish_means, index_error};
pub use interp::{interpret_scatter, interpret_scatter_in_place};
pub use layout::{ResolvedScatter, ScatterLayout};
pub use reduce::{integer_mean, neutral_bits};

/// The scatter operator and its attributes, as written by the framework (not yet normalised).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScatterOp {
    /// `ScatterND` (OpenVINO `ScatterNDUpdate`, TensorRT `kND`): index tuples of length
    /// `k = indices.shape[-1]` select slices `data[i_0, .., i_{k-1}, ..]`;
    /// `updates.shape = indices.shape[:-1] + data.shape[k:]`.
    Nd,
    /// `ScatterElements` (OpenVINO `ScatterElementsUpdate`, TensorRT `kELEMENT`, ONNX
    /// `Scatter`): each update lands where its own position, with the coordinate along `axis`
    /// replaced by its index, points; `updates.shape = indices.shape`.
    Elements {
        /// Axis of `data` the indices select along; negative counts from data's rank.
        axis: i64,
    },
    /// OpenVINO `ScatterUpdate`: whole slices along `axis`, the inverse of Gather;
    /// `updates.shape = data.shape[:axis] + indices.shape + data.shape[axis+1:]`.
    Update {
        /// Axis of `data` the indices select along; negative counts from data's rank.
        axis: i64,
    },
}

impl ScatterOp {
    /// The operator's name (`ScatterND`, `ScatterElements`, `ScatterUpdate`).
    pub fn name(&self) -> OpName {
        match self {
            ScatterOp::Nd => OpName::ScatterNd,
            ScatterOp::Elements { .. } => OpName::ScatterElements,
            ScatterOp::Update { .. } => OpName::ScatterUpdate,
        }
    }
}

impl fmt::Display for ScatterOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScatterOp::Nd => write!(f, "ScatterND"),
            ScatterOp::Elements { axis } => write!(f, "ScatterElements(axis={axis})"),
            ScatterOp::Update { axis } => write!(f, "ScatterUpdate(axis={axis})"),
        }
    }
}

/// A complete scatter signature: everything that decides what a scatter computes.
///
/// Buffers are C-contiguous (row-major) and native-endian; the output has data's shape and
/// type. Build one with [`ScatterSignature::scatter_nd`], [`ScatterSignature::scatter_elements`]
/// or [`ScatterSignature::scatter_update`] (ONNX rules, reduction none, `f32`, `i64` indices),
/// then adjust with the `with_*` methods.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ScatterSignature {
    /// The operator and its raw attributes.
    pub op: ScatterOp,
    /// Whose rules apply.
    pub flavor: ScatterFlavor,
    /// How an update combines with the element it lands on.
    pub reduction: Reduction,
    /// ScatterElementsUpdate-12's `use_init_val`: whether data's elements take part in the
    /// reduction (`false`: every element some update lands on starts from the reduction's
    /// neutral value). Only that flavor accepts `false`.
    pub use_init_val: bool,
    /// What a negative index means (an out-of-range index is always an error); the flavor's
    /// default unless overridden.
    pub negative: NegativeIndices,
    /// Element type of data, updates and output.
    pub dtype: DType,
    /// Integer type of the indices.
    pub index_type: IndexType,
    /// Shape of `data` (and of the output).
    pub data_shape: Vec<usize>,
    /// Shape of `indices`.
    pub indices_shape: Vec<usize>,
    /// Shape of `updates`.
    pub updates_shape: Vec<usize>,
}

impl ScatterSignature {
    /// A signature for `op` with ONNX rules, reduction none, `f32` elements and `i64` indices.
    pub fn new(
        op: ScatterOp,
        data_shape: &[usize],
        indices_shape: &[usize],
        updates_shape: &[usize],
    ) -> ScatterSignature {
        ScatterSignature {
            op,
            flavor: ScatterFlavor::Onnx,
            reduction: Reduction::None,
            use_init_val: true,
            negative: ScatterFlavor::Onnx.default_negative(),
            dtype: DType::F32,
            index_type: IndexType::I64,
            data_shape: data_shape.to_vec(),
            indices_shape: indices_shape.to_vec(),
            updates_shape: updates_shape.to_vec(),
        }
    }

    /// `ScatterND` (ONNX rules, reduction none, f32, i64 indices).
    pub fn scatter_nd(
        data_shape: &[usize],
        indices_shape: &[usize],
        updates_shape: &[usize],
    ) -> ScatterSignature {
        ScatterSignature::new(ScatterOp::Nd, data_shape, indices_shape, updates_shape)
    }

    /// `ScatterElements` along `axis` (ONNX rules, reduction none, f32, i64 indices).
    pub fn scatter_elements(
        data_shape: &[usize],
        indices_shape: &[usize],
        updates_shape: &[usize],
        axis: i64,
    ) -> ScatterSignature {
        let op = ScatterOp::Elements { axis };
        ScatterSignature::new(op, data_shape, indices_shape, updates_shape)
    }

    /// OpenVINO `ScatterUpdate` along `axis` (flavor `openvino-scatterupdate3`, f32, i64
    /// indices).
    pub fn scatter_update(
        data_shape: &[usize],
        indices_shape: &[usize],
        updates_shape: &[usize],
        axis: i64,
    ) -> ScatterSignature {
        let op = ScatterOp::Update { axis };
        ScatterSignature::new(op, data_shape, indices_shape, updates_shape)
            .with_flavor(ScatterFlavor::OpenvinoScatterUpdate3)
    }

    /// Sets the flavor and resets the negative-index rule to that flavor's default.
    pub fn with_flavor(mut self, flavor: ScatterFlavor) -> ScatterSignature {
        self.flavor = flavor;
        self.negative = flavor.default_negative();
        self
    }

    /// Sets the reduction.
    pub fn with_reduction(mut self, reduction: Reduction) -> ScatterSignature {
        self.reduction = reduction;
        self
    }

    /// Sets `use_init_val` (ScatterElementsUpdate-12).
    pub fn with_use_init_val(mut self, use_init_val: bool) -> ScatterSignature {
        self.use_init_val = use_init_val;
        self
    }

    /// Overrides what negative indices mean.
    pub fn with_negative(mut self, negative: NegativeIndices) -> ScatterSignature {
        self.negative = negative;
        self
    }

    /// Sets the element type.
    pub fn with_dtype(mut self, dtype: DType) -> ScatterSignature {
        self.dtype = dtype;
        self
    }

    /// Sets the index type.
    pub fn with_index_type(mut self, index_type: IndexType) -> ScatterSignature {
        self.index_type = index_type;
        self
    }
}

impl fmt::Display for ScatterSignature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} [{}] reduction={}{} data {}:{} indices {}:{} updates {} (negative={})",
            self.op,
            self.flavor,
            self.reduction,
            if self.use_init_val {
                ""
            } else {
                " use_init_val=false"
            },
            ShapeDisplay(&self.data_shape),
            self.dtype,
            ShapeDisplay(&self.indices_shape),
            self.index_type,
            ShapeDisplay(&self.updates_shape),
            match self.negative {
                NegativeIndices::Wrap => "wrap",
                NegativeIndices::Invalid => "invalid",
            }
        )
    }
}
