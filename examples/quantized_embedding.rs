//! A 4-bit quantized embedding table, as LLM runtimes keep it: `[vocabulary, width]` values in
//! blocks of 32 sharing an f32 scale (ONNX Runtime's `GatherBlockQuantized` layout), looked up
//! without dequantizing the table. Run with `cargo run --release --example quantized_embedding`.
//!
//! The table is quantized here from known values so that the lookup can be checked; a runtime
//! would load the packed bytes and scales from its model file.

use gather_jit::{BlockQuantization, Error, QuantizedOptions, jit_gather_block_quantized};
use ndarray::{Array2, array};

fn main() -> Result<(), Error> {
    let (vocabulary, width, block) = (1000, 256, 32);
    // Value (row, column) is (q - 8) * scale with q = (row + column) % 16 and one scale per
    // block: 0.5 for even rows, 0.25 for odd ones.
    let q = |row: usize, column: usize| ((row + column) % 16) as u8;
    let scale = |row: usize| if row.is_multiple_of(2) { 0.5f32 } else { 0.25 };
    // Two 4-bit values a byte along the row, the even column in the low nibble.
    let data = Array2::from_shape_fn((vocabulary, width / 2), |(row, byte)| {
        q(row, 2 * byte) | (q(row, 2 * byte + 1) << 4)
    });
    let scales = Array2::from_shape_fn((vocabulary, width / block), |(row, _)| scale(row));
    println!(
        "table: {} KiB packed + {} KiB of scales ({} KiB as f32)",
        data.len() / 1024,
        scales.len() * 4 / 1024,
        vocabulary * width * 4 / 1024
    );

    let tokens = array![[101i64, 7, 999, -1]];
    let quantization = BlockQuantization {
        gather_axis: 0,
        quantize_axis: 1,
        block_size: block,
        bits: 4,
        zero_points: false,
    };
    let kernel = jit_gather_block_quantized(
        &[vocabulary, width],
        tokens.shape(),
        quantization,
        &QuantizedOptions::default(),
    )?;
    println!("{}: output {:?}", kernel.signature(), kernel.output_shape());

    let rows = kernel.run(data.view(), tokens.view(), scales.view(), None)?;
    for (t, &token) in tokens.iter().enumerate() {
        let row = token.rem_euclid(vocabulary as i64) as usize;
        for column in 0..width {
            let want = (f32::from(q(row, column)) - 8.0) * scale(row);
            assert_eq!(rows[[0, t, column]], want, "token {token}, column {column}");
        }
    }
    println!(
        "token 101, first values: {:?}",
        &rows.as_slice().expect("standard")[..6]
    );

    // A bad id is an error that names where it is.
    let error = kernel
        .run(
            data.view(),
            array![[1i64, 2, 1000, 3]].view(),
            scales.view(),
            None,
        )
        .unwrap_err();
    println!("bad id: {error}");
    Ok(())
}
