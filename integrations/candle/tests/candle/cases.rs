//! Hand-written cases: the index rules at their edges, error messages, types candle's ops do
//! not take, a cache of one's own, and the embedding's shapes.

use std::sync::Arc;

use candle_core::{DType, Module, Tensor};
use gather_jit::KernelCache;
use gather_jit_candle::{Embedding, GatherJitExt, IndexRules, JitGather, gather_nd, index_select};

use crate::common::{bytes, cpu};

fn table() -> Tensor {
    // [[0, 1], [2, 3], [4, 5]]
    Tensor::arange(0f32, 6., &cpu())
        .and_then(|t| t.reshape((3, 2)))
        .expect("table")
}

#[test]
fn a_bad_index_is_an_error_with_its_position_and_value() {
    let ids = Tensor::new(&[0u32, 2, 7, 9], &cpu()).expect("ids");
    let error = table()
        .jit_index_select(&ids, 0)
        .expect_err("7 is out of range");
    let message = error.to_string();
    assert!(message.contains("index 7 at position [2]"), "{message}");
    assert!(message.contains("size 3"), "{message}");
    assert!(
        table().index_select(&ids, 0).is_err(),
        "candle rejects it too"
    );

    let ids = Tensor::new(&[[1i64, 0], [-1, 1]], &cpu()).expect("ids");
    let error = table().jit_gather(&ids, 1).expect_err("negative");
    assert!(
        error.to_string().contains("index -1 at position [1, 0]"),
        "{error}"
    );
    assert!(table().gather(&ids, 1).is_err(), "candle rejects it too");
}

#[test]
fn the_type_maximum_selects_zeros_as_in_candle() {
    let table = table();
    for ids in [
        Tensor::new(&[1u32, u32::MAX], &cpu()),
        Tensor::new(&[1i64, i64::MAX], &cpu()),
        Tensor::new(&[1u8, u8::MAX], &cpu()),
    ] {
        let ids = ids.expect("ids");
        let jit = table
            .jit_index_select(&ids, 0)
            .expect("the maximum is not an error");
        assert_eq!(jit.to_vec2::<f32>().expect("f32"), [[2., 3.], [0., 0.]]);
        let native = table.index_select(&ids, 0).expect("candle");
        assert_eq!(bytes(&jit), bytes(&native));
    }
    // GatherElements: element by element.
    let ids = Tensor::new(&[[1u32, u32::MAX], [u32::MAX, 0]], &cpu()).expect("ids");
    let jit = table
        .narrow(0, 0, 2)
        .and_then(|t| t.jit_gather(&ids, 1))
        .expect("gather");
    assert_eq!(jit.to_vec2::<f32>().expect("f32"), [[1., 0.], [0., 2.]]);
    // GatherND: the tuple's whole slice.
    let ids = Tensor::new(&[[2u32], [u32::MAX]], &cpu()).expect("ids");
    let jit = table.jit_gather_nd(&ids, 0).expect("gather_nd");
    assert_eq!(jit.to_vec2::<f32>().expect("f32"), [[4., 5.], [0., 0.]]);
}

#[test]
fn u8_255_selects_zeros_even_where_row_255_exists() {
    let data = Tensor::arange(0u32, 600, &cpu())
        .and_then(|t| t.reshape((300, 2)))
        .expect("data");
    let ids = Tensor::new(&[254u8, 255, 3], &cpu()).expect("ids");
    let jit = data.jit_index_select(&ids, 0).expect("jit");
    assert_eq!(
        jit.to_vec2::<u32>().expect("u32"),
        [[508, 509], [0, 0], [6, 7]]
    );
    assert_eq!(
        bytes(&jit),
        bytes(&data.index_select(&ids, 0).expect("candle"))
    );
    // Under ONNX rules 255 is just a row.
    let onnx = JitGather::index_select(0)
        .with_rules(IndexRules::Onnx)
        .apply(&data, &ids)
        .expect("onnx");
    assert_eq!(onnx.to_vec2::<u32>().expect("u32")[1], [510, 511]);
}

