//! ONNX models written in code: a protobuf encoder for the few `ModelProto` fields hostile test
//! models need (a graph of nodes with integer attributes, typed inputs and outputs with fixed
//! or symbolic dims, raw-data initializers).
//!
//! It is hand-written, not prost, so that the CLI's tests can include it too (`#[path]`): the
//! CLI has no prost dependency of its own. `tests/hostile.rs` checks that prost decodes what it
//! writes into the fields it meant.

#![allow(dead_code)]

/// ONNX `TensorProto.DataType` codes.
pub mod elem {
    pub const FLOAT: i32 = 1;
    pub const UINT8: i32 = 2;
    pub const INT32: i32 = 6;
    pub const INT64: i32 = 7;
    pub const STRING: i32 = 8;
    pub const BOOL: i32 = 9;
    pub const DOUBLE: i32 = 11;
}

/// A dim of a declared input or output shape.
#[derive(Clone, Copy, Debug)]
pub enum Dim<'a> {
    /// `dim_value`: a number (negative ones too, as a hostile file may hold).
    Value(i64),
    /// `dim_param`: a symbol.
    Param(&'a str),
}

fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Field `field` as a varint (negative int64s as their 10-byte two's complement, as protobuf
/// writes them).
fn int(out: &mut Vec<u8>, field: u32, value: i64) {
    varint(out, u64::from(field) << 3);
    varint(out, value as u64);
}

/// Field `field` as length-delimited bytes (strings, messages, packed repeated ints).
fn bytes(out: &mut Vec<u8>, field: u32, value: &[u8]) {
    varint(out, (u64::from(field) << 3) | 2);
    varint(out, value.len() as u64);
    out.extend_from_slice(value);
}

/// `TypeProto` of a tensor of `elem_type` and `dims`.
fn tensor_type(elem_type: i32, dims: &[Dim]) -> Vec<u8> {
    let mut shape = Vec::new();
    for dim in dims {
        let mut d = Vec::new();
        match dim {
            Dim::Value(v) => int(&mut d, 1, *v),
            Dim::Param(p) => bytes(&mut d, 2, p.as_bytes()),
        }
        bytes(&mut shape, 1, &d);
    }
    let mut tensor = Vec::new();
    int(&mut tensor, 1, i64::from(elem_type));
    bytes(&mut tensor, 2, &shape);
    let mut ty = Vec::new();
    bytes(&mut ty, 1, &tensor);
    ty
}

/// A `ValueInfoProto`: a graph input or output named `name`.
pub fn value(name: &str, elem_type: i32, dims: &[Dim]) -> Vec<u8> {
    let mut v = Vec::new();
    bytes(&mut v, 1, name.as_bytes());
    bytes(&mut v, 2, &tensor_type(elem_type, dims));
    v
}

/// A `ValueInfoProto` without a type: an output whose facts tract infers.
pub fn untyped(name: &str) -> Vec<u8> {
    let mut v = Vec::new();
    bytes(&mut v, 1, name.as_bytes());
    v
}

/// A `TensorProto` initializer `name` of `elem_type` and `dims` holding `raw` (little-endian);
/// also an ONNX test data file (`input_0.pb`), whose name may be empty.
pub fn initializer(name: &str, elem_type: i32, dims: &[i64], raw: &[u8]) -> Vec<u8> {
    let mut t = Vec::new();
    let mut packed = Vec::new();
    for &d in dims {
        varint(&mut packed, d as u64);
    }
    bytes(&mut t, 1, &packed);
    int(&mut t, 2, i64::from(elem_type));
    bytes(&mut t, 8, name.as_bytes());
    bytes(&mut t, 9, raw);
    t
}

/// A `TensorProto` `name` (none if empty) of int64 `values` in `int64_data` rather than
/// `raw_data`, as ONNX's `make_tensor` writes them unless asked for raw data.
pub fn int64_data_tensor(name: &str, dims: &[i64], values: &[i64]) -> Vec<u8> {
    let mut packed = Vec::new();
    for &v in values {
        varint(&mut packed, v as u64);
    }
    typed_tensor(name, elem::INT64, dims, 7, &packed)
}

/// A `TensorProto` `name` (none if empty) of f32 `values` in `float_data`.
pub fn float_data_tensor(name: &str, dims: &[i64], values: &[f32]) -> Vec<u8> {
    let packed: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    typed_tensor(name, elem::FLOAT, dims, 4, &packed)
}

/// A `TensorProto` whose values are packed in `field` (4 float_data, 5 int32_data, 7
/// int64_data, ...).
pub fn typed_tensor(
    name: &str,
    elem_type: i32,
    dims: &[i64],
    field: u32,
    packed: &[u8],
) -> Vec<u8> {
    let mut t = Vec::new();
    let mut packed_dims = Vec::new();
    for &d in dims {
        varint(&mut packed_dims, d as u64);
    }
    bytes(&mut t, 1, &packed_dims);
    int(&mut t, 2, i64::from(elem_type));
    bytes(&mut t, field, packed);
    if !name.is_empty() {
        bytes(&mut t, 8, name.as_bytes());
    }
    t
}

/// A string initializer (`string_data`, as ONNX stores strings).
pub fn string_initializer(name: &str, dims: &[i64], values: &[&str]) -> Vec<u8> {
    let mut t = Vec::new();
    let mut packed = Vec::new();
    for &d in dims {
        varint(&mut packed, d as u64);
    }
    bytes(&mut t, 1, &packed);
    int(&mut t, 2, i64::from(elem::STRING));
    for value in values {
        bytes(&mut t, 6, value.as_bytes());
    }
    bytes(&mut t, 8, name.as_bytes());
    t
}

/// An int64 initializer.
pub fn i64_initializer(name: &str, dims: &[i64], values: &[i64]) -> Vec<u8> {
    let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    initializer(name, elem::INT64, dims, &raw)
}

/// An f32 initializer.
pub fn f32_initializer(name: &str, dims: &[i64], values: &[f32]) -> Vec<u8> {
    let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    initializer(name, elem::FLOAT, dims, &raw)
}

/// A `NodeProto` of `op_type` (default domain) with integer attributes.
pub fn node(op_type: &str, inputs: &[&str], outputs: &[&str], attrs: &[(&str, i64)]) -> Vec<u8> {
    let mut n = Vec::new();
    for input in inputs {
        bytes(&mut n, 1, input.as_bytes());
    }
    for output in outputs {
        bytes(&mut n, 2, output.as_bytes());
    }
    bytes(
        &mut n,
        3,
        outputs.first().copied().unwrap_or("node").as_bytes(),
    );
    bytes(&mut n, 4, op_type.as_bytes());
    for (name, value) in attrs {
        let mut a = Vec::new();
        bytes(&mut a, 1, name.as_bytes());
        int(&mut a, 3, *value);
        // AttributeType INT.
        int(&mut a, 20, 2);
        bytes(&mut n, 5, &a);
    }
    n
}

/// `node` (made by [`node`]) with a string attribute added, as `reduction = "add"`.
pub fn with_string_attr(mut node: Vec<u8>, name: &str, value: &str) -> Vec<u8> {
    let mut a = Vec::new();
    bytes(&mut a, 1, name.as_bytes());
    bytes(&mut a, 4, value.as_bytes());
    // AttributeType STRING.
    int(&mut a, 20, 3);
    bytes(&mut node, 5, &a);
    node
}

/// A `ModelProto` (IR version 8, default-domain opset `opset`) whose graph holds `nodes`,
/// `initializers`, `inputs` and `outputs` (each made by the functions above).
pub fn model(
    opset: i64,
    nodes: &[Vec<u8>],
    initializers: &[Vec<u8>],
    inputs: &[Vec<u8>],
    outputs: &[Vec<u8>],
) -> Vec<u8> {
    model_with_value_info(opset, nodes, initializers, inputs, outputs, &[])
}

/// [`model`] whose graph also declares the facts of inner values (`value_info`, made by
/// [`value`]), as exporters write them.
pub fn model_with_value_info(
    opset: i64,
    nodes: &[Vec<u8>],
    initializers: &[Vec<u8>],
    inputs: &[Vec<u8>],
    outputs: &[Vec<u8>],
    value_info: &[Vec<u8>],
) -> Vec<u8> {
    let mut graph = Vec::new();
    for n in nodes {
        bytes(&mut graph, 1, n);
    }
    bytes(&mut graph, 2, b"hostile");
    for i in initializers {
        bytes(&mut graph, 5, i);
    }
    for i in inputs {
        bytes(&mut graph, 11, i);
    }
    for o in outputs {
        bytes(&mut graph, 12, o);
    }
    for v in value_info {
        bytes(&mut graph, 13, v);
    }
    let mut m = Vec::new();
    int(&mut m, 1, 8);
    let mut opset_import = Vec::new();
    bytes(&mut opset_import, 1, b"");
    int(&mut opset_import, 2, opset);
    bytes(&mut m, 8, &opset_import);
    bytes(&mut m, 7, &graph);
    m
}

/// `GatherND(data, indices)` with `batch_dims`, both inputs of the graph, its output `y`
/// untyped.
pub fn gather_nd(data: &[Dim], indices: &[Dim], batch_dims: i64) -> Vec<u8> {
    model(
        13,
        &[node(
            "GatherND",
            &["data", "indices"],
            &["y"],
            &[("batch_dims", batch_dims)],
        )],
        &[],
        &[
            value("data", elem::FLOAT, data),
            value("indices", elem::INT64, indices),
        ],
        &[untyped("y")],
    )
}

/// `Range(start, limit, delta)` with all three int64 scalars inputs of the graph, its output `y`
/// untyped: the bounds arrive only at run time.
pub fn range_of_inputs() -> Vec<u8> {
    let scalar = |name| value(name, elem::INT64, &[]);
    model(
        13,
        &[node("Range", &["start", "limit", "delta"], &["y"], &[])],
        &[],
        &[scalar("start"), scalar("limit"), scalar("delta")],
        &[untyped("y")],
    )
}
