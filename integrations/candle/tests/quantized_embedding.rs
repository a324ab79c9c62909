//! `QuantizedEmbedding` against candle's own quantized paths: tables quantized by candle's
//! `QTensor::quantize`, then rows from `QTensor::dequantize` + `Tensor::embedding` and from
//! `QTensor::embedding`, compared bit for bit; raw blocks of any bits against gather-jit's
//! interpreter; ids of every shape, layout and type; the errors.
//!
//! Bit-identical is the right bar: candle computes `(nibble - 8) as f32 * d` (`Q4_0`) and
//! `q as f32 * d` (`Q8_0`) with `d` the block's `f16` widened to `f32`, as the kernels do, and
//! each product is exact (a 4- or 8-bit integer times an 11-bit significand fits in `f32`'s 24),
//! so no order of evaluation can round differently.

use std::borrow::Cow;
use std::io::Cursor;

use candle_core::quantized::{GgmlDType, QStorage, QTensor, gguf_file};
use candle_core::{DType, Device, Module, Tensor};
use gather_jit::interp::interpret_quantized;
use gather_jit::{GgufFormat, IndexType, QuantizedSignature};
use gather_jit_candle::QuantizedEmbedding;
use gather_jit_workloads::XorShift;

const FORMATS: [GgmlDType; 2] = [GgmlDType::Q4_0, GgmlDType::Q8_0];

fn cpu() -> Device {
    Device::Cpu
}

/// A random `f32` table whose rows have magnitudes from 2^-8 to 2^8, with an all-zero row
/// (scale 0) and rows where one value dominates its blocks.
fn random_table(vocabulary: usize, hidden: usize, seed: u64) -> Tensor {
    let mut rng = XorShift::new(seed);
    let mut values = Vec::with_capacity(vocabulary * hidden);
    for row in 0..vocabulary {
        let magnitude = 2f32.powi(rng.below(17) as i32 - 8);
        for column in 0..hidden {
            let unit = (rng.below(1 << 24) as f32 / (1 << 23) as f32) - 1.0;
            let value = match row % 7 {
                3 => 0.0,
                5 if column % 32 == 7 => magnitude * 64.0,
                _ => unit * magnitude,
            };
            values.push(value);
        }
    }
    Tensor::from_vec(values, (vocabulary, hidden), &cpu()).expect("table")
}

fn quantized(vocabulary: usize, hidden: usize, dtype: GgmlDType, seed: u64) -> QTensor {
    QTensor::quantize(&random_table(vocabulary, hidden, seed), dtype).expect("quantize")
}

/// Random ids below `vocabulary` of `dtype` and shape `dims`.
fn random_ids(dims: &[usize], vocabulary: usize, dtype: DType, rng: &mut XorShift) -> Tensor {
    let count: usize = dims.iter().product();
    let values: Vec<u64> = (0..count).map(|_| rng.below(vocabulary as u64)).collect();
    ids_of(&values, dims, dtype)
}

fn ids_of(values: &[u64], dims: &[usize], dtype: DType) -> Tensor {
    let tensor = match dtype {
        DType::U8 => Tensor::from_vec(
            values.iter().map(|&v| v as u8).collect::<Vec<_>>(),
            dims,
            &cpu(),
        ),
        DType::U32 => Tensor::from_vec(
            values.iter().map(|&v| v as u32).collect::<Vec<_>>(),
            dims,
            &cpu(),
        ),
        DType::I64 => Tensor::from_vec(
            values.iter().map(|&v| v as i64).collect::<Vec<_>>(),
            dims,
            &cpu(),
        ),
        other => panic!("{other:?} ids"),
    };
    tensor.expect("ids")
}

/// candle's way to the rows without this crate: the whole table dequantized, then
/// `Tensor::embedding` on the flattened ids, reshaped to `ids.dims() + [hidden]`.
fn dequantized_rows(table: &QTensor, ids: &Tensor) -> Tensor {
    let hidden = table.shape().dims()[1];
    let mut dims = ids.dims().to_vec();
    dims.push(hidden);
    table
        .dequantize(&cpu())
        .and_then(|t| t.embedding(&ids.flatten_all()?))
        .and_then(|rows| rows.reshape(dims))
        .expect("candle's dequantized embedding")
}

fn bits(tensor: &Tensor) -> Vec<u32> {
    assert_eq!(tensor.dtype(), DType::F32);
    tensor
        .flatten_all()
        .and_then(|t| t.to_vec1::<f32>())
        .expect("f32")
        .into_iter()
        .map(f32::to_bits)
        .collect()
}

