//! The loop nest of a quantized gather, as Cranelift IR.
//!
//! Loops over the dims before the gather axis and over the indices resolve each index, then
//! dequantize the slice it selects. Where each scale covers a run of values along the last
//! axis (GGUF, and block quantization along the last axis after the gather axis), a block is
//! dequantized 16 values at a time in SIMD registers (nibbles split, widened, converted,
//! scaled) for `f32` output; everything else (other quantize axes, `f16`/`bf16` output,
//! partial blocks) goes one value at a time, with each value's scale and zero point.

use cranelift_codegen::ir::types::{F32, F32X4, I8, I8X16, I16, I16X8, I32, I32X4, I64, I64X2};
use cranelift_codegen::ir::{
    AbiParam, Block, BlockArg, ConstantData, Endianness, Function, InstBuilder, MemFlagsData,
    Signature, Type, Value,
};
use cranelift_codegen::isa::{CallConv, TargetFrontendConfig};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};

use super::{GgufFormat, Quantization, QuantizedLayout};
use crate::codegen::half::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
use crate::codegen::loops::{for_indices, for_range};
use crate::codegen::policy;
use crate::ir::{DType, OutOfRange};
use crate::types::Bf16Rounding;

mod values;

/// `(data, indices, scales, zero_points, output, start, end, bad_index) -> status`: the kernel
/// resolves indices `start..end` (element positions in the indices buffer) for every position
/// of the dims before the gather axis, and writes their slices; status 1 means an index was
/// rejected and its position was stored to `*bad_index`.
pub(crate) fn kernel_signature(call_conv: CallConv, pointer: Type) -> Signature {
    let mut sig = Signature::new(call_conv);
    for _ in 0..5 {
        sig.params.push(AbiParam::new(pointer)); // data, indices, scales, zero_points, output
    }
    sig.params.push(AbiParam::new(I64)); // start
    sig.params.push(AbiParam::new(I64)); // end
    sig.params.push(AbiParam::new(pointer)); // bad_index out-parameter
    sig.returns.push(AbiParam::new(I32));
    sig
}

/// Every access is to a buffer the kernel's caller checked, at an offset the layout bounds;
/// none needs alignment.
fn flags() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

/// Builds the kernel for `layout` into `func`.
pub(crate) fn lower(
    layout: &QuantizedLayout,
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
    let out = b.declare_var(config.pointer_type());
    b.def_var(out, params[4]);
    let [start, end] = [params[5], params[6]];
    let reject = b.create_block();
    b.append_block_param(reject, I64);
    // Vector constants, made once here (the entry block dominates every loop).
    let nibble = b.ins().iconst(I8, 0xf);
    let nibble = b.ins().splat(I8X16, nibble);
    let zero_point = i64::from(layout.default_zero_point());
    let zero_point = if layout.bits() == 4 {
        let zp = b.ins().iconst(I8, zero_point);
        b.ins().splat(I8X16, zp)
    } else {
        let zp = b.ins().iconst(I16, zero_point);
        b.ins().splat(I16X8, zp)
    };
    let mut lower = Lower {
        layout,
        config,
        data: params[0],
        indices: params[1],
        scales: params[2],
        zero_points: params[3],
        output: params[4],
        start,
        end,
        out,
        reject,
        nibble,
        default_zero_point: zero_point,
    };
    lower.body(&mut b);
    let ok = b.ins().iconst(I32, 0);
    b.ins().return_(&[ok]);

    policy::finish_reject_block(&mut b, reject, params[7], 1, |_, p| p);
    b.finalize(config);
}

struct Lower<'a> {
    layout: &'a QuantizedLayout,
    config: TargetFrontendConfig,
    data: Value,
    indices: Value,
    scales: Value,
    zero_points: Value,
    output: Value,
    /// The range of indices to resolve.
    start: Value,
    end: Value,
    /// The next output byte to write.
    out: Variable,
    /// Reports the index at its block parameter (an element position) as rejected.
    reject: Block,
    /// Sixteen `0x0f` bytes.
    nibble: Value,
    /// The default zero point in every lane (`i8x16` for 4 bits, `i16x8` for 8).
    default_zero_point: Value,
}

/// `a * k + c` for a constant `k`.
fn mul_add(b: &mut FunctionBuilder, a: Value, k: usize, c: Value) -> Value {
    let scaled = b.ins().imul_imm_s(a, k as i64);
    b.ins().iadd(scaled, c)
}

