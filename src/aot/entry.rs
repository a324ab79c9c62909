//! The exported C entry point of an object's kernel: it calls the kernel on its whole outer
//! loop and, for a rejected GatherND tuple, finds the tuple's first rejected coordinate.

use cranelift_codegen::Context;
use cranelift_codegen::ir::types::{I32, I64};
use cranelift_codegen::ir::{AbiParam, InstBuilder, Signature as ClifSignature, UserFuncName};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_module::{FuncId, Linkage, Module};
use cranelift_object::ObjectModule;

use crate::codegen::{self, driver};
use crate::error::Result;
use crate::ir::OutOfRange;
use crate::specialize::Plan;

/// Exports `symbol`: `(buffers..., output, bad_position) -> int32_t`, which calls the
/// kernel `inner` on iterations `0..extent` of its outer loop. `inputs` counts the buffers
/// before the output. For a gather's `plan` whose tuples have several coordinates, a
/// rejected tuple's position becomes that of its first rejected coordinate, the position
/// the JIT's error names (`Kernel::rejected` finds it in Rust).
pub(super) fn define_entry(
    module: &mut ObjectModule,
    symbol: &str,
    inner: FuncId,
    inputs: usize,
    extent: u64,
    plan: Option<&Plan>,
) -> Result<()> {
    let isa = module.isa();
    let pointer = isa.pointer_type();
    let config = isa.frontend_config();
    let mut signature = ClifSignature::new(isa.default_call_conv());
    for _ in 0..inputs + 2 {
        signature.params.push(AbiParam::new(pointer)); // buffers, output, bad_position
    }
    signature.returns.push(AbiParam::new(I32));
    let id = module
        .declare_function(symbol, Linkage::Export, &signature)
        .map_err(|e| driver::codegen_error(&e))?;
    let mut ctx = Context::new();
    ctx.func.name = UserFuncName::user(0, id.as_u32());
    ctx.func.signature = signature;
    let callee = module.declare_func_in_func(inner, &mut ctx.func);
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
    let defined = module.define_function(id, &mut ctx);
    defined.map_err(|e| driver::module_error(&ctx.func, e))
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
