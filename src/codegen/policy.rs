//! The index policies as CLIF, for every lowering: loading an index in its own type, counting
//! a negative one from the end, clamping it, and testing it against its dimension. The
//! gathers' slow path and the quantized gathers' index resolution are built from these, so a
//! policy means the same code in every op family.
//!
//! Every index is widened to `i64` first. A negative value then reads as a huge unsigned one,
//! so one unsigned compare against the dimension checks both ends.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{I32, I64};
use cranelift_codegen::ir::{Block, InstBuilder, MemFlagsData, Value};
use cranelift_frontend::FunctionBuilder;

use crate::types::{IndexPolicy, IndexType, NegativeIndices};

/// Loads the index of `index_type` at `at + offset`, sign- or zero-extended to `i64`.
pub(crate) fn load_index(
    b: &mut FunctionBuilder,
    index_type: IndexType,
    flags: MemFlagsData,
    at: Value,
    offset: i32,
) -> Value {
    match index_type {
        IndexType::I8 => b.ins().sload8(I64, flags, at, offset),
        IndexType::U8 => b.ins().uload8(I64, flags, at, offset),
        IndexType::I16 => b.ins().sload16(I64, flags, at, offset),
        IndexType::U16 => b.ins().uload16(I64, flags, at, offset),
        IndexType::I32 => b.ins().sload32(flags, at, offset),
        IndexType::U32 => b.ins().uload32(flags, at, offset),
        IndexType::I64 | IndexType::U64 => b.ins().load(I64, flags, at, offset),
    }
}

/// `index` as the policy reads it in a dimension of `dim`: under [`NegativeIndices::Wrap`], a
/// signed `i` in `[-dim, -1]` becomes `i + dim`; anything below `-dim` stays negative (out of
/// range). Unsigned types and [`NegativeIndices::Invalid`] leave it as it is.
pub(crate) fn wrap_negative(
    b: &mut FunctionBuilder,
    index_type: IndexType,
    policy: IndexPolicy,
    index: Value,
    dim: i64,
) -> Value {
    if index_type.is_signed() && policy.negative == NegativeIndices::Wrap {
        let negative = b.ins().icmp_imm_s(IntCC::SignedLessThan, index, 0);
        let wrapped = b.ins().iadd_imm_s(index, dim);
        b.ins().select(negative, wrapped, index)
    } else {
        index
    }
}

/// `index` clamped into `0..dim` (`dim > 0`): negative values (of a signed type) to 0, values
/// past the end to `dim - 1`.
pub(crate) fn clamp(
    b: &mut FunctionBuilder,
    index_type: IndexType,
    index: Value,
    dim: i64,
) -> Value {
    debug_assert!(dim > 0, "nothing to clamp to");
    let non_negative = if index_type.is_signed() {
        let zero = b.ins().iconst(I64, 0);
        b.ins().smax(index, zero)
    } else {
        index
    };
    let last = b.ins().iconst(I64, dim - 1);
    b.ins().umin(non_negative, last)
}

/// Whether `index` (wrapped) lies outside `0..dim`.
pub(crate) fn out_of_range(b: &mut FunctionBuilder, index: Value, dim: i64) -> Value {
    b.ins()
        .icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, index, dim)
}

/// Whether `index` (wrapped) lies inside `0..dim`.
pub(crate) fn in_range(b: &mut FunctionBuilder, index: Value, dim: i64) -> Value {
    b.ins().icmp_imm_u(IntCC::UnsignedLessThan, index, dim)
}

/// Fills in the `reject` block every lowering branches to with a bad index (one `i64` block
/// parameter): `position(parameter)` is the index's element position, stored to `*bad_index`
/// before the kernel returns `status`. Called once every branch to `reject` exists.
pub(crate) fn finish_reject_block(
    b: &mut FunctionBuilder,
    reject: Block,
    bad_index: Value,
    status: u32,
    position: impl FnOnce(&mut FunctionBuilder, Value) -> Value,
) {
    b.switch_to_block(reject);
    b.seal_block(reject);
    let parameter = b.block_params(reject)[0];
    let position = position(b, parameter);
    // The out-parameter is the caller's `u64`, valid and aligned.
    b.ins()
        .store(MemFlagsData::new().with_notrap(), position, bad_index, 0);
    let status = b.ins().iconst(I32, i64::from(status));
    b.ins().return_(&[status]);
}
