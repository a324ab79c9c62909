//! [`f32_to_f16`] compiled into a loop over a buffer, against `half::f16::from_f32` and
//! against values worked out by hand.
#![allow(
    unsafe_code,
    reason = "calls the JIT-compiled conversion loop on buffers it borrows"
)]

use std::sync::OnceLock;

use cranelift_codegen::ir::types::{F32, I64};
use cranelift_codegen::ir::{AbiParam, InstBuilder, MemFlagsData, Signature, Type};
use cranelift_codegen::isa::CallConv;
use cranelift_frontend::FunctionBuilder;
use half::f16;

use super::f32_to_f16;
use crate::codegen::driver::{self, Code, EntryPoint};

/// `(input, output, count)`: rounds `count` `f32`s at `input` to `f16` bits at `output`.
type ConvertFn = unsafe extern "C" fn(*const f32, *mut u16, u64);

// SAFETY: `signature` is two pointers and an `i64`, returning nothing: `ConvertFn` (`u64` has
// the ABI of `i64`).
unsafe impl EntryPoint for ConvertFn {
    fn signature(call_conv: CallConv, pointer: Type) -> Signature {
        let mut sig = Signature::new(call_conv);
        sig.params.push(AbiParam::new(pointer));
        sig.params.push(AbiParam::new(pointer));
        sig.params.push(AbiParam::new(I64));
        sig
    }

    unsafe fn from_address(address: *const u8) -> Self {
        // SAFETY: the caller's contract: `address` is code with `signature`'s ABI.
        unsafe { std::mem::transmute::<*const u8, ConvertFn>(address) }
    }

    fn address(self) -> *const u8 {
        self as *const u8
    }
}

/// The conversion loop, compiled once.
fn converter() -> &'static Code<ConvertFn> {
    static CODE: OnceLock<Code<ConvertFn>> = OnceLock::new();
    CODE.get_or_init(|| {
        driver::compile::<ConvertFn>("f32_to_f16", &[], |func, context, config, _| {
            let pointer = config.pointer_type();
            let mut b = FunctionBuilder::new(func, context);
            let entry = b.create_block();
            b.append_block_params_for_function_params(entry);
            b.switch_to_block(entry);
            b.seal_block(entry);
            let &[input, output, count] = b.block_params(entry) else {
                unreachable!("three parameters")
            };
            let zero = b.ins().iconst(I64, 0);
            let flags = MemFlagsData::new().with_notrap();
            crate::codegen::loops::for_indices(&mut b, zero, count, |b, i| {
                let i = if pointer == I64 {
                    i
                } else {
                    b.ins().ireduce(pointer, i)
                };
                let offset = b.ins().ishl_imm_s(i, 2);
                let at = b.ins().iadd(input, offset);
                let value = b.ins().load(F32, flags, at, 0);
                let bits = f32_to_f16(b, value);
                let offset = b.ins().ishl_imm_s(i, 1);
                let at = b.ins().iadd(output, offset);
                b.ins().istore16(flags, bits, at, 0);
            });
            b.ins().return_(&[]);
            b.finalize(config);
        })
        .expect("the conversion loop compiles")
    })
}

/// The JIT's `f16` bits of every value of `input`, into `output`.
fn convert(input: &[f32], output: &mut [u16]) {
    assert_eq!(input.len(), output.len());
    let entry = converter().entry();
    // SAFETY: `input` holds `input.len()` readable `f32`s and `output` as many writable
    // `u16`s (asserted above), borrowed for the call; the loop touches exactly those.
    unsafe { entry(input.as_ptr(), output.as_mut_ptr(), input.len() as u64) };
}

/// Converts the `f32`s of `patterns` and checks each against `half`, naming the first
/// mismatch.
fn check_against_half(patterns: &[u32]) {
    let input: Vec<f32> = patterns.iter().map(|&p| f32::from_bits(p)).collect();
    let mut output = vec![0; input.len()];
    convert(&input, &mut output);
    for (&x, &got) in input.iter().zip(&output) {
        let want = f16::from_f32(x).to_bits();
        assert_eq!(
            got,
            want,
            "f32 {:#010x} ({x:e}): {got:#06x}, half {want:#06x}",
            x.to_bits()
        );
    }
}

/// The JIT's bits of one value.
fn one(x: f32) -> u16 {
    let mut out = [0];
    convert(&[x], &mut out);
    out[0]
}

