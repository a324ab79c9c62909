//! Tensors from files for `gather-jit model`: `.npy` files, arrays of `.npz` archives, ONNX
//! `TensorProto` files (`.pb`, as ONNX's test data sets hold them), and sets of them (a
//! directory or an `.npz` archive, for `--inputs` and `--assert-outputs`) matched to the
//! model's inputs or outputs.
//!
//! `.pb` files are decoded by `proto.rs`, with tract-onnx's protobuf types; the conversion to
//! a tensor is written there rather than taken from `tract_onnx::tensor::load_tensor`, which
//! panics on an unknown data type, a negative dim or raw data of the wrong length, and reads
//! `uint32` and `uint64` values from other fields than the ONNX standard says.

use std::path::{Path, PathBuf};

use gather_jit_tract::{check_allocation, datum_of};
use tract_onnx::prelude::*;

use super::proto::read_pb;
use crate::failure::{Failure, Result};
use crate::npy::Array;
use crate::npz;

/// A tensor read from a file, and where it came from.
pub(super) struct Found {
    /// The file (or `FILE.npz:ARRAY`) as messages name it.
    pub at: String,
    /// The file read, for `-o`'s check that no output replaces it.
    pub file: PathBuf,
    /// How it is matched to an input or output of the model.
    pub key: Key,
    /// The tensor.
    pub tensor: Tensor,
}

/// How a file of a set names the input or output it is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Key {
    /// The name a `TensorProto` carries.
    Named(String),
    /// `input_N.pb` or `output_N.pb` whose tensor carries no name: the Nth.
    Index(usize),
    /// `NAME.npy` in a directory or array `NAME` of an `.npz` archive: the input or output
    /// called NAME, or the one that `-o` would write to `NAME.npy`.
    Stem(String),
}

/// Which files of a set are read: `input_N.pb` for the model's inputs, `output_N.pb` for its
/// outputs (the other kind is skipped, as both share ONNX's `test_data_set_N` directories).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
    Input,
    Output,
}

impl Role {
    /// `input` or `output`.
    pub fn word(self) -> &'static str {
        match self {
            Role::Input => "input",
            Role::Output => "output",
        }
    }

    /// The flag that reads a set of this role's files.
    fn flag(self) -> &'static str {
        match self {
            Role::Input => "--inputs",
            Role::Output => "--assert-outputs",
        }
    }
}

/// Whether `path` names an ONNX `TensorProto` file (by its extension, `.pb`).
fn is_pb(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("pb"))
}

/// Reads the tensor in `path`: a `TensorProto` (`.pb`), an `.npy` file or one array of an
/// `.npz` archive (`FILE.npz:ARRAY`, or the archive's only array). Returns it with the name a
/// `TensorProto` carries (if any) and the file read.
pub(super) fn read_tensor(path: &Path) -> Result<(Tensor, Option<String>, PathBuf)> {
    if is_pb(path) {
        let (tensor, name) = read_pb(path)?;
        return Ok((tensor, name, path.to_path_buf()));
    }
    let array_path = npz::ArrayPath::parse(path);
    let array = npz::read_array(&array_path)?;
    let tensor = array_tensor(array, &array_path.to_string())?;
    Ok((tensor, None, array_path.file))
}

/// The tensor of an `.npy` array; `at` names it in errors. Bools must be 0 or 1, as numpy
/// writes them: any other byte is no valid `bool`.
pub(super) fn array_tensor(mut array: Array, at: &str) -> Result<Tensor> {
    let datum = (array.element.dtype())
        .and_then(datum_of)
        .ok_or_else(|| Failure::usage(format!("{at}: unsupported element type")))?;
    if datum == DatumType::Bool
        && let Some(i) = array.bytes.iter().position(|&b| b > 1)
    {
        return Err(Failure::usage(format!(
            "{at}: bool element {i} is {}, not 0 or 1",
            array.bytes[i]
        )));
    }
    // tract's tensors allocate infallibly (a refusal panics): ask first.
    check_allocation(datum, &array.shape).map_err(|e| Failure::usage(format!("{at}: {e}")))?;
    let shape = std::mem::take(&mut array.shape);
    // SAFETY: `datum` is a plain-data type whose every bit pattern is valid (bools checked to
    // be 0 or 1 above), and `bytes` holds the shape's elements of it, native-endian, as
    // `npy::parse` returns them (its length checked against the shape there).
    unsafe { Tensor::from_raw_dt(datum, &shape, &array.bytes) }.map_err(Failure::usage)
}

