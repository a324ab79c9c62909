//! Golden tests: the printed forms a reader (and `gather-jit explain`) sees, for plans, CLIF
//! and the `explain` of every family's kernel. A change in lowering or planning shows here as a readable diff;
//! when it is intended, paste the printed "actual" text over the expected one.
//!
//! Plans are built for `Host::REFERENCE`, so they are the same on every machine; the CLIF
//! names the calling convention, so those goldens run on x86-64 Linux only.

use gather_jit::quant::{BlockQuantization, GgufFormat, QuantizedSignature};
use gather_jit::scatter::{Reduction, ScatterFlavor, ScatterSignature};
use gather_jit::specialize::{Host, Plan};
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
use gather_jit::{DType, IndexType};
use gather_jit::{
    Flavor, IndexPolicy, Kernel, NegativeIndices, OutOfRange, QuantizedKernel, ScatterKernel,
    Signature, Tuning,
};
use gather_jit_workloads::performance_cases;

/// Compares printed text with its golden copy (both trimmed of surrounding newlines) and on a
/// mismatch prints the actual text whole, to paste over the golden one.
#[track_caller]
pub fn check(actual: &str, expected: &str) {
    let (actual, expected) = (actual.trim_matches('\n'), expected.trim_matches('\n'));
    if actual != expected {
        let first = actual
            .lines()
            .zip(expected.lines())
            .position(|(a, e)| a != e)
            .unwrap_or(actual.lines().count().min(expected.lines().count()));
        panic!(
            "golden text differs from line {}:\n--- actual\n{actual}\n--- expected\n{expected}\n---",
            first + 1
        );
    }
}

/// The plan of each performance case S1-S9 under the default tuning.
fn plan_text(name: &str) -> String {
    let case = performance_cases()
        .into_iter()
        .find(|w| w.name == name)
        .unwrap_or_else(|| panic!("no case {name}"));
    let validated = case.signature.validate().expect("the cases are valid");
    Plan::for_host(&validated, Tuning::default(), Host::REFERENCE)
        .expect("plans")
        .to_string()
}

#[test]
fn plan_of_s1() {
    check(
        &plan_text("S1"),
        r#"
plan: 3125 lookup(s), index type i64, negative=wrap, oob=error
  loop 0: extent 3125, strides (bytes) data 0, indices 24, output 60
    index 0: at +0 bytes, dim size 1000, data stride 153600 bytes
    index 1: at +8 bytes, dim size 256, data stride 600 bytes
    index 2: at +16 bytes, dim size 10, data stride 60 bytes
    copy 60 bytes
"#,
    );
}

#[test]
fn plan_of_s2() {
    check(
        &plan_text("S2"),
        r#"
plan: 180 lookup(s), index type i64, negative=wrap, oob=error
  loop 0: extent 60, strides (bytes) data 14000, indices 24, output 420
    loop 1: extent 3, strides (bytes) data 0, indices 8, output 140
      index 0: at +0 bytes, dim size 100, data stride 140 bytes
      copy 140 bytes
"#,
    );
}

#[test]
fn plan_of_s3() {
    check(
        &plan_text("S3"),
        r#"
plan: 4096 lookup(s), index type i64, negative=wrap, oob=error
  loop 0: extent 4096, strides (bytes) data 1280, indices 8, output 4
    index 0: at +0 bytes, dim size 320, data stride 4 bytes
    copy 4 bytes
"#,
    );
}

#[test]
fn plan_of_s4() {
    check(
        &plan_text("S4"),
        r#"
plan: 201600 lookup(s), index type i64, negative=wrap, oob=error
  loop 0: extent 6, strides (bytes) data 11520, indices 0, output 32256000
    loop 1: extent 33600, strides (bytes) data 0, indices 8, output 960
      index 0: at +0 bytes, dim size 12, data stride 960 bytes
      copy 960 bytes (streaming stores)
"#,
    );
}

#[test]
fn plan_of_s5() {
    check(
        &plan_text("S5"),
        r#"
plan: 1024 lookup(s), index type i64, negative=wrap, oob=error
  loop 0: extent 1024, strides (bytes) data 0, indices 8, output 3072
    index 0: at +0 bytes, dim size 30522, data stride 3072 bytes
    copy 3072 bytes
"#,
    );
}

