//! Arrays on the command line: `FILE.npy`, one array of an `.npz` archive (`FILE.npz:NAME`),
//! or a whole archive; reading them (with the bounds of [`crate::files`]) and writing them.
//!
//! An `.npz` file is what `numpy.savez` writes: a zip archive with one `NAME.npy` member per
//! array, stored (`savez`) or deflated (`savez_compressed`). The [`zip`] crate reads the archive;
//! each member is an `.npy` file for [`crate::npy`]. Written archives hold one stored member, as
//! `savez` writes them.

use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, Write};
use std::path::{Path, PathBuf};

use zip::result::ZipError;
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipArchive, ZipWriter};

use crate::failure::{Failure, Result};
use crate::files::{self, Input};
use crate::npy::{self, Array, Length};

/// Where an array is: a file, and for an `.npz` archive the name of the array in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArrayPath {
    /// The `.npy` or `.npz` file.
    pub file: PathBuf,
    /// The array's name in an `.npz` archive (`None`: the file is `.npy`, or the archive is
    /// taken whole).
    pub member: Option<String>,
}

impl ArrayPath {
    /// `FILE.npz:NAME` names array NAME of FILE.npz; anything else is a file. A path that exists
    /// as it is written is always a file, so that a name with a colon in it still works.
    pub fn parse(path: &Path) -> ArrayPath {
        let split = path
            .to_str()
            .filter(|_| !path.exists())
            .and_then(|text| text.rsplit_once(':'))
            .filter(|(file, name)| is_npz(Path::new(file)) && !name.is_empty());
        match split {
            Some((file, name)) => ArrayPath {
                file: PathBuf::from(file),
                member: Some(name.to_string()),
            },
            None => ArrayPath {
                file: path.to_path_buf(),
                member: None,
            },
        }
    }

    /// Whether the file is an `.npz` archive (by its extension, as numpy decides).
    pub fn is_npz(&self) -> bool {
        is_npz(&self.file)
    }
}

impl fmt::Display for ArrayPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.member {
            Some(name) => write!(f, "{}:{name}", self.file.display()),
            None => write!(f, "{}", self.file.display()),
        }
    }
}

/// Whether `path` ends in `.npz` (any case).
pub fn is_npz(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("npz"))
}

/// An `.npz` archive opened for reading (from a file, or any reader that can seek).
pub struct Archive<R = BufReader<File>> {
    path: PathBuf,
    zip: ZipArchive<R>,
}

impl Archive {
    /// Opens the archive at `path` (its directory only; members are read by [`Archive::read`]).
    ///
    /// # Errors
    /// The file cannot be read or is not a zip archive.
    pub fn open(path: &Path) -> Result<Archive> {
        let file = Input::open(path)?.into_file();
        Archive::new(BufReader::new(file), path)
    }
}

impl<R: io::Read + io::Seek> Archive<R> {
    /// The archive `reader` holds; `path` names it in errors.
    ///
    /// # Errors
    /// It is not a zip archive.
    pub fn new(reader: R, path: &Path) -> Result<Archive<R>> {
        let zip = ZipArchive::new(reader).map_err(|e| {
            Failure::usage(format!(
                "{}: not an .npz archive (a zip file of .npy arrays): {e}",
                path.display()
            ))
        })?;
        Ok(Archive {
            path: path.to_path_buf(),
            zip,
        })
    }

    /// The names of the arrays in the archive (its `.npy` members without the extension), in
    /// archive order.
    pub fn names(&self) -> Vec<String> {
        self.zip
            .file_names()
            .filter_map(std::result::Result::ok)
            .filter_map(|name| name.strip_suffix(".npy").map(str::to_string))
            .collect()
    }

    /// Whether the archive has an array called `name`.
    pub fn has(&self, name: &str) -> bool {
        self.zip.index_for_name(&format!("{name}.npy")).is_some()
    }

    /// Reads array `name`.
    ///
    /// # Errors
    /// No such array (the error lists those there are), a member that cannot be decompressed
    /// or is not valid `.npy`, or no memory for it.
    pub fn read(&mut self, name: &str) -> Result<Array> {
        let at = format!("{}:{name}", self.path.display());
        let names = self.names();
        let mut member = match self.zip.by_name(&format!("{name}.npy")) {
            Ok(member) => member,
            Err(ZipError::FileNotFound) => {
                return Err(Failure::usage(format!(
                    "{} has no array '{name}' (it has: {})",
                    self.path.display(),
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                )));
            }
            Err(e) => return Err(Failure::usage(format!("cannot read {at}: {e}"))),
        };
        // The member is inflated only as far as its own `.npy` header announces (and one byte
        // more): a member that inflates past it, or whose size in the archive disagrees, is
        // refused without inflating the rest.
        let declared = member.size();
        npy::read(&mut member, Length::Declared(declared))
            .map_err(|e| Failure::usage(format!("{at}: {e}")))
    }
}

