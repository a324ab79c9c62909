//! What a bench calls its kernel on: seeded random inputs (or a file's indices) and the call
//! itself, shared with `explain --check`.

use gather_jit::Inputs;

use crate::failure::{Failure, Result};
use crate::hugepages;
use crate::op_kernel::{OpKernel, OpLayout, OpSignature};
use crate::quantized::{self, Input};
use crate::random::{self, XorShift};
use crate::scatter;

/// The inputs of a bench (or of `explain --check`): seeded random data, valid indices (or a
/// file's), and the quantized ops' scales and zero points or the scatters' updates, drawn in
/// that order.
pub struct BenchInputs {
    /// Data, starting `data_offset` bytes in.
    data_buffer: Vec<u8>,
    data_offset: usize,
    indices: Vec<u8>,
    scales: Vec<u8>,
    zero_points: Option<Vec<u8>>,
    updates: Vec<u8>,
}

impl BenchInputs {
    /// Every buffer of `layout`'s op, drawn from `rng` (indices below `limit`, or `given`),
    /// advised huge pages if `huge`.
    ///
    /// # Errors
    /// No valid index can be drawn; a buffer too large for memory.
    pub fn new(
        layout: OpLayout,
        rng: &mut XorShift,
        huge: bool,
        data_offset: usize,
        limit: u64,
        given: Option<&[u8]>,
    ) -> Result<BenchInputs> {
        let data_bytes = layout.data_bytes()?;
        let mut data_buffer =
            hugepages::zeroed(data_offset.saturating_add(data_bytes), huge, "the data")?;
        let data = &mut data_buffer[data_offset..];
        match layout.scatter() {
            Some(scatter_layout) => {
                scatter::fill_values(scatter_layout.signature().dtype, data, rng);
            }
            None => rng.fill(data),
        }
        if let Some(quantized) = layout.quantized() {
            quantized::finite_block_scales(quantized, data);
        }
        let indices_bytes = layout.indices_bytes()?;
        let mut indices = hugepages::with_capacity(indices_bytes, huge, "the indices")?;
        match given {
            Some(given) => indices.extend_from_slice(given),
            None => random::push_valid_op_indices(layout, rng, limit, &mut indices)?,
        }
        let (scales, zero_points) = match layout.quantized() {
            Some(quantized) => quantized::random_scales(quantized, rng)?,
            None => (Vec::new(), None),
        };
        let updates = match layout.scatter() {
            Some(scatter_layout) => {
                let sig = scatter_layout.signature();
                let len = crate::buffer::byte_len(
                    scatter_layout.updates_len(),
                    sig.dtype.size(),
                    "the updates",
                )?;
                let mut updates = hugepages::zeroed(len, huge, "the updates")?;
                scatter::fill_values(sig.dtype, &mut updates, rng);
                updates
            }
            None => Vec::new(),
        };
        Ok(BenchInputs {
            data_buffer,
            data_offset,
            indices,
            scales,
            zero_points,
            updates,
        })
    }

    /// Data.
    pub fn data(&self) -> &[u8] {
        &self.data_buffer[self.data_offset..]
    }

    /// The buffers as a call takes them.
    pub fn inputs(&self) -> Inputs<'_> {
        Inputs {
            data: self.data(),
            indices: &self.indices,
            scales: &self.scales,
            zero_points: self.zero_points.as_deref(),
            updates: &self.updates,
        }
    }
}

/// One kernel's call as the bench times it: out of place into an output, or (a scatter) in
/// place on the inputs' data.
pub struct Call<'a> {
    /// The kernel.
    pub kernel: &'a OpKernel,
    /// Its signature (for the wording of index errors).
    pub sig: &'a OpSignature,
    /// Parts of each call (0: the kernel chooses).
    pub threads: usize,
    /// A scatter's in-place call.
    pub in_place: bool,
}

impl Call<'_> {
    /// One call, its errors as the user reads them; with `check`, its output (in place: the
    /// data it updated) compared with the interpreter's on the same inputs.
    ///
    /// # Errors
    /// A rejected index; no memory for `check`'s copy of data; a disagreement (status 1).
    pub fn first(&self, inputs: &mut BenchInputs, output: &mut [u8], check: bool) -> Result<()> {
        if !check {
            return self
                .again(inputs, output)
                .map_err(|e| self.sig.index_failure(e));
        }
        if !self.in_place {
            self.again(inputs, output)
                .map_err(|e| self.sig.index_failure(e))?;
            return crate::run::check(self.kernel, self.sig, &inputs.inputs(), output);
        }
        let data = inputs.data();
        let mut original = crate::buffer::with_capacity(data.len(), "a copy of the data")?;
        original.extend_from_slice(data);
        self.again(inputs, output)
            .map_err(|e| self.sig.index_failure(e))?;
        let updated = inputs.data();
        let before = Inputs {
            data: &original,
            ..inputs.inputs()
        };
        crate::run::check(self.kernel, self.sig, &before, updated)
    }

    /// One call.
    ///
    /// # Errors
    /// The library's.
    pub fn again(
        &self,
        inputs: &mut BenchInputs,
        output: &mut [u8],
    ) -> Result<(), gather_jit::Error> {
        match (self.in_place, self.kernel.scatter()) {
            (true, Some(kernel)) => {
                let data = &mut inputs.data_buffer[inputs.data_offset..];
                kernel.run_bytes_in_place_parallel(
                    data,
                    &inputs.indices,
                    &inputs.updates,
                    self.threads,
                )
            }
            _ => self
                .kernel
                .compiled()
                .run_inputs(inputs.inputs(), output, self.threads),
        }
    }
}

/// The index type and shape of exact indices read from a file (`bench --indices`), checked
/// against the flags where given.
///
/// # Errors
/// Indices that are not integers; a shape or type that differs from the flag's.
pub(super) fn indices_from_file(
    input: &Input,
    shape_flag: Option<&[usize]>,
    type_flag: Option<gather_jit::IndexType>,
) -> Result<(Vec<usize>, gather_jit::IndexType)> {
    let array = &input.array;
    let index_type = array.element.index_type().ok_or_else(|| {
        Failure::usage(format!(
            "{}: indices must have an integer type, found {}",
            input.path,
            array.element.dtype().map_or("?", gather_jit::DType::name)
        ))
    })?;
    if let Some(flag) = shape_flag.filter(|&flag| flag != array.shape.as_slice()) {
        return Err(Failure::usage(format!(
            "{}: shape {:?} differs from --indices-shape {flag:?} (leave the flag out to take \
             the file's)",
            input.path, array.shape
        )));
    }
    if let Some(flag) = type_flag.filter(|&flag| flag != index_type) {
        return Err(Failure::usage(format!(
            "{}: index type {index_type} differs from --index-type {flag} (leave the flag out \
             to take the file's)",
            input.path
        )));
    }
    Ok((array.shape.clone(), index_type))
}
