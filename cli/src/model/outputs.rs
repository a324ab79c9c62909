//! Where `gather-jit model -o DIR` writes each output: file names every common filesystem
//! takes, checked before the model runs, and the files written all or none.

use std::path::{Path, PathBuf};

use gather_jit_tract::dtype_of;
use tract_onnx::prelude::*;

use crate::failure::{Failure, Result};
use crate::files;
use crate::npy::{self, ElementType};

/// The names of the model's outputs, for the files they are written to.
pub(super) fn output_names(
    outlets: &[OutletId],
    label: impl Fn(OutletId) -> Option<String>,
) -> Vec<String> {
    (outlets.iter().enumerate())
        .map(|(i, &outlet)| label(outlet).unwrap_or_else(|| format!("output_{i}")))
        .collect()
}

/// Where each output goes (`dir/FILE`, FILE from [`file_names`]) and its element type,
/// checked before the model runs: a type `.npy` can hold, and never a file the command reads
/// (`reads`: role and path), which the rename over it would replace.
pub(super) fn output_files(
    dir: &Path,
    names: &[String],
    model: &TypedModel,
    reads: &[(&str, &Path)],
) -> Result<Vec<(PathBuf, ElementType)>> {
    let outlets = model.output_outlets().map_err(Failure::usage)?;
    let mut files: Vec<(PathBuf, ElementType)> = Vec::new();
    for ((name, file), outlet) in names.iter().zip(file_names(names)).zip(outlets) {
        let fact = model.outlet_fact(*outlet).map_err(Failure::usage)?;
        let dtype = dtype_of(fact.datum_type).ok_or_else(|| {
            Failure::usage(format!(
                "output {name}: {:?} has no .npy form",
                fact.datum_type
            ))
        })?;
        let path = dir.join(file);
        files::refuse_to_overwrite(&path, reads)?;
        files.push((path, ElementType::of(dtype)));
    }
    Ok(files)
}

/// A file name `NAME.npy` for each of `names` (of outputs for `-o`, and of inputs and outputs
/// that `--inputs` and `--assert-outputs` match `NAME.npy` files to) that every common
/// filesystem accepts, unlike many ONNX names (`onnx::Shape_422`, `/encoder/x:0`): ASCII
/// letters, digits, `-`, `_` and inner `.` kept, anything else `_`; no leading dot; Windows'
/// reserved device names get a leading `_`; an empty result is `output`; `_2`, `_3`, ... set
/// apart names that collide (case-insensitively, as on macOS and Windows) with an earlier one.
pub(super) fn file_names(names: &[String]) -> Vec<String> {
    let mut files: Vec<String> = Vec::new();
    for name in names {
        let file = unique_file_name(name, &files);
        files.push(file);
    }
    files
}

/// The file name of `name` in [`file_names`], apart from the earlier names `taken`.
fn unique_file_name(name: &str, taken: &[String]) -> String {
    let mut stem: String = name
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' | '.' => c,
            _ => '_',
        })
        .collect();
    stem = stem
        .trim_start_matches('.')
        .trim_end_matches('.')
        .to_string();
    if stem.is_empty() {
        stem = "output".into();
    }
    const RESERVED: [&str; 22] = [
        "CON", "PRN", "AUX", "NUL", "COM1", "COM2", "COM3", "COM4", "COM5", "COM6", "COM7", "COM8",
        "COM9", "LPT1", "LPT2", "LPT3", "LPT4", "LPT5", "LPT6", "LPT7", "LPT8", "LPT9",
    ];
    let device = stem
        .split('.')
        .next()
        .unwrap_or_default()
        .to_ascii_uppercase();
    if RESERVED.contains(&device.as_str()) {
        stem.insert(0, '_');
    }
    let is_taken = |file: &str| taken.iter().any(|t| t.eq_ignore_ascii_case(file));
    let mut file = format!("{stem}.npy");
    let mut n = 2;
    while is_taken(&file) {
        file = format!("{stem}_{n}.npy");
        n += 1;
    }
    file
}

/// Writes each output to its file, all or none (see [`files::write_together`]; an output file
/// that is a FIFO or a device is written through). On a failure `dir` is removed again if this
/// call made it and it is empty.
pub(super) fn write_outputs(
    dir: &Path,
    files: &[(PathBuf, ElementType)],
    outputs: &TVec<TValue>,
) -> Result<()> {
    let made_dir = !dir.exists();
    std::fs::create_dir_all(dir).map_err(|e| Failure::io("create", dir, e))?;
    let written = write_files(files, outputs);
    if written.is_err() && made_dir {
        // Only if empty: another program may have put something there meanwhile.
        let _ = std::fs::remove_dir(dir);
    }
    written
}

/// Writes each output (header and bytes) to its file, all or none.
fn write_files(files: &[(PathBuf, ElementType)], outputs: &TVec<TValue>) -> Result<()> {
    let mut headers = Vec::with_capacity(files.len());
    let mut bodies = Vec::with_capacity(files.len());
    for ((path, element), output) in files.iter().zip(outputs) {
        // tract's tensors can keep their bytes in a storage of their own; a model output
        // normally is plain, and one that is not is an error rather than tract's panic.
        let bytes = output.try_as_plain_ram().map_err(|e| {
            Failure::usage(format!(
                "{}: the output's bytes cannot be read: {e}",
                path.display()
            ))
        })?;
        headers.push(npy::header(*element, output.shape()));
        bodies.push(bytes.as_bytes());
    }
    let pieces: Vec<[&[u8]; 2]> = (headers.iter().zip(&bodies))
        .map(|(header, body)| [&header[..], body])
        .collect();
    let files: Vec<(&Path, &[&[u8]])> = (files.iter().zip(&pieces))
        .map(|((path, _), pieces)| (path.as_path(), &pieces[..]))
        .collect();
    files::write_together(&files)
}
