//! Reading OpenVINO IR: the Gather, GatherND and GatherElements layers of an XML file, as
//! signatures with their declared output dims (`gather-jit layer`, and `demo`'s seed layers).
//!
//! The file may be a whole model (`<net>` with `<layers>` and `<edges>`) or bare `<layer>`
//! elements as the OpenVINO op specs print them, several in one file without a root element.
//! Before parsing, the text is wrapped in one root element, an XML declaration is blanked out,
//! and tokens in a start tag that are not attributes (the spec's `<layer id="1" type="Gather"
//! ...>`) are blanked out too; byte offsets are kept, so line numbers in messages are the
//! file's own.
//!
//! Gather's axis is its third input (port 2), a constant. It is taken from, in order: a `<data
//! axis="..."/>` attribute (IR v7), a comment `<!-- axis = N -->` inside or right after that
//! port (as the Gather-1 spec writes it), the `Const` layer feeding the port in a whole model
//! (its value read from the `.bin` file beside the `.xml`), and finally `--axis`.
//!
//! `text.rs` makes the file's text parseable and words XML errors in the file's own terms.

mod text;

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use gather_jit::{DType, Flavor, IndexType, Op, Options, Signature};
use roxmltree::{Document, Node, ParsingOptions};

use crate::failure::{Failure, Result};
use crate::files::Input;
use crate::random::XorShift;
use crate::report::{Case, shape_text};
use crate::values::dtype_named;
use text::{prepare, xml_error};

/// What to assume where the file says nothing.
#[derive(Clone, Copy, Debug)]
pub struct Defaults {
    /// Axis of Gather layers without one.
    pub axis: Option<i64>,
    /// Data type of ports without a precision.
    pub dtype: DType,
    /// Index type of ports without a precision.
    pub index_type: IndexType,
}

impl Default for Defaults {
    fn default() -> Defaults {
        Defaults {
            axis: None,
            dtype: DType::F32,
            index_type: IndexType::I64,
        }
    }
}

/// One gather layer read from the file.
#[derive(Clone, Debug)]
pub struct LayerSpec {
    /// E.g. `GatherND-8 (line 3)`.
    pub label: String,
    /// The signature built from type, version, attributes and port dims.
    pub signature: Signature,
    /// The output dims the file declares, if it has an output port.
    pub declared_output: Option<Vec<usize>>,
}

impl LayerSpec {
    /// The layer on random data and random valid indices.
    ///
    /// # Errors
    /// An invalid signature, or no valid index (an empty indexed dim).
    pub fn random_case(&self, rng: &mut XorShift) -> Result<Case> {
        Case::random(self.label.clone(), self.signature.clone(), rng)
    }

    /// Validates the signature and compares the declared output dims with the inferred ones.
    ///
    /// # Errors
    /// The validation error, or the mismatch, naming the layer.
    pub fn check(&self) -> Result<()> {
        let validated = self
            .signature
            .validate()
            .map_err(|e| Failure::from(e).context(&self.label))?;
        match &self.declared_output {
            Some(declared) if declared != validated.output_shape() => Err(Failure::usage(format!(
                "{}: the file declares output dims {} but {} gives {}",
                self.label,
                shape_text(declared),
                self.signature.op,
                shape_text(validated.output_shape())
            ))),
            _ => Ok(()),
        }
    }
}

/// The gather layers of a file and what was assumed while reading it.
pub struct Parsed {
    /// The layers, in file order.
    pub layers: Vec<LayerSpec>,
    /// Things worth telling the user (e.g. a version that was not given).
    pub notes: Vec<String>,
}