/// Reads the array at `path`: an `.npy` file, or one array of an `.npz` archive, which is the
/// one named, or the archive's only array.
///
/// # Errors
/// As [`read_npy`] and [`Archive::read`]; an archive of several arrays with none named.
pub fn read_array(path: &ArrayPath) -> Result<Array> {
    if !path.is_npz() {
        return read_npy(&path.file);
    }
    let mut archive = Archive::open(&path.file)?;
    let name = match &path.member {
        Some(name) => name.clone(),
        None => match archive.names().as_slice() {
            [only] => only.clone(),
            names => {
                return Err(Failure::usage(format!(
                    "{} holds {} arrays ({}): name one as {}:NAME",
                    path.file.display(),
                    names.len(),
                    names.join(", "),
                    path.file.display()
                )));
            }
        },
    };
    archive.read(&name)
}

/// Reads an `.npy` file.
///
/// # Errors
/// The file cannot be read, is not valid `.npy`, or does not fit in memory.
pub fn read_npy(path: &Path) -> Result<Array> {
    let mut input = Input::open(path)?;
    let len = input.len();
    npy::read(&mut BufReader::new(input.file()), Length::Known(len))
        .map_err(|e| Failure::usage(format!("{}: {e}", path.display())))
}

/// Writes an array (its `.npy` header and data) to `path`: an `.npy` file, or an `.npz`
/// archive holding it alone as `name` (default `output`). The file is written whole or not at
/// all, or written through if it is a device or a FIFO (see [`files`]).
///
/// # Errors
/// The file cannot be written.
pub fn write_array(path: &ArrayPath, header: &[u8], data: &[u8]) -> Result<()> {
    if !path.is_npz() {
        return files::write_together(&[(&path.file, &[header, data])]);
    }
    let name = path.member.as_deref().unwrap_or(DEFAULT_MEMBER);
    files::write_one(&path.file, |output| {
        let member = format!("{name}.npy");
        let through = output.is_through();
        let file = StopAtFirstError::new(output.file());
        // A FIFO or a device cannot seek back to fill in the member's sizes: zip's streaming
        // form puts them after the data instead.
        match through {
            true => write_member(ZipWriter::new_stream(file), &member, header, data),
            false => write_member(ZipWriter::new(file), &member, header, data),
        }
    })
}

/// Writes the archive of one stored member, `member`, holding `header` then `data`.
fn write_member<W: Write + io::Seek>(
    mut zip: ZipWriter<W>,
    member: &str,
    header: &[u8],
    data: &[u8],
) -> io::Result<()> {
    let size = (header.len() as u64).saturating_add(data.len() as u64);
    // Stored, as `numpy.savez` writes (a gather's output rarely compresses well, and a
    // stored member is read back without a copy through a decompressor).
    let options = SimpleFileOptions::default()
        .compression_method(CompressionMethod::Stored)
        .large_file(size >= u64::from(u32::MAX));
    zip.start_file(member, options).map_err(io::Error::other)?;
    zip.write_all(header)?;
    zip.write_all(data)?;
    zip.finish().map_err(io::Error::other)?;
    Ok(())
}

/// A writer that fails once and then accepts and drops every write: a `ZipWriter` dropped
/// after a failed write (a full disk) finalizes the archive in its `Drop` and prints to stderr
/// when that fails too; through this writer its second attempt is silent, and the first error
/// is the one reported (the temporary file is removed either way).
struct StopAtFirstError<W> {
    inner: W,
    failed: bool,
}

impl<W> StopAtFirstError<W> {
    fn new(inner: W) -> Self {
        StopAtFirstError {
            inner,
            failed: false,
        }
    }

    /// `result`, remembering whether it failed.
    fn track<T>(&mut self, result: io::Result<T>) -> io::Result<T> {
        self.failed |= result.is_err();
        result
    }
}

impl<W: Write> Write for StopAtFirstError<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.failed {
            return Ok(buf.len());
        }
        let result = self.inner.write(buf);
        self.track(result)
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.failed {
            return Ok(());
        }
        let result = self.inner.flush();
        self.track(result)
    }
}

impl<W: io::Seek> io::Seek for StopAtFirstError<W> {
    // Seeks write nothing, so they go through even after a failure: positions stay true.
    fn seek(&mut self, to: io::SeekFrom) -> io::Result<u64> {
        let result = self.inner.seek(to);
        self.track(result)
    }
}

/// The array name of a written `.npz` that `-o` does not name.
pub const DEFAULT_MEMBER: &str = "output";
