//! A scatter as Cranelift IR: the loop nest over the writes and the two passes of a call.
//!
//! The kernel has the C signature of [`kernel_signature`]:
//! `(indices, updates, output, counts, lo, hi, mode, bad_index) -> status`. `output` already
//! holds data (the caller copied it, or it is data itself: in place). Mode bit 0 checks every
//! index, in row-major order of `indices`, before anything is written: [`STATUS_BAD_INDEX`]
//! stores the first bad index's element position to `*bad_index`, [`STATUS_NEGATIVE`] says a
//! ScatterElements or ScatterUpdate index is negative. Mode bit 1 then applies the updates in
//! index order, writing only the data elements in `lo..hi` (element offsets, on slice
//! boundaries), so that parts of a parallel call, each given its own range, write disjoint
//! elements, each in the sequential order. Under `mean`, `counts` (one `u64` per data
//! element, zeroed) counts each element's updates and the caller divides; other reductions
//! never read it.
//!
//! This file builds the function around the passes: `check.rs` is pass 1, `writes.rs` pass 2's
//! walk over the writes and one write, `combine.rs` the arithmetic of one update (element by
//! element or 16 bytes at a time), `text.rs` what `explain` prints of it all.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{I32, I64};
use cranelift_codegen::ir::{
    AbiParam, Function, InstBuilder, MemFlagsData, Signature, Type, Value,
};
use cranelift_codegen::isa::{CallConv, TargetFrontendConfig};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};

use super::{Reduction, ResolvedScatter, ScatterLayout};
use crate::codegen::policy;
use crate::types::{IndexPolicy, OutOfRange};

mod check;
mod combine;
mod text;
mod writes;

pub(crate) use combine::Arithmetic;
pub(crate) use text::write_text;

/// Mode bit: check every index first.
pub(crate) const MODE_CHECK: u64 = 1;
/// Mode bit: apply the updates.
pub(crate) const MODE_WRITE: u64 = 2;
/// Mode bit: pass 1 returned [`STATUS_OK`], not [`STATUS_NEGATIVE`]: a write over all of data
/// may skip wrapping the indices. Passing it after any other status is undefined behaviour.
pub(crate) const MODE_NO_NEGATIVE: u64 = 4;

/// Status: every index is in range (and, for ScatterElements and ScatterUpdate, none is a
/// negative one that wraps).
pub(crate) const STATUS_OK: u32 = 0;
/// Status: an index is out of range; `*bad_index` holds its element position.
pub(crate) const STATUS_BAD_INDEX: u32 = 1;
/// Status: every index is in range, and a ScatterElements' or ScatterUpdate's includes a
/// negative one that wraps.
pub(crate) const STATUS_NEGATIVE: u32 = 2;

/// Slices of up to this many bytes are copied (reduction none) with inline moves, larger ones
/// with `memcpy`, as the gathers copy theirs (`crate::codegen::lower::UNROLL_LIMIT_BYTES`).
const INLINE_COPY_BYTES: u64 = 512;

/// `(indices, updates, output, counts, lo, hi, mode, bad_index) -> status`.
pub(crate) fn kernel_signature(call_conv: CallConv, pointer: Type) -> Signature {
    let mut sig = Signature::new(call_conv);
    for _ in 0..4 {
        sig.params.push(AbiParam::new(pointer)); // indices, updates, output, counts
    }
    sig.params.push(AbiParam::new(I64)); // lo
    sig.params.push(AbiParam::new(I64)); // hi
    sig.params.push(AbiParam::new(I64)); // mode
    sig.params.push(AbiParam::new(pointer)); // bad_index out-parameter
    sig.returns.push(AbiParam::new(I32));
    sig
}

/// Every access is within a buffer the caller checked, at an offset the validated layout
/// bounds; none needs alignment.
fn flags() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