/// Reads the gather layers of IR text. `bin` is the path of the model's weights file, from
/// which axis constants are read (only the bytes they occupy).
///
/// # Errors
/// Malformed XML, a gather layer whose type, version, attributes or ports cannot be read, or
/// no memory for a copy of the text.
pub fn parse(text: &str, bin: Option<&Path>, defaults: Option<Defaults>) -> Result<Parsed> {
    let defaults = defaults.unwrap_or_default();
    let mut notes = Vec::new();
    let wrapped = prepare(text, &mut notes)?;
    let options = ParsingOptions {
        allow_dtd: false,
        ..ParsingOptions::default()
    };
    let doc = Document::parse_with_options(&wrapped, options)
        .map_err(|e| Failure::usage(xml_error(&e, text)))?;
    let model = Model::new(&doc, bin);
    let mut layers = Vec::new();
    for node in doc.descendants().filter(|n| n.has_tag_name("layer")) {
        let Some(kind) = node.attribute("type") else {
            continue;
        };
        if !matches!(kind, "Gather" | "GatherND" | "GatherElements") {
            continue;
        }
        let line = doc.text_pos_at(node.range().start).row;
        let layer = read_layer(node, kind, &model, &defaults, &mut notes)
            .map_err(|e| e.context(format!("{kind} layer at line {line}")))?;
        let label = match node.attribute("name") {
            Some(name) => format!("{} '{name}'", layer.0),
            None => format!("{} (line {line})", layer.0),
        };
        layers.push(LayerSpec {
            label,
            signature: layer.1,
            declared_output: layer.2,
        });
    }
    Ok(Parsed { layers, notes })
}

/// The parts of a whole model that gather layers refer to: edges, layers by id, weights.
struct Model<'a, 'input> {
    /// `(to-layer, to-port)` -> `(from-layer, from-port)`.
    edges: HashMap<(&'a str, &'a str), (&'a str, &'a str)>,
    /// Layers by id (the first one, where bare spec layers repeat an id).
    layers: HashMap<&'a str, Node<'a, 'input>>,
    /// The weights file's path.
    bin: Option<&'a Path>,
}

impl<'a, 'input> Model<'a, 'input> {
    fn new(doc: &'a Document<'input>, bin: Option<&'a Path>) -> Model<'a, 'input> {
        let mut edges = HashMap::new();
        let mut layers = HashMap::new();
        for node in doc.descendants() {
            if node.has_tag_name("edge") {
                let attr = |name| node.attribute(name).unwrap_or("");
                edges.insert(
                    (attr("to-layer"), attr("to-port")),
                    (attr("from-layer"), attr("from-port")),
                );
            } else if node.has_tag_name("layer")
                && let Some(id) = node.attribute("id")
            {
                layers.entry(id).or_insert(node);
            }
        }
        Model { edges, layers, bin }
    }

    /// The value of the `Const` layer feeding `port` of `layer`, read from the weights.
    fn const_input(&self, layer: Node, port: Node) -> Result<Option<i64>> {
        let (Some(layer_id), Some(port_id)) = (layer.attribute("id"), port.attribute("id")) else {
            return Ok(None);
        };
        let Some(&(from, _)) = self.edges.get(&(layer_id, port_id)) else {
            return Ok(None);
        };
        let Some(source) = self.layers.get(from) else {
            return Ok(None);
        };
        if source.attribute("type") != Some("Const") {
            return Err(Failure::usage(format!(
                "the axis input comes from layer {from} of type {}, not a Const",
                source.attribute("type").unwrap_or("?")
            )));
        }
        let data = child(*source, "data");
        let attr = |name| data.and_then(|d| d.attribute(name));
        let element = attr("element_type").unwrap_or("i64");
        let size = match element {
            "i64" | "u64" => 8,
            "i32" | "u32" => 4,
            other => {
                return Err(Failure::usage(format!(
                    "the axis Const (layer {from}) has element type {other}, not an integer"
                )));
            }
        };
        let offset: Option<u64> = attr("offset").and_then(|o| o.parse().ok());
        let not_found = || {
            Failure::usage(format!(
                "the axis is Const layer {from}, whose value is in the .bin file beside the .xml, which was not found (or pass --axis)"
            ))
        };
        let (Some(bin), Some(offset)) = (self.bin, offset) else {
            return Err(not_found());
        };
        // Only the constant's bytes are read: a model's weights may be larger than memory.
        let mut input = match Input::open(bin) {
            Ok(input) => input,
            Err(_) if !bin.exists() => return Err(not_found()),
            Err(e) => return Err(e),
        };
        let file_len = input.len();
        let file = input.file();
        if offset.checked_add(size).is_none_or(|end| end > file_len) {
            return Err(Failure::usage(format!(
                "the .bin file is too short for the axis Const (layer {from}) at offset {offset}"
            )));
        }
        let mut word = [0u8; 8];
        file.seek(SeekFrom::Start(offset))
            .and_then(|_| file.read_exact(&mut word[..size as usize]))
            .map_err(|e| Failure::io("read", bin, e))?;
        // IR weights are little-endian.
        let [a, b, c, d, ..] = word;
        Ok(Some(match element {
            "i32" => i32::from_le_bytes([a, b, c, d]).into(),
            "u32" => u32::from_le_bytes([a, b, c, d]).into(),
            // A u64 above i64::MAX reads as a negative axis, which validation rejects.
            _ => i64::from_le_bytes(word),
        }))
    }
}