#[test]
fn a_bad_index_after_a_maximum_is_still_the_error() {
    let ids = Tensor::new(&[u32::MAX, 1, 5, 7], &cpu()).expect("ids");
    let error = table()
        .jit_index_select(&ids, 0)
        .expect_err("5 is out of range");
    assert!(
        error.to_string().contains("index 5 at position [2]"),
        "{error}"
    );
    // And a bad index before one.
    let ids = Tensor::new(&[9u32, u32::MAX], &cpu()).expect("ids");
    let error = table()
        .jit_index_select(&ids, 0)
        .expect_err("9 is out of range");
    assert!(
        error.to_string().contains("index 9 at position [0]"),
        "{error}"
    );
    // GatherND names the coordinate within the tuple.
    let ids = Tensor::new(&[[1u32, u32::MAX], [0, 2]], &cpu()).expect("ids");
    let error = table()
        .jit_gather_nd(&ids, 0)
        .expect_err("2 is out of range for dim 1");
    assert!(
        error.to_string().contains("index 2 at position [1, 1]"),
        "{error}"
    );
}

#[test]
fn gather_with_smaller_indices_follows_gather_elements() {
    // data [2, 3, 2] = 0..12; indices [2, 2, 1] along the last dim: output [b, r, 0] reads
    // data[b, r, ids[b, r, 0]].
    let data = Tensor::arange(0i64, 12, &cpu())
        .and_then(|t| t.reshape((2, 3, 2)))
        .expect("data");
    let ids = Tensor::new(&[[[1u32], [0]], [[0], [1]]], &cpu()).expect("ids");
    let jit = data.jit_gather(&ids, 2).expect("gather");
    assert_eq!(jit.to_vec3::<i64>().expect("i64"), [[[1], [2]], [[6], [9]]]);
}

#[test]
fn other_index_types() {
    let table = table();
    let ids = Tensor::new(&[2i32, 0], &cpu()).expect("ids");
    let jit = table.jit_index_select(&ids, 0).expect("i32 ids");
    assert_eq!(jit.to_vec2::<f32>().expect("f32"), [[4., 5.], [0., 1.]]);
    let ids = ids.to_dtype(DType::I16).expect("i16");
    let jit = table.jit_index_select(&ids, 0).expect("i16 ids");
    assert_eq!(jit.to_vec2::<f32>().expect("f32"), [[4., 5.], [0., 1.]]);
    // Float indices are an error, not a panic.
    let ids = Tensor::new(&[1f32], &cpu()).expect("ids");
    let error = table.jit_index_select(&ids, 0).expect_err("f32 ids");
    assert!(error.to_string().contains("indices must be"), "{error}");
}

#[test]
fn more_data_types() {
    let data = Tensor::new(&[[1i32, -2], [3, -4]], &cpu()).expect("i32");
    let ids = Tensor::new(&[1u32], &cpu()).expect("ids");
    assert_eq!(
        data.jit_index_select(&ids, 0)
            .and_then(|t| t.to_vec2::<i32>())
            .expect("i32"),
        [[3, -4]]
    );
    let data = data.to_dtype(DType::I16).expect("i16");
    assert_eq!(
        bytes(
            &data
                .to_dtype(DType::I64)
                .expect("i64")
                .jit_index_select(&ids, 1)
                .expect("i64")
        ),
        bytes(&Tensor::new(&[[-2i64], [-4]], &cpu()).expect("expected")),
    );
    assert_eq!(data.jit_index_select(&ids, 1).expect("i16").dims(), [2, 1]);
}

