//! One value or one block at a time: packed values, scales and zero points, the stores of each
//! output type, and the SIMD path that dequantizes whole blocks into `f32`.

use super::*;

impl Lower<'_> {
    /// Value `n` (an `i64`) of `base`'s packed unsigned values, as an `i32`.
    pub(super) fn packed(&mut self, b: &mut FunctionBuilder, base: Value, n: Value) -> Value {
        if self.layout.bits() == 8 {
            let at = b.ins().iadd(base, n);
            return b.ins().uload8(I32, flags(), at, 0);
        }
        let byte = b.ins().ushr_imm_s(n, 1);
        let at = b.ins().iadd(base, byte);
        let value = b.ins().uload8(I32, flags(), at, 0);
        let odd = b.ins().band_imm_s(n, 1);
        let odd = b.ins().ireduce(I32, odd);
        let shift = b.ins().ishl_imm_s(odd, 2);
        let value = b.ins().ushr(value, shift);
        b.ins().band_imm_s(value, 0xf)
    }

    /// `(value - zero_point) * scale` in `f32`.
    pub(super) fn dequantize(
        &mut self,
        b: &mut FunctionBuilder,
        value: Value,
        zero_point: Value,
        scale: Value,
    ) -> Value {
        let centred = b.ins().isub(value, zero_point);
        let centred = b.ins().fcvt_from_sint(F32, centred);
        b.ins().fmul(centred, scale)
    }

    /// Scale `index` (an `i64`) as an `f32`.
    pub(super) fn load_scale(&mut self, b: &mut FunctionBuilder, index: Value) -> Value {
        let dtype = self.layout.signature().dtype;
        let offset = b.ins().imul_imm_s(index, dtype.size() as i64);
        let at = b.ins().iadd(self.scales, offset);
        match dtype {
            DType::F16 => {
                let bits = b.ins().uload16(I32, flags(), at, 0);
                f16_to_f32(b, bits)
            }
            DType::Bf16 => {
                let bits = b.ins().uload16(I32, flags(), at, 0);
                bf16_to_f32(b, bits)
            }
            _ => b.ins().load(F32, flags(), at, 0),
        }
    }

    /// Stores an `f32` as the output type, rounded once, and moves the output on.
    pub(super) fn store_scalar(&mut self, b: &mut FunctionBuilder, value: Value) {
        let out = b.use_var(self.out);
        let dtype = self.layout.signature().dtype;
        match dtype {
            DType::F16 => {
                let bits = f32_to_f16(b, value);
                b.ins().istore16(flags(), bits, out, 0);
            }
            DType::Bf16 => {
                let bits = f32_to_bf16(b, value, Bf16Rounding::NearestEven);
                b.ins().istore16(flags(), bits, out, 0);
            }
            _ => {
                b.ins().store(flags(), value, out, 0);
            }
        }
        let moved = b.ins().iadd_imm_s(out, dtype.size() as i64);
        b.def_var(self.out, moved);
    }

    /// GGUF value `j` (an `i64`, below 32) of the block at `block`, centred, as an `f32`.
    pub(super) fn gguf_scalar(
        &mut self,
        b: &mut FunctionBuilder,
        format: GgufFormat,
        block: Value,
        j: Value,
    ) -> Value {
        let quants = b.ins().iadd_imm_s(block, 2);
        let q = match format {
            GgufFormat::Q4_0 => {
                let byte = b.ins().band_imm_s(j, 15);
                let at = b.ins().iadd(quants, byte);
                let value = b.ins().uload8(I32, flags(), at, 0);
                let high = b.ins().ushr_imm_s(j, 4);
                let high = b.ins().ireduce(I32, high);
                let shift = b.ins().ishl_imm_s(high, 2);
                let value = b.ins().ushr(value, shift);
                let value = b.ins().band_imm_s(value, 0xf);
                b.ins().iadd_imm_s(value, -8)
            }
            GgufFormat::Q8_0 => {
                let at = b.ins().iadd(quants, j);
                b.ins().sload8(I32, flags(), at, 0)
            }
        };
        b.ins().fcvt_from_sint(F32, q)
    }

    /// A whole block of block quantization starting at logical value `first`, into `f32`
    /// output: 32 values a step from 16 bytes (4 bits, blocks of 32 or more), else 16 values
    /// from 8 or 16 bytes; steps unrolled up to four.
    pub(super) fn block_simd(
        &mut self,
        b: &mut FunctionBuilder,
        bits: u8,
        first: Value,
        zero_point: Option<Value>,
        scale: Value,
    ) {
        let block = self.layout.block_size;
        let scale = b.ins().splat(F32X4, scale);
        let byte = if bits == 4 {
            b.ins().ushr_imm_s(first, 1)
        } else {
            first
        };
        let base = b.ins().iadd(self.data, byte);
        let zero_point = match zero_point {
            Some(zp) if bits == 4 => {
                let zp = b.ins().ireduce(I8, zp);
                b.ins().splat(I8X16, zp)
            }
            Some(zp) => {
                let zp = b.ins().ireduce(I16, zp);
                b.ins().splat(I16X8, zp)
            }
            None => self.default_zero_point,
        };
        let nibble = self.nibble;
        let wide = bits == 4 && block >= 32;
        let step_values = if wide { 32 } else { 16 };
        let step_bytes = step_values * usize::from(bits) / 8;
        let step = |this: &mut Self, b: &mut FunctionBuilder, at: Value| {
            if bits == 8 {
                let raw = b.ins().load(I8X16, flags(), at, 0);
                let low = b.ins().uwiden_low(raw);
                let high = b.ins().uwiden_high(raw);
                let halves = [
                    b.ins().isub(low, zero_point),
                    b.ins().isub(high, zero_point),
                ];
                this.store_i16x8(b, halves, scale);
                return;
            }
            // Low nibbles are the even values, high nibbles the odd ones: interleaved back.
            let raw = if wide {
                b.ins().load(I8X16, flags(), at, 0)
            } else {
                let raw = b.ins().load(I64, flags(), at, 0);
                let raw = b.ins().scalar_to_vector(I64X2, raw);
                b.ins().bitcast(I8X16, little(), raw)
            };
            let low = b.ins().band(raw, nibble);
            let four = b.ins().iconst(I32, 4);
            let high = b.ins().ushr(raw, four);
            let mut groups = vec![interleave(b, 0)];
            if wide {
                groups.push(interleave(b, 8));
            }
            for mask in groups {
                let values = b.ins().shuffle(low, high, mask);
                let centred = b.ins().isub(values, zero_point);
                let halves = [b.ins().swiden_low(centred), b.ins().swiden_high(centred)];
                this.store_i16x8(b, halves, scale);
            }
        };
        let steps = block / step_values;
        if steps <= 4 {
            for k in 0..steps {
                let at = b.ins().iadd_imm_s(base, (k * step_bytes) as i64);
                step(self, b, at);
            }
        } else {
            for_range(b, steps, |b, k| {
                let offset = b.ins().imul_imm_s(k, step_bytes as i64);
                let at = b.ins().iadd(base, offset);
                step(self, b, at);
            });
        }
    }

    /// A whole GGUF block at `block` into `f32` output.
    pub(super) fn gguf_simd(
        &mut self,
        b: &mut FunctionBuilder,
        format: GgufFormat,
        block: Value,
        scale: Value,
    ) {
        let scale = b.ins().splat(F32X4, scale);
        match format {
            GgufFormat::Q4_0 => {
                let raw = b.ins().load(I8X16, flags(), block, 2);
                let low = b.ins().band(raw, self.nibble);
                let four = b.ins().iconst(I32, 4);
                let high = b.ins().ushr(raw, four);
                // Q4_0's zero point is 8, the hoisted default.
                let eight = self.default_zero_point;
                for values in [low, high] {
                    let centred = b.ins().isub(values, eight);
                    let halves = [b.ins().swiden_low(centred), b.ins().swiden_high(centred)];
                    self.store_i16x8(b, halves, scale);
                }
            }
            GgufFormat::Q8_0 => {
                for offset in [2, 18] {
                    let raw = b.ins().load(I8X16, flags(), block, offset);
                    let halves = [b.ins().swiden_low(raw), b.ins().swiden_high(raw)];
                    self.store_i16x8(b, halves, scale);
                }
            }
        }
    }

    /// Sixteen `i16` values (two vectors) converted, scaled and stored as `f32`; moves the
    /// output on.
    pub(super) fn store_i16x8(
        &mut self,
        b: &mut FunctionBuilder,
        halves: [Value; 2],
        scale: Value,
    ) {
        let out = b.use_var(self.out);
        let mut offset = 0;
        for half in halves {
            for quarter in [b.ins().swiden_low(half), b.ins().swiden_high(half)] {
                debug_assert_eq!(b.func.dfg.value_type(quarter), I32X4);
                let floats = b.ins().fcvt_from_sint(F32X4, quarter);
                let scaled = b.ins().fmul(floats, scale);
                b.ins().store(flags(), scaled, out, offset);
                offset += 16;
            }
        }
        let moved = b.ins().iadd_imm_s(out, i64::from(offset));
        b.def_var(self.out, moved);
    }
}

/// Lane order for bitcasts between vector types (the host's, little-endian).
pub(super) fn little() -> MemFlagsData {
    MemFlagsData::new().with_endianness(Endianness::Little)
}

/// The shuffle mask taking lanes `from..from + 8` of `a` and `b` alternately (`a0 b0 a1 b1
/// ...` for `from` 0).
pub(super) fn interleave(b: &mut FunctionBuilder, from: u8) -> cranelift_codegen::ir::Immediate {
    let lanes: Vec<u8> = (from..from + 8).flat_map(|i| [i, 16 + i]).collect();
    b.func.dfg.immediates.push(ConstantData::from(lanes))
}
