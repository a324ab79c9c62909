//! Code generation: a [`Plan`] becomes native code owned by a [`JitCode`].
//!
//! The target ISA is built once per process and shared (`OwnedTargetIsa` is an `Arc`); each
//! `JitCode` gets its own `JITModule`, so that dropping it (with the last kernel holding it:
//! kernels whose plans differ only where the code does not look share one, see [`CodeShare`])
//! frees exactly its executable memory. The Cranelift contexts are reused per thread between
//! compiles. This module, `kernel/` and `quant/kernel.rs` are the only places that hold or call JIT code.
#![allow(
    unsafe_code,
    reason = "owns JIT memory: finalized code becomes a function pointer, freed with its module"
)]

mod lower;

use std::cell::RefCell;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use cranelift_codegen::Context;
use cranelift_codegen::ir::{ExtFuncData, ExternalName, Function, UserExternalName, UserFuncName};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::FunctionBuilderContext;
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Linkage, Module, default_libcall_names};
use rustc_hash::FxHashMap;

use crate::copy;
use crate::error::{Error, Result};
use crate::specialize::Plan;

/// The C signature of every generated kernel:
/// `(data, indices, output, start, end, bad_index) -> status`.
pub(crate) type KernelFn =
    unsafe extern "C" fn(*const u8, *const u8, *mut u8, u64, u64, *mut u64) -> u32;

/// The process-wide ISA for the host, with `opt_level=none`.
pub(crate) fn isa() -> Result<&'static OwnedTargetIsa> {
    static ISA: OnceLock<std::result::Result<OwnedTargetIsa, String>> = OnceLock::new();
    ISA.get_or_init(|| {
        let mut flags = settings::builder();
        let set = |flags: &mut settings::Builder, name: &str, value: &str| {
            flags
                .set(name, value)
                .map_err(|e| format!("setting {name}={value}: {e}"))
        };
        // `lower` emits the loops already folded and hoisted; Cranelift's optimiser (`speed`)
        // made no case faster and cost a third more compile time (`cargo bench --bench
        // gather -- compile`).
        set(&mut flags, "opt_level", "none")?;
        // Long-range relocations for the memset libcall (zero-filled large slices), as
        // cranelift-jit requires.
        set(&mut flags, "use_colocated_libcalls", "false")?;
        set(&mut flags, "is_pic", "false")?;
        // The verifier costs compile time; it stays on in debug and test builds.
        let verify = if cfg!(debug_assertions) {
            "true"
        } else {
            "false"
        };
        set(&mut flags, "enable_verifier", verify)?;
        let builder =
            cranelift_native::builder().map_err(|e| format!("host not supported: {e}"))?;
        builder
            .finish(settings::Flags::new(flags))
            .map_err(|e| format!("building the ISA: {e}"))
    })
    .as_ref()
    .map_err(|e| Error::Codegen(e.clone()))
}

thread_local! {
    /// Cranelift's reusable compile state, one per thread.
    static CONTEXTS: RefCell<(Context, FunctionBuilderContext)> =
        RefCell::new((Context::new(), FunctionBuilderContext::new()));
}

/// Native code for one [`code_plan`] (one kernel, or several that share it) and the module
/// that owns its memory.
pub(crate) struct JitCode {
    /// Owns the executable memory that `entry` points into.
    _memory: ModuleMemory,
    entry: KernelFn,
    code_bytes: usize,
    /// The code issues non-temporal stores, which need a fence before others read the output.
    streaming: bool,
}

impl JitCode {
    /// Compiles the code for `plan` (its [`code_plan`]) into a fresh module.
    pub(crate) fn compile(plan: &Plan) -> Result<JitCode> {
        JitCode::compile_code_plan(&code_plan(plan))
    }

