//! Every path the CLI reads or writes goes through here, under one policy (docs/safety.md,
//! "Files"):
//!
//! * **Inputs are regular files.** A path is opened without blocking (a FIFO with no writer
//!   would hang an `open`) and what was opened is looked at before a byte is read: a FIFO, a
//!   device, a socket or a directory is refused, naming the path and what it is. What is read
//!   is bounded by what the file declares ([`crate::npy::read`]: header, then the bytes it
//!   announces, then one byte more) or by a documented cap ([`Cap`]).
//! * **Outputs that are regular files, or new, are written whole or not at all**: to a
//!   temporary file beside them, renamed over them when complete. An output that exists and is
//!   not a regular file (`/dev/null`, a FIFO, a terminal, `/dev/stdout`) is written through,
//!   as a shell's `>` would, and never replaced; a directory is refused.
//! * **Inputs are never overwritten**: an output that is an input (by path, link or inode) is
//!   refused before anything is computed.

use std::fs::{self, File, FileType, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use crate::buffer;
use crate::failure::{Failure, Result};

/// What a file of type `kind` is, in words for an error (`a FIFO`).
fn what_it_is(kind: FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    if kind.is_dir() {
        "a directory"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

/// An input file, opened and found to be a regular file.
pub struct Input {
    file: File,
    len: u64,
}

impl Input {
    /// Opens `path` for reading if it is a regular file (following symbolic links).
    ///
    /// # Errors
    /// The path cannot be opened, or is a FIFO, a device, a socket or a directory: one line
    /// naming it and what it is.
    pub fn open(path: &Path) -> Result<Input> {
        let mut options = OpenOptions::new();
        options.read(true);
        // Opening a FIFO for reading blocks until a writer comes; O_NONBLOCK makes the open
        // return at once, so that what it is can be refused. Reads of a regular file ignore
        // the flag.
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
        let file = options.open(path).map_err(|e| match e.raw_os_error() {
            // What open(2) says of a socket (ENXIO), a device without a driver (ENODEV) or a
            // directory opened another way is less clear than what the path is.
            Some(_) => match fs::metadata(path) {
                Ok(metadata) if !metadata.is_file() => refusal(path, Some(metadata.file_type())),
                _ => Failure::io("read", path, e),
            },
            None => Failure::io("read", path, e),
        })?;
        let metadata = file.metadata().map_err(|e| Failure::io("read", path, e))?;
        if !metadata.is_file() {
            return Err(refusal(path, Some(metadata.file_type())));
        }
        Ok(Input {
            file,
            len: metadata.len(),
        })
    }

    /// The file's length in bytes when it was opened.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// The open file.
    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// The open file, to keep.
    pub fn into_file(self) -> File {
        self.file
    }
}

/// The refusal of an input that is not a regular file.
fn refusal(path: &Path, kind: Option<FileType>) -> Failure {
    let what = kind.map_or("not a regular file", what_it_is);
    Failure::usage(format!(
        "{}: {what}, not a regular file (inputs are read from regular files only)",
        path.display()
    ))
}

/// The most a file without a header of its own may hold for the CLI to read it whole, and why.
#[derive(Clone, Copy, Debug)]
pub struct Cap {
    bytes: u64,
    why: &'static str,
}

impl Cap {
    /// ONNX models and `TensorProto` files: protobuf's own limit on a message (ONNX keeps
    /// larger weights in external data files).
    #[cfg(feature = "model")]
    pub const PROTOBUF: Cap = Cap {
        bytes: 2 << 30,
        why: "the 2 GiB a protobuf message may hold",
    };
    /// OpenVINO IR `.xml` files: their weights are in the `.bin` beside them, so the XML of
    /// even the largest models is tens of megabytes.
    pub const IR_XML: Cap = Cap {
        bytes: 256 << 20,
        why: "the 256 MiB the CLI reads of an IR .xml (weights are in the .bin)",
    };
}

/// The whole contents of the regular file at `path`, which may hold at most `cap` bytes: the
/// length is checked before anything is allocated, and a file that grew meanwhile is refused.
///
/// # Errors
/// As [`Input::open`]; a file past `cap`, or that changed while read; no memory for it.
pub fn read_whole(path: &Path, cap: Cap) -> Result<Vec<u8>> {
    let mut input = Input::open(path)?;
    if input.len() > cap.bytes {
        return Err(Failure::usage(format!(
            "{}: {} bytes, more than {}",
            path.display(),
            input.len(),
            cap.why
        )));
    }
    // At most `cap`, which fits in usize on the 64-bit hosts the CLI runs on.
    let len = usize::try_from(input.len()).unwrap_or(usize::MAX);
    let mut bytes = buffer::with_capacity(len, format_args!("the contents of {}", path.display()))?;
    let file = input.file();
    (file.take(len as u64))
        .read_to_end(&mut bytes)
        .map_err(|e| Failure::io("read", path, e))?;
    let mut one = [0u8];
    let more = file
        .read(&mut one)
        .map_err(|e| Failure::io("read", path, e))?;
    if bytes.len() != len || more != 0 {
        return Err(Failure::usage(format!(
            "{}: the file changed while it was read",
            path.display()
        )));
    }
    Ok(bytes)
}

/// Fails if `output` is the same file as one of `inputs` (the same path, or the same file
/// through a symlink or a hard link): the rename over it would replace an input.
///
/// # Errors
/// The output is one of the inputs; `role` names it (`the output y.npy is the same file as
/// the ids input y.npy`).
pub fn refuse_to_overwrite(output: &Path, inputs: &[(&str, &Path)]) -> Result<()> {
    for &(role, input) in inputs {
        if same_file(output, input) {
            return Err(Failure::usage(format!(
                "the output {} is the same file as the {role} {}: inputs are never \
                 overwritten, write the output elsewhere",
                output.display(),
                input.display()
            )));
        }
    }
    Ok(())
}

/// Whether `a` and `b` name one existing file (after following symlinks).
pub fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(a), Ok(b)) = (fs::metadata(a), fs::metadata(b)) {
            return (a.dev(), a.ino()) == (b.dev(), b.ino());
        }
    }
    // A path that does not exist (yet) fails to resolve: it is not a file that was read.
    matches!((fs::canonicalize(a), fs::canonicalize(b)), (Ok(a), Ok(b)) if a == b)
}

