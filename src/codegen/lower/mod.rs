//! Lowering a [`Plan`] to a CLIF function: the loop nest, index checks and slice copies.
//!
//! The function has the C signature of [`super::KernelFn`]:
//! `(data, indices, output, start, end, bad_index) -> status`. It walks iterations
//! `start..end` of the outermost loop; every other extent, stride and dimension is an
//! immediate. Status 0 is success; status 1 means an index was rejected and the element
//! position of its tuple in the indices buffer was stored to `*bad_index` (the caller finds
//! the tuple's first bad coordinate).
//!
//! One job per file: this one holds the entry point, the shared state and the tuning
//! constants; `loops.rs` emits the loop nest (counters, pointer steps, unrolled trips, packed
//! lanes); `checks.rs` the index checks and the policy's slow path; `copies.rs` the slice
//! copies and zero fills.

use cranelift_codegen::ir::types::{I32, I64};
use cranelift_codegen::ir::{
    AbiParam, Block, FuncRef, Function, InstBuilder, InstructionData, MemFlagsData, Opcode,
    Signature, Type, Value,
};
use cranelift_codegen::isa::{CallConv, TargetFrontendConfig};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};

use crate::codegen::policy;
use crate::specialize::Plan;

mod checks;
mod copies;
mod loops;

pub(crate) use copies::chunks;

/// Slices up to this many bytes are copied with unrolled 16-byte moves; larger ones call a
/// copy helper (the crossover of `cargo bench --bench gather -- copy_tier`).
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
    // selecting single elements (S8) are the exception: 8 lookups (16 checks) per trip are
    // faster than 4 (`cargo bench --bench gather -- S8/jit`).
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
/// not streamed. (Never glibc's `memcpy`: from 2 KiB on it uses `rep movsb`, which takes
/// several times as long when output and data are out of step by a few bytes:
/// `cargo bench --bench gather -- copy_out_of_step`.)
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
/// first lines would be demand misses. Two rows ahead is as fast as one and steadier
/// (`cargo bench --bench gather -- S7/jit`).
pub(crate) const PREFETCH_ROWS_AHEAD: u64 = 2;

/// The largest unroll factor in the rows of a band (the compiled part of a banded plan, the
/// only code that calls `copy::prefetch_rows`): wider unrolls ran no faster and compiled
/// slower (`cargo bench --bench gather -- S7/`).
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

    // The block parameter is the bad tuple's address.
    policy::finish_reject_block(&mut builder, reject, bad_index, 1, |b, tuple| {
        let byte_offset = b.ins().isub(tuple, indices);
        let shift = plan.index_type.size().trailing_zeros() as i64;
        b.ins().ushr_imm_u(byte_offset, shift)
    });
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

#[cfg(test)]
mod tests {
    use cranelift_codegen::ir::types::{I8X16, I32, I64};

    use super::copies::chunks;
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