#[test]
fn plan_of_s6() {
    check(
        &plan_text("S6"),
        r#"
plan: 262144 lookup(s), index type i64, negative=wrap, oob=error
  loop 0: extent 64, strides (bytes) data 16384, indices 32768, output 16384
    loop 1: extent 4096, strides (bytes) data 0, indices 8, output 4
      index 0: at +0 bytes, dim size 4096, data stride 4 bytes
      copy 4 bytes
"#,
    );
}

#[test]
fn plan_of_s7() {
    check(
        &plan_text("S7"),
        r#"
plan: 1048576 lookup(s), index type i64, negative=wrap, oob=error
  loop 0: extent 8, strides (bytes) data 512, indices 1024, output 512
    loop 1: extent 1024, strides (bytes) data 0, indices 8192, output 4096
      loop 2: extent 128, strides (bytes) data 4, indices 8, output 4
        index 0: at +0 bytes, dim size 1024, data stride 512 bytes
  each iteration of loop 0 first copies 1024 rows of 512 bytes (4096 bytes apart) to scratch, which the loops inside read as data
        copy 4 bytes
"#,
    );
}

#[test]
fn plan_of_s8() {
    check(
        &plan_text("S8"),
        r#"
plan: 262144 lookup(s), index type i64, negative=wrap, oob=error
  loop 0: extent 262144, strides (bytes) data 0, indices 16, output 4
    index 0: at +0 bytes, dim size 512, data stride 2048 bytes
    index 1: at +8 bytes, dim size 512, data stride 4 bytes
    copy 4 bytes
"#,
    );
}

#[test]
fn plan_of_s9() {
    check(
        &plan_text("S9"),
        r#"
plan: 4 lookup(s), index type i64, negative=wrap, oob=error
  loop 0: extent 4, strides (bytes) data 0, indices 8, output 64
    index 0: at +0 bytes, dim size 16, data stride 64 bytes
    copy 64 bytes
"#,
    );
}

/// A row gather: one check per index, a 12-byte copy as two moves.
#[test]
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn clif_of_a_row_gather() {
    let kernel =
        Kernel::compile(&Signature::gather(&[5, 3], &[2], 0, 0).with_index_type(IndexType::I32))
            .expect("compiles");
    check(
        &kernel.clif().expect("clif"),
        r#"
function u0:0(i64, i64, i64, i64, i64, i64) -> i32 system_v {
block0(v0: i64, v1: i64, v2: i64, v3: i64, v4: i64, v5: i64):
    v7 = iconst.i64 4
    v8 = imul v3, v7  ; v7 = 4
    v9 = iadd v1, v8
    v10 = iconst.i64 12
    v11 = imul v3, v10  ; v10 = 12
    v12 = iadd v2, v11
    jump block2(v3, v9, v12)

block2(v13: i64, v14: i64, v15: i64):
    v26 = iconst.i64 2
    v27 = iadd v13, v26  ; v26 = 2
    v28 = icmp ule v27, v4
    brif v28, block3(v13, v14, v15), block4(v13, v14, v15)

block4(v19: i64, v20: i64, v21: i64):
    v29 = icmp ult v19, v4
    brif v29, block6(v19, v20, v21, v4), block7

block3(v16: i64, v17: i64, v18: i64):
    v30 = sload32 notrap v17
    v31 = iconst.i64 5
    v32 = icmp ult v30, v31  ; v31 = 5
    brif v32, block8, block5

block8:
    v33 = iconst.i64 12
    v34 = imul.i64 v30, v33  ; v33 = 12
    v35 = iadd.i64 v0, v34
    v36 = load.i64 notrap v35
    store notrap v36, v18
    v37 = load.i64 notrap v35+4
    store notrap v37, v18+4
    v38 = sload32.i64 notrap v17+4
    v39 = iconst.i64 5
    v40 = icmp ult v38, v39  ; v39 = 5
    brif v40, block9, block5

block9:
    v41 = iconst.i64 12
    v42 = imul.i64 v38, v41  ; v41 = 12
    v43 = iadd.i64 v0, v42
    v44 = load.i64 notrap v43
    store notrap v44, v18+12
    v45 = load.i64 notrap v43+4
    store notrap v45, v18+16
    v46 = iconst.i64 8
    v47 = iadd.i64 v17, v46  ; v46 = 8
    v48 = iconst.i64 24
    v49 = iadd.i64 v18, v48  ; v48 = 24
    v50 = iconst.i64 2
    v51 = iadd.i64 v16, v50  ; v50 = 2
    v52 = iconst.i64 -2
    v53 = iadd.i64 v4, v52  ; v52 = -2
    v54 = icmp ule v51, v53
    brif v54, block3(v51, v47, v49), block4(v51, v47, v49)

block5 cold:
    v55 = iconst.i64 2
    v56 = iadd.i64 v16, v55  ; v55 = 2
    jump block6(v16, v17, v18, v56)

block6(v22: i64, v23: i64, v24: i64, v25: i64) cold:
    v57 = sload32 notrap v23
    v59 = iconst.i64 0
    v60 = icmp slt v57, v59  ; v59 = 0
    v61 = iconst.i64 5
    v62 = iadd v57, v61  ; v61 = 5
    v63 = select v60, v62, v57
    v64 = iconst.i64 5
    v65 = icmp uge v63, v64  ; v64 = 5
    v66 = iconst.i64 12
    v67 = imul v63, v66  ; v66 = 12
    brif v65, block1(v23), block10(v67)

block10(v58: i64):
    v68 = iadd.i64 v0, v58
    v69 = load.i64 notrap v68
    store notrap v69, v24
    v70 = load.i64 notrap v68+4
    store notrap v70, v24+4
    v71 = iconst.i64 1
    v72 = iadd.i64 v22, v71  ; v71 = 1
    v73 = iconst.i64 4
    v74 = iadd.i64 v23, v73  ; v73 = 4
    v75 = iconst.i64 12
    v76 = iadd.i64 v24, v75  ; v75 = 12
    v77 = icmp ult v72, v25
    brif v77, block6(v72, v74, v76, v25), block2(v72, v74, v76)

block7:
    v78 = iconst.i32 0
    return v78  ; v78 = 0

block1(v6: i64):
    v79 = isub v6, v1
    v80 = iconst.i64 2
    v81 = ushr v79, v80  ; v80 = 2
    store notrap v81, v5
    v82 = iconst.i32 1
    return v82  ; v82 = 1
}
"#,
    );
}