#[test]
fn shape_errors_are_errors() {
    let table = table();
    let two_d = Tensor::new(&[[0u32]], &cpu()).expect("ids");
    assert!(
        index_select(&table, &two_d, 0).is_err(),
        "index_select takes 1-D ids"
    );
    assert!(table.jit_take(&two_d, 0).is_ok(), "take takes any rank");
    let ids = Tensor::new(&[0u32], &cpu()).expect("ids");
    assert!(table.jit_index_select(&ids, 2).is_err(), "dim out of range");
    // The op structs take any dim; a bad one is an error when the op runs.
    for op in [
        JitGather::index_select(5),
        JitGather::take(2),
        JitGather::gather(9),
    ] {
        assert!(op.apply(&table, &ids).is_err(), "{op:?}");
    }
    assert!(JitGather::gather_nd(3).apply(&table, &two_d).is_err());
    assert!(table.jit_gather(&ids, 0).is_err(), "gather: ranks differ");
    let wide = Tensor::new(&[[0u32, 0, 0]], &cpu()).expect("ids");
    assert!(
        table.jit_gather(&wide, 0).is_err(),
        "gather: dim 1 larger than data's"
    );
    assert!(table.gather(&wide, 0).is_err(), "candle rejects it too");
    let deep = Tensor::new(&[[0u32, 0, 0]], &cpu()).expect("ids");
    assert!(
        gather_nd(&table, &deep, 0).is_err(),
        "tuple longer than data's rank"
    );
    let batch = Tensor::new(&[[0u32], [0]], &cpu()).expect("ids");
    assert!(
        gather_nd(&table, &batch, 1).is_err(),
        "batch dims 3 and 2 differ"
    );
}

#[test]
fn empty_tensors() {
    let table = table();
    let none = Tensor::new(&[0u32; 0], &cpu()).expect("ids");
    let out = table.jit_index_select(&none, 0).expect("no ids");
    assert_eq!(out.dims(), [0, 2]);
    let empty = table.narrow(0, 0, 0).expect("empty");
    assert!(
        empty
            .jit_index_select(&Tensor::new(&[0u32], &cpu()).expect("ids"), 0)
            .is_err()
    );
    let out = empty
        .jit_index_select(&none, 0)
        .expect("nothing from nothing");
    assert_eq!(out.dims(), [0, 2]);
}

#[test]
fn a_cache_of_ones_own() {
    let cache = Arc::new(KernelCache::new(8));
    let op = JitGather::gather_nd(0).with_cache(Arc::clone(&cache));
    let ids = Tensor::new(&[[2u32, 1]], &cpu()).expect("ids");
    for _ in 0..3 {
        let out = op.apply(&table(), &ids).expect("gather_nd");
        assert_eq!(out.to_vec1::<f32>().expect("f32"), [5.]);
    }
    let stats = cache.stats();
    assert_eq!((stats.misses, stats.compilations), (1, 1), "{stats:?}");
}

#[test]
fn a_repeated_call_on_another_cache_asks_that_cache() {
    // Each thread remembers its last call's kernel; a call on the same shapes through another
    // cache must still take its kernel from that cache.
    let (first, second) = (Arc::new(KernelCache::new(8)), Arc::new(KernelCache::new(8)));
    let ids = Tensor::new(&[[2u32, 1]], &cpu()).expect("ids");
    for cache in [&first, &second, &first, &second] {
        let op = JitGather::gather_nd(0).with_cache(Arc::clone(cache));
        let out = op.apply(&table(), &ids).expect("gather_nd");
        assert_eq!(out.to_vec1::<f32>().expect("f32"), [5.]);
    }
    for cache in [&first, &second] {
        let stats = cache.stats();
        assert_eq!((stats.misses, stats.hits), (1, 1), "{stats:?}");
    }
}

#[test]
fn a_thread_holds_its_last_calls_kernel_until_a_call_on_other_shapes() {
    let cache = Arc::new(KernelCache::new(8));
    let op = JitGather::index_select(0).with_cache(Arc::clone(&cache));
    let ids = Tensor::new(&[2u32, 0], &cpu()).expect("ids");
    let out = op.apply(&table(), &ids).expect("index_select");
    assert_eq!(out.to_vec2::<f32>().expect("f32"), [[4., 5.], [0., 1.]]);
    let kernel = cache
        .get(
            &gather_jit::Signature::gather(&[3, 2], &[2], 0, 0)
                .with_index_type(gather_jit::IndexType::U32)
                .with_policy(IndexRules::Candle.policy())
                .with_output_memory(gather_jit::OutputMemory::Fresh),
        )
        .expect("the kernel the call used");
    assert_eq!(cache.stats().compilations, 1, "the same kernel");
    cache.clear();
    assert_eq!(
        Arc::strong_count(&kernel),
        2,
        "the cache let go; this thread's last call and this test hold it"
    );
    // Repeating the call after the cache let go still runs (on the kernel the thread holds).
    let again = op.apply(&table(), &ids).expect("index_select");
    assert_eq!(bytes(&again), bytes(&out));
    // A call on other shapes lets go of it.
    let other = Tensor::new(&[1u32], &cpu()).expect("ids");
    op.apply(&table(), &other).expect("index_select");
    assert_eq!(Arc::strong_count(&kernel), 1, "only this test holds it now");
}

