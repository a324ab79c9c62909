//! Half-precision conversions as CLIF, for every lowering that reads or writes `f16` and
//! `bf16` through `f32`: in integer instructions only, so that such a kernel calls nothing
//! (Cranelift lowers `fdemote` to `f16` to a libcall on x86-64, and kernels compiled for
//! other targets may refer to no symbol but memcpy, memmove and memset).

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::types::{F32, I32};
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Value};
use cranelift_frontend::FunctionBuilder;

use crate::types::Bf16Rounding;

/// `value` (an `f32`) rounded to `f16`, as bits in the low half of an `i32`: nearest with
/// ties to even, too large to infinity, subnormal results rounded once, and a NaN quietened
/// with the top ten bits of its payload kept. These are the bits of
/// `half::f16::from_f32(value)` for every `f32` (the tests check all 2^32).
pub(crate) fn f32_to_f16(b: &mut FunctionBuilder, value: Value) -> Value {
    let bits = b.ins().bitcast(I32, MemFlagsData::new(), value);
    let magnitude = b.ins().band_imm_s(bits, 0x7fff_ffff);
    let sign = b.ins().bxor(bits, magnitude);
    let sign = b.ins().ushr_imm_s(sign, 16);
    // Finite values beyond f16's range, and infinities, become 65536, which rounds (as any
    // value from 65520 up does) to infinity.
    let largest = b.ins().iconst(I32, 143 << 23);
    let clamped = b.ins().umin(magnitude, largest);
    let exponent = b.ins().ushr_imm_s(clamped, 23);
    // One path for normal and subnormal results. With the exponent `e` capped at 113 (f16's
    // smallest normal one), `fields` is the f16 exponent (1 for every subnormal result) above
    // the mantissa and its implicit bit, of which 13 + (113 - e) bits, at most 25 (past that
    // not even a rounding carry is left), are rounded off by adding just under half their
    // weight plus the lowest kept bit: nearest, ties to even. A carry out of the mantissa
    // raises the exponent: to the smallest normal, or to infinity past 65504.
    let smallest_normal = b.ins().iconst(I32, 113);
    let capped = b.ins().umin(exponent, smallest_normal);
    let rebias = b.ins().iadd_imm_s(capped, -1);
    let rebias = b.ins().ishl_imm_s(rebias, 23);
    let fields = b.ins().isub(clamped, rebias);
    // The shift is 25 - excess, and just under half the lowest kept bit's weight,
    // 2^(shift - 1) - 1, is 0xffffff >> excess.
    let excess = b.ins().iadd_imm_s(capped, -101);
    let zero = b.ins().iconst(I32, 0);
    let excess = b.ins().smax(excess, zero);
    let widest = b.ins().iconst(I32, 25);
    let shift = b.ins().isub(widest, excess);
    let below_half = b.ins().iconst(I32, 0xff_ffff);
    let below_half = b.ins().ushr(below_half, excess);
    let kept = b.ins().ushr(fields, shift);
    let kept_low = b.ins().band_imm_s(kept, 1);
    let rounded = b.ins().iadd(fields, below_half);
    let rounded = b.ins().iadd(rounded, kept_low);
    let rounded = b.ins().ushr(rounded, shift);
    // A NaN: quiet, with the top ten bits of its payload.
    let payload = b.ins().ushr_imm_s(magnitude, 13);
    let payload = b.ins().band_imm_s(payload, 0x3ff);
    let nan = b.ins().bor_imm_s(payload, 0x7e00);
    let is_nan = b
        .ins()
        .icmp_imm_s(IntCC::UnsignedGreaterThan, magnitude, 0x7f80_0000);
    let result = b.ins().select(is_nan, nan, rounded);
    b.ins().bor(result, sign)
}

/// The `f32` of `f16` bits (in the low half of an `i32`), exactly: the exponent and mantissa
/// moved into place and rebiased by a multiplication by 2^112, which also normalises
/// subnormals; infinities and NaNs get the all-ones exponent.
pub(crate) fn f16_to_f32(b: &mut FunctionBuilder, bits: Value) -> Value {
    let magnitude = b.ins().band_imm_s(bits, 0x7fff);
    let sign = b.ins().band_imm_s(bits, 0x8000);
    let sign = b.ins().ishl_imm_s(sign, 16);
    let moved = b.ins().ishl_imm_s(magnitude, 13);
    let finite = b.ins().bitcast(F32, MemFlagsData::new(), moved);
    let rebias = b.ins().f32const(f32::from_bits(0x7780_0000));
    let finite = b.ins().fmul(finite, rebias);
    let finite = b.ins().bitcast(I32, MemFlagsData::new(), finite);
    let special = b.ins().bor_imm_s(moved, 0x7f80_0000);
    let is_special = b
        .ins()
        .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, magnitude, 0x7c00);
    let magnitude = b.ins().select(is_special, special, finite);
    let value = b.ins().bor(magnitude, sign);
    b.ins().bitcast(F32, MemFlagsData::new(), value)
}

/// The `f32` of `bf16` bits (in the low half of an `i32`): the bits moved up.
pub(crate) fn bf16_to_f32(b: &mut FunctionBuilder, bits: Value) -> Value {
    let bits = b.ins().ishl_imm_s(bits, 16);
    b.ins().bitcast(F32, MemFlagsData::new(), bits)
}

/// `value` (an `f32`) rounded to `bf16` as `rounding` does, as bits in the low half of an
/// `i32` ([`Bf16Rounding::round`]).
pub(crate) fn f32_to_bf16(b: &mut FunctionBuilder, value: Value, rounding: Bf16Rounding) -> Value {
    let bits = b.ins().bitcast(I32, MemFlagsData::new(), value);
    match rounding {
        Bf16Rounding::NearestEven => {
            // Nearest, ties to even; a NaN stays a NaN (quietened), as `half::bf16::from_f32`.
            let lsb = b.ins().ushr_imm_s(bits, 16);
            let lsb = b.ins().band_imm_s(lsb, 1);
            let bias = b.ins().iadd_imm_s(lsb, 0x7fff);
            let rounded = b.ins().iadd(bits, bias);
            let rounded = b.ins().ushr_imm_s(rounded, 16);
            let quiet = b.ins().ushr_imm_s(bits, 16);
            let quiet = b.ins().bor_imm_s(quiet, 0x40);
            let nan = b.ins().fcmp(FloatCC::Unordered, value, value);
            b.ins().select(nan, quiet, rounded)
        }
        Bf16Rounding::OpenVino => {
            // `(b + ((b & 0x1_0000) >> 1)) >> 16`, wrapping.
            let kept_low = b.ins().band_imm_s(bits, 0x1_0000);
            let half = b.ins().ushr_imm_s(kept_low, 1);
            let rounded = b.ins().iadd(bits, half);
            b.ins().ushr_imm_s(rounded, 16)
        }
    }
}

#[cfg(test)]
mod tests;