/// Whether `path` is this process's standard output (`/dev/stdout`, or the file or terminal
/// it is): what a command prints there would land in the middle of what it writes.
pub fn is_stdout(path: &Path) -> bool {
    same_file(path, Path::new("/dev/stdout"))
}

/// Refuses `--json` with an output that is standard output, where the JSON goes too.
///
/// # Errors
/// Both at once.
pub fn refuse_json_to_stdout(path: &Path, json: bool) -> Result<()> {
    match json && is_stdout(path) {
        true => Err(Failure::usage(format!(
            "{} is standard output, where --json prints: give the output another path",
            path.display()
        ))),
        false => Ok(()),
    }
}

/// How an output path is written.
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    /// A new or regular file: through a temporary file renamed over this path (the file a
    /// symbolic link points to, so that the link stays a link).
    Replace(PathBuf),
    /// An existing file that is not a regular file, or one reached through `/proc` (as
    /// `/dev/stdout` is): opened and written in place.
    Through,
}

/// How `path` is written (see [`Route`]).
///
/// # Errors
/// The path is a directory, or its links cannot be followed.
pub fn route(path: &Path) -> Result<Route> {
    let mut at = path.to_path_buf();
    // Links are followed one at a time, as the kernel does (at most 40), so that a link into
    // /proc (/dev/stdout -> /proc/self/fd/1) is seen as such: renaming a file over the file
    // behind a process's descriptor would not reach the descriptor.
    for _ in 0..40 {
        if is_under_proc(&at) {
            return Ok(Route::Through);
        }
        let metadata = match fs::symlink_metadata(&at) {
            Ok(metadata) => metadata,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Route::Replace(at)),
            Err(e) => return Err(Failure::io("write", path, e)),
        };
        let kind = metadata.file_type();
        if kind.is_symlink() {
            let to = fs::read_link(&at).map_err(|e| Failure::io("write", path, e))?;
            at = directory_of(&at).join(to);
        } else if kind.is_file() {
            return Ok(Route::Replace(at));
        } else if kind.is_dir() {
            return Err(Failure::usage(format!(
                "cannot write {}: it is a directory",
                path.display()
            )));
        } else {
            return Ok(Route::Through);
        }
    }
    Err(Failure::usage(format!(
        "cannot write {}: too many levels of symbolic links",
        path.display()
    )))
}

/// Whether `path` lies under `/proc` once its directory is resolved (`/dev/fd/1` is
/// `/proc/self/fd/1`).
fn is_under_proc(path: &Path) -> bool {
    let dir = fs::canonicalize(directory_of(path)).unwrap_or_default();
    dir.starts_with("/proc") || path.starts_with("/proc")
}

/// Refuses an output named `path` whose extension is none of `extensions` (`["npy", "npz"]`),
/// unless it is written through (a device or a FIFO takes any name): `run -o out.txt` would
/// otherwise write `.npy` bytes under a name that says otherwise.
///
/// # Errors
/// The extension is not one of `extensions`; `writes` says what the command writes.
pub fn check_extension(path: &Path, extensions: &[&str], writes: &str) -> Result<()> {
    let matches = (path.extension().and_then(|e| e.to_str()))
        .is_some_and(|e| extensions.iter().any(|x| e.eq_ignore_ascii_case(x)));
    if matches || route(path)? == Route::Through {
        return Ok(());
    }
    let listed: Vec<String> = extensions.iter().map(|e| format!(".{e}")).collect();
    Err(Failure::usage(format!(
        "cannot write '{}': {writes}, a name ending in {}",
        path.display(),
        listed.join(" or ")
    )))
}

/// One output being written: a temporary file to rename into place, or the file itself.
pub struct Output {
    path: PathBuf,
    sink: Sink,
}