fn child<'a, 'input>(node: Node<'a, 'input>, tag: &str) -> Option<Node<'a, 'input>> {
    node.children().find(|n| n.has_tag_name(tag))
}

fn ports<'a, 'input>(node: Node<'a, 'input>, tag: &str) -> Vec<Node<'a, 'input>> {
    child(node, tag)
        .map(|n| n.children().filter(|p| p.has_tag_name("port")).collect())
        .unwrap_or_default()
}

/// A layer's display name, signature and declared output dims.
fn read_layer(
    node: Node,
    kind: &str,
    model: &Model,
    defaults: &Defaults,
    notes: &mut Vec<String>,
) -> Result<(String, Signature, Option<Vec<usize>>)> {
    let version = node.attribute("version");
    let data_attrs = child(node, "data");
    let attr = |name: &str| -> Result<Option<i64>> {
        data_attrs
            .and_then(|d| d.attribute(name))
            .map(|v| {
                v.trim().parse::<i64>().map_err(|_| {
                    Failure::usage(format!("attribute {name}=\"{v}\" is not an integer"))
                })
            })
            .transpose()
    };
    let batch_dims = attr("batch_dims")?;
    let flavor = flavor_of(kind, version, batch_dims.is_some(), notes)?;
    let inputs = ports(node, "input");
    if inputs.len() < 2 {
        return Err(Failure::usage(format!(
            "expected at least 2 input ports (data, indices), found {}",
            inputs.len()
        )));
    }
    let data_shape = port_dims(inputs[0])?;
    let indices_shape = port_dims(inputs[1])?;
    let op = match kind {
        "Gather" => {
            let axis = match attr("axis")? {
                Some(axis) => axis,
                None => gather_axis(node, inputs.get(2).copied(), model, defaults)?,
            };
            Op::Gather {
                axis,
                batch_dims: batch_dims.unwrap_or(0),
            }
        }
        "GatherElements" => Op::GatherElements {
            axis: attr("axis")?
                .ok_or_else(|| Failure::usage("GatherElements needs <data axis=\"...\"/>"))?,
        },
        _ => Op::GatherNd {
            batch_dims: batch_dims.unwrap_or(0),
        },
    };
    let dtype = precision(inputs[0])?.unwrap_or(defaults.dtype);
    let index_type = match precision(inputs[1])? {
        Some(t) => IndexType::from_name(t.name()).ok_or_else(|| {
            Failure::usage(format!(
                "the indices port has precision {t}, not an integer type"
            ))
        })?,
        None => defaults.index_type,
    };
    let declared = match ports(node, "output").first() {
        Some(port) => Some(port_dims(*port)?),
        None => None,
    };
    let options = Options {
        flavor,
        dtype,
        index_type,
        policy: None,
    };
    let signature = options.signature(op, &data_shape, &indices_shape);
    Ok((versioned_name(flavor).to_string(), signature, declared))
}

