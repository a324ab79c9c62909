//! Code generation for the gathers: a [`Plan`] becomes native code owned by a [`JitCode`].
//!
//! One job per file: `driver.rs` is the one compile driver every op family goes through (ISA,
//! contexts, module memory, CLIF text); `share.rs` shares code between kernels whose plans
//! differ only where the code does not look; `policy.rs` emits the index policies for every
//! lowering; `lower/` turns a gather's plan into CLIF. The driver, `kernel/` and the quantized
//! kernel in `kernel/quantized.rs` are the only places that hold or call JIT code.
#![allow(
    unsafe_code,
    reason = "calls JIT code and names its C ABI (`EntryPoint`)"
)]

pub(crate) mod driver;
pub(crate) mod half;
pub(crate) mod loops;
mod lower;
pub(crate) mod policy;
mod share;

use cranelift_codegen::ir::{Signature, Type};
use cranelift_codegen::isa::CallConv;

use crate::copy;
use crate::error::Result;
use crate::specialize::Plan;
use driver::{Code, EntryPoint, Import};
pub(crate) use lower::chunks;
pub(crate) use share::{CodeShare, code_plan};

/// The C signature of every generated gather kernel:
/// `(data, indices, output, start, end, bad_index) -> status`.
pub(crate) type KernelFn =
    unsafe extern "C" fn(*const u8, *const u8, *mut u8, u64, u64, *mut u64) -> u32;

// SAFETY: `lower::kernel_signature` is three pointers, two `i64`s, a pointer, returning an
// `i32`: `KernelFn` (`u64` and `u32` have the same ABI as `i64` and `i32`).
unsafe impl EntryPoint for KernelFn {
    fn signature(call_conv: CallConv, pointer: Type) -> Signature {
        lower::kernel_signature(call_conv, pointer)
    }

    unsafe fn from_address(address: *const u8) -> Self {
        // SAFETY: the caller's contract: `address` is code with `signature`'s ABI.
        unsafe { std::mem::transmute::<*const u8, KernelFn>(address) }
    }

    fn address(self) -> *const u8 {
        self as *const u8
    }
}

/// Native code for one [`code_plan`] (one kernel, or several that share it).
pub(crate) struct JitCode {
    code: Code<KernelFn>,
    /// The code issues non-temporal stores, which need a fence before others read the output.
    streaming: bool,
}

impl JitCode {
    /// Compiles the code for `plan` (its [`code_plan`]) into a fresh module.
    pub(crate) fn compile(plan: &Plan) -> Result<JitCode> {
        JitCode::compile_code_plan(&code_plan(plan))
    }

    fn compile_code_plan(plan: &Plan) -> Result<JitCode> {
        let (imports, slots) = helper_imports(plan)?;
        let code = driver::compile::<KernelFn>(
            "gather_kernel",
            &imports,
            |func, context, config, refs| {
                lower::lower(plan, func, context, config, helpers(slots, refs));
            },
        )?;
        Ok(JitCode {
            code,
            streaming: plan.lookup.streaming,
        })
    }

    /// Size of the machine code in bytes.
    pub(crate) fn code_bytes(&self) -> usize {
        self.code.code_bytes()
    }

    /// The machine code, for disassembly.
    pub(crate) fn machine_code(&self) -> &[u8] {
        self.code.machine_code()
    }

    /// Calls the kernel on iterations `start..end` of the outermost loop.
    ///
    /// Returns `Err(position)` with the element position in the indices buffer of the tuple
    /// holding a rejected index.
    ///
    /// # Safety
    /// The pointers must satisfy `Kernel::call_range`'s contract for a plan whose
    /// [`code_plan`] this code was compiled from (for a banded plan: one band), and
    /// `start <= end <=` the extent of that plan's outermost loop in its code part (the
    /// extent itself, not the cap `code_plan` puts on it).
    pub(crate) unsafe fn call(
        &self,
        data: *const u8,
        indices: *const u8,
        output: *mut u8,
        start: u64,
        end: u64,
    ) -> std::result::Result<(), u64> {
        let mut bad = 0u64;
        // SAFETY: forwarded from this function's contract; `bad` is a valid out-parameter.
        let status = unsafe { (self.code.entry())(data, indices, output, start, end, &mut bad) };
        if self.streaming {
            // Order the streaming stores before anything that follows (another thread may read
            // the output once this call returns).
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        }
        if status == 0 { Ok(()) } else { Err(bad) }
    }
}

/// Defines the kernel for `plan` (its [`code_plan`]) in `module` as the local function `name`,
/// calling none of the crate's helpers (large slices with `memcpy`): the code of an object for
/// any target. The plan must neither stream nor band (both need the helpers).
#[cfg(feature = "aot")]
pub(crate) fn define_in_object<M: cranelift_module::Module>(
    module: &mut M,
    name: &str,
    plan: &Plan,
) -> Result<(cranelift_module::FuncId, driver::ObjectCode)> {
    debug_assert!(!plan.lookup.streaming && plan.band.is_none());
    let plan = &code_plan(plan);
    let helpers = lower::Helpers {
        stream_copy: None,
        prefetch_copy: None,
        prefetch_rows: None,
    };
    driver::define_in_object::<KernelFn, M>(module, name, |func, context, config, _| {
        lower::lower(plan, func, context, config, helpers)
    })
}

