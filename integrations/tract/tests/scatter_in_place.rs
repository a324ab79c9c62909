//! Where the JIT scatter writes: into its data tensor when tract hands the op the only
//! reference to it (the KV-cache case: the cost is the updates', not the cache's), into a fresh
//! output otherwise, never into a tensor someone else still holds. Shown on the committed
//! KV-cache model (ScatterND, ONNX Runtime's outputs) and on the op itself.

use std::fs::File;
use std::path::{Path, PathBuf};

use gather_jit::scatter::{Reduction, ScatterOp};
use gather_jit_tract::JitScatter;
use tract_onnx::prelude::*;
use tract_onnx::tract_hir::internal::{EvalContext, EvalOp};

fn case_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/models")
        .join(name)
}

/// `{kind}_{i}.pb` of the case's test data set.
fn tensor(name: &str, kind: &str, i: usize) -> Tensor {
    let path = case_dir(name).join(format!("test_data_set_0/{kind}_{i}.pb"));
    let proto = tract_onnx::tensor::proto_from_reader(File::open(&path).expect("open"))
        .expect("a TensorProto");
    let onnx = gather_jit_tract::onnx();
    tract_onnx::tensor::load_tensor(&*onnx.provider, &proto, None).expect("a tensor")
}

fn plan(name: &str) -> Arc<TypedSimplePlan> {
    let model = gather_jit_tract::onnx()
        .model_for_path(case_dir(name).join("model.onnx"))
        .expect("loads")
        .into_optimized()
        .expect("optimises");
    let scatters: Vec<_> = model
        .nodes()
        .iter()
        .filter_map(|n| n.op_as::<JitScatter>())
        .collect();
    assert_eq!(scatters.len(), 2, "{model}");
    model.into_runnable().expect("runnable")
}

/// The address of a tensor's first byte.
fn address(t: &Tensor) -> usize {
    t.as_bytes().as_ptr() as usize
}

/// The KV-cache model's caches go in by value: each ScatterND is their last reader, so tract
/// hands it the only reference and the present caches come back in the past caches' memory,
/// with ONNX Runtime's values.
#[test]
fn the_kv_cache_model_writes_into_the_caches_it_is_given() {
    for name in ["kv_cache_update", "kv_cache_update_f16"] {
        let plan = plan(name);
        let inputs: Vec<Tensor> = (0..5).map(|i| tensor(name, "input", i)).collect();
        let (past_key, past_value) = (address(&inputs[0]), address(&inputs[1]));
        let outputs = plan
            .run(inputs.into_iter().map(IntoTValue::into_tvalue).collect())
            .expect("runs");
        for (i, past) in [past_key, past_value].into_iter().enumerate() {
            let expected = tensor(name, "output", i);
            assert_eq!(
                outputs[i].as_bytes(),
                expected.as_bytes(),
                "{name} output {i}"
            );
            assert_eq!(
                address(&outputs[i]),
                past,
                "{name} output {i} was not written in place"
            );
        }
    }
}

/// A cache the caller keeps a reference to is left as it was: the op writes a fresh output.
#[test]
fn a_cache_the_caller_keeps_is_not_written() {
    let name = "kv_cache_update";
    let plan = plan(name);
    let inputs: TVec<TValue> = (0..5)
        .map(|i| tensor(name, "input", i).into_tvalue())
        .collect();
    let kept = inputs.clone();
    let outputs = plan.run(inputs).expect("runs");
    for i in 0..2 {
        assert_eq!(kept[i].as_bytes(), tensor(name, "input", i).as_bytes());
        assert_ne!(address(&outputs[i]), address(&kept[i]));
        assert_eq!(outputs[i].as_bytes(), tensor(name, "output", i).as_bytes());
    }
}

fn f32_tensor(shape: &[usize], values: &[f32]) -> Tensor {
    Tensor::from_shape(shape, values).expect("tensor")
}

/// The op on its own: data handed over is written in place, data shared is not; a bad index
/// is an error either way (gather-jit finds it before writing anything).
#[test]
fn the_op_writes_in_place_only_into_data_it_owns() {
    let op = JitScatter {
        op: ScatterOp::Nd,
        reduction: Reduction::Sum,
    };
    let ctx = EvalContext::out_of_plan();
    let data = || f32_tensor(&[3, 2], &[0., 0., 1., 1., 2., 2.]);
    let indices = Tensor::from_shape(&[3, 1], &[1i64, -2, 0]).expect("tensor");
    let updates = f32_tensor(&[3, 2], &[10., 20., 30., 40., 50., 60.]);
    let expected = f32_tensor(&[3, 2], &[50., 60., 41., 61., 2., 2.]);
    let inputs = |data: TValue| {
        tvec!(
            data,
            indices.clone().into_tvalue(),
            updates.clone().into_tvalue()
        )
    };

    let owned = data();
    let at = address(&owned);
    let out = op.eval(&ctx, inputs(owned.into_tvalue())).expect("runs");
    assert_eq!(out[0].as_bytes(), expected.as_bytes());
    assert_eq!(address(&out[0]), at, "owned data is written in place");

    let shared = data().into_tvalue();
    let out = op.eval(&ctx, inputs(shared.clone())).expect("runs");
    assert_eq!(out[0].as_bytes(), expected.as_bytes());
    assert_ne!(address(&out[0]), address(&shared));
    assert_eq!(
        shared.as_bytes(),
        data().as_bytes(),
        "shared data is untouched"
    );

    let bad = Tensor::from_shape(&[3, 1], &[1i64, 3, 0]).expect("tensor");
    for data in [data().into_tvalue(), shared.clone()] {
        let error = op
            .eval(
                &ctx,
                tvec!(
                    data,
                    bad.clone().into_tvalue(),
                    updates.clone().into_tvalue()
                ),
            )
            .expect_err("index 3 of a dim of 3");
        let message = format!("{error}");
        assert!(
            message.contains("index 3") && message.contains("[1, 0]"),
            "{message}"
        );
    }
    assert_eq!(shared.as_bytes(), data().as_bytes());
}

/// Empty data (a dim of 0) and empty indices: the output is data, in place and out of place.
#[test]
fn empty_tensors_scatter_nothing() {
    let op = JitScatter {
        op: ScatterOp::Nd,
        reduction: Reduction::None,
    };
    let ctx = EvalContext::out_of_plan();
    let cases = [
        (f32_tensor(&[0, 3], &[]), vec![0usize, 1], vec![0usize, 3]),
        (
            f32_tensor(&[2, 3], &[1., 2., 3., 4., 5., 6.]),
            vec![0, 1],
            vec![0, 3],
        ),
    ];
    for (data, indices_shape, updates_shape) in cases {
        let indices = Tensor::from_shape::<i64>(&indices_shape, &[]).expect("tensor");
        let updates = f32_tensor(&updates_shape, &[]);
        for shared in [false, true] {
            let value = data.clone().into_tvalue();
            let kept = shared.then(|| value.clone());
            let out = op
                .eval(
                    &ctx,
                    tvec!(
                        value,
                        indices.clone().into_tvalue(),
                        updates.clone().into_tvalue()
                    ),
                )
                .expect("runs");
            assert_eq!(out[0].shape(), data.shape());
            assert_eq!(out[0].as_bytes(), data.as_bytes());
            drop(kept);
        }
    }
}
