//! Code generation: a [`Plan`] becomes native code owned by a [`JitCode`].
//!
//! The target ISA is built once per process and shared (`OwnedTargetIsa` is an `Arc`); each
//! `JitCode` gets its own `JITModule`, so that dropping it (with the last kernel holding it:
//! kernels whose plans differ only where the code does not look share one, see [`CodeShare`])
//! frees exactly its executable memory. The Cranelift contexts are reused per thread between
//! compiles. This module and `kernel.rs` are the only places that hold or call JIT code.

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

use crate::error::{Error, Result};
use crate::specialize::Plan;

/// The C signature of every generated kernel:
/// `(data, indices, output, start, end, bad_index) -> status`.
pub(crate) type KernelFn =
    unsafe extern "C" fn(*const u8, *const u8, *mut u8, u64, u64, *mut u64) -> u32;

/// The process-wide ISA for the host, with `opt_level=none`.
fn isa() -> Result<&'static OwnedTargetIsa> {
    static ISA: OnceLock<std::result::Result<OwnedTargetIsa, String>> = OnceLock::new();
    ISA.get_or_init(|| {
        let mut flags = settings::builder();
        let set = |flags: &mut settings::Builder, name: &str, value: &str| {
            flags
                .set(name, value)
                .map_err(|e| format!("setting {name}={value}: {e}"))
        };
        // `lower` emits the loops already folded and hoisted; Cranelift's optimiser (`speed`)
        // made no case faster and cost 30-45 % more compile time (docs/performance.md).
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
    /// Owns the executable memory; only touched again in `Drop`. (`JITModule` is `Send` but
    /// not `Sync`; the mutex makes `JitCode` shareable without ever being locked on a call.)
    module: Mutex<Option<JITModule>>,
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
        builder.symbol(STREAM_COPY, stream_copy as *const u8);
        builder.symbol(PREFETCH_COPY, prefetch_copy_for_host() as *const u8);
        builder.symbol(PREFETCH_ROWS, prefetch_rows as *const u8);
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
            module: Mutex::new(Some(module)),
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

impl Drop for JitCode {
    fn drop(&mut self) {
        let module = match self.module.get_mut() {
            Ok(module) => module.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(module) = module {
            // SAFETY: the only pointer into this module's code is `self.entry`, which dies with
            // `self`; no call can be running, since calls borrow `self`.
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

/// The symbol under which [`stream_copy`] is linked into kernels.
const STREAM_COPY: &str = "gather_jit_stream_copy";
/// The symbol under which [`prefetch_copy`] is linked into kernels.
const PREFETCH_COPY: &str = "gather_jit_prefetch_copy";
/// The symbol under which [`prefetch_rows`] is linked into kernels.
const PREFETCH_ROWS: &str = "gather_jit_prefetch_rows";

/// The Rust helpers the kernel for `plan` (a [`code_plan`]) calls, as
/// `(symbol, signature)`: [`stream_copy`], [`prefetch_copy`], then [`prefetch_rows`] (the
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

/// Asks the CPU to bring `indices_bytes` from `indices` and `output_bytes` from `output` (for
/// writing) into the cache. The rows loop of a band calls it for the row it walks
/// [`lower::PREFETCH_ROWS_AHEAD`] rows later (see there).
///
/// The addresses may be anything: prefetches never fault.
extern "C" fn prefetch_rows(
    indices: *const u8,
    indices_bytes: usize,
    output: *const u8,
    output_bytes: usize,
) {
    prefetch_lines::<false>(indices, indices_bytes.min(PREFETCH_ROW_LIMIT_BYTES));
    prefetch_lines::<true>(output, output_bytes.min(PREFETCH_ROW_LIMIT_BYTES));
}

/// At most this many bytes of a band row's indices and output are prefetched by
/// [`prefetch_rows`].
const PREFETCH_ROW_LIMIT_BYTES: usize = 4096;

/// Copies `len` bytes from `source` to `dest` as the kernels copy large slices (see
/// [`prefetch_copy`]), prefetching the start of `next` as it goes: for Rust code around the
/// kernels, such as the packing of a band.
///
/// # Safety
/// As [`prefetch_copy`].
pub(crate) unsafe fn copy_prefetching(
    dest: *mut u8,
    source: *const u8,
    len: usize,
    next: *const u8,
) {
    // SAFETY: forwarded from this function's contract; the helper suits the host.
    unsafe { prefetch_copy_for_host()(dest, source, len, next) }
}

/// Prefetches the cache lines of the first `bytes` from `start`, for writing when `FOR_WRITE`
/// (`prefetchw`). Any address will do: prefetches never fault. A no-op off x86-64.
fn prefetch_lines<const FOR_WRITE: bool>(start: *const u8, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_ET0, _MM_HINT_T0, _mm_prefetch};
        for line in (0..bytes).step_by(64) {
            let address = start.wrapping_add(line).cast::<i8>();
            // SAFETY: a prefetch is only a hint: it never faults, whatever the address
            // (`wrapping_add` keeps the pointer arithmetic itself defined); SSE is part of
            // x86-64.
            unsafe {
                if FOR_WRITE {
                    _mm_prefetch::<_MM_HINT_ET0>(address)
                } else {
                    _mm_prefetch::<_MM_HINT_T0>(address)
                }
            };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (start, bytes);
}

/// At most this many bytes of the next slice are prefetched by [`prefetch_copy`], two cache
/// lines per 128 bytes copied; beyond that the hardware prefetcher catches on by itself. On S5
/// (3 KiB rows) 1 KiB measured 1.03x the time of 4 KiB (docs/performance.md).
#[cfg(target_arch = "x86_64")]
const PREFETCH_LIMIT_BYTES: usize = 4096;

/// The signature of [`prefetch_copy`] and [`prefetch_copy_avx`]: `(dest, source, len, next)`.
type PrefetchCopy = unsafe extern "C" fn(*mut u8, *const u8, usize, *const u8);

/// The copy helper for slices copied with a prefetch of the next ([`prefetch_copy`] or, where
/// the host has AVX, [`prefetch_copy_avx`]): the one the kernels link and
/// [`copy_prefetching`] calls.
fn prefetch_copy_for_host() -> PrefetchCopy {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        return prefetch_copy_avx;
    }
    prefetch_copy
}

/// Copies `len` bytes in 128-byte chunks, calling `copy_chunk(offset)` for each (the last one
/// overlapping the one before when 128 does not divide `len`, which rewrites the same bytes),
/// and prefetches the cache lines of `next`, and for writing those of `next_dest`, at the same
/// offsets as it goes, up to [`PREFETCH_LIMIT_BYTES`]: the prefetches spread over the copy
/// instead of queueing before it. Callers pass as `next_dest` the bytes just after their
/// destination, where the next slice goes when slices are written one after another (the
/// output of most gathers, a packed band); prefetching them for writing measured 0.98x on S5.
///
/// # Safety
/// `len` is at least 128, and `copy_chunk(at)` is sound for every `at` with `at + 128 <= len`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn copy_prefetching_next(
    len: usize,
    next: *const u8,
    next_dest: *const u8,
    mut copy_chunk: impl FnMut(usize),
) {
    debug_assert!(len >= 128, "copy_prefetching_next of {len} bytes");
    let prefetch_end = len.min(PREFETCH_LIMIT_BYTES);
    let mut done = 0;
    while done + 128 <= len {
        if done < prefetch_end {
            prefetch_lines::<false>(next.wrapping_add(done), 128);
            prefetch_lines::<true>(next_dest.wrapping_add(done), 128);
        }
        copy_chunk(done);
        done += 128;
    }
    if done < len {
        copy_chunk(len - 128);
    }
}

/// Copies `len` bytes from `source` to `dest`, bringing the start of `next` (the slice the
/// following lookup copies) into the cache as it goes, so that its latency overlaps this copy.
/// Generated code calls it (or [`prefetch_copy_avx`]) for slices too large to inline. On S5
/// (random 3 KiB rows of a 94 MB table) prefetching the next slice measured 71 -> 64 µs in a
/// Rust model; this loop, which spreads the prefetches over the copy, 0.95x the time of a
/// 1 KiB prefetch before glibc's `memcpy`, and 0.21-0.28x where output and data are 8-24 bytes
/// out of step (docs/performance.md, "Buffers out of step").
///
/// # Safety
/// `source` is readable and `dest` writable for `len` bytes, and the two do not overlap.
/// `next` may be any address: prefetches never fault.
unsafe extern "C" fn prefetch_copy(dest: *mut u8, source: *const u8, len: usize, next: *const u8) {
    #[cfg(target_arch = "x86_64")]
    if len >= 128 {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_storeu_si128};
        let copy_chunk = |at: usize| {
            for lane in (0..128).step_by(16) {
                // SAFETY: `at + 128 <= len` (`copy_prefetching_next`'s promise) keeps both
                // accesses within the caller's ranges; unaligned moves; SSE2 is part of x86-64.
                unsafe {
                    let chunk = _mm_loadu_si128(source.add(at + lane).cast::<__m128i>());
                    _mm_storeu_si128(dest.add(at + lane).cast::<__m128i>(), chunk);
                }
            }
        };
        // SAFETY: `len >= 128`; `copy_chunk` is sound for every chunk within `len` (above).
        unsafe { copy_prefetching_next(len, next, dest.wrapping_add(len), copy_chunk) };
        return;
    }
    prefetch_lines::<false>(next, len);
    // SAFETY: forwarded from this function's contract.
    unsafe { std::ptr::copy_nonoverlapping(source, dest, len) };
}

/// [`prefetch_copy`] with 32-byte moves, for hosts with AVX.
///
/// # Safety
/// As [`prefetch_copy`], and the host has AVX.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe extern "C" fn prefetch_copy_avx(
    dest: *mut u8,
    source: *const u8,
    len: usize,
    next: *const u8,
) {
    use std::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm256_storeu_si256};
    if len < 128 {
        // SAFETY: forwarded from this function's contract.
        return unsafe { prefetch_copy(dest, source, len, next) };
    }
    let copy_chunk = |at: usize| {
        for lane in (0..128).step_by(32) {
            // SAFETY: `at + 128 <= len` (`copy_prefetching_next`'s promise) keeps both
            // accesses within the caller's ranges; unaligned moves; the caller guarantees AVX.
            unsafe {
                let chunk = _mm256_loadu_si256(source.add(at + lane).cast::<__m256i>());
                _mm256_storeu_si256(dest.add(at + lane).cast::<__m256i>(), chunk);
            }
        }
    };
    // SAFETY: `len >= 128`; `copy_chunk` is sound for every chunk within `len` (above).
    unsafe { copy_prefetching_next(len, next, dest.wrapping_add(len), copy_chunk) };
}

/// Copies `len` bytes from `source` to `dest` with non-temporal stores (on x86-64; a plain
/// copy elsewhere). Generated code calls it for large slices of large outputs (`Lookup::streaming`).
///
/// # Safety
/// `source` is readable and `dest` writable for `len` bytes, and the two do not overlap.
unsafe extern "C" fn stream_copy(dest: *mut u8, source: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        // Streaming stores need 16-byte aligned destinations: copy a head to get there.
        let head = dest.align_offset(16).min(len);
        // SAFETY: `head <= len`; the caller guarantees both ranges for `len` bytes.
        unsafe { std::ptr::copy_nonoverlapping(source, dest, head) };
        let mut done = head;
        while done + 16 <= len {
            // SAFETY: `done + 16 <= len` keeps both accesses in range; `dest + done` is 16-byte
            // aligned (advanced from an aligned start by 16s); SSE2 is part of x86-64.
            unsafe {
                let chunk = _mm_loadu_si128(source.add(done).cast::<__m128i>());
                _mm_stream_si128(dest.add(done).cast::<__m128i>(), chunk);
            }
            done += 16;
        }
        // SAFETY: the tail `done..len` is within both ranges.
        unsafe { std::ptr::copy_nonoverlapping(source.add(done), dest.add(done), len - done) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: forwarded from this function's contract.
    unsafe {
        std::ptr::copy_nonoverlapping(source, dest, len)
    };
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

    /// Both copy helpers (the AVX one where the host has it), at lengths around their
    /// 128-byte chunks and at every alignment of source and destination: exactly `len` bytes
    /// land, the bytes after them stay, whatever `next` points at.
    #[test]
    fn prefetch_copy_copies_exactly_len_bytes_whatever_next_points_at() {
        #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
        let mut helpers: Vec<(&str, PrefetchCopy)> = vec![("sse2", prefetch_copy)];
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx") {
            helpers.push(("avx", prefetch_copy_avx));
        }
        let source: Vec<u8> = (0..6000).map(|i| (i % 251) as u8).collect();
        for (name, copy) in helpers {
            for len in [
                0, 1, 63, 64, 127, 128, 129, 255, 513, 1000, 3072, 4096, 4097, 5000,
            ] {
                for (from, to) in [(0, 0), (16, 0), (0, 16), (1, 7), (33, 48)] {
                    for next in [
                        std::ptr::null(),
                        usize::MAX as *const u8,
                        source.as_ptr().wrapping_add(1 << 40),
                        source.as_ptr(),
                    ] {
                        let mut dest = vec![0xEEu8; to + len + 200];
                        // SAFETY: `source[from..from + len]` and `dest[to..to + len]` are in
                        // bounds and do not overlap; the AVX helper is listed only where the
                        // host has AVX; `next` is only prefetched, which never faults.
                        unsafe {
                            copy(
                                dest.as_mut_ptr().add(to),
                                source.as_ptr().add(from),
                                len,
                                next,
                            )
                        };
                        let case = format!("{name}: len {len}, from {from}, to {to}, {next:?}");
                        assert_eq!(dest[to..to + len], source[from..from + len], "{case}");
                        assert!(dest[..to].iter().all(|&b| b == 0xEE), "before: {case}");
                        assert!(dest[to + len..].iter().all(|&b| b == 0xEE), "after: {case}");
                    }
                }
            }
        }
    }

    #[test]
    fn prefetch_rows_takes_any_address() {
        let buffer = vec![7u8; 4096];
        for address in [
            std::ptr::null(),
            usize::MAX as *const u8,
            buffer.as_ptr().wrapping_add(1 << 40),
            buffer.as_ptr(),
        ] {
            prefetch_rows(address, 1 << 20, address, 4096);
        }
        assert!(buffer.iter().all(|&b| b == 7), "prefetching writes nothing");
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
