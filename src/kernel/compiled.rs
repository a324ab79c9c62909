//! [`CompiledOp`]: what every kernel type offers whatever its op family, for code that handles
//! any op the same way (a CLI's `run`, `explain` and `bench`; a runtime's registry).

use std::time::Duration;

use super::{Kernel, QuantizedKernel};
use crate::error::{Error, Result};
use crate::types::{DType, OpName};

/// The input buffers of one call, native-endian and C order: `scales` is empty and
/// `zero_points` `None` for the ops that have none (the plain gathers; GGUF rows).
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
}

/// A compiled kernel of any op family: [`Kernel`] (Gather, GatherElements, GatherND) and
/// [`QuantizedKernel`] (GatherBlockQuantized, GGUF rows). Each type's own methods have the
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
        let extra = match (inputs.scales.is_empty(), inputs.zero_points) {
            (false, _) => Some("scales"),
            (true, Some(_)) => Some("zero_points"),
            (true, None) => None,
        };
        if let Some(what) = extra {
            return Err(Error::BufferMismatch {
                what,
                expected: format!("none ({} takes data and indices)", self.op_name()),
                actual: "a buffer".into(),
            });
        }
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
