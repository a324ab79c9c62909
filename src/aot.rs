//! Ahead-of-time kernels: the JIT's lowerings compiled into one relocatable object for a
//! target triple (ELF, Mach-O or COFF, as `cranelift-object` writes them), each kernel behind
//! a C entry point, with a C header that declares them.
//!
//! Every kernel is exported as
//! `int32_t SYMBOL(const void *data, const void *indices, void *output, uint64_t *bad_position)`
//! (quantized kernels take `scales` and `zero_points` after `indices`): C-contiguous
//! native-endian buffers of the signature's shapes and types. It returns 0 on success, or 1
//! when an index is rejected, having stored to `*bad_position` the element position in the
//! indices buffer of the first rejected index: the position the JIT's error names.
//! The header `#define`s each buffer's size in bytes (`SYMBOL_DATA_BYTES`, ...).
//!
//! The kernel behind an entry point is the JIT's code for the same plan, with two
//! differences that need no helper of this crate: an object's plans never band GatherElements
//! (banding packs the table in a scratch buffer the Rust caller owns) and never stream (no
//! non-temporal stores in Cranelift), and slices too large to copy inline are copied with
//! `memcpy`. An object therefore refers to no symbol but `memcpy`, `memmove` and `memset`.
//!
//! ```
//! use gather_jit::Signature;
//! use gather_jit::aot::{ObjectBuilder, Target};
//!
//! let target = Target::from_triple("aarch64-unknown-linux-gnu")?;
//! let mut object = ObjectBuilder::new(&target)?;
//! object.add("embed_rows", &Signature::gather(&[1000, 64], &[16], 0, 0))?;
//! let object = object.finish()?;
//! assert!(object.bytes().starts_with(b"\x7fELF"));
//! assert!(object.header("EMBED_H").contains("#define embed_rows_OUTPUT_BYTES 4096"));
//! # Ok::<(), gather_jit::Error>(())
//! ```

use std::collections::HashSet;
use std::fmt::Write as _;
use std::str::FromStr;

use cranelift_codegen::Context;
use cranelift_codegen::ir::types::{I32, I64};
use cranelift_codegen::ir::{AbiParam, InstBuilder, Signature as ClifSignature, UserFuncName};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::Configurable;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_module::{FuncId, Linkage, Module, default_libcall_names};
use cranelift_object::{ObjectBuilder as ClifObjectBuilder, ObjectModule};

use crate::codegen::{self, driver};
use crate::error::{Error, Result};
use crate::ir::{OutOfRange, Signature};
use crate::kernel::QuantizedKernel;
use crate::quant::QuantizedSignature;
use crate::specialize::{Host, Plan, Tuning};

/// What an object's plans assume of the machine: no output streams (Cranelift emits no
/// non-temporal stores, and a cross build knows nothing of the target's caches).
const OBJECT_HOST: Host = Host {
    streaming_output_bytes: u64::MAX,
};

/// A machine to compile for: an architecture, operating system and object format (a target
/// triple), with the CPU features the code may use.
pub struct Target {
    isa: OwnedTargetIsa,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("triple", &self.triple())
            .finish()
    }
}

impl Target {
    /// `triple` (e.g. `x86_64-unknown-linux-gnu`, `aarch64-unknown-linux-gnu`,
    /// `aarch64-apple-darwin`, `riscv64gc-unknown-linux-gnu`) with its baseline CPU features,
    /// so that the code runs on every CPU of that architecture.
    ///
    /// # Errors
    /// [`Error::UnsupportedTarget`] if the triple does not parse, or Cranelift has no backend
    /// for its architecture, or `cranelift-object` no writer for its object format.
    pub fn from_triple(triple: &str) -> Result<Target> {
        Target::with_features(triple, &[])
    }

