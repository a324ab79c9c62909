//! Writes the `model` target's seeds into `corpus/model/` (run from `fuzz/`:
//! `cargo run --example model_seeds`): the committed ONNX models (node tests, the small
//! BERT/GPT-2/recommender models, the CLI's tiny.onnx), and hostile-shape structured cases,
//! each both as its structured bytes and encoded as an ONNX model (so that byte mutations of a
//! real protobuf start from hostile shapes too). `--print` prints each structured case's graph.

#[path = "../src/model.rs"]
#[allow(
    dead_code,
    reason = "the example uses the decoder, not the whole oracle"
)]
mod model;

use std::path::Path;

use prost::Message;

/// Structured cases (see `structured` in `src/model.rs` for the byte layout): name, bytes.
const SEEDS: &[(&str, &[u8])] = &[
    // Gather axis 0 of f32 data [3, 4] (input) with i64 indices [2] = [1, 2] (initializer).
    (
        "gather",
        &[0x81, 0, 0, 0, 1, 2, 3, 3, 0, 1, 1, 0, 1, 0, 2, 7, 1, 0],
    ),
    // GatherElements axis 1 of f32 [3, 3] with i32 indices [3, 3] (initializer), some negative.
    (
        "gather_elements",
        &[
            0x82, 0, 0, 1, 1, 2, 2, 4, 0, 144, 144, 1, 0, 0, 3, 0, 0, 2, 0, 1, 0, 1, 3, 1, 0, 2, 0,
            0, 0, 1, 7, 0, 5,
        ],
    ),
    // GatherND of i32 [2, 2] with i64 indices [2, 2] (initializer).
    (
        "gathernd",
        &[
            0x80, 0, 3, 0, 1, 1, 1, 0, 0, 1, 2, 16, 1, 0, 1, 0, 0, 0, 1, 0, 0, 7, 1, 3,
        ],
    ),
    // GatherND with rank-0 indices (both inputs).
    (
        "gathernd_rank0_indices",
        &[0x80, 0, 0, 0, 1, 1, 1, 0, 1, 0, 0, 5, 7, 0, 0],
    ),
    // GatherND, batch_dims 3 on data of rank 2, depth 2 (both inputs).
    (
        "gathernd_batch_dims_past_rank",
        &[
            0x80, 0, 0, 0, 1, 1, 1, 3, 0, 144, 144, 1, 200, 16, 5, 7, 0, 0,
        ],
    ),
    // GatherND, depth 3 on data of rank 2 (both inputs).
    (
        "gathernd_depth_past_rank",
        &[0x80, 0, 0, 0, 1, 1, 1, 0, 0, 1, 201, 16, 5, 7, 0, 0],
    ),
    // GatherND, batch_dims 1, symbolic batch (as tiny.onnx), both inputs.
    (
        "gathernd_batch_symbolic",
        &[0x80, 0, 0, 0, 2, 192, 2, 1, 1, 0, 144, 1, 1, 16, 5, 7, 0, 2],
    ),
    // Gather axis 1 of u8 data [2^40, 0] (empty) with i64 indices [17]: an output of
    // 2^40 * 17 bytes that cannot be allocated.
    (
        "gather_unallocatable_output",
        &[0x81, 0, 6, 0, 1, 226, 8, 4, 0, 13, 5, 7, 0, 0],
    ),
    // Gather axis 0 of f32 data [N-3, N] with indices [M]; the shape gathered too.
    (
        "gather_negative_symbolic_dim",
        &[0x81, 0, 0, 0, 1, 198, 192, 3, 0, 193, 5, 0, 0, 0],
    ),
    // Gather with axis i64::MIN.
    (
        "gather_axis_min",
        &[0x81, 0, 0, 0, 1, 2, 3, 200, 0, 1, 5, 7, 0, 0],
    ),
    // Gather with axis given as a float attribute.
    (
        "gather_axis_float",
        &[0x81, 0, 0, 0, 1, 2, 3, 248, 0, 1, 5, 7, 0, 0],
    ),
    // GatherElements of f32 [2, 3] with i64 indices [5, 17] (initializer), out of range.
    (
        "gather_elements_larger_indices",
        &[
            0x82, 0, 0, 0, 1, 1, 2, 3, 0, 4, 13, 1, 4, 1, 5, 2, 6, 0, 7, 0xff,
        ],
    ),
    // Gather of string data (initializer) with i64 indices (input).
    (
        "gather_strings",
        &[0x81, 0, 15, 0, 0, 3, 2, 0, 1, 4, 7, 0, 0],
    ),
    // Gather with f32 "indices", bool "indices", u8 indices (inputs).
    (
        "gather_float_indices",
        &[0x81, 0, 0, 10, 0, 3, 2, 0, 1, 5, 7, 0, 0],
    ),
    (
        "gather_bool_indices",
        &[0x81, 0, 0, 11, 0, 3, 2, 0, 1, 5, 7, 0, 0],
    ),
    (
        "gather_u8_indices",
        &[0x81, 0, 2, 6, 0, 3, 2, 0, 1, 5, 7, 0, 1],
    ),
    // Gather, then a gather of its output (two JIT gathers in a row).
    (
        "gather_twice",
        &[0x81, 0, 0, 0, 2, 1, 2, 3, 3, 2, 1, 1, 0, 1, 0, 0, 1, 0, 0],
    ),
    // Gather whose i32 indices are cast to i64 first.
    (
        "gather_cast_indices",
        &[0x81, 0, 4, 1, 1, 2, 3, 3, 0, 1, 5, 2, 0, 0],
    ),
    // Gather of f16 data with zero dims.
    (
        "gather_zero_dims",
        &[0x81, 0, 4, 0, 2, 8, 2, 3, 4, 2, 8, 5, 7, 1, 0],
    ),
    // GatherElements with unknown and huge index dims.
    (
        "gather_elements_hostile_dims",
        &[0x82, 0, 0, 0, 1, 2, 3, 4, 0, 252, 227, 5, 7, 0, 0],
    ),
    // GatherND with batch_dims i64::MAX.
    (
        "gathernd_batch_dims_max",
        &[
            0x80, 0, 0, 0, 1, 1, 1, 201, 0, 144, 144, 1, 0, 16, 5, 7, 0, 0,
        ],
    ),
    // Gather with rank-9 data of unit dims and a symbolic `0*N` dim.
    (
        "gather_rank9",
        &[
            0x81, 0, 1, 0, 15, 0, 0, 0, 0, 0, 203, 0, 0, 0, 3, 1, 0, 5, 7, 0, 0,
        ],
    ),
];

