//! The checked calls of [`ScatterKernel`]: byte slices whose lengths are checked, and ndarray
//! views of any layout, out of place and in place.
#![allow(
    unsafe_code,
    reason = "the checked calls reach the raw ones after checking every length"
)]

use ndarray::{ArrayD, ArrayView, ArrayViewMut, Dimension};

use super::ScatterKernel;
use crate::error::{Error, Result};
use crate::kernel::safe::{check_len, check_shape, contiguous, new_output};
use crate::kernel::{Element, IndexElement};

impl ScatterKernel {
    fn check_buffers(&self, data: usize, indices: &[u8], updates: &[u8]) -> Result<()> {
        check_len("data", data, self.data_bytes() as u64)?;
        check_len("indices", indices.len(), self.indices_bytes() as u64)?;
        check_len("updates", updates.len(), self.updates_bytes() as u64)
    }

    /// Runs the scatter out of place on byte slices (native-endian, C order), checking their
    /// lengths first.
    ///
    /// # Errors
    /// [`Error::BufferMismatch`] for a slice of the wrong length; otherwise as
    /// [`ScatterKernel::call`].
    pub fn run_bytes(
        &self,
        data: &[u8],
        indices: &[u8],
        updates: &[u8],
        output: &mut [u8],
    ) -> Result<()> {
        self.run_bytes_parallel(data, indices, updates, output, 1)
    }

    /// As [`ScatterKernel::run_bytes`], split across `threads` (0 chooses).
    ///
    /// # Errors
    /// As [`ScatterKernel::run_bytes`].
    pub fn run_bytes_parallel(
        &self,
        data: &[u8],
        indices: &[u8],
        updates: &[u8],
        output: &mut [u8],
        threads: usize,
    ) -> Result<()> {
        self.check_buffers(data.len(), indices, updates)?;
        check_len("output", output.len(), self.data_bytes() as u64)?;
        // SAFETY: every length is the layout's (checked above); `output` is a unique borrow,
        // so it overlaps none of the shared ones.
        unsafe {
            self.call_parallel(
                data.as_ptr(),
                indices.as_ptr(),
                updates.as_ptr(),
                output.as_mut_ptr(),
                threads,
            )
        }
    }

    /// Runs the scatter in place on byte slices: `data` becomes the output; on an error it is
    /// unchanged.
    ///
    /// # Errors
    /// As [`ScatterKernel::run_bytes`].
    pub fn run_bytes_in_place(
        &self,
        data: &mut [u8],
        indices: &[u8],
        updates: &[u8],
    ) -> Result<()> {
        self.run_bytes_in_place_parallel(data, indices, updates, 1)
    }

    /// As [`ScatterKernel::run_bytes_in_place`], split across `threads` (0 chooses).
    ///
    /// # Errors
    /// As [`ScatterKernel::run_bytes`].
    pub fn run_bytes_in_place_parallel(
        &self,
        data: &mut [u8],
        indices: &[u8],
        updates: &[u8],
        threads: usize,
    ) -> Result<()> {
        self.check_buffers(data.len(), indices, updates)?;
        // SAFETY: every length is the layout's (checked above); `data` is a unique borrow,
        // so it overlaps neither shared one.
        unsafe {
            self.call_in_place_parallel(
                data.as_mut_ptr(),
                indices.as_ptr(),
                updates.as_ptr(),
                threads,
            )
        }
    }

    /// The element and index types `T` and `I`, and the three shapes, are the signature's.
    fn check_views<T: Element, I: IndexElement>(
        &self,
        data: &[usize],
        indices: &[usize],
        updates: &[usize],
    ) -> Result<()> {
        let sig = self.signature();
        if T::DTYPE != sig.dtype || size_of::<T>() != sig.dtype.size() {
            return Err(Error::DTypeMismatch {
                what: "data",
                expected: sig.dtype,
                actual: T::DTYPE,
            });
        }
        if I::INDEX_TYPE != sig.index_type || size_of::<I>() != sig.index_type.size() {
            return Err(Error::IndexTypeMismatch {
                expected: sig.index_type,
                actual: I::INDEX_TYPE,
            });
        }
        check_shape("data", data, &sig.data_shape)?;
        check_shape("indices", indices, &sig.indices_shape)?;
        check_shape("updates", updates, &sig.updates_shape)
    }

