//! The one way from a lowering to executable code, for every op family: the host ISA,
//! Cranelift's per-thread reusable contexts, the `JITModule` that owns a kernel's memory (built
//! here and nowhere else), the helper imports, and the CLIF text `explain` prints.
//!
//! The ISA is built once per process and shared (`OwnedTargetIsa` is an `Arc`); each compile
//! gets its own `JITModule`, so that dropping the [`Code`] that owns it frees exactly its
//! executable memory. The verifier runs in debug and test builds.
#![allow(
    unsafe_code,
    reason = "owns JIT memory: finalized code becomes a function pointer, freed with its module"
)]

use std::cell::RefCell;
use std::sync::{Mutex, OnceLock};

use cranelift_codegen::Context;
#[cfg(feature = "aot")]
use cranelift_codegen::FinalizedRelocTarget;
use cranelift_codegen::ir::{
    ExtFuncData, ExternalName, FuncRef, Function, Signature, UserExternalName, UserFuncName,
};
use cranelift_codegen::isa::{CallConv, OwnedTargetIsa, TargetFrontendConfig};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::FunctionBuilderContext;
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{FuncId, Linkage, Module, default_libcall_names};

use crate::error::{Error, Result};

/// The process-wide ISA for the host, with [`flags`] for JIT memory.
pub(crate) fn isa() -> Result<&'static OwnedTargetIsa> {
    static ISA: OnceLock<std::result::Result<OwnedTargetIsa, String>> = OnceLock::new();
    ISA.get_or_init(|| {
        let builder =
            cranelift_native::builder().map_err(|e| format!("host not supported: {e}"))?;
        builder
            .finish(flags(false)?)
            .map_err(|e| format!("building the ISA: {e}"))
    })
    .as_ref()
    .map_err(|e| Error::Codegen(e.clone()))
}

/// The Cranelift settings of every kernel: `is_pic` for relocatable objects (which a PIE
/// executable links without text relocations), off for JIT memory (absolute helper addresses).
pub(crate) fn flags(is_pic: bool) -> std::result::Result<settings::Flags, String> {
    let mut flags = settings::builder();
    let set = |flags: &mut settings::Builder, name: &str, value: &str| {
        flags
            .set(name, value)
            .map_err(|e| format!("setting {name}={value}: {e}"))
    };
    // The lowerings emit their loops already folded and hoisted; Cranelift's optimiser
    // (`speed`) made no case faster and cost a third more compile time (`cargo bench
    // --bench gather -- compile`).
    set(&mut flags, "opt_level", "none")?;
    // Long-range relocations for the memcpy and memset libcalls, as cranelift-jit requires.
    set(&mut flags, "use_colocated_libcalls", "false")?;
    set(&mut flags, "is_pic", if is_pic { "true" } else { "false" })?;
    // The verifier costs compile time; it stays on in debug and test builds.
    let verify = if cfg!(debug_assertions) {
        "true"
    } else {
        "false"
    };
    set(&mut flags, "enable_verifier", verify)?;
    Ok(settings::Flags::new(flags))
}

thread_local! {
    /// Cranelift's reusable compile state, one per thread.
    static CONTEXTS: RefCell<(Context, FunctionBuilderContext)> =
        RefCell::new((Context::new(), FunctionBuilderContext::new()));
}

/// The C type of a kernel's entry point, and the CLIF signature that has that ABI.
///
/// # Safety
/// [`EntryPoint::signature`] must describe exactly `Self`'s C ABI (parameter and return
/// types, in order, under the ISA's default calling convention): [`compile`] turns the
/// finalized code of a function declared with it into a `Self`.
pub(crate) unsafe trait EntryPoint: Copy + Send + Sync + 'static {
    /// The CLIF signature of `Self`.
    fn signature(call_conv: CallConv, pointer: cranelift_codegen::ir::Type) -> Signature;

    /// The function pointer at `address`.
    ///
    /// # Safety
    /// `address` is the finalized code of a function declared with [`Self::signature`].
    unsafe fn from_address(address: *const u8) -> Self;

    /// The address of the code.
    fn address(self) -> *const u8;
}