/// The extents of the loops over the dims before the gather axis: those before the quantize
/// axis, the quantize axis, those after it, when the quantize axis lies before the gather
/// axis (its position picks the scale); else all of them, 1, 1.
fn outer_extents(l: &QuantizedLayout) -> [usize; 3] {
    let d = &l.signature().data_shape;
    let (g, q) = (l.gather_axis, l.quantize_axis);
    if q < g {
        [
            d[..q].iter().product::<usize>(),
            d[q],
            d[q + 1..g].iter().product::<usize>(),
        ]
    } else {
        [d[..g].iter().product::<usize>(), 1, 1]
    }
}

/// The values one index selects at each position before the gather axis: the product of the
/// dims after it.
fn slice_values(l: &QuantizedLayout) -> usize {
    l.signature().data_shape[l.gather_axis + 1..]
        .iter()
        .product()
}

/// How the slices of `l` meet their scales.
fn slices(l: &QuantizedLayout) -> Slices {
    let d = &l.signature().data_shape;
    let (g, q) = (l.gather_axis, l.quantize_axis);
    match l.signature().quantization {
        Quantization::Gguf(_) => Slices::Blocked { rows: 1 },
        Quantization::Block(_) if q == d.len() - 1 && q > g => Slices::Blocked {
            rows: d[g + 1..q].iter().product(),
        },
        Quantization::Block(_) => Slices::Runs,
    }
}

/// The loop nest of the kernel for `layout`, for people (`explain` prints it).
pub(crate) fn loop_text(layout: &QuantizedLayout) -> String {
    let [p1, pq, p2] = outer_extents(layout);
    let d = &layout.signature().data_shape;
    let values = slice_values(layout);
    let simd = layout.signature().dtype == DType::F32;
    let how = match slices(layout) {
        Slices::Blocked { rows } if simd => format!(
            "{rows} row(s) of {} values, whole blocks of {} dequantized 16 values at a time",
            d[d.len() - 1],
            layout.block_size
        ),
        Slices::Blocked { rows } => format!(
            "{rows} row(s) of {} values, one value at a time",
            d[d.len() - 1]
        ),
        Slices::Runs => "runs of values, each with its own scale, one value at a time".into(),
    };
    format!(
        "loops: {p1} x {pq} x {p2} positions before the gather axis\n\
         \x20 indices: start..end of {} (the range `call_range` and `call_parallel` split)\n\
         \x20   slice: {values} values as {how}\n",
        layout.index_count()
    )
}

/// How the slice an index selects meets the scales.
#[derive(Clone, Copy)]
enum Slices {
    /// Each scale covers `block` consecutive values of a row of `row` values (the last axis);
    /// the slice is `rows` such rows.
    Blocked { rows: usize },
    /// Runs of `run` values with as many scales (and zero points), each at its own offset.
    Runs,
}

