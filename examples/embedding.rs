//! An embedding lookup as a runtime does it: token ids `[batch, sequence]` pick rows of a
//! `[vocabulary, width]` table. Run with `cargo run --release --example embedding`.
//!
//! The kernel is compiled once for the shapes (and cached by the crate); the safe call checks
//! types and shapes and allocates the output, the raw call reuses the caller's buffer in a hot
//! loop.

use gather_jit::{Error, Options, jit_gather};
use ndarray::{Array2, Array3};

fn main() -> Result<(), Error> {
    let (vocabulary, width) = (1000, 64);
    let table = Array2::from_shape_fn((vocabulary, width), |(row, column)| {
        row as f32 + column as f32 / 100.0
    });
    let tokens = ndarray::array![[101i64, 7, 999, 0], [5, 5, -1, 42]];

    // ONNX Gather along axis 0 with f32 data and i64 indices (the defaults of `Options`);
    // negative ids count from the end, as ONNX says.
    let kernel = jit_gather(table.shape(), tokens.shape(), 0, 0, &Options::default())?;
    println!("{}", kernel.explain());

    // The safe call: any layout of views, a new array out.
    let embedded = kernel.run(table.view(), tokens.view())?;
    let embedded: Array3<f32> = embedded.into_dimensionality().expect("rank 3");
    assert_eq!(embedded.shape(), &[2, 4, width]);
    assert_eq!(embedded[[1, 2, 3]], 999.03, "id -1 is the last row");
    println!("token 999, column 3: {}", embedded[[0, 2, 3]]);

    // A bad id is an error that names where it is; nothing is returned.
    let bad = ndarray::array![[1i64, 2, 3, 4], [5, 1000, 7, 8]];
    let error = kernel.run(table.view(), bad.view()).unwrap_err();
    println!("bad id: {error}");

    // The hot loop: the raw call on the caller's buffers, no allocation per call.
    let mut output = vec![0f32; 2 * 4 * width];
    let table = table.as_slice().expect("standard layout");
    let tokens = tokens.as_slice().expect("standard layout");
    for _ in 0..1000 {
        // SAFETY: the table and the ids are C-contiguous with the signature's shapes and types,
        // the output holds `2 * 4 * width` f32s, and the three buffers do not overlap.
        unsafe {
            kernel.call(
                table.as_ptr().cast(),
                tokens.as_ptr().cast(),
                output.as_mut_ptr().cast(),
            )?;
        }
    }
    assert_eq!(output[(4 + 2) * width + 3], 999.03);
    Ok(())
}