/// The tensor files of a set: the files of directory `path` (sorted by name), or the arrays of
/// the `.npz` archive `path`. A directory's `input_N.pb` (for `Role::Input`, `output_N.pb` for
/// `Role::Output`) are matched by the name their tensor carries, else by N; `NAME.npy` by
/// NAME; files of the other role's pattern are skipped, and so are hidden files; any other file
/// is an error, so that a misnamed file is not silently left out.
pub(super) fn read_set(path: &Path, role: Role) -> Result<Vec<Found>> {
    let flag = role.flag();
    if npz::is_npz(path) && !path.is_dir() {
        let mut archive = npz::Archive::open(path)?;
        let mut found = Vec::new();
        for name in archive.names() {
            let at = format!("{}:{name}", path.display());
            let tensor = array_tensor(archive.read(&name)?, &at)?;
            found.push(Found {
                at,
                file: path.to_path_buf(),
                key: Key::Stem(name),
                tensor,
            });
        }
        return Ok(found);
    }
    let entries = std::fs::read_dir(path).map_err(|e| {
        Failure::usage(format!(
            "{flag} {}: not a directory or an .npz archive ({e})",
            path.display()
        ))
    })?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Failure::io("read", path, e))?;
        files.push(entry.path());
    }
    files.sort();
    let (mine, other) = match role {
        Role::Input => ("input_", "output_"),
        Role::Output => ("output_", "input_"),
    };
    let mut found = Vec::new();
    for file in files {
        let at = file.display().to_string();
        let name = file.file_name().map(|n| n.to_string_lossy().into_owned());
        let name = name.unwrap_or_default();
        let numbered = |prefix: &str| -> Option<usize> {
            let digits = name.strip_prefix(prefix)?.strip_suffix(".pb")?;
            digits.bytes().all(|b| b.is_ascii_digit()).then_some(())?;
            digits.parse().ok()
        };
        if name.starts_with('.') || numbered(other).is_some() {
            continue;
        }
        if let Some(n) = numbered(mine) {
            let (tensor, carried) = read_pb(&file)?;
            let key = carried.map_or(Key::Index(n), Key::Named);
            found.push(Found {
                at,
                file,
                key,
                tensor,
            });
        } else if let Some(stem) = name.strip_suffix(".npy") {
            let tensor = array_tensor(npz::read_npy(&file)?, &at)?;
            found.push(Found {
                at,
                key: Key::Stem(stem.to_string()),
                file,
                tensor,
            });
        } else {
            return Err(Failure::usage(format!(
                "{flag} {}: {name} is not a file it reads ({mine}N.pb or NAME.npy; {other}N.pb and hidden files are skipped)",
                path.display()
            )));
        }
    }
    Ok(found)
}

/// The model's inputs or outputs (the kind a set is matched to), by name and by the file name
/// `-o` would give them.
pub(super) struct Names<'a> {
    pub names: &'a [String],
    pub files: Vec<String>,
}

impl<'a> Names<'a> {
    /// `names` with their file names.
    pub fn new(names: &'a [String]) -> Names<'a> {
        Names {
            names,
            files: super::outputs::file_names(names),
        }
    }

    /// The position of the one that `NAME.npy` (`stem` NAME) is for: named NAME, or written to
    /// `NAME.npy` by `-o`.
    fn of_stem(&self, stem: &str) -> Option<usize> {
        (self.names.iter().position(|n| n == stem))
            .or_else(|| self.files.iter().position(|f| *f == format!("{stem}.npy")))
    }
}

/// Matches the files of a set to the model's inputs or outputs (`mine`): the slot of each gets
/// its file. A file that names none of them is an error, unless it is a `NAME.npy` of the other
/// kind (`theirs`), which is skipped as `output_N.pb` files are, so that one directory can hold
/// both; two files for one slot are an error too.
pub(super) fn match_set(
    found: Vec<Found>,
    mine: &Names,
    theirs: &Names,
    role: Role,
) -> Result<Vec<Option<Found>>> {
    let word = role.word();
    let names = mine.names;
    let listed = || names.join(", ");
    let mut slots: Vec<Option<Found>> = names.iter().map(|_| None).collect();
    for file in found {
        let slot = match &file.key {
            Key::Named(name) => names.iter().position(|n| n == name).ok_or_else(|| {
                Failure::usage(format!(
                    "{}: its tensor is named '{name}', which is no {word} of the model (its {word}s: {})",
                    file.at,
                    listed()
                ))
            })?,
            Key::Index(n) => (*n < names.len()).then_some(*n).ok_or_else(|| {
                Failure::usage(format!(
                    "{}: the model has {} {word}s, no {word} {n} (numbered from 0)",
                    file.at,
                    names.len()
                ))
            })?,
            Key::Stem(stem) => match (mine.of_stem(stem), theirs.of_stem(stem)) {
                (Some(slot), _) => slot,
                (None, Some(_)) => continue,
                (None, None) => {
                    return Err(Failure::usage(format!(
                        "{}: the model has no {word} '{stem}' (its {word}s: {})",
                        file.at,
                        listed()
                    )));
                }
            },
        };
        if let Some(earlier) = &slots[slot] {
            return Err(Failure::usage(format!(
                "{word} '{}' is given twice: by {} and by {}",
                names[slot], earlier.at, file.at
            )));
        }
        slots[slot] = Some(file);
    }
    Ok(slots)
}