    /// `triple` with the CPU features named (Cranelift's setting names for the architecture,
    /// e.g. `has_avx2` for x86-64, `has_v` and `has_zvl128b` for riscv64's vector extension)
    /// enabled beyond its baseline: the code then runs only on CPUs that have them.
    ///
    /// # Errors
    /// As [`Target::from_triple`], and [`Error::UnsupportedTarget`] naming a feature the
    /// architecture does not have.
    pub fn with_features(triple: &str, features: &[&str]) -> Result<Target> {
        let unsupported = |reason: String| Error::UnsupportedTarget {
            triple: triple.to_string(),
            reason,
        };
        let parsed = target_lexicon::Triple::from_str(triple)
            .map_err(|e| unsupported(format!("not a target triple ({e})")))?;
        if parsed.architecture == target_lexicon::Architecture::Unknown {
            return Err(unsupported("no architecture".into()));
        }
        if !matches!(
            parsed.binary_format,
            target_lexicon::BinaryFormat::Elf
                | target_lexicon::BinaryFormat::Macho
                | target_lexicon::BinaryFormat::Coff
        ) {
            return Err(unsupported(format!(
                "no object writer for the {} format",
                parsed.binary_format
            )));
        }
        // Cranelift's backends and `cranelift-object` panic (or fail the verifier) on the
        // combinations left out: 32-bit pointers, big-endian aarch64, aarch64's GOT
        // relocations in COFF, s390x outside ELF.
        if parsed.pointer_width() != Ok(target_lexicon::PointerWidth::U64) {
            return Err(unsupported(
                "only targets with 64-bit pointers are supported".into(),
            ));
        }
        use target_lexicon::{Aarch64Architecture, Architecture, BinaryFormat};
        let format = parsed.binary_format;
        let supported = match parsed.architecture {
            Architecture::X86_64 => true,
            Architecture::Aarch64(Aarch64Architecture::Aarch64) => format != BinaryFormat::Coff,
            Architecture::Aarch64(_) => false,
            Architecture::S390x | Architecture::Riscv64(_) => format == BinaryFormat::Elf,
            _ => true,
        };
        if !supported {
            return Err(unsupported(format!(
                "no support for {} objects in the {format} format",
                parsed.architecture
            )));
        }
        let mut builder = cranelift_codegen::isa::lookup(parsed)
            .map_err(|e| unsupported(format!("no code generator ({e})")))?;
        for feature in features {
            builder
                .enable(feature)
                .map_err(|e| unsupported(format!("CPU feature {feature}: {e}")))?;
        }
        let flags = driver::flags(true).map_err(unsupported)?;
        let isa = builder
            .finish(flags)
            .map_err(|e| unsupported(format!("building the code generator: {e}")))?;
        Ok(Target { isa })
    }

    /// This machine: its triple and every CPU feature it has (the JIT's code generator), for
    /// objects that only this kind of machine runs.
    ///
    /// # Errors
    /// [`Error::UnsupportedTarget`] if Cranelift does not support the host.
    pub fn host() -> Result<Target> {
        let unsupported = |reason: String| Error::UnsupportedTarget {
            triple: target_lexicon::HOST.to_string(),
            reason,
        };
        let builder = cranelift_native::builder().map_err(|e| unsupported(e.to_string()))?;
        let flags = driver::flags(true).map_err(unsupported)?;
        let isa = builder
            .finish(flags)
            .map_err(|e| unsupported(format!("building the code generator: {e}")))?;
        Ok(Target { isa })
    }

    /// The target triple.
    pub fn triple(&self) -> String {
        self.isa.triple().to_string()
    }
}

/// The names of the entry points' buffer parameters, which the header's size macros use.
const BUFFER_NAMES: [&str; 5] = ["data", "indices", "scales", "zero_points", "output"];

/// One buffer of an ahead-of-time kernel's C entry point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Buffer {
    /// The parameter's name: `data`, `indices`, `scales`, `zero_points` or `output`.
    pub name: &'static str,
    /// Its size in bytes.
    pub bytes: u64,
}

/// A field of an [`AotKernel`]'s machine code that the linker fills in (a call of `memcpy` or
/// `memset` takes the function's address from there).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Relocation {
    /// Offset of the field in [`AotKernel::machine_code`].
    pub offset: usize,
    /// What the linker writes there, as Cranelift names the relocation (e.g. `X86GOTPCRel4`,
    /// `Arm64Call`).
    pub kind: String,
    /// The symbol whose address it refers to.
    pub symbol: String,
    /// What is added to that address.
    pub addend: i64,
}

/// An exported kernel of an [`Object`].
#[derive(Clone, Debug)]
pub struct AotKernel {
    symbol: String,
    explain: String,
    buffers: Vec<Buffer>,
    machine_code: Vec<u8>,
    relocations: Vec<Relocation>,
    clif: String,
    plan: Option<Plan>,
}

