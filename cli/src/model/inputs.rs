//! The inputs of `gather-jit model`: files given with `--input NAME=FILE` and `--inputs DIR`,
//! checked against the model's declared inputs, and random tensors for the rest, of a shape
//! given with `--input-shape NAME=SHAPE` or else the declared one (`--dim`, the files' sizes
//! and the shapes given resolving symbolic dims).
//!
//! The inputs pin the model before tract analyses it, as `tract -i` does: each input given
//! becomes a fact of its type and concrete shape, and so does each random input whose dims are
//! all known, so that tract analyses the model at these shapes rather than with symbols it
//! may not be able to unify.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use gather_jit_tract::check_allocation;
use serde_json::{Value, json};
use tract_onnx::prelude::*;
use tract_onnx::tract_hir::infer::{DimFact, Factoid, ShapeFactoid};

use super::ModelArgs;
use super::datum::{describe, type_name};
use super::tensors::{self, Names, Role};
use crate::failure::{Failure, Result};
use crate::random::XorShift;
use crate::values::parse_shape;

/// `NAME=VALUE` split at its first `=`.
pub(super) fn pair<'a>(text: &'a str, flag: &str) -> Result<(&'a str, &'a str)> {
    text.split_once('=')
        .filter(|(name, _)| !name.is_empty())
        .ok_or_else(|| Failure::usage(format!("--{flag} {text}: expected NAME=VALUE")))
}

/// `--input NAME=FILE` split into the index of input NAME and FILE. Of the ways to split
/// `text` at an `=`, the one whose NAME is an input of the model is taken (the longest such
/// NAME if several are), so that both input names (`a=b`) and paths (`x=1/ids.npy`) may hold
/// an `=`.
fn split_input<'a>(text: &'a str, names: &[String]) -> Result<(usize, &'a str)> {
    let mut found = None;
    for (at, _) in text.match_indices('=') {
        if let Some(i) = names.iter().position(|n| *n == text[..at]) {
            found = Some((i, &text[at + 1..]));
        }
    }
    found.ok_or_else(|| match text.split_once('=') {
        Some((name, _)) if !name.is_empty() => Failure::usage(format!(
            "--input {text}: the model has no input {name} (its inputs: {})",
            names.join(", ")
        )),
        _ => Failure::usage(format!("--input {text}: expected NAME=FILE")),
    })
}

/// `--input-shape NAME=SHAPE` split into the index of input NAME and the shape. It splits at
/// the last `=`, since a shape holds none and an input name may.
fn split_input_shape(text: &str, names: &[String]) -> Result<(usize, Vec<usize>)> {
    let (name, shape) = text
        .rsplit_once('=')
        .filter(|(name, _)| !name.is_empty())
        .ok_or_else(|| Failure::usage(format!("--input-shape {text}: expected NAME=SHAPE")))?;
    let i = names.iter().position(|n| n == name).ok_or_else(|| {
        Failure::usage(format!(
            "--input-shape {text}: the model has no input {name} (its inputs: {})",
            names.join(", ")
        ))
    })?;
    let shape =
        parse_shape(shape).map_err(|e| Failure::usage(format!("--input-shape {text}: {e}")))?;
    Ok((i, shape.0))
}

/// A tensor given for an input, and the file it came from.
struct Given {
    tensor: Tensor,
    /// The file as messages name it.
    at: String,
    /// The file read.
    file: PathBuf,
}

/// One input of the model.
struct Input {
    name: String,
    /// Its fact as the model declares it.
    declared: InferenceFact,
    /// The tensor given for it (`None`: random).
    given: Option<Given>,
    /// The shape of its random values, and the `--input-shape` that gave it (`None`: the
    /// declared shape).
    shape: Option<(Vec<usize>, String)>,
    /// The fact that pins it before analysis (`None`: the declaration stays).
    pin: Option<InferenceFact>,
}

/// The value a symbol is bound to, and what bound it (`--dim N=4`, or an input's file and dim).
struct Binding {
    value: i64,
    by: String,
}

/// The model's inputs: the tensors given, what the symbols are bound to, and the facts that
/// pin the model.
pub(super) struct Inputs {
    /// The model's input names, in order.
    names: Vec<String>,
    inputs: Vec<Input>,
    /// The symbols' values, for the facts the model declares and for random inputs whose
    /// facts still hold symbols after analysis.
    values: SymbolValues,
    /// Whether any symbol has a value.
    bound: bool,
}