/// An element gather of bytes along the last axis.
#[test]
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn clif_of_an_element_gather_of_bytes() {
    let kernel = Kernel::compile(
        &Signature::gather_elements(&[2, 3], &[2, 2], 1)
            .with_dtype(DType::U8)
            .with_index_type(IndexType::I64),
    )
    .expect("compiles");
    check(
        &kernel.clif().expect("clif"),
        r#"
function u0:0(i64, i64, i64, i64, i64, i64) -> i32 system_v {
block0(v0: i64, v1: i64, v2: i64, v3: i64, v4: i64, v5: i64):
    v7 = iconst.i64 3
    v8 = imul v3, v7  ; v7 = 3
    v9 = iadd v0, v8
    v10 = iconst.i64 16
    v11 = imul v3, v10  ; v10 = 16
    v12 = iadd v1, v11
    v13 = iconst.i64 2
    v14 = imul v3, v13  ; v13 = 2
    v15 = iadd v2, v14
    v20 = icmp ult v3, v4
    brif v20, block2(v3, v9, v12, v15), block3

block2(v16: i64, v17: i64, v18: i64, v19: i64):
    v21 = iconst.i64 0
    v22 = iconst.i64 2
    v23 = load.i64 notrap v18
    v25 = iconst.i64 3
    v26 = icmp ult v23, v25  ; v25 = 3
    brif v26, block6, block5

block6:
    v27 = iconst.i64 0
    v28 = ishl.i64 v23, v27  ; v27 = 0
    jump block4(v28)

block5:
    v29 = iconst.i64 0
    v30 = icmp.i64 slt v23, v29  ; v29 = 0
    v31 = iconst.i64 3
    v32 = iadd.i64 v23, v31  ; v31 = 3
    v33 = select v30, v32, v23
    v34 = iconst.i64 3
    v35 = icmp uge v33, v34  ; v34 = 3
    v36 = iconst.i64 0
    v37 = ishl v33, v36  ; v36 = 0
    brif v35, block1(v18), block4(v37)

block4(v24: i64):
    v38 = iadd.i64 v17, v24
    v39 = load.i8 notrap v38
    store notrap v39, v19
    v40 = iconst.i64 8
    v41 = iadd.i64 v18, v40  ; v40 = 8
    v42 = iconst.i64 1
    v43 = iadd.i64 v19, v42  ; v42 = 1
    v44 = load.i64 notrap v41
    v46 = iconst.i64 3
    v47 = icmp ult v44, v46  ; v46 = 3
    brif v47, block9, block8

block9:
    v48 = iconst.i64 0
    v49 = ishl.i64 v44, v48  ; v48 = 0
    jump block7(v49)

block8:
    v50 = iconst.i64 0
    v51 = icmp.i64 slt v44, v50  ; v50 = 0
    v52 = iconst.i64 3
    v53 = iadd.i64 v44, v52  ; v52 = 3
    v54 = select v51, v53, v44
    v55 = iconst.i64 3
    v56 = icmp uge v54, v55  ; v55 = 3
    v57 = iconst.i64 0
    v58 = ishl v54, v57  ; v57 = 0
    brif v56, block1(v41), block7(v58)

block7(v45: i64):
    v59 = iadd.i64 v17, v45
    v60 = load.i8 notrap v59
    store notrap v60, v43
    v61 = iconst.i64 1
    v62 = iadd.i64 v16, v61  ; v61 = 1
    v63 = iconst.i64 3
    v64 = iadd.i64 v17, v63  ; v63 = 3
    v65 = iconst.i64 16
    v66 = iadd.i64 v18, v65  ; v65 = 16
    v67 = iconst.i64 2
    v68 = iadd.i64 v19, v67  ; v67 = 2
    v69 = icmp ult v62, v4
    brif v69, block2(v62, v64, v66, v68), block3

block3:
    v70 = iconst.i32 0
    return v70  ; v70 = 0

block1(v6: i64):
    v71 = isub v6, v1
    v72 = iconst.i64 3
    v73 = ushr v71, v72  ; v72 = 3
    store notrap v73, v5
    v74 = iconst.i32 1
    return v74  ; v74 = 1
}
"#,
    );
}

