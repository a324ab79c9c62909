//! Hostile and unsupported `com.microsoft.GatherBlockQuantized` nodes: attributes gather-jit
//! does not run, shapes that do not fit, 4-bit tensors the loader cannot convert, data types
//! tract cannot read, outputs too large for memory, bad indices. Each must be an error naming
//! what is wrong (the node, where there is one), never a panic.
//!
//! The models are ONNX protobuf structs built in code and loaded with
//! `gather_jit_tract::model_for_proto`.

use gather_jit::BlockQuantization;
use gather_jit_tract::{
    GatherBlockQuantized, QuantizedEngine, catch_panic, convert_4bit_tensors, model_for_proto, onnx,
};
use tract_onnx::pb::tensor_shape_proto::{Dimension, dimension};
use tract_onnx::pb::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto, type_proto,
};
use tract_onnx::prelude::*;
use tract_onnx::tract_hir::internal::{EvalContext, EvalOp, TypedOp};

const FLOAT: i32 = 1;
const UINT8: i32 = 2;
const INT64: i32 = 7;
const FLOAT8E4M3FN: i32 = 17;
const UINT4: i32 = 21;
const INT4: i32 = 22;

fn tensor(name: &str, data_type: i32, dims: &[i64], raw: Vec<u8>) -> TensorProto {
    TensorProto {
        name: name.into(),
        data_type,
        dims: dims.to_vec(),
        raw_data: raw,
        ..TensorProto::default()
    }
}

fn f32s(name: &str, dims: &[i64], value: f32) -> TensorProto {
    let count: i64 = dims.iter().product();
    let raw = (0..count).flat_map(|_| value.to_le_bytes()).collect();
    tensor(name, FLOAT, dims, raw)
}

fn value(name: &str, elem_type: i32, dims: &[i64]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|&d| Dimension {
            value: Some(dimension::Value::DimValue(d)),
            ..Dimension::default()
        })
        .collect();
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type,
                shape: Some(TensorShapeProto { dim }),
            })),
            ..TypeProto::default()
        }),
        ..ValueInfoProto::default()
    }
}

fn int_attr(name: &str, i: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        i,
        // AttributeType INT.
        r#type: 2,
        ..AttributeProto::default()
    }
}

/// A GatherBlockQuantized node `gbq` reading `inputs`, writing `y`, in `domain`.
fn gbq_node(inputs: &[&str], attrs: &[(&str, i64)], domain: &str) -> NodeProto {
    NodeProto {
        name: "gbq".into(),
        op_type: "GatherBlockQuantized".into(),
        domain: domain.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec!["y".into()],
        attribute: attrs.iter().map(|(n, i)| int_attr(n, *i)).collect(),
        ..NodeProto::default()
    }
}

/// A model of `nodes` and `initializers`, the int64 input `ids` of `ids_dims`, the output `y`.
fn model(nodes: Vec<NodeProto>, initializers: Vec<TensorProto>, ids_dims: &[i64]) -> ModelProto {
    ModelProto {
        ir_version: 10,
        opset_import: vec![
            OperatorSetIdProto {
                domain: String::new(),
                version: 17,
            },
            OperatorSetIdProto {
                domain: "com.microsoft".into(),
                version: 1,
            },
        ],
        graph: Some(GraphProto {
            name: "hostile".into(),
            node: nodes,
            initializer: initializers,
            input: vec![value("ids", INT64, ids_dims)],
            output: vec![ValueInfoProto {
                name: "y".into(),
                ..ValueInfoProto::default()
            }],
            ..GraphProto::default()
        }),
        ..ModelProto::default()
    }
}

/// uint8-form 4-bit data `[rows, cols]` (cols logical) with f32 scales for `block`, and
/// optionally zero points.
fn uint8_form(rows: i64, cols: i64, block: i64, zero_points: bool) -> Vec<TensorProto> {
    let blocks = (cols + block - 1) / block;
    let mut t = vec![
        tensor(
            "data",
            UINT8,
            &[rows, cols / 2],
            vec![0x98; (rows * cols / 2) as usize],
        ),
        f32s("scales", &[rows, blocks], 0.5),
    ];
    if zero_points {
        let bytes = (blocks + 1) / 2;
        t.push(tensor(
            "zp",
            UINT8,
            &[rows, bytes],
            vec![0x88; (rows * bytes) as usize],
        ));
    }
    t
}

