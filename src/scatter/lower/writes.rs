//! Pass 2 of a scatter's kernel: the walk over the writes in index order, and one write.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::I64;
use cranelift_codegen::ir::{InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;

use super::{INLINE_COPY_BYTES, Lowering, flags};
use crate::codegen::chunks;
use crate::codegen::loops::{add_const, for_groups, for_range, mul_const};
use crate::codegen::policy;
use crate::scatter::{Reduction, ResolvedScatter};

/// One write: the slice at data element `target + target_extra` (`dest`, an address) from
/// the updates at `source`.
pub(super) struct Write {
    target: Value,
    target_extra: i64,
    dest: Value,
    source: Value,
}

/// ScatterElements' writes per trip of the loop over the last dim of indices: chosen with
/// `benches/scatter.rs` (W3).
pub(super) const ELEMENTS_UNROLL: usize = 4;

impl Lowering<'_> {
    /// The index at byte offset `at` of indices, wrapped into its dimension `dim` (pass 1
    /// checked it).
    fn resolved_index(
        &self,
        b: &mut FunctionBuilder,
        at: Value,
        offset: i32,
        dim: usize,
        wrap: bool,
    ) -> Value {
        let index_type = self.layout.signature().index_type;
        let value = policy::load_index(b, index_type, flags(), at, offset);
        if !wrap {
            return value;
        }
        policy::wrap_negative(b, index_type, self.policy(), value, dim as i64)
    }

    /// Calls `body` for every write in index order, skipping the writes outside `lo..hi` when
    /// `guarded`.
    pub(super) fn each_write(
        &self,
        b: &mut FunctionBuilder,
        guarded: bool,
        mut body: impl FnMut(&Self, &mut FunctionBuilder, &Write),
    ) {
        let sig = self.layout.signature();
        let data = &sig.data_shape;
        let size = sig.index_type.size();
        let slice = self.layout.slice_len();
        let mut write = |b: &mut FunctionBuilder, write: Write| {
            if !guarded {
                body(self, b, &write);
                return;
            }
            // `lo <= target < lo + width` in one unsigned compare.
            let target = add_const(b, write.target, write.target_extra);
            let from_lo = b.ins().isub(target, self.lo);
            let inside = b.ins().icmp(IntCC::UnsignedLessThan, from_lo, self.width);
            let then = b.create_block();
            let next = b.create_block();
            b.ins().brif(inside, then, &[], next, &[]);
            b.switch_to_block(then);
            b.seal_block(then);
            body(self, b, &write);
            b.ins().jump(next, &[]);
            b.switch_to_block(next);
            b.seal_block(next);
        };
        match self.layout.op() {
            ResolvedScatter::Nd { index_depth: k } => {
                // Element strides of the first k data dims.
                let strides: Vec<usize> = (0..k)
                    .map(|j| data[j + 1..k].iter().product::<usize>() * slice)
                    .collect();
                for_range(b, self.layout.index_count(), |b, t| {
                    let row = mul_const(b, t, (k * size) as i64);
                    let at = b.ins().iadd(self.indices, row);
                    let mut target = b.ins().iconst(I64, 0);
                    for (j, &stride) in strides.iter().enumerate() {
                        let index = self.resolved_index(b, at, (j * size) as i32, data[j], true);
                        let scaled = mul_const(b, index, stride as i64);
                        target = b.ins().iadd(target, scaled);
                    }
                    let update = mul_const(b, t, slice as i64);
                    let w = self.write_at(b, target, 0, update, 0);
                    write(b, w);
                });
            }
            ResolvedScatter::Update { axis } => {
                let count = self.layout.index_count();
                for_range(b, self.layout.outer_len(), |b, a| {
                    let base = mul_const(b, a, (data[axis] * slice) as i64);
                    let first_update = mul_const(b, a, (count * slice) as i64);
                    for_range(b, count, |b, i| {
                        let offset = mul_const(b, i, size as i64);
                        let at = b.ins().iadd(self.indices, offset);
                        let index = self.resolved_index(b, at, 0, data[axis], guarded);
                        let scaled = mul_const(b, index, slice as i64);
                        let target = b.ins().iadd(base, scaled);
                        let update = mul_const(b, i, slice as i64);
                        let update = b.ins().iadd(first_update, update);
                        let w = self.write_at(b, target, 0, update, 0);
                        write(b, w);
                    });
                });
            }
            ResolvedScatter::Elements { axis } => {
                // One loop per dim of indices (= updates) but the last, whose positions go in
                // unrolled groups; data's element strides for the coordinates, the one along
                // `axis` replaced by the index.
                let shape = &sig.indices_shape;
                let last = shape.len() - 1;
                let data_strides: Vec<usize> =
                    (0..=last).map(|d| data[d + 1..].iter().product()).collect();
                let flat_strides: Vec<usize> = (0..=last)
                    .map(|d| shape[d + 1..].iter().product())
                    .collect();
                // The parts of a parallel call, which test every write's range, go one at a
                // time: less code to compile.
                let unroll = if guarded { 1 } else { ELEMENTS_UNROLL };
                let zero = b.ins().iconst(I64, 0);
                let mut step = |b: &mut FunctionBuilder, d: usize, iv: Value, (target, flat)| {
                    let target = if d == axis {
                        target
                    } else {
                        let step = mul_const(b, iv, data_strides[d] as i64);
                        b.ins().iadd(target, step)
                    };
                    let step = mul_const(b, iv, flat_strides[d] as i64);
                    (target, b.ins().iadd(flat, step))
                };
                // The positions `column..column + count` of the last dim, at the other
                // coordinates' `(target, flat)`.
                let mut group = |b: &mut FunctionBuilder,
                                 (target, flat): State,
                                 column: Value,
                                 count: usize| {
                    let flat = b.ins().iadd(flat, column);
                    let offset = mul_const(b, flat, size as i64);
                    let at = b.ins().iadd(self.indices, offset);
                    let along_last = axis == last;
                    let target = if along_last {
                        target
                    } else {
                        b.ins().iadd(target, column)
                    };
                    // The group's addresses once; each write adds its index (and its
                    // position as a constant). Its `target` only feeds the range test and
                    // `mean`'s counts, and is not emitted where neither reads it.
                    let element = sig.dtype.size() as i64;
                    let dest_base = self.element_address(b, self.output, target);
                    let source_base = self.element_address(b, self.updates, flat);
                    for k in 0..count {
                        let index =
                            self.resolved_index(b, at, (k * size) as i32, data[axis], guarded);
                        let scaled = mul_const(b, index, data_strides[axis] as i64);
                        let extra = if along_last { 0 } else { k as i64 };
                        let dest = self.element_address(b, dest_base, scaled);
                        let w = Write {
                            target: b.ins().iadd(target, scaled),
                            target_extra: extra,
                            dest: add_const(b, dest, extra * element),
                            source: add_const(b, source_base, k as i64 * element),
                        };
                        write(b, w);
                    }
                };
                nest(
                    b,
                    &shape[..last],
                    0,
                    (zero, zero),
                    &mut step,
                    &mut |b, state| {
                        for_groups(b, shape[last], unroll, |b, column, count| {
                            group(b, state, column, count)
                        });
                    },
                );
            }
        }
    }

    /// The write of the slice at element `target + target_extra` of data from element `update
    /// + update_extra` of updates, its addresses computed.
    fn write_at(
        &self,
        b: &mut FunctionBuilder,
        target: Value,
        target_extra: i64,
        update: Value,
        update_extra: i64,
    ) -> Write {
        let size = self.layout.signature().dtype.size() as i64;
        let dest = self.element_address(b, self.output, target);
        let dest = add_const(b, dest, target_extra * size);
        let source = self.element_address(b, self.updates, update);
        let source = add_const(b, source, update_extra * size);
        Write {
            target,
            target_extra,
            dest,
            source,
        }
    }

    /// The address `element` elements past `base`.
    fn element_address(&self, b: &mut FunctionBuilder, base: Value, element: Value) -> Value {
        let size = self.layout.signature().dtype.size();
        let bytes = mul_const(b, element, size as i64);
        let bytes = if self.pointer == I64 {
            bytes
        } else {
            b.ins().ireduce(self.pointer, bytes)
        };
        b.ins().iadd(base, bytes)
    }

    /// Writes one slice of updates into data.
    pub(super) fn write_slice(&self, b: &mut FunctionBuilder, write: &Write) {
        let sig = self.layout.signature();
        let element = sig.dtype.size() as u64;
        let bytes = self.layout.slice_len() as u64 * element;
        let (dest, source) = (write.dest, write.source);
        if sig.reduction == Reduction::None {
            if bytes > INLINE_COPY_BYTES {
                let size = b.ins().iconst(self.pointer, bytes as i64);
                b.call_memcpy(self.config, dest, source, size);
            } else {
                for (offset, ty) in chunks(bytes) {
                    let value = b.ins().load(ty, flags(), source, offset);
                    b.ins().store(flags(), value, dest, offset);
                }
            }
            return;
        }
        self.arithmetic.combine_slice(b, dest, source, bytes);
        if sig.reduction == Reduction::Mean {
            let target = add_const(b, write.target, write.target_extra);
            let counts = self.element_address_u64(b, self.counts, target);
            for_range(b, self.layout.slice_len(), |b, e| {
                let at = mul_const(b, e, 8);
                let at = self.narrow(b, at);
                let at = b.ins().iadd(counts, at);
                let count = b.ins().load(I64, flags(), at, 0);
                let count = b.ins().iadd_imm_s(count, 1);
                b.ins().store(flags(), count, at, 0);
            });
        }
    }

    /// Writes the reduction's neutral value into the slice a write lands on.
    pub(super) fn write_neutral(&self, b: &mut FunctionBuilder, write: &Write) {
        self.arithmetic
            .fill_neutral(b, write.dest, self.layout.slice_len() as u64);
    }

    /// The address of `u64` number `element` of `base`.
    fn element_address_u64(&self, b: &mut FunctionBuilder, base: Value, element: Value) -> Value {
        let bytes = mul_const(b, element, 8);
        let bytes = self.narrow(b, bytes);
        b.ins().iadd(base, bytes)
    }

    /// An `i64` byte offset as a pointer-sized one.
    fn narrow(&self, b: &mut FunctionBuilder, value: Value) -> Value {
        if self.pointer == I64 {
            value
        } else {
            b.ins().ireduce(self.pointer, value)
        }
    }
}

/// Nested loops over `shape[d..]`: `step(d, iv, state)` moves the state into each iteration
/// of dim `d`, `body(state)` runs innermost.
type State = (Value, Value);
fn nest(
    b: &mut FunctionBuilder,
    shape: &[usize],
    d: usize,
    state: State,
    step: &mut dyn FnMut(&mut FunctionBuilder, usize, Value, State) -> State,
    body: &mut dyn FnMut(&mut FunctionBuilder, State),
) {
    if d == shape.len() {
        body(b, state);
        return;
    }
    for_range(b, shape[d], |b, iv| {
        let inner = step(b, d, iv, state);
        nest(b, shape, d + 1, inner, step, body);
    });
}
