//! Views whose element count or byte size overflows `usize`, or that fit in `usize` but not
//! in memory: each is an error naming the copy that could not be made, returned before
//! anything of that size is allocated or written (a stride-0 view of one element can claim
//! any shape, and candle's own `elem_count` wraps).

use std::panic::{AssertUnwindSafe, catch_unwind};

use candle_core::{DType, Module, Tensor};
use gather_jit_candle::{Embedding, GatherJitExt};

use crate::common::cpu;

/// Rows of 16 `f32` whose bytes are `2^64 + 64`: `usize` arithmetic wraps them to 64.
const ROWS_WRAPPING_F32X16: usize = (1 << 58) + 1;

/// `2^59` `f32` are `2^61` bytes: within `isize::MAX`, beyond any address space (47 or 56
/// bits), so the reservation fails whatever the host's overcommit policy and nothing is
/// written.
const UNMAPPABLE: (usize, usize) = (1 << 29, 1 << 30);

fn zeros(dims: &[usize], dtype: DType) -> Tensor {
    Tensor::zeros(dims, dtype, &cpu()).expect("zeros")
}

fn broadcast(tensor: &Tensor, dims: &[usize]) -> Tensor {
    tensor.broadcast_as(dims).expect("a broadcast view")
}

/// `error` says that a copy of `what` could not be made because its size overflows.
fn assert_overflow(error: candle_core::Error, what: &str) {
    let message = error.to_string();
    assert!(
        message.starts_with(&format!(
            "could not allocate a contiguous copy of {what} of shape"
        )) && message.ends_with("more elements or bytes than fit in memory"),
        "{message}"
    );
}

/// `error` says that the contiguous `what` has a size that overflows.
fn assert_contiguous_overflow(error: candle_core::Error, what: &str) {
    let message = error.to_string();
    assert!(
        message.starts_with(&format!("{what} of shape"))
            && message.ends_with("more elements or bytes than fit in memory"),
        "{message}"
    );
}

#[test]
fn data_broadcast_past_usize_bytes_is_an_error_not_an_abort() {
    let data = broadcast(&zeros(&[1, 16], DType::F32), &[ROWS_WRAPPING_F32X16, 16]);
    let id = Tensor::new(&[0u32], &cpu()).expect("ids");
    let pair = Tensor::new(&[[0u32]], &cpu()).expect("ids");
    assert_overflow(
        data.jit_index_select(&id, 0).expect_err("index_select"),
        "data",
    );
    assert_overflow(data.jit_take(&pair, 1).expect_err("take"), "data");
    assert_overflow(data.jit_gather(&pair, 1).expect_err("gather"), "data");
    assert_overflow(data.jit_gather_nd(&pair, 0).expect_err("gather_nd"), "data");
    let embedding = Embedding::new(data, 16);
    assert_overflow(embedding.forward(&id).expect_err("embedding"), "data");
}

#[test]
fn data_broadcast_past_usize_elements_is_an_error_not_an_abort() {
    // (2^63 + 1) * 2 elements wrap to 2.
    let data = broadcast(&zeros(&[1, 1], DType::U8), &[(1 << 63) + 1, 2]);
    let id = Tensor::new(&[0u32], &cpu()).expect("ids");
    assert_overflow(
        data.jit_index_select(&id, 1).expect_err("index_select"),
        "data",
    );
}

#[test]
fn indices_broadcast_past_usize_bytes_are_an_error_not_an_abort() {
    let table = zeros(&[4, 2], DType::F32);
    // Each wraps to a few bytes: 4 * (2^62 + 1), 8 * (2^61 + 1), 2 * (2^63 + 1).
    for (dtype, count) in [
        (DType::U32, (1usize << 62) + 1),
        (DType::I64, (1 << 61) + 1),
        (DType::I16, (1 << 63) + 1),
    ] {
        let ids = broadcast(&zeros(&[1], dtype), &[count]);
        assert_overflow(
            table.jit_index_select(&ids, 0).expect_err("index_select"),
            "indices",
        );
        assert_overflow(table.jit_take(&ids, 0).expect_err("take"), "indices");
        let embedding = Embedding::new(table.clone(), 2);
        assert_overflow(embedding.forward(&ids).expect_err("embedding"), "indices");
    }
}

#[test]
fn a_broadcast_view_too_large_to_allocate_is_an_allocation_error() {
    let (rows, columns) = UNMAPPABLE;
    let data = broadcast(&zeros(&[1, 1], DType::F32), &[rows, columns]);
    let id = Tensor::new(&[0u32], &cpu()).expect("ids");
    let error = data.jit_index_select(&id, 0).expect_err("2^61 bytes");
    assert_eq!(
        error.to_string(),
        "could not allocate 2305843009213693952 bytes for a contiguous copy of data"
    );
    let ids = broadcast(&zeros(&[1], DType::U32), &[rows * columns]);
    let error = zeros(&[4, 2], DType::F32)
        .jit_take(&ids, 0)
        .expect_err("2^61 bytes of ids");
    assert_eq!(
        error.to_string(),
        "could not allocate 2305843009213693952 bytes for a contiguous copy of indices"
    );
}

/// A contiguous tensor of `values` claiming shape `dims`, whose element count wraps to
/// `values.len()`; `None` where candle's own arithmetic refuses it (a build of candle with
/// overflow checks panics, which is then the only way such a tensor is refused).
pub fn wrapped<T: candle_core::WithDType>(values: Vec<T>, dims: &[usize]) -> Option<Tensor> {
    catch_unwind(AssertUnwindSafe(|| Tensor::from_vec(values, dims, &cpu())))
        .ok()
        .map(|tensor| tensor.expect("candle takes the wrapped count"))
}

#[test]
fn a_contiguous_shape_whose_element_count_wraps_is_an_error_not_a_panic() {
    // (2^62 + 1) * 4 elements wrap to 4, the storage's length.
    let dims = [(1usize << 62) + 1, 4];
    let Some(data) = wrapped(vec![0f32; 4], &dims) else {
        return;
    };
    let id = Tensor::new(&[0u32], &cpu()).expect("ids");
    assert_contiguous_overflow(data.jit_index_select(&id, 1).expect_err("data"), "data");
    let Some(ids) = wrapped(vec![0u32; 4], &dims) else {
        return;
    };
    let table = zeros(&[4, 2], DType::F32);
    assert_contiguous_overflow(table.jit_take(&ids, 0).expect_err("indices"), "indices");
}
