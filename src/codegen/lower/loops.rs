//! The loop nest: loop counters and the pointers they advance, unrolled trips of the
//! innermost loop, and lanes of small slices packed into vectors.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{I8X16, I16X8, I32X4, I64, I64X2};
use cranelift_codegen::ir::{Block, BlockArg, FuncRef, InstBuilder, Type, Value};
use cranelift_frontend::FunctionBuilder;

use super::*;
use crate::specialize::Loop;

/// The state a loop carries as block parameters: its counter and the pointers it advances.
/// A pointer the loop does not advance (stride 0: the data pointer of a GatherND's only loop)
/// is the same value on every trip and is used directly; as a parameter it would only be a
/// constant phi, which Cranelift then spends compile time removing.
#[derive(Clone, Copy)]
struct Carried {
    /// Which of `(data, indices, output)` the loop advances.
    varying: [bool; 3],
    /// The pointers on entry (used for those not advanced).
    entry: [Value; 3],
}

impl Carried {
    fn new(spec: Loop, entry: [Value; 3]) -> Carried {
        let strides = spec.strides();
        Carried {
            varying: strides.map(|stride| stride != 0),
            entry,
        }
    }

    /// Adds the counter and the advanced pointers as parameters of `block`.
    fn append_params(&self, b: &mut FunctionBuilder, block: Block) {
        b.append_block_param(block, I64);
        let pointer = b.func.dfg.value_type(self.entry[0]);
        for _ in self.varying.iter().filter(|&&varying| varying) {
            b.append_block_param(block, pointer);
        }
    }

    /// The arguments of a jump to a block with [`Carried::append_params`].
    fn args(&self, i: Value, pointers: [Value; 3]) -> Vec<BlockArg> {
        let advanced = (pointers.into_iter().zip(self.varying))
            .filter(|&(_, varying)| varying)
            .map(|(pointer, _)| pointer);
        std::iter::once(i)
            .chain(advanced)
            .map(BlockArg::from)
            .collect()
    }

    /// The counter and the three pointers in `block`.
    fn read(&self, b: &FunctionBuilder, block: Block) -> (Value, [Value; 3]) {
        let mut params = b.block_params(block).iter().copied();
        let i = params.next().expect("the counter");
        let mut pointers = self.entry;
        for (pointer, &varying) in pointers.iter_mut().zip(&self.varying) {
            if varying {
                *pointer = params.next().expect("an advanced pointer");
            }
        }
        (i, pointers)
    }
}