impl Lower<'_> {
    fn body(&mut self, b: &mut FunctionBuilder) {
        let l = self.layout;
        if l.output_bytes == 0 {
            // Nothing to write: the loops below would still run over every dim but the empty
            // one (2^60 iterations for data [1, 2^60, 0]), so each index is only checked, once,
            // as for the other gathers; under `Zero` nothing is checked at all.
            if l.signature().policy.out_of_range != OutOfRange::Zero {
                for_indices(b, self.start, self.end, |b, i| {
                    let next = b.create_block();
                    self.resolve(b, i, next);
                    b.ins().jump(next, &[]);
                    b.switch_to_block(next);
                    b.seal_block(next);
                });
            }
            return;
        }
        let [p1, pq, p2] = outer_extents(l);
        // The output bytes one index writes at each position before the gather axis.
        let slice_bytes = slice_values(l) * l.signature().dtype.size();
        let slices = slices(l);
        for_range(b, p1, |b, o1| {
            for_range(b, pq, |b, oq| {
                for_range(b, p2, |b, o2| {
                    // The flat position among the dims before the gather axis.
                    let o = {
                        let a = mul_add(b, o1, pq, oq);
                        mul_add(b, a, p2, o2)
                    };
                    // This position's first slice: the output is [before, indices, after].
                    let first = {
                        let a = mul_add(b, o, l.index_count(), self.start);
                        let bytes = b.ins().imul_imm_s(a, slice_bytes as i64);
                        b.ins().iadd(self.output, bytes)
                    };
                    b.def_var(self.out, first);
                    for_indices(b, self.start, self.end, |b, i| {
                        let next = b.create_block();
                        let row = self.resolve(b, i, next);
                        match slices {
                            Slices::Blocked { rows } => self.blocked(b, o, row, rows),
                            Slices::Runs => self.runs(b, o1, oq, o2, o, row),
                        }
                        b.ins().jump(next, &[]);
                        b.switch_to_block(next);
                        b.seal_block(next);
                    });
                });
            });
        });
    }

    /// Loads index `i` and applies the policy: returns the row it selects, in the current
    /// block; an index whose slice is zeros writes them and jumps to `next`; a rejected one
    /// jumps to the reject block.
    fn resolve(&mut self, b: &mut FunctionBuilder, i: Value, next: Block) -> Value {
        let sig = self.layout.signature();
        let dim = sig.data_shape[self.layout.gather_axis] as i64;
        let offset = b.ins().imul_imm_s(i, sig.index_type.size() as i64);
        let at = b.ins().iadd(self.indices, offset);
        let raw = policy::load_index(b, sig.index_type, flags(), at, 0);
        let value = policy::wrap_negative(b, sig.index_type, sig.policy, raw, dim);
        if sig.policy.out_of_range == OutOfRange::Clamp && dim > 0 {
            return policy::clamp(b, sig.index_type, value, dim);
        }
        let inside = policy::in_range(b, value, dim);
        let good = b.create_block();
        let bad = b.create_block();
        b.append_block_param(good, I64);
        b.ins()
            .brif(inside, good, &[BlockArg::from(value)], bad, &[]);
        b.seal_block(bad);
        b.switch_to_block(bad);
        match sig.policy.out_of_range {
            OutOfRange::Zero => {
                let bytes = (slice_values(self.layout) * sig.dtype.size()) as i64;
                let out = b.use_var(self.out);
                let zero = b.ins().iconst(I8, 0);
                let size = b.ins().iconst(self.config.pointer_type(), bytes);
                b.call_memset(self.config, out, zero, size);
                let moved = b.ins().iadd_imm_s(out, bytes);
                b.def_var(self.out, moved);
                b.ins().jump(next, &[]);
            }
            _ => {
                b.ins().jump(self.reject, &[BlockArg::from(i)]);
            }
        }
        b.seal_block(good);
        b.switch_to_block(good);
        b.block_params(good)[0]
    }

    /// The slice of row `row` after flat position `o` of the dims before the gather axis,
    /// as `rows` rows of blocks along the last axis.
    fn blocked(&mut self, b: &mut FunctionBuilder, o: Value, row: Value, rows: usize) {
        let l = self.layout;
        let d = &l.signature().data_shape;
        let dim = d[l.gather_axis];
        let first = mul_add(b, o, dim, row);
        let first = b.ins().imul_imm_s(first, rows as i64);
        let row_len = d[d.len() - 1];
        let (full, rest) = (row_len / l.block_size, row_len % l.block_size);
        for_range(b, rows, |b, a| {
            let r = b.ins().iadd(first, a);
            for_range(b, full, |b, jb| self.block(b, r, jb, l.block_size));
            if rest > 0 {
                let jb = b.ins().iconst(I64, full as i64);
                self.block(b, r, jb, rest);
            }
        });
    }

    /// Block `jb` of logical row `r` (a row along the last axis), `len` values.
    fn block(&mut self, b: &mut FunctionBuilder, r: Value, jb: Value, len: usize) {
        let l = self.layout;
        let sig = l.signature();
        let row_len = *sig.data_shape.last().unwrap_or(&0);
        let simd = sig.dtype == DType::F32 && len == l.block_size;
        match sig.quantization {
            Quantization::Gguf(format) => {
                let row_bytes = row_len / GgufFormat::BLOCK_VALUES * format.block_bytes();
                let start = b.ins().imul_imm_s(r, row_bytes as i64);
                let start = mul_add(b, jb, format.block_bytes(), start);
                let block = b.ins().iadd(self.data, start);
                // GGUF files are little-endian, whatever the host.
                let bits =
                    b.ins()
                        .uload16(I32, flags().with_endianness(Endianness::Little), block, 0);
                let scale = f16_to_f32(b, bits);
                if simd {
                    self.gguf_simd(b, format, block, scale);
                } else {
                    for_range(b, len, |b, j| {
                        let q = self.gguf_scalar(b, format, block, j);
                        let value = b.ins().fmul(q, scale);
                        self.store_scalar(b, value);
                    });
                }
            }
            Quantization::Block(q) => {
                let scale_index = mul_add(b, r, l.blocks, jb);
                let scale = self.load_scale(b, scale_index);
                let zero_point = if l.has_zero_points() {
                    let (_, row_bytes) = l.zero_point_row();
                    let per_byte = usize::from(8 / q.bits);
                    let at = b.ins().imul_imm_s(r, (row_bytes * per_byte) as i64);
                    let at = b.ins().iadd(at, jb);
                    Some(self.packed(b, self.zero_points, at))
                } else {
                    None
                };
                // The block's first value, counted in logical values.
                let first = b.ins().imul_imm_s(r, row_len as i64);
                let first = mul_add(b, jb, l.block_size, first);
                if simd {
                    self.block_simd(b, q.bits, first, zero_point, scale);
                } else {
                    let zero_point = zero_point
                        .unwrap_or_else(|| b.ins().iconst(I32, i64::from(l.default_zero_point())));
                    for_range(b, len, |b, j| {
                        let at = b.ins().iadd(first, j);
                        let value = self.packed(b, self.data, at);
                        let value = self.dequantize(b, value, zero_point, scale);
                        self.store_scalar(b, value);
                    });
                }
            }
        }
    }

    /// The slice for the forms where scales vary within a run of values: runs of values and
    /// scales at matching offsets.
    fn runs(
        &mut self,
        b: &mut FunctionBuilder,
        o1: Value,
        oq: Value,
        o2: Value,
        o: Value,
        row: Value,
    ) {
        let l = self.layout;
        let d = l.signature().data_shape.clone();
        let rank = d.len();
        let (g, q, block) = (l.gather_axis, l.quantize_axis, l.block_size);
        let inner = slice_values(l);
        let slice = mul_add(b, o, d[g], row);
        let values = b.ins().imul_imm_s(slice, inner as i64);
        if q > g {
            // The slice is [a][j][c] over the dims between the axes, the quantize axis and
            // the dims after it; the scales' slice is [a][j / block][c].
            let a_len: usize = d[g + 1..q].iter().product();
            let c_len: usize = d[q + 1..].iter().product();
            let scales = b.ins().imul_imm_s(slice, (a_len * l.blocks * c_len) as i64);
            for_range(b, a_len, |b, a| {
                for_range(b, d[q], |b, j| {
                    let aj = mul_add(b, a, d[q], j);
                    let v = mul_add(b, aj, c_len, values);
                    let jb = b.ins().ushr_imm_s(j, block.trailing_zeros() as i64);
                    let ab = mul_add(b, a, l.blocks, jb);
                    let s = mul_add(b, ab, c_len, scales);
                    self.run(b, v, s, s, c_len);
                });
            });
        } else if q < g {
            // The scale's position has the quantize coordinate (`oq`) divided by the block.
            let ob = b.ins().ushr_imm_s(oq, block.trailing_zeros() as i64);
            let s = mul_add(b, o1, l.blocks, ob);
            let p2: usize = d[q + 1..g].iter().product();
            let s = mul_add(b, s, p2, o2);
            let s = mul_add(b, s, d[g], row);
            let s = b.ins().imul_imm_s(s, inner as i64);
            self.run(b, values, s, s, inner);
        } else {
            // Gathering along the quantize axis: the row picks the block.
            let rb = b.ins().ushr_imm_s(row, block.trailing_zeros() as i64);
            let s = mul_add(b, o1, l.blocks, rb);
            let s = b.ins().imul_imm_s(s, inner as i64);
            let z = if q == rank - 1 {
                // The zero points' rows (of `blocks` values) are padded to whole bytes.
                let (_, row_bytes) = l.zero_point_row();
                let per_byte = 8 / usize::from(l.bits());
                mul_add(b, o1, row_bytes * per_byte, rb)
            } else {
                s
            };
            self.run(b, values, s, z, inner);
        }
    }

    /// `len` values from logical value `v`, with scales from `s` and zero points from
    /// (packed position) `z` on.
    fn run(&mut self, b: &mut FunctionBuilder, v: Value, s: Value, z: Value, len: usize) {
        let l = self.layout;
        for_range(b, len, |b, t| {
            let at = b.ins().iadd(v, t);
            let value = self.packed(b, self.data, at);
            let scale_at = b.ins().iadd(s, t);
            let scale = self.load_scale(b, scale_at);
            let zero_point = if l.has_zero_points() {
                let zp_at = b.ins().iadd(z, t);
                self.packed(b, self.zero_points, zp_at)
            } else {
                b.ins().iconst(I32, i64::from(l.default_zero_point()))
            };
            let value = self.dequantize(b, value, zero_point, scale);
            self.store_scalar(b, value);
        });
    }
}
