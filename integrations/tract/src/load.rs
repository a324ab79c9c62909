//! Loading models that tract's parser cannot read as they are: ONNX Runtime's quantizer stores
//! the tables of `GatherBlockQuantized` nodes as INT4 / UINT4 tensors, which tract-onnx has no
//! datum type for. [`convert_4bit_tensors`] rewrites each such tensor into ONNX Runtime's
//! uint8 form of the op, whose values are the same bit for bit, and the loaders here apply it
//! before tract parses the model.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use crate::quantized::{MS_DOMAIN, block_quantization};
use gather_jit::{BlockQuantization, QuantizedSignature};
use tract_onnx::model::{Onnx, ParseResult};
use tract_onnx::pb::{GraphProto, ModelProto, NodeProto, TensorProto, ValueInfoProto};
use tract_onnx::prelude::*;
use tract_onnx::tract_hir::internal::*;

/// ONNX `TensorProto.DataType` codes (tract-onnx's protobuf enum stops at BFLOAT16 = 16).
mod code {
    pub(super) const UINT8: i32 = 2;
    pub(super) const UINT4: i32 = 21;
    pub(super) const INT4: i32 = 22;
    /// `DataLocation::EXTERNAL`.
    pub(super) const EXTERNAL: i32 = 1;
}

/// The data types whose tensors tract-onnx reads (float, the integers, string, bool, float16,
/// double): any other makes its parser fail, or panic for codes its protobuf enum lacks.
const READABLE: [i32; 13] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13];

/// An ONNX data type's name, for errors.
fn type_name(code: i32) -> String {
    let name = match code {
        0 => "UNDEFINED",
        1 => "FLOAT",
        2 => "UINT8",
        3 => "INT8",
        4 => "UINT16",
        5 => "INT16",
        6 => "INT32",
        7 => "INT64",
        8 => "STRING",
        9 => "BOOL",
        10 => "FLOAT16",
        11 => "DOUBLE",
        12 => "UINT32",
        13 => "UINT64",
        14 => "COMPLEX64",
        15 => "COMPLEX128",
        16 => "BFLOAT16",
        17 => "FLOAT8E4M3FN",
        18 => "FLOAT8E4M3FNUZ",
        19 => "FLOAT8E5M2",
        20 => "FLOAT8E5M2FNUZ",
        21 => "UINT4",
        22 => "INT4",
        23 => "FLOAT4E2M1",
        _ => return format!("data type {code}"),
    };
    name.to_string()
}

/// Reads the ONNX model at `path` with `onnx`, as `onnx.model_for_path(path)` does, after
/// [`convert_4bit_tensors`]; a tensor tract cannot read is an error naming it (tract's own
/// parser panics on some). This is how to load a model that ONNX Runtime's quantizer wrote:
///
/// ```no_run
/// use tract_onnx::prelude::*;
///
/// let model = gather_jit_tract::model_for_path(&gather_jit_tract::onnx(), "quantized.onnx")?
///     .into_optimized()?
///     .into_runnable()?;
/// # Ok::<(), TractError>(())
/// ```
///
/// # Errors
/// As tract's `model_for_path`, [`convert_4bit_tensors`]'s, or a tensor of a type tract cannot
/// read.
pub fn model_for_path(onnx: &Onnx, path: impl AsRef<Path>) -> TractResult<InferenceModel> {
    let path = path.as_ref();
    let proto = onnx.proto_model_for_path(path)?;
    // As tract's `model_for_path`: external data is found next to the model.
    let dir = path.parent().and_then(Path::to_str);
    model_for_proto(onnx, proto, dir)
}

/// As [`model_for_path`], from a reader (external data cannot be found then).
///
/// # Errors
/// As [`model_for_path`].
pub fn model_for_read(onnx: &Onnx, reader: &mut dyn Read) -> TractResult<InferenceModel> {
    let proto = onnx.proto_model_for_read(reader)?;
    model_for_proto(onnx, proto, None)
}