/// The flavor of a layer from its type and `version="opsetN"` (the op version current in
/// opset N). Without a version: Gather-1 (Gather-8 if it has batch_dims), GatherND-8,
/// GatherElements-6, with a note.
fn flavor_of(
    kind: &str,
    version: Option<&str>,
    has_batch_dims: bool,
    notes: &mut Vec<String>,
) -> Result<Flavor> {
    let Some(version) = version else {
        let flavor = match kind {
            "Gather" if has_batch_dims => Flavor::OpenvinoGather8,
            "Gather" => Flavor::OpenvinoGather1,
            "GatherND" => Flavor::OpenvinoGatherNd8,
            _ => Flavor::OpenvinoGatherElements6,
        };
        notes.push(format!(
            "a {kind} layer has no version attribute; read as {}",
            versioned_name(flavor)
        ));
        return Ok(flavor);
    };
    let opset: Option<u32> = version.strip_prefix("opset").and_then(|n| n.parse().ok());
    let flavor = match (kind, opset) {
        ("Gather", Some(1..=6)) => Flavor::OpenvinoGather1,
        ("Gather", Some(7)) => Flavor::OpenvinoGather7,
        ("Gather", Some(8..)) => Flavor::OpenvinoGather8,
        ("GatherND", Some(5..=7)) => Flavor::OpenvinoGatherNd5,
        ("GatherND", Some(8..)) => Flavor::OpenvinoGatherNd8,
        ("GatherElements", Some(6..)) => Flavor::OpenvinoGatherElements6,
        _ => {
            return Err(Failure::usage(format!(
                "version \"{version}\" of {kind} is not known (Gather: opset1 on, GatherND: opset5 on, GatherElements: opset6 on)"
            )));
        }
    };
    Ok(flavor)
}

/// `Gather-8`, `GatherND-5`, ... for an OpenVINO flavor.
fn versioned_name(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::OpenvinoGather1 => "Gather-1",
        Flavor::OpenvinoGather7 => "Gather-7",
        Flavor::OpenvinoGather8 => "Gather-8",
        Flavor::OpenvinoGatherNd5 => "GatherND-5",
        Flavor::OpenvinoGatherNd8 => "GatherND-8",
        Flavor::OpenvinoGatherElements6 => "GatherElements-6",
        other => other.name(),
    }
}

/// Gather's axis from its third input: a comment at the port, the Const feeding it, `--axis`.
fn gather_axis(layer: Node, port: Option<Node>, model: &Model, defaults: &Defaults) -> Result<i64> {
    if let Some(port) = port {
        if let Some(axis) = axis_comment(port) {
            return Ok(axis);
        }
        match model.const_input(layer, port) {
            Ok(Some(axis)) => return Ok(axis),
            Ok(None) => {}
            // An unreadable constant: --axis, if given, stands in for it.
            Err(e) => return defaults.axis.ok_or(e),
        }
    }
    defaults.axis.ok_or_else(|| {
        Failure::usage(
            "the axis (input port 2) is not given: add a comment <!-- axis = N --> after the port, or pass --axis N",
        )
    })
}

/// `N` from a comment `axis = N` (or `axis: N`) inside `port` or right after it, before the
/// next element.
fn axis_comment(port: Node) -> Option<i64> {
    let inside = port.children();
    let after = port.next_siblings().skip(1).take_while(|n| !n.is_element());
    inside
        .chain(after)
        .filter(|n| n.is_comment())
        .find_map(|n| parse_axis_comment(n.text()?))
}

fn parse_axis_comment(text: &str) -> Option<i64> {
    let rest = text.trim().strip_prefix("axis")?.trim_start();
    let rest = rest.strip_prefix(['=', ':'])?.trim();
    let end = rest
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && c == '-')))
        .map_or(rest.len(), |(i, _)| i);
    rest[..end].parse().ok()
}