/// A Rust function a kernel calls: the symbol it is linked under, its address and its CLIF
/// signature (which must be its C ABI).
pub(crate) struct Import {
    /// The symbol the kernel's module declares.
    pub(crate) symbol: &'static str,
    /// The function's address.
    pub(crate) address: *const u8,
    /// Its C ABI, as CLIF.
    pub(crate) signature: Signature,
}

/// Emits a kernel's body into `func` (whose name and signature are set), with the imports'
/// references in the order they were given.
pub(crate) trait Lower:
    FnOnce(&mut Function, &mut FunctionBuilderContext, TargetFrontendConfig, &[FuncRef])
{
}

impl<T> Lower for T where
    T: FnOnce(&mut Function, &mut FunctionBuilderContext, TargetFrontendConfig, &[FuncRef])
{
}

/// A finalized JIT module: its executable memory lives as long as this value. The owner keeps
/// the only pointers into the code beside it, and hands them out only borrowed from itself.
/// (`JITModule` is `Send` but not `Sync`; the mutex makes the owner shareable without ever
/// being locked on a call.)
struct ModuleMemory(Mutex<Option<JITModule>>);

impl Drop for ModuleMemory {
    fn drop(&mut self) {
        let module = match self.0.get_mut() {
            Ok(module) => module.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(module) = module {
            // SAFETY: the only pointer into this module's code is the `Code` that owns this
            // value, and it dies with it; no call can be running, since calls borrow it.
            unsafe { module.free_memory() };
        }
    }
}

/// Executable code with entry point type `F`, and the module that owns its memory.
pub(crate) struct Code<F> {
    entry: F,
    code_bytes: usize,
    /// Owns the executable memory that `entry` points into; dropped after it.
    _memory: ModuleMemory,
}

impl<F: EntryPoint> Code<F> {
    /// The entry point; valid while `self` lives.
    pub(crate) fn entry(&self) -> F {
        self.entry
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
        unsafe { std::slice::from_raw_parts(self.entry.address(), self.code_bytes) }
    }
}

/// Compiles one function named `name` with `F`'s signature into a fresh module: `lower` emits
/// its body, calling `imports` through the references it is given.
pub(crate) fn compile<F: EntryPoint>(
    name: &str,
    imports: &[Import],
    lower: impl Lower,
) -> Result<Code<F>> {
    let isa = isa()?;
    let mut builder = JITBuilder::with_isa(isa.clone(), default_libcall_names());
    for import in imports {
        builder.symbol(import.symbol, import.address);
    }
    let mut module = JITModule::new(builder);
    let signature = F::signature(
        isa.default_call_conv(),
        isa.frontend_config().pointer_type(),
    );
    let defined = define(
        &mut module,
        name,
        Linkage::Export,
        &signature,
        imports,
        false,
        lower,
    )?;
    let (id, code_bytes) = (defined.id, defined.code_bytes);
    module
        .finalize_definitions()
        .map_err(|e| codegen_error(&e))?;
    let address = module.get_finalized_function(id);
    // SAFETY: `address` is the finalized code of the function declared with `F::signature`
    // above; it stays valid while `module` lives, and the `Code` owns both.
    let entry = unsafe { F::from_address(address) };
    Ok(Code {
        entry,
        code_bytes,
        _memory: ModuleMemory(Mutex::new(Some(module))),
    })
}

/// A failure to define `func` in a module as this crate's error: Cranelift's verifier and
/// compile errors printed with the function.
pub(crate) fn module_error(func: &Function, error: cranelift_module::ModuleError) -> Error {
    match error {
        cranelift_module::ModuleError::Compilation(err) => {
            Error::Codegen(cranelift_codegen::print_errors::pretty_error(func, err))
        }
        other => codegen_error(&other),
    }
}

/// A Cranelift error as this crate's.
pub(crate) fn codegen_error(e: &dyn std::fmt::Display) -> Error {
    Error::Codegen(e.to_string())
}

/// Defines a kernel of entry type `F` as the local function `name` of an object's `module`,
/// calling no helper; returns its id and what an object's kernel keeps of its code.
#[cfg(feature = "aot")]
pub(crate) fn define_in_object<F: EntryPoint, M: Module>(
    module: &mut M,
    name: &str,
    lower: impl Lower,
) -> Result<(FuncId, ObjectCode)> {
    let isa = module.isa();
    let signature = F::signature(isa.default_call_conv(), isa.pointer_type());
    let defined = define(module, name, Linkage::Local, &signature, &[], true, lower)?;
    let code = (defined.object).ok_or_else(|| Error::Codegen("no code was kept".into()))?;
    Ok((defined.id, code))
}

/// A function [`define`] compiled into a module.
pub(crate) struct Defined {
    /// Its id in the module.
    pub(crate) id: FuncId,
    /// Size of its machine code in bytes.
    pub(crate) code_bytes: usize,
    /// What an object's kernel keeps of its code, when asked for.
    #[cfg(feature = "aot")]
    pub(crate) object: Option<ObjectCode>,
}

/// An object kernel's code, as `gather_jit::aot` shows it: a JIT compile keeps none of this.
#[cfg(feature = "aot")]
pub(crate) struct ObjectCode {
    /// The machine code as emitted, before relocation.
    pub(crate) code: Vec<u8>,
    /// The CLIF text before Cranelift's optimisations.
    pub(crate) clif: String,
    /// The fields of `code` the linker fills in, in code order.
    pub(crate) relocations: Vec<EmittedRelocation>,
}

/// A field of [`ObjectCode`] that is filled in when the code is linked.
#[cfg(feature = "aot")]
pub(crate) struct EmittedRelocation {
    /// Offset of the field in the code.
    pub(crate) offset: u32,
    /// What is written there.
    pub(crate) kind: cranelift_codegen::binemit::Reloc,
    /// The symbol whose address it takes.
    pub(crate) symbol: String,
    /// What is added to that address.
    pub(crate) addend: i64,
}

/// Declares and defines one function named `name` with `signature` in `module` (JIT memory or
/// an object), its body emitted by `lower` with references to `imports` (whose addresses only
/// a JIT module uses); `for_object` keeps its [`ObjectCode`] (with the `aot` feature).
pub(crate) fn define<M: Module>(
    module: &mut M,
    name: &str,
    linkage: Linkage,
    signature: &Signature,
    imports: &[Import],
    for_object: bool,
    lower: impl Lower,
) -> Result<Defined> {
    #[cfg(not(feature = "aot"))]
    let _ = for_object;
    let id = module
        .declare_function(name, linkage, signature)
        .map_err(|e| codegen_error(&e))?;
    let mut import_ids = Vec::with_capacity(imports.len());
    for import in imports {
        let id = module
            .declare_function(import.symbol, Linkage::Import, &import.signature)
            .map_err(|e| codegen_error(&e))?;
        import_ids.push(id);
    }
    let mut lower = Some(lower);
    let mut define = |ctx: &mut Context, builder_context: &mut FunctionBuilderContext| {
        // The cleared function keeps its tables' capacity from the last compile (a fresh
        // `Function` would regrow them all).
        ctx.clear();
        ctx.func.name = UserFuncName::user(0, id.as_u32());
        ctx.func.signature = signature.clone();
        let refs: Vec<FuncRef> = import_ids
            .iter()
            .map(|&id| module.declare_func_in_func(id, &mut ctx.func))
            .collect();
        let config = module.target_config();
        if let Some(lower) = lower.take() {
            lower(&mut ctx.func, builder_context, config, &refs);
        }
        #[cfg(feature = "aot")]
        let clif = for_object.then(|| ctx.func.display().to_string());
        let result = match vectors_missing(module.isa(), &ctx.func) {
            Some(error) => Err(error),
            None => module
                .define_function(id, ctx)
                .map_err(|e| module_error(&ctx.func, e)),
        };
        let code_bytes = ctx
            .compiled_code()
            .map_or(0, |c| c.code_info().total_size as usize);
        #[cfg(feature = "aot")]
        let object = clif
            .zip(ctx.compiled_code())
            .map(|(clif, compiled)| ObjectCode {
                code: compiled.code_buffer().to_vec(),
                clif,
                relocations: (compiled.buffer.relocs().iter())
                    .map(|reloc| EmittedRelocation {
                        offset: reloc.offset,
                        kind: reloc.kind,
                        symbol: relocation_symbol(&*module, &ctx.func, &reloc.target),
                        addend: reloc.addend,
                    })
                    .collect(),
            });
        ctx.clear();
        result.map(|()| Defined {
            id,
            code_bytes,
            #[cfg(feature = "aot")]
            object,
        })
    };
    // A thread whose contexts are gone (a compile from a thread-local's destructor) or in use
    // compiles with fresh ones.
    let reused = CONTEXTS.try_with(|contexts| {
        let mut contexts = contexts.try_borrow_mut().ok()?;
        let (ctx, builder_context) = &mut *contexts;
        Some(define(ctx, builder_context))
    });
    match reused {
        Ok(Some(result)) => result,
        _ => define(&mut Context::new(), &mut FunctionBuilderContext::new()),
    }
}

/// The symbol a relocation of `func`'s code in `module` refers to, as the module links it.
#[cfg(feature = "aot")]
fn relocation_symbol<M: Module>(
    module: &M,
    func: &Function,
    target: &FinalizedRelocTarget,
) -> String {
    match target {
        FinalizedRelocTarget::ExternalName(ExternalName::User(name)) => {
            let name = &func.params.user_named_funcs()[*name];
            let id = FuncId::from_u32(name.index);
            module
                .declarations()
                .get_function_decl(id)
                .linkage_name(id)
                .into_owned()
        }
        FinalizedRelocTarget::ExternalName(ExternalName::LibCall(libcall)) => {
            default_libcall_names()(*libcall)
        }
        other => other.display(Some(&func.params)).to_string(),
    }
}

/// The error for `func` if it uses 128-bit vectors and `isa` has no vector registers:
/// riscv64 without the V extension (e.g. `riscv64gc`), whose backend reaches `unreachable!()`
/// on a vector load or store instead of returning an error. The lowerings emit vectors for
/// copies of 16 bytes and more, and for lookups packed into lanes.
fn vectors_missing(isa: &dyn cranelift_codegen::isa::TargetIsa, func: &Function) -> Option<Error> {
    let has_vectors = match isa.triple().architecture {
        target_lexicon::Architecture::Riscv64(_) => isa
            .isa_flags()
            .iter()
            .any(|flag| flag.name == "has_v" && flag.as_bool() == Some(true)),
        _ => true,
    };
    let uses_vectors = || {
        let dfg = &func.dfg;
        dfg.values().any(|v| dfg.value_type(v).is_vector())
    };
    (!has_vectors && uses_vectors()).then(|| {
        Error::Codegen(format!(
            "the kernel moves 128-bit vectors, and {} without the V extension has no vector \
             registers",
            isa.triple()
        ))
    })
}

/// The CLIF text (before Cranelift's optimisations) of the function [`compile`] would build
/// from the same arguments, for `explain`.
pub(crate) fn clif_text<F: EntryPoint>(imports: &[Import], lower: impl Lower) -> Result<String> {
    let isa = isa()?;
    let config = isa.frontend_config();
    let signature = F::signature(isa.default_call_conv(), config.pointer_type());
    let mut func = Function::with_name_signature(UserFuncName::user(0, 0), signature);
    let refs: Vec<FuncRef> = (1..)
        .zip(imports)
        .map(|(user_name, import)| {
            let signature = func.import_signature(import.signature.clone());
            let name = func.declare_imported_user_function(UserExternalName::new(0, user_name));
            func.import_function(ExtFuncData {
                name: ExternalName::user(name),
                signature,
                colocated: false,
                patchable: false,
            })
        })
        .collect();
    lower(&mut func, &mut FunctionBuilderContext::new(), config, &refs);
    Ok(func.display().to_string())
}
