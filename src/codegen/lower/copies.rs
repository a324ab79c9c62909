//! Slice copies and zero fills: inline moves for small slices, calls of the copy helpers
//! (`crate::copy`) for large ones, or of `memcpy` where there are no helpers (objects).

use cranelift_codegen::ir::types::{I8X16, I16, I32, I64};
use cranelift_codegen::ir::{InstBuilder, Type, Value};
use cranelift_frontend::FunctionBuilder;

use super::*;

impl Lowering<'_> {
    /// Copies one slice from `source.1` bytes past `source.0` to `dest.1` bytes past
    /// `dest.0`, with code chosen by its size; where the kernel uses [`super::prefetch_copy`],
    /// `next` (the following lookup's slice) is prefetched, or without one (the lookups of an
    /// inner loop written out straight) this slice again.
    pub(super) fn emit_copy(
        &self,
        b: &mut FunctionBuilder,
        source: (Value, i32),
        dest: (Value, i32),
        next: Option<Value>,
    ) {
        let bytes = self.plan.lookup.slice_bytes;
        let (from, from_past) = source;
        let (base, past) = dest;
        let Some(helper) = self.stream_copy.or(self.prefetch_copy) else {
            if bytes > UNROLL_LIMIT_BYTES {
                // No helper to call (an object for another target refers to no symbol but
                // the C library's): `memcpy`.
                let dest = self.advance_const(b, base, past as u64);
                let source = self.advance_const(b, from, from_past as u64);
                let size = b.ins().iconst(self.pointer, bytes as i64);
                b.call_memcpy(self.config, dest, source, size);
                return;
            }
            // Inline moves (every slice of at most `UNROLL_LIMIT_BYTES`), both offsets folded
            // into the loads and stores.
            for (offset, ty) in chunks(bytes) {
                let value = b.ins().load(ty, flags(), from, from_past + offset);
                b.ins().store(flags(), value, base, past + offset);
            }
            return;
        };
        // A call takes pointers.
        let dest = self.advance_const(b, base, past as u64);
        let source = self.advance_const(b, from, from_past as u64);
        let size = b.ins().iconst(self.pointer, bytes as i64);
        if self.stream_copy.is_some() {
            b.ins().call(helper, &[dest, source, size]);
        } else {
            let next = next.unwrap_or(source);
            b.ins().call(helper, &[dest, source, size, next]);
        }
    }

    /// Writes `bytes` zeros at `dest`.
    pub(super) fn emit_zero(&self, b: &mut FunctionBuilder, dest: Value, bytes: u64) {
        if bytes > UNROLL_LIMIT_BYTES {
            let zero = b.ins().iconst(cranelift_codegen::ir::types::I8, 0);
            let size = b.ins().iconst(self.pointer, bytes as i64);
            b.call_memset(self.config, dest, zero, size);
            return;
        }
        for (offset, ty) in chunks(bytes) {
            let zero = if ty == I8X16 {
                let scalar = b.ins().iconst(cranelift_codegen::ir::types::I8, 0);
                b.ins().splat(I8X16, scalar)
            } else {
                b.ins().iconst(ty, 0)
            };
            b.ins().store(flags(), zero, dest, offset);
        }
    }
}

/// Splits a copy of `bytes` into moves `(offset, type)`: 16-byte vectors, then one overlapping
/// vector for the tail (the ranges overlap, but both write the same source bytes), or for
/// copies under 16 bytes the fewest power-of-two scalars, overlapping likewise.
pub(crate) fn chunks(bytes: u64) -> Vec<(i32, Type)> {
    let scalar = |size: u64| match size {
        1 => cranelift_codegen::ir::types::I8,
        2 => I16,
        4 => I32,
        _ => I64,
    };
    let mut moves = Vec::new();
    if bytes >= 16 {
        let whole = bytes / 16;
        moves.extend((0..whole).map(|k| ((k * 16) as i32, I8X16)));
        if !bytes.is_multiple_of(16) {
            moves.push(((bytes - 16) as i32, I8X16));
        }
        return moves;
    }
    // Largest power of two not above `bytes`; two overlapping moves of that size cover it.
    if bytes == 0 {
        return moves;
    }
    let size = 1u64 << (63 - bytes.leading_zeros());
    moves.push((0, scalar(size)));
    if bytes != size {
        moves.push(((bytes - size) as i32, scalar(size)));
    }
    moves
}
