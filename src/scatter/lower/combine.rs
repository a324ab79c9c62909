//! The arithmetic of one update as CLIF, the compiled twin of `super::super::reduce`: the same
//! rules (integers wrap; `f16`/`bf16` compute in `f32` and round once per update; `min`/`max`
//! keep one operand's bits, the flavor's ties deciding; `bool` is or/and/xor), element by
//! element, or 16 bytes at a time where lanes compute exactly as scalars do (`sum`, `sub` and
//! `mean` on integers and `f32`/`f64`, `prod` on `f32`/`f64`).

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::types::{
    F32, F32X4, F64, F64X2, I8, I8X16, I16, I16X8, I32, I32X4, I64, I64X2,
};
use cranelift_codegen::ir::{InstBuilder, Type, Value};
use cranelift_frontend::FunctionBuilder;

use super::flags;
use crate::codegen::half::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
use crate::codegen::loops::{add_const, for_range, mul_const};
use crate::scatter::{Bf16Rounding, Reduction, ScatterLayout, TieBreak, neutral_bits};
use crate::types::DType;

/// What decides the code of one update.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Arithmetic {
    dtype: DType,
    reduction: Reduction,
    ties: TieBreak,
    bf16: Bf16Rounding,
}

impl Arithmetic {
    pub(crate) fn of(layout: &ScatterLayout) -> Arithmetic {
        let sig = layout.signature();
        Arithmetic {
            dtype: sig.dtype,
            reduction: sig.reduction,
            ties: sig.flavor.tie_break(),
            bf16: sig.flavor.bf16_rounding(),
        }
    }

    /// The 16-byte vector type whose lanes compute this reduction exactly as one element at a
    /// time does, if there is one.
    pub(crate) fn vector_type(&self) -> Option<Type> {
        let float = match self.dtype {
            DType::F32 => Some(F32X4),
            DType::F64 => Some(F64X2),
            _ => None,
        };
        let integer = match self.dtype {
            DType::I8 | DType::U8 => Some(I8X16),
            DType::I16 | DType::U16 => Some(I16X8),
            DType::I32 | DType::U32 => Some(I32X4),
            DType::I64 | DType::U64 => Some(I64X2),
            _ => None,
        };
        match self.reduction {
            Reduction::Sum | Reduction::Sub | Reduction::Mean => float.or(integer),
            Reduction::Prod => float,
            Reduction::None | Reduction::Min | Reduction::Max => None,
        }
    }

    /// Folds `bytes` bytes of updates at `source` into the elements at `dest`.
    pub(crate) fn combine_slice(
        &self,
        b: &mut FunctionBuilder,
        dest: Value,
        source: Value,
        bytes: u64,
    ) {
        let element = self.dtype.size() as u64;
        let (vectors, rest) = match self.vector_type() {
            Some(_) => (bytes / 16, bytes % 16 / element),
            None => (0, bytes / element),
        };
        if let Some(ty) = self.vector_type().filter(|_| vectors > 0) {
            // Four vectors a trip while they last, then one at a time.
            let unrolled = vectors / 4;
            self.vector_trips(b, ty, dest, source, 0, unrolled as usize, 4);
            self.vector_trips(
                b,
                ty,
                dest,
                source,
                unrolled * 64,
                (vectors % 4) as usize,
                1,
            );
        }
        let start = vectors * 16;
        if rest <= 4 {
            for e in 0..rest {
                let offset = (start + e * element) as i32;
                self.combine_element(b, dest, source, offset);
            }
            return;
        }
        for_range(b, rest as usize, |b, e| {
            let offset = mul_const(b, e, element as i64);
            let offset = add_const(b, offset, start as i64);
            let pointer = b.func.dfg.value_type(dest);
            let offset = if pointer == I64 {
                offset
            } else {
                b.ins().ireduce(pointer, offset)
            };
            let d = b.ins().iadd(dest, offset);
            let s = b.ins().iadd(source, offset);
            self.combine_element(b, d, s, 0);
        });
    }

    /// `trips` trips of `per_trip` vectors each, from byte `start`.
    #[allow(clippy::too_many_arguments)]
    fn vector_trips(
        &self,
        b: &mut FunctionBuilder,
        ty: Type,
        dest: Value,
        source: Value,
        start: u64,
        trips: usize,
        per_trip: u64,
    ) {
        let pointer = b.func.dfg.value_type(dest);
        for_range(b, trips, |b, trip| {
            let offset = mul_const(b, trip, (per_trip * 16) as i64);
            let offset = add_const(b, offset, start as i64);
            let offset = if pointer == I64 {
                offset
            } else {
                b.ins().ireduce(pointer, offset)
            };
            let d = b.ins().iadd(dest, offset);
            let s = b.ins().iadd(source, offset);
            for k in 0..per_trip as i32 {
                let current = b.ins().load(ty, flags(), d, k * 16);
                let update = b.ins().load(ty, flags(), s, k * 16);
                let result = self.arithmetic(b, current, update);
                b.ins().store(flags(), result, d, k * 16);
            }
        });
    }

    /// `sum`, `sub` or `prod` of two values of one type (integer or float, scalar or vector).
    fn arithmetic(&self, b: &mut FunctionBuilder, current: Value, update: Value) -> Value {
        let float = b.func.dfg.value_type(current).lane_type().is_float();
        match (self.reduction, float) {
            (Reduction::Sum | Reduction::Mean, true) => b.ins().fadd(current, update),
            (Reduction::Sum | Reduction::Mean, false) => b.ins().iadd(current, update),
            (Reduction::Sub, true) => b.ins().fsub(current, update),
            (Reduction::Sub, false) => b.ins().isub(current, update),
            (Reduction::Prod, true) => b.ins().fmul(current, update),
            (Reduction::Prod, false) => b.ins().imul(current, update),
            (Reduction::None | Reduction::Min | Reduction::Max, _) => {
                unreachable!("not an arithmetic reduction")
            }
        }
    }