/// `type [d0, d1]` of a declared fact: `?` for what it leaves open, `..` for an unknown rank.
fn declared(fact: &InferenceFact) -> String {
    let dt = (fact.datum_type.concretize()).map_or("?".to_string(), type_name);
    let mut dims: Vec<String> = (fact.shape.dims())
        .map(|d| d.concretize().map_or("?".to_string(), |d| d.to_string()))
        .collect();
    if fact.shape.is_open() {
        dims.push("..".into());
    }
    format!("{dt} [{}]", dims.join(", "))
}

/// Binds `symbol` to `value` for `by`; an error if another binding gave it another value.
fn bind(
    bindings: &mut BTreeMap<String, Binding>,
    symbol: String,
    value: i64,
    by: String,
) -> Result<()> {
    match bindings.get(&symbol) {
        Some(earlier) if earlier.value != value => Err(Failure::usage(format!(
            "symbol {symbol}: {} makes it {}, {by} makes it {value}",
            earlier.by, earlier.value
        ))),
        Some(_) => Ok(()),
        None => {
            bindings.insert(symbol, Binding { value, by });
            Ok(())
        }
    }
}

impl Inputs {
    /// Reads the inputs given (`--inputs`, then `--input`, which wins for the same input),
    /// checks each against its declaration, binds the symbols (`--dim`, then the files' sizes)
    /// and works out the fact each input pins. Every error is one line: a file that cannot be
    /// read, a name the model lacks, a type, rank or fixed dim that differs from the
    /// declaration, a symbol bound to two sizes, a random input with a symbol left.
    pub(super) fn new(args: &ModelArgs, model: &InferenceModel) -> Result<Inputs> {
        let outlets = model.input_outlets().map_err(Failure::usage)?;
        let names: Vec<String> = (outlets.iter())
            .map(|outlet| model.node(outlet.node).name.clone())
            .collect();
        let mut inputs = Vec::new();
        for (i, name) in names.iter().enumerate() {
            inputs.push(Input {
                name: name.clone(),
                declared: model.input_fact(i).map_err(Failure::usage)?.clone(),
                given: None,
                shape: None,
                pin: None,
            });
        }
        if let Some(dir) = &args.inputs_dir {
            let found = tensors::read_set(dir, Role::Input)?;
            let outlets = model.output_outlets().map_err(Failure::usage)?;
            let outputs =
                super::output_names(outlets, |o| model.outlet_label(o).map(str::to_string));
            let (mine, theirs) = (Names::new(&names), Names::new(&outputs));
            let slots = tensors::match_set(found, &mine, &theirs, Role::Input)?;
            for (input, found) in inputs.iter_mut().zip(slots) {
                input.given = found.map(|f| Given {
                    tensor: f.tensor,
                    at: f.at,
                    file: f.file,
                });
            }
        }
        let mut explicit = vec![false; names.len()];
        for text in &args.inputs {
            let (i, file) = split_input(text, &names)?;
            if explicit[i] {
                return Err(Failure::usage(format!("--input {}: given twice", names[i])));
            }
            explicit[i] = true;
            let at = file.to_string();
            let (tensor, _, file) = tensors::read_tensor(Path::new(file))?;
            inputs[i].given = Some(Given { tensor, at, file });
        }
        let mut shaped = vec![false; names.len()];
        for text in &args.input_shapes {
            let (i, shape) = split_input_shape(text, &names)?;
            if shaped[i] {
                return Err(Failure::usage(format!(
                    "--input-shape {}: given twice",
                    names[i]
                )));
            }
            shaped[i] = true;
            if explicit[i] {
                return Err(Failure::usage(format!(
                    "--input-shape {text}: input {} is given a file too (--input {}=...); \
                     give one or the other",
                    names[i], names[i]
                )));
            }
            // As --input does, the flag wins over a file of --inputs.
            inputs[i].given = None;
            inputs[i].shape = Some((shape, text.clone()));
        }
        let mut bindings = BTreeMap::new();
        for text in &args.dims {
            let (name, value) = pair(text, "dim")?;
            // A negative value would reach tract's `to_usize`, which casts it to a huge one.
            let value: i64 = value
                .parse()
                .ok()
                .filter(|v: &i64| *v >= 0)
                .ok_or_else(|| {
                    Failure::usage(format!(
                        "--dim {text}: {value} is not a dim (a number from 0 to {})",
                        i64::MAX
                    ))
                })?;
            // A name the model does not have would fix nothing: say so rather than ignore it.
            if model.symbols.get(name).is_none() {
                let mut known: Vec<String> = (model.symbols.all_symbols().iter())
                    .map(|s| s.to_string())
                    .collect();
                known.sort();
                let known = match known.is_empty() {
                    true => "it has none".to_string(),
                    false => format!("its symbols: {}", known.join(", ")),
                };
                return Err(Failure::usage(format!(
                    "--dim {text}: the model has no symbolic dim {name} ({known})"
                )));
            }
            bind(
                &mut bindings,
                name.to_string(),
                value,
                format!("--dim {text}"),
            )?;
        }
        // Dims declared as expressions of symbols (`2*N`), checked once every symbol is bound.
        let mut later = Vec::new();
        for (i, input) in inputs.iter().enumerate() {
            let dims = match (&input.given, &input.shape) {
                (Some(given), _) => check(input, given, &mut bindings)?,
                (None, Some((shape, text))) => {
                    let by = |k| format!("--input-shape {text} (dim {k})");
                    check_dims(input, shape, &by, &mut bindings)?
                }
                (None, None) => Vec::new(),
            };
            later.extend(dims.into_iter().map(|(dim, n)| (i, dim, n)));
        }
        let mut values = SymbolValues::default();
        for (name, binding) in &bindings {
            if let Some(symbol) = model.symbols.get(name) {
                values.set(&symbol, binding.value);
            }
        }
        for (i, dim, n) in later {
            let input = &inputs[i];
            if dim.eval(&values).to_i64().is_ok_and(|v| v != n) {
                return Err(mismatch(input));
            }
        }
        for input in &mut inputs {
            input.pin = match (&input.given, &input.shape) {
                (Some(given), _) => Some(InferenceFact::dt_shape(
                    given.tensor.datum_type(),
                    given.tensor.shape(),
                )),
                (None, Some((shape, _))) => Some(shaped_pin(&input.name, &input.declared, shape)?),
                (None, None) => random_pin(&input.name, &input.declared, &values)?,
            };
        }
        Ok(Inputs {
            names,
            inputs,
            values,
            bound: !bindings.is_empty(),
        })
    }

