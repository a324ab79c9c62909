//! Hostile scatters: ONNX files whose ScatterND, ScatterElements or Scatter nodes have
//! impossible ranks, index depths, axes, updates shapes or reductions, `JitScatter` ops built
//! by hand with such inputs, and indices out of range at run time. Each is an error (at load
//! where the shapes are declared), never a panic or a loop, with the JIT ops (`onnx()`) and
//! with tract's own ops behind this crate's rules (`onnx_native()`).

#[path = "support/onnx.rs"]
mod onnx;

use std::sync::mpsc;
use std::time::Duration;

use gather_jit::scatter::{Reduction, ScatterOp};
use gather_jit_tract::JitScatter;
use onnx::Dim::{Param, Value};
use tract_onnx::prelude::*;
use tract_onnx::tract_hir::internal::{EvalContext, EvalOp, TypedOp};

/// Loads `bytes` and optimises it, with the JIT ops (`native` false) or tract's own, on a
/// thread with a deadline: `Err` is tract's error message; a panic or a timeout fails.
#[track_caller]
fn load(bytes: &[u8], native: bool) -> Result<TypedModel, String> {
    let (send, receive) = mpsc::channel();
    let bytes = bytes.to_vec();
    std::thread::spawn(move || {
        let framework = match native {
            true => gather_jit_tract::onnx_native(),
            false => gather_jit_tract::onnx(),
        };
        let result = framework
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

/// Loads `bytes` both ways and expects an error that contains `expected` from each.
#[track_caller]
fn load_error(bytes: &[u8], expected: &str) {
    for native in [false, true] {
        match load(bytes, native) {
            Ok(model) => panic!("loaded (native: {native}): {model}"),
            Err(e) => assert!(
                e.contains(expected),
                "{expected:?} not in {e:?} (native: {native})"
            ),
        }
    }
}

/// `op(data, indices, updates)` with `attrs` (and `reduction` if given), all three graph
/// inputs (f32 data and updates, i64 indices) of the declared dims, output `y` untyped.
fn scatter(
    op: &str,
    data: &[onnx::Dim],
    indices: &[onnx::Dim],
    updates: &[onnx::Dim],
    attrs: &[(&str, i64)],
    reduction: Option<&str>,
) -> Vec<u8> {
    let mut node = onnx::node(op, &["data", "indices", "updates"], &["y"], attrs);
    if let Some(reduction) = reduction {
        node = onnx::with_string_attr(node, "reduction", reduction);
    }
    onnx::model(
        18,
        &[node],
        &[],
        &[
            onnx::value("data", onnx::elem::FLOAT, data),
            onnx::value("indices", onnx::elem::INT64, indices),
            onnx::value("updates", onnx::elem::FLOAT, updates),
        ],
        &[onnx::untyped("y")],
    )
}

/// The encoder's string attribute is what prost reads.
#[test]
fn the_reduction_attribute_is_written_as_prost_reads_it() {
    let bytes = scatter(
        "ScatterND",
        &[Value(2)],
        &[Value(1), Value(1)],
        &[Value(1)],
        &[],
        Some("mul"),
    );
    let proto = tract_onnx::onnx()
        .proto_model_for_read(&mut &bytes[..])
        .expect("prost decodes it");
    let attr = &proto.graph.expect("a graph").node[0].attribute[0];
    assert_eq!(
        (attr.name.as_str(), attr.s.as_slice(), attr.r#type),
        ("reduction", &b"mul"[..], 3)
    );
}

/// A valid scatter of each kind loads with a JIT op, and with tract's own op natively: the
/// models below fail for their one defect.
#[test]
fn the_valid_forms_load() {
    let nd = scatter(
        "ScatterND",
        &[Value(4), Value(3)],
        &[Value(2), Value(1)],
        &[Value(2), Value(3)],
        &[],
        Some("add"),
    );
    let elements = scatter(
        "ScatterElements",
        &[Value(4), Value(3)],
        &[Value(2), Value(5)],
        &[Value(2), Value(5)],
        &[("axis", -1)],
        Some("max"),
    );
    let symbolic = scatter(
        "ScatterND",
        &[Param("n"), Value(3)],
        &[Param("t"), Value(1)],
        &[Param("t"), Value(3)],
        &[],
        None,
    );
    for (bytes, jit) in [
        (nd, "JitScatterND"),
        (elements, "JitScatterElements"),
        (symbolic, "JitScatterND"),
    ] {
        let model = load(&bytes, false).expect("loads");
        assert!(
            model.nodes().iter().any(|n| n.op().name() == jit),
            "{model}"
        );
        load(&bytes, true).expect("loads natively");
    }
}

/// Indices of rank 0 have no index depth: tract's own ScatterND rules compute `rank - 1`
/// unchecked on them.
#[test]
fn scatter_nd_with_rank_0_indices_is_an_error_at_load() {
    load_error(
        &scatter("ScatterND", &[Value(3)], &[], &[], &[], None),
        "indices of rank 0",
    );
}

#[test]
fn scatter_nd_with_rank_0_data_is_an_error_at_load() {
    load_error(
        &scatter("ScatterND", &[], &[Value(1)], &[], &[], None),
        "data of rank 0",
    );
}

/// The index depth must be in `1..=rank(data)`, symbolic other dims or not.
#[test]
fn scatter_nd_index_depths_out_of_range_are_errors_at_load() {
    for (depth, batch) in [(0, Value(2)), (3, Value(2)), (3, Param("t"))] {
        load_error(
            &scatter(
                "ScatterND",
                &[Value(4), Value(3)],
                &[batch, Value(depth)],
                &[batch],
                &[],
                None,
            ),
            &format!("index depth {depth}"),
        );
    }
}

/// ScatterND's updates are `indices.shape[:-1] + data.shape[k:]`: another rank or dim is an
/// error.
#[test]
fn scatter_nd_with_updates_of_another_shape_is_an_error_at_load() {
    for updates in [
        &[Value(2), Value(4)][..],
        &[Value(3), Value(3)],
        &[Value(2)],
        &[Value(2), Value(3), Value(1)],
    ] {
        let bytes = scatter(
            "ScatterND",
            &[Value(4), Value(3)],
            &[Value(2), Value(1)],
            updates,
            &[],
            None,
        );
        for native in [false, true] {
            assert!(
                load(&bytes, native).is_err(),
                "updates {updates:?} (native: {native})"
            );
        }
    }
}

/// ScatterElements' axis must be in `-rank..rank` (an axis below `-rank` must not wrap into
/// range, and tract's own op would index with it).
#[test]
fn scatter_elements_axes_out_of_range_are_errors_at_load() {
    for op in ["ScatterElements", "Scatter"] {
        for axis in [2, -3, i64::MAX, i64::MIN] {
            load_error(
                &scatter(
                    op,
                    &[Value(4), Value(3)],
                    &[Value(1), Value(1)],
                    &[Value(1), Value(1)],
                    &[("axis", axis)],
                    None,
                ),
                &format!("axis {axis} is out of range for rank 2"),
            );
        }
    }
}

/// ScatterElements takes data, indices and updates of one rank, and updates of the indices'
/// shape.
#[test]
fn scatter_elements_of_other_ranks_or_shapes_are_errors_at_load() {
    let cases: [(&[onnx::Dim], &[onnx::Dim]); 3] = [
        (&[Value(3)], &[Value(3)]),
        (&[Value(2), Value(2)], &[Value(2), Value(3)]),
        (&[Value(2), Value(2)], &[Value(2)]),
    ];
    for (indices, updates) in cases {
        let bytes = scatter(
            "ScatterElements",
            &[Value(3), Value(3)],
            indices,
            updates,
            &[],
            None,
        );
        for native in [false, true] {
            assert!(
                load(&bytes, native).is_err(),
                "indices {indices:?} updates {updates:?} (native: {native})"
            );
        }
    }
    // Indices longer than data outside the axis: gather-jit's validation says which dim.
    let e = load(
        &scatter(
            "ScatterElements",
            &[Value(3), Value(3)],
            &[Value(1), Value(4)],
            &[Value(1), Value(4)],
            &[],
            None,
        ),
        false,
    )
    .expect_err("dim 1 of 4 beside data's 3");
    assert!(e.contains("dim 1"), "{e}");
}

#[test]
fn an_unknown_reduction_is_an_error_at_load() {
    for op in ["ScatterND", "ScatterElements"] {
        let bytes = scatter(
            op,
            &[Value(3)],
            &[Value(1), Value(1)],
            &[Value(1)],
            &[],
            Some("mean"),
        );
        for native in [false, true] {
            let e = load(&bytes, native).expect_err("mean is not ONNX's");
            assert!(e.contains("Unknown scatter reduction: mean"), "{e}");
        }
    }
}

/// Shapes whose bytes overflow are refused by gather-jit's validation when the op is typed.
#[test]
fn a_data_shape_beyond_memory_is_an_error_at_load() {
    let huge = Value(1 << 40);
    let e = load(
        &scatter(
            "ScatterND",
            &[huge, huge],
            &[Value(1), Value(1)],
            &[Value(1), huge],
            &[],
            None,
        ),
        false,
    )
    .expect_err("2^80 elements");
    assert!(e.contains("data"), "{e}");
}

/// Runs the model `bytes` (JIT ops) on `inputs`.
fn run(bytes: &[u8], inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
    gather_jit_tract::onnx()
        .model_for_read(&mut &bytes[..])?
        .into_optimized()?
        .into_runnable()?
        .run(inputs)
}

/// An index out of range at run time is an error naming its position and value, in place
/// (the data input is handed over) or not; negative indices from `-dim` wrap.
#[test]
fn an_index_out_of_range_at_run_time_is_an_error_naming_it() {
    let bytes = scatter(
        "ScatterND",
        &[Value(3), Value(2)],
        &[Value(2), Value(1)],
        &[Value(2), Value(2)],
        &[],
        Some("add"),
    );
    let data = || tensor2(&[[1f32, 2.], [3., 4.], [5., 6.]]).into_tvalue();
    let updates = tensor2(&[[10f32, 20.], [30., 40.]]).into_tvalue();
    let ok = run(
        &bytes,
        tvec!(
            data(),
            tensor2(&[[-3i64], [-3]]).into_tvalue(),
            updates.clone()
        ),
    )
    .expect("-3 is row 0");
    assert_eq!(
        ok[0].as_bytes(),
        tensor2(&[[41f32, 62.], [3., 4.], [5., 6.]]).as_bytes()
    );
    for bad in [3i64, -4, i64::MAX, i64::MIN] {
        let kept = data();
        for shared in [false, true] {
            let input = match shared {
                true => kept.clone(),
                false => data(),
            };
            let e = run(
                &bytes,
                tvec!(
                    input,
                    tensor2(&[[0i64], [bad]]).into_tvalue(),
                    updates.clone()
                ),
            )
            .expect_err("out of range");
            let e = format!("{e:#}");
            assert!(
                e.contains(&format!("index {bad} at position [1, 0]")),
                "{e}"
            );
        }
        assert_eq!(kept.as_bytes(), data().as_bytes());
    }
}

fn f32_fact(dims: &[usize]) -> TypedFact {
    f32::fact(dims)
}

/// A `JitScatter` built by hand: wrong arity, types, ranks, shapes and ops are errors from
/// `output_facts` and from `eval`, never panics.
#[test]
fn a_hand_built_jit_scatter_refuses_what_onnx_does() {
    let nd = JitScatter {
        op: ScatterOp::Nd,
        reduction: Reduction::None,
    };
    let i64_fact = |dims: &[usize]| i64::fact(dims);
    // Two inputs.
    let (data, indices) = (f32_fact(&[3]), i64_fact(&[1, 1]));
    assert!(nd.output_facts(&[&data, &indices]).is_err());
    // Updates of another shape, of another type, indices of rank 0.
    let cases = [
        (f32_fact(&[3, 2]), i64_fact(&[2, 1]), f32_fact(&[2, 3])),
        (f32_fact(&[3, 2]), i64_fact(&[2, 1]), i64_fact(&[2, 2])),
        (f32_fact(&[3, 2]), i64_fact(&[]), f32_fact(&[2])),
        (f32_fact(&[3, 2]), f32_fact(&[2, 1]), f32_fact(&[2, 2])),
    ];
    for (data, indices, updates) in &cases {
        assert!(
            nd.output_facts(&[data, indices, updates]).is_err(),
            "{data:?} {indices:?} {updates:?}"
        );
    }
    // The same through eval.
    let ctx = EvalContext::out_of_plan();
    let data = || tensor2(&[[1f32, 2.], [3., 4.], [5., 6.]]).into_tvalue();
    let inputs: [TVec<TValue>; 4] = [
        tvec!(
            data(),
            tensor2(&[[0i64], [1]]).into_tvalue(),
            tensor2(&[[1f32, 2., 3.], [4., 5., 6.]]).into_tvalue()
        ),
        tvec!(
            data(),
            tensor2(&[[0i64], [1]]).into_tvalue(),
            tensor2(&[[1i64, 2], [3, 4]]).into_tvalue()
        ),
        tvec!(
            data(),
            tensor0(0i64).into_tvalue(),
            tensor1(&[1f32, 2.]).into_tvalue()
        ),
        tvec!(
            tensor1(&["a".to_string(), "b".to_string()]).into_tvalue(),
            tensor2(&[[0i64]]).into_tvalue(),
            tensor1(&["c".to_string()]).into_tvalue()
        ),
    ];
    for inputs in inputs {
        let described = format!("{inputs:?}");
        assert!(nd.eval(&ctx, inputs).is_err(), "{described}");
    }
    // ScatterUpdate is OpenVINO's: under ONNX rules it is refused.
    let update = JitScatter {
        op: ScatterOp::Update { axis: 0 },
        reduction: Reduction::None,
    };
    let e = update
        .eval(
            &ctx,
            tvec!(
                data(),
                tensor1(&[0i64]).into_tvalue(),
                tensor2(&[[7f32, 8.]]).into_tvalue()
            ),
        )
        .expect_err("not ONNX");
    assert!(e.to_string().contains("ScatterUpdate"), "{e}");
    // An axis out of range, over symbolic dims too.
    let elements = JitScatter {
        op: ScatterOp::Elements { axis: 2 },
        reduction: Reduction::Sum,
    };
    let scope = SymbolScope::default();
    let n: TDim = scope.sym("n").into();
    let symbolic = f32::fact(&[n.clone(), 2.into()]);
    let symbolic_indices = i64::fact(&[n, 2.into()]);
    let e = elements
        .output_facts(&[&symbolic, &symbolic_indices, &symbolic])
        .expect_err("axis 2 of rank 2");
    assert!(e.to_string().contains("axis 2"), "{e}");
    let e = elements
        .output_facts(&[&f32_fact(&[2, 2]), &i64_fact(&[2, 2]), &f32_fact(&[2, 2])])
        .expect_err("axis 2 of rank 2");
    assert!(e.to_string().contains("axis"), "{e}");
}
