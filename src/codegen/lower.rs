//! Lowering a [`Plan`] to a CLIF function: the loop nest, index checks and slice copies.
//!
//! The function has the C signature of [`super::KernelFn`]:
//! `(data, indices, output, start, end, bad_index) -> status`. It walks iterations
//! `start..end` of the outermost loop; every other extent, stride and dimension is an
//! immediate. Status 0 is success; status 1 means an index was rejected and the element
//! position of its tuple in the indices buffer was stored to `*bad_index` (the caller finds
//! the tuple's first bad coordinate).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{I8X16, I16, I16X8, I32, I32X4, I64, I64X2};
use cranelift_codegen::ir::{
    AbiParam, Block, BlockArg, FuncRef, Function, InstBuilder, InstructionData, MemFlagsData,
    Opcode, Signature, Type, Value,
};
use cranelift_codegen::isa::{CallConv, TargetFrontendConfig};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};

use crate::ir::{IndexType, NegativeIndices, OutOfRange};
use crate::specialize::{Coordinate, Loop, Plan};

/// Slices up to this many bytes are copied with unrolled 16-byte moves; larger ones call a
/// copy helper. Chosen by measurement (see `docs/performance.md`).
pub(crate) const UNROLL_LIMIT_BYTES: u64 = 512;

/// The most lookups one trip of the innermost loop does. The code reads the outermost loop's
/// extent only to cap its trip at it, so it is the same for every extent from this one up
/// (see `super::code_plan`).
pub(crate) const MAX_UNROLL: u64 = 8;

/// How many lookups one trip of the innermost loop does: small slices are dominated by loop
/// and index overhead, large ones by the copy. At most [`MAX_UNROLL`].
pub(crate) fn unroll_factor(slice_bytes: u64, coordinates: usize) -> u64 {
    let by_slice = match slice_bytes {
        0..=16 => MAX_UNROLL,
        17..=128 => 4,
        129..=512 => 2,
        _ => 1,
    };
    // At most 8 index checks per trip: more cost compile time, not speed. Pairs of indices
    // selecting single elements (S8) are the exception: 8 lookups (16 checks) per trip
    // measured 4 % faster than 4.
    let by_checks = match coordinates {
        2 if slice_bytes <= 16 => MAX_UNROLL,
        _ => (8 / coordinates.max(1)).max(1) as u64,
    };
    by_slice.min(by_checks)
}

/// The CLIF signature of a copy helper: `(dest, source, bytes)` for [`super::stream_copy`],
/// `(dest, source, bytes, next)` for [`super::prefetch_copy`] (`params` pointers).
pub(crate) fn copy_signature(call_conv: CallConv, pointer: Type, params: usize) -> Signature {
    let mut sig = Signature::new(call_conv);
    for _ in 0..params {
        sig.params.push(AbiParam::new(pointer));
    }
    sig
}

/// Whether the kernel for `plan` copies its slices with [`super::prefetch_copy`], prefetching
/// the next lookup's slice (the last lookup's own again): slices too large to copy inline and
/// not streamed. (Never glibc's `memcpy`: from 2 KiB on it uses `rep movsb`, which on Zen 3
/// took S5 3.5-4.9x as long when output and data were 8-24 bytes out of step as in step.)
pub(crate) fn prefetches_next_slice(plan: &Plan) -> bool {
    !plan.lookup.streaming && plan.lookup.slice_bytes > UNROLL_LIMIT_BYTES
}

/// The Rust functions a kernel calls, imported into its function.
#[derive(Clone, Copy)]
pub(crate) struct Helpers {
    /// [`super::stream_copy`], when `plan.lookup.streaming`.
    pub(crate) stream_copy: Option<FuncRef>,
    /// [`super::prefetch_copy`], when [`prefetches_next_slice`].
    pub(crate) prefetch_copy: Option<FuncRef>,
    /// [`super::prefetch_rows`], for the rows loop of a banded plan's compiled part: each row
    /// prefetches its indices and output [`PREFETCH_ROWS_AHEAD`] rows ahead.
    pub(crate) prefetch_rows: Option<FuncRef>,
}

/// How many rows ahead the rows loop of a band prefetches. A band's rows of indices and output
/// lie a page or more apart, so the hardware prefetchers meet each as a new stream and its
/// first lines would be demand misses; measured on S7 (gather phase, µs): 714-967 without,
/// 596-641 one row ahead, 580-728 two rows ahead.
pub(crate) const PREFETCH_ROWS_AHEAD: u64 = 2;