/// `ours` equals `theirs` in shape and bits.
fn assert_same(ours: &Tensor, theirs: &Tensor, what: &str) {
    assert_eq!(ours.dims(), theirs.dims(), "{what}: shapes");
    let (ours, theirs) = (bits(ours), bits(theirs));
    if let Some(at) = (0..ours.len()).find(|&i| ours[i] != theirs[i]) {
        panic!(
            "{what}: value {at} is {} (bits {:#x}), candle's {} (bits {:#x})",
            f32::from_bits(ours[at]),
            ours[at],
            f32::from_bits(theirs[at]),
            theirs[at]
        );
    }
}

#[test]
fn rows_are_candles_dequantized_rows_bit_for_bit() {
    let (vocabulary, hidden) = (200, 96);
    let mut rng = XorShift::new(11);
    for dtype in FORMATS {
        let table = quantized(vocabulary, hidden, dtype, 1);
        let embedding = QuantizedEmbedding::new(quantized(vocabulary, hidden, dtype, 1))
            .expect("a q4_0/q8_0 table");
        // Every count up to 40 runs every combination of the power-of-two runs up to 32.
        for count in 0..=40 {
            for index_dtype in [DType::U8, DType::U32, DType::I64] {
                let ids = random_ids(&[count], vocabulary, index_dtype, &mut rng);
                let ours = embedding.forward(&ids).expect("valid ids");
                let what = format!("{dtype:?}, {count} {index_dtype:?} ids");
                assert_same(&ours, &dequantized_rows(&table, &ids), &what);
                let theirs = table.embedding(&ids).expect("QTensor::embedding");
                assert_same(&ours, &theirs, &what);
            }
        }
    }
}

#[test]
fn model_width_rows() {
    let (vocabulary, hidden) = (64, 4096);
    let mut rng = XorShift::new(12);
    for dtype in FORMATS {
        let table = quantized(vocabulary, hidden, dtype, 2);
        let embedding =
            QuantizedEmbedding::new(quantized(vocabulary, hidden, dtype, 2)).expect("embedding");
        assert_eq!(embedding.hidden_size(), hidden);
        assert_eq!(embedding.vocabulary(), vocabulary);
        assert_eq!(embedding.dtype(), dtype);
        assert_eq!(
            embedding.storage_size_in_bytes(),
            table.storage_size_in_bytes()
        );
        for dims in [[1, 32], [1, 1], [4, 17]] {
            let ids = random_ids(&dims, vocabulary, DType::U32, &mut rng);
            let ours = embedding.forward(&ids).expect("rows");
            assert_eq!(ours.dims(), [dims[0], dims[1], hidden]);
            assert_same(&ours, &dequantized_rows(&table, &ids), &format!("{dims:?}"));
        }
    }
}

#[test]
fn ids_of_any_rank() {
    let (vocabulary, hidden) = (50, 64);
    let mut rng = XorShift::new(13);
    for dtype in FORMATS {
        let table = quantized(vocabulary, hidden, dtype, 3);
        let embedding =
            QuantizedEmbedding::new(quantized(vocabulary, hidden, dtype, 3)).expect("embedding");
        for dims in [&[3, 5][..], &[2, 3, 4], &[2, 1, 3, 1], &[]] {
            let ids = random_ids(dims, vocabulary, DType::I64, &mut rng);
            let ours = embedding.forward(&ids).expect("rows");
            let mut expected = dims.to_vec();
            expected.push(hidden);
            assert_eq!(ours.dims(), expected.as_slice());
            assert_same(&ours, &dequantized_rows(&table, &ids), &format!("{dims:?}"));
        }
    }
}

#[test]
fn empty_ids_give_empty_rows() {
    let embedding = QuantizedEmbedding::new(quantized(10, 32, GgmlDType::Q4_0, 4)).expect("e");
    for dims in [&[0][..], &[2, 0], &[0, 7]] {
        for dtype in [DType::U8, DType::U32, DType::I64] {
            let ids = ids_of(&[], dims, dtype);
            let rows = embedding.forward(&ids).expect("empty ids");
            let mut expected = dims.to_vec();
            expected.push(32);
            assert_eq!(rows.dims(), expected.as_slice());
            assert_eq!(rows.dtype(), DType::F32);
            assert_eq!(rows.elem_count(), 0);
        }
    }
}

