//! The Rust types a kernel's typed API takes for data ([`Element`]) and indices
//! ([`IndexElement`]): `unsafe` traits, since kernels read and write their memory as the
//! dtype they claim.
#![allow(
    unsafe_code,
    reason = "`Element` and `IndexElement` are `unsafe trait`s: they promise a memory layout"
)]

#[cfg(doc)]
use super::Kernel;
#[cfg(doc)]
use crate::ir::OutOfRange;
use crate::ir::{DType, IndexType};

/// A Rust type that can be the element type of `data` (the gathered values).
///
/// # Safety
/// [`Kernel::run`] hands `Self`'s memory to machine code that reads and writes it as
/// `Self::DTYPE`, and returns the bytes it wrote as values of `Self`. An implementation
/// promises that:
/// - `size_of::<Self>() == Self::DTYPE.size()`, and `Self` has no padding (kernels read
///   every byte);
/// - all zero bytes are a valid `Self` (kernels zero-fill the slices of rejected indices
///   under [`OutOfRange::Zero`]), and so is a byte-wise copy of a valid `Self` (every
///   other output element is one, of an element of data);
/// - every result of `DTYPE`'s arithmetic is a valid `Self`: the scatters' reductions
///   ([`ScatterKernel`](crate::ScatterKernel)) write sums, products, means and the like of
///   valid values, any bit pattern of an integer or float type, and 0 or 1 for
///   [`DType::Bool`].
///
/// The crate implements it for the primitive types of every [`DType`]. A type of your own
/// needs `unsafe impl`, so a safe crate cannot make a 1-byte type claim `F64`:
/// ```compile_fail,E0200
/// #[derive(Clone, Copy, Default)]
/// struct Tiny(u8);
/// impl gather_jit::Element for Tiny {
///     const DTYPE: gather_jit::DType = gather_jit::DType::F64;
/// }
/// ```
/// With `unsafe impl` (and the promises above kept), it compiles:
/// ```
/// #[derive(Clone, Copy, Default)]
/// #[repr(transparent)]
/// struct Meters(f64);
/// // SAFETY: `Meters` is an `f64`: 8 bytes, no padding, all zeros is 0.0.
/// unsafe impl gather_jit::Element for Meters {
///     const DTYPE: gather_jit::DType = gather_jit::DType::F64;
/// }
/// ```
pub unsafe trait Element: Copy + Default + 'static {
    /// The IR element type of `Self`.
    const DTYPE: DType;
}

/// A Rust integer type that can be the element type of `indices`.
///
/// # Safety
/// Kernels read `Self`'s memory as `Self::INDEX_TYPE`: an implementation promises that
/// `size_of::<Self>() == Self::INDEX_TYPE.size()` and that `Self` has no padding (every
/// byte is initialised).
///
/// The crate implements it for the primitive integers of every [`IndexType`]. A type of
/// your own needs `unsafe impl`, so a safe crate cannot make a 1-byte type claim `U64`:
/// ```compile_fail,E0200
/// #[derive(Clone, Copy)]
/// struct Narrow(u8);
/// impl gather_jit::IndexElement for Narrow {
///     const INDEX_TYPE: gather_jit::IndexType = gather_jit::IndexType::U64;
/// }
/// ```
pub unsafe trait IndexElement: Copy + 'static {
    /// The IR index type of `Self`.
    const INDEX_TYPE: IndexType;
}

macro_rules! elements {
    ($($t:ty => $d:ident),* $(,)?) => {
        // SAFETY: each is a primitive of exactly its dtype's size, without padding, for which
        // all zero bytes are a valid value (`false` for `bool`, 0 or +0.0 for the rest).
        $(unsafe impl Element for $t { const DTYPE: DType = DType::$d; })*
    };
}
elements!(
    f32 => F32, f64 => F64, i8 => I8, u8 => U8, i16 => I16, u16 => U16, i32 => I32,
    u32 => U32, i64 => I64, u64 => U64, bool => Bool, half::f16 => F16, half::bf16 => Bf16,
);

macro_rules! index_elements {
    ($($t:ty => $d:ident),* $(,)?) => {
        // SAFETY: each is a primitive integer of exactly its index type's size, no padding.
        $(unsafe impl IndexElement for $t { const INDEX_TYPE: IndexType = IndexType::$d; })*
    };
}
index_elements!(i8 => I8, u8 => U8, i16 => I16, u16 => U16, i32 => I32, u32 => U32, i64 => I64, u64 => U64);