/// As [`model_for_path`], from a decoded model whose external data, if any, lie in
/// `model_dir`.
///
/// # Errors
/// As [`model_for_path`].
pub fn model_for_proto(
    onnx: &Onnx,
    mut proto: ModelProto,
    model_dir: Option<&str>,
) -> TractResult<InferenceModel> {
    convert_4bit_tensors(&mut proto)?;
    if let Some(graph) = &proto.graph {
        check_readable(graph, onnx.use_output_shapes)?;
    }
    let ParseResult {
        model,
        unresolved_inputs,
        ..
    } = onnx.parse(&proto, model_dir)?;
    ensure!(
        unresolved_inputs.is_empty(),
        "Could not resolve inputs at top-level: {unresolved_inputs:?}"
    );
    Ok(model)
}

/// Rewrites the INT4 and UINT4 initializers of `com.microsoft.GatherBlockQuantized` nodes (as
/// ONNX Runtime's quantizer writes them) into ONNX Runtime's uint8 form of the op, which
/// tract can read and this crate's op runs, with the same values: data become uint8 with two
/// values a byte along the last axis (ONNX's flat packing is that already when the last dim is
/// even, which gather-jit needs); zero points are repacked along their own last axis, each row
/// whole bytes; INT4 nibbles are XORed with 8 (data and zero points alike), so that
/// `(q ^ 8) - 8` under the uint8 form's default zero point 8 is the signed value and
/// differences of zero points are kept; UINT4 data without zero points, whose zero point is 0
/// in ONNX Runtime, get an all-zero zero-points initializer. Graph inputs and value infos of a
/// rewritten tensor lose their (INT4 / UINT4) type. Every graph is rewritten, subgraphs too,
/// each node's tensors where they are the same graph's initializers.
///
/// A tensor is rewritten only where GatherBlockQuantized nodes alone use it, all as data or
/// all as zero points; another use, data and zero points of different types, bits other than
/// 4, a logical last dim that is odd, or external INT4 data (which would need reading) are
/// errors naming the node. Returns the number of tensors rewritten.
///
/// # Errors
/// As above, or attributes or shapes gather-jit's validation rejects.
pub fn convert_4bit_tensors(proto: &mut ModelProto) -> TractResult<usize> {
    let Some(graph) = proto.graph.as_mut() else {
        return Ok(0);
    };
    let mut uses = HashMap::new();
    collect_uses(graph, &mut uses);
    let mut converted = 0;
    convert_graph(graph, &uses, &mut converted)?;
    Ok(converted)
}

/// How the nodes of a model use a tensor, by name (model-wide, subgraphs included).
#[derive(Debug, Default, Clone, Copy)]
struct Uses {
    data: bool,
    zero_points: bool,
    other: bool,
}

fn is_gather_block_quantized(node: &NodeProto) -> bool {
    node.op_type == "GatherBlockQuantized" && node.domain == MS_DOMAIN
}

/// The graphs an attribute holds.
fn subgraphs(node: &NodeProto) -> impl Iterator<Item = &GraphProto> {
    node.attribute
        .iter()
        .flat_map(|attr| attr.g.iter().chain(&attr.graphs))
}

fn collect_uses(graph: &GraphProto, uses: &mut HashMap<String, Uses>) {
    for node in &graph.node {
        let gbq = is_gather_block_quantized(node);
        for (slot, input) in node.input.iter().enumerate() {
            let entry = uses.entry(input.clone()).or_default();
            match (gbq, slot) {
                (true, 0) => entry.data = true,
                (true, 3) => entry.zero_points = true,
                _ => entry.other = true,
            }
        }
        // A model's nesting is bounded by prost's decoding limit, so this recursion is too.
        for subgraph in subgraphs(node) {
            collect_uses(subgraph, uses);
        }
    }
    for output in &graph.output {
        uses.entry(output.name.clone()).or_default().other = true;
    }
}

/// What a 4-bit tensor becomes.
#[derive(Debug, Clone, PartialEq)]
enum Plan {
    /// Data: relabelled uint8 of `stored` dims, nibbles XOR 8 if `signed`.
    Data { signed: bool, stored: Vec<usize> },
    /// Zero points of logical dims `logical`, repacked per row into `stored` dims.
    ZeroPoints {
        signed: bool,
        logical: Vec<usize>,
        stored: Vec<usize>,
    },
}