enum Sink {
    Temporary(tempfile::NamedTempFile, PathBuf),
    Through(File),
}

impl Output {
    /// Starts writing `path` by its [`route`]. A FIFO is opened as a shell's `>` opens it:
    /// the call waits for a reader.
    ///
    /// # Errors
    /// As [`route`]; the temporary file cannot be made, or the file opened.
    pub fn create(path: &Path) -> Result<Output> {
        Output::create_by(path, route(path)?)
    }

    /// Starts writing `path` by `route`, already found.
    ///
    /// # Errors
    /// The temporary file cannot be made, or the file opened.
    fn create_by(path: &Path, route: Route) -> Result<Output> {
        let sink = match route {
            Route::Replace(target) => Sink::Temporary(temporary_in(directory_of(&target))?, target),
            Route::Through => {
                let file = OpenOptions::new()
                    .write(true)
                    .truncate(true)
                    .open(path)
                    .map_err(|e| Failure::io("write", path, e))?;
                Sink::Through(file)
            }
        };
        Ok(Output {
            path: path.to_path_buf(),
            sink,
        })
    }

    /// Whether the output is written in place (and so cannot seek or be undone).
    pub fn is_through(&self) -> bool {
        matches!(self.sink, Sink::Through(_))
    }

    /// The file to write.
    pub fn file(&mut self) -> &mut File {
        match &mut self.sink {
            Sink::Temporary(temp, _) => temp.as_file_mut(),
            Sink::Through(file) => file,
        }
    }

    /// Writes `write`'s bytes to the file (and syncs a temporary file to disk).
    ///
    /// # Errors
    /// The write failed: the error names the output.
    pub fn write(&mut self, write: impl FnOnce(&mut Output) -> io::Result<()>) -> Result<()> {
        let written = write(self).and_then(|()| match &self.sink {
            Sink::Temporary(temp, _) => temp.as_file().sync_all(),
            Sink::Through(_) => Ok(()),
        });
        written.map_err(|e| Failure::io("write", &self.path, e))
    }

    /// Renames a temporary file into place; returns the path renamed over, if any.
    fn commit(self) -> Result<Option<PathBuf>> {
        match self.sink {
            Sink::Temporary(temp, target) => {
                temp.persist(&target)
                    .map_err(|e| Failure::io("write", &self.path, e.error))?;
                Ok(Some(target))
            }
            Sink::Through(_) => Ok(None),
        }
    }
}

/// Writes `path` through `write`, whole or not at all (see [`Output`]).
///
/// # Errors
/// The output cannot be made, written or renamed.
pub fn write_one(path: &Path, write: impl FnOnce(&mut Output) -> io::Result<()>) -> Result<()> {
    let mut output = Output::create(path)?;
    output.write(write)?;
    output.commit().map(drop)
}

/// Writes every file of `files` (a path and the pieces of its contents, in order) or none:
/// the temporary files first; then the outputs written through; then each temporary file
/// renamed into place, in order. A failure before the renames leaves nothing behind; if a
/// rename fails, the files already renamed are removed again (one that had replaced an earlier
/// file of its name leaves neither).
///
/// # Errors
/// A temporary file cannot be made, written or renamed; an output cannot be opened or written.
pub fn write_together(files: &[(&Path, &[&[u8]])]) -> Result<()> {
    let write = |output: &mut Output, pieces: &[&[u8]]| {
        output.write(|out| {
            pieces
                .iter()
                .try_for_each(|piece| out.file().write_all(piece))
        })
    };
    let mut routes = Vec::with_capacity(files.len());
    for &(path, pieces) in files {
        routes.push((path, pieces, route(path)?));
    }
    // Temporary files first, then the outputs written through (which cannot be undone).
    routes.sort_by_key(|(.., route)| *route == Route::Through);
    let mut pending = Vec::with_capacity(files.len());
    // On an error, dropping `pending` removes the temporary files written so far.
    for (path, pieces, route) in routes {
        let mut output = Output::create_by(path, route)?;
        write(&mut output, pieces)?;
        pending.push(output);
    }
    let mut renamed = Vec::with_capacity(files.len());
    for output in pending {
        match output.commit() {
            Ok(done) => renamed.extend(done),
            Err(e) => {
                for done in renamed {
                    let _ = fs::remove_file(done);
                }
                return Err(e);
            }
        }
    }
    Ok(())
}

/// A new temporary file in `dir` (which an output is renamed from when complete), readable by
/// all once renamed, as an ordinary output.
///
/// # Errors
/// The file cannot be created.
fn temporary_in(dir: &Path) -> Result<tempfile::NamedTempFile> {
    let mut builder = tempfile::Builder::new();
    builder.prefix(".gather-jit-").suffix(".tmp");
    // A temporary file is private (0600); the output is an ordinary file.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644));
    builder
        .tempfile_in(dir)
        .map_err(|e| Failure::io("create a temporary file in", dir, e))
}

/// The directory a file is written in (`.` for a bare file name).
fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}