#[test]
fn worked_examples() {
    let cases: &[(u32, u16)] = &[
        (0x0000_0000, 0x0000), // +0
        (0x8000_0000, 0x8000), // -0
        (0x3f80_0000, 0x3c00), // 1
        (0xc000_0000, 0xc000), // -2
        (0x3f80_1000, 0x3c00), // 1 + 2^-11: a tie, to the even 1
        (0x3f80_3000, 0x3c02), // 1 + 3 * 2^-11: a tie, to the even 1 + 2^-9
        (0x3f80_1001, 0x3c01), // just above a tie: up
        (0x3f80_0fff, 0x3c00), // just below a tie: down
        (0x477f_e000, 0x7bff), // 65504, the largest finite f16
        (0x477f_efff, 0x7bff), // just below 65520: down to 65504
        (0x477f_f000, 0x7c00), // 65520, a tie to the even 65536: infinity
        (0x4780_0000, 0x7c00), // 65536
        (0x47c0_0000, 0x7c00), // 98304
        (0x7f7f_ffff, 0x7c00), // the largest finite f32
        (0xff7f_ffff, 0xfc00), // its negative
        (0x7f80_0000, 0x7c00), // +infinity
        (0xff80_0000, 0xfc00), // -infinity
        (0x3880_0000, 0x0400), // 2^-14, the smallest normal f16
        (0x387f_ffff, 0x0400), // just below it: rounds up to it
        (0x3380_0000, 0x0001), // 2^-24, the smallest subnormal f16
        (0x3300_0000, 0x0000), // 2^-25: a tie, to the even 0
        (0x3300_0001, 0x0001), // just above it: up
        (0xb300_0001, 0x8001), // its negative
        (0x32ff_ffff, 0x0000), // just below 2^-25
        (0x33c0_0000, 0x0002), // 1.5 * 2^-24: a tie, to the even 2 * 2^-24
        (0x3420_0000, 0x0002), // 2.5 * 2^-24: a tie, to the even 2 * 2^-24
        (0x0000_0001, 0x0000), // the smallest subnormal f32
        (0x8000_0001, 0x8000), // its negative
        (0x7fc0_0000, 0x7e00), // the default quiet NaN
        (0x7f80_0001, 0x7e00), // a signalling NaN whose payload is below f16's
        (0x7fa0_0000, 0x7f00), // a signalling NaN: quietened, payload kept
        (0xff81_2345, 0xfe09), // a negative NaN: the top ten payload bits kept
        (0x7fff_ffff, 0x7fff), // every payload bit
    ];
    for &(x, want) in cases {
        let got = one(f32::from_bits(x));
        assert_eq!(got, want, "f32 {x:#010x}: {got:#06x}, want {want:#06x}");
    }
}

/// Every midpoint between neighbouring non-negative `f16`s (65504 and 65536 included) goes
/// to the even one, and the `f32`s either side of it to the nearer one.
#[test]
fn midpoints_of_every_f16() {
    let mut patterns = Vec::new();
    for h in 0..0x7c00u16 {
        let low = f64::from(f16::from_bits(h).to_f32());
        let high = if h == 0x7bff {
            65536.0
        } else {
            f64::from(f16::from_bits(h + 1).to_f32())
        };
        // Exact: an f16 has 11 significant bits, an f32 24.
        let mid = ((low + high) / 2.0) as f32;
        assert_eq!(f64::from(mid), (low + high) / 2.0);
        let mid = mid.to_bits();
        let cases = [(mid - 1, h), (mid, h + (h & 1)), (mid + 1, h + 1)];
        for (x, want) in cases {
            for sign in [0, 0x8000] {
                let x = f32::from_bits(x | u32::from(sign) << 16);
                let got = one(x);
                let want = want | sign;
                assert_eq!(got, want, "{x:e}: {got:#06x}, want {want:#06x}");
            }
        }
        patterns.extend([mid - 1, mid, mid + 1]);
    }
    check_against_half(&patterns);
}

/// Each sign and exponent with mantissas at every rounding position's boundaries: a bit
/// alone, one below it, one above it, three times it and its neighbours, all ones but it.
#[test]
fn boundary_mantissas_of_every_exponent() {
    let mut mantissas = vec![0, 0x7f_ffff];
    for k in 0..23 {
        let bit = 1u32 << k;
        mantissas.extend([bit, bit - 1, bit + 1, 3 * bit, 3 * bit - 1, 3 * bit + 1]);
        mantissas.push(0x7f_ffff ^ bit);
    }
    let mut patterns = Vec::new();
    for sign in [0, 1u32 << 31] {
        for exponent in 0..256u32 {
            for &mantissa in &mantissas {
                patterns.push(sign | exponent << 23 | (mantissa & 0x7f_ffff));
            }
        }
    }
    check_against_half(&patterns);
}

#[test]
fn random_patterns() {
    // splitmix64: a fixed seed, so that a failure reproduces.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let patterns: Vec<u32> = (0..2 << 20)
        .flat_map(|_| {
            let z = next();
            [z as u32, (z >> 32) as u32]
        })
        .collect();
    check_against_half(&patterns);
}

/// All 2^32 `f32`s, against `half::f16::from_f32` (F16C on most x86-64 hosts) and its
/// software rounding `from_f32_const`: `cargo test --profile checked --lib -- --ignored
/// every_f32`.
#[test]
#[ignore = "all 2^32 values: run by hand"]
fn every_f32() {
    const CHUNK: u32 = 1 << 20;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    std::thread::scope(|scope| {
        for thread in 0..threads {
            scope.spawn(move || {
                let mut input = vec![0f32; CHUNK as usize];
                let mut output = vec![0u16; CHUNK as usize];
                for chunk in (thread..1 << 12).step_by(threads as usize) {
                    let first = chunk * CHUNK;
                    for (offset, x) in (0..).zip(&mut input) {
                        *x = f32::from_bits(first + offset);
                    }
                    convert(&input, &mut output);
                    for (&x, &got) in input.iter().zip(&output) {
                        let want = f16::from_f32(x).to_bits();
                        let software = f16::from_f32_const(x).to_bits();
                        assert!(
                            got == want && got == software,
                            "f32 {:#010x}: {got:#06x}, half {want:#06x}, software {software:#06x}",
                            x.to_bits()
                        );
                    }
                }
            });
        }
    });
}
