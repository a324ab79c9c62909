//! Hostile models and ops: ONNX files whose gathers have impossible ranks, index depths or
//! attributes, `JitGather` ops built with such attributes, and outputs too large for memory.
//! Each must be an error (at load where ONNX Runtime rejects it there), never a panic, an
//! abort or a loop.
//!
//! The models are written in code (`support/onnx.rs`); each load runs on a thread of its own
//! with a deadline, so that a rule that loops fails the test instead of hanging it.

#[path = "support/onnx.rs"]
mod onnx;

use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use gather_jit::Op as GatherOp;
use gather_jit_tract::JitGather;
use onnx::Dim::{Param, Value};
use tract_onnx::prelude::*;
use tract_onnx::tract_hir::internal::{EvalContext, EvalOp, TypedOp, format_err};

/// Loads `bytes` with the JIT-backed gathers and optimises it, as `gather-jit model` does, on
/// a thread with a deadline: `Err` is tract's error message, a panic or a timeout fails.
#[track_caller]
fn load(bytes: Vec<u8>) -> Result<TypedModel, String> {
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let result = gather_jit_tract::onnx()
            .model_for_read(&mut &bytes[..])
            .and_then(|model| model.into_optimized())
            .map_err(|e| format!("{e:#}"));
        let _ = send.send(result);
    });
    match receive.recv_timeout(Duration::from_secs(60)) {
        Ok(result) => result,
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the load panicked"),
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("the load did not finish in 60 s"),
    }
}

/// Loads `bytes` and expects an error that contains `expected`.
#[track_caller]
fn load_error(bytes: Vec<u8>, expected: &str) -> String {
    match load(bytes) {
        Ok(model) => panic!("loaded: {model}"),
        Err(e) => {
            assert!(e.contains(expected), "{expected:?} not in {e:?}");
            e
        }
    }
}

/// The encoder writes what it means to: prost (through tract's reader) decodes its model into
/// the fields it was given.
#[test]
fn the_test_encoder_writes_the_fields_prost_reads() {
    let bytes = onnx::gather_nd(&[Value(2), Param("n"), Value(-4)], &[Value(3), Value(1)], 1);
    let proto = tract_onnx::onnx()
        .proto_model_for_read(&mut &bytes[..])
        .expect("prost decodes it");
    assert_eq!(proto.ir_version, 8);
    assert_eq!(proto.opset_import.len(), 1);
    assert_eq!(proto.opset_import[0].version, 13);
    let graph = proto.graph.expect("a graph");
    let node = &graph.node[0];
    assert_eq!(node.op_type, "GatherND");
    assert_eq!(node.input, ["data", "indices"]);
    assert_eq!(node.output, ["y"]);
    assert_eq!(node.attribute[0].name, "batch_dims");
    assert_eq!(node.attribute[0].i, 1);
    assert_eq!(node.attribute[0].r#type, 2);
    let dims = |i: usize| {
        use tract_onnx::pb::tensor_shape_proto::dimension::Value as D;
        use tract_onnx::pb::type_proto::Value as T;
        let Some(T::TensorType(t)) = &graph.input[i].r#type.as_ref().expect("a type").value else {
            panic!("not a tensor type");
        };
        let dims: Vec<String> = (t.shape.as_ref().expect("a shape").dim.iter())
            .map(|d| match &d.value {
                Some(D::DimValue(v)) => v.to_string(),
                Some(D::DimParam(p)) => p.clone(),
                None => "?".into(),
            })
            .collect();
        (t.elem_type, dims)
    };
    assert_eq!(dims(0), (1, vec!["2".into(), "n".into(), "-4".into()]));
    assert_eq!(dims(1), (7, vec!["3".into(), "1".into()]));
    assert_eq!(graph.output[0].name, "y");
    let init = onnx::model(
        13,
        &[],
        &[onnx::i64_initializer("k", &[2], &[-1, 5])],
        &[],
        &[],
    );
    let proto = tract_onnx::onnx()
        .proto_model_for_read(&mut &init[..])
        .expect("prost decodes it");
    let tensor = &proto.graph.expect("a graph").initializer[0];
    assert_eq!(
        (tensor.name.as_str(), &tensor.dims[..], tensor.data_type),
        ("k", &[2][..], 7)
    );
    assert_eq!(tensor.raw_data, [-1i64, 5].map(i64::to_le_bytes).concat());
    let strings = onnx::model(
        13,
        &[],
        &[onnx::string_initializer("s", &[2], &["ab", "cd"])],
        &[],
        &[],
    );
    let proto = tract_onnx::onnx()
        .proto_model_for_read(&mut &strings[..])
        .expect("prost decodes it");
    let tensor = &proto.graph.expect("a graph").initializer[0];
    assert_eq!(
        (tensor.name.as_str(), &tensor.dims[..], tensor.data_type),
        ("s", &[2][..], 8)
    );
    assert_eq!(tensor.string_data, [b"ab".to_vec(), b"cd".to_vec()]);
}