    fn compile_code_plan(plan: &Plan) -> Result<JitCode> {
        let isa = isa()?;
        let imports = helper_imports(plan, isa, isa.frontend_config().pointer_type());
        let mut builder = JITBuilder::with_isa(isa.clone(), default_libcall_names());
        builder.symbol(STREAM_COPY, copy::stream_copy as *const u8);
        builder.symbol(PREFETCH_COPY, copy::prefetch_copy_for_host() as *const u8);
        builder.symbol(PREFETCH_ROWS, copy::prefetch_rows as *const u8);
        let mut module = JITModule::new(builder);
        let pointer_type = module.target_config().pointer_type();
        let signature = lower::kernel_signature(isa.default_call_conv(), pointer_type);
        let codegen_err = |e: &dyn std::fmt::Display| Error::Codegen(e.to_string());
        let id = module
            .declare_function("gather_kernel", Linkage::Export, &signature)
            .map_err(|e| codegen_err(&e))?;
        let mut helper_ids = [None, None, None];
        for (slot, import) in helper_ids.iter_mut().zip(imports) {
            if let Some((name, sig)) = import {
                let id = module
                    .declare_function(name, Linkage::Import, &sig)
                    .map_err(|e| codegen_err(&e))?;
                *slot = Some(id);
            }
        }
        let code_bytes = CONTEXTS.with(|contexts| -> Result<usize> {
            let (ctx, builder_context) = &mut *contexts.borrow_mut();
            // The cleared function keeps its tables' capacity from the last compile (a fresh
            // `Function` would regrow them all).
            ctx.clear();
            ctx.func.name = UserFuncName::user(0, id.as_u32());
            ctx.func.signature = signature;
            let [stream_copy, prefetch_copy, prefetch_rows] =
                helper_ids.map(|id| id.map(|id| module.declare_func_in_func(id, &mut ctx.func)));
            let helpers = lower::Helpers {
                stream_copy,
                prefetch_copy,
                prefetch_rows,
            };
            let config = module.target_config();
            lower::lower(plan, &mut ctx.func, builder_context, config, helpers);
            let result = module.define_function(id, ctx).map_err(|e| match e {
                cranelift_module::ModuleError::Compilation(err) => Error::Codegen(
                    cranelift_codegen::print_errors::pretty_error(&ctx.func, err),
                ),
                other => codegen_err(&other),
            });
            let size = ctx
                .compiled_code()
                .map(|c| c.code_info().total_size as usize)
                .unwrap_or(0);
            ctx.clear();
            result.map(|()| size)
        })?;
        module.finalize_definitions().map_err(|e| codegen_err(&e))?;
        let pointer = module.get_finalized_function(id);
        // SAFETY: `pointer` is the finalized code of a function declared with
        // `kernel_signature`, which is exactly `KernelFn`'s C ABI; it stays valid while `module`
        // lives, and `module` lives as long as this `JitCode`.
        let entry = unsafe { std::mem::transmute::<*const u8, KernelFn>(pointer) };
        Ok(JitCode {
            _memory: ModuleMemory::new(module),
            entry,
            code_bytes,
            streaming: plan.lookup.streaming,
        })
    }

    /// Size of the machine code in bytes.
    pub(crate) fn code_bytes(&self) -> usize {
        self.code_bytes
    }

    /// The machine code, for disassembly.
    pub(crate) fn machine_code(&self) -> &[u8] {
        // SAFETY: `entry` is the start of this function's finalized code, `code_bytes` long
        // (Cranelift's size of what it emitted); the module keeps those pages mapped readable
        // and executable, never written again, until `self` drops, which the borrow prevents.
        unsafe { std::slice::from_raw_parts(self.entry as *const u8, self.code_bytes) }
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
        let status = unsafe { (self.entry)(data, indices, output, start, end, &mut bad) };
        if self.streaming {
            // Order the streaming stores before anything that follows (another thread may read
            // the output once this call returns).
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        }
        if status == 0 { Ok(()) } else { Err(bad) }
    }
}