/// The largest unroll factor in the rows of a band (the compiled part of a banded plan, the
/// only code that calls [`super::prefetch_rows`]). Measured on S7 (µs, three rounds): unrolled
/// by 4: 716, 723, 908 (compile 217-224 µs); by 8: 721, 729, 772 (compile 268-298 µs); by 16:
/// 703-762 (compile 365-368 µs).
pub(crate) const BAND_UNROLL: u64 = 4;

/// The CLIF signature every kernel has.
pub(crate) fn kernel_signature(call_conv: CallConv, pointer: Type) -> Signature {
    let mut sig = Signature::new(call_conv);
    for _ in 0..3 {
        sig.params.push(AbiParam::new(pointer)); // data, indices, output
    }
    sig.params.push(AbiParam::new(I64)); // start
    sig.params.push(AbiParam::new(I64)); // end
    sig.params.push(AbiParam::new(pointer)); // bad_index out-parameter
    sig.returns.push(AbiParam::new(I32));
    sig
}

/// Memory flags for every access: the plan proves each address in bounds (so no trap), and
/// the caller's buffers need not be aligned (so not `aligned`).
fn flags() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

/// Builds the body of `func` from `plan`.
///
/// `helpers` are the imported Rust functions (see [`Helpers`]).
pub(crate) fn lower(
    plan: &Plan,
    func: &mut Function,
    builder_context: &mut FunctionBuilderContext,
    config: TargetFrontendConfig,
    helpers: Helpers,
) {
    let mut builder = FunctionBuilder::new(func, builder_context);
    let entry = builder.create_block();
    builder.append_block_params_for_function_params(entry);
    builder.switch_to_block(entry);
    // The entry block has no predecessors.
    builder.seal_block(entry);
    let params = builder.block_params(entry).to_vec();
    let [data, indices, output, start, end, bad_index] = params[..] else {
        unreachable!("kernel_signature has six parameters")
    };

    // The one exit for a rejected index: store the element position of its tuple, return 1.
    let reject = builder.create_block();
    builder.append_block_param(reject, I64); // tuple pointer

    let lowering = Lowering {
        plan,
        config,
        pointer: config.pointer_type(),
        reject,
        stream_copy: helpers.stream_copy.filter(|_| plan.lookup.streaming),
        prefetch_copy: helpers
            .prefetch_copy
            .filter(|_| prefetches_next_slice(plan)),
        prefetch_rows: helpers.prefetch_rows.filter(|_| plan.loops.len() > 1),
    };
    let outer = plan.loops[0];
    let d0 = lowering.advance(&mut builder, data, start, outer.data_stride);
    let x0 = lowering.advance(&mut builder, indices, start, outer.indices_stride);
    let o0 = lowering.advance(&mut builder, output, start, outer.output_stride);
    lowering.emit_loop(&mut builder, 0, start, end, [d0, x0, o0]);
    let ok = builder.ins().iconst(I32, 0);
    builder.ins().return_(&[ok]);

    builder.switch_to_block(reject);
    // Every branch to `reject` has been emitted by now.
    builder.seal_block(reject);
    let tuple = builder.block_params(reject)[0];
    let byte_offset = builder.ins().isub(tuple, indices);
    let shift = plan.index_type.size().trailing_zeros() as i64;
    let position = builder.ins().ushr_imm_u(byte_offset, shift);
    builder.ins().store(flags(), position, bad_index, 0);
    let status = builder.ins().iconst(I32, 1);
    builder.ins().return_(&[status]);
    builder.finalize(config);
}

/// How a lookup checks its tuple.
#[derive(Clone, Copy)]
enum Check {
    /// One unsigned compare per index, and the policy's code only for tuples that fail it.
    FastThenPolicy,
    /// The policy's code for every tuple: shorter code, slower per lookup.
    PolicyOnly,
}

struct Lowering<'a> {
    plan: &'a Plan,
    config: TargetFrontendConfig,
    pointer: Type,
    reject: Block,
    stream_copy: Option<FuncRef>,
    prefetch_copy: Option<FuncRef>,
    prefetch_rows: Option<FuncRef>,
}

/// The value of `value` if an `iconst` defines it.
fn constant(b: &FunctionBuilder, value: Value) -> Option<i64> {
    let inst = b.func.dfg.value_def(value).inst()?;
    match b.func.dfg.insts[inst] {
        InstructionData::UnaryImm {
            opcode: Opcode::Iconst,
            imm,
        } => Some(imm.bits()),
        _ => None,
    }
}

