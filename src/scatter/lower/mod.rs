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
//! `combine.rs` holds the arithmetic of one update, element by element or 16 bytes at a time.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{I8, I32, I32X4, I64, I64X2};
use cranelift_codegen::ir::{
    AbiParam, Block, BlockArg, Function, InstBuilder, MemFlagsData, Signature, Type, Value,
};
use cranelift_codegen::isa::{CallConv, TargetFrontendConfig};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};

use super::{Reduction, ResolvedScatter, ScatterLayout};
use crate::codegen::chunks;
use crate::codegen::loops::{add_const, for_groups, for_range, mul_const};
use crate::codegen::policy;
use crate::types::{IndexPolicy, IndexType, NegativeIndices, OutOfRange};

mod combine;

pub(crate) use combine::Arithmetic;

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

/// How one write (one slice of `slice_len` elements) is done: what `explain` prints.
pub(crate) fn write_text(layout: &ScatterLayout) -> String {
    let sig = layout.signature();
    let element = sig.dtype.size() as u64;
    let slice = layout.slice_len() as u64;
    let bytes = slice * element;
    let how = match sig.reduction {
        Reduction::None if bytes > INLINE_COPY_BYTES => "memcpy".to_string(),
        Reduction::None => format!("{} inline move(s)", chunks(bytes).len()),
        _ => {
            let arithmetic = Arithmetic::of(layout);
            let lanes = arithmetic.vector_type().filter(|_| bytes >= 16);
            match lanes {
                Some(ty) => format!(
                    "{} {} in {ty} lanes ({} vector(s) + {} element(s))",
                    sig.reduction,
                    sig.dtype,
                    bytes / 16,
                    (bytes % 16) / element
                ),
                None => format!("{} {} element by element", sig.reduction, sig.dtype),
            }
        }
    };
    let order = match layout.op() {
        ResolvedScatter::Nd { index_depth } => format!(
            "for each of {} tuple(s) of {index_depth} index(es)",
            layout.index_count()
        ),
        ResolvedScatter::Elements { axis } => format!(
            "for each of {} index(es), along data axis {axis} ({ELEMENTS_UNROLL} a loop trip)",
            layout.index_count()
        ),
        ResolvedScatter::Update { axis } => format!(
            "for each of {} outer position(s), for each of {} index(es) along data axis {axis}",
            layout.outer_len(),
            layout.index_count()
        ),
    };
    let duplicates = if sig.flavor.forbids_duplicates() {
        format!(
            "\nthen: look for duplicate indices (flavor {} forbids them); one fails the call \
             before anything is written",
            sig.flavor
        )
    } else {
        String::new()
    };
    if layout.updates_len() == 0 {
        return format!(
            "pass 1: check the {} index(es) in row-major order (negative={}); a bad one fails \
             the call{duplicates}\npass 2: none (no updates, nothing to write)",
            layout.indices_len(),
            match sig.negative {
                crate::types::NegativeIndices::Wrap => "wrap",
                crate::types::NegativeIndices::Invalid => "invalid",
            },
        );
    }
    let init = if !sig.use_init_val && sig.reduction != Reduction::None {
        format!(
            "every element an update lands on set to {}'s neutral value (use_init_val=false); \
             then ",
            sig.reduction
        )
    } else {
        String::new()
    };
    let mean = if sig.reduction == Reduction::Mean {
        "\n  count each element's updates; the sums are divided by the counts after the kernel \
         returns"
    } else {
        ""
    };
    let scan = match layout.op() {
        ResolvedScatter::Nd { .. } => "",
        // `Lowering::scan_indices`.
        _ => " (one scan without branches, then the first bad one looked up if there is one)",
    };
    format!(
        "pass 1: check the {} index(es) in row-major order (negative={}){scan}; a bad one fails \
         the call before anything is written{duplicates}\n\
         pass 2: {init}{order}, in index order:\n  write {slice} element(s) ({bytes} bytes): \
         {how}{mean}\n\
         a parallel call splits data into ranges of whole slices: each part runs pass 2 and \
         writes its own range only (a call over all of data tests no ranges)",
        layout.indices_len(),
        match sig.negative {
            crate::types::NegativeIndices::Wrap => "wrap",
            crate::types::NegativeIndices::Invalid => "invalid",
        },
    )
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

/// What [`Lowering::scan_indices`] found, as `i8` flags.
struct Scan {
    any_bad: Value,
    any_negative: Value,
}

/// `value` as a constant of the integer type `ty` (its bits masked to the width: Cranelift's
/// constants of narrow types hold them zero-extended).
fn lane_const(b: &mut FunctionBuilder, ty: Type, value: i64) -> Value {
    let bits = ty.bits();
    let masked = if bits >= 64 {
        value
    } else {
        value & ((1i64 << bits) - 1)
    };
    b.ins().iconst(ty, masked)
}

/// One write: the slice at data element `target + target_extra` (`dest`, an address) from
/// the updates at `source`.
struct Write {
    target: Value,
    target_extra: i64,
    dest: Value,
    source: Value,
}

/// ScatterElements' writes per trip of the loop over the last dim of indices: chosen with
/// `benches/scatter.rs` (W3).
const ELEMENTS_UNROLL: usize = 4;

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

    /// Pass 1: every index in row-major order against its dimension; the first bad one jumps
    /// to `reject` with its element position. Indices into one dimension (ScatterElements,
    /// ScatterUpdate) are first scanned without a branch per index ([`Self::scan_indices`]);
    /// only when that finds a bad one does the scan below look for the first. Returns, for
    /// those, whether any index is negative.
    fn check_indices(&self, b: &mut FunctionBuilder, reject: Block) -> Option<Value> {
        if let ResolvedScatter::Elements { axis } | ResolvedScatter::Update { axis } =
            self.layout.op()
        {
            let scan = self.scan_indices(b, self.layout.signature().data_shape[axis]);
            let find_first = b.create_block();
            let checked = b.create_block();
            b.ins().brif(scan.any_bad, find_first, &[], checked, &[]);
            b.switch_to_block(find_first);
            b.seal_block(find_first);
            self.first_bad_index(b, reject);
            b.ins().jump(checked, &[]);
            b.switch_to_block(checked);
            b.seal_block(checked);
            return Some(scan.any_negative);
        }
        self.first_bad_index(b, reject);
        None
    }

    /// Whether any of the indices (all into one dimension of `dim`) is out of range, and
    /// whether any is negative, with no branch per index: `index > dim - 1` or `lowest >
    /// index` (`lowest` is `-dim` where negative indices wrap, else 0, which also rejects
    /// unsigned indices of 2^63 or more), OR-ed over all of them; i64 and i32 indices two
    /// vectors a trip.
    fn scan_indices(&self, b: &mut FunctionBuilder, dim: usize) -> Scan {
        let index_type = self.layout.signature().index_type;
        let size = index_type.size();
        let wraps = self.wraps();
        let dim = dim as i64;
        let lowest = if wraps { -dim } else { 0 };
        // Lanes of the index type, where the bounds fit them.
        let lanes = match index_type {
            IndexType::I64 | IndexType::U64 => Some(I64X2),
            IndexType::I32 | IndexType::U32 if dim <= i64::from(i32::MAX) => Some(I32X4),
            _ => None,
        };
        let width = lanes.map_or(4, |ty| 2 * ty.lane_count() as usize);
        let lane = lanes.map_or(I64, |ty| ty.lane_type());
        let scalars = [dim - 1, lowest].map(|value| lane_const(b, lane, value));
        let vectors = lanes.map(|ty| scalars.map(|value| b.ins().splat(ty, value)));
        // Flags OR-ed over the indices: out of range (bad), and (where wrapping) negative.
        let bad = b.declare_var(I8);
        let negative = b.declare_var(I8);
        let no = b.ins().iconst(I8, 0);
        b.def_var(bad, no);
        b.def_var(negative, no);
        let vector_flags = vectors.map(|_| {
            let ty = lanes.unwrap_or(I64X2);
            let zero = b.ins().iconst(ty.lane_type(), 0);
            let zeros = b.ins().splat(ty, zero);
            let (bad, negative) = (b.declare_var(ty), b.declare_var(ty));
            b.def_var(bad, zeros);
            b.def_var(negative, zeros);
            (bad, negative)
        });
        let flag = |b: &mut FunctionBuilder, var, value| {
            let old = b.use_var(var);
            let new = b.ins().bor(old, value);
            b.def_var(var, new);
        };
        for_groups(b, self.layout.indices_len(), width, |b, start, count| {
            let offset = mul_const(b, start, size as i64);
            let at = b.ins().iadd(self.indices, offset);
            if let (Some(ty), Some([high, low]), Some((bad, negative)), true) =
                (lanes, vectors, vector_flags, count == width)
            {
                for v in 0..2 {
                    let x = b.ins().load(ty, flags(), at, v * 16);
                    let above = b.ins().icmp(IntCC::SignedGreaterThan, x, high);
                    let below = b.ins().icmp(IntCC::SignedGreaterThan, low, x);
                    let out = b.ins().bor(above, below);
                    flag(b, bad, out);
                    if wraps {
                        flag(b, negative, x);
                    }
                }
                return;
            }
            for k in 0..count {
                let x = policy::load_index(b, index_type, flags(), at, (k * size) as i32);
                let x = if lane == I64 {
                    x
                } else {
                    b.ins().ireduce(lane, x)
                };
                let above = b.ins().icmp(IntCC::SignedGreaterThan, x, scalars[0]);
                let below = b.ins().icmp(IntCC::SignedGreaterThan, scalars[1], x);
                let out = b.ins().bor(above, below);
                flag(b, bad, out);
                if wraps {
                    let sign = b.ins().icmp_imm_s(IntCC::SignedLessThan, x, 0);
                    flag(b, negative, sign);
                }
            }
        });
        let mut any_bad = b.use_var(bad);
        let mut any_negative = b.use_var(negative);
        if let Some((bad, negative)) = vector_flags {
            let lanes_bad = b.use_var(bad);
            let lanes_bad = b.ins().vany_true(lanes_bad);
            any_bad = b.ins().bor(any_bad, lanes_bad);
            let signs = b.use_var(negative);
            let zero = b.ins().iconst(lane, 0);
            let zeros = b.ins().splat(lanes.unwrap_or(I64X2), zero);
            let signs = b.ins().icmp(IntCC::SignedLessThan, signs, zeros);
            let lanes_negative = b.ins().vany_true(signs);
            any_negative = b.ins().bor(any_negative, lanes_negative);
        }
        Scan {
            any_bad,
            any_negative,
        }
    }

    /// Whether a negative index wraps (a signed index type under [`NegativeIndices::Wrap`]).
    fn wraps(&self) -> bool {
        self.layout.signature().index_type.is_signed()
            && self.policy().negative == NegativeIndices::Wrap
    }

    /// Every index in row-major order; the first out of range jumps to `reject`.
    fn first_bad_index(&self, b: &mut FunctionBuilder, reject: Block) {
        let sig = self.layout.signature();
        let index_type = sig.index_type;
        let size = index_type.size();
        let (count, dims): (usize, Vec<usize>) = match self.layout.op() {
            ResolvedScatter::Nd { index_depth } => (
                self.layout.index_count(),
                sig.data_shape[..index_depth].to_vec(),
            ),
            ResolvedScatter::Elements { axis } | ResolvedScatter::Update { axis } => {
                (self.layout.indices_len(), vec![sig.data_shape[axis]])
            }
        };
        let width = dims.len();
        for_range(b, count, |b, i| {
            let row = mul_const(b, i, (width * size) as i64);
            let at = b.ins().iadd(self.indices, row);
            for (j, &dim) in dims.iter().enumerate() {
                let value = policy::load_index(b, index_type, flags(), at, (j * size) as i32);
                let value = policy::wrap_negative(b, index_type, self.policy(), value, dim as i64);
                let bad = policy::out_of_range(b, value, dim as i64);
                let next = b.create_block();
                let position = mul_const(b, i, width as i64);
                let position = add_const(b, position, j as i64);
                b.ins()
                    .brif(bad, reject, &[BlockArg::from(position)], next, &[]);
                b.switch_to_block(next);
                b.seal_block(next);
            }
        });
    }

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
    fn each_write(
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
                    for k in 0..count {
                        let index =
                            self.resolved_index(b, at, (k * size) as i32, data[axis], guarded);
                        let scaled = mul_const(b, index, data_strides[axis] as i64);
                        let target = b.ins().iadd(target, scaled);
                        let extra = if along_last { 0 } else { k as i64 };
                        let w = self.write_at(b, target, extra, flat, k as i64);
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
    fn write_slice(&self, b: &mut FunctionBuilder, write: &Write) {
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
    fn write_neutral(&self, b: &mut FunctionBuilder, write: &Write) {
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