/// Issue 28, item 2: rank-0 indices made the rules count to `usize::MAX` (`indices_rank - 1`
/// wrapped); ONNX Runtime rejects the model at load, and so must the integration.
#[test]
fn gather_nd_with_rank_0_indices_is_an_error_at_load() {
    load_error(
        onnx::gather_nd(&[Value(2), Value(3), Value(4)], &[], 0),
        "GatherND: indices has rank 0, but at least 1 is required",
    );
}

/// An axis below `-rank` is out of range (ONNX allows `-r..=r-1`), and ONNX Runtime rejects
/// it at load. GatherElements' axis was made non-negative by adding the rank once, so `-rank -
/// 1` became `-1` and the JIT op gathered along the last axis (found by the `model` fuzz
/// target's replay once tract's own GatherElements rejected the axis). Gather's fails in
/// tract's own type rules, which the expansion uses, with tract's words.
#[test]
fn gather_axes_below_minus_rank_are_errors_at_load() {
    for op in ["Gather", "GatherElements"] {
        for axis in [-3, -4, i64::MIN] {
            let bytes = onnx::model(
                13,
                &[onnx::node(
                    op,
                    &["data", "indices"],
                    &["y"],
                    &[("axis", axis)],
                )],
                &[onnx::i64_initializer("indices", &[1, 1], &[0])],
                &[onnx::value(
                    "data",
                    onnx::elem::FLOAT,
                    &[Value(2), Value(3)],
                )],
                &[onnx::untyped("y")],
            );
            let expected = match op {
                "Gather" => "axis".to_string(),
                _ => format!("axis {axis} is out of range for data of rank 2"),
            };
            load_error(bytes, &expected);
        }
    }
}

/// Data of rank 0: the output's rank would be negative.
#[test]
fn gather_nd_with_rank_0_data_is_an_error_at_load() {
    load_error(
        onnx::gather_nd(&[], &[Value(1)], 0),
        "GatherND: data has rank 0, but at least 1 is required",
    );
}

/// A declared negative dim (`dim_value` -2) as the index depth: tract leaves such an input's
/// fact undetermined and refuses the model before the gather's rules see it.
#[test]
fn gather_nd_with_a_negative_declared_index_depth_is_an_error_at_load() {
    let e = load(onnx::gather_nd(
        &[Value(2), Value(3)],
        &[Value(4), Value(-2)],
        0,
    ))
    .expect_err("a negative dim");
    assert!(e.contains("indices"), "{e}");
}

/// An index depth of 0 selects nothing: ONNX requires 1 to `rank(data) - batch_dims`, also
/// when the other dims of the indices are symbolic.
#[test]
fn gather_nd_with_index_depth_0_is_an_error_at_load() {
    load_error(
        onnx::gather_nd(&[Value(2), Value(3)], &[Value(4), Value(0)], 0),
        "index depth 0",
    );
    load_error(
        onnx::gather_nd(&[Value(2), Value(3)], &[Param("n"), Value(0)], 0),
        "index depth 0",
    );
}

/// An index depth beyond the data's rank, with the tuples' count known or symbolic.
#[test]
fn gather_nd_with_an_index_depth_beyond_the_data_rank_is_an_error_at_load() {
    load_error(
        onnx::gather_nd(&[Value(2), Value(3)], &[Value(4), Value(3)], 0),
        "index depth 3",
    );
    load_error(
        onnx::gather_nd(&[Value(2), Param("m")], &[Param("n"), Value(3)], 0),
        "index depth 3",
    );
    load_error(
        onnx::gather_nd(&[Value(2), Value(3)], &[Value(2), Value(2)], 1),
        "index depth 2",
    );
}

