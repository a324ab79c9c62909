//! The checked entry points: [`Kernel::run_bytes`] on byte slices and [`Kernel::run`] on
//! ndarray views of any layout, which check lengths, shapes and types before the raw call.
#![allow(
    unsafe_code,
    reason = "the checked calls reach the raw ones after checking every length"
)]

use std::borrow::Cow;

use ndarray::{ArrayD, ArrayView, Dimension, IxDyn};

use super::{Element, IndexElement, Kernel};
use crate::error::{Error, Result};

impl Kernel {
    /// Runs the gather on byte slices with `threads` threads (0 chooses; see
    /// [`Kernel::call_parallel`]), checking their lengths first.
    ///
    /// # Errors
    /// As [`Kernel::run_bytes`].
    pub fn run_bytes_parallel(
        &self,
        data: &[u8],
        indices: &[u8],
        output: &mut [u8],
        threads: usize,
    ) -> Result<()> {
        self.check_buffers(data, indices, output)?;
        // SAFETY: the lengths match the signature (checked above); slices are valid for their
        // length, non-null, and `output` is a unique borrow, so no one else touches it.
        unsafe {
            self.call_parallel(
                data.as_ptr(),
                indices.as_ptr(),
                output.as_mut_ptr(),
                threads,
            )
        }
    }

    fn check_buffers(&self, data: &[u8], indices: &[u8], output: &[u8]) -> Result<()> {
        let plan = &self.plan;
        check_len("data", data.len(), plan.data_bytes)?;
        check_len("indices", indices.len(), plan.indices_bytes)?;
        check_len("output", output.len(), plan.output_bytes)
    }

    /// Runs the gather on byte slices, checking their lengths first.
    ///
    /// # Errors
    /// [`Error::BufferMismatch`] if a slice's length does not match the signature; otherwise
    /// as [`Kernel::call`].
    pub fn run_bytes(&self, data: &[u8], indices: &[u8], output: &mut [u8]) -> Result<()> {
        self.run_bytes_parallel(data, indices, output, 1)
    }

    /// Runs the gather on ndarray views of any layout and returns a new array.
    ///
    /// C-contiguous views are read in place; others (strided, reversed, broadcast) are
    /// copied into standard layout first. Large outputs are split across the cores (see
    /// [`Kernel::call_parallel`]).
    ///
    /// # Errors
    /// [`Error::DTypeMismatch`] / [`Error::IndexTypeMismatch`] if `T` or `I` is not the
    /// signature's type, [`Error::BufferMismatch`] if a shape differs from the signature's,
    /// [`Error::Allocation`] if the output or a copy of a non-contiguous view cannot be
    /// allocated (a broadcast view can stand for far more elements than memory holds), and
    /// the index errors of
    /// [`Kernel::call`].
    pub fn run<T: Element, I: IndexElement, D1: Dimension, D2: Dimension>(
        &self,
        data: ArrayView<'_, T, D1>,
        indices: ArrayView<'_, I, D2>,
    ) -> Result<ArrayD<T>> {
        let sig = self.signature();
        if T::DTYPE != sig.dtype {
            return Err(Error::DTypeMismatch {
                what: "data",
                expected: sig.dtype,
                actual: T::DTYPE,
            });
        }
        if I::INDEX_TYPE != sig.index_type {
            return Err(Error::IndexTypeMismatch {
                expected: sig.index_type,
                actual: I::INDEX_TYPE,
            });
        }
        check_shape("data", data.shape(), &sig.data_shape)?;
        check_shape("indices", indices.shape(), &sig.indices_shape)?;
        // Both hold for the crate's own impls; an `unsafe impl` that breaks its promise is
        // caught here rather than by reading past a buffer.
        if size_of::<T>() != sig.dtype.size() || size_of::<I>() != sig.index_type.size() {
            return Err(Error::BufferMismatch {
                what: "element type",
                expected: format!("{} and {} bytes", sig.dtype.size(), sig.index_type.size()),
                actual: format!("{} and {} bytes", size_of::<T>(), size_of::<I>()),
            });
        }
        let data = contiguous("a contiguous copy of data", &data)?;
        let indices = contiguous("a contiguous copy of indices", &indices)?;
        let len = self.validated.output_len();
        // SAFETY: `data` and `indices` are contiguous with the signature's shapes, and their
        // element sizes are the signature's (checked above); the output buffer has room for
        // the output and is a fresh allocation, so it overlaps neither input. After `Ok` every
        // output element was written (each output slice belongs to exactly one lookup, copied
        // or zero-filled) with byte copies of elements of `data` or zero bytes, both valid
        // `T`s by `Element`'s contract.
        unsafe {
            new_output::<T>(self.output_shape(), len, |output| {
                self.call_parallel(data.as_ptr().cast(), indices.as_ptr().cast(), output, 0)
            })
        }
    }
}

/// A new array of `shape` (`len` elements) whose elements `fill` writes through the pointer
/// it is given, allocated fallibly and never filled first (a kernel writes each element once).
///
/// # Safety
/// When `fill` returns `Ok`, it has written all `len` elements with valid `T`s, within the
/// `len * size_of::<T>()` bytes it was given.
pub(crate) unsafe fn new_output<T>(
    shape: &[usize],
    len: usize,
    fill: impl FnOnce(*mut u8) -> Result<()>,
) -> Result<ArrayD<T>> {
    let mut output: Vec<T> = Vec::new();
    output
        .try_reserve_exact(len)
        .map_err(|_| Error::Allocation {
            what: "the output",
            bytes: len.saturating_mul(size_of::<T>()),
        })?;
    fill(output.as_mut_ptr().cast())?;
    // SAFETY: `fill` returned `Ok`, so all `len` elements are valid `T`s (the contract).
    unsafe { output.set_len(len) };
    ArrayD::from_shape_vec(IxDyn(shape), output).map_err(|e| Error::BufferMismatch {
        what: "output",
        expected: format!("{shape:?}"),
        actual: e.to_string(),
    })
}

/// `view`'s elements in row-major order: the view's own memory if it is C-contiguous, else a
/// copy in a fallibly allocated buffer (`what` names it in the error).
pub(crate) fn contiguous<'a, T: Copy, D: Dimension>(
    what: &'static str,
    view: &ArrayView<'a, T, D>,
) -> Result<Cow<'a, [T]>> {
    if let Some(slice) = view.to_slice() {
        return Ok(Cow::Borrowed(slice));
    }
    let mut copy = Vec::new();
    copy.try_reserve_exact(view.len())
        .map_err(|_| Error::Allocation {
            what,
            // The shape was checked against a validated signature: its byte size fits.
            bytes: view.len() * size_of::<T>(),
        })?;
    copy.extend(view.iter().copied());
    Ok(Cow::Owned(copy))
}

pub(crate) fn check_len(what: &'static str, actual: usize, expected: u64) -> Result<()> {
    if actual as u64 != expected {
        return Err(Error::BufferMismatch {
            what,
            expected: format!("{expected} bytes"),
            actual: format!("{actual} bytes"),
        });
    }
    Ok(())
}

pub(crate) fn check_shape(what: &'static str, actual: &[usize], expected: &[usize]) -> Result<()> {
    if actual != expected {
        return Err(Error::BufferMismatch {
            what,
            expected: format!("shape {expected:?}"),
            actual: format!("shape {actual:?}"),
        });
    }
    Ok(())
}