/// GatherND pairs of u8 coordinates selecting rows of 4 i16.
#[test]
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn clif_of_a_gather_nd_of_pairs() {
    let kernel = Kernel::compile(
        &Signature::gather_nd(&[2, 3, 4], &[2, 2], 0)
            .with_dtype(DType::I16)
            .with_index_type(IndexType::U8),
    )
    .expect("compiles");
    check(
        &kernel.clif().expect("clif"),
        r#"
function u0:0(i64, i64, i64, i64, i64, i64) -> i32 system_v {
block0(v0: i64, v1: i64, v2: i64, v3: i64, v4: i64, v5: i64):
    v7 = iconst.i64 2
    v8 = imul v3, v7  ; v7 = 2
    v9 = iadd v1, v8
    v10 = iconst.i64 8
    v11 = imul v3, v10  ; v10 = 8
    v12 = iadd v2, v11
    jump block2(v3, v9, v12)

block2(v13: i64, v14: i64, v15: i64):
    v26 = iconst.i64 2
    v27 = iadd v13, v26  ; v26 = 2
    v28 = icmp ule v27, v4
    brif v28, block3(v13, v14, v15), block4(v13, v14, v15)

block4(v19: i64, v20: i64, v21: i64):
    v29 = icmp ult v19, v4
    brif v29, block6(v19, v20, v21, v4), block7

block3(v16: i64, v17: i64, v18: i64):
    v30 = uload8.i64 notrap v17
    v31 = uload8.i64 notrap v17+1
    v32 = uload8.i64 notrap v17+2
    v33 = uload8.i64 notrap v17+3
    v34 = bor v30, v32
    v35 = iconst.i64 2
    v36 = icmp ult v34, v35  ; v35 = 2
    brif v36, block8, block5

block8:
    v37 = iconst.i64 3
    v38 = icmp.i64 ult v31, v37  ; v37 = 3
    brif v38, block9, block5

block9:
    v39 = iconst.i64 3
    v40 = icmp.i64 ult v33, v39  ; v39 = 3
    brif v40, block10, block5

block10:
    v41 = iconst.i64 24
    v42 = imul.i64 v30, v41  ; v41 = 24
    v43 = iconst.i64 3
    v44 = ishl.i64 v31, v43  ; v43 = 3
    v45 = iadd v42, v44
    v46 = iadd.i64 v0, v45
    v47 = iconst.i64 24
    v48 = imul.i64 v32, v47  ; v47 = 24
    v49 = iconst.i64 3
    v50 = ishl.i64 v33, v49  ; v49 = 3
    v51 = iadd v48, v50
    v52 = iadd.i64 v0, v51
    v53 = load.i64 notrap v46
    v54 = scalar_to_vector.i64x2 v53
    v55 = load.i64 notrap v52
    v56 = insertlane v54, v55, 1
    store notrap v56, v18
    v57 = iconst.i64 4
    v58 = iadd.i64 v17, v57  ; v57 = 4
    v59 = iconst.i64 16
    v60 = iadd.i64 v18, v59  ; v59 = 16
    v61 = iconst.i64 2
    v62 = iadd.i64 v16, v61  ; v61 = 2
    v63 = iconst.i64 -2
    v64 = iadd.i64 v4, v63  ; v63 = -2
    v65 = icmp ule v62, v64
    brif v65, block3(v62, v58, v60), block4(v62, v58, v60)

block5 cold:
    v66 = iconst.i64 2
    v67 = iadd.i64 v16, v66  ; v66 = 2
    jump block6(v16, v17, v18, v67)

block6(v22: i64, v23: i64, v24: i64, v25: i64) cold:
    v68 = uload8.i64 notrap v23
    v69 = uload8.i64 notrap v23+1
    v71 = iconst.i64 2
    v72 = icmp uge v68, v71  ; v71 = 2
    v73 = iconst.i64 3
    v74 = icmp uge v69, v73  ; v73 = 3
    v75 = bor v72, v74
    v76 = iconst.i64 24
    v77 = imul v68, v76  ; v76 = 24
    v78 = iconst.i64 3
    v79 = ishl v69, v78  ; v78 = 3
    v80 = iadd v77, v79
    brif v75, block1(v23), block11(v80)

block11(v70: i64):
    v81 = iadd.i64 v0, v70
    v82 = load.i64 notrap v81
    store notrap v82, v24
    v83 = iconst.i64 1
    v84 = iadd.i64 v22, v83  ; v83 = 1
    v85 = iconst.i64 2
    v86 = iadd.i64 v23, v85  ; v85 = 2
    v87 = iconst.i64 8
    v88 = iadd.i64 v24, v87  ; v87 = 8
    v89 = icmp ult v84, v25
    brif v89, block6(v84, v86, v88, v25), block2(v84, v86, v88)

block7:
    v90 = iconst.i32 0
    return v90  ; v90 = 0

block1(v6: i64):
    v91 = isub v6, v1
    v92 = iconst.i64 0
    v93 = ushr v91, v92  ; v92 = 0
    store notrap v93, v5
    v94 = iconst.i32 1
    return v94  ; v94 = 1
}
"#,
    );
}

