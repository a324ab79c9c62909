//! `f32` to `f16` rounding in integer instructions only, so that a kernel with `f16` output
//! calls nothing (Cranelift lowers `fdemote` to `f16` to a libcall on x86-64, and kernels
//! compiled for other targets may refer to no symbol but memcpy, memmove and memset).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::I32;
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Value};
use cranelift_frontend::FunctionBuilder;

/// `value` (an `f32`) rounded to `f16`, as bits in the low half of an `i32`: nearest with
/// ties to even, too large to infinity, subnormal results rounded once, and a NaN quietened
/// with the top ten bits of its payload kept. These are the bits of
/// `half::f16::from_f32(value)` for every `f32` (the tests check all 2^32).
pub(super) fn f32_to_f16(b: &mut FunctionBuilder, value: Value) -> Value {
    let bits = b.ins().bitcast(I32, MemFlagsData::new(), value);
    let sign = b.ins().ushr_imm_s(bits, 16);
    let sign = b.ins().band_imm_s(sign, 0x8000);
    let magnitude = b.ins().band_imm_s(bits, 0x7fff_ffff);

    // Normal results (exponent 113 to 142): the exponent rebiased from 127 to 15, then 13
    // mantissa bits rounded off by adding just under half their weight plus the kept lowest
    // bit; a carry out of the mantissa raises the exponent, to infinity past 65504.
    let rebiased = b.ins().iadd_imm_s(magnitude, -(112 << 23));
    let kept_low = b.ins().ushr_imm_s(magnitude, 13);
    let kept_low = b.ins().band_imm_s(kept_low, 1);
    let rounding = b.ins().iadd_imm_s(kept_low, 0xfff);
    let normal = b.ins().iadd(rebiased, rounding);
    let normal = b.ins().ushr_imm_s(normal, 13);

    // Subnormal results (exponent 112 and below): the mantissa with its implicit bit, shifted
    // right by 126 - exponent and rounded the same way. A shift of 25 leaves nothing, not
    // even a carry, so larger shifts (and the wrapped ones of exponents the select discards)
    // are clamped to it, below the shift instructions' modulus of 32.
    let exponent = b.ins().ushr_imm_s(magnitude, 23);
    let top = b.ins().iconst(I32, 126);
    let shift = b.ins().isub(top, exponent);
    let most = b.ins().iconst(I32, 25);
    let shift = b.ins().umin(shift, most);
    let mantissa = b.ins().band_imm_s(magnitude, 0x7f_ffff);
    let mantissa = b.ins().bor_imm_s(mantissa, 0x80_0000);
    let kept = b.ins().ushr(mantissa, shift);
    let kept_low = b.ins().band_imm_s(kept, 1);
    let below = b.ins().iadd_imm_s(shift, -1);
    let one = b.ins().iconst(I32, 1);
    let half = b.ins().ishl(one, below);
    let rounding = b.ins().iadd_imm_s(half, -1);
    let rounding = b.ins().iadd(rounding, kept_low);
    let subnormal = b.ins().iadd(mantissa, rounding);
    let subnormal = b.ins().ushr(subnormal, shift);

    let is_subnormal = b
        .ins()
        .icmp_imm_s(IntCC::UnsignedLessThan, magnitude, 113 << 23);
    let finite = b.ins().select(is_subnormal, subnormal, normal);
    // Exponent 143 and above (65536 and beyond, infinity): infinity.
    let is_large = b
        .ins()
        .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, magnitude, 143 << 23);
    let infinity = b.ins().iconst(I32, 0x7c00);
    let result = b.ins().select(is_large, infinity, finite);
    let payload = b.ins().ushr_imm_s(magnitude, 13);
    let payload = b.ins().band_imm_s(payload, 0x3ff);
    let nan = b.ins().bor_imm_s(payload, 0x7e00);
    let is_nan = b
        .ins()
        .icmp_imm_s(IntCC::UnsignedGreaterThan, magnitude, 0x7f80_0000);
    let result = b.ins().select(is_nan, nan, result);
    b.ins().bor(result, sign)
}

#[cfg(test)]
mod tests;