/// A finalized JIT module: its executable memory lives as long as this value. The owner keeps
/// the only pointers into the code beside it, and hands them out only borrowed from itself.
/// (`JITModule` is `Send` but not `Sync`; the mutex makes the owner shareable without ever
/// being locked on a call.)
pub(crate) struct ModuleMemory(Mutex<Option<JITModule>>);

impl ModuleMemory {
    /// Takes ownership of `module`'s memory.
    pub(crate) fn new(module: JITModule) -> ModuleMemory {
        ModuleMemory(Mutex::new(Some(module)))
    }
}

impl Drop for ModuleMemory {
    fn drop(&mut self) {
        let module = match self.0.get_mut() {
            Ok(module) => module.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(module) = module {
            // SAFETY: the pointers into this module's code live in the value that owns this
            // one (a `JitCode` or a `QuantizedKernel`) and die with it; no call can be running,
            // since calls borrow that owner.
            unsafe { module.free_memory() };
        }
    }
}

/// The CLIF text of the kernel for `plan` (before optimisation), for `explain`.
pub fn clif_text(plan: &Plan) -> Result<String> {
    let isa = isa()?;
    let config = isa.frontend_config();
    let plan = &code_plan(plan);
    let imports = helper_imports(plan, isa, config.pointer_type());
    let signature = lower::kernel_signature(isa.default_call_conv(), config.pointer_type());
    let mut func = Function::with_name_signature(UserFuncName::user(0, 0), signature);
    let mut user_name = 0;
    let [stream_copy, prefetch_copy, prefetch_rows] = imports.map(|import| {
        let (_, signature) = import?;
        user_name += 1;
        let signature = func.import_signature(signature);
        let name = func.declare_imported_user_function(UserExternalName::new(0, user_name));
        Some(func.import_function(ExtFuncData {
            name: ExternalName::user(name),
            signature,
            colocated: false,
            patchable: false,
        }))
    });
    let helpers = lower::Helpers {
        stream_copy,
        prefetch_copy,
        prefetch_rows,
    };
    let mut builder_context = FunctionBuilderContext::new();
    lower::lower(plan, &mut func, &mut builder_context, config, helpers);
    Ok(func.display().to_string())
}

/// The plan that becomes native code, and the key under which that code is shared.
///
/// It is `plan` without what the code does not depend on. The bands loop (and batches loop)
/// of a banded plan runs in Rust (`Kernel::call_range` packs each band, then calls the code on
/// it), so only the two inner loops remain, reading the scratch buffer as their data; `band`
/// stays, as it decides the helpers the code calls. The code walks `start..end` of the
/// outermost loop and reads its extent only when that loop is also the innermost, to cap the
/// unrolled trip, which never exceeds [`lower::MAX_UNROLL`]; so the extent is capped there
/// for a single loop and dropped (0) otherwise. The buffer sizes go: the kernel checks them
/// before each call. Signatures that differ only in an outer dim (a dynamic batch or sequence
/// length) thus share one code.
pub(crate) fn code_plan(plan: &Plan) -> Plan {
    let loops = match plan.band {
        Some(_) => &plan.loops[plan.loops.len() - 2..],
        None => &plan.loops[..],
    };
    let mut loops = loops.to_vec();
    loops[0].extent = match loops.len() {
        1 => loops[0].extent.min(lower::MAX_UNROLL),
        _ => 0,
    };
    Plan {
        loops,
        data_bytes: 0,
        indices_bytes: 0,
        output_bytes: 0,
        ..plan.clone()
    }
}

/// Machine code offered for reuse, by [`code_plan`]: each [`crate::KernelCache`] has one, and
/// [`crate::Kernel::compile_shared`] uses a process-wide one. An entry is dead once the last
/// kernel holding its code is dropped.
#[derive(Default)]
pub(crate) struct CodeShare(Mutex<Offered>);

#[derive(Default)]
struct Offered {
    code: FxHashMap<Plan, Weak<JitCode>>,
    /// The map's length at which dead entries are next swept: twice the live ones after the
    /// last sweep (at least 64), so a sweep costs a constant per insert and the map stays
    /// within twice the live code plus 64.
    sweep_at: usize,
}

impl CodeShare {
    /// The code for `plan`: a live kernel's from this share whose plan has the same
    /// [`code_plan`], else freshly compiled (and offered from then on). The flag says whether
    /// the code was reused.
    pub(crate) fn code_for(&self, plan: &Plan) -> Result<(Arc<JitCode>, bool)> {
        let key = code_plan(plan);
        if let Some(code) = self.lock().code.get(&key).and_then(Weak::upgrade) {
            return Ok((code, true));
        }
        // Compiled without the lock, so other plans compile meanwhile; two threads compiling
        // the same key both succeed, and the later one's code is offered from then on.
        let code = Arc::new(JitCode::compile_code_plan(&key)?);
        let mut offered = self.lock();
        if offered.code.len() >= offered.sweep_at {
            // Entries whose kernels are all gone.
            offered.code.retain(|_, code| code.strong_count() > 0);
            offered.sweep_at = (2 * offered.code.len()).max(64);
        }
        offered.code.insert(key, Arc::downgrade(&code));
        Ok((code, false))
    }