#[test]
fn embedding_shapes_as_candle_nn() {
    let table = Tensor::arange(0f32, 12., &cpu())
        .and_then(|t| t.reshape((4, 3)))
        .expect("table");
    let ours = Embedding::new(table.clone(), 3);
    let theirs = candle_nn::Embedding::new(table.clone(), 3);
    assert_eq!(ours.hidden_size(), 3);
    assert_eq!(bytes(ours.embeddings()), bytes(theirs.embeddings()));
    // A scalar id gives one row.
    let id = Tensor::new(2u32, &cpu()).expect("id");
    let row = ours.forward(&id).expect("scalar id");
    assert_eq!(row.to_vec1::<f32>().expect("f32"), [6., 7., 8.]);
    assert_eq!(bytes(&row), bytes(&theirs.forward(&id).expect("candle_nn")));
    // A hidden size that does not match the table fails in both.
    let id = Tensor::new(&[1u32], &cpu()).expect("id");
    assert!(Embedding::new(table.clone(), 4).forward(&id).is_err());
    assert!(candle_nn::Embedding::new(table, 4).forward(&id).is_err());
}

#[test]
fn embedding_of_a_model_size_table() {
    let (vocabulary, hidden) = (5000, 96);
    let table = Tensor::arange(0u32, (vocabulary * hidden) as u32, &cpu())
        .and_then(|t| t.to_dtype(DType::F32))
        .and_then(|t| t.reshape((vocabulary, hidden)))
        .expect("table");
    let ids: Vec<u32> = (0..2 * 64)
        .map(|i| (i * 7919) % vocabulary as u32)
        .collect();
    let ids = Tensor::from_vec(ids, (2, 64), &cpu()).expect("ids");
    let ours = Embedding::new(table.clone(), hidden)
        .forward(&ids)
        .expect("ours");
    let theirs = candle_nn::Embedding::new(table, hidden)
        .forward(&ids)
        .expect("candle_nn");
    assert_eq!(ours.dims(), [2, 64, hidden]);
    assert_eq!(bytes(&ours), bytes(&theirs));
}

#[test]
fn f8_data_moves_as_bytes() {
    let data = Tensor::arange(0f32, 8., &cpu())
        .and_then(|t| t.reshape((4, 2)))
        .and_then(|t| t.to_dtype(DType::F8E4M3))
        .expect("f8");
    let ids = Tensor::new(&[3u32, 1], &cpu()).expect("ids");
    let jit = data.jit_index_select(&ids, 0).expect("jit");
    assert_eq!(jit.dtype(), DType::F8E4M3);
    let back = jit
        .to_dtype(DType::F32)
        .and_then(|t| t.to_vec2::<f32>())
        .expect("f32");
    assert_eq!(back, [[6., 7.], [2., 3.]]);
}

#[test]
fn threads_calling_at_once_get_their_own_results() {
    let workers: Vec<_> = (0..4usize)
        .map(|t| {
            std::thread::spawn(move || {
                // Each thread its own shapes, so that a shared signature buffer would show.
                let data = Tensor::arange(0u32, (t as u32 + 2) * 3, &cpu())
                    .and_then(|d| d.reshape((t + 2, 3)))
                    .expect("data");
                for i in 0..200usize {
                    let ids = Tensor::new(&[(i % (t + 2)) as u32], &cpu()).expect("ids");
                    let jit = data.jit_index_select(&ids, 0).expect("jit");
                    let native = data.index_select(&ids, 0).expect("candle");
                    assert_eq!(bytes(&jit), bytes(&native), "thread {t}, call {i}");
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("no thread panicked");
    }
}