/// `batch_dims` at the largest int64 overflowed `batch_dims + depth`; `batch_dims` at or
/// beyond either rank made the output's rank negative.
#[test]
fn gather_nd_with_batch_dims_beyond_the_ranks_is_an_error_at_load() {
    load_error(
        onnx::gather_nd(&[Value(2), Value(3)], &[Value(2), Value(1)], i64::MAX),
        "batch_dims",
    );
    load_error(
        onnx::gather_nd(&[Value(2), Value(3)], &[Value(2), Value(1)], 5),
        "batch_dims 5",
    );
    load_error(
        onnx::gather_nd(&[Value(2), Value(3)], &[Value(1)], 1),
        "batch_dims 1",
    );
    load_error(
        onnx::gather_nd(&[Param("b"), Value(3)], &[Param("b"), Value(1)], 2),
        "batch_dims 2",
    );
}

/// The valid neighbours of the cases above still load, with the output facts of ONNX's rule
/// (`indices[:-1] + data[batch_dims + depth:]`), symbolic dims kept.
#[test]
fn gather_nd_at_the_edges_of_the_rules_still_loads() {
    let cases: [(Vec<u8>, &str); 4] = [
        (
            onnx::gather_nd(&[Value(2), Value(3), Value(4)], &[Value(1)], 0),
            "3,4,F32",
        ),
        (
            onnx::gather_nd(&[Value(2), Value(3), Value(4)], &[Value(5), Value(3)], 0),
            "5,F32",
        ),
        (
            onnx::gather_nd(
                &[Param("b"), Value(3), Value(4)],
                &[Param("b"), Value(2)],
                1,
            ),
            "b,F32",
        ),
        (
            onnx::gather_nd(
                &[Value(2), Param("m"), Value(4)],
                &[Param("n"), Value(1)],
                0,
            ),
            "n,m,4,F32",
        ),
    ];
    for (bytes, expected) in cases {
        let model = load(bytes).expect("loads");
        let output = model.outlet_fact(model.output_outlets().expect("outputs")[0]);
        let fact = format!("{:?}", output.expect("a fact"));
        assert!(fact.contains(expected), "{expected} not in {fact}");
    }
}

/// The symbolic-dims shape rule of a `JitGather` built by hand: the facts of `data` and
/// `indices` (`S` a symbol) through `output_facts`.
fn facts(op: GatherOp, data: &[&str], indices: &[&str]) -> TractResult<String> {
    let scope = SymbolScope::default();
    let dims = |dims: &[&str]| -> TVec<TDim> {
        dims.iter()
            .map(|d| match d.parse::<i64>() {
                Ok(n) => TDim::Val(n),
                Err(_) => scope.sym(d).into(),
            })
            .collect()
    };
    let data = f32::fact(&*dims(data));
    let indices = i64::fact(&*dims(indices));
    let facts = JitGather { op }.output_facts(&[&data, &indices])?;
    Ok(format!("{:?}", facts[0].shape))
}

/// A negative axis counts from the end, as gather-jit's own rule says, also over symbolic
/// dims (the rule cast it to `usize` and called it out of range).
#[test]
fn jit_gather_with_a_negative_axis_has_the_facts_of_its_positive_axis() {
    let gather = |axis| GatherOp::Gather {
        axis,
        batch_dims: 0,
    };
    assert_eq!(
        facts(gather(-1), &["S", "4"], &["3", "2"]).expect("facts"),
        "S,3,2"
    );
    assert_eq!(
        facts(gather(1), &["S", "4"], &["3", "2"]).expect("facts"),
        "S,3,2"
    );
    for axis in [2, -3, i64::MIN, i64::MAX] {
        let e = facts(gather(axis), &["S", "4"], &["3"]).expect_err("out of range");
        assert!(e.to_string().contains(&format!("axis {axis}")), "{e}");
    }
    let elements = |axis| GatherOp::GatherElements { axis };
    assert_eq!(
        facts(elements(-2), &["S", "4"], &["S", "2"]).expect("facts"),
        "S,2"
    );
    for axis in [2, -3, i64::MIN, i64::MAX] {
        let e = facts(elements(axis), &["S", "4"], &["S", "2"]).expect_err("out of range");
        assert!(e.to_string().contains(&format!("axis {axis}")), "{e}");
    }
}

