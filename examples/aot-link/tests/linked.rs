//! The linked kernels against gather-jit's interpreter: their outputs, their refusals of bad
//! indices through the C entry point, and the sizes `build.rs` declared.

use gather_jit_aot_link::{
    KERNELS, Linked, RunError, S9_TINY_OUTPUT_BYTES, check_against_interpreter,
    interpreter_bad_position, s9_tiny, signature,
};
use gather_jit_workloads::random_inputs;

fn kernel(symbol: &str) -> &'static Linked {
    KERNELS.iter().find(|k| k.symbol == symbol).expect("linked")
}

#[test]
fn every_kernel_gathers_as_the_interpreter_does() {
    assert_eq!(KERNELS.len(), 3);
    for (seed, kernel) in (1..).zip(&KERNELS) {
        let bytes = check_against_interpreter(kernel, seed).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(bytes, kernel.output_bytes);
    }
}

#[test]
fn the_declared_sizes_are_the_signatures() {
    // S5: 30522 rows of 768 f32, 8x128 i64 indices, 8x128 rows out.
    let s5 = kernel("s5_embedding");
    assert_eq!(
        (s5.data_bytes, s5.indices_bytes),
        (30522 * 768 * 4, 8 * 128 * 8)
    );
    assert_eq!(s5.output_bytes, 8 * 128 * 768 * 4);
    // The detection boxes: 300 i32 indices, 300 boxes of 4 f32.
    let boxes = kernel("detection_boxes");
    assert_eq!(
        (boxes.indices_bytes, boxes.output_bytes),
        (300 * 4, 300 * 16)
    );
    assert_eq!(S9_TINY_OUTPUT_BYTES, 4 * 16 * 4);
}

/// Each kernel, with one index made bad at several positions: the entry point returns 1 and
/// stores the position the interpreter rejects.
#[test]
fn a_bad_index_returns_1_with_its_position() {
    for kernel in &KERNELS {
        let validated = signature(kernel.symbol)
            .expect("known")
            .validate()
            .expect("valid");
        let index_type = validated.signature().index_type;
        let size = index_type.size();
        let (data, indices) = random_inputs(&validated, 7);
        let count = validated.indices_len();
        for (position, bad) in [
            (0, 1_000_000i128),
            (count / 2, -1_000_000),
            (count - 1, 30522),
        ] {
            let mut indices = indices.clone();
            let mut encoded = Vec::new();
            assert!(index_type.try_encode(bad, &mut encoded));
            indices[position * size..(position + 1) * size].copy_from_slice(&encoded);
            let expected = interpreter_bad_position(&validated, &data, &indices);
            assert_eq!(expected, Some(position as u64), "{}", kernel.symbol);

            let mut output = vec![0u8; kernel.output_bytes];
            let mut bad_position = u64::MAX;
            // SAFETY: the buffers are of the kernel's sizes (`random_inputs` of its
            // signature; the output `output_bytes`), `output` is a fresh vector, and
            // `bad_position` a local.
            let status = unsafe {
                (kernel.entry)(
                    data.as_ptr(),
                    indices.as_ptr(),
                    output.as_mut_ptr(),
                    &mut bad_position,
                )
            };
            assert_eq!(
                (status, bad_position),
                (1, position as u64),
                "{}",
                kernel.symbol
            );
            assert_eq!(
                kernel.run(&data, &indices, &mut output),
                Err(RunError::BadIndex {
                    position: position as u64
                })
            );
        }
    }
}

#[test]
fn the_tiny_kernel_called_by_its_symbol_gathers_rows() {
    // data[r][c] = 16 r + c; rows 3, 0, 15 and -1 (row 15 again).
    let data: Vec<u8> = (0..256)
        .flat_map(|v: u32| (v as f32).to_ne_bytes())
        .collect();
    let indices: Vec<u8> = [3i64, 0, 15, -1]
        .iter()
        .flat_map(|i| i.to_ne_bytes())
        .collect();
    let mut output = [0u8; S9_TINY_OUTPUT_BYTES];
    let mut bad_position = u64::MAX;
    // SAFETY: 256 f32 of data, 4 i64 indices and 64 f32 of output are S9's buffers.
    let status = unsafe {
        s9_tiny(
            data.as_ptr(),
            indices.as_ptr(),
            output.as_mut_ptr(),
            &mut bad_position,
        )
    };
    assert_eq!(status, 0);
    let output: Vec<f32> = (output.chunks_exact(4))
        .map(|b| f32::from_ne_bytes(b.try_into().expect("4 bytes")))
        .collect();
    for (row, source) in [3, 0, 15, 15].into_iter().enumerate() {
        let expected: Vec<f32> = (0..16).map(|c| (16 * source + c) as f32).collect();
        assert_eq!(output[16 * row..16 * row + 16], expected[..], "row {row}");
    }
}

#[test]
fn buffers_of_the_wrong_size_are_refused_before_the_call() {
    let s9 = kernel("s9_tiny");
    let mut output = vec![0u8; s9.output_bytes];
    let refused = s9.run(&[0; 16], &[0; 32], &mut output);
    assert_eq!(
        refused,
        Err(RunError::WrongSize {
            buffer: "data",
            expected: 1024,
            actual: 16
        })
    );
}