    /// Whether any input has a fact to pin.
    pub(super) fn pins(&self) -> bool {
        self.inputs.iter().any(|input| input.pin.is_some())
    }

    /// The model's input names, in order.
    pub(super) fn names(&self) -> &[String] {
        &self.names
    }

    /// Sets each input's pinned fact on `model`, before tract analyses it, and the symbols'
    /// values in every other fact the model declares (its outputs' and ONNX's `value_info`),
    /// which would otherwise keep a symbol that tract cannot unify with the size an input now
    /// has (`Impossible to unify Sym(batch) with Val(1)`). Facts inside subgraphs (`If`,
    /// `Loop`, `Scan` bodies) are left as they are.
    pub(super) fn pin(&self, model: &mut InferenceModel) -> Result<()> {
        for (i, input) in self.inputs.iter().enumerate() {
            if let Some(fact) = &input.pin {
                model
                    .set_input_fact(i, fact.clone())
                    .map_err(|e| Failure::usage(format!("input '{}': {e:#}", input.name)))?;
            }
        }
        if self.bound {
            for node in model.nodes_mut() {
                for output in node.outputs.iter_mut() {
                    output.fact.shape = substitute(&output.fact.shape, &self.values);
                }
            }
        }
        Ok(())
    }

    /// The files the inputs were read from, as `(role, path)` for `-o`'s check that no output
    /// replaces one.
    pub(super) fn files(&self) -> Vec<(String, &Path)> {
        (self.inputs.iter())
            .filter_map(|input| {
                let given = input.given.as_ref()?;
                Some((format!("{} input", input.name), given.file.as_path()))
            })
            .collect()
    }

    /// The tensors of the model's inputs, in order: each given one, and random ones for the
    /// rest (seeded by `seed` and the input's position), of the shape `--input-shape` gave or
    /// else the analysed model's; and for the report, each input's name, type, shape and file
    /// (`null`: random).
    pub(super) fn tensors(
        self,
        model: &TypedModel,
        seed: u64,
    ) -> Result<(TVec<TValue>, Vec<Value>)> {
        let mut tensors = TVec::new();
        let mut report = Vec::new();
        for (i, input) in self.inputs.into_iter().enumerate() {
            let seed = seed.wrapping_add(i as u64);
            let (tensor, file) = match (input.given, &input.shape) {
                (Some(given), _) => (given.tensor, Some(given.at)),
                (None, Some((shape, _))) => {
                    // The shape as given even if tract could not analyse the model at it.
                    let dt = model.input_fact(i).map_err(Failure::usage)?.datum_type;
                    (random_tensor(&input.name, dt, shape, seed)?, None)
                }
                (None, None) => {
                    let fact = model.input_fact(i).map_err(Failure::usage)?;
                    (random_input(&input.name, fact, &self.values, seed)?, None)
                }
            };
            report.push(json!({
                "name": input.name,
                "shape": tensor.shape(),
                "type": format!("{:?}", tensor.datum_type()),
                "file": file,
            }));
            tensors.push(tensor.into_tvalue());
        }
        Ok((tensors, report))
    }
}

