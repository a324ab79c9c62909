//! [`CompiledOp`]: what every kernel type offers whatever its op family, for code that handles
//! any op the same way (a CLI's `run`, `explain` and `bench`; a runtime's registry).

use std::time::Duration;

use super::{Kernel, QuantizedKernel, ScatterKernel};
use crate::error::{Error, Result};
use crate::types::{DType, OpName};

/// The input buffers of one call, native-endian and C order: `scales` is empty and
/// `zero_points` `None` for the ops that have none (the plain gathers; GGUF rows), `updates`
/// empty for all but the scatters.
#[derive(Clone, Copy, Debug, Default)]
pub struct Inputs<'a> {
    /// Data (the stored `uint8` bytes for a quantized op).
    pub data: &'a [u8],
    /// Indices, in the signature's index type.
    pub indices: &'a [u8],
    /// Scales, in the signature's dtype (block quantization).
    pub scales: &'a [u8],
    /// Packed zero points (block quantization with zero points).
    pub zero_points: Option<&'a [u8]>,
    /// The updates of a scatter.
    pub updates: &'a [u8],
}

/// A compiled kernel of any op family: [`Kernel`] (Gather, GatherElements, GatherND),
/// [`QuantizedKernel`] (GatherBlockQuantized, GGUF rows) and [`ScatterKernel`] (ScatterND,
/// ScatterElements, ScatterUpdate; out of place). Each type's own methods have the
/// typed and raw calls; this trait has what is the same for all.
pub trait CompiledOp: Send + Sync {
    /// The operator.
    fn op_name(&self) -> OpName;
    /// The signature, for people.
    fn signature_text(&self) -> String;
    /// The output's element type.
    fn dtype(&self) -> DType;
    /// The output's shape.
    fn output_shape(&self) -> &[usize];
    /// What the kernel does: signature, shapes and loop nest (`gather-jit explain`'s header).
    fn explain(&self) -> String;
    /// The CLIF text of the kernel (before Cranelift's optimisations).
    ///
    /// # Errors
    /// [`Error::Codegen`] if the host ISA is unavailable.
    fn clif(&self) -> Result<String>;
    /// The machine code.
    fn machine_code(&self) -> &[u8];
    /// How long validation and compilation took.
    fn compile_time(&self) -> Duration;
    /// The length of the range `call_range` splits (and `call_parallel` divides).
    fn outer_extent(&self) -> u64;
    /// How many parts a parallel call on `threads` threads (0: the kernel chooses) uses.
    fn parallel_parts(&self, threads: usize) -> usize;
    /// Runs the op on `inputs` into `output`, split across `threads` (0: the kernel chooses),
    /// after checking every buffer's length.
    ///
    /// # Errors
    /// [`Error::BufferMismatch`] for a buffer of the wrong length, or one given to an op that
    /// takes none; the index errors of the kernel's calls.
    fn run_inputs(&self, inputs: Inputs<'_>, output: &mut [u8], threads: usize) -> Result<()>;
}

impl CompiledOp for Kernel {
    fn op_name(&self) -> OpName {
        self.signature().op.name()
    }

    fn signature_text(&self) -> String {
        self.signature().to_string()
    }

    fn dtype(&self) -> DType {
        self.signature().dtype
    }

    fn output_shape(&self) -> &[usize] {
        Kernel::output_shape(self)
    }

    fn explain(&self) -> String {
        Kernel::explain(self)
    }

    fn clif(&self) -> Result<String> {
        Kernel::clif(self)
    }

    fn machine_code(&self) -> &[u8] {
        Kernel::machine_code(self)
    }

    fn compile_time(&self) -> Duration {
        Kernel::compile_time(self)
    }

    fn outer_extent(&self) -> u64 {
        Kernel::outer_extent(self)
    }

    fn parallel_parts(&self, threads: usize) -> usize {
        Kernel::parallel_parts(self, threads)
    }

