//! The crate's error type: every failure names the op, what was wrong and where.

use crate::types::{DType, Flavor, IndexType, OpName, Reduction, ScatterFlavor, ShapeDisplay};

/// Everything that can go wrong, from signature validation to a bad index at run time.
///
/// The enum and each variant are `#[non_exhaustive]`, so new checks and new fields can be added:
/// match the variants you act on, with `..` (for example [`Error::IndexOutOfRange`] to learn the
/// bad index), and use [`Error::category`] for a stable short classification. Errors are made
/// by this crate only.
///
/// `Debug` reads as `Display` (what `fn main() -> Result<(), Error>` prints when it fails):
/// the message, which names the op, what was wrong and where.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The flavor does not define this operator (e.g. `openvino-gather8` with GatherND).
    #[error("{op}: flavor {flavor} does not define this operator")]
    #[non_exhaustive]
    FlavorMismatch {
        /// The operator.
        op: OpName,
        /// The flavor.
        flavor: Flavor,
    },
    /// An attribute value the flavor does not have (e.g. batch_dims with ONNX Gather).
    #[error("{op}: flavor {flavor} does not support {attribute}={value} ({allowed})")]
    #[non_exhaustive]
    UnsupportedAttribute {
        /// The operator.
        op: OpName,
        /// The flavor.
        flavor: Flavor,
        /// Attribute name.
        attribute: &'static str,
        /// The value given.
        value: i64,
        /// What is allowed.
        allowed: &'static str,
    },
    /// An input's rank is below the operator's minimum.
    #[error("{op}: {input} has rank {rank}, but at least {min} is required")]
    #[non_exhaustive]
    RankTooSmall {
        /// The operator.
        op: OpName,
        /// `data`, `indices` or `updates`.
        input: &'static str,
        /// The rank given.
        rank: usize,
        /// The minimum rank.
        min: usize,
    },
    /// A tensor has more dims than [`MAX_RANK`](crate::types::MAX_RANK).
    #[error("{op}: {input} has rank {rank}, but at most {max} is supported")]
    #[non_exhaustive]
    RankTooLarge {
        /// The operator.
        op: OpName,
        /// `data`, `indices`, `updates` or `output`.
        input: &'static str,
        /// The rank given (or inferred, for the output).
        rank: usize,
        /// The maximum rank.
        max: usize,
    },
    /// `axis` outside `[-rank, rank-1]`.
    #[error("{op}: axis {axis} is out of range for data of rank {rank} (allowed -{rank}..={max})", max = *rank as i64 - 1)]
    #[non_exhaustive]
    AxisOutOfRange {
        /// The operator.
        op: OpName,
        /// The axis given.
        axis: i64,
        /// The rank of data.
        rank: usize,
    },
    /// `batch_dims` outside its allowed range.
    #[error("{op}: batch_dims {batch_dims} is out of range (allowed {min}..={max})")]
    #[non_exhaustive]
    BatchDimsOutOfRange {
        /// The operator.
        op: OpName,
        /// The batch_dims given.
        batch_dims: i64,
        /// Smallest allowed value.
        min: i64,
        /// Largest allowed value.
        max: i64,
    },
    /// Gather's normalised `batch_dims` exceeds its normalised `axis`.
    #[error("{op}: batch_dims {batch_dims} must not exceed axis {axis}")]
    #[non_exhaustive]
    BatchDimsExceedAxis {
        /// The operator.
        op: OpName,
        /// Normalised batch_dims.
        batch_dims: usize,
        /// Normalised axis.
        axis: usize,
    },
    /// A leading batch dim differs between data and indices.
    #[error(
        "{op}: batch dims mismatch at dim {dim}: data has {data}, indices have {indices} (data {data_shape}, indices {indices_shape})",
        data_shape = ShapeDisplay(data_shape), indices_shape = ShapeDisplay(indices_shape)
    )]
    #[non_exhaustive]
    BatchDimMismatch {
        /// The operator.
        op: OpName,
        /// The dim that differs.
        dim: usize,
        /// Its size in data.
        data: usize,
        /// Its size in indices.
        indices: usize,
        /// Shape of data.
        data_shape: Vec<usize>,
        /// Shape of indices.
        indices_shape: Vec<usize>,
    },
    /// GatherND's `indices.shape[-1]` is 0 or greater than `data.rank - batch_dims`.
    #[error("{op}: indices last dim {depth} must be in 1..={max} (data rank minus batch_dims)")]
    #[non_exhaustive]
    IndexDepthOutOfRange {
        /// The operator.
        op: OpName,
        /// `indices.shape[-1]`.
        depth: usize,
        /// `data.rank - batch_dims`.
        max: usize,
    },
    /// GatherElements: data and indices ranks differ.
    #[error(
        "{op}: data has rank {data_rank} but indices have rank {indices_rank}; they must be equal"
    )]
    #[non_exhaustive]
    RankMismatch {
        /// The operator.
        op: OpName,
        /// Rank of data.
        data_rank: usize,
        /// Rank of indices.
        indices_rank: usize,
    },
    /// GatherElements: a non-axis dim of indices is not allowed for data's.
    #[error("{op}: indices dim {dim} is {indices} but data's is {data}; it must be {rule}")]
    #[non_exhaustive]
    DimMismatch {
        /// The operator.
        op: OpName,
        /// The dim.
        dim: usize,
        /// Its size in data.
        data: usize,
        /// Its size in indices.
        indices: usize,
        /// The rule (`equal to data's` or `at most data's`).
        rule: &'static str,
    },
    /// An element count or byte size does not fit the address space.
    #[error("{what} of shape {shape} has more elements or bytes than fit in memory", shape = ShapeDisplay(shape))]
    #[non_exhaustive]
    SizeOverflow {
        /// Which tensor (`data`, `indices`, `updates`, `output`).
        what: &'static str,
        /// Its shape.
        shape: Vec<usize>,
    },
    /// An index outside its dimension (after the negative rule), under `OutOfRange::Error`
    /// (or any index into an empty dimension under `Clamp`).
    #[error(
        "{op}: index {value} at position {position} of indices is out of range for data dim {data_dim} of size {dim_size}",
        position = ShapeDisplay(position)
    )]
    #[non_exhaustive]
    IndexOutOfRange {
        /// The operator.
        op: OpName,
        /// Position of the bad index in the indices tensor (one coordinate per indices dim).
        position: Vec<usize>,
        /// The index value as stored (widened losslessly).
        value: i128,
        /// The data dimension it indexes.
        data_dim: usize,
        /// The size of that dimension.
        dim_size: usize,
    },
    /// Two updates of one data element under a flavor that forbids it (TensorRT's scatter calls
    /// it undefined behaviour), found before anything is written.
    #[error(
        "{op}: indices at positions {first} and {second} both write data at {target} (flavor {flavor} forbids duplicate indices)",
        first = ShapeDisplay(first), second = ShapeDisplay(second), target = ShapeDisplay(target)
    )]
    #[non_exhaustive]
    DuplicateIndex {
        /// The operator.
        op: OpName,
        /// The flavor.
        flavor: ScatterFlavor,
        /// Position in indices of the earlier index (ScatterND: of its tuple, without the last
        /// dim).
        first: Vec<usize>,
        /// Position of the later one, in the same form.
        second: Vec<usize>,
        /// The data coordinates both write (ScatterND: the tuple's, which start a slice).
        target: Vec<usize>,
    },
    /// A scatter flavor does not define this operator (e.g. `openvino-scatterupdate3` with
    /// ScatterND).
    #[error("{op}: flavor {flavor} does not define this operator")]
    #[non_exhaustive]
    ScatterFlavorMismatch {
        /// The operator.
        op: OpName,
        /// The flavor.
        flavor: ScatterFlavor,
    },
    /// A reduction the scatter flavor does not define, or does not define on the element type
    /// (`mean` on `bool`).
    #[error("{op}: flavor {flavor} does not define reduction {reduction} on {dtype} ({allowed})")]
    #[non_exhaustive]
    UnsupportedReduction {
        /// The operator.
        op: OpName,
        /// The flavor.
        flavor: ScatterFlavor,
        /// The reduction given.
        reduction: Reduction,
        /// The element type.
        dtype: DType,
        /// What is allowed.
        allowed: &'static str,
    },
    /// A scatter attribute value the flavor does not have (`use_init_val=false` outside
    /// ScatterElementsUpdate-12).
    #[error("{op}: flavor {flavor} does not support {attribute}={value} ({allowed})")]
    #[non_exhaustive]
    UnsupportedScatterAttribute {
        /// The operator.
        op: OpName,
        /// The flavor.
        flavor: ScatterFlavor,
        /// Attribute name.
        attribute: &'static str,
        /// The value given.
        value: String,
        /// What is allowed.
        allowed: &'static str,
    },
    /// A scatter's updates shape is not the one its data and indices call for.
    #[error(
        "{op}: updates have shape {actual} but must have shape {expected} ({rule})",
        actual = ShapeDisplay(actual), expected = ShapeDisplay(expected)
    )]
    #[non_exhaustive]
    UpdatesShapeMismatch {
        /// The operator.
        op: OpName,
        /// The shape the rule gives.
        expected: Vec<usize>,
        /// The shape given.
        actual: Vec<usize>,
        /// The rule (e.g. `indices.shape[:-1] + data.shape[k:]`).
        rule: &'static str,
    },
    /// A buffer or array does not match the kernel's signature.
    #[error("{what}: expected {expected}, got {actual}")]
    #[non_exhaustive]
    BufferMismatch {
        /// Which buffer (`data`, `indices`, `output`).
        what: &'static str,
        /// What the signature requires.
        expected: String,
        /// What was passed.
        actual: String,
    },
    /// The element type of an array is not the signature's.
    #[error("{what}: expected element type {expected}, got {actual}")]
    #[non_exhaustive]
    DTypeMismatch {
        /// Which array.
        what: &'static str,
        /// The signature's type.
        expected: DType,
        /// The array's type.
        actual: DType,
    },
    /// The index type of an array is not the signature's.
    #[error("indices: expected index type {expected}, got {actual}")]
    #[non_exhaustive]
    IndexTypeMismatch {
        /// The signature's index type.
        expected: IndexType,
        /// The array's type.
        actual: IndexType,
    },
    /// A buffer whose size comes from the signature could not be allocated.
    #[error("could not allocate {bytes} bytes for {what}")]
    #[non_exhaustive]
    Allocation {
        /// What the buffer was for (`the output`, `a contiguous copy of data`, ...).
        what: &'static str,
        /// Requested size.
        bytes: usize,
    },
    /// A quantized gather's attributes or shapes that its storage form cannot have (a block
    /// size that is not a power of two of at least 16, an odd packed dim, a GGUF row that is
    /// not whole blocks, ...).
    #[error("{op}: {what}")]
    #[non_exhaustive]
    InvalidQuantization {
        /// The operator.
        op: OpName,
        /// What is wrong, and the accepted values.
        what: String,
    },
    /// The generic shape rule (`ir::output_shape`) needs the value of a dim that is
    /// symbolic (GatherND's index depth, which decides the output's rank).
    #[error("{op}: {what} must be known, not symbolic")]
    #[non_exhaustive]
    SymbolicDim {
        /// The operator.
        op: OpName,
        /// Which dim.
        what: &'static str,
    },
    /// Cranelift rejected the generated function (a bug in this crate: please report it).
    #[error("code generation failed: {0}")]
    #[non_exhaustive]
    Codegen(String),
    /// An ahead-of-time target that cannot be compiled for (unknown triple, an architecture
    /// or object format Cranelift does not emit, or a kernel the target cannot run).
    #[error("target {triple}: {reason}")]
    #[non_exhaustive]
    UnsupportedTarget {
        /// The target triple as given.
        triple: String,
        /// Why.
        reason: String,
    },
    /// A symbol an ahead-of-time kernel cannot be exported under.
    #[error("symbol {symbol:?}: {reason}")]
    #[non_exhaustive]
    InvalidSymbol {
        /// The symbol as given.
        symbol: String,
        /// Why.
        reason: &'static str,
    },
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl Error {
    /// A short stable category, as used by the conformance files' `expect_error`
    /// (e.g. `index out of bounds`, `batch dims mismatch`, `axis out of range`).
    pub fn category(&self) -> &'static str {
        match self {
            Error::FlavorMismatch { .. } => "flavor mismatch",
            Error::UnsupportedAttribute { .. } => "unsupported attribute",
            Error::RankTooSmall { .. } => "rank too small",
            Error::RankTooLarge { .. } => "rank too large",
            Error::AxisOutOfRange { .. } => "axis out of range",
            Error::BatchDimsOutOfRange { .. } | Error::BatchDimsExceedAxis { .. } => {
                "batch dims out of range"
            }
            Error::BatchDimMismatch { .. } => "batch dims mismatch",
            Error::IndexDepthOutOfRange { .. } => "indices last dim too large",
            Error::RankMismatch { .. } => "rank mismatch",
            Error::DimMismatch { .. } => "shape mismatch",
            Error::SizeOverflow { .. } => "size overflow",
            Error::IndexOutOfRange { .. } => "index out of bounds",
            Error::DuplicateIndex { .. } => "duplicate index",
            Error::ScatterFlavorMismatch { .. } => "flavor mismatch",
            Error::UnsupportedReduction { .. } => "unsupported reduction",
            Error::UnsupportedScatterAttribute { .. } => "unsupported attribute",
            Error::UpdatesShapeMismatch { .. } => "updates shape mismatch",
            Error::BufferMismatch { .. } => "buffer mismatch",
            Error::DTypeMismatch { .. } | Error::IndexTypeMismatch { .. } => "type mismatch",
            Error::Allocation { .. } => "allocation failed",
            Error::InvalidQuantization { .. } => "invalid quantization",
            Error::SymbolicDim { .. } => "symbolic dim",
            Error::UnsupportedTarget { .. } => "unsupported target",
            Error::InvalidSymbol { .. } => "invalid symbol",
            Error::Codegen(_) => "codegen",
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
