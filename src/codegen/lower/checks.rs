//! The index checks of a lookup: loading a tuple, the fast unsigned compare, and the
//! policy's slow path (wrap, clamp, zero-fill or reject) before any data address is formed.

use cranelift_codegen::ir::types::I64;
use cranelift_codegen::ir::{Block, BlockArg, InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;

use super::*;
use crate::codegen::policy;
use crate::ir::OutOfRange;
use crate::specialize::Coordinate;

impl Lowering<'_> {
    /// The fast checks of `tuples` (each a data pointer with a constant byte offset, and its
    /// tuple's raw indices), all at once (else to `otherwise`), then the source of each slice,
    /// as a pointer and the same constant offset.
    pub(super) fn checked_sources(
        &self,
        b: &mut FunctionBuilder,
        tuples: &[((Value, i32), Vec<Value>)],
        otherwise: Block,
    ) -> Vec<(Value, i32)> {
        let all: Vec<Value> = tuples.iter().flat_map(|(_, raw)| raw.clone()).collect();
        self.emit_fast_checks(b, &all, otherwise);
        (tuples.iter())
            .map(|&((data, past), ref raw)| {
                let offset = self.offset(b, raw);
                (b.ins().iadd(data, offset), past)
            })
            .collect()
    }

    /// Loads every coordinate of the tuple at `indices`, widened to 64 bits.
    pub(super) fn load_tuple(&self, b: &mut FunctionBuilder, indices: Value) -> Vec<Value> {
        self.load_tuple_at(b, (indices, 0))
    }

    /// [`Lowering::load_tuple`] of the tuple `at.1` bytes past `at.0`.
    pub(super) fn load_tuple_at(&self, b: &mut FunctionBuilder, at: (Value, i32)) -> Vec<Value> {
        self.plan
            .lookup
            .coordinates
            .iter()
            .map(|c| self.load_index(b, at, c))
            .collect()
    }

    /// One compare-and-branch per coordinate (x64 fuses each pair): every index `<u dim` goes
    /// on in a new block, any other to `otherwise` (which takes no arguments: the blocks it
    /// is reached from dominate it). Negative values read as huge unsigned
    /// ones, so one unsigned compare checks both ends. Indices into dims of one power-of-two
    /// size are all below it exactly when their bitwise or is, so they share one compare.
    pub(super) fn emit_fast_checks(
        &self,
        b: &mut FunctionBuilder,
        raw: &[Value],
        otherwise: Block,
    ) {
        let mut checks: Vec<(u64, Value)> = Vec::with_capacity(raw.len());
        // `raw` holds one or more whole tuples.
        let coordinates = self.plan.lookup.coordinates.iter().cycle();
        for (c, &index) in coordinates.zip(raw) {
            let shared = c
                .dim_size
                .is_power_of_two()
                .then(|| checks.iter_mut().find(|(dim, _)| *dim == c.dim_size));
            match shared.flatten() {
                Some((_, combined)) => *combined = b.ins().bor(*combined, index),
                None => checks.push((c.dim_size, index)),
            }
        }
        for (dim, index) in checks {
            let ok = policy::in_range(b, index, dim as i64);
            let next = b.create_block();
            b.ins().brif(ok, next, &[], otherwise, &[]);
            b.switch_to_block(next);
            // Its only predecessor is the check above.
            b.seal_block(next);
        }
    }

    pub(super) fn advance_const(&self, b: &mut FunctionBuilder, base: Value, stride: u64) -> Value {
        if stride == 0 {
            base
        } else {
            b.ins().iadd_imm_s(base, stride as i64)
        }
    }

    /// `index * stride`, as a shift when the stride is a power of two.
    pub(super) fn scale(&self, b: &mut FunctionBuilder, index: Value, stride: u64) -> Value {
        if stride.is_power_of_two() {
            b.ins().ishl_imm_u(index, stride.trailing_zeros() as i64)
        } else {
            b.ins().imul_imm_u(index, stride as i64)
        }
    }

    /// The innermost body: read the tuple at `indices`, check it, and copy the slice it
    /// selects from `data` to `output`.
    ///
    /// The common case costs one unsigned compare per coordinate: if every raw index is in
    /// `0..dim`, the offset is computed directly. Otherwise a slow path applies the policy
    /// (wrap negatives, then clamp, zero-fill or reject).
    ///
    /// `next` is where the following lookup's slice probably starts, for
    /// [`super::prefetch_copy`].
    pub(super) fn emit_lookup(
        &self,
        b: &mut FunctionBuilder,
        pointers: [Value; 3],
        next: Option<Value>,
    ) {
        self.emit_checked_lookup(b, pointers, next, Check::FastThenPolicy);
    }

    /// [`Lowering::emit_lookup`], with the fast check or without it (see [`Check`]).
    pub(super) fn emit_checked_lookup(
        &self,
        b: &mut FunctionBuilder,
        pointers: [Value; 3],
        next: Option<Value>,
        check: Check,
    ) {
        let [data, indices, output] = pointers;
        let raw = self.load_tuple(b, indices);
        let copy = b.create_block();
        b.append_block_param(copy, I64);
        if let Check::FastThenPolicy = check {
            // (Branching from the last check straight to `copy` with the offset would make a
            // critical edge, which Cranelift splits: on this hot path that measured more
            // compile work than the block it saves. The cold policy code below does branch
            // straight to `copy`, where it saves a block of its own.)
            let slow = b.create_block();
            self.emit_fast_checks(b, &raw, slow);
            let offset = self.offset(b, &raw);
            b.ins().jump(copy, &[BlockArg::from(offset)]);
            b.switch_to_block(slow);
            b.seal_block(slow);
        }
        let done = self.emit_slow_path(b, indices, &raw, output, copy);

        b.switch_to_block(copy);
        b.seal_block(copy);
        let offset = b.block_params(copy)[0];
        let source = b.ins().iadd(data, offset);
        self.emit_copy(b, (source, 0), (output, 0), next);
        if let Some(done) = done {
            b.ins().jump(done, &[]);
            b.switch_to_block(done);
            b.seal_block(done);
        }
    }

    /// The data byte offset of a tuple of in-range indices.
    pub(super) fn offset(&self, b: &mut FunctionBuilder, indices: &[Value]) -> Value {
        let mut offset: Option<Value> = None;
        for (c, &index) in self.plan.lookup.coordinates.iter().zip(indices) {
            let term = self.scale(b, index, c.data_stride);
            offset = Some(match offset {
                Some(previous) => b.ins().iadd(previous, term),
                None => term,
            });
        }
        offset.unwrap_or_else(|| b.ins().iconst(I64, 0))
    }

    /// Applies the policy to a tuple (one that failed the fast check, or any in the cold loop):
    /// jumps to `copy` with the offset, to `reject` with the tuple if the policy rejects any of
    /// its indices, or zero-fills and jumps to the block it returns, where the caller's code
    /// goes on after the copy (only a zero-filling policy has one).
    pub(super) fn emit_slow_path(
        &self,
        b: &mut FunctionBuilder,
        tuple: Value,
        raw: &[Value],
        output: Value,
        copy: Block,
    ) -> Option<Block> {
        let policy = self.plan.policy;
        let mut fixed = Vec::with_capacity(raw.len());
        let mut all_in_range: Option<Value> = None;
        let mut any_bad: Option<Value> = None;
        for (c, &index) in self.plan.lookup.coordinates.iter().zip(raw) {
            let dim = c.dim_size as i64;
            let index_type = self.plan.index_type;
            let index = policy::wrap_negative(b, index_type, policy, index, dim);
            let index = match policy.out_of_range {
                OutOfRange::Clamp if dim > 0 => policy::clamp(b, index_type, index, dim),
                OutOfRange::Error | OutOfRange::Clamp => {
                    let bad = policy::out_of_range(b, index, dim);
                    any_bad = Some(match any_bad {
                        Some(previous) => b.ins().bor(previous, bad),
                        None => bad,
                    });
                    index
                }
                OutOfRange::Zero => {
                    let ok = policy::in_range(b, index, dim);
                    all_in_range = Some(match all_in_range {
                        Some(previous) => b.ins().band(previous, ok),
                        None => ok,
                    });
                    index
                }
            };
            fixed.push(index);
        }
        // Computed before the branches (wrapping arithmetic, used only if the tuple passes),
        // so that they go straight to `copy`.
        let offset = [BlockArg::from(self.offset(b, &fixed))];
        // One policy per plan: it rejects (`any_bad`) or zero-fills (`all_in_range`), not both.
        match (any_bad, all_in_range) {
            // The tuple's position; the caller finds its first bad coordinate.
            (Some(bad), _) => {
                b.ins()
                    .brif(bad, self.reject, &[BlockArg::from(tuple)], copy, &offset);
                None
            }
            (None, Some(ok)) => {
                let zero = b.create_block();
                let done = b.create_block();
                b.ins().brif(ok, copy, &offset, zero, &[]);
                b.switch_to_block(zero);
                b.seal_block(zero);
                self.emit_zero(b, output, self.plan.lookup.slice_bytes);
                b.ins().jump(done, &[]);
                Some(done)
            }
            (None, None) => {
                b.ins().jump(copy, &offset);
                None
            }
        }
    }

    /// Loads one coordinate in its own type and widens it to 64 bits (sign- or zero-extended).
    pub(super) fn load_index(
        &self,
        b: &mut FunctionBuilder,
        at: (Value, i32),
        c: &Coordinate,
    ) -> Value {
        let (tuple, past) = at;
        let offset = past + c.index_offset as i32;
        policy::load_index(b, self.plan.index_type, flags(), tuple, offset)
    }
}