fn convert_graph(
    graph: &mut GraphProto,
    uses: &HashMap<String, Uses>,
    converted: &mut usize,
) -> TractResult<()> {
    for node in &mut graph.node {
        for attr in &mut node.attribute {
            for subgraph in attr.g.iter_mut().chain(&mut attr.graphs) {
                convert_graph(subgraph, uses, converted)?;
            }
        }
    }
    let four_bit: HashMap<String, usize> = graph
        .initializer
        .iter()
        .enumerate()
        .filter(|(_, t)| [code::UINT4, code::INT4].contains(&t.data_type))
        .map(|(i, t)| (t.name.clone(), i))
        .collect();
    if four_bit.is_empty() {
        return Ok(());
    }
    let mut plans: HashMap<usize, Plan> = HashMap::new();
    let mut added: Vec<TensorProto> = Vec::new();
    let mut names: std::collections::HashSet<String> =
        graph.initializer.iter().map(|t| t.name.clone()).collect();
    for node in graph
        .node
        .iter_mut()
        .filter(|n| is_gather_block_quantized(n))
    {
        let what = format!("GatherBlockQuantized node {:?}", node.name);
        let zero_points = node.input.get(3).filter(|name| !name.is_empty()).cloned();
        let Some(&data_at) = node.input.first().and_then(|data| four_bit.get(data)) else {
            if let Some(zp) = zero_points.filter(|zp| four_bit.contains_key(zp)) {
                bail!("{what}: zero points {zp:?} are INT4 / UINT4 but its data is not");
            }
            continue;
        };
        let data = &graph.initializer[data_at];
        let signed = data.data_type == code::INT4;
        let q = block_quantization(node)?;
        ensure!(
            q.bits == 4,
            "{what}: {} data need bits=4, not bits={}",
            type_name(data.data_type),
            q.bits
        );
        let logical = dims(data).with_context(|| format!("{what}: data {:?}", data.name))?;
        let layout = QuantizedSignature::block_quantized(
            &logical,
            &[1],
            BlockQuantization {
                zero_points: true,
                ..q
            },
        )
        .validate()
        .with_context(|| format!("{what}: data {:?} of shape {logical:?}", data.name))?;
        only_used_as(uses, &data.name, "data", &what)?;
        if let Some(bytes) = inline_bytes(data) {
            ensure!(
                bytes == layout.data_bytes(),
                "{what}: data {:?} of shape {logical:?} are {} bytes of 4-bit values, the \
                 tensor holds {bytes}",
                data.name,
                layout.data_bytes()
            );
        }
        plan(
            &mut plans,
            data_at,
            Plan::Data {
                signed,
                stored: layout.data_bytes_shape().to_vec(),
            },
            &what,
        )?;
        let zp_stored = layout
            .zero_points_bytes_shape()
            .unwrap_or_default()
            .to_vec();
        match zero_points {
            Some(zp) => {
                let Some(&zp_at) = four_bit.get(&zp) else {
                    bail!(
                        "{what}: data {:?} are {} but zero points {zp:?} are not an initializer \
                         of that type",
                        data.name,
                        type_name(data.data_type)
                    );
                };
                let zp_tensor = &graph.initializer[zp_at];
                ensure!(
                    zp_tensor.data_type == data.data_type,
                    "{what}: data {:?} are {} but zero points {zp:?} are {}",
                    data.name,
                    type_name(data.data_type),
                    type_name(zp_tensor.data_type)
                );
                let zp_logical =
                    dims(zp_tensor).with_context(|| format!("{what}: zero points {zp:?}"))?;
                ensure!(
                    zp_logical == layout.scales_shape(),
                    "{what}: zero points {zp:?} have shape {zp_logical:?}, the scales' shape \
                     for data {logical:?} is {:?}",
                    layout.scales_shape()
                );
                only_used_as(uses, &zp, "zero points", &what)?;
                plan(
                    &mut plans,
                    zp_at,
                    Plan::ZeroPoints {
                        signed,
                        logical: zp_logical,
                        stored: zp_stored,
                    },
                    &what,
                )?;
            }
            // UINT4's zero point is 0 in ONNX Runtime, the uint8 form's default is 8.
            None if !signed => {
                let bytes = layout.zero_points_bytes();
                let mut zeros = Vec::new();
                zeros.try_reserve_exact(bytes).map_err(|_| {
                    format_err!("{what}: could not allocate {bytes} bytes of zero points")
                })?;
                zeros.resize(bytes, 0u8);
                let mut name = format!("{}.gather_jit_zero_points", data.name);
                while names.contains(&name) || uses.contains_key(&name) {
                    name.push('_');
                }
                names.insert(name.clone());
                node.input.truncate(3);
                node.input.push(name.clone());
                added.push(TensorProto {
                    name,
                    data_type: code::UINT8,
                    dims: to_i64(&zp_stored)?,
                    raw_data: zeros,
                    ..TensorProto::default()
                });
            }
            // INT4 without zero points: XOR 8 under the default zero point 8 is the value.
            None => {}
        }
    }
    for (at, plan) in plans {
        let tensor = &mut graph.initializer[at];
        apply(tensor, &plan).with_context(|| format!("converting tensor {:?}", tensor.name))?;
        forget_type(&mut graph.input, &tensor.name);
        forget_type(&mut graph.value_info, &tensor.name);
        *converted += 1;
    }
    graph.initializer.extend(added);
    Ok(())
}