#[test]
fn strided_ids_are_read_through_their_layout() {
    let (vocabulary, hidden) = (40, 64);
    let mut rng = XorShift::new(14);
    let table = quantized(vocabulary, hidden, GgmlDType::Q4_0, 5);
    let embedding =
        QuantizedEmbedding::new(quantized(vocabulary, hidden, GgmlDType::Q4_0, 5)).expect("e");
    let base = random_ids(&[6, 8], vocabulary, DType::U32, &mut rng);
    let views = [
        ("transposed", base.t().expect("t")),
        ("narrowed", base.narrow(0, 2, 3).expect("narrow")),
        ("every other column", {
            let wide = Tensor::stack(&[&base, &base], 2).expect("stack");
            wide.narrow(2, 1, 1)
                .and_then(|t| t.squeeze(2))
                .expect("narrow")
        }),
        ("column range", base.narrow(1, 3, 4).expect("narrow")),
        (
            "broadcast",
            base.narrow(0, 1, 1)
                .and_then(|row| row.broadcast_as((5, 8)))
                .expect("broadcast"),
        ),
    ];
    for (what, ids) in views {
        let ours = embedding.forward(&ids).expect("strided ids");
        // The contiguous copy's rows: the layout was honoured, not its storage order.
        let packed = ids.contiguous().expect("contiguous");
        assert_same(&ours, &dequantized_rows(&table, &packed), what);
    }
}

#[test]
fn an_out_of_range_id_is_an_error_with_its_position_and_value() {
    let table = quantized(200, 64, GgmlDType::Q8_0, 6);
    let embedding = QuantizedEmbedding::new(quantized(200, 64, GgmlDType::Q8_0, 6)).expect("e");
    let ids = Tensor::new(&[[1u32, 2, 3], [4, 200, 5]], &cpu()).expect("ids");
    let error = embedding.forward(&ids).expect_err("200 is out of range");
    assert_eq!(
        error.to_string(),
        "GatherGGUF: index 200 at position [1, 1] of indices is out of range for data dim 0 of \
         size 200"
    );
    assert!(table.embedding(&ids).is_err(), "candle rejects it too");

    // The first bad id in row-major order, wherever the power-of-two runs split the ids
    // (7 ids run as 4 + 2 + 1: id 5 is the second of the run of 2).
    let ids = Tensor::new(&[0i64, 1, 2, 3, 4, 999, 300], &cpu()).expect("ids");
    let error = embedding.forward(&ids).expect_err("999");
    assert!(
        error.to_string().contains("index 999 at position [5] "),
        "{error}"
    );
    let ids = Tensor::new(&[[0u32, 1, 2], [3, 4, 5], [6, 7, 1000]], &cpu()).expect("ids");
    let error = embedding.forward(&ids).expect_err("1000");
    assert!(
        error.to_string().contains("index 1000 at position [2, 2] "),
        "{error}"
    );
}

/// A prompt long enough to split across the worker pool (64 rows of 4096 values: 1 MiB)
/// names the first bad id, whichever thread met it.
#[test]
fn a_split_prompt_names_its_first_bad_id() {
    let embedding =
        QuantizedEmbedding::new(quantized(50, 4096, GgmlDType::Q4_0, 8)).expect("embedding");
    let mut values: Vec<u32> = (0..64).map(|i| i % 50).collect();
    values[50] = 77;
    values[20] = 60;
    let ids = Tensor::new(values.as_slice(), &cpu()).expect("ids");
    let error = embedding.forward(&ids).expect_err("60 and 77");
    assert!(
        error.to_string().contains("index 60 at position [20] "),
        "{error}"
    );
}

#[test]
fn negative_and_type_maximum_ids_are_errors_as_in_qtensor_embedding() {
    let embedding = QuantizedEmbedding::new(quantized(300, 32, GgmlDType::Q4_0, 7)).expect("e");
    let ids = Tensor::new(&[[3i64, -1]], &cpu()).expect("ids");
    let error = embedding.forward(&ids).expect_err("negative");
    assert!(
        error.to_string().contains("index -1 at position [0, 1] "),
        "{error}"
    );
    let ids = Tensor::new(&[u32::MAX], &cpu()).expect("ids");
    let error = embedding.forward(&ids).expect_err("u32::MAX");
    assert!(
        error
            .to_string()
            .contains("index 4294967295 at position [0] "),
        "{error}"
    );
    // u8 255 is row 255 (QTensor::embedding's reading), not "zeros" as in index_select.
    let table = quantized(300, 32, GgmlDType::Q4_0, 7);
    let ids = Tensor::new(&[255u8, 0], &cpu()).expect("ids");
    let ours = embedding.forward(&ids).expect("row 255 exists");
    assert_same(&ours, &table.embedding(&ids).expect("candle"), "u8 255");
}