/// The CLIF text of the kernel for `plan` (before optimisation), for `explain`.
pub fn clif_text(plan: &Plan) -> Result<String> {
    let plan = &code_plan(plan);
    let (imports, slots) = helper_imports(plan)?;
    driver::clif_text::<KernelFn>(&imports, |func, context, config, refs| {
        lower::lower(plan, func, context, config, helpers(slots, refs));
    })
}

/// The symbol under which [`copy::stream_copy`] is linked into kernels.
const STREAM_COPY: &str = "gather_jit_stream_copy";
/// The symbol under which [`copy::prefetch_copy_for_host`] is linked into kernels.
const PREFETCH_COPY: &str = "gather_jit_prefetch_copy";
/// The symbol under which [`copy::prefetch_rows`] is linked into kernels.
const PREFETCH_ROWS: &str = "gather_jit_prefetch_rows";

/// The Rust helpers the kernel for `plan` (a [`code_plan`]) calls: [`copy::stream_copy`], the
/// prefetching copy, then [`copy::prefetch_rows`] (the order of [`lower::Helpers`]), those it
/// needs, and which of the three slots each fills.
fn helper_imports(plan: &Plan) -> Result<(Vec<Import>, [bool; 3])> {
    let isa = driver::isa()?;
    let call_conv = isa.default_call_conv();
    let pointer = isa.frontend_config().pointer_type();
    let slots = [
        plan.lookup.streaming,
        lower::prefetches_next_slice(plan),
        plan.band.is_some(),
    ];
    let all = [
        (STREAM_COPY, copy::stream_copy as *const u8, 3),
        (
            PREFETCH_COPY,
            copy::prefetch_copy_for_host() as *const u8,
            4,
        ),
        (PREFETCH_ROWS, copy::prefetch_rows as *const u8, 4),
    ];
    let imports = all
        .into_iter()
        .zip(slots)
        .filter(|(_, used)| *used)
        .map(|((symbol, address, params), _)| Import {
            symbol,
            address,
            signature: lower::copy_signature(call_conv, pointer, params),
        })
        .collect();
    Ok((imports, slots))
}

/// The imported helpers' references in [`lower::Helpers`]' slots.
fn helpers(slots: [bool; 3], refs: &[cranelift_codegen::ir::FuncRef]) -> lower::Helpers {
    let mut refs = refs.iter().copied();
    let [stream_copy, prefetch_copy, prefetch_rows] =
        slots.map(|used| if used { refs.next() } else { None });
    lower::Helpers {
        stream_copy,
        prefetch_copy,
        prefetch_rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An inner loop whose constant bounds are empty (`0..0`) runs no iteration. `specialize`
    /// never builds one (a zero dim makes the whole nest a single empty loop), so only a
    /// hand-made plan reaches the lowering's test of constant bounds with `from >= to`.
    #[test]
    fn an_inner_loop_of_constant_empty_bounds_is_not_entered() {
        use crate::ir::{IndexPolicy, IndexType, NegativeIndices, OutOfRange};
        use crate::specialize::{Coordinate, Lookup, Loop};
        let lp = |extent, indices_stride, output_stride| Loop {
            extent,
            data_stride: 0,
            indices_stride,
            output_stride,
        };
        // Outer loop 0..3 (its bounds are the call's), then 0..0, then a straight-line 0..5 of
        // 4-byte slices; every index is out of range, so any lookup reports an error.
        let plan = Plan {
            loops: vec![lp(3, 0, 0), lp(0, 40, 20), lp(5, 8, 4)],
            lookup: Lookup {
                coordinates: vec![Coordinate {
                    index_offset: 0,
                    dim_size: 4,
                    data_stride: 4,
                }],
                slice_bytes: 4,
                streaming: false,
            },
            band: None,
            index_type: IndexType::I64,
            policy: IndexPolicy {
                negative: NegativeIndices::Invalid,
                out_of_range: OutOfRange::Error,
            },
            data_bytes: 16,
            indices_bytes: 40,
            output_bytes: 20,
        };
        let code = JitCode::compile(&plan).expect("compiles");
        let data = [1u8; 16];
        let indices: Vec<u8> = [99i64; 5].iter().flat_map(|i| i.to_ne_bytes()).collect();
        let mut output = [0xA5u8; 20];
        // SAFETY: if the empty loop were entered, each lookup reads within `indices` (5 tuples)
        // and writes within `output` (5 slices): the outer loop's strides are 0.
        let result =
            unsafe { code.call(data.as_ptr(), indices.as_ptr(), output.as_mut_ptr(), 0, 3) };
        assert_eq!(result, Ok(()));
        assert_eq!(output, [0xA5u8; 20], "nothing written");
    }
}