/// `shape` with each dim that is a symbol with a value in `values` set to it; a dim that is an
/// expression of such a symbol (`floor(height/2 - 1/2) + 1`) becomes unknown, for tract to
/// infer from the ops that compute it: their shapes are the ones the run has, and the file's
/// expression could only disagree with them (tract leaves the `dim_param`s it cannot translate,
/// such as sympy's, unknown anyway).
fn substitute(shape: &ShapeFactoid, values: &SymbolValues) -> ShapeFactoid {
    let dims = (shape.dims())
        .map(|dim| match dim.concretize() {
            Some(TDim::Sym(symbol)) => DimFact::from(TDim::Sym(symbol).eval(values)),
            Some(dim) if dim.symbols().iter().any(|s| values.get(s).is_some()) => {
                DimFact::default()
            }
            Some(dim) => DimFact::from(dim),
            None => DimFact::default(),
        })
        .collect();
    match shape.is_open() {
        true => ShapeFactoid::open(dims),
        false => ShapeFactoid::closed(dims),
    }
}

/// The error of a file or a shape given for an input that does not fit its declaration.
fn mismatch(input: &Input) -> Failure {
    let declared = declared(&input.declared);
    Failure::usage(match (&input.given, &input.shape) {
        (Some(given), _) => format!(
            "input '{}': file {} is {}, the model declares {declared}",
            input.name,
            given.at,
            describe(&given.tensor),
        ),
        (None, Some((shape, text))) => format!(
            "--input-shape {text}: a shape {shape:?} does not fit input '{}', which the model \
             declares {declared}",
            input.name
        ),
        (None, None) => format!("input '{}': the model declares {declared}", input.name),
    })
}

/// Checks `given` against its input's declaration: its type, then its shape as
/// [`check_dims`] does.
fn check(
    input: &Input,
    given: &Given,
    bindings: &mut BTreeMap<String, Binding>,
) -> Result<Vec<(TDim, i64)>> {
    let tensor = &given.tensor;
    if (input.declared.datum_type.concretize()).is_some_and(|dt| dt != tensor.datum_type()) {
        return Err(mismatch(input));
    }
    let by = |k| format!("input '{}' ({}, dim {k})", input.name, given.at);
    check_dims(input, tensor.shape(), &by, bindings)
}

/// Checks `shape` (a file's, or one `--input-shape` gave) against its input's declaration: its
/// rank, and each dim the declaration fixes; binds each symbol the declaration names to the
/// size there, for `by(dim index)`. Returns the dims declared as expressions (`(dim, size)`),
/// to check once every symbol is bound.
fn check_dims(
    input: &Input,
    shape: &[usize],
    by: &dyn Fn(usize) -> String,
    bindings: &mut BTreeMap<String, Binding>,
) -> Result<Vec<(TDim, i64)>> {
    let fact = &input.declared;
    let rank = fact.shape.dims().count();
    let fits = match fact.shape.is_open() {
        true => shape.len() >= rank,
        false => shape.len() == rank,
    };
    if !fits {
        return Err(mismatch(input));
    }
    let mut later = Vec::new();
    for (k, (dim, &n)) in fact.shape.dims().zip(shape).enumerate() {
        let Some(dim) = dim.concretize() else {
            continue;
        };
        // A size beyond i64 fits no declared dim; its allocation is refused later.
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        match (dim.to_i64(), &dim) {
            (Ok(v), _) if v != n => return Err(mismatch(input)),
            (Ok(_), _) => {}
            (Err(_), TDim::Sym(symbol)) => bind(bindings, symbol.to_string(), n, by(k))?,
            (Err(_), _) => later.push((dim.clone(), n)),
        }
    }
    Ok(later)
}