#[test]
fn ids_of_other_types() {
    let (vocabulary, hidden) = (30, 32);
    let table = quantized(vocabulary, hidden, GgmlDType::Q8_0, 8);
    let embedding =
        QuantizedEmbedding::new(quantized(vocabulary, hidden, GgmlDType::Q8_0, 8)).expect("e");
    let expected = dequantized_rows(&table, &Tensor::new(&[29u32, 0, 7], &cpu()).expect("ids"));
    for ids in [
        Tensor::new(&[29i16, 0, 7], &cpu()),
        Tensor::new(&[29i32, 0, 7], &cpu()),
    ] {
        let ids = ids.expect("ids");
        let ours = embedding.forward(&ids).expect("i16/i32 ids");
        assert_same(&ours, &expected, &format!("{:?}", ids.dtype()));
    }
    let ids = Tensor::new(&[1f32], &cpu()).expect("ids");
    let error = embedding.forward(&ids).expect_err("f32 ids");
    assert!(
        error
            .to_string()
            .contains("ids must be u8, u32, i16, i32 or i64, not F32"),
        "{error}"
    );
}

#[test]
fn tables_of_other_dtypes_are_refused_naming_the_accepted_ones() {
    let table = random_table(4, 256, 9);
    for dtype in [
        GgmlDType::Q4_1,
        GgmlDType::Q5_0,
        GgmlDType::Q8_1,
        GgmlDType::Q4K,
        GgmlDType::Q8K,
        GgmlDType::F32,
        GgmlDType::F16,
    ] {
        let qtensor = QTensor::quantize(&table, dtype).expect("quantize");
        let error = QuantizedEmbedding::new(qtensor).expect_err("not q4_0/q8_0");
        assert_eq!(
            error.to_string(),
            format!(
                "gather-jit-quantized-embedding: the table must be GgmlDType::Q4_0 or \
                 GgmlDType::Q8_0, not {dtype:?}"
            )
        );
        let error = QuantizedEmbedding::from_gguf_bytes(dtype, 4, 256, vec![0; 4 * 256])
            .expect_err("not q4_0/q8_0");
        assert!(
            error.to_string().ends_with(&format!("not {dtype:?}")),
            "{error}"
        );
    }
}

#[test]
fn a_table_that_is_not_a_matrix_is_refused() {
    let table = Tensor::zeros((2, 3, 32), DType::F32, &cpu()).expect("zeros");
    let qtensor = QTensor::quantize(&table, GgmlDType::Q4_0).expect("quantize");
    let error = QuantizedEmbedding::new(qtensor).expect_err("rank 3");
    assert!(
        error
            .to_string()
            .contains("must be [vocabulary, hidden_size], not shape [2, 3, 32]"),
        "{error}"
    );
}

#[test]
fn raw_gguf_bytes_are_the_same_table() {
    let (vocabulary, hidden) = (70, 128);
    let mut rng = XorShift::new(15);
    for dtype in FORMATS {
        let table = quantized(vocabulary, hidden, dtype, 10);
        let bytes = table.data().expect("bytes").to_vec();
        let embedding = QuantizedEmbedding::from_gguf_bytes(dtype, vocabulary, hidden, bytes)
            .expect("raw blocks");
        let ids = random_ids(&[3, 9], vocabulary, DType::U32, &mut rng);
        let ours = embedding.forward(&ids).expect("rows");
        assert_same(
            &ours,
            &dequantized_rows(&table, &ids),
            &format!("{dtype:?}"),
        );

        let short = table.data().expect("bytes")[1..].to_vec();
        let error = QuantizedEmbedding::from_gguf_bytes(dtype, vocabulary, hidden, short)
            .expect_err("a byte short");
        assert!(error.to_string().contains("got "), "{error}");
        let error = QuantizedEmbedding::from_gguf_bytes(dtype, 1, 48, vec![0; 64])
            .expect_err("48 is not a whole number of blocks");
        assert!(
            error.to_string().contains("not a whole number of 32-value"),
            "{error}"
        );
    }
}

