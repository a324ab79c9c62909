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

mod entry;
mod header;
mod symbols;
mod target;

use cranelift_module::default_libcall_names;
use cranelift_object::{ObjectBuilder as ClifObjectBuilder, ObjectModule};

use crate::codegen::{self, driver};
use crate::error::{Error, Result};
use crate::ir::Signature;
use crate::kernel::QuantizedKernel;
use crate::quant::QuantizedSignature;
use crate::specialize::{Host, Plan, Tuning};
pub use header::Object;
pub use target::Target;

/// What an object's plans assume of the machine: no output streams (Cranelift emits no
/// non-temporal stores, and a cross build knows nothing of the target's caches).
const OBJECT_HOST: Host = Host {
    streaming_output_bytes: u64::MAX,
};

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
    // Read only through `plan()`, which the `unstable` feature exposes.
    #[cfg_attr(not(feature = "unstable"), allow(dead_code))]
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
        })
    }

    /// Compiles the gather of `signature` and exports it as `symbol`.
    ///
    /// # Errors
    /// Any error of [`Signature::validate`]; [`Error::InvalidSymbol`] if `symbol` is not a C
    /// identifier or is taken; [`Error::UnsupportedTarget`] if the target cannot take the
    /// kernel's code.
    pub fn add(&mut self, symbol: &str, signature: &Signature) -> Result<&AotKernel> {
        symbols::check_symbol(symbol, self.kernels.iter().map(AotKernel::symbol))?;
        let validated = signature.validate()?;
        let plan = Plan::for_host(&validated, Tuning::NO_BANDS, OBJECT_HOST)?;
        let inner = format!("{symbol}__gather_jit_kernel");
        let (id, code) = codegen::define_in_object(&mut self.module, &inner, &plan)
            .map_err(|e| self.unsupported(e))?;
        let extent = plan.loops[0].extent;
        entry::define_entry(&mut self.module, symbol, id, 2, extent, Some(&plan))
            .map_err(|e| self.unsupported(e))?;
        let buffers = vec![
            buffer("data", plan.data_bytes),
            buffer("indices", plan.indices_bytes),
            buffer("output", plan.output_bytes),
        ];
        let explain = format!("{signature}\n\n{plan}");
        Ok(self.push(symbol, explain, buffers, code, Some(plan)))
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
        symbols::check_symbol(symbol, self.kernels.iter().map(AotKernel::symbol))?;
        let layout = signature.validate()?;
        let inner = format!("{symbol}__gather_jit_kernel");
        let (id, code) = QuantizedKernel::define_in_object(&mut self.module, &inner, &layout)
            .map_err(|e| self.unsupported(e))?;
        let extent = layout.index_count() as u64;
        entry::define_entry(&mut self.module, symbol, id, 4, extent, None)
            .map_err(|e| self.unsupported(e))?;
        let bytes = |n: usize| n as u64;
        let buffers = vec![
            buffer("data", bytes(layout.data_bytes())),
            buffer("indices", bytes(layout.indices_bytes())),
            buffer("scales", bytes(layout.scales_bytes())),
            buffer("zero_points", bytes(layout.zero_points_bytes())),
            buffer("output", bytes(layout.output_bytes())),
        ];
        let explain = format!("{signature}\n\n{}", crate::quant::lower::loop_text(&layout));
        Ok(self.push(symbol, explain, buffers, code, None))
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

    fn push(
        &mut self,
        symbol: &str,
        explain: String,
        buffers: Vec<Buffer>,
        code: driver::ObjectCode,
        plan: Option<Plan>,
    ) -> &AotKernel {
        let relocations = (code.relocations.into_iter())
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
            machine_code: code.code,
            relocations,
            clif: code.clif,
            plan,
        });
        &self.kernels[self.kernels.len() - 1]
    }
}

fn buffer(name: &'static str, bytes: u64) -> Buffer {
    Buffer { name, bytes }
}