impl AotKernel {
    /// The symbol its C entry point is exported under.
    pub fn symbol(&self) -> &str {
        &self.symbol
    }

    /// Its signature, as the JIT's kernels print theirs.
    pub fn description(&self) -> &str {
        self.explain.lines().next().unwrap_or_default()
    }

    /// Its signature, then the loop nest of the object's plan (never banded, never
    /// streaming), as `explain` prints a JIT kernel's.
    pub fn explain(&self) -> &str {
        &self.explain
    }

    /// The relocated fields of [`AotKernel::machine_code`], in code order.
    pub fn relocations(&self) -> &[Relocation] {
        &self.relocations
    }

    /// The CLIF text of the kernel behind the entry point, before Cranelift's optimisations.
    pub fn clif(&self) -> &str {
        &self.clif
    }

    /// The plan of a gather's kernel (`None` for a quantized one).
    #[cfg(feature = "unstable")]
    pub fn plan(&self) -> Option<&Plan> {
        self.plan.as_ref()
    }

    /// The entry point's buffer parameters, in order (the last, `bad_position`, is not one).
    pub fn buffers(&self) -> &[Buffer] {
        &self.buffers
    }

    /// The machine code of the kernel behind the entry point, as emitted: relocated fields
    /// (calls of `memcpy` and `memset`) hold zeros or addends until linked.
    pub fn machine_code(&self) -> &[u8] {
        &self.machine_code
    }
}

/// Collects kernels for one target, then writes them as one relocatable object.
pub struct ObjectBuilder {
    module: ObjectModule,
    triple: String,
    kernels: Vec<AotKernel>,
    symbols: HashSet<String>,
}

impl std::fmt::Debug for ObjectBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectBuilder")
            .field("triple", &self.triple)
            .field("kernels", &self.kernels)
            .finish_non_exhaustive()
    }
}

impl ObjectBuilder {
    /// An empty object for `target`.
    ///
    /// # Errors
    /// [`Error::UnsupportedTarget`] if `cranelift-object` cannot write for the target.
    pub fn new(target: &Target) -> Result<ObjectBuilder> {
        let triple = target.triple();
        let builder =
            ClifObjectBuilder::new(target.isa.clone(), "gather_jit", default_libcall_names())
                .map_err(|e| Error::UnsupportedTarget {
                    triple: triple.clone(),
                    reason: e.to_string(),
                })?;
        Ok(ObjectBuilder {
            module: ObjectModule::new(builder),
            triple,
            kernels: Vec::new(),
            symbols: HashSet::new(),
        })
    }

    /// Compiles the gather of `signature` and exports it as `symbol`.
    ///
    /// # Errors
    /// Any error of [`Signature::validate`]; [`Error::InvalidSymbol`] if `symbol` is not a C
    /// identifier or is taken; [`Error::UnsupportedTarget`] if the target cannot take the
    /// kernel's code.
    pub fn add(&mut self, symbol: &str, signature: &Signature) -> Result<&AotKernel> {
        self.check_symbol(symbol)?;
        let validated = signature.validate()?;
        let plan = Plan::for_host(&validated, Tuning::NO_BANDS, OBJECT_HOST)?;
        let inner = format!("{symbol}__gather_jit_kernel");
        let defined = codegen::define_in_object(&mut self.module, &inner, &plan)
            .map_err(|e| self.unsupported(e))?;
        let extent = plan.loops[0].extent;
        self.define_entry(symbol, defined.id, 2, extent, Some(&plan))?;
        let buffers = vec![
            buffer("data", plan.data_bytes),
            buffer("indices", plan.indices_bytes),
            buffer("output", plan.output_bytes),
        ];
        let explain = format!("{signature}\n\n{plan}");
        Ok(self.push(symbol, explain, buffers, defined, Some(plan)))
    }