/// `value + k` for a loop counter, folded here when `value` is a constant: Cranelift runs
/// without its optimiser (see `super::isa`), so nothing would fold it later.
fn add_to_counter(b: &mut FunctionBuilder, value: Value, k: i64) -> Value {
    match constant(b, value) {
        Some(c) => b.ins().iconst(I64, c.wrapping_add(k)),
        None => b.ins().iadd_imm_s(value, k),
    }
}

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
    fn advance(&self, b: &mut FunctionBuilder, base: Value, count: Value, stride: u64) -> Value {
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
    fn emit_loop(
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
    fn emit_row_prefetch(&self, b: &mut FunctionBuilder, prefetch_rows: FuncRef, p: [Value; 3]) {
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
    fn step(&self, b: &mut FunctionBuilder, p: [Value; 3], depth: usize, k: u64) -> [Value; 3] {
        self.step_used(b, p, depth, k, [true; 3])
    }

    /// [`Lowering::step`] of only the pointers marked `used`; the others come back as they
    /// were (an unused `iadd` would still cost Cranelift compile time).
    fn step_used(
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
    fn step_folded(
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
    fn emit_unrolled(
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
    fn one_power_of_two_size(&self) -> bool {
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
    /// 16 / size. Measured: S6 73-75 -> 67 µs, S8 183-190 -> 168-172 µs (docs/performance.md).
    /// (Trips hold at most 8 lookups, so 1-byte elements, 16 to a vector, never qualify.)
    fn packed_vector(&self, depth: usize, group: u64) -> Option<Type> {
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
    fn emit_packed_group(
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
    fn next_slice(
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

    /// The fast checks of `tuples` (each a data pointer with a constant byte offset, and its
    /// tuple's raw indices), all at once (else to `otherwise`), then the source of each slice,
    /// as a pointer and the same constant offset.
    fn checked_sources(
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
    fn load_tuple(&self, b: &mut FunctionBuilder, indices: Value) -> Vec<Value> {
        self.load_tuple_at(b, (indices, 0))
    }

    /// [`Lowering::load_tuple`] of the tuple `at.1` bytes past `at.0`.
    fn load_tuple_at(&self, b: &mut FunctionBuilder, at: (Value, i32)) -> Vec<Value> {
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
    fn emit_fast_checks(&self, b: &mut FunctionBuilder, raw: &[Value], otherwise: Block) {
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
            let ok = b
                .ins()
                .icmp_imm_u(IntCC::UnsignedLessThan, index, dim as i64);
            let next = b.create_block();
            b.ins().brif(ok, next, &[], otherwise, &[]);
            b.switch_to_block(next);
            // Its only predecessor is the check above.
            b.seal_block(next);
        }
    }

    fn advance_const(&self, b: &mut FunctionBuilder, base: Value, stride: u64) -> Value {
        if stride == 0 {
            base
        } else {
            b.ins().iadd_imm_s(base, stride as i64)
        }
    }

    /// `index * stride`, as a shift when the stride is a power of two.
    fn scale(&self, b: &mut FunctionBuilder, index: Value, stride: u64) -> Value {
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
    fn emit_lookup(&self, b: &mut FunctionBuilder, pointers: [Value; 3], next: Option<Value>) {
        self.emit_checked_lookup(b, pointers, next, Check::FastThenPolicy);
    }

    /// [`Lowering::emit_lookup`], with the fast check or without it (see [`Check`]).
    fn emit_checked_lookup(
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
    fn offset(&self, b: &mut FunctionBuilder, indices: &[Value]) -> Value {
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
    fn emit_slow_path(
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
            let index =
                if self.plan.index_type.is_signed() && policy.negative == NegativeIndices::Wrap {
                    // i in [-s, -1] becomes i + s; anything below -s stays negative (bad).
                    let negative = b.ins().icmp_imm_s(IntCC::SignedLessThan, index, 0);
                    let wrapped = b.ins().iadd_imm_s(index, dim);
                    b.ins().select(negative, wrapped, index)
                } else {
                    index
                };
            // Negative values read as huge unsigned ones, so one unsigned compare checks both.
            let index = match policy.out_of_range {
                OutOfRange::Clamp if dim > 0 => {
                    let non_negative = if self.plan.index_type.is_signed() {
                        let zero = b.ins().iconst(I64, 0);
                        b.ins().smax(index, zero)
                    } else {
                        index
                    };
                    let last = b.ins().iconst(I64, dim - 1);
                    b.ins().umin(non_negative, last)
                }
                OutOfRange::Error | OutOfRange::Clamp => {
                    let bad = b
                        .ins()
                        .icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, index, dim);
                    any_bad = Some(match any_bad {
                        Some(previous) => b.ins().bor(previous, bad),
                        None => bad,
                    });
                    index
                }
                OutOfRange::Zero => {
                    let ok = b.ins().icmp_imm_u(IntCC::UnsignedLessThan, index, dim);
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
    fn load_index(&self, b: &mut FunctionBuilder, at: (Value, i32), c: &Coordinate) -> Value {
        let (tuple, past) = at;
        let offset = past + c.index_offset as i32;
        let f = flags();
        match self.plan.index_type {
            IndexType::I8 => b.ins().sload8(I64, f, tuple, offset),
            IndexType::U8 => b.ins().uload8(I64, f, tuple, offset),
            IndexType::I16 => b.ins().sload16(I64, f, tuple, offset),
            IndexType::U16 => b.ins().uload16(I64, f, tuple, offset),
            IndexType::I32 => b.ins().sload32(f, tuple, offset),
            IndexType::U32 => b.ins().uload32(f, tuple, offset),
            IndexType::I64 | IndexType::U64 => b.ins().load(I64, f, tuple, offset),
        }
    }

    /// Copies one slice from `source.1` bytes past `source.0` to `dest.1` bytes past
    /// `dest.0`, with code chosen by its size; where the kernel uses [`super::prefetch_copy`],
    /// `next` (the following lookup's slice) is prefetched, or without one (the lookups of an
    /// inner loop written out straight) this slice again.
    fn emit_copy(
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
            // Inline moves (every slice of at most `UNROLL_LIMIT_BYTES`, the only ones without
            // a helper), both offsets folded into the loads and stores.
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
    fn emit_zero(&self, b: &mut FunctionBuilder, dest: Value, bytes: u64) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every byte of `0..bytes` is covered and nothing outside it.
    #[test]
    fn chunks_cover_exactly() {
        for bytes in 0..=300u64 {
            let mut covered = vec![false; bytes as usize];
            for (offset, ty) in chunks(bytes) {
                let end = offset as u64 + ty.bytes() as u64;
                assert!(end <= bytes, "{bytes}: move at {offset} of {ty} overruns");
                for byte in &mut covered[offset as usize..end as usize] {
                    *byte = true;
                }
            }
            assert!(covered.iter().all(|&c| c), "{bytes}: not covered");
        }
    }

    #[test]
    fn unroll_factors_bound_the_checks_per_trip() {
        // (slice bytes, coordinates) -> lookups per trip.
        let cases = [
            ((4, 1), 8),   // GatherElements, Gather of one element
            ((4, 2), 8),   // an element GatherND over pairs (S8): 16 checks
            ((2, 2), 8),   // pairs of 2-byte elements: one I16X8 vector per trip
            ((8, 2), 8),   // pairs of 8-byte elements
            ((16, 2), 8),  // the largest slice the pair exception covers
            ((17, 2), 4),  // just past it: 8 / 2
            ((4, 3), 2),   // 8 / 3
            ((32, 2), 4),  // pairs selecting rows: 8 / 2
            ((16, 17), 1), // a very long tuple still copies
            ((60, 3), 2),  // S1's 60-byte slices: 8 / 3
            ((128, 1), 4),
            ((140, 1), 2),
            ((512, 1), 2),
            ((513, 1), 1),
        ];
        for ((slice_bytes, coordinates), expected) in cases {
            let factor = unroll_factor(slice_bytes, coordinates);
            assert_eq!(
                factor, expected,
                "slice {slice_bytes} B, {coordinates} coordinates"
            );
            assert!(factor.is_power_of_two());
        }
    }

    #[test]
    fn chunks_use_few_moves() {
        assert_eq!(chunks(4), vec![(0, I32)]);
        assert_eq!(chunks(12), vec![(0, I64), (4, I64)]);
        assert_eq!(
            chunks(60),
            vec![(0, I8X16), (16, I8X16), (32, I8X16), (44, I8X16)]
        );
    }

    /// The CLIF of `signature`'s kernel.
    fn clif(signature: &crate::ir::Signature) -> String {
        let validated = signature.validate().expect("valid signature");
        let plan = Plan::new(&validated).expect("plan");
        crate::codegen::clif_text(&plan).expect("host ISA")
    }

    /// Cranelift's optimiser is off, so the lowering folds constant loop bounds itself: the
    /// rows of Gather [3, 20] by [19] along axis 1 are an inner loop of constant extent 19,
    /// unrolled by 8, whose back edge tests `stop <= 19 - 8` against the constant 11 (one
    /// more full trip fits exactly when `stop <= 11`).
    #[test]
    fn an_unrolled_loop_of_constant_extent_tests_a_folded_bound() {
        use crate::ir::Signature;
        let text = clif(&Signature::gather(&[3, 20], &[19], 1, 0));
        assert!(
            text.lines()
                .any(|line| line.contains("icmp ule") && line.ends_with(" = 11")),
            "no `stop <= 11` back edge\n{text}"
        );
    }

    #[test]
    fn indices_into_one_power_of_two_size_share_a_check() {
        use crate::ir::Signature;
        let fast_checks = |signature: &Signature, dim: usize| {
            let text = clif(signature);
            let hot = text.split(" cold:").next().unwrap_or_default().to_owned();
            // `v9 = icmp ult v7, v8  ; v8 = 512`: a compare against the constant `dim`.
            hot.lines()
                .filter(|line| line.contains(" icmp") && line.contains(" ult "))
                .filter(|line| line.ends_with(&format!(" = {dim}")))
                .count()
        };
        // S8: 8 lookups per trip packed into two vectors of 4 lanes, every index into 512: one
        // compare per vector, not one per index (16).
        let s8 = Signature::gather_nd(&[512, 512], &[4096, 2], 0);
        assert_eq!(fast_checks(&s8, 512), 2);
        // Sizes 512 and 256: one compare per size and vector.
        let mixed = Signature::gather_nd(&[512, 256], &[4096, 2], 0);
        assert_eq!((fast_checks(&mixed, 512), fast_checks(&mixed, 256)), (2, 2));
        // 300 is no power of two: one compare per index.
        assert_eq!(
            fast_checks(&Signature::gather_nd(&[300, 300], &[4096, 2], 0), 300),
            16
        );
        // Slices copied one by one (64 bytes, 4 per trip): the trip's indices share one
        // compare when all go into one power-of-two size (S9: 16), else one per lookup and size.
        assert_eq!(
            fast_checks(&Signature::gather_nd(&[64, 64, 16], &[4096, 2], 0), 64),
            1
        );
        assert_eq!(
            fast_checks(&Signature::gather(&[16, 16], &[4], 0, 0), 16),
            1
        );
        let mixed = Signature::gather_nd(&[64, 32, 16], &[4096, 2], 0);
        assert_eq!((fast_checks(&mixed, 64), fast_checks(&mixed, 32)), (4, 4));
    }

    #[test]
    fn element_gathers_pack_lanes_and_store_whole_vectors() {
        use crate::ir::{DType, Signature};
        // S6 (f32 rows), f64, f16 and a 2-coordinate GatherND: lanes of 4, 8, 2 bytes.
        for (signature, vector) in [
            (
                Signature::gather_elements(&[64, 4096], &[64, 4096], 1),
                "i32x4",
            ),
            (
                Signature::gather_elements(&[8, 64], &[8, 64], 1).with_dtype(DType::F64),
                "i64x2",
            ),
            (
                Signature::gather(&[100], &[64], 0, 0).with_dtype(DType::F16),
                "i16x8",
            ),
            (Signature::gather_nd(&[512, 512], &[4096, 2], 0), "i32x4"),
        ] {
            let text = clif(&signature);
            assert!(text.contains("insertlane"), "{signature}: no lanes\n{text}");
            assert!(
                text.contains(&format!("scalar_to_vector.{vector}")),
                "{signature}\n{text}"
            );
        }
        // Slices of 60 and of 16 bytes are copied slice by slice.
        for signature in [
            Signature::gather_nd(&[1000, 256, 10, 15], &[25, 125, 3], 0),
            Signature::gather(&[64, 4], &[64], 0, 0),
        ] {
            assert!(!clif(&signature).contains("insertlane"), "{signature}");
        }
    }

    #[test]
    fn only_large_slices_that_do_not_stream_prefetch_the_next_slice() {
        use crate::ir::Signature;
        let prefetches = |signature: &Signature| {
            let validated = signature.validate().expect("valid signature");
            prefetches_next_slice(&Plan::new(&validated).expect("plan"))
        };
        // 3 KiB rows of an embedding table (S5's), into an output too small to stream.
        let rows = Signature::gather(&[30522, 768], &[4], 0, 0);
        assert!(prefetches(&rows));
        // A single lookup prefetches its own slice again.
        assert!(prefetches(&Signature::gather(&[100, 768], &[1], 0, 0)));
        // Inline copies and streaming copies do not.
        assert!(!prefetches(&Signature::gather(&[100, 128], &[64], 0, 0)));
        assert!(!prefetches(&Signature::gather(&[5, 1000], &[8400], 0, 0)));
        let text = clif(&rows);
        assert!(text.contains("umin"), "the next tuple is clamped\n{text}");
    }

    /// The byte displacements of every load and store in `text` (`load.i32 notrap v7+12`).
    fn displacements(text: &str) -> Vec<i64> {
        (text.lines())
            .filter(|line| line.contains(" load") || line.contains("store "))
            .filter_map(|line| {
                let operand = line.split(';').next()?.trim_end();
                let at = operand.rfind(['+', '-'])?;
                let digits = operand[at + 1..].replace('_', "");
                let magnitude = match digits.strip_prefix("0x") {
                    Some(hex) => i64::from_str_radix(hex, 16).ok()?,
                    None => digits.parse().ok()?,
                };
                Some(if operand[at..].starts_with('-') {
                    -magnitude
                } else {
                    magnitude
                })
            })
            .collect()
    }

    /// An unrolled trip reads each lookup's element at a displacement from the trip's data
    /// pointer (x64: `disp(base, index)`), instead of stepping the pointer per lookup.
    #[test]
    fn unrolled_lookups_fold_their_data_steps_into_displacements() {
        use crate::ir::Signature;
        // GatherElements along axis 0 of [8, 32] f32: rows of 128 bytes, too short to band; the
        // columns are the inner loop (data stride 4), 8 lookups per trip.
        let text = clif(&Signature::gather_elements(&[8, 32], &[8, 32], 0));
        let element_loads: Vec<&str> = (text.lines())
            .filter(|line| line.contains("load.i32"))
            .collect();
        for lane in [4, 8, 12, 16, 28] {
            assert!(
                element_loads
                    .iter()
                    .any(|line| line.ends_with(&format!("+{lane}"))),
                "no element load at +{lane}\n{text}"
            );
        }
    }

    /// Displacements stay at most 1 GiB (plus a slice), far inside `i32`: lookups whose step
    /// would go beyond step their pointer instead.
    #[test]
    fn far_lookups_step_their_pointer_instead_of_a_displacement() {
        use crate::ir::Signature;
        // One f32 per batch from rows of 2^27 elements: the data pointer steps 512 MiB per
        // lookup, so lookups 3-7 of a trip would need 1.5-3.5 GiB.
        let text = clif(&Signature::gather_nd(&[8, 1 << 27], &[8, 1], 1));
        let found = displacements(&text);
        assert!(found.contains(&(1 << 29)), "lookup 1 folded\n{text}");
        assert!(found.contains(&(1 << 30)), "lookup 2 folded\n{text}");
        assert!(
            found.iter().all(|&d| (0..=(1 << 30) + 512).contains(&d)),
            "{found:?}\n{text}"
        );
    }

    #[test]
    fn bands_prefetch_the_rows_ahead() {
        use crate::ir::Signature;
        // S7 is banded: its compiled rows loop prefetches the indices (128 x i64, 1024 bytes)
        // and output (128 x f32, 512 bytes) of the row two ahead.
        let text = clif(&Signature::gather_elements(&[1024, 1024], &[1024, 1024], 0));
        let call = text
            .lines()
            .find(|line| line.contains("call fn"))
            .unwrap_or_else(|| panic!("a call\n{text}"));
        assert!(call.contains("= 1024") && call.contains("= 512"), "{call}");
        // The indices pointer two rows (2 x 8192 bytes) ahead; nothing else advances by 16384.
        assert!(text.contains("iconst.i64 0x4000"), "{text}");
        // S6 (along the inner axis) is not banded and calls nothing.
        let text = clif(&Signature::gather_elements(&[64, 4096], &[64, 4096], 1));
        assert!(!text.contains("call"), "{text}");
    }
}