/// The fact that pins a random input: its declaration with every dim evaluated with the bound
/// symbols, checked to fit in memory; `None` if the declaration leaves its rank or a dim
/// unknown (tract's analysis may find them). A dim whose symbols are not all bound is an
/// error: a random input cannot be made of it.
fn random_pin(
    name: &str,
    fact: &InferenceFact,
    values: &SymbolValues,
) -> Result<Option<InferenceFact>> {
    if fact.shape.is_open() {
        return Ok(None);
    }
    let mut shape = Vec::new();
    for dim in fact.shape.dims() {
        let Some(dim) = dim.concretize() else {
            return Ok(None);
        };
        shape.push(concrete(name, &dim, values)?);
    }
    if let Some(dt) = fact.datum_type.concretize() {
        let cannot = |e: TractError| Failure::usage(format!("input {name}: {e}"));
        check_allocation(random_base(name, dt)?, &shape).map_err(cannot)?;
        check_allocation(dt, &shape).map_err(cannot)?;
    }
    Ok(Some(fact.clone().with_shape(shape)))
}

/// The fact that pins a random input of the `shape` `--input-shape` gave (checked against the
/// declaration before): the declared type, that shape, checked to fit in memory.
fn shaped_pin(name: &str, fact: &InferenceFact, shape: &[usize]) -> Result<InferenceFact> {
    if let Some(dt) = fact.datum_type.concretize() {
        let cannot = |e: TractError| Failure::usage(format!("input {name}: {e}"));
        check_allocation(random_base(name, dt)?, shape).map_err(cannot)?;
        check_allocation(dt, shape).map_err(cannot)?;
    }
    Ok(fact.clone().with_shape(shape.to_vec()))
}

/// The size of `dim` of input `name` with the symbols' `values`; an error if a symbol is not
/// bound or the size is negative.
fn concrete(name: &str, dim: &TDim, values: &SymbolValues) -> Result<usize> {
    let value = dim.eval(values).to_i64().map_err(|_| {
        let mut free: Vec<String> = dim.symbols().iter().map(|s| s.to_string()).collect();
        free.sort();
        let symbol = free.first().cloned().unwrap_or_else(|| dim.to_string());
        Failure::usage(format!(
            "input {name}: dim {dim} is symbolic: give --dim {symbol}=N or --input {name}=FILE"
        ))
    })?;
    usize::try_from(value).map_err(|_| {
        Failure::usage(format!(
            "input {name}: dim {dim} is {value}, a negative size"
        ))
    })
}

/// The type random values of `dt` are drawn in: f32 for floats, i64 for integers and bools.
fn random_base(name: &str, dt: DatumType) -> Result<DatumType> {
    if dt.is_float() {
        Ok(DatumType::F32)
    } else if dt.is_integer() || dt == DatumType::Bool {
        Ok(DatumType::I64)
    } else {
        Err(Failure::usage(format!(
            "input {name}: cannot make random {dt:?} values: give --input {name}=FILE"
        )))
    }
}

/// A random tensor of the declared shape (symbols resolved from `values`) and type: floats
/// drawn as f32 in [-1, 1) and integers (bools too) as i64 0 or 1, then cast to the declared
/// type. Every tensor is allocated only after [`check_allocation`] says it fits, so that a huge
/// declared shape is an error.
fn random_input(name: &str, fact: &TypedFact, values: &SymbolValues, seed: u64) -> Result<Tensor> {
    let mut shape = Vec::new();
    for dim in fact.shape.iter() {
        shape.push(concrete(name, dim, values)?);
    }
    random_tensor(name, fact.datum_type, &shape, seed)
}

/// A random tensor of `shape` and type `dt`, drawn as [`random_input`] says.
fn random_tensor(name: &str, dt: DatumType, shape: &[usize], seed: u64) -> Result<Tensor> {
    let base = random_base(name, dt)?;
    let cannot = |e: TractError| Failure::usage(format!("input {name}: {e}"));
    check_allocation(base, shape).map_err(cannot)?;
    let mut tensor = Tensor::zero_dt(base, shape).map_err(cannot)?;
    let mut rng = XorShift::new(seed);
    let mut values = tensor.try_as_plain_ram_mut().map_err(cannot)?;
    if base == DatumType::F32 {
        for value in values.as_slice_mut::<f32>().map_err(cannot)? {
            *value = rng.below(2000) as f32 / 1000.0 - 1.0;
        }
    } else {
        for value in values.as_slice_mut::<i64>().map_err(cannot)? {
            *value = rng.below(2) as i64;
        }
    }
    if dt == base {
        return Ok(tensor);
    }
    check_allocation(dt, shape).map_err(cannot)?;
    let cast = tensor.cast_to_dt(dt).map_err(cannot)?;
    Ok(cast.into_owned())
}