    /// Compiles the quantized gather of `signature` and exports it as `symbol`.
    ///
    /// # Errors
    /// As [`ObjectBuilder::add`], with [`QuantizedSignature::validate`]'s errors.
    pub fn add_quantized(
        &mut self,
        symbol: &str,
        signature: &QuantizedSignature,
    ) -> Result<&AotKernel> {
        self.check_symbol(symbol)?;
        let layout = signature.validate()?;
        let inner = format!("{symbol}__gather_jit_kernel");
        let defined = QuantizedKernel::define_in_object(&mut self.module, &inner, &layout)
            .map_err(|e| self.unsupported(e))?;
        self.define_entry(symbol, defined.id, 4, layout.index_count() as u64, None)?;
        let bytes = |n: usize| n as u64;
        let buffers = vec![
            buffer("data", bytes(layout.data_bytes())),
            buffer("indices", bytes(layout.indices_bytes())),
            buffer("scales", bytes(layout.scales_bytes())),
            buffer("zero_points", bytes(layout.zero_points_bytes())),
            buffer("output", bytes(layout.output_bytes())),
        ];
        let explain = format!("{signature}\n\n{}", crate::quant::lower::loop_text(&layout));
        Ok(self.push(symbol, explain, buffers, defined, None))
    }

    /// Writes the object.
    ///
    /// # Errors
    /// [`Error::Codegen`] if the object writer fails (a bug).
    pub fn finish(self) -> Result<Object> {
        let bytes = self
            .module
            .finish()
            .emit()
            .map_err(|e| driver::codegen_error(&e))?;
        Ok(Object {
            bytes,
            triple: self.triple,
            kernels: self.kernels,
        })
    }

    /// A Cranelift failure to compile for this target is the target's limit (e.g. vector
    /// moves on an architecture without vector registers), not a bug of the lowering.
    fn unsupported(&self, error: Error) -> Error {
        match error {
            Error::Codegen(reason) => Error::UnsupportedTarget {
                triple: self.triple.clone(),
                reason,
            },
            other => other,
        }
    }