/// GatherElements takes indices of the data's rank.
#[test]
fn jit_gather_elements_of_another_rank_is_an_error() {
    let e = facts(GatherOp::GatherElements { axis: 0 }, &["S", "4"], &["S"])
        .expect_err("rank mismatch");
    assert!(e.to_string().contains("rank"), "{e}");
}

/// ONNX Gather has no batch dims: gather-jit rejects them when the dims are known, so the rule
/// over symbolic dims does too instead of ignoring them.
#[test]
fn jit_gather_with_batch_dims_is_an_error_over_symbolic_dims_too() {
    let op = GatherOp::Gather {
        axis: 1,
        batch_dims: 1,
    };
    assert!(facts(op, &["2", "4"], &["2", "3"]).is_err());
    let e = facts(op, &["S", "4"], &["S", "3"]).expect_err("batch dims");
    assert!(e.to_string().contains("batch_dims"), "{e}");
}

/// A `JitGather` GatherND with a negative `batch_dims` overflowed `batch_dims + depth` over
/// symbolic dims; any `batch_dims` outside `0..min(ranks)` is an error.
#[test]
fn jit_gather_nd_with_batch_dims_out_of_range_is_an_error() {
    for batch_dims in [-1, i64::MIN, 2, i64::MAX] {
        let op = GatherOp::GatherNd { batch_dims };
        let e = facts(op, &["S", "3", "4"], &["S", "1"]).expect_err("out of range");
        assert!(e.to_string().contains("batch_dims"), "{batch_dims}: {e}");
    }
    let op = GatherOp::GatherNd { batch_dims: 1 };
    assert_eq!(
        facts(op, &["S", "3", "4"], &["S", "1"]).expect("facts"),
        "S,4"
    );
}

/// An op given other than two inputs: an error, not an index out of bounds.
#[test]
fn jit_gather_with_one_input_is_an_error() {
    let op = JitGather {
        op: GatherOp::GatherNd { batch_dims: 0 },
    };
    let data = f32::fact([2, 3]);
    assert!(op.output_facts(&[&data]).is_err());
    let one = tvec!(Tensor::zero::<f32>(&[2, 3]).expect("tensor").into_tvalue());
    assert!(op.eval(&EvalContext::out_of_plan(), one).is_err());
}

/// A tensor whose storage is not plain (here block-quantized `Q4_0` weights, as tract's own
/// optimiser makes of a constant) has no bytes of its type and shape to read, and tract's
/// pointer accessors panic on it ("Non-plain storage"): the op refuses it with an error, and
/// its fact at typing.
#[test]
fn jit_gather_refuses_a_tensor_whose_storage_is_not_plain() {
    use tract_onnx::tract_core::tract_linalg::block_quant::{BlockQuant, BlockQuantStorage, Q4_0};
    let blocks = Q4_0.quant_f32(&[0.5f32; 64]).expect("quantized");
    let data = BlockQuantStorage::new(Box::new(Q4_0), 2, 32, Arc::new(blocks))
        .expect("storage")
        .into_tensor_with_shape(DatumType::F32, &[2, 32]);
    assert!(!data.is_plain());
    let indices = tensor1(&[1i64]);
    let op = JitGather {
        op: GatherOp::Gather {
            axis: 0,
            batch_dims: 0,
        },
    };
    let e = op
        .eval(
            &EvalContext::out_of_plan(),
            tvec!(data.clone().into_tvalue(), indices.clone().into_tvalue()),
        )
        .expect_err("not plain");
    assert!(e.to_string().contains("storage is not plain"), "{e:#}");
    let data = TypedFact::try_from(data).expect("a fact");
    let indices = TypedFact::try_from(indices).expect("a fact");
    let e = op
        .output_facts(&[&data, &indices])
        .expect_err("exotic fact");
    assert!(e.to_string().contains("takes plain tensors"), "{e:#}");
}

/// A node of the model with one input: tract's arity check rejects it at load.
#[test]
fn gather_nodes_with_one_input_are_errors_at_load() {
    for op in ["Gather", "GatherElements", "GatherND"] {
        let bytes = onnx::model(
            13,
            &[onnx::node(op, &["data"], &["y"], &[])],
            &[],
            &[onnx::value(
                "data",
                onnx::elem::FLOAT,
                &[Value(2), Value(3)],
            )],
            &[onnx::untyped("y")],
        );
        assert!(load(bytes).is_err(), "{op}");
    }
}