#[test]
fn explain_of_a_gather_with_zero_fill() {
    let policy = IndexPolicy {
        negative: NegativeIndices::Wrap,
        out_of_range: OutOfRange::Zero,
    };
    let signature = Signature::gather(&[4, 3], &[2, 2], 1, 0)
        .with_flavor(Flavor::OpenvinoGather8)
        .with_policy(policy);
    let kernel = Kernel::compile(&signature).expect("compiles");
    check(
        &kernel.explain(),
        r#"
signature:     Gather(axis=1, batch_dims=0) [openvino-gather8] data [4, 3]:f32 indices [2, 2]:i64 (negative=wrap, oob=zero)
resolved:      Gather { axis: 1, batch_dims: 0 }
output shape:  [4, 2, 2]

plan: 16 lookup(s), index type i64, negative=wrap, oob=zero
  loop 0: extent 4, strides (bytes) data 12, indices 0, output 16
    loop 1: extent 4, strides (bytes) data 0, indices 8, output 4
      index 0: at +0 bytes, dim size 3, data stride 4 bytes
      copy 4 bytes
"#,
    );
}

/// A 4-bit `GatherBlockQuantized` with zero points: buffers in bytes and the fused loop nest.
#[test]
fn explain_of_a_block_quantized_gather() {
    let quantization = BlockQuantization {
        block_size: 32,
        bits: 4,
        zero_points: true,
        ..BlockQuantization::default()
    };
    let signature = QuantizedSignature::block_quantized(&[8, 64], &[3], quantization);
    let kernel = QuantizedKernel::compile(&signature).expect("compiles");
    check(
        &kernel.explain(),
        r#"
signature:     GatherBlockQuantized(gather_axis=0, quantize_axis=1, block_size=32, bits=4, zero_points) data [8, 64] indices [3]:i64 -> f32 (negative=wrap, oob=error)
output shape:  [3, 64]
data:          [8, 32] bytes
scales:        [8, 2]
zero points:   [8, 1] bytes

loops: 1 x 1 x 1 positions before the gather axis
  indices: start..end of 3 (the range `call_range` and `call_parallel` split)
    slice: 64 values as 1 row(s) of 64 values, whole blocks of 32 dequantized 16 values at a time
"#,
    );
}

