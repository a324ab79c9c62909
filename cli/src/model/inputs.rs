//! The inputs of `gather-jit model`: `.npy` files given with `--input NAME=FILE`, checked
//! against the model's declared facts, and random tensors for the rest (`--dim` resolving
//! symbolic dims).

use std::path::Path;

use gather_jit_tract::{check_allocation, datum_of};
use tract_onnx::prelude::*;
use tract_onnx::tract_hir::internal::DimLike;

use super::ModelArgs;
use crate::failure::{Failure, Result};
use crate::npz;
use crate::random::XorShift;

/// `NAME=VALUE` split at its first `=`.
pub(super) fn pair<'a>(text: &'a str, flag: &str) -> Result<(&'a str, &'a str)> {
    text.split_once('=')
        .filter(|(name, _)| !name.is_empty())
        .ok_or_else(|| Failure::usage(format!("--{flag} {text}: expected NAME=VALUE")))
}

/// The model's inputs: the files given, random tensors for the rest.
pub(super) fn inputs(args: &ModelArgs, model: &TypedModel) -> Result<TVec<TValue>> {
    let mut given: Vec<(&str, &str)> = Vec::new();
    for text in &args.inputs {
        given.push(pair(text, "input")?);
    }
    let mut symbols = SymbolValues::default();
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
        let Some(symbol) = model.symbols.get(name) else {
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
        };
        symbols.set(&symbol, value);
    }
    let names: Vec<String> = (model.input_outlets().map_err(Failure::usage)?.iter())
        .map(|outlet| model.node(outlet.node).name.clone())
        .collect();
    if let Some((name, _)) = given
        .iter()
        .find(|(name, _)| !names.iter().any(|n| n == name))
    {
        return Err(Failure::usage(format!(
            "--input {name}: the model has no input {name} (its inputs: {})",
            names.join(", ")
        )));
    }
    let mut tensors = TVec::new();
    for (i, name) in names.iter().enumerate() {
        let fact = model.input_fact(i).map_err(Failure::usage)?;
        let tensor = match given.iter().find(|(n, _)| n == name) {
            Some((_, file)) => read_input(name, Path::new(file), fact)?,
            None => random_input(name, fact, &symbols, args.seed.wrapping_add(i as u64))?,
        };
        tensors.push(tensor.into_tvalue());
    }
    Ok(tensors)
}

/// Reads input `name` from a `.npy` file and checks it against the declared fact.
fn read_input(name: &str, path: &Path, fact: &TypedFact) -> Result<Tensor> {
    let array = npz::read_array(&npz::ArrayPath::parse(path))?;
    let datum =
        array.element.dtype().and_then(datum_of).ok_or_else(|| {
            Failure::usage(format!("{}: unsupported element type", path.display()))
        })?;
    if datum != fact.datum_type {
        return Err(Failure::usage(format!(
            "input {name}: {} holds {datum:?}, the model takes {:?}",
            path.display(),
            fact.datum_type
        )));
    }
    let fits = array.shape.len() == fact.rank()
        && (fact.shape.iter().zip(&array.shape))
            .all(|(dim, &n)| dim.to_usize().map_or(true, |d| d == n));
    if !fits {
        return Err(Failure::usage(format!(
            "input {name}: {} has shape {:?}, the model takes {:?}",
            path.display(),
            array.shape,
            fact.shape
        )));
    }
    // tract's tensors allocate infallibly (a refusal panics): ask first.
    check_allocation(datum, &array.shape)
        .map_err(|e| Failure::usage(format!("input {name}: {e}")))?;
    // SAFETY: `datum` is a plain-data type and `bytes` holds the shape's elements of it,
    // native-endian (as `npy::parse` returns them).
    unsafe { Tensor::from_raw_dt(datum, &array.shape, &array.bytes) }.map_err(Failure::usage)
}

/// A random tensor of the declared shape (symbols resolved from `--dim`) and type: floats
/// drawn as f32 and integers (bools too) as i64, then cast to the declared type. Every tensor
/// is allocated only after [`check_allocation`] says it fits, so that a huge declared shape is
/// an error.
fn random_input(name: &str, fact: &TypedFact, symbols: &SymbolValues, seed: u64) -> Result<Tensor> {
    let mut shape = Vec::new();
    for dim in fact.shape.iter() {
        let value = dim.eval(symbols).to_i64().map_err(|_| {
            Failure::usage(format!(
                "input {name}: dim {dim} is symbolic: give --dim {dim}=N or --input {name}=FILE.npy"
            ))
        })?;
        let value = usize::try_from(value).map_err(|_| {
            Failure::usage(format!(
                "input {name}: dim {dim} is {value}, a negative size"
            ))
        })?;
        shape.push(value);
    }
    let dt = fact.datum_type;
    let base = if dt.is_float() {
        DatumType::F32
    } else if dt.is_integer() || dt == DatumType::Bool {
        DatumType::I64
    } else {
        return Err(Failure::usage(format!(
            "input {name}: cannot make random {dt:?} values: give --input {name}=FILE.npy"
        )));
    };
    let cannot = |e: TractError| Failure::usage(format!("input {name}: {e}"));
    check_allocation(base, &shape).map_err(cannot)?;
    let mut tensor = Tensor::zero_dt(base, &shape).map_err(cannot)?;
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
    check_allocation(dt, &shape).map_err(cannot)?;
    let cast = tensor.cast_to_dt(dt).map_err(cannot)?;
    Ok(cast.into_owned())
}