/// Loads, types and optimises `proto` with the JIT ops (under `catch_panic`, so that a panic
/// fails the test as an error message it can show).
fn load(proto: ModelProto) -> Result<TypedModel, String> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = catch_panic("load", || {
        model_for_proto(&onnx(), proto, None)?.into_optimized()
    });
    std::panic::set_hook(hook);
    result.map_err(|e| format!("{e:#}"))
}

#[track_caller]
fn load_error(proto: ModelProto, expected: &[&str]) -> String {
    match load(proto) {
        Ok(model) => panic!("loaded: {model}"),
        Err(e) => {
            assert!(!e.contains("panicked"), "{e}");
            for part in expected {
                assert!(e.contains(part), "{part:?} not in {e:?}");
            }
            e
        }
    }
}

/// The valid model these tests spoil one way at a time: it loads and runs.
#[test]
fn the_valid_model_runs() {
    let node = gbq_node(
        &["data", "ids", "scales", "zp"],
        &[("block_size", 16), ("bits", 4)],
        "com.microsoft",
    );
    let model = load(model(vec![node], uint8_form(4, 48, 16, true), &[2])).expect("loads");
    let plan = model.into_runnable().expect("runnable");
    let out = plan
        .run(tvec!(tensor1(&[3i64, -1]).into_tvalue()))
        .expect("runs");
    // Every value (9 - 8) * 0.5 or (8 - 8) * 0.5: low nibble 8, high nibble 9, zero point 8.
    let values = out[0].try_as_plain_ram().unwrap();
    let values = values.as_slice::<f32>().unwrap();
    assert_eq!(out[0].shape(), [2, 48]);
    assert!(
        values.chunks(2).all(|pair| pair == [0.0, 0.5]),
        "{values:?}"
    );
}