/// GGUF `Q8_0` rows, as llama.cpp's `get_rows` reads them.
#[test]
fn explain_of_a_gguf_q8_0_gather() {
    let signature = QuantizedSignature::gguf(GgufFormat::Q8_0, 16, 64, &[2, 2]);
    let kernel = QuantizedKernel::compile(&signature).expect("compiles");
    check(
        &kernel.explain(),
        r#"
signature:     GatherGGUF(q8_0) data [16, 64] indices [2, 2]:i64 -> f32 (negative=invalid, oob=error)
output shape:  [2, 2, 64]
data:          [16, 68] bytes
scales:        []
zero points:   none

loops: 1 x 1 x 1 positions before the gather axis
  indices: start..end of 4 (the range `call_range` and `call_parallel` split)
    slice: 64 values as 1 row(s) of 64 values, whole blocks of 32 dequantized 16 values at a time
"#,
    );
}

/// A ScatterND that adds rows (an embedding's gradient): the index scan, then the writes.
#[test]
fn explain_of_a_scatter_nd_sum() {
    let signature =
        ScatterSignature::scatter_nd(&[6, 4], &[3, 1], &[3, 4]).with_reduction(Reduction::Sum);
    let kernel = ScatterKernel::compile(&signature).expect("compiles");
    check(
        &kernel.explain(),
        r#"
signature:     ScatterND [onnx] reduction=sum data [6, 4]:f32 indices [3, 1]:i64 updates [3, 4] (negative=wrap)
resolved:      Nd { index_depth: 1 }
output shape:  [6, 4]

pass 1: check the 3 index(es) in row-major order (negative=wrap); a bad one fails the call before anything is written
pass 2: for each of 3 tuple(s) of 1 index(es), in index order:
  write 4 element(s) (16 bytes): sum f32 in f32x4 lanes (1 vector(s) + 0 element(s))
a parallel call splits data into ranges of whole slices: each part runs pass 2 and writes its own range only (a call over all of data tests no ranges)
"#,
    );
}

/// OpenVINO's ScatterElementsUpdate-12 with mean along axis 1: the counts mean needs.
#[test]
fn explain_of_a_scatter_elements_mean() {
    let signature = ScatterSignature::scatter_elements(&[3, 5], &[3, 2], &[3, 2], 1)
        .with_flavor(ScatterFlavor::OpenvinoScatterElementsUpdate12)
        .with_reduction(Reduction::Mean);
    let kernel = ScatterKernel::compile(&signature).expect("compiles");
    check(
        &kernel.explain(),
        r#"
signature:     ScatterElements(axis=1) [openvino-scatterelementsupdate12] reduction=mean data [3, 5]:f32 indices [3, 2]:i64 updates [3, 2] (negative=wrap)
resolved:      Elements { axis: 1 }
output shape:  [3, 5]

pass 1: check the 6 index(es) in row-major order (negative=wrap) (one scan without branches, then the first bad one looked up if there is one); a bad one fails the call before anything is written
pass 2: for each of 6 index(es), along data axis 1 (4 a loop trip), in index order:
  write 1 element(s) (4 bytes): mean f32 element by element
  count each element's updates; the sums are divided by the counts after the kernel returns
a parallel call splits data into ranges of whole slices: each part runs pass 2 and writes its own range only (a call over all of data tests no ranges)
"#,
    );
}