/// Records `plan` for initializer `at`; a tensor two nodes would convert differently is an
/// error.
fn plan(plans: &mut HashMap<usize, Plan>, at: usize, plan: Plan, what: &str) -> TractResult<()> {
    match plans.get(&at) {
        Some(earlier) if *earlier != plan => {
            bail!("{what}: another GatherBlockQuantized node reads its tensors in another layout")
        }
        _ => {
            plans.insert(at, plan);
            Ok(())
        }
    }
}

fn only_used_as(
    uses: &HashMap<String, Uses>,
    name: &str,
    role: &str,
    what: &str,
) -> TractResult<()> {
    let u = uses.get(name).copied().unwrap_or_default();
    let only = match role {
        "data" => u.data && !u.zero_points && !u.other,
        _ => u.zero_points && !u.data && !u.other,
    };
    ensure!(
        only,
        "{what}: {role} {name:?} are INT4 / UINT4 and used elsewhere too ({u:?}); gather-jit \
         converts such tensors only where GatherBlockQuantized nodes alone read them, as {role}"
    );
    Ok(())
}

/// A tensor's dims as `usize`s.
fn dims(tensor: &TensorProto) -> TractResult<Vec<usize>> {
    tensor
        .dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format_err!("dim {d} is negative")))
        .collect()
}

fn to_i64(dims: &[usize]) -> TractResult<Vec<i64>> {
    dims.iter()
        .map(|&d| i64::try_from(d).map_err(|_| format_err!("dim {d} does not fit ONNX's i64")))
        .collect()
}

/// Drops the declared type of `name` among `infos`: it was the 4-bit one.
fn forget_type(infos: &mut [ValueInfoProto], name: &str) {
    for info in infos.iter_mut().filter(|info| info.name == name) {
        info.r#type = None;
    }
}

/// The bytes a tensor holds in the model itself (raw data, or one per `int32_data` element as
/// ONNX stores 4-bit pairs there); `None` for external data.
fn inline_bytes(tensor: &TensorProto) -> Option<usize> {
    match tensor.data_location == Some(code::EXTERNAL) {
        true => None,
        false if !tensor.raw_data.is_empty() => Some(tensor.raw_data.len()),
        false => Some(tensor.int32_data.len()),
    }
}