    fn check_symbol(&self, symbol: &str) -> Result<()> {
        let invalid = |reason| {
            Err(Error::InvalidSymbol {
                symbol: symbol.to_string(),
                reason,
            })
        };
        let mut chars = symbol.chars();
        let Some(first) = chars.next() else {
            return invalid("empty");
        };
        if !(first.is_ascii_alphabetic() || first == '_')
            || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return invalid(
                "not a C identifier (letters, digits and _, not starting with a digit)",
            );
        }
        if symbol.len() > 200 {
            return invalid("longer than 200 characters");
        }
        if symbol.contains("__gather_jit_") {
            return invalid("contains __gather_jit_, which the object's own symbols use");
        }
        // Exporting one of the functions the kernels call would bind their calls to the entry
        // point itself; a C keyword would make the header unparsable.
        if ["memcpy", "memmove", "memset"].contains(&symbol) {
            return invalid("names a C library function the object's kernels call");
        }
        if C_KEYWORDS.contains(&symbol) {
            return invalid("a C or C++ keyword");
        }
        if self.symbols.contains(symbol) {
            return invalid("already exported by this object");
        }
        // The header `#define`s `SYMBOL_DATA_BYTES` and the like for every kernel: a symbol
        // spelled as another's size macro would be replaced by a number in its declaration.
        let size_macro = |of: &str, name: &str| {
            BUFFER_NAMES.iter().any(|buffer| {
                name.strip_prefix(of)
                    .and_then(|rest| rest.strip_prefix('_'))
                    .and_then(|rest| rest.strip_suffix("_BYTES"))
                    .is_some_and(|middle| middle.eq_ignore_ascii_case(buffer))
            })
        };
        if (self.symbols.iter()).any(|other| size_macro(other, symbol) || size_macro(symbol, other))
        {
            return invalid("spelled as another kernel's size macro in the header");
        }
        Ok(())
    }

    fn push(
        &mut self,
        symbol: &str,
        explain: String,
        buffers: Vec<Buffer>,
        defined: driver::Defined,
        plan: Option<Plan>,
    ) -> &AotKernel {
        self.symbols.insert(symbol.to_string());
        let relocations = (defined.relocations.into_iter())
            .map(|r| Relocation {
                offset: r.offset as usize,
                kind: format!("{:?}", r.kind),
                symbol: r.symbol,
                addend: r.addend,
            })
            .collect();
        self.kernels.push(AotKernel {
            symbol: symbol.to_string(),
            explain,
            buffers,
            machine_code: defined.code,
            relocations,
            clif: defined.clif.unwrap_or_default(),
            plan,
        });
        &self.kernels[self.kernels.len() - 1]
    }

    /// Exports `symbol`: `(buffers..., output, bad_position) -> int32_t`, which calls the
    /// kernel `inner` on iterations `0..extent` of its outer loop. `inputs` counts the buffers
    /// before the output. For a gather's `plan` whose tuples have several coordinates, a
    /// rejected tuple's position becomes that of its first rejected coordinate, the position
    /// the JIT's error names (`Kernel::rejected` finds it in Rust).
    fn define_entry(
        &mut self,
        symbol: &str,
        inner: FuncId,
        inputs: usize,
        extent: u64,
        plan: Option<&Plan>,
    ) -> Result<()> {
        let isa = self.module.isa();
        let pointer = isa.pointer_type();
        let config = isa.frontend_config();
        let mut signature = ClifSignature::new(isa.default_call_conv());
        for _ in 0..inputs + 2 {
            signature.params.push(AbiParam::new(pointer)); // buffers, output, bad_position
        }
        signature.returns.push(AbiParam::new(I32));
        let id = self
            .module
            .declare_function(symbol, Linkage::Export, &signature)
            .map_err(|e| driver::codegen_error(&e))?;
        let mut ctx = Context::new();
        ctx.func.name = UserFuncName::user(0, id.as_u32());
        ctx.func.signature = signature;
        let callee = self.module.declare_func_in_func(inner, &mut ctx.func);
        let mut builder_context = FunctionBuilderContext::new();
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut builder_context);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        b.seal_block(entry);
        let params = b.block_params(entry).to_vec();
        let (bad_position, buffers) = params.split_last().expect("inputs + 2 parameters");
        let start = b.ins().iconst(I64, 0);
        let end = b.ins().iconst(I64, extent as i64);
        let mut args = buffers.to_vec();
        args.extend([start, end, *bad_position]);
        let call = b.ins().call(callee, &args);
        let status = b.inst_results(call)[0];
        let coordinates = plan.map_or(&[][..], |plan| &plan.lookup.coordinates[..]);
        if let (Some(plan), true) = (plan, coordinates.len() > 1) {
            let refine = b.create_block();
            let done = b.create_block();
            b.ins().brif(status, refine, &[], done, &[]);
            b.seal_block(refine);
            b.switch_to_block(refine);
            emit_first_rejected(&mut b, plan, buffers[1], *bad_position, done);
            b.seal_block(done);
            b.switch_to_block(done);
        }
        b.ins().return_(&[status]);
        b.finalize(config);
        let defined = self.module.define_function(id, &mut ctx);
        defined.map_err(|e| {
            self.unsupported(match e {
                cranelift_module::ModuleError::Compilation(err) => Error::Codegen(
                    cranelift_codegen::print_errors::pretty_error(&ctx.func, err),
                ),
                other => driver::codegen_error(&other),
            })
        })
    }
}

/// Emits, into the current block, the search for the first coordinate `plan`'s policy
/// rejects in the tuple whose position the kernel stored to `bad_position`: it stores that
/// coordinate's position instead and jumps to `done` (left as it is if none is rejected,
/// which only a kernel bug would cause).
fn emit_first_rejected(
    b: &mut FunctionBuilder,
    plan: &Plan,
    indices: cranelift_codegen::ir::Value,
    bad_position: cranelift_codegen::ir::Value,
    done: cranelift_codegen::ir::Block,
) {
    use codegen::policy;
    let flags = cranelift_codegen::ir::MemFlagsData::new().with_notrap();
    let size = plan.index_type.size() as u64;
    let tuple = b.ins().load(I64, flags, bad_position, 0);
    let offset = b.ins().imul_imm_u(tuple, size as i64);
    let at = b.ins().iadd(indices, offset);
    for coordinate in &plan.lookup.coordinates {
        let dim = coordinate.dim_size as i64;
        // As `IndexPolicy::resolve` rejects: an index out of range under `Error`, any index
        // into an empty dim under `Clamp` (nothing to clamp to), none under `Zero`.
        let rejected = match plan.policy.out_of_range {
            OutOfRange::Error => {
                let index = policy::load_index(
                    b,
                    plan.index_type,
                    flags,
                    at,
                    coordinate.index_offset as i32,
                );
                let index = policy::wrap_negative(b, plan.index_type, plan.policy, index, dim);
                policy::out_of_range(b, index, dim)
            }
            OutOfRange::Clamp if dim == 0 => b.ins().iconst(cranelift_codegen::ir::types::I8, 1),
            OutOfRange::Clamp | OutOfRange::Zero => continue,
        };
        let found = b.create_block();
        let next = b.create_block();
        b.ins().brif(rejected, found, &[], next, &[]);
        b.seal_block(found);
        b.switch_to_block(found);
        let position = b
            .ins()
            .iadd_imm_u(tuple, (coordinate.index_offset / size) as i64);
        b.ins().store(flags, position, bad_position, 0);
        b.ins().jump(done, &[]);
        b.seal_block(next);
        b.switch_to_block(next);
    }
    b.ins().jump(done, &[]);
}

