//! The harness itself can fail: the driver sees writes outside an output and into an input,
//! sizes that differ from the header's and crashes, and the comparison catches a wrong byte,
//! a wrong position, a stray write after a rejected index, and NaNs that are not the same.

use gather_jit::aot::Target;
use gather_jit::{BlockQuantization, DType, IndexType, QuantizedSignature, Signature};

use crate::cases::{Case, Kernel, Outcome};
use crate::machine::{
    GUARD_AFTER_OUTPUT, GUARD_BEFORE_OUTPUT, INPUT_CHANGED, Machine, Record, SENTINEL,
    SIZE_MISMATCH, WorkDir, compare, execute, link, push_u64, read_outputs,
};

/// Kernels that misbehave on purpose, each on 8-byte buffers; the table's last entry claims
/// a 16-byte output.
const BAD_KERNELS: &str = r#"
#include <string.h>
#include "table.h"

static int32_t copies(const void *d, const void *i, void *o, uint64_t *b) {
    (void)i; (void)b; memcpy(o, d, 8); return 0;
}
static int32_t past_the_end(const void *d, const void *i, void *o, uint64_t *b) {
    (void)d; (void)i; (void)b; ((unsigned char *)o)[8] = 0; return 0;
}
static int32_t before_the_start(const void *d, const void *i, void *o, uint64_t *b) {
    (void)d; (void)i; (void)b; ((unsigned char *)o)[-1] = 0; return 0;
}
static int32_t into_an_input(const void *d, const void *i, void *o, uint64_t *b) {
    (void)d; (void)o; (void)b; ((unsigned char *)i)[3] ^= 1; return 0;
}
static int32_t rejects(const void *d, const void *i, void *o, uint64_t *b) {
    (void)d; (void)i; (void)o; *b = 5; return 1;
}
static int32_t crashes(const void *d, const void *i, void *o, uint64_t *b) {
    (void)d; (void)i; (void)o; (void)b; *(volatile int *)(uintptr_t)8 = 1; return 0;
}

const struct gj_kernel gj_kernels[] = {
    {(gj_entry)copies, 3, {8, 8, 8}},
    {(gj_entry)past_the_end, 3, {8, 8, 8}},
    {(gj_entry)before_the_start, 3, {8, 8, 8}},
    {(gj_entry)into_an_input, 3, {8, 8, 8}},
    {(gj_entry)rejects, 3, {8, 8, 8}},
    {(gj_entry)copies, 3, {8, 8, 16}},
    {(gj_entry)crashes, 3, {8, 8, 8}},
};
const uint64_t gj_kernel_count = 7;
"#;

#[test]
fn the_driver_reports_stray_writes_wrong_sizes_and_crashes() {
    let machine = Machine {
        name: "host",
        target: Target::host,
        arch: std::env::consts::ARCH,
        cross_cc: "cc",
        may_refuse: false,
        emulator_args: &[],
    };
    if !machine.missing_tools().is_empty() {
        // `host_with_its_cpu_features` fails (or skips) naming the tool.
        return;
    }
    let work = WorkDir::new("harness");
    std::fs::write(work.0.join("table.c"), BAD_KERNELS).expect("write table.c");
    let (program, _) = link(&machine, &work.0, &[]);
    let mut inputs = b"GJXIN001".to_vec();
    push_u64(&mut inputs, 7);
    for k in 0..7 {
        push_u64(&mut inputs, k);
        push_u64(&mut inputs, 0x0003_0201 * (k % 2)); // misaligned buffers in every other
        push_u64(&mut inputs, 0); // no null pointers
        for _ in 0..3 {
            push_u64(&mut inputs, 8);
        }
        inputs.extend(*b"datadata");
        inputs.extend(*b"indices!");
    }
    let (inputs_path, outputs_path) = (work.0.join("inputs.bin"), work.0.join("outputs.bin"));
    std::fs::write(&inputs_path, inputs).expect("write the inputs");
    let stderr = execute(&machine, &program, &inputs_path, &outputs_path);
    let records = read_outputs(&outputs_path);
    let seen: Vec<(i64, u64)> = records.iter().map(|r| (r.status, r.flags)).collect();
    assert_eq!(
        seen,
        [
            (0, 0),
            (0, GUARD_AFTER_OUTPUT),
            (0, GUARD_BEFORE_OUTPUT),
            (0, INPUT_CHANGED),
            (1, 0),
            (-1, SIZE_MISMATCH),
        ],
        "{stderr}"
    );
    assert_eq!(records[0].output, b"datadata");
    assert_eq!(records[4].bad_position, 5);
    assert!(stderr.contains("signal in case 6"), "{stderr}");
}