#[test]
fn a_gguf_file_tensor_is_read_without_a_qtensor() {
    let (vocabulary, hidden) = (90, 64);
    let mut rng = XorShift::new(16);
    for dtype in FORMATS {
        let table = quantized(vocabulary, hidden, dtype, 11);
        let other = quantized(3, 32, GgmlDType::Q4_1, 12);
        let mut file = Cursor::new(Vec::new());
        gguf_file::write(
            &mut file,
            &[],
            &[("blk.0.other", &other), ("token_embd.weight", &table)],
        )
        .expect("write a gguf file");
        file.set_position(0);
        let content = gguf_file::Content::read(&mut file).expect("read its header");
        let embedding = QuantizedEmbedding::from_gguf(&content, &mut file, "token_embd.weight")
            .expect("the embedding tensor");
        assert_eq!(embedding.vocabulary(), vocabulary);
        let ids = random_ids(&[2, 5], vocabulary, DType::I64, &mut rng);
        let ours = embedding.forward(&ids).expect("rows");
        assert_same(
            &ours,
            &dequantized_rows(&table, &ids),
            &format!("{dtype:?}"),
        );

        let error = QuantizedEmbedding::from_gguf(&content, &mut file, "output.weight")
            .expect_err("no such tensor");
        assert!(
            error.to_string().contains("no tensor \"output.weight\""),
            "{error}"
        );
        let error =
            QuantizedEmbedding::from_gguf(&content, &mut file, "blk.0.other").expect_err("q4_1");
        assert!(error.to_string().contains("not Q4_1"), "{error}");
        // A file cut 5 bytes before the table's end.
        let info = &content.tensor_infos["token_embd.weight"];
        let end = content.tensor_data_offset + info.offset + table.storage_size_in_bytes() as u64;
        let mut bytes = file.into_inner();
        bytes.truncate(end as usize - 5);
        let mut cut = Cursor::new(bytes);
        let error = QuantizedEmbedding::from_gguf(&content, &mut cut, "token_embd.weight")
            .expect_err("truncated");
        assert!(error.to_string().contains("the file has"), "{error}");
    }
}