impl Lowering<'_> {
    /// `base + count * stride`, folding a zero stride away.
    pub(super) fn advance(
        &self,
        b: &mut FunctionBuilder,
        base: Value,
        count: Value,
        stride: u64,
    ) -> Value {
        if stride == 0 {
            return base;
        }
        let bytes = b.ins().imul_imm_u(count, stride as i64);
        b.ins().iadd(base, bytes)
    }

    /// Emits loop `depth` over `i in from..to`, carrying its counter and the pointers it
    /// advances as block parameters ([`Carried`]), and leaves the builder in the loop's exit
    /// block. An innermost loop
    /// of small slices is unrolled (see [`Lowering::emit_unrolled`]); a short inner innermost
    /// loop (constant extent) is emitted straight-line.
    pub(super) fn emit_loop(
        &self,
        b: &mut FunctionBuilder,
        depth: usize,
        from: Value,
        to: Value,
        pointers: [Value; 3],
    ) {
        let innermost = depth + 1 == self.plan.loops.len();
        let spec = self.plan.loops[depth];
        // Never unrolled past the extent: `group * stride` then stays within the buffer the
        // loop walks (at most `isize::MAX` bytes), so the constants cannot overflow.
        let unroll = if innermost {
            let factor = unroll_factor(
                self.plan.lookup.slice_bytes,
                self.plan.lookup.coordinates.len(),
            );
            // The rows of a band are bound by memory, not by the loop: a shorter trip
            // compiles faster at the same speed.
            let factor = match self.prefetch_rows {
                Some(_) => factor.min(BAND_UNROLL),
                None => factor,
            };
            factor.min(spec.extent.max(1))
        } else {
            1
        };
        if innermost && depth > 0 && spec.extent <= unroll.max(4) {
            // A short inner loop of constant extent: straight-line code, no counter.
            for k in 0..spec.extent {
                let pointers = self.step(b, pointers, depth, k);
                self.emit_lookup(b, pointers, None);
            }
            return;
        }
        if unroll > 1 {
            return self.emit_unrolled(b, depth, unroll, from, to, pointers);
        }
        let body = b.create_block();
        let exit = b.create_block();
        let carried = Carried::new(spec, pointers);
        carried.append_params(b, body);
        let args = carried.args(from, pointers);
        match (constant(b, from), constant(b, to)) {
            // An inner loop from 0 to its extent always runs.
            (Some(from), Some(to)) if (from as u64) < (to as u64) => {
                b.ins().jump(body, &args);
            }
            _ => {
                let enter = b.ins().icmp(IntCC::UnsignedLessThan, from, to);
                b.ins().brif(enter, body, &args, exit, &[]);
            }
        }

        b.switch_to_block(body);
        let (i, pointers) = carried.read(b, body);
        if innermost {
            let next = self.next_slice(b, depth, i, to, pointers);
            self.emit_lookup(b, pointers, next);
        } else {
            if let (0, Some(prefetch_rows)) = (depth, self.prefetch_rows) {
                self.emit_row_prefetch(b, prefetch_rows, pointers);
            }
            let zero = b.ins().iconst(I64, 0);
            let extent = b
                .ins()
                .iconst(I64, self.plan.loops[depth + 1].extent as i64);
            self.emit_loop(b, depth + 1, zero, extent, pointers);
        }
        let next = b.ins().iadd_imm_s(i, 1);
        let [data, indices, output] = self.step(b, pointers, depth, 1);
        let again = b.ins().icmp(IntCC::UnsignedLessThan, next, to);
        let args = carried.args(next, [data, indices, output]);
        b.ins().brif(again, body, &args, exit, &[]);
        // Both predecessors of `body` (the entry test and the back edge) now exist.
        b.seal_block(body);
        b.switch_to_block(exit);
        b.seal_block(exit);
    }

    /// Calls `prefetch_rows` on the indices and output that the row [`PREFETCH_ROWS_AHEAD`]
    /// iterations of loop 0 ahead walks (past the end the addresses are only prefetched, which
    /// never faults).
    pub(super) fn emit_row_prefetch(
        &self,
        b: &mut FunctionBuilder,
        prefetch_rows: FuncRef,
        p: [Value; 3],
    ) {
        let [_, indices, output] =
            self.step_used(b, p, 0, PREFETCH_ROWS_AHEAD, [false, true, true]);
        let row = self.plan.loops[1];
        let [indices_bytes, output_bytes] = [row.indices_stride, row.output_stride]
            .map(|stride| b.ins().iconst(self.pointer, (row.extent * stride) as i64));
        b.ins().call(
            prefetch_rows,
            &[indices, indices_bytes, output, output_bytes],
        );
    }

    /// The three pointers advanced by `k` iterations of loop `depth`.
    pub(super) fn step(
        &self,
        b: &mut FunctionBuilder,
        p: [Value; 3],
        depth: usize,
        k: u64,
    ) -> [Value; 3] {
        self.step_used(b, p, depth, k, [true; 3])
    }

    /// [`Lowering::step`] of only the pointers marked `used`; the others come back as they
    /// were (an unused `iadd` would still cost Cranelift compile time).
    pub(super) fn step_used(
        &self,
        b: &mut FunctionBuilder,
        p: [Value; 3],
        depth: usize,
        k: u64,
        used: [bool; 3],
    ) -> [Value; 3] {
        let spec = self.plan.loops[depth];
        let strides = spec.strides();
        let mut stepped = p;
        for ((pointer, stride), used) in stepped.iter_mut().zip(strides).zip(used) {
            if used {
                *pointer = self.advance_const(b, *pointer, k * stride);
            }
        }
        stepped
    }

    /// The three pointers advanced by `k` iterations of loop `depth`, each as a base and a
    /// constant byte offset for its loads or stores: all three keep their base while the
    /// offset is at most 1 GiB (one `iadd` fewer per lookup for Cranelift to compile; for the
    /// data pointer, to which the lookup adds its index offset, x64 then reads
    /// `disp(base, offset)` instead of stepping the base with a `lea` per lookup).
    pub(super) fn step_folded(
        &self,
        b: &mut FunctionBuilder,
        p: [Value; 3],
        depth: usize,
        k: u64,
    ) -> [(Value, i32); 3] {
        let spec = self.plan.loops[depth];
        let folded = |pointer: Value, stride: u64| {
            // Far below `i32::MAX`, so adding a coordinate's or a chunk's offset stays in range.
            (k.checked_mul(stride))
                .filter(|&bytes| bytes <= 1 << 30)
                .map(|bytes| (pointer, bytes as i32))
        };
        let strides = spec.strides();
        let folds = [0, 1, 2].map(|n| folded(p[n], strides[n]));
        // Stepped: a pointer whose offset would be too large.
        let stepped = folds.map(|fold| fold.is_none());
        let steps = self.step_used(b, p, depth, k, stepped);
        [0, 1, 2].map(|n| folds[n].unwrap_or((steps[n], 0)))
    }

    /// The innermost loop, unrolled by `group`: each trip checks and copies `group` lookups
    /// with one fused compare-and-branch per index and no policy code. A tuple that fails its
    /// check sends the whole group to a one-lookup-at-a-time loop (`single`) that applies the
    /// policy; re-copying the group's earlier slices writes the same bytes, and slices after a
    /// rejected index are still untouched. `single` also runs the last partial group.
    ///
    /// ```text
    /// head(i):   i + group <= to ? group(i) : tail(i)
    /// group(i):  group x { check (else bail); copy }; stop = i + group;
    ///            stop <= to - group ? group(stop) : tail(stop)
    /// bail:      single(i, i + group)    (reads group's i: only group reaches it)
    /// tail(i):   i < to ? single(i, stop = to) : exit
    /// single(i, stop): policy lookup; i + 1 < stop ? single(i + 1, stop) : head(i + 1)
    /// ```
    /// `group` tests its own trip count at the bottom (one taken branch per trip) and `single`
    /// is laid out cold, after the function's hot code, so the checks fall through.
    pub(super) fn emit_unrolled(
        &self,
        b: &mut FunctionBuilder,
        depth: usize,
        group: u64,
        from: Value,
        to: Value,
        pointers: [Value; 3],
    ) {
        let head = b.create_block();
        let group_block = b.create_block();
        let tail = b.create_block();
        let bail_block = b.create_block();
        let single = b.create_block();
        let exit = b.create_block();
        let carried = Carried::new(self.plan.loops[depth], pointers);
        for block in [head, group_block, tail, single] {
            carried.append_params(b, block);
        }
        b.append_block_param(single, I64); // stop
        b.ins().jump(head, &carried.args(from, pointers));

        b.switch_to_block(head);
        let (i, pointers) = carried.read(b, head);
        let last = add_to_counter(b, i, group as i64);
        let fits = b.ins().icmp(IntCC::UnsignedLessThanOrEqual, last, to);
        let args = carried.args(i, pointers);
        b.ins().brif(fits, group_block, &args, tail, &args);

        b.switch_to_block(tail);
        let (i, pointers) = carried.read(b, tail);
        let more = b.ins().icmp(IntCC::UnsignedLessThan, i, to);
        let mut args = carried.args(i, pointers);
        args.push(BlockArg::from(to));
        b.ins().brif(more, single, &args, exit, &[]);

        b.switch_to_block(group_block);
        let (i, pointers) = carried.read(b, group_block);
        // The checks branch to the bail block without arguments: only this trip reaches it,
        // so it reads the trip's own `i` and pointers.
        if let Some(vector) = self.packed_vector(depth, group) {
            self.emit_packed_group(b, (depth, group, vector), pointers, bail_block);
        } else {
            let steps: Vec<[(Value, i32); 3]> = (0..group)
                .map(|k| self.step_folded(b, pointers, depth, k))
                .collect();
            // Checked one lookup at a time, or, when every index of the trip can share one
            // compare, the whole trip's tuples loaded first and checked once.
            let checked_together = if self.one_power_of_two_size() {
                steps.len()
            } else {
                1
            };
            for lookups in steps.chunks(checked_together) {
                let tuples: Vec<((Value, i32), Vec<Value>)> = (lookups.iter())
                    .map(|&[data, indices, _]| (data, self.load_tuple_at(b, indices)))
                    .collect();
                let sources = self.checked_sources(b, &tuples, bail_block);
                for (&[_, _, output], source) in lookups.iter().zip(sources) {
                    self.emit_copy(b, source, output, None);
                }
            }
        }
        let trip = (i, pointers);
        let [data, indices, output] = self.step(b, pointers, depth, group);
        let stop = b.ins().iadd_imm_s(i, group as i64);
        // Another trip fits if `stop + group <= to`, i.e. `stop <= to - group` (no wrap: this
        // trip fitted, so `to >= group`).
        let last_start = add_to_counter(b, to, -(group as i64));
        let fits = b
            .ins()
            .icmp(IntCC::UnsignedLessThanOrEqual, stop, last_start);
        let args = carried.args(stop, [data, indices, output]);
        b.ins().brif(fits, group_block, &args, tail, &args);
        // `group_block`'s predecessors: `head` and its own back edge; `tail`'s: both tests.
        b.seal_block(group_block);
        b.seal_block(tail);

        // A rejected check: redo the trip one lookup at a time, from `i` to `i + group`.
        b.switch_to_block(bail_block);
        b.set_cold_block(bail_block);
        b.seal_block(bail_block);
        let (i, pointers) = trip;
        let stop = b.ins().iadd_imm_s(i, group as i64);
        let mut args = carried.args(i, pointers);
        args.push(BlockArg::from(stop));
        b.ins().jump(single, &args);

        b.switch_to_block(single);
        b.set_cold_block(single);
        let (i, pointers) = carried.read(b, single);
        let stop = *b
            .block_params(single)
            .last()
            .expect("`single` has its `stop`");
        // Most of what reaches here needs the policy anyway (or is a partial trip's few
        // lookups): no fast check, which would duplicate the trip's and cost compile time.
        self.emit_checked_lookup(b, pointers, None, Check::PolicyOnly);
        let next = b.ins().iadd_imm_s(i, 1);
        let advanced = self.step(b, pointers, depth, 1);
        let again = b.ins().icmp(IntCC::UnsignedLessThan, next, stop);
        let mut args = carried.args(next, advanced);
        args.push(BlockArg::from(stop));
        b.ins()
            .brif(again, single, &args, head, &args[..args.len() - 1]);
        // Every jump to `head` and `single` has been emitted.
        b.seal_block(single);
        b.seal_block(head);
        b.switch_to_block(exit);
        b.seal_block(exit);
    }

    /// Whether every coordinate indexes a dim of one power-of-two size, so that all the
    /// indices of a trip can share one fast-path compare ([`Lowering::emit_fast_checks`]).
    pub(super) fn one_power_of_two_size(&self) -> bool {
        let coordinates = &self.plan.lookup.coordinates;
        coordinates.first().is_some_and(|first| {
            first.dim_size.is_power_of_two()
                && coordinates.iter().all(|c| c.dim_size == first.dim_size)
        })
    }

    /// The 16-byte vector type whose lanes are single-element slices, when the unrolled loop
    /// at `depth` gathers elements of 1, 2, 4 or 8 bytes into consecutive output bytes and
    /// `group` fills whole vectors: the group then loads elements straight into vector lanes
    /// (`pinsrd xmm, [mem]` and the like) and stores 16 bytes at a time, one store instead of
    /// 16 / size, about a tenth faster on S6 and S8 (`cargo bench --bench gather -- S6/jit`).
    /// (Trips hold at most 8 lookups, so 1-byte elements, 16 to a vector, never qualify.)
    pub(super) fn packed_vector(&self, depth: usize, group: u64) -> Option<Type> {
        let bytes = self.plan.lookup.slice_bytes;
        let vector = match bytes {
            1 => I8X16,
            2 => I16X8,
            4 => I32X4,
            8 => I64X2,
            _ => return None,
        };
        let lanes = 16 / bytes;
        let consecutive = self.plan.loops[depth].output_stride == bytes;
        (consecutive && self.stream_copy.is_none() && group.is_multiple_of(lanes)).then_some(vector)
    }

    /// The body of one unrolled trip when [`Lowering::packed_vector`] applies: per vector,
    /// each lane's tuple is checked (else to `bail_block`), its element loaded into the lane,
    /// and the vector stored once all its lanes passed, so a rejected tuple leaves its own
    /// and later slices untouched.
    pub(super) fn emit_packed_group(
        &self,
        b: &mut FunctionBuilder,
        (depth, group, vector): (usize, u64, Type),
        pointers: [Value; 3],
        bail_block: Block,
    ) {
        let lanes = u64::from(vector.lane_count());
        let lane_type = vector.lane_type();
        for first in (0..group).step_by(lanes as usize) {
            // All checks first, then all loads in the one block left: a load can only be folded
            // into its `pinsr*` when both are in the same block.
            let tuples: Vec<((Value, i32), Vec<Value>)> = (first..first + lanes)
                .map(|k| {
                    let [data, indices, _] = self.step_folded(b, pointers, depth, k);
                    (data, self.load_tuple_at(b, indices))
                })
                .collect();
            // One vector's tuples are checked together: indices into one power-of-two size
            // share a compare across lanes too.
            let sources = self.checked_sources(b, &tuples, bail_block);
            let mut packed: Option<Value> = None;
            for (lane, &(source, past)) in sources.iter().enumerate() {
                let element = b.ins().load(lane_type, flags(), source, past);
                packed = Some(match packed {
                    None => b.ins().scalar_to_vector(vector, element),
                    Some(v) => b.ins().insertlane(v, element, lane as u8),
                });
            }
            let [_, _, (output, past)] = self.step_folded(b, pointers, depth, first);
            if let Some(packed) = packed {
                b.ins().store(flags(), packed, output, past);
            }
        }
    }

    /// Where the slice of iteration `i + 1` of the innermost loop at `depth` starts, if the
    /// kernel prefetches: its tuple is read (the current one again when `i + 1 == to`, so the
    /// read stays in the buffer) and clamped into range (a prefetch need not be exact, and
    /// the address then lies in `data`).
    pub(super) fn next_slice(
        &self,
        b: &mut FunctionBuilder,
        depth: usize,
        i: Value,
        to: Value,
        pointers: [Value; 3],
    ) -> Option<Value> {
        self.prefetch_copy?;
        let [data, indices, _] = self.step_used(b, pointers, depth, 1, [true, true, false]);
        let next = b.ins().iadd_imm_s(i, 1);
        let has_next = b.ins().icmp(IntCC::UnsignedLessThan, next, to);
        let tuple = b.ins().select(has_next, indices, pointers[1]);
        let data = b.ins().select(has_next, data, pointers[0]);
        let clamped: Vec<Value> = (self.load_tuple(b, tuple).into_iter())
            .zip(&self.plan.lookup.coordinates)
            .map(|(index, c)| {
                let last = b.ins().iconst(I64, c.dim_size.max(1) as i64 - 1);
                b.ins().umin(index, last)
            })
            .collect();
        let offset = self.offset(b, &clamped);
        Some(b.ins().iadd(data, offset))
    }
}