fn record(status: i64, bad_position: u64, output: &[u8]) -> Record {
    Record {
        status,
        bad_position,
        flags: 0,
        output: output.to_vec(),
    }
}

#[test]
fn the_comparison_catches_wrong_bytes_positions_and_flags() {
    // Rows 1 then 0 of a 2x2 u8 table; then row 2, out of range.
    let sig = Signature::gather(&[2, 2], &[2], 0, 0)
        .with_dtype(DType::U8)
        .with_index_type(IndexType::I64);
    let indices = |a: i64, b: i64| [a.to_ne_bytes(), b.to_ne_bytes()].concat();
    let good = Case::gather("good".into(), sig.clone(), vec![1, 2, 3, 4], indices(1, 0));
    assert_eq!(good.outcome, Outcome::Output(vec![3, 4, 1, 2]));
    assert_eq!(compare(&good, &record(0, 0, &[3, 4, 1, 2]), true), Ok(0));
    assert!(compare(&good, &record(0, 0, &[3, 4, 1, 3]), true).is_err());
    assert!(compare(&good, &record(1, 0, &[3, 4, 1, 2]), true).is_err());
    for flag in [
        GUARD_BEFORE_OUTPUT,
        GUARD_AFTER_OUTPUT,
        INPUT_CHANGED,
        SIZE_MISMATCH,
    ] {
        let flagged = Record {
            flags: flag,
            ..record(0, 0, &[3, 4, 1, 2])
        };
        assert!(compare(&good, &flagged, true).is_err(), "flag {flag}");
    }

    let bad = Case::gather("bad".into(), sig, vec![1, 2, 3, 4], indices(0, 2));
    assert_eq!(bad.outcome, Outcome::Rejected(1));
    let s = SENTINEL;
    assert_eq!(compare(&bad, &record(1, 1, &[1, 2, s, s]), true), Ok(0));
    assert_eq!(compare(&bad, &record(1, 1, &[s, s, s, s]), true), Ok(0));
    assert!(compare(&bad, &record(1, 0, &[1, 2, s, s]), true).is_err());
    assert!(compare(&bad, &record(0, 1, &[1, 2, s, s]), true).is_err());
    // A byte written after the rejected index's slice.
    assert!(compare(&bad, &record(1, 1, &[1, 2, s, 0]), true).is_err());
}

#[test]
fn nans_may_differ_in_sign_and_payload_only_across_isas() {
    let sig = QuantizedSignature::block_quantized(&[1, 16], &[1], BlockQuantization::default());
    let case = |expected: u32| Case {
        name: "nan".into(),
        kernel: Kernel::Quantized(sig.clone()),
        inputs: Vec::new(),
        output_bytes: 4,
        nulls: 0,
        misalign: Vec::new(),
        outcome: Outcome::Output(expected.to_ne_bytes().to_vec()),
        partial_reference: None,
    };
    let run = |expected: u32, actual: u32, exact: bool| {
        compare(&case(expected), &record(0, 0, &actual.to_ne_bytes()), exact)
    };
    // x86-64's default NaN against aarch64's and riscv64's.
    assert_eq!(run(0xFFC0_0000, 0x7FC0_0000, false), Ok(1));
    assert!(run(0xFFC0_0000, 0x7FC0_0000, true).is_err());
    // A propagated payload, or riscv64's canonical NaN in its place.
    assert_eq!(run(0x7FC1_2345, 0xFFC1_2345, false), Ok(1));
    assert_eq!(run(0x7FC1_2345, 0x7FC0_0000, false), Ok(1));
    // Another payload, a signalling NaN, or no NaN at all.
    assert!(run(0x7FC1_2345, 0x7FC0_0001, false).is_err());
    assert!(run(0x7FC0_0001, 0x7F80_0001, false).is_err());
    assert!(run(0x7FC0_0000, 0x7F80_0000, false).is_err());
    assert!(run(0x3F80_0000, 0xBF80_0000, false).is_err());
}