    /// Entries in the map, live or not (for tests).
    #[cfg(test)]
    fn entries(&self) -> usize {
        self.lock().code.len()
    }

    fn lock(&self) -> MutexGuard<'_, Offered> {
        // Each update is a single insert or sweep, so a poisoned map is still consistent.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The symbol under which [`copy::stream_copy`] is linked into kernels.
const STREAM_COPY: &str = "gather_jit_stream_copy";
/// The symbol under which [`copy::prefetch_copy_for_host`] is linked into kernels.
const PREFETCH_COPY: &str = "gather_jit_prefetch_copy";
/// The symbol under which [`copy::prefetch_rows`] is linked into kernels.
const PREFETCH_ROWS: &str = "gather_jit_prefetch_rows";

/// The Rust helpers the kernel for `plan` (a [`code_plan`]) calls, as
/// `(symbol, signature)`: [`copy::stream_copy`], the prefetching copy, then [`copy::prefetch_rows`] (the
/// order of [`lower::Helpers`]).
fn helper_imports(
    plan: &Plan,
    isa: &OwnedTargetIsa,
    pointer: cranelift_codegen::ir::Type,
) -> [Option<(&'static str, cranelift_codegen::ir::Signature)>; 3] {
    let call_conv = isa.default_call_conv();
    [
        plan.lookup
            .streaming
            .then(|| (STREAM_COPY, lower::copy_signature(call_conv, pointer, 3))),
        lower::prefetches_next_slice(plan)
            .then(|| (PREFETCH_COPY, lower::copy_signature(call_conv, pointer, 4))),
        plan.band
            .is_some()
            .then(|| (PREFETCH_ROWS, lower::copy_signature(call_conv, pointer, 4))),
    ]
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

    fn plan_of(signature: &crate::Signature, tuning: crate::Tuning) -> Plan {
        Plan::with_tuning(&signature.validate().expect("valid"), tuning).expect("plan")
    }

    /// A share reuses code only while a kernel holds it, and tells apart what the code
    /// depends on: index type, policy, table size.
    #[test]
    fn a_share_reuses_code_only_while_it_is_held_and_only_for_an_equal_key() {
        use crate::{IndexPolicy, IndexType, NegativeIndices, OutOfRange, Tuning};
        let policy = |negative, out_of_range| IndexPolicy {
            negative,
            out_of_range,
        };
        let share = CodeShare::default();
        let sig = |n: usize| crate::Signature::gather_elements(&[n, 37], &[n, 29], 1);
        let code = |signature: &crate::Signature| {
            share
                .code_for(&plan_of(signature, Tuning::default()))
                .expect("compiles")
        };
        let (first, reused) = code(&sig(40));
        assert!(!reused);
        // Two loops (rows, elements): the rows' extent is not in the key at all.
        for n in [2, 7, 41, 1000] {
            let (other, reused) = code(&sig(n));
            assert!(reused && Arc::ptr_eq(&other, &first), "{n} rows");
        }
        let variants = [
            sig(40).with_index_type(IndexType::U64),
            sig(40).with_index_type(IndexType::I32),
            sig(40).with_policy(policy(NegativeIndices::Invalid, OutOfRange::Error)),
            sig(40).with_policy(policy(NegativeIndices::Wrap, OutOfRange::Clamp)),
            sig(40).with_policy(policy(NegativeIndices::Wrap, OutOfRange::Zero)),
            crate::Signature::gather_elements(&[40, 38], &[40, 29], 1),
            crate::Signature::gather_elements(&[40, 37], &[40, 30], 1),
        ];
        for variant in &variants {
            let (other, reused) = code(variant);
            assert!(!reused && !Arc::ptr_eq(&other, &first), "{variant}");
        }
        drop(first);
        assert!(!code(&sig(40)).1, "nothing held it");
    }

    /// A single loop keeps its extent up to the longest trip: lengths from 8 up share, shorter
    /// ones do not (their trip is shorter).
    #[test]
    fn a_single_loop_shares_code_from_the_longest_trip_up() {
        let share = CodeShare::default();
        let plan = |rows: usize| {
            let sig = crate::Signature::gather(&[50, 2], &[rows], 0, 0);
            plan_of(&sig, crate::Tuning::default())
        };
        assert_eq!(plan(9).loops.len(), 1);
        let (eight, _) = share.code_for(&plan(8)).expect("compiles");
        for rows in [9, 100, 5000] {
            let (code, reused) = share.code_for(&plan(rows)).expect("compiles");
            assert!(reused && Arc::ptr_eq(&code, &eight), "{rows}");
        }
        let (seven, reused) = share.code_for(&plan(7)).expect("compiles");
        assert!(!reused && !Arc::ptr_eq(&seven, &eight));
    }

    /// Banded plans share the code of their two inner loops across batches.
    #[test]
    fn banded_plans_share_code_across_batches() {
        let share = CodeShare::default();
        let tuning = crate::Tuning::bands_always(64);
        let sig =
            |batch: usize| crate::Signature::gather_elements(&[batch, 9, 64], &[batch, 12, 64], 1);
        let plans: Vec<Plan> = [2, 3, 5, 40].map(|b| plan_of(&sig(b), tuning)).to_vec();
        assert!(plans.iter().all(|p| p.band.is_some()), "{plans:?}");
        let (first, _) = share.code_for(&plans[0]).expect("compiles");
        for plan in &plans[1..] {
            let (code, reused) = share.code_for(plan).expect("compiles");
            assert!(reused && Arc::ptr_eq(&code, &first));
        }
        // Another table (10 rows) is another bounds check.
        let other = plan_of(
            &crate::Signature::gather_elements(&[2, 10, 64], &[2, 12, 64], 1),
            tuning,
        );
        assert!(other.band.is_some());
        assert!(!share.code_for(&other).expect("compiles").1);
    }

    /// Dead entries are swept as the map grows: it stays within twice the live code plus 64.
    #[test]
    fn a_share_sweeps_dead_code() {
        let share = CodeShare::default();
        let held: Vec<_> = (0..10)
            .map(|n| {
                let sig = crate::Signature::gather(&[n + 1, 3], &[2], 0, 0);
                share
                    .code_for(&plan_of(&sig, crate::Tuning::default()))
                    .expect("compiles")
            })
            .collect();
        for n in 0..300 {
            let sig = crate::Signature::gather(&[n + 100, 3], &[2], 0, 0);
            drop(share.code_for(&plan_of(&sig, crate::Tuning::default())));
            assert!(
                share.entries() <= 2 * held.len() + 64,
                "{} entries",
                share.entries()
            );
        }
        assert!(held.iter().all(|(code, _)| Arc::strong_count(code) == 1));
    }
}