/// The packed bytes of a 4-bit tensor of `count` values (raw data, or one byte per `int32_data`
/// element as ONNX stores 4-bit pairs there), taken out of it.
fn take_packed(tensor: &mut TensorProto, count: usize) -> TractResult<Vec<u8>> {
    let bytes = count.div_ceil(2);
    if !tensor.raw_data.is_empty() {
        ensure!(
            tensor.raw_data.len() == bytes,
            "{count} 4-bit values are {bytes} bytes, the tensor has {}",
            tensor.raw_data.len()
        );
        return Ok(std::mem::take(&mut tensor.raw_data));
    }
    ensure!(
        tensor.int32_data.len() == bytes,
        "{count} 4-bit values are {bytes} bytes, the tensor has {} in int32_data",
        tensor.int32_data.len()
    );
    let packed = std::mem::take(&mut tensor.int32_data)
        .into_iter()
        .map(|v| u8::try_from(v).map_err(|_| format_err!("int32_data holds {v}, not a byte")))
        .collect::<TractResult<Vec<u8>>>()?;
    Ok(packed)
}

fn apply(tensor: &mut TensorProto, plan: &Plan) -> TractResult<()> {
    let count: usize = dims(tensor)?
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(|| format_err!("its dims {:?} overflow", tensor.dims))?;
    let external = tensor.data_location == Some(code::EXTERNAL);
    match plan {
        Plan::Data { signed, stored } => {
            if external {
                // UINT4 data are the uint8 form's bytes already: relabelling is enough.
                ensure!(
                    !signed,
                    "INT4 data stored outside the model would need rewriting (not supported)"
                );
            } else {
                let mut bytes = take_packed(tensor, count)?;
                if *signed {
                    bytes.iter_mut().for_each(|b| *b ^= 0x88);
                }
                tensor.raw_data = bytes;
            }
            tensor.dims = to_i64(stored)?;
        }
        Plan::ZeroPoints {
            signed,
            logical,
            stored,
        } => {
            ensure!(
                !external,
                "4-bit zero points stored outside the model are not supported"
            );
            let packed = take_packed(tensor, count)?;
            let row = logical.last().copied().unwrap_or(1);
            let row_bytes = row.div_ceil(2);
            let total: usize = stored.iter().product();
            let mut out = Vec::new();
            out.try_reserve_exact(total)
                .map_err(|_| format_err!("could not allocate {total} bytes of zero points"))?;
            out.resize(total, 0u8);
            let flip = if *signed { 8 } else { 0 };
            for n in 0..count {
                let value = ((packed[n / 2] >> (4 * (n % 2))) & 0xf) ^ flip;
                let (r, c) = (n / row, n % row);
                out[r * row_bytes + c / 2] |= value << (4 * (c % 2));
            }
            tensor.raw_data = out;
            tensor.dims = to_i64(stored)?;
        }
    }
    tensor.data_type = code::UINT8;
    Ok(())
}

/// Fails, naming the tensor, if `graph` (or a subgraph) holds an initializer, an input or a
/// value info (and, when tract reads them, an output) of a type tract cannot read: tract-onnx
/// errs (older versions panicked) on the codes its protobuf enum lacks.
fn check_readable(graph: &GraphProto, outputs: bool) -> TractResult<()> {
    let hint = |code| match code {
        code::INT4 | code::UINT4 => {
            " (gather-jit converts INT4 and UINT4 tensors only where GatherBlockQuantized \
             nodes alone read them)"
        }
        _ => "",
    };
    for tensor in &graph.initializer {
        ensure!(
            READABLE.contains(&tensor.data_type),
            "initializer {:?} is {}, which tract cannot read{}",
            tensor.name,
            type_name(tensor.data_type),
            hint(tensor.data_type)
        );
    }
    // tract reads an initializer's value, not the type its graph input declares.
    let declared = (graph.input.iter())
        .filter(|info| !graph.initializer.iter().any(|t| t.name == info.name))
        .chain(&graph.value_info)
        .chain(graph.output.iter().filter(|_| outputs));
    for info in declared {
        let Some(tract_onnx::pb::type_proto::Value::TensorType(tensor)) =
            info.r#type.as_ref().and_then(|t| t.value.as_ref())
        else {
            continue;
        };
        ensure!(
            READABLE.contains(&tensor.elem_type),
            "{:?} is declared {}, which tract cannot read{}",
            info.name,
            type_name(tensor.elem_type),
            hint(tensor.elem_type)
        );
    }
    for node in &graph.node {
        for subgraph in subgraphs(node) {
            check_readable(subgraph, outputs)?;
        }
    }
    Ok(())
}
