//! The kernels the object holds: their symbols and signatures, shared by `build.rs` (which
//! compiles them) and the crate (which checks them against the interpreter).

use gather_jit::{IndexType, Signature};

/// Each kernel's symbol and signature, in the order of the object.
pub fn kernels() -> [(&'static str, Signature); 3] {
    [
        // S5 of docs/performance.md: BERT's embedding lookup, rows of 3 KiB (copied with
        // `memcpy` in an object).
        (
            "s5_embedding",
            Signature::gather(&[30522, 768], &[8, 128], 0, 0),
        ),
        // S9: a tiny gather, where a call's fixed costs show.
        ("s9_tiny", Signature::gather(&[16, 16], &[4], 0, 0)),
        // A detector's post-processing: 300 of 8400 boxes, by i32 indices (batch_dims 1).
        (
            "detection_boxes",
            Signature::gather_nd(&[1, 8400, 4], &[1, 300, 1], 1).with_index_type(IndexType::I32),
        ),
    ]
}