    /// Folds the update at `source + offset` into the element at `dest + offset`.
    fn combine_element(&self, b: &mut FunctionBuilder, dest: Value, source: Value, offset: i32) {
        let f = flags();
        match self.dtype {
            DType::F32 | DType::F64 => {
                let ty = if self.dtype == DType::F32 { F32 } else { F64 };
                let current = b.ins().load(ty, f, dest, offset);
                let update = b.ins().load(ty, f, source, offset);
                let result = match self.reduction {
                    Reduction::Min | Reduction::Max => {
                        let keep = self.keeps_current(b, current, update);
                        b.ins().select(keep, current, update)
                    }
                    _ => self.arithmetic(b, current, update),
                };
                b.ins().store(f, result, dest, offset);
            }
            DType::F16 | DType::Bf16 => {
                let current = b.ins().uload16(I32, f, dest, offset);
                let update = b.ins().uload16(I32, f, source, offset);
                let (c, u) = match self.dtype {
                    DType::F16 => (f16_to_f32(b, current), f16_to_f32(b, update)),
                    _ => (bf16_to_f32(b, current), bf16_to_f32(b, update)),
                };
                let result = match self.reduction {
                    Reduction::Min | Reduction::Max => {
                        let keep = self.keeps_current(b, c, u);
                        b.ins().select(keep, current, update)
                    }
                    _ => {
                        let value = self.arithmetic(b, c, u);
                        match self.dtype {
                            DType::F16 => f32_to_f16(b, value),
                            _ => f32_to_bf16(b, value, self.bf16),
                        }
                    }
                };
                b.ins().istore16(f, result, dest, offset);
            }
            DType::Bool => {
                let current = b.ins().load(I8, f, dest, offset);
                let update = b.ins().load(I8, f, source, offset);
                let c = b.ins().icmp_imm_s(IntCC::NotEqual, current, 0);
                let u = b.ins().icmp_imm_s(IntCC::NotEqual, update, 0);
                let result = match self.reduction {
                    Reduction::Sum | Reduction::Max | Reduction::Mean => b.ins().bor(c, u),
                    Reduction::Prod | Reduction::Min => b.ins().band(c, u),
                    Reduction::Sub => b.ins().bxor(c, u),
                    Reduction::None => update,
                };
                b.ins().store(f, result, dest, offset);
            }
            integer => {
                let ty = match integer.size() {
                    1 => I8,
                    2 => I16,
                    4 => I32,
                    _ => I64,
                };
                let signed = matches!(integer, DType::I8 | DType::I16 | DType::I32 | DType::I64);
                let current = b.ins().load(ty, f, dest, offset);
                let update = b.ins().load(ty, f, source, offset);
                let result = match self.reduction {
                    Reduction::Max | Reduction::Min => {
                        let greater = match signed {
                            true => IntCC::SignedGreaterThan,
                            false => IntCC::UnsignedGreaterThan,
                        };
                        let current_greater = b.ins().icmp(greater, current, update);
                        if self.reduction == Reduction::Max {
                            b.ins().select(current_greater, current, update)
                        } else {
                            b.ins().select(current_greater, update, current)
                        }
                    }
                    _ => self.arithmetic(b, current, update),
                };
                b.ins().store(f, result, dest, offset);
            }
        }
    }

    /// Whether `max` (or `min`) keeps the current element, comparing the float values `c` and
    /// `u` (as `reduce.rs`'s `pick`).
    fn keeps_current(&self, b: &mut FunctionBuilder, c: Value, u: Value) -> Value {
        let max = self.reduction == Reduction::Max;
        match self.ties {
            // max: current > update ? current : update (min: <).
            TieBreak::Update => {
                let cc = if max {
                    FloatCC::GreaterThan
                } else {
                    FloatCC::LessThan
                };
                b.ins().fcmp(cc, c, u)
            }
            // max: keep current unless current < update (min: unless current > update).
            TieBreak::Current => {
                let cc = if max {
                    FloatCC::UnorderedOrGreaterThanOrEqual
                } else {
                    FloatCC::UnorderedOrLessThanOrEqual
                };
                b.ins().fcmp(cc, c, u)
            }
        }
    }

    /// Writes the reduction's neutral value into `elements` elements at `dest`.
    pub(crate) fn fill_neutral(&self, b: &mut FunctionBuilder, dest: Value, elements: u64) {
        let size = self.dtype.size();
        let bits = neutral_bits(self.dtype, self.reduction).unwrap_or(0);
        let ty = match size {
            1 => I8,
            2 => I16,
            4 => I32,
            _ => I64,
        };
        let value = b.ins().iconst(ty, bits as i64);
        if elements <= 8 {
            for e in 0..elements {
                b.ins()
                    .store(flags(), value, dest, (e as usize * size) as i32);
            }
            return;
        }
        let pointer = b.func.dfg.value_type(dest);
        for_range(b, elements as usize, |b, e| {
            let offset = mul_const(b, e, size as i64);
            let offset = if pointer == I64 {
                offset
            } else {
                b.ins().ireduce(pointer, offset)
            };
            let at = b.ins().iadd(dest, offset);
            b.ins().store(flags(), value, at, 0);
        });
    }
}