/// Issue 28, item 7: an output too large for memory (here 8 TiB: data `[2^20, 2]` f64 and
/// indices `[2^20]`, so Gather's output on axis 1 is `[2^20, 2^20]`) made tract's `Blob` panic ("failed
/// to allocate"). It is an error naming the bytes. The op runs in a child process of this test
/// under an address-space limit (`ulimit -v`), so that the allocation fails whatever the
/// machine's memory and overcommit mode.
#[cfg(target_os = "linux")]
#[test]
fn an_output_too_large_for_memory_is_an_error_naming_its_bytes() {
    const CHILD: &str = "GATHER_JIT_TRACT_HUGE_OUTPUT_CHILD";
    if std::env::var_os(CHILD).is_some() {
        let op = JitGather {
            op: GatherOp::Gather {
                axis: 1,
                batch_dims: 0,
            },
        };
        let data = Tensor::zero::<f64>(&[1 << 20, 2]).expect("16 MiB of data");
        let indices = Tensor::zero::<i64>(&[1 << 20]).expect("8 MiB of indices");
        let result = op.eval(
            &EvalContext::out_of_plan(),
            tvec!(data.into_tvalue(), indices.into_tvalue()),
        );
        let e = result.expect_err("8 TiB cannot be allocated under the limit");
        println!("child error: {e}");
        let bytes = (1u64 << 40) * 8;
        assert!(e.to_string().contains(&format!("{bytes} bytes")), "{e}");
        return;
    }
    let exe = std::env::current_exe().expect("the test binary");
    let out = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 2000000 && exec \"$0\" \"$@\"")
        .arg(exe)
        .args([
            "--exact",
            "an_output_too_large_for_memory_is_an_error_naming_its_bytes",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .output()
        .expect("sh runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("child error:") && stdout.contains("1 passed"),
        "child: {}\n{stdout}\n{stderr}",
        out.status
    );
}

/// A size that overflows is an error, an empty tensor is always fine, and `2^62` bytes (more
/// than any x86-64 or AArch64 address space) are refused by the allocator whatever the
/// machine's overcommit mode: an error naming the bytes.
#[test]
fn check_allocation_refuses_what_cannot_be_allocated() {
    let e = gather_jit_tract::check_allocation(DatumType::F32, &[1 << 40, 1 << 40])
        .expect_err("overflows");
    assert!(
        e.to_string().contains("more bytes than fit in memory"),
        "{e}"
    );
    gather_jit_tract::check_allocation(DatumType::F32, &[0, usize::MAX, usize::MAX])
        .expect("an empty tensor");
    gather_jit_tract::check_allocation(DatumType::F32, &[3, 5]).expect("60 bytes");
    let e = gather_jit_tract::check_allocation(DatumType::F32, &[1 << 30, 1 << 30])
        .expect_err("2^62 bytes");
    assert!(
        e.to_string()
            .contains(&format!("could not allocate {} bytes", 1u64 << 62)),
        "{e}"
    );
}

/// `catch_panic` passes results and errors through and turns a panic (a `String` or `&str`
/// message, any other payload, one whose drop panics too) into an error naming the phase.
#[test]
fn catch_panic_turns_a_panic_into_an_error_naming_the_phase() {
    use gather_jit_tract::catch_panic;
    assert_eq!(catch_panic("p", || Ok(7)).expect("ok"), 7);
    let e = catch_panic::<()>("p", || Err(format_err!("plain"))).expect_err("err");
    assert_eq!(e.to_string(), "plain");
    let n = std::hint::black_box(3);
    let e = catch_panic::<()>("parsing", || panic!("bad tag {n}")).expect_err("panic");
    assert_eq!(e.to_string(), "parsing panicked: bad tag 3");
    let e = catch_panic::<()>("folding", || panic!("static")).expect_err("panic");
    assert_eq!(e.to_string(), "folding panicked: static");
    let e = catch_panic::<()>("x", || std::panic::panic_any(42u8)).expect_err("panic");
    assert_eq!(e.to_string(), "x panicked: a panic without a message");
    struct PanicsOnDrop;
    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            panic!("dropped");
        }
    }
    let e = catch_panic::<()>("y", || std::panic::panic_any(PanicsOnDrop)).expect_err("panic");
    assert_eq!(e.to_string(), "y panicked: a panic without a message");
}

