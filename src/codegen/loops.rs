//! Counted loops as CLIF, for the lowerings that build their nests from closures (the
//! quantized gathers and the scatters).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::I64;
use cranelift_codegen::ir::{BlockArg, InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;

/// `for iv in 0..extent { body(iv) }`, with `iv` an `i64` constant when `extent` is 1 and no
/// code at all when it is 0.
pub(crate) fn for_range(
    b: &mut FunctionBuilder,
    extent: usize,
    mut body: impl FnMut(&mut FunctionBuilder, Value),
) {
    match extent {
        0 => {}
        1 => {
            let zero = b.ins().iconst(I64, 0);
            body(b, zero);
        }
        _ => {
            let head = b.create_block();
            let exit = b.create_block();
            b.append_block_param(head, I64);
            let zero = b.ins().iconst(I64, 0);
            b.ins().jump(head, &[BlockArg::from(zero)]);
            b.switch_to_block(head);
            let iv = b.block_params(head)[0];
            body(b, iv);
            let next = b.ins().iadd_imm_s(iv, 1);
            let more = b
                .ins()
                .icmp_imm_s(IntCC::UnsignedLessThan, next, extent as i64);
            b.ins().brif(more, head, &[BlockArg::from(next)], exit, &[]);
            b.seal_block(head);
            b.switch_to_block(exit);
            b.seal_block(exit);
        }
    }
}

/// `for i in start..end { body(i) }` for run-time bounds.
pub(crate) fn for_indices(
    b: &mut FunctionBuilder,
    start: Value,
    end: Value,
    mut body: impl FnMut(&mut FunctionBuilder, Value),
) {
    let head = b.create_block();
    let exit = b.create_block();
    b.append_block_param(head, I64);
    let any = b.ins().icmp(IntCC::UnsignedLessThan, start, end);
    b.ins().brif(any, head, &[BlockArg::from(start)], exit, &[]);
    b.switch_to_block(head);
    let i = b.block_params(head)[0];
    body(b, i);
    let next = b.ins().iadd_imm_s(i, 1);
    let more = b.ins().icmp(IntCC::UnsignedLessThan, next, end);
    b.ins().brif(more, head, &[BlockArg::from(next)], exit, &[]);
    b.seal_block(head);
    b.switch_to_block(exit);
    b.seal_block(exit);
}

/// `value * k` for a constant `k`, without an instruction where `k` is 0 or 1 and as a shift
/// where `k` is a power of two, which x86-64 folds into an address (the lowerings run without
/// Cranelift's optimiser, which would do both).
pub(crate) fn mul_const(b: &mut FunctionBuilder, value: Value, k: i64) -> Value {
    match k {
        0 => {
            let ty = b.func.dfg.value_type(value);
            b.ins().iconst(ty, 0)
        }
        1 => value,
        _ if k > 0 && k.count_ones() == 1 => b.ins().ishl_imm_s(value, k.trailing_zeros() as i64),
        _ => b.ins().imul_imm_s(value, k),
    }
}

/// `0..extent` in groups of `width`: `body(start, count)` once per full group, in a loop
/// (`start` = the group's first position), then once for the `extent % width` left over
/// (`start` a constant), so that `body` can unroll its `count` positions.
pub(crate) fn for_groups(
    b: &mut FunctionBuilder,
    extent: usize,
    width: usize,
    mut body: impl FnMut(&mut FunctionBuilder, Value, usize),
) {
    debug_assert!(width > 0, "groups of nothing");
    for_range(b, extent / width, |b, group| {
        let start = mul_const(b, group, width as i64);
        body(b, start, width);
    });
    let rest = extent % width;
    if rest > 0 {
        let start = b.ins().iconst(I64, (extent - rest) as i64);
        body(b, start, rest);
    }
}

/// `value + k` for a constant `k`, without an instruction where `k` is 0.
pub(crate) fn add_const(b: &mut FunctionBuilder, value: Value, k: i64) -> Value {
    match k {
        0 => value,
        _ => b.ins().iadd_imm_s(value, k),
    }
}