fn main() {
    let print = std::env::args().any(|a| a == "--print");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/model");
    std::fs::create_dir_all(&dir).expect("corpus/model");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut models = vec![(
        root.join("cli/tests/data/tiny.onnx"),
        "model-tiny.onnx".to_string(),
    )];
    let tests = root.join("integrations/tract/tests/models");
    let mut names: Vec<_> = std::fs::read_dir(&tests)
        .expect("tests/models")
        .map(|e| e.expect("entry").file_name())
        .collect();
    names.sort();
    for name in names {
        let name = name.to_string_lossy().to_string();
        models.push((
            tests.join(&name).join("model.onnx"),
            format!("model-{name}.onnx"),
        ));
    }
    for (from, to) in models {
        std::fs::copy(&from, dir.join(&to)).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    }
    for (name, bytes) in SEEDS {
        let (proto, _) = model::structured(bytes);
        if print {
            let graph = proto.graph.as_ref().expect("a graph");
            println!("{name}:");
            for input in &graph.input {
                println!("  input {input:?}");
            }
            for init in &graph.initializer {
                println!(
                    "  initializer {} type {} dims {:?} ({} raw bytes)",
                    init.name,
                    init.data_type,
                    init.dims,
                    init.raw_data.len()
                );
            }
            for node in &graph.node {
                println!(
                    "  node {} {:?} -> {:?} {:?}",
                    node.op_type,
                    node.input,
                    node.output,
                    node.attribute
                        .iter()
                        .map(|a| (&a.name, a.r#type, a.i))
                        .collect::<Vec<_>>()
                );
            }
        }
        std::fs::write(dir.join(format!("structured-{name}")), bytes).expect("write");
        std::fs::write(dir.join(format!("onnx-{name}.onnx")), proto.encode_to_vec())
            .expect("write");
    }
}