/// Keywords of C and C++ that a declaration cannot take as a function name.
const C_KEYWORDS: &[&str] = &[
    "alignas",
    "alignof",
    "and",
    "asm",
    "auto",
    "bool",
    "break",
    "case",
    "catch",
    "char",
    "class",
    "const",
    "constexpr",
    "continue",
    "default",
    "delete",
    "do",
    "double",
    "else",
    "enum",
    "explicit",
    "extern",
    "false",
    "float",
    "for",
    "friend",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "mutable",
    "namespace",
    "new",
    "not",
    "nullptr",
    "operator",
    "or",
    "private",
    "protected",
    "public",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "template",
    "this",
    "throw",
    "true",
    "try",
    "typedef",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "while",
    "_Bool",
    "_Complex",
    "_Alignas",
    "_Alignof",
    "_Atomic",
    "_Generic",
    "_Noreturn",
    "_Static_assert",
    "_Thread_local",
    "int32_t",
    "uint64_t",
];

fn buffer(name: &'static str, bytes: u64) -> Buffer {
    Buffer { name, bytes }
}

/// A relocatable object of ahead-of-time kernels, and what its header declares.
#[derive(Clone, Debug)]
pub struct Object {
    bytes: Vec<u8>,
    triple: String,
    kernels: Vec<AotKernel>,
}

impl Object {
    /// The object file's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The target triple it was compiled for.
    pub fn triple(&self) -> &str {
        &self.triple
    }

    /// The exported kernels, in the order they were added.
    pub fn kernels(&self) -> &[AotKernel] {
        &self.kernels
    }

    /// A C header declaring every kernel and its buffers' sizes, guarded by `guard` (in which
    /// every character but ASCII letters, digits and `_` becomes `_`, and which gets a leading
    /// `_` if it starts with a digit or is empty, so that it is a C identifier).
    pub fn header(&self, guard: &str) -> String {
        let mut guard: String = (guard.chars())
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        if guard.chars().next().is_none_or(|c| c.is_ascii_digit()) {
            guard.insert(0, '_');
        }
        let mut h = String::new();
        let _ = writeln!(
            h,
            "/* Kernels compiled ahead of time by gather-jit for {}.\n \
             * Buffers are C-contiguous and native-endian. A kernel returns 0, or 1 when an\n \
             * index is rejected, after storing the element position of the first rejected\n \
             * index in the indices buffer to *bad_position. */\n\
             #ifndef {guard}\n#define {guard}\n\n#include <stdint.h>\n\n\
             #ifdef __cplusplus\nextern \"C\" {{\n#endif\n",
            self.triple
        );
        for kernel in &self.kernels {
            let _ = writeln!(h, "/* {} */", kernel.description());
            for buffer in &kernel.buffers {
                let _ = writeln!(
                    h,
                    "#define {}_{}_BYTES {}",
                    kernel.symbol,
                    buffer.name.to_ascii_uppercase(),
                    buffer.bytes
                );
            }
            let params: Vec<String> = (kernel.buffers.iter())
                .map(|buffer| match buffer.name {
                    "output" => "void *output".to_string(),
                    name => format!("const void *{name}"),
                })
                .collect();
            let _ = writeln!(
                h,
                "int32_t {}({}, uint64_t *bad_position);\n",
                kernel.symbol,
                params.join(", ")
            );
        }
        let _ = writeln!(h, "#ifdef __cplusplus\n}}\n#endif\n\n#endif /* {guard} */");
        h
    }
}