/// Builds the kernel for `layout` into `func`.
pub(crate) fn lower(
    layout: &ScatterLayout,
    func: &mut Function,
    context: &mut FunctionBuilderContext,
    config: TargetFrontendConfig,
) {
    let mut b = FunctionBuilder::new(func, context);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    b.seal_block(entry);
    let params = b.block_params(entry).to_vec();
    let reject = b.create_block();
    b.append_block_param(reject, I64);
    let width = b.ins().isub(params[5], params[4]);
    let lowering = Lowering {
        layout,
        config,
        pointer: config.pointer_type(),
        indices: params[0],
        updates: params[1],
        output: params[2],
        counts: params[3],
        lo: params[4],
        width,
        arithmetic: Arithmetic::of(layout),
    };
    let mode = params[6];

    let check = b.create_block();
    let write = b.create_block();
    let done = b.create_block();
    // ScatterElements and ScatterUpdate whose indices may wrap: pass 1 returns
    // `STATUS_NEGATIVE` if it saw a negative index, and the caller passes
    // `MODE_NO_NEGATIVE` to pass 2 if it did not.
    let wrapping_one_dim = lowering.wraps() && !matches!(layout.op(), ResolvedScatter::Nd { .. });
    let status = b.declare_var(I32);
    let ok = b.ins().iconst(I32, i64::from(STATUS_OK));
    b.def_var(status, ok);
    let checks = b.ins().band_imm_s(mode, MODE_CHECK as i64);
    b.ins().brif(checks, check, &[], write, &[]);
    b.switch_to_block(check);
    b.seal_block(check);
    let any_negative = lowering.check_indices(&mut b, reject);
    if let (Some(any_negative), true) = (any_negative, wrapping_one_dim) {
        let flag = b.ins().uextend(I32, any_negative);
        let negative = b.ins().imul_imm_s(flag, i64::from(STATUS_NEGATIVE));
        b.def_var(status, negative);
    }
    b.ins().jump(write, &[]);

    b.switch_to_block(write);
    b.seal_block(write);
    let writes = b.create_block();
    let writes_mode = b.ins().band_imm_s(mode, MODE_WRITE as i64);
    b.ins().brif(writes_mode, writes, &[], done, &[]);
    b.switch_to_block(writes);
    b.seal_block(writes);
    let sig = layout.signature();
    // With no updates nothing is written, and the loops over the writes are left out: an
    // empty dim inside them (ScatterElements' indices `[2^59, 0]`, the empty slices of a
    // ScatterUpdate under `2^59` positions before its axis) would leave outer loops that
    // walk up to `2^62` iterations for nothing.
    if layout.updates_len() > 0 {
        // A call that writes all of data (every sequential one) runs a copy of pass 2 without
        // the range test on each write.
        let everything = b.create_block();
        let part = b.create_block();
        let from_start = b.ins().icmp_imm_s(IntCC::Equal, lowering.lo, 0);
        let to_end = b
            .ins()
            .icmp_imm_s(IntCC::Equal, width, layout.data_len() as i64);
        let mut whole = b.ins().band(from_start, to_end);
        if wrapping_one_dim {
            // That copy of pass 2 does not wrap indices either.
            let bit = b.ins().band_imm_s(mode, MODE_NO_NEGATIVE as i64);
            let no_negative = b.ins().icmp_imm_s(IntCC::NotEqual, bit, 0);
            whole = b.ins().band(whole, no_negative);
        }
        b.ins().brif(whole, everything, &[], part, &[]);
        for (block, guarded) in [(everything, false), (part, true)] {
            b.switch_to_block(block);
            b.seal_block(block);
            if !sig.use_init_val && sig.reduction != Reduction::None {
                lowering.each_write(&mut b, guarded, |l, b, write| l.write_neutral(b, write));
            }
            lowering.each_write(&mut b, guarded, |l, b, write| l.write_slice(b, write));
            b.ins().jump(done, &[]);
        }
    } else {
        b.ins().jump(done, &[]);
    }

    b.switch_to_block(done);
    b.seal_block(done);
    let status = b.use_var(status);
    b.ins().return_(&[status]);

    policy::finish_reject_block(&mut b, reject, params[7], STATUS_BAD_INDEX, |_, p| p);
    b.finalize(config);
}

struct Lowering<'a> {
    layout: &'a ScatterLayout,
    config: TargetFrontendConfig,
    pointer: Type,
    indices: Value,
    updates: Value,
    output: Value,
    counts: Value,
    /// The data elements this call writes: `lo..lo + width`.
    lo: Value,
    width: Value,
    arithmetic: Arithmetic,
}

impl Lowering<'_> {
    fn policy(&self) -> IndexPolicy {
        IndexPolicy {
            negative: self.layout.signature().negative,
            out_of_range: OutOfRange::Error,
        }
    }
}