    /// Runs the scatter out of place on ndarray views of any layout and returns a new array
    /// (data with the updates applied). Large calls are split across the cores.
    ///
    /// # Errors
    /// [`Error::DTypeMismatch`] / [`Error::IndexTypeMismatch`] for the wrong `T` or `I`,
    /// [`Error::BufferMismatch`] for a shape that is not the signature's,
    /// [`Error::Allocation`] if the output or a contiguous copy cannot be allocated, and the
    /// errors of [`ScatterKernel::call`].
    pub fn run<T: Element, I: IndexElement, D1: Dimension, D2: Dimension, D3: Dimension>(
        &self,
        data: ArrayView<'_, T, D1>,
        indices: ArrayView<'_, I, D2>,
        updates: ArrayView<'_, T, D3>,
    ) -> Result<ArrayD<T>> {
        self.check_views::<T, I>(data.shape(), indices.shape(), updates.shape())?;
        let data = contiguous("a contiguous copy of data", &data)?;
        let indices = contiguous("a contiguous copy of indices", &indices)?;
        let updates = contiguous("a contiguous copy of updates", &updates)?;
        // SAFETY: the buffers are contiguous with the signature's shapes and element sizes
        // (checked above); the output buffer has room for data's elements and is a fresh
        // allocation. After `Ok` every element was written: a copy of data's element, then
        // possibly an update's copy or the dtype's arithmetic on such values, each a valid
        // `T` by `Element`'s contract.
        unsafe {
            new_output::<T>(self.output_shape(), self.layout.data_len(), |output| {
                self.call_parallel(
                    data.as_ptr().cast(),
                    indices.as_ptr().cast(),
                    updates.as_ptr().cast(),
                    output,
                    0,
                )
            })
        }
    }

    /// Runs the scatter in place on an ndarray view of any layout: `data` becomes the output
    /// (through a contiguous copy, written back, when it is not C-contiguous). On an error
    /// `data` is unchanged.
    ///
    /// # Errors
    /// As [`ScatterKernel::run`].
    pub fn run_in_place<
        T: Element,
        I: IndexElement,
        D1: Dimension,
        D2: Dimension,
        D3: Dimension,
    >(
        &self,
        mut data: ArrayViewMut<'_, T, D1>,
        indices: ArrayView<'_, I, D2>,
        updates: ArrayView<'_, T, D3>,
    ) -> Result<()> {
        self.check_views::<T, I>(data.shape(), indices.shape(), updates.shape())?;
        let indices = contiguous("a contiguous copy of indices", &indices)?;
        let updates = contiguous("a contiguous copy of updates", &updates)?;
        let indices = indices.as_ptr().cast::<u8>();
        let updates = updates.as_ptr().cast::<u8>();
        if let Some(slice) = data.as_slice_mut() {
            // SAFETY: `slice` holds data's elements in C order (shape checked above) and is a
            // unique borrow, so it overlaps neither input; the element sizes are the
            // signature's. The kernel writes data's elements, updates' copies or the dtype's
            // arithmetic on them: valid `T`s by `Element`'s contract.
            return unsafe {
                self.call_in_place_parallel(slice.as_mut_ptr().cast(), indices, updates, 0)
            };
        }
        let mut copy = contiguous("a contiguous copy of data", &data.view())?.into_owned();
        // SAFETY: as above, on a contiguous copy of data.
        unsafe { self.call_in_place_parallel(copy.as_mut_ptr().cast(), indices, updates, 0)? };
        data.iter_mut().zip(copy).for_each(|(to, from)| *to = from);
        Ok(())
    }
}