    fn run_inputs(&self, inputs: Inputs<'_>, output: &mut [u8], threads: usize) -> Result<()> {
        refuse_extra(&inputs, self.op_name(), true)?;
        self.run_bytes_parallel(inputs.data, inputs.indices, output, threads)
    }
}

impl CompiledOp for QuantizedKernel {
    fn op_name(&self) -> OpName {
        self.signature().op_name()
    }

    fn signature_text(&self) -> String {
        self.signature().to_string()
    }

    fn dtype(&self) -> DType {
        self.signature().dtype
    }

    fn output_shape(&self) -> &[usize] {
        QuantizedKernel::output_shape(self)
    }

    fn explain(&self) -> String {
        QuantizedKernel::explain(self)
    }

    fn clif(&self) -> Result<String> {
        QuantizedKernel::clif(self)
    }

    fn machine_code(&self) -> &[u8] {
        QuantizedKernel::machine_code(self)
    }

    fn compile_time(&self) -> Duration {
        QuantizedKernel::compile_time(self)
    }

    fn outer_extent(&self) -> u64 {
        QuantizedKernel::outer_extent(self)
    }

    fn parallel_parts(&self, threads: usize) -> usize {
        QuantizedKernel::parallel_parts(self, threads)
    }

    fn run_inputs(&self, inputs: Inputs<'_>, output: &mut [u8], threads: usize) -> Result<()> {
        if !inputs.updates.is_empty() {
            return Err(extra_buffer("updates", self.op_name()));
        }
        self.run_bytes_parallel(
            inputs.data,
            inputs.indices,
            inputs.scales,
            inputs.zero_points,
            output,
            threads,
        )
    }
}

impl CompiledOp for ScatterKernel {
    fn op_name(&self) -> OpName {
        self.signature().op.name()
    }

    fn signature_text(&self) -> String {
        self.signature().to_string()
    }

    fn dtype(&self) -> DType {
        self.signature().dtype
    }

    fn output_shape(&self) -> &[usize] {
        ScatterKernel::output_shape(self)
    }

    fn explain(&self) -> String {
        ScatterKernel::explain(self)
    }

    fn clif(&self) -> Result<String> {
        ScatterKernel::clif(self)
    }

    fn machine_code(&self) -> &[u8] {
        ScatterKernel::machine_code(self)
    }

    fn compile_time(&self) -> Duration {
        ScatterKernel::compile_time(self)
    }

    fn outer_extent(&self) -> u64 {
        self.layout().index_count() as u64
    }

    fn parallel_parts(&self, threads: usize) -> usize {
        ScatterKernel::parallel_parts(self, threads, false)
    }

    fn run_inputs(&self, inputs: Inputs<'_>, output: &mut [u8], threads: usize) -> Result<()> {
        refuse_extra(&inputs, self.op_name(), false)?;
        self.run_bytes_parallel(inputs.data, inputs.indices, inputs.updates, output, threads)
    }
}

/// A [`Error::BufferMismatch`] for a buffer the op does not take (scales, zero points and, for
/// a gather, updates).
fn refuse_extra(inputs: &Inputs<'_>, op: OpName, gather: bool) -> Result<()> {
    if !inputs.scales.is_empty() {
        return Err(extra_buffer("scales", op));
    }
    if inputs.zero_points.is_some() {
        return Err(extra_buffer("zero_points", op));
    }
    if gather && !inputs.updates.is_empty() {
        return Err(extra_buffer("updates", op));
    }
    Ok(())
}

fn extra_buffer(what: &'static str, op: OpName) -> Error {
    let scatter = matches!(
        op,
        OpName::ScatterNd | OpName::ScatterElements | OpName::ScatterUpdate
    );
    let takes = if scatter {
        "data, indices and updates"
    } else {
        "data and indices"
    };
    Error::BufferMismatch {
        what,
        expected: format!("none ({op} takes {takes})"),
        actual: "a buffer".into(),
    }
}
