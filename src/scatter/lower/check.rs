//! Pass 1 of a scatter's kernel: every index checked before anything is written, the one-dim
//! ops' indices first scanned with no branch per index.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{I8, I32X4, I64, I64X2};
use cranelift_codegen::ir::{Block, BlockArg, InstBuilder, Type, Value};
use cranelift_frontend::{FunctionBuilder, Variable};

use super::{Lowering, flags};
use crate::codegen::loops::{add_const, for_groups, for_range, mul_const};
use crate::codegen::policy;
use crate::scatter::ResolvedScatter;
use crate::types::{IndexType, NegativeIndices};

/// What [`Lowering::scan_indices`] found, as `i8` flags.
struct Scan {
    any_bad: Value,
    any_negative: Value,
}

/// The vector half of [`Lowering::scan_indices`]: the lane type, its zeros, the bounds `[dim -
/// 1, lowest]` in every lane, and the two flags' variables.
struct VectorScan {
    ty: Type,
    zeros: Value,
    bounds: [Value; 2],
    bad: Variable,
    negative: Variable,
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

impl Lowering<'_> {
    /// Pass 1: every index in row-major order against its dimension; the first bad one jumps
    /// to `reject` with its element position. Indices into one dimension (ScatterElements,
    /// ScatterUpdate) are first scanned without a branch per index ([`Self::scan_indices`]);
    /// only when that finds a bad one does the scan below look for the first. Returns, for
    /// those, whether any index is negative.
    pub(super) fn check_indices(&self, b: &mut FunctionBuilder, reject: Block) -> Option<Value> {
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
        // Flags OR-ed over the indices: out of range (bad), and (where wrapping) negative; as
        // `i8` for the indices taken one at a time, as lane masks (bad) and the indices' own
        // sign bits (negative) for those taken in vectors.
        let bad = b.declare_var(I8);
        let negative = b.declare_var(I8);
        let no = b.ins().iconst(I8, 0);
        b.def_var(bad, no);
        b.def_var(negative, no);
        let vector = lanes.map(|ty| {
            let zero = b.ins().iconst(lane, 0);
            let zeros = b.ins().splat(ty, zero);
            let (bad, negative) = (b.declare_var(ty), b.declare_var(ty));
            b.def_var(bad, zeros);
            b.def_var(negative, zeros);
            VectorScan {
                ty,
                zeros,
                bounds: scalars.map(|value| b.ins().splat(ty, value)),
                bad,
                negative,
            }
        });
        let flag = |b: &mut FunctionBuilder, var, value| {
            let old = b.use_var(var);
            let new = b.ins().bor(old, value);
            b.def_var(var, new);
        };
        for_groups(b, self.layout.indices_len(), width, |b, start, count| {
            let offset = mul_const(b, start, size as i64);
            let at = b.ins().iadd(self.indices, offset);
            if let (Some(v), true) = (&vector, count == width) {
                let [high, low] = v.bounds;
                for offset in [0, 16] {
                    let x = b.ins().load(v.ty, flags(), at, offset);
                    let above = b.ins().icmp(IntCC::SignedGreaterThan, x, high);
                    let below = b.ins().icmp(IntCC::SignedGreaterThan, low, x);
                    let out = b.ins().bor(above, below);
                    flag(b, v.bad, out);
                    if wraps {
                        flag(b, v.negative, x);
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
        if let Some(v) = vector {
            let lanes_bad = b.use_var(v.bad);
            let lanes_bad = b.ins().vany_true(lanes_bad);
            any_bad = b.ins().bor(any_bad, lanes_bad);
            let signs = b.use_var(v.negative);
            let signs = b.ins().icmp(IntCC::SignedLessThan, signs, v.zeros);
            let lanes_negative = b.ins().vany_true(signs);
            any_negative = b.ins().bor(any_negative, lanes_negative);
        }
        Scan {
            any_bad,
            any_negative,
        }
    }

    /// Whether a negative index wraps (a signed index type under [`NegativeIndices::Wrap`]).
    pub(super) fn wraps(&self) -> bool {
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
}
