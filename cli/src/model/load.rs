//! How `gather-jit model` loads a model: the file read under the CLI's file policy, decoded,
//! parsed by tract with JIT-backed ops (or tract's own), analysed and optimised, each of
//! tract's phases under [`catch_panic`]; and what the report says of each gather and scatter.

use std::path::Path;

use gather_jit_tract::{GatherBlockQuantized, JitGather, JitScatter, QuantizedEngine, catch_panic};
use prost::Message;
use tract_onnx::prelude::*;

use super::proto;
use crate::failure::{Failure, Result};
use crate::files::{self, Cap};

/// A node the report lists: its name, its op (and what runs it) and its inputs' facts.
pub(super) type NodeReport = (String, String, Vec<String>);

/// A model ready to run, and the facts of its inputs and outputs.
pub(super) struct Loaded {
    pub plan: Arc<TypedSimplePlan>,
    pub gathers: Vec<NodeReport>,
    pub scatters: Vec<NodeReport>,
}

/// Parses `path` with JIT-backed gathers or tract's own, under [`catch_panic`]: tract panics
/// on some damaged files instead of returning an error. The file and the external data files
/// it names are read under the CLI's file policy ([`files`]): regular files, the model at most
/// a protobuf message's 2 GiB.
pub(super) fn parse(path: &Path, native: bool) -> Result<InferenceModel> {
    let framework = match native {
        true => gather_jit_tract::onnx_native(),
        false => gather_jit_tract::onnx(),
    };
    let bytes = files::read_whole(path, Cap::PROTOBUF)?;
    let cannot = |e: &dyn std::fmt::Display| {
        Failure::usage(format!(
            "{}: tract cannot read this model: {e:#}",
            path.display()
        ))
    };
    let proto = catch_panic("the ONNX decoder", || {
        tract_onnx::pb::ModelProto::decode(&bytes[..]).map_err(TractError::from)
    })
    .map_err(|e| cannot(&e))?;
    drop(bytes);
    // As tract's `model_for_path`: external data is found next to the model.
    let dir = path.parent().and_then(Path::to_str);
    if let Some(graph) = &proto.graph {
        proto::check_external_data(graph, Path::new(dir.unwrap_or("")))?;
    }
    // gather-jit-tract's loader: tract's parser, after converting the INT4 / UINT4 tables of
    // GatherBlockQuantized nodes, which tract cannot read, to the op's uint8 form.
    catch_panic("tract's parser", || {
        gather_jit_tract::model_for_proto(&framework, proto, dir)
    })
    .map_err(|e| cannot(&e))
}

/// Analyses and optimises the parsed `model` of `path` (its inputs pinned), each of tract's
/// phases under [`catch_panic`].
pub(super) fn analyse(path: &Path, model: InferenceModel, native: bool) -> Result<Loaded> {
    let which = match native {
        true => "tract's own ops",
        false => "gather-jit",
    };
    let cannot = |e: TractError| {
        Failure::usage(format!(
            "{}: tract cannot load this model with {which}: {e:#}",
            path.display()
        ))
    };
    let model = catch_panic("tract's analysis", || model.into_typed()).map_err(cannot)?;
    let model = catch_panic("tract's optimiser", || model.into_optimized()).map_err(cannot)?;
    let listed = |word: &str| -> Vec<NodeReport> {
        (model.nodes().iter())
            .filter(|node| node.op().name().contains(word))
            .map(|node| node_report(&model, node))
            .collect()
    };
    let (gathers, scatters) = (listed("Gather"), listed("Scatter"));
    let plan = catch_panic("tract's into_runnable", || model.into_runnable()).map_err(cannot)?;
    Ok(Loaded {
        plan,
        gathers,
        scatters,
    })
}

/// What the report says of a gather or scatter `node` of `model`.
fn node_report(model: &TypedModel, node: &TypedNode) -> NodeReport {
    let facts = node
        .inputs
        .iter()
        .map(|&outlet| {
            model.outlet_fact(outlet).map_or_else(
                |e| format!("? ({e})"),
                |fact| format!("{:?} {:?}", fact.datum_type, fact.shape),
            )
        })
        .collect();
    let op = match (
        node.op_as::<JitGather>(),
        node.op_as::<GatherBlockQuantized>(),
        node.op_as::<JitScatter>(),
    ) {
        (Some(jit), _, _) => format!("{} (gather-jit: {})", node.op().name(), jit.op),
        (_, Some(q), _) => format!(
            "{} (gather-jit {}: {})",
            node.op().name(),
            match q.engine {
                QuantizedEngine::Jit => "kernel",
                QuantizedEngine::Interpreter => "interpreter",
            },
            node.op().info().unwrap_or_default().join(", ")
        ),
        (_, _, Some(jit)) => format!(
            "{} (gather-jit: {} reduction={})",
            node.op().name(),
            jit.op,
            jit.reduction
        ),
        _ => format!("{} (tract)", node.op().name()),
    };
    (node.name.clone(), op, facts)
}