/// `onnx_native()` puts tract's op behind the checked rules: a GatherND whose index depth
/// exceeds the indices' rank (`data [2, 2]`, `indices [2]`, a valid model whose output is
/// `data[1, 0]`) loads and runs as the JIT does.
#[test]
fn native_gather_nd_deeper_than_its_indices_rank_loads_and_runs() {
    let bytes = onnx::model(
        13,
        &[onnx::node("GatherND", &["data", "indices"], &["y"], &[])],
        &[onnx::i64_initializer("indices", &[2], &[1, 0])],
        &[onnx::value(
            "data",
            onnx::elem::FLOAT,
            &[Value(2), Value(2)],
        )],
        &[onnx::untyped("y")],
    );
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let run = gather_jit_tract::onnx_native()
            .model_for_read(&mut &bytes[..])
            .and_then(|model| model.into_optimized()?.into_runnable())
            .and_then(|plan| {
                let data = tensor2(&[[1f32, 2.0], [3.0, 4.0]]);
                plan.run(tvec!(data.into_tvalue()))
            })
            .map(|outputs| outputs[0].clone().into_tensor())
            .map_err(|e| format!("{e:#}"));
        let _ = send.send(run);
    });
    let output = match receive.recv_timeout(Duration::from_secs(60)) {
        Ok(run) => run.expect("runs"),
        Err(e) => panic!("the load panicked or did not finish: {e}"),
    };
    assert_eq!(output, tensor0(3f32));
}

/// tract's TopK sizes its outputs from `k` unchecked, and tract's tensors compute their bytes
/// with wrapping arithmetic: `k = 2^62 + 5` on 3 rows allocated 60 bytes and wrote 3,600
/// (heap corruption, found by flipping a bit of gpt2_head's `k`). `run_checked` refuses the
/// node before it runs; a valid `k` runs as `plan.run` does.
#[test]
fn run_checked_refuses_a_top_k_beyond_its_axis() {
    let model = |k: i64| {
        onnx::model(
            13,
            &[onnx::node(
                "TopK",
                &["x", "k"],
                &["values", "indices"],
                &[("axis", 1)],
            )],
            &[onnx::i64_initializer("k", &[1], &[k])],
            &[onnx::value("x", onnx::elem::FLOAT, &[Value(3), Value(300)])],
            &[onnx::untyped("values"), onnx::untyped("indices")],
        )
    };
    let x = || {
        let values: Vec<f32> = (0..900).map(|i| i as f32).collect();
        tvec!(
            Tensor::from_shape(&[3, 300], &values)
                .expect("x")
                .into_tvalue()
        )
    };
    // A negative k makes tract's own rules panic while loading (a negative dim), before a run.
    for k in [(1 << 62) + 5, 301] {
        let plan = load(model(k))
            .expect("loads")
            .into_runnable()
            .expect("runnable");
        let e = gather_jit_tract::run_checked(&plan, x()).expect_err("k out of range");
        let expected = format!("TopK's k {k} is out of range for axis 1 of length 300");
        assert!(format!("{e:#}").contains(&expected), "{e:#}");
    }
    let plan = load(model(2))
        .expect("loads")
        .into_runnable()
        .expect("runnable");
    let outputs = gather_jit_tract::run_checked(&plan, x()).expect("runs");
    let expected = tensor2(&[[299f32, 298.0], [599.0, 598.0], [899.0, 898.0]]);
    assert_eq!(*outputs[0], expected);
}

/// An op whose output facts, stated for the actual inputs, would not fit in memory is refused
/// before it runs: `Range(0, 2^62, 1)` of int64, its bounds given at run time (tract's op
/// allocates `2^65` bytes wrapped to 0, and panics indexing them).
#[test]
fn run_checked_refuses_an_output_that_cannot_fit() {
    let bytes = onnx::range_of_inputs();
    let plan = load(bytes)
        .expect("loads")
        .into_runnable()
        .expect("runnable");
    let inputs = |limit: i64| {
        tvec!(
            tensor0(0i64).into_tvalue(),
            tensor0(limit).into_tvalue(),
            tensor0(1i64).into_tvalue()
        )
    };
    let e = gather_jit_tract::run_checked(&plan, inputs(1 << 62)).expect_err("too large");
    assert!(format!("{e:#}").contains("does not fit in memory"), "{e:#}");
    let outputs = gather_jit_tract::run_checked(&plan, inputs(3)).expect("runs");
    assert_eq!(*outputs[0], tensor1(&[0i64, 1, 2]));
}