/// A node's integer attributes.
type Attrs = Vec<(&'static str, i64)>;

#[test]
fn unsupported_attributes_are_errors_naming_the_node() {
    let data = || uint8_form(4, 48, 16, false);
    let cases: Vec<(Attrs, &str, &[&str])> = vec![
        (
            vec![("bits", 2)],
            "com.microsoft",
            &["\"gbq\"", "bits=2 is not supported"],
        ),
        (vec![("bits", 3)], "com.microsoft", &["\"gbq\"", "bits=3"]),
        (
            vec![("block_size", 24)],
            "com.microsoft",
            &["\"gbq\"", "block_size=24"],
        ),
        (vec![("block_size", 8)], "com.microsoft", &["block_size=8"]),
        (
            vec![("block_size", -16)],
            "com.microsoft",
            &["block_size=-16"],
        ),
        (vec![("block_size", 16)], "", &["\"gbq\"", "domain is \"\""]),
        (
            vec![("block_size", 16), ("gather_axis", 2)],
            "com.microsoft",
            &["axis"],
        ),
        (
            vec![("block_size", 16), ("quantize_axis", -3)],
            "com.microsoft",
            &["axis"],
        ),
        (
            vec![("block_size", 16), ("gather_axis", i64::MIN)],
            "com.microsoft",
            &["axis"],
        ),
    ];
    for (attrs, domain, expected) in cases {
        let node = gbq_node(&["data", "ids", "scales"], &attrs, domain);
        load_error(model(vec![node], data(), &[2]), expected);
    }
}

#[test]
fn scales_and_zero_points_that_do_not_fit_the_data_are_errors() {
    let node = |inputs: &[&str]| gbq_node(inputs, &[("block_size", 16)], "com.microsoft");
    // Scales for a block of 32: 2 a row, where 16 needs 3.
    let mut inits = uint8_form(4, 48, 16, false);
    inits[1] = f32s("scales", &[4, 2], 0.5);
    load_error(
        model(vec![node(&["data", "ids", "scales"])], inits, &[2]),
        &["scales have shape [4, 2]", "[4, 3]"],
    );
    // Zero points unpacked (3 bytes a row where 2 hold 3 nibbles).
    let mut inits = uint8_form(4, 48, 16, true);
    inits[2] = tensor("zp", UINT8, &[4, 3], vec![0x88; 12]);
    load_error(
        model(vec![node(&["data", "ids", "scales", "zp"])], inits, &[2]),
        &["zero points have shape [4, 3]", "[4, 2]"],
    );
    // Float64 scales, int8 data.
    let mut inits = uint8_form(4, 48, 16, false);
    inits[1] = tensor("scales", 11, &[4, 3], vec![0; 96]);
    load_error(
        model(vec![node(&["data", "ids", "scales"])], inits, &[2]),
        &["scales must be float32 or float16"],
    );
    let mut inits = uint8_form(4, 48, 16, false);
    inits[0].data_type = 3;
    load_error(
        model(vec![node(&["data", "ids", "scales"])], inits, &[2]),
        &["GatherBlockQuantized"],
    );
    // Too few inputs.
    load_error(
        model(
            vec![node(&["data", "ids"])],
            uint8_form(4, 48, 16, false),
            &[2],
        ),
        &["\"gbq\"", "inputs"],
    );
}

/// An output whose size overflows, or is too large for memory, fails at load, not in an
/// allocation.
#[test]
fn outputs_too_large_for_memory_are_errors() {
    let node = gbq_node(
        &["data", "ids", "scales"],
        &[("block_size", 16)],
        "com.microsoft",
    );
    for ids in [&[1i64 << 40, 1 << 40][..], &[1 << 62]] {
        load_error(
            model(vec![node.clone()], uint8_form(4, 48, 16, false), ids),
            &["GatherBlockQuantized"],
        );
    }
}

/// 4-bit tables the loader cannot convert: each an error naming the node or the tensor, and
/// none reaches tract's parser (which cannot read INT4).
#[test]
fn four_bit_tensors_the_loader_cannot_convert_are_errors() {
    let node = |inputs: &[&str], attrs: &[(&str, i64)]| gbq_node(inputs, attrs, "com.microsoft");
    let int4 = |dims: &[i64], bytes: usize| tensor("data", INT4, dims, vec![0x12; bytes]);
    let scales = f32s("scales", &[4, 1], 0.25);
    // An odd logical last dim: ONNX's flat packing crosses rows.
    load_error(
        model(
            vec![node(&["data", "ids", "scales"], &[("block_size", 16)])],
            vec![int4(&[4, 15], 30), scales.clone()],
            &[2],
        ),
        &["\"gbq\"", "last dim is 15"],
    );
    // Fewer bytes than the dims say.
    load_error(
        model(
            vec![node(&["data", "ids", "scales"], &[("block_size", 16)])],
            vec![int4(&[4, 16], 31), scales.clone()],
            &[2],
        ),
        &["\"gbq\"", "32 bytes", "holds 31"],
    );
    // bits=8 with INT4 data.
    load_error(
        model(
            vec![node(
                &["data", "ids", "scales"],
                &[("block_size", 16), ("bits", 8)],
            )],
            vec![int4(&[4, 16], 32), scales.clone()],
            &[2],
        ),
        &["\"gbq\"", "INT4 data need bits=4"],
    );
    // The table also read by another node.
    let other = NodeProto {
        name: "shape".into(),
        op_type: "Shape".into(),
        input: vec!["data".into()],
        output: vec!["s".into()],
        ..NodeProto::default()
    };
    load_error(
        model(
            vec![
                node(&["data", "ids", "scales"], &[("block_size", 16)]),
                other,
            ],
            vec![int4(&[4, 16], 32), scales.clone()],
            &[2],
        ),
        &["\"gbq\"", "used elsewhere"],
    );
    // INT4 data, UINT4 zero points.
    let zp = tensor("zp", UINT4, &[4, 1], vec![0x33; 2]);
    load_error(
        model(
            vec![node(
                &["data", "ids", "scales", "zp"],
                &[("block_size", 16)],
            )],
            vec![int4(&[4, 16], 32), scales.clone(), zp],
            &[2],
        ),
        &["\"gbq\"", "zero points \"zp\" are UINT4"],
    );
    // UINT4 zero points of the wrong shape.
    let mut data = int4(&[4, 16], 32);
    data.data_type = UINT4;
    let zp = tensor("zp", UINT4, &[2, 2], vec![0x33; 2]);
    load_error(
        model(
            vec![node(
                &["data", "ids", "scales", "zp"],
                &[("block_size", 16)],
            )],
            vec![data, scales.clone(), zp],
            &[2],
        ),
        &["\"gbq\"", "zero points \"zp\" have shape [2, 2]"],
    );
    // 4-bit zero points with uint8 data.
    let zp = tensor("zp", UINT4, &[4, 3], vec![0x33; 6]);
    let mut inits = uint8_form(4, 48, 16, false);
    inits.push(zp);
    load_error(
        model(
            vec![node(
                &["data", "ids", "scales", "zp"],
                &[("block_size", 16)],
            )],
            inits,
            &[2],
        ),
        &["\"gbq\"", "its data is not"],
    );
}

/// Tensors of types tract cannot read are errors naming them (tract's own parser errs on INT4
/// with "Unknown DatumType Int4"; older versions panicked).
#[test]
fn tensors_tract_cannot_read_are_errors_not_panics() {
    let node = gbq_node(
        &["data", "ids", "scales"],
        &[("block_size", 16)],
        "com.microsoft",
    );
    let mut inits = uint8_form(4, 48, 16, false);
    inits.push(tensor("fp8", FLOAT8E4M3FN, &[2], vec![0, 0]));
    load_error(
        model(vec![node.clone()], inits, &[2]),
        &["initializer \"fp8\" is FLOAT8E4M3FN"],
    );
    // A 4-bit tensor no GatherBlockQuantized reads.
    let mut inits = uint8_form(4, 48, 16, false);
    inits.push(tensor("lonely", INT4, &[4], vec![0, 0]));
    load_error(
        model(vec![node.clone()], inits, &[2]),
        &[
            "initializer \"lonely\" is INT4",
            "only where GatherBlockQuantized",
        ],
    );
    // An input declared INT4.
    let mut proto = model(vec![node], uint8_form(4, 48, 16, false), &[2]);
    let graph = proto.graph.as_mut().unwrap();
    graph.input.push(value("four", INT4, &[2]));
    load_error(proto, &["\"four\" is declared INT4"]);
}

/// The conversion itself, on ONNX Runtime's three forms: UINT4 data with zero points (3 a row:
/// the flat packing is not row-aligned), INT4 data, UINT4 data without zero points (which
/// gets all-zero ones).
#[test]
fn four_bit_tensors_become_the_uint8_form() {
    let node = || {
        gbq_node(
            &["data", "ids", "scales", "zp"],
            &[("block_size", 16)],
            "com.microsoft",
        )
    };
    // Data [2, 48]: 96 nibbles, 0..15 repeating, flat = per row (48 is even).
    let nibbles: Vec<u8> = (0..96).map(|n| n % 16).collect();
    let packed: Vec<u8> = nibbles.chunks(2).map(|p| p[0] | (p[1] << 4)).collect();
    // Zero points [2, 3]: 1..=6, flat over 6 nibbles: bytes 0x21, 0x43, 0x65.
    let zp = tensor("zp", UINT4, &[2, 3], vec![0x21, 0x43, 0x65]);
    let mut proto = model(
        vec![node()],
        vec![
            tensor("data", UINT4, &[2, 48], packed.clone()),
            f32s("scales", &[2, 3], 1.0),
            zp,
        ],
        &[1],
    );
    assert_eq!(convert_4bit_tensors(&mut proto).expect("converts"), 2);
    let graph = proto.graph.as_ref().unwrap();
    let data = &graph.initializer[0];
    assert_eq!(
        (data.data_type, data.dims.as_slice()),
        (UINT8, &[2, 24][..])
    );
    assert_eq!(data.raw_data, packed);
    // Per row: [1, 2, 3] -> 0x21, 0x03; [4, 5, 6] -> 0x54, 0x06.
    let zp = &graph.initializer[2];
    assert_eq!((zp.data_type, zp.dims.as_slice()), (UINT8, &[2, 2][..]));
    assert_eq!(zp.raw_data, [0x21, 0x03, 0x54, 0x06]);

    // INT4: each nibble XOR 8 (-8 = 0x8 -> 0, 7 -> 15, -1 = 0xF -> 7).
    let mut proto = model(
        vec![gbq_node(
            &["data", "ids", "scales"],
            &[("block_size", 16)],
            "com.microsoft",
        )],
        vec![
            tensor("data", INT4, &[1, 16], vec![0x78, 0x0F, 0, 0, 0, 0, 0, 0]),
            f32s("scales", &[1, 1], 1.0),
        ],
        &[1],
    );
    assert_eq!(convert_4bit_tensors(&mut proto).expect("converts"), 1);
    let graph = proto.graph.as_ref().unwrap();
    assert_eq!(graph.initializer[0].raw_data[..2], [0xF0, 0x87]);
    assert_eq!(graph.node[0].input.len(), 3, "INT4 needs no zero points");

    // UINT4 without zero points: zero points of 0 added, as ONNX Runtime's default for UINT4.
    let mut proto = model(
        vec![gbq_node(
            &["data", "ids", "scales"],
            &[("block_size", 16)],
            "com.microsoft",
        )],
        vec![
            tensor("data", UINT4, &[3, 16], vec![0x11; 24]),
            f32s("scales", &[3, 1], 1.0),
        ],
        &[1],
    );
    assert_eq!(convert_4bit_tensors(&mut proto).expect("converts"), 1);
    let graph = proto.graph.as_ref().unwrap();
    assert_eq!(graph.node[0].input[3], "data.gather_jit_zero_points");
    let added = graph.initializer.last().unwrap();
    assert_eq!(added.name, "data.gather_jit_zero_points");
    assert_eq!(
        (added.data_type, added.dims.as_slice()),
        (UINT8, &[3, 1][..])
    );
    assert_eq!(added.raw_data, [0, 0, 0]);
    // The model runs: every value (1 - 0) * 1.
    let out = model_for_proto(&onnx(), proto, None)
        .and_then(|m| m.into_optimized())
        .and_then(|m| m.into_runnable())
        .and_then(|p| p.run(tvec!(tensor1(&[2i64]).into_tvalue())))
        .expect("runs");
    let values = out[0].try_as_plain_ram().unwrap();
    assert_eq!(values.as_slice::<f32>().unwrap(), [1.0; 16]);
}

/// A hand-built op with attributes or inputs no parser would let through: errors from its
/// facts and from its evaluation, with both engines.
#[test]
fn hand_built_ops_with_impossible_attributes_are_errors() {
    for engine in [QuantizedEngine::Jit, QuantizedEngine::Interpreter] {
        let op = |q: BlockQuantization| GatherBlockQuantized {
            quantization: q,
            engine,
        };
        let valid = BlockQuantization {
            block_size: 16,
            ..BlockQuantization::default()
        };
        let data = Tensor::zero::<u8>(&[4, 8]).unwrap();
        let ids = tensor1(&[1i64]);
        let scales = Tensor::zero::<f32>(&[4, 1]).unwrap();
        let run = |op: GatherBlockQuantized, inputs: TVec<TValue>| {
            catch_panic("eval", || op.eval(&EvalContext::out_of_plan(), inputs)).map(|_| ())
        };
        let inputs = || {
            tvec!(
                data.clone().into_tvalue(),
                ids.clone().into_tvalue(),
                scales.clone().into_tvalue()
            )
        };
        run(op(valid), inputs()).expect("the valid op runs");
        for bad in [
            BlockQuantization {
                gather_axis: 5,
                ..valid
            },
            BlockQuantization {
                quantize_axis: i64::MAX,
                ..valid
            },
            BlockQuantization {
                block_size: 3,
                ..valid
            },
            BlockQuantization { bits: 5, ..valid },
        ] {
            let e = run(op(bad), inputs()).expect_err("an error");
            assert!(!format!("{e}").contains("panicked"), "{e}");
            let facts: Vec<TypedFact> = inputs()
                .iter()
                .map(|t| TypedFact::try_from(t.clone().into_arc_tensor()).unwrap())
                .collect();
            let facts: Vec<&TypedFact> = facts.iter().collect();
            assert!(op(bad).output_facts(&facts).is_err(), "{bad:?}");
        }
        // Zero points announced but not passed, and an index of the wrong type.
        let e = run(
            op(BlockQuantization {
                zero_points: true,
                ..valid
            }),
            inputs(),
        )
        .expect_err("arity");
        assert!(format!("{e}").contains("3 inputs, expected 4"), "{e}");
        let floats = tvec!(
            data.clone().into_tvalue(),
            tensor1(&[1f32]).into_tvalue(),
            scales.clone().into_tvalue()
        );
        run(op(valid), floats).expect_err("float indices");
    }
}