/// The `<dim>`s of a port (none: a scalar).
fn port_dims(port: Node) -> Result<Vec<usize>> {
    port.children()
        .filter(|n| n.has_tag_name("dim"))
        .map(|dim| {
            let text = dim.text().unwrap_or("").trim();
            text.parse::<usize>().map_err(|_| {
                Failure::usage(format!(
                    "port {} has dim '{text}': only static non-negative dims can be compiled",
                    port.attribute("id").unwrap_or("?")
                ))
            })
        })
        .collect()
}

/// The element type a port's `precision` (or `element_type`) names, if any.
fn precision(port: Node) -> Result<Option<DType>> {
    let Some(text) = port
        .attribute("precision")
        .or_else(|| port.attribute("element_type"))
    else {
        return Ok(None);
    };
    // OpenVINO's names (`FP32`, `I64`, `boolean`) are among those `--dtype` takes.
    dtype_named(text).map(Some).ok_or_else(|| {
        Failure::usage(format!(
            "port {} has precision {text}, which gather-jit does not support",
            port.attribute("id").unwrap_or("?")
        ))
    })
}

/// The path of the weights file beside `xml`.
pub fn bin_path(xml: &Path) -> PathBuf {
    xml.with_extension("bin")
}
#[cfg(test)]
mod tests {
    use super::*;

    const SEEDS: &str = include_str!("../../../examples/seed_layers.xml");

    #[test]
    fn seed_file_has_four_layers_with_their_declared_outputs() {
        let parsed = parse(SEEDS, None, None).unwrap();
        let shapes: Vec<_> = parsed
            .layers
            .iter()
            .map(|l| (l.signature.flavor, l.declared_output.clone().unwrap()))
            .collect();
        assert_eq!(
            shapes,
            vec![
                (Flavor::OpenvinoGatherNd8, vec![25, 125, 15]),
                (Flavor::OpenvinoGatherNd8, vec![30, 2, 3, 35]),
                (Flavor::OpenvinoGatherNd8, vec![1, 64, 64, 1]),
                (Flavor::OpenvinoGather1, vec![6, 15, 4, 20, 28, 10, 24]),
            ]
        );
        assert_eq!(
            parsed.layers[3].signature.op,
            Op::Gather {
                axis: 1,
                batch_dims: 0
            }
        );
        for layer in &parsed.layers {
            layer.check().unwrap();
        }
        assert!(parsed.notes.iter().any(|n| n.contains("ignored '...'")));
    }

    #[test]
    fn axis_comments() {
        assert_eq!(parse_axis_comment("  axis = 1  "), Some(1));
        assert_eq!(parse_axis_comment("axis: -2"), Some(-2));
        assert_eq!(parse_axis_comment("embedded dimension"), None);
    }

    #[test]
    fn versions_map_to_flavors() {
        let mut notes = Vec::new();
        let f = |kind, v| flavor_of(kind, Some(v), false, &mut Vec::new());
        assert_eq!(f("Gather", "opset1").unwrap(), Flavor::OpenvinoGather1);
        assert_eq!(f("Gather", "opset7").unwrap(), Flavor::OpenvinoGather7);
        assert_eq!(f("Gather", "opset13").unwrap(), Flavor::OpenvinoGather8);
        assert_eq!(f("GatherND", "opset5").unwrap(), Flavor::OpenvinoGatherNd5);
        assert!(f("GatherND", "opset3").is_err());
        assert!(f("Gather", "extension").is_err());
        let nd = flavor_of("GatherND", None, false, &mut notes).unwrap();
        assert_eq!(nd, Flavor::OpenvinoGatherNd8);
        assert_eq!(notes.len(), 1);
        assert_eq!(bin_path(Path::new("m/model.xml")), Path::new("m/model.bin"));
    }
}
