//! [`Kernel`]: a gather compiled for one signature, and what is needed to call it.
//!
//! One job per file:
//! - `element.rs`: the Rust types of data and indices ([`Element`], [`IndexElement`]);
//! - `call.rs`: the raw entry points and the driver of banded plans;
//! - `compiled.rs`: [`CompiledOp`], what every kernel type offers whatever its op family;
//! - `errors.rs`: the error for a rejected index, rebuilt from the indices;
//! - `parallel.rs`: one gather split across threads;
//! - `quantized.rs`: [`QuantizedKernel`], the quantized gathers' kernel and its calls;
//! - `safe.rs`: the checked entry points on slices and ndarray views;
//! - `scatter.rs`: [`ScatterKernel`], the scatters' kernel: out of place and in place, raw,
//!   parallel and checked calls.

mod call;
mod compiled;
mod element;
mod errors;
mod parallel;
mod quantized;
pub(crate) mod safe;
mod scatter;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::codegen::{self, JitCode};
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::ir::{Signature, Validated};
use crate::specialize::{Plan, Tuning};

/// The machine code of live kernels, offered to new ones whose loop nests differ at most in
/// the outermost length (see [`Kernel::compile_shared`]).
pub(crate) use crate::codegen::CodeShare;
pub use compiled::{CompiledOp, Inputs};
pub use element::{Element, IndexElement};
pub use parallel::PARALLEL_MIN_BYTES;
pub use quantized::QuantizedKernel;
pub use scatter::{MAX_PARTS_BEYOND_CORES, ScatterKernel};

/// A gather compiled for one [`Signature`]: native code plus what is needed to call it.
///
/// Kernels are `Send + Sync` and can be called from many threads at once; the code is freed
/// when the last kernel holding it (see [`Kernel::compile_shared`]) is dropped.
pub struct Kernel {
    validated: Validated,
    plan: Plan,
    /// Shared with other kernels whose plans differ only where the code does not look (see
    /// [`Kernel::compile_shared`]).
    code: Arc<JitCode>,
    /// Whether `code` was compiled for another kernel.
    reuses_code: bool,
    compile_time: Duration,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("signature", self.signature())
            .field("code_bytes", &self.code.code_bytes())
            .finish_non_exhaustive()
    }
}

impl Kernel {
    /// Validates, specialises and compiles `signature`, without any cache: the machine code
    /// is always freshly compiled (see [`Kernel::compile_shared`] for reuse).
    ///
    /// # Errors
    /// Any validation error of [`Signature::validate`]; [`Error::Codegen`] if Cranelift rejects
    /// the generated code (a bug).
    pub fn compile(signature: &Signature) -> Result<Kernel> {
        let started = Instant::now();
        Kernel::build(signature.validate()?, Tuning::default(), started, None)
    }

    /// As [`Kernel::compile`], with the specialisation choices `tuning` instead of the
    /// defaults (results are the same; speed and [`Kernel::outer_extent`] may differ).
    ///
    /// # Errors
    /// As [`Kernel::compile`].
    #[cfg(feature = "unstable")]
    #[doc(hidden)]
    pub fn compile_tuned(signature: &Signature, tuning: Tuning) -> Result<Kernel> {
        let started = Instant::now();
        Kernel::build(signature.validate()?, tuning, started, None)
    }

    /// Specialises and compiles an already validated signature, with fresh code or with code
    /// from `share`; `started` is when the request began (its time is reported by
    /// [`Kernel::compile_time`]).
    pub(crate) fn build(
        validated: Validated,
        tuning: Tuning,
        started: Instant,
        share: Option<&CodeShare>,
    ) -> Result<Kernel> {
        let plan = Plan::with_tuning(&validated, tuning)?;
        let (code, reuses_code) = match share {
            Some(share) => share.code_for(&plan)?,
            None => (Arc::new(JitCode::compile(&plan)?), false),
        };
        Ok(Kernel {
            validated,
            plan,
            code,
            reuses_code,
            compile_time: started.elapsed(),
        })
    }

    /// The signature this kernel was compiled for.
    pub fn signature(&self) -> &Signature {
        self.validated.signature()
    }

    /// The validated signature (normalised attributes, output shape).
    #[inline]
    pub fn validated(&self) -> &Validated {
        &self.validated
    }

    /// The inferred output shape.
    #[inline]
    pub fn output_shape(&self) -> &[usize] {
        self.validated.output_shape()
    }

    /// The loop plan the code was generated from (its text: [`Kernel::explain`]).
    #[cfg(feature = "unstable")]
    #[doc(hidden)]
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// What this kernel does, for people: the signature, the resolved attributes, the output
    /// shape and the loop plan the code was generated from (what `gather-jit explain`
    /// prints above the code).
    ///
    /// ```
    /// let kernel = gather_jit::Kernel::compile(&gather_jit::Signature::gather(&[4, 3], &[2], 0, 0))?;
    /// assert!(kernel.explain().contains("output shape:  [2, 3]"));
    /// # Ok::<(), gather_jit::Error>(())
    /// ```
    pub fn explain(&self) -> String {
        let validated = &self.validated;
        format!(
            "signature:     {}\nresolved:      {:?}\noutput shape:  {:?}\n\n{}",
            validated.signature(),
            validated.op(),
            validated.output_shape(),
            self.plan
        )
    }

    /// The CLIF text of this kernel (before Cranelift's optimisations).
    ///
    /// # Errors
    /// [`Error::Codegen`] if the host ISA is unavailable.
    pub fn clif(&self) -> Result<String> {
        codegen::clif_text(&self.plan)
    }

    /// Size of the machine code in bytes.
    pub fn code_bytes(&self) -> usize {
        self.code.code_bytes()
    }

    /// The kernel's machine code (`code_bytes` bytes from its entry point), e.g. to
    /// disassemble it (`gather-jit explain` does).
    pub fn machine_code(&self) -> &[u8] {
        self.code.machine_code()
    }

    /// Whether this kernel runs machine code compiled for another kernel (see
    /// [`Kernel::compile_shared`]).
    pub fn reuses_code(&self) -> bool {
        self.reuses_code
    }

    /// How long validation, specialisation and compilation (or finding shared code) took.
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }

    /// Number of iterations of the outermost loop: the range [`Kernel::call_range`] splits.
    pub fn outer_extent(&self) -> u64 {
        self.plan.loops[0].extent
    }
}