/// Blocks of random bits (scales that are NaN, infinite, subnormal, negative zero) have no
/// quantizer behind them: gather-jit's interpreter, written from GGUF's definition, is the
/// reference, and candle's dequantization of the same bytes must agree with it too.
#[test]
fn raw_blocks_of_any_bits_match_the_interpreter_and_candle() {
    let (vocabulary, hidden) = (33, 96);
    let mut rng = XorShift::new(17);
    for (dtype, format) in [
        (GgmlDType::Q4_0, GgufFormat::Q4_0),
        (GgmlDType::Q8_0, GgufFormat::Q8_0),
    ] {
        let mut bytes = vec![0u8; vocabulary * hidden / 32 * format.block_bytes()];
        rng.fill(&mut bytes);
        let embedding =
            QuantizedEmbedding::from_gguf_bytes(dtype, vocabulary, hidden, bytes.clone())
                .expect("raw blocks");
        let ids: Vec<u32> = (0..vocabulary as u32).rev().chain([4, 4, 0]).collect();
        let count = ids.len();
        let ours = embedding
            .forward(&Tensor::new(ids.as_slice(), &cpu()).expect("ids"))
            .expect("rows");

        let layout = QuantizedSignature::gguf(format, vocabulary, hidden, &[count])
            .with_index_type(IndexType::U32)
            .validate()
            .expect("layout");
        let id_bytes: Vec<u8> = ids.iter().flat_map(|id| id.to_ne_bytes()).collect();
        let expected = interpret_quantized(&layout, &bytes, &id_bytes, &[], None).expect("interp");
        let expected: Vec<u32> = expected
            .chunks_exact(4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        assert_eq!(bits(&ours), expected, "{dtype:?} against the interpreter");

        let storage = QStorage::from_data(Cow::Borrowed(&bytes), &cpu(), dtype).expect("storage");
        let candle = QTensor::new(storage, (vocabulary, hidden)).expect("qtensor");
        let theirs = dequantized_rows(&candle, &Tensor::new(ids.as_slice(), &cpu()).expect("ids"));
        assert_same(&ours, &theirs, &format!("{dtype:?} against candle"));
    }
}

#[test]
fn clones_and_threads_share_the_table() {
    let (vocabulary, hidden) = (100, 64);
    let table = quantized(vocabulary, hidden, GgmlDType::Q4_0, 13);
    let embedding =
        QuantizedEmbedding::new(quantized(vocabulary, hidden, GgmlDType::Q4_0, 13)).expect("e");
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4u64)
            .map(|seed| {
                let embedding = embedding.clone();
                let table = &table;
                scope.spawn(move || {
                    let mut rng = XorShift::new(100 + seed);
                    for count in [1, 7, 32, 33] {
                        let ids = random_ids(&[count], vocabulary, DType::U32, &mut rng);
                        let ours = embedding.forward(&ids).expect("rows");
                        assert_same(&ours, &dequantized_rows(table, &ids), "thread");
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().expect("no panic");
        }
    });
}

#[test]
fn tables_without_rows_or_columns_still_check_the_ids() {
    for (vocabulary, hidden) in [(0, 32), (3, 0)] {
        let table = Tensor::zeros((vocabulary, hidden), DType::F32, &cpu()).expect("zeros");
        let qtensor = QTensor::quantize(&table, GgmlDType::Q8_0).expect("quantize");
        let embedding = QuantizedEmbedding::new(qtensor).expect("an empty table");
        let rows = embedding
            .forward(&ids_of(&[], &[0], DType::U32))
            .expect("no ids");
        assert_eq!(rows.dims(), [0, hidden]);
        let error = embedding
            .forward(&ids_of(&[3], &[1], DType::U32))
            .expect_err("3 is out of range");
        assert!(
            error
                .to_string()
                .contains(&format!("index 3 at position [0] of indices is out of range for data dim 0 of size {vocabulary}")),
            "{error}"
        );
        if vocabulary > 0 {
            let rows = embedding
                .forward(&ids_of(&[2, 0], &[2], DType::U32))
                .expect("in range");
            assert_eq!(rows.dims(), [2, 0]);
        }
    }
}

/// A Q8_0 embedding of 8 rows of 32 values, for the ids of the size tests.
fn small_embedding() -> QuantizedEmbedding {
    QuantizedEmbedding::new(quantized(8, 32, GgmlDType::Q8_0, 11)).expect("embedding")
}

#[test]
fn broadcast_ids_past_usize_bytes_are_an_error_not_an_abort() {
    let embedding = small_embedding();
    // Each wraps to a few bytes: 4 * (2^62 + 1), 8 * (2^61 + 1), 2 * (2^63 + 1); and
    // (2^32 + 1) * 2^32 u8 ids wrap to 2^32 elements before any size is taken.
    for (dtype, dims) in [
        (DType::U32, vec![(1usize << 62) + 1]),
        (DType::I64, vec![(1 << 61) + 1]),
        (DType::I16, vec![(1 << 63) + 1]),
        (DType::U8, vec![(1 << 32) + 1, 1 << 32]),
    ] {
        let ids = Tensor::zeros(1, dtype, &cpu())
            .and_then(|one| one.broadcast_as(dims.as_slice()))
            .expect("a broadcast view");
        let message = embedding
            .forward(&ids)
            .expect_err("ids past usize")
            .to_string();
        assert!(
            message.starts_with("could not allocate a contiguous copy of ids of shape")
                && message.ends_with("more elements or bytes than fit in memory"),
            "{dtype:?}: {message}"
        );
    }
}

#[test]
fn broadcast_ids_too_large_to_allocate_are_an_allocation_error() {
    // 2^61 bytes: within isize::MAX, beyond any address space, so the reservation fails
    // whatever the host's overcommit policy.
    let ids = Tensor::zeros(1, DType::U8, &cpu())
        .and_then(|one| one.broadcast_as(1usize << 61))
        .expect("a broadcast view");
    let error = small_embedding().forward(&ids).expect_err("2^61 bytes");
    assert_eq!(
        error.to_string(),
        "could not allocate 2305843009213693952 bytes for a contiguous copy of ids"
    );
}

#[test]
fn ids_whose_element_count_wraps_in_candle_are_an_error_not_a_panic() {
    // (2^62 + 1) * 4 ids wrap to 4 in candle's `elem_count`, the storage's length. A build of
    // candle with overflow checks panics making the tensor: it cannot reach the op then.
    let dims = [(1usize << 62) + 1, 4];
    let made = std::panic::catch_unwind(|| Tensor::from_vec(vec![0u32; 4], &dims[..], &cpu()));
    let Ok(ids) = made else {
        return;
    };
    let ids = ids.expect("candle takes the wrapped count");
    let message = small_embedding()
        .forward(&ids)
        .expect_err("ids past usize")
        .to_string();
    assert!(
        message.starts_with("ids of shape")
            && message.ends_with("more elements or bytes than fit in memory"),
        "{message}"
    );
}
