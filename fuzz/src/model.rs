//! ONNX models through the tract integration (`gather_jit_tract::onnx()`), as `gather-jit model`
//! runs them: parse, `into_typed`, `into_optimized`, `into_runnable`, run on inputs made from
//! the declared facts; then, when that ran, the same with tract's own ops
//! (`gather_jit_tract::onnx_native()`, as `gather-jit model --compare`), and the outputs
//! compared bit for bit.
//!
//! This file is shared: the libFuzzer target `fuzz_targets/model.rs` includes it with `#[path]`
//! and calls [`check`], and `integrations/tract/tests/fuzz_model_replay.rs` includes it the same
//! way to replay `fuzz/corpus/model` in `cargo test -p gather-jit-tract`. It depends only on
//! `tract_onnx` and `gather_jit_tract` (no prost: models are decoded by tract's
//! `proto_model_for_read` and built as `tract_onnx::pb` values). Decoding then
//! `model_for_proto_model` is `model_for_read`; `gather-jit model` reads a path
//! (`model_for_path`), which also resolves external data next to the file: here there is no
//! directory, so a model with external data is an error.
//!
//! An input is either
//! * ONNX bytes (first byte below [`STRUCTURED`]: a `ModelProto`'s first tag is `0x08`), such as
//!   the committed node-test and small models, mutated; or
//! * a *structured* case (first byte [`STRUCTURED`] or more): the bytes choose one `Gather`,
//!   `GatherElements` or `GatherND` node (opset, data and index types, ranks, dims that may be
//!   0, huge, negative, symbolic (`N`, `N-3`, `2*N`, ...) or unknown, attributes in and out of
//!   range or of the wrong type, rank-0 indices, GatherND depths and `batch_dims` past the rank,
//!   data and indices as graph inputs or initializers with valid, negative, out-of-range and
//!   extreme index values, sometimes a second node), built as a `tract_onnx::pb::ModelProto`.
//!
//! The oracle ([`check`]): every phase runs under `catch_unwind`, and a panic hook (installed
//! once, passing panics outside the phases to the hook before it) records where a panic
//! happened and a backtrace. A panic located in gather-jit's or gather-jit-tract's sources, or
//! whose innermost frame of ours, tract's or this harness's is ours or the harness's, is a bug
//! of ours: `check` panics, so libFuzzer saves the input. So is a panic in tract's code called
//! from ours, unless the caller only hands the node to tract's own op (a node builder, or
//! `rules`/`wire` delegating to tract's op for data gather-jit does not handle: see
//! [`DELEGATIONS`]). Any other panic is tract's (tract-onnx, tract-hir, tract-core, tract-data,
//! tract-linalg, tract-nnef, prost): it is counted ([`Outcome::TractPanicked`]), as
//! `gather-jit model` reports it, as one error line. Errors are fine anywhere. When both ways
//! run, outputs must be identical (type, shape, bytes); a difference is a bug of ours.
//!
//! Bounds (resource limits, not defects): inputs of more than [`MAX_INPUT_BYTES`] are not run,
//! symbols get small values; a model is not run if a tract node's output would exceed
//! [`MAX_NODE_BYTES`] or [`MAX_TRACT_NODE_ELEMENTS`] (checked for each way's plan: tract's own
//! ops may be skipped where the JIT ran), or a gather-jit node's would be between that and
//! [`IMPOSSIBLE_BYTES`] (big but allocatable: a legitimate gather that only costs memory;
//! larger ones must fail cleanly, so they run). Constant folding (`into_typed`,
//! `into_optimized`) evaluates gathers of constants, so a model is not loaded if a gather of
//! two constants could exceed [`MAX_FOLDED_ELEMENTS`] (see [`prefilter`]). Input dims whose
//! strides overflow (`[0, 2^62, 2^62]`) are not run either: tract's tensors panic on them in
//! builds with overflow checks.
//!
//! Triage: `FUZZ_MODEL_VERBOSE=1` prints each of tract's panics (and, in the replay, each
//! input's outcome); `FUZZ_MODEL_FRAMES=1` the frames a panic was judged by.

use std::backtrace::Backtrace;
use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

use gather_jit_tract::JitGather;
use tract_onnx::pb;
use tract_onnx::pb::tensor_shape_proto::dimension::Value as DimValue;
use tract_onnx::prelude::*;

/// Inputs whose first byte is this or more are structured cases; below, ONNX bytes.
pub const STRUCTURED: u8 = 0x80;
/// The largest total size of a model's inputs that is run.
pub const MAX_INPUT_BYTES: u128 = 1 << 20;
/// The largest output of a node (of tract's, or a gather-jit one) that is run.
pub const MAX_NODE_BYTES: u128 = 64 << 20;
/// The most elements a node of tract's may output: tract's own Gather copies element by
/// element on some layouts (about 300 ns each in the instrumented build: 64 Mi bools took
/// 22 s, past libFuzzer's timeout).
pub const MAX_TRACT_NODE_ELEMENTS: u128 = 1 << 22;
/// A gather-jit node whose output is at least this big cannot be allocated anywhere: it must
/// fail cleanly, so the model runs.
pub const IMPOSSIBLE_BYTES: u128 = 1 << 44;
/// The largest product of the element counts of a constant-folded gather's two inputs.
pub const MAX_FOLDED_ELEMENTS: u128 = 1 << 24;

/// The phases `gather-jit model` goes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    /// Protobuf decoding (`proto_model_for_read`).
    Decode,
    /// `model_for_proto_model`: the ONNX graph to tract's inference model.
    Parse,
    /// `into_typed`: type and shape inference (the ops' rules), then each op's `wire`.
    Analyse,
    /// `into_optimized`: decluttering, constant folding, optimisation.
    Optimize,
    /// `into_runnable`.
    Runnable,
    /// `gather_jit_tract::run_checked` (`plan.run` with each node's output size checked first,
    /// as `gather-jit model` runs).
    Run,
}

/// Which way a model runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Way {
    /// `gather_jit_tract::onnx()`.
    Jit,
    /// tract's own ops: `gather_jit_tract::onnx_native()`.
    Native,
}

/// What one input did (for the replay's summary; a bug of ours panics instead).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    /// Not a model: protobuf decoding failed.
    NotAModel,
    /// A phase returned an error.
    Rejected(Way, Phase),
    /// tract's own code panicked in a phase (see `is_ours`).
    TractPanicked(Way, Phase),
    /// Not run: inputs or outputs too large, inputs not numeric or symbolic.
    Skipped(&'static str),
    /// Both ways ran and every output was bit-identical.
    Identical,
}

/// A panic caught in a phase.
#[derive(Debug)]
pub struct Panicked {
    /// Where the panic happened (`file:line:col`).
    pub location: String,
    /// Its message.
    pub message: String,
    /// The stack when it happened.
    pub backtrace: String,
    /// Whether it is a bug of ours (see the module documentation).
    pub ours: bool,
}

thread_local! {
    /// Whether this thread is inside [`guarded`].
    static GUARDED: Cell<bool> = const { Cell::new(false) };
    /// The last panic caught in [`guarded`] on this thread: location, message, stack.
    static LAST_PANIC: RefCell<Option<(String, String, Backtrace)>> = const { RefCell::new(None) };
}

/// Installs, once per process, a panic hook that records a panic inside [`guarded`] (on any
/// thread) and hands any other to the hook installed before it (libFuzzer's, which aborts, or
/// the default one). One hook for the whole process, never swapped, so that tests running
/// `check` on several threads do not race on it.
fn install_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !GUARDED.with(Cell::get) {
                return previous(info);
            }
            let location = info.location().map_or_else(
                || "?".to_string(),
                |l| format!("{}:{}:{}", l.file(), l.line(), l.column()),
            );
            let message = payload_text(info.payload());
            let backtrace = Backtrace::force_capture();
            LAST_PANIC.with(|last| *last.borrow_mut() = Some((location, message, backtrace)));
        }));
    });
}

/// Runs `f`, catching a panic and recording where it happened and whose it is.
pub fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, Panicked> {
    install_hook();
    LAST_PANIC.with(|last| last.borrow_mut().take());
    let was = GUARDED.with(|g| g.replace(true));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    GUARDED.with(|g| g.set(was));
    result.map_err(|payload| {
        let (location, message, backtrace) = LAST_PANIC
            .with(|last| last.borrow_mut().take())
            .unwrap_or_else(|| ("?".into(), payload_text(&*payload), Backtrace::disabled()));
        let backtrace = backtrace.to_string();
        let ours = is_ours(&location, &backtrace);
        Panicked {
            location,
            message,
            backtrace,
            ours,
        }
    })
}

fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(not a string)".into())
}

/// Whether `path` (a panic location's or a frame's file) is in gather-jit's or
/// gather-jit-tract's sources.
fn is_our_source(path: &str) -> bool {
    let path = path.replace('\\', "/");
    let root = env!("CARGO_MANIFEST_DIR").replace('\\', "/");
    let root = root
        .strip_suffix("/fuzz")
        .or_else(|| root.strip_suffix("/integrations/tract"))
        .unwrap_or(&root);
    let path = path
        .replace("/fuzz/../", "/")
        .replace("/integrations/tract/../../", "/");
    let path = path.trim_start_matches("./");
    path.starts_with("src/")
        || path.starts_with("integrations/tract/src/")
        || path.starts_with(&format!("{root}/src/"))
        || path.starts_with(&format!("{root}/integrations/tract/src/"))
}

/// Whether `path` is in tract's (or prost's) sources.
fn is_tract_source(path: &str) -> bool {
    ["/tract-", "/prost-"]
        .iter()
        .any(|crate_dir| path.contains(crate_dir))
}

/// tract's crates (and prost) as they appear in a frame's symbol.
const TRACT_CRATES: [&str; 8] = [
    "tract_onnx::",
    "tract_onnx_opl::",
    "tract_hir::",
    "tract_core::",
    "tract_data::",
    "tract_linalg::",
    "tract_nnef::",
    "prost::",
];

/// Whose code a stack frame is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    /// gather-jit or gather-jit-tract.
    Ours,
    /// tract or prost.
    Tract,
    /// This harness (the fuzz target or the replay test).
    Harness,
    /// std, ndarray, hashbrown, anyhow, ...
    Other,
}

/// The frames of a backtrace's text (`N: symbol` lines, each maybe followed by `at path:line`):
/// owner and short name (the symbol's last path segment, generic arguments removed).
fn frames(backtrace: &str) -> Vec<(Owner, String)> {
    let mut frames: Vec<(String, Option<String>)> = vec![];
    for line in backtrace.lines() {
        let line = line.trim_start();
        if let Some(path) = line.strip_prefix("at ") {
            if let Some(last) = frames.last_mut() {
                last.1 = Some(path.to_string());
            }
            continue;
        }
        if let Some((number, symbol)) = line.split_once(": ")
            && !number.is_empty()
            && number.chars().all(|c| c.is_ascii_digit())
        {
            frames.push((symbol.to_string(), None));
        }
    }
    frames
        .into_iter()
        .map(|(symbol, path)| {
            // The file decides when the frame has one; else the symbol's path, generic
            // arguments removed (they name other crates' types).
            let plain = without_generics(&symbol);
            let owner = match path.as_deref() {
                Some(path) if is_our_source(path) => Owner::Ours,
                Some(path) if is_tract_source(path) => Owner::Tract,
                Some(path)
                    if path.contains("fuzz_targets/")
                        || path.contains("fuzz/src/model.rs")
                        || path.contains("fuzz_model_replay") =>
                {
                    Owner::Harness
                }
                Some(_) => Owner::Other,
                None if plain.contains("gather_jit::") || plain.contains("gather_jit_tract::") => {
                    Owner::Ours
                }
                None if TRACT_CRATES.iter().any(|c| plain.contains(c)) => Owner::Tract,
                None if plain.contains("model::model::")
                    || plain.contains("fuzz_model_replay::") =>
                {
                    Owner::Harness
                }
                None => Owner::Other,
            };
            (owner, short_name(&symbol))
        })
        .collect()
}

/// `symbol` without its generic arguments (`<...>`), trait qualifications kept apart:
/// `<a::B<T> as c::D>::wire<X>` -> `a::B as c::D::wire`.
fn without_generics(symbol: &str) -> String {
    let mut depth = 0usize;
    let mut plain = String::new();
    for (i, c) in symbol.char_indices() {
        match c {
            // The outer `<...>` of a qualified path (`<T as Trait>::f`) is not generic.
            '<' if i == 0 => {}
            '>' if depth == 0 => {}
            '<' => depth += 1,
            '>' => depth -= 1,
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    plain
}

/// A symbol's last path segment: `<a::B<T> as c::D>::wire<X>` -> `wire`.
fn short_name(symbol: &str) -> String {
    let plain = without_generics(symbol);
    // A turbofish leaves an empty last segment (`begin_panic::<&str>` -> `begin_panic::`).
    let plain = plain.trim().trim_end_matches("::");
    plain.rsplit("::").next().unwrap_or("").to_string()
}

/// Functions of gather-jit-tract that hand a node to tract's own code: the ONNX node builders
/// (attributes read by tract's helpers, tract's hir ops built), and `rules` / `wire` of the
/// expansions, which use tract's own op's rules and op for Gather and GatherElements typing,
/// for data gather-jit does not handle (shape tensors, strings), and in `onnx_native()`; and
/// `run_checked`, which runs tract's plan (each node's evaluation inside its closure). A panic
/// in tract's code called straight from one of these is tract's.
const DELEGATIONS: [&str; 7] = [
    "wire",
    "rules",
    "gather",
    "gather_elements",
    "gather_nd",
    "native_gather_nd",
    "run_checked",
];

/// Whether a panic at `location` with this backtrace is a bug of ours: located in our sources;
/// or its innermost frame of ours, tract's or this harness's is ours or the harness's; or it
/// is tract's but called from our code other than a delegation to tract's own op (see
/// [`DELEGATIONS`]): tract code we called in a way that panics (e.g. an allocation of a size we
/// computed). With no such frame, a panic is ours unless located in tract's sources.
fn is_ours(location: &str, backtrace: &str) -> bool {
    let file = location.rsplitn(3, ':').last().unwrap_or(location);
    if is_our_source(file) {
        return true;
    }
    let frames = frames(backtrace);
    if std::env::var_os("FUZZ_MODEL_FRAMES").is_some() {
        eprintln!("frames: {frames:?}");
    }
    // The panic machinery (and the hook, this harness's) comes first.
    let start = frames
        .iter()
        .take(24)
        .rposition(|(_, name)| {
            [
                "rust_begin_unwind",
                "begin_panic",
                "panic_fmt",
                "panic_with_hook",
            ]
            .contains(&name.as_str())
        })
        .map_or(0, |i| i + 1);
    let mut owned = frames[start.min(frames.len())..]
        .iter()
        .filter(|(owner, _)| *owner != Owner::Other);
    match owned.next() {
        None => !is_tract_source(file),
        Some((Owner::Ours | Owner::Harness, _)) => true,
        Some(_) => {
            // tract's code: the first function of ours outside it decides; a closure of ours
            // counts as the function of ours around it (`run_checked`'s, which tract's
            // `run_plan_with_eval` calls), or as itself when that is not on the stack.
            let mut caller: Option<&str> = None;
            for (owner, name) in owned {
                match owner {
                    Owner::Harness => break,
                    Owner::Ours => {
                        caller = Some(name);
                        if !name.starts_with('{') {
                            break;
                        }
                    }
                    _ => {}
                }
            }
            caller.is_some_and(|name| !DELEGATIONS.contains(&name))
        }
    }
}

/// Why a model went no further than a phase.
enum Stop {
    /// The phase returned an error.
    Error,
    /// The phase panicked.
    Panic(Panicked),
}

/// Runs one phase under [`guarded`].
fn phase<T>(f: impl FnOnce() -> TractResult<T>) -> Result<T, Stop> {
    match guarded(f) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(_)) => Err(Stop::Error),
        Err(p) => Err(Stop::Panic(p)),
    }
}

/// The outcome of a stop in `phase` of `way`: an error or tract's panic is an outcome; a
/// panic of ours (see [`is_ours`]) panics.
fn judge(way: Way, phase: Phase, stop: Stop, what: &str) -> Outcome {
    let p = match stop {
        Stop::Error => return Outcome::Rejected(way, phase),
        Stop::Panic(p) => p,
    };
    let verbose = std::env::var_os("FUZZ_MODEL_VERBOSE").is_some();
    if !p.ours {
        if verbose {
            eprintln!(
                "tract's panic: {way:?} {phase:?} at {}: {}",
                p.location, p.message
            );
        }
        return Outcome::TractPanicked(way, phase);
    }
    panic!(
        "gather-jit bug: {way:?} {phase:?} of {what} panicked at {}: {}\n{}",
        p.location, p.message, p.backtrace
    )
}

/// Checks one fuzz input (see the module documentation); panics on a bug of ours.
pub fn check(bytes: &[u8]) -> Outcome {
    let seed = fnv(bytes);
    if bytes.first().is_some_and(|&b| b >= STRUCTURED) {
        let (proto, seed) = structured(bytes);
        return check_proto(&proto, seed, "a structured case");
    }
    match phase(|| gather_jit_tract::onnx().proto_model_for_read(&mut &bytes[..])) {
        Ok(proto) => check_proto(&proto, seed, "ONNX bytes"),
        Err(Stop::Error) => Outcome::NotAModel,
        Err(stop) => judge(Way::Jit, Phase::Decode, stop, "ONNX bytes"),
    }
}

/// The phases of `gather-jit model` on a decoded model, with JIT gathers then tract's.
pub fn check_proto(proto: &pb::ModelProto, seed: u64, what: &str) -> Outcome {
    if let Err(reason) = prefilter(proto) {
        return Outcome::Skipped(reason);
    }
    let jit = match load(Way::Jit, proto) {
        Ok(plan) => plan,
        Err((at, stop)) => return judge(Way::Jit, at, stop, what),
    };
    let (inputs, symbols) = match make_inputs(jit.model(), seed) {
        Ok(inputs) => inputs,
        Err(reason) => return Outcome::Skipped(reason),
    };
    if let Err(reason) = node_sizes(jit.model(), &symbols) {
        return Outcome::Skipped(reason);
    }
    let ours = match phase(|| gather_jit_tract::run_checked(&jit, inputs.clone())) {
        Ok(outputs) => outputs,
        Err(stop) => {
            return judge(Way::Jit, Phase::Run, stop, what);
        }
    };
    let native = match load(Way::Native, proto) {
        Ok(plan) => plan,
        Err((at, stop)) => return judge(Way::Native, at, stop, what),
    };
    if let Err(reason) = node_sizes(native.model(), &symbols) {
        return Outcome::Skipped(reason);
    }
    let theirs = match phase(|| gather_jit_tract::run_checked(&native, inputs.clone())) {
        Ok(outputs) => outputs,
        Err(stop) => return judge(Way::Native, Phase::Run, stop, what),
    };
    assert_eq!(
        ours.len(),
        theirs.len(),
        "gather-jit bug: {what}: {} outputs with gather-jit, {} with tract's own ops",
        ours.len(),
        theirs.len()
    );
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        let same = match gather_jit_tract::dtype_of(a.datum_type()) {
            // Bit for bit where both are plain; tract's equality for what is not plain.
            Some(_) => match (a.as_plain_ram(), b.as_plain_ram()) {
                (Some(pa), Some(pb)) => {
                    a.datum_type() == b.datum_type()
                        && a.shape() == b.shape()
                        && pa.as_bytes() == pb.as_bytes()
                }
                _ => **a == **b,
            },
            None => **a == **b,
        };
        assert!(
            same,
            "gather-jit bug: {what}: output {i} differs: gather-jit {a:?}, tract's own ops {b:?}\n\
             inputs {inputs:?}"
        );
    }
    Outcome::Identical
}

/// The framework of one way: tract's own ops are `gather_jit_tract::onnx_native()`, as
/// `gather-jit model --native` and `--compare` run them (tract's own GatherND type rules grow
/// memory without bound on rank-0 indices, so that framework types tract's GatherND with the
/// integration's rules).
fn framework(way: Way) -> tract_onnx::Onnx {
    match way {
        Way::Jit => gather_jit_tract::onnx(),
        Way::Native => gather_jit_tract::onnx_native(),
    }
}

/// Parses, analyses, optimises and plans `proto` one way; or the phase that stopped, and why.
fn load(way: Way, proto: &pb::ModelProto) -> Result<Arc<TypedSimplePlan>, (Phase, Stop)> {
    let framework = framework(way);
    let model = phase(|| framework.model_for_proto_model(proto)).map_err(|s| (Phase::Parse, s))?;
    let model = phase(|| model.into_typed()).map_err(|s| (Phase::Analyse, s))?;
    let model = phase(|| model.into_optimized()).map_err(|s| (Phase::Optimize, s))?;
    phase(|| model.into_runnable()).map_err(|s| (Phase::Runnable, s))
}

/// FNV-1a of the input: the seed of the random inputs of ONNX-bytes cases.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Values of the symbols (a symbolic dim becomes one of these).
const SYMBOL_VALUES: [i64; 8] = [2, 3, 1, 2, 0, 4, 3, 2];

/// Random inputs of the declared facts, symbols set to small values; `Err` names why the
/// model cannot run (an input not numeric, symbolic after all, or too large).
fn make_inputs(
    model: &TypedModel,
    seed: u64,
) -> Result<(TVec<TValue>, SymbolValues), &'static str> {
    let mut rng = Rng::new(seed);
    let mut symbols = SymbolValues::default();
    let mut all = model.symbols.all_symbols();
    all.sort_by_key(|s| format!("{s}"));
    for symbol in &all {
        symbols.set(symbol, SYMBOL_VALUES[rng.below(8) as usize]);
    }
    let mut inputs = TVec::new();
    let mut total = 0u128;
    let count = model.inputs.len();
    for i in 0..count {
        let fact = model.input_fact(i).map_err(|_| "no input fact")?;
        let dt = fact.datum_type;
        if gather_jit_tract::dtype_of(dt).is_none() {
            return Err("input not numeric");
        }
        let mut shape = Vec::new();
        for dim in fact.shape.iter() {
            let dim = dim
                .eval_to_i64(&symbols)
                .map_err(|_| "input dim unresolved")?;
            shape.push(usize::try_from(dim).map_err(|_| "input dim negative")?);
        }
        // tract's tensors compute strides from the dims, a zero among them counting as one:
        // past `isize::MAX` they overflow (a panic with overflow checks), empty or not.
        let strides = shape.iter().try_fold(dt.size_of() as u128, |n, &d| {
            n.checked_mul(d.max(1) as u128)
        });
        if strides.is_none_or(|n| n > isize::MAX as u128) {
            return Err("input dims overflow");
        }
        let len = shape
            .iter()
            .try_fold(1u128, |n, &d| n.checked_mul(d as u128))
            .unwrap_or(u128::MAX);
        total = total.saturating_add(len.saturating_mul(dt.size_of() as u128));
        if total > MAX_INPUT_BYTES {
            return Err("inputs too large");
        }
        let bytes = values(&mut rng, dt, len as usize);
        // SAFETY: `dt` is a plain-data type (`dtype_of` accepted it) and `bytes` holds `len`
        // native-endian values of it (booleans 0 or 1).
        let tensor =
            unsafe { Tensor::from_raw_dt(dt, &shape, &bytes) }.map_err(|_| "input tensor")?;
        inputs.push(tensor.into_tvalue());
    }
    Ok((inputs, symbols))
}

/// `len` random values of `dt`, native-endian: integers from a range chosen per tensor (all
/// zero, `0..2` as `gather-jit model`'s, `0..4`, `-3..4`, or extremes mixed in) so that they
/// are often valid indices, floats in `[-1, 1)` with a few specials.
fn values(rng: &mut Rng, dt: DatumType, len: usize) -> Vec<u8> {
    let size = dt.size_of();
    let regime = [0, 1, 1, 1, 2, 3, 3, 4][rng.below(8) as usize];
    let mut bytes = Vec::with_capacity(len * size);
    for _ in 0..len {
        let value: i64 = match regime {
            0 => 0,
            1 => rng.below(2) as i64,
            2 => rng.below(4) as i64,
            3 => rng.below(7) as i64 - 3,
            _ => match rng.below(8) {
                0 => i64::MIN,
                1 => i64::MAX,
                2 => -1,
                3 => 1 << 31,
                4 => rng.next() as i64,
                _ => rng.below(4) as i64,
            },
        };
        match dt {
            DatumType::Bool => bytes.push((value & 1) as u8),
            DatumType::F32 => bytes.extend_from_slice(&float(rng, value).to_ne_bytes()),
            DatumType::F64 => bytes.extend_from_slice(&(float(rng, value) as f64).to_ne_bytes()),
            DatumType::F16 => {
                let half = tract_onnx::prelude::f16::from_f32(float(rng, value));
                bytes.extend_from_slice(&half.to_bits().to_ne_bytes());
            }
            _ => bytes.extend_from_slice(&value.to_ne_bytes()[..size]),
        }
    }
    bytes
}

fn float(rng: &mut Rng, value: i64) -> f32 {
    match value {
        i64::MIN => f32::NAN,
        i64::MAX => f32::INFINITY,
        _ => rng.below(2000) as f32 / 1000.0 - 1.0,
    }
}

/// Bytes of a node's output with these symbol values, if they are known.
fn output_bytes(fact: &TypedFact, symbols: &SymbolValues) -> Option<u128> {
    let mut n = fact.datum_type.size_of() as u128;
    for dim in fact.shape.iter() {
        let dim = dim.eval_to_i64(symbols).ok()?;
        n = n.saturating_mul(u128::try_from(dim).ok()?);
    }
    Some(n)
}

/// `Err` if a node's output would be too large to run (see the module documentation).
fn node_sizes(model: &TypedModel, symbols: &SymbolValues) -> Result<(), &'static str> {
    for node in model.nodes() {
        let ours = node.op_as::<JitGather>().is_some();
        for output in &node.outputs {
            let Some(bytes) = output_bytes(&output.fact, symbols) else {
                continue;
            };
            if ours && bytes > MAX_NODE_BYTES && bytes < IMPOSSIBLE_BYTES {
                return Err("gather output allocatable but large");
            }
            let elements = bytes / output.fact.datum_type.size_of().max(1) as u128;
            if !ours && (bytes > MAX_NODE_BYTES || elements > MAX_TRACT_NODE_ELEMENTS) {
                return Err("node output too large");
            }
        }
    }
    Ok(())
}

/// Models not parsed: one whose gather of two constants (folded at `into_optimized`, by tract
/// or by gather-jit) could exceed [`MAX_FOLDED_ELEMENTS`] elements, an upper bound being the
/// product of the two inputs' element counts, chained through folded outputs.
pub fn prefilter(proto: &pb::ModelProto) -> Result<(), &'static str> {
    let Some(graph) = &proto.graph else {
        return Ok(());
    };
    prefilter_graph(graph)
}

fn prefilter_graph(graph: &pb::GraphProto) -> Result<(), &'static str> {
    use std::collections::HashMap;
    let elements = |t: &pb::TensorProto| {
        t.dims
            .iter()
            .fold(1u128, |n, &d| n.saturating_mul((d as u64) as u128))
    };
    let mut constants: HashMap<&str, u128> = graph
        .initializer
        .iter()
        .map(|t| (t.name.as_str(), elements(t)))
        .collect();
    for node in &graph.node {
        for attribute in &node.attribute {
            if let Some(g) = &attribute.g {
                prefilter_graph(g)?;
            }
            for g in &attribute.graphs {
                prefilter_graph(g)?;
            }
        }
        if node.op_type == "Constant" {
            let n = node
                .attribute
                .iter()
                .filter_map(|a| a.t.as_ref())
                .map(elements)
                .max()
                .unwrap_or(1);
            for output in &node.output {
                constants.insert(output, n);
            }
            continue;
        }
        if node.op_type.starts_with("Gather")
            && node.input.len() >= 2
            && let (Some(&a), Some(&b)) = (
                constants.get(node.input[0].as_str()),
                constants.get(node.input[1].as_str()),
            )
        {
            let n = a.saturating_mul(b);
            if n > MAX_FOLDED_ELEMENTS {
                return Err("constant gather too large to fold");
            }
            for output in &node.output {
                constants.insert(output, n);
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Structured cases.

/// The bytes of a structured case, read one at a time (zero once exhausted).
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.bytes.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    fn below(&mut self, n: usize) -> usize {
        self.byte() as usize % n
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len())]
    }
}

/// A dim of a declared shape.
#[derive(Clone, Debug, PartialEq)]
enum Dim {
    Value(i64),
    Param(&'static str),
    Unknown,
}

impl Dim {
    fn value(&self) -> Option<i64> {
        match self {
            Dim::Value(v) if *v >= 0 => Some(*v),
            _ => None,
        }
    }

    fn proto(&self) -> pb::tensor_shape_proto::Dimension {
        let value = match self {
            Dim::Value(v) => Some(DimValue::DimValue(*v)),
            Dim::Param(p) => Some(DimValue::DimParam(p.to_string())),
            Dim::Unknown => None,
        };
        pb::tensor_shape_proto::Dimension {
            value,
            ..Default::default()
        }
    }
}

/// Small dims, 0 among them.
const SMALL: [i64; 16] = [1, 2, 3, 4, 5, 1, 2, 3, 0, 7, 8, 9, 13, 17, 2, 3];
/// Dims no gather of real data has (huge, or a product that overflows).
const HUGE: [i64; 8] = [
    1 << 31,
    (1 << 32) + 1,
    1 << 40,
    1 << 62,
    i64::MAX,
    1 << 20,
    (1 << 16) + 1,
    1 << 24,
];
/// Symbolic dims, as `dim_param`s (tract parses them as expressions).
const PARAMS: [&str; 12] = [
    "N", "M", "N", "batch", "N+1", "2*N", "N-3", "N*M", "unk__0", "?", "-1", "0*N",
];

/// A dim: mostly small, sometimes huge, negative, symbolic or unknown, or `like` (a data dim
/// copied, so that shapes often agree).
fn dim(r: &mut Reader, like: Option<&Dim>) -> Dim {
    match r.byte() {
        b @ 0..=143 => Dim::Value(SMALL[b as usize % 16]),
        b @ 144..=191 => match like {
            Some(d) => d.clone(),
            None => Dim::Value(SMALL[b as usize % 16]),
        },
        b @ 192..=219 => Dim::Param(PARAMS[b as usize % PARAMS.len()]),
        b @ 220..=243 => Dim::Value(HUGE[b as usize % 8]),
        b @ 244..=251 => Dim::Value([-1, -7, i64::MIN, -(1 << 40)][b as usize % 4]),
        _ => Dim::Unknown,
    }
}

/// ONNX element types: mostly ones gather-jit handles, some it does not (string, bf16,
/// complex) and invalid ones.
const DATA_TYPES: [i32; 20] = [
    1, 1, 7, 6, 10, 11, 2, 3, 4, 5, 12, 13, 9, 1, 7, 8, 16, 0, 14, 99,
];
const INDEX_TYPES: [i32; 12] = [7, 6, 7, 6, 7, 6, 2, 3, 5, 13, 1, 9];

fn datum(code: i32) -> Option<DatumType> {
    Some(match code {
        1 => DatumType::F32,
        2 => DatumType::U8,
        3 => DatumType::I8,
        4 => DatumType::U16,
        5 => DatumType::I16,
        6 => DatumType::I32,
        7 => DatumType::I64,
        9 => DatumType::Bool,
        10 => DatumType::F16,
        11 => DatumType::F64,
        12 => DatumType::U32,
        13 => DatumType::U64,
        _ => return None,
    })
}

/// An attribute: in range for `rank` mostly, else extreme, absent or of the wrong type.
fn int_attribute(
    r: &mut Reader,
    name: &str,
    rank: usize,
    non_negative: bool,
) -> Option<pb::AttributeProto> {
    let rank = rank as i64;
    let (kind, i) = match r.byte() {
        b @ 0..=199 => {
            let span = if non_negative { rank + 2 } else { 2 * rank + 3 };
            let v = b as i64 % span;
            (2, if non_negative { v } else { v - rank - 1 })
        }
        b @ 200..=239 => (
            2,
            [i64::MIN, i64::MAX, 1 << 32, -(1 << 32), 100, -100, -1, 64][b as usize % 8],
        ),
        240..=247 => return None,
        248..=251 => (1, 0), // FLOAT
        _ => (7, 0),         // INTS
    };
    Some(pb::AttributeProto {
        name: name.into(),
        r#type: kind,
        i,
        f: 1.0,
        ints: if kind == 7 { vec![0, 1] } else { vec![] },
        ..Default::default()
    })
}

fn value_info(name: &str, elem_type: i32, shape: Option<&[Dim]>) -> pb::ValueInfoProto {
    let tensor = pb::type_proto::Tensor {
        elem_type,
        shape: shape.map(|dims| pb::TensorShapeProto {
            dim: dims.iter().map(Dim::proto).collect(),
        }),
    };
    pb::ValueInfoProto {
        name: name.into(),
        r#type: Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(tensor)),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The dims' values if all are known, small enough for an initializer (4096 elements).
fn concrete(dims: &[Dim]) -> Option<Vec<usize>> {
    let dims: Vec<usize> = dims
        .iter()
        .map(|d| d.value().map(|v| v as usize))
        .collect::<Option<_>>()?;
    (dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d))? <= 4096).then_some(dims)
}

/// An initializer of `dims` and `elem_type` whose values come from `value(i)` (an `i64`,
/// truncated to the type; bit patterns for floats).
fn initializer(
    name: &str,
    elem_type: i32,
    dims: &[usize],
    mut value: impl FnMut(usize) -> i64,
) -> pb::TensorProto {
    let len: usize = dims.iter().product();
    let mut t = pb::TensorProto {
        name: name.into(),
        data_type: elem_type,
        dims: dims.iter().map(|&d| d as i64).collect(),
        ..Default::default()
    };
    match datum(elem_type) {
        Some(DatumType::Bool) => t.raw_data = (0..len).map(|i| (value(i) & 1) as u8).collect(),
        Some(dt) => {
            let size = dt.size_of();
            for i in 0..len {
                t.raw_data
                    .extend_from_slice(&value(i).to_ne_bytes()[..size]);
            }
        }
        None if elem_type == 8 => {
            t.string_data = (0..len)
                .map(|i| format!("s{}", value(i)).into_bytes())
                .collect()
        }
        None => t.raw_data = vec![1; len],
    }
    t
}

/// An index value relative to `dim` (the extent it addresses), chosen by two bytes: valid,
/// negative valid, just out of range either way, extreme, or a sign-extended byte.
fn index_value(r: &mut Reader, dim: i64) -> i64 {
    let kind = r.byte();
    let v = r.byte() as i64;
    let dim = dim.max(1);
    match kind % 8 {
        0..=2 => v % dim,
        3 => -1 - v % dim,
        4 => dim + v % 3,
        5 => -dim - 1 - v % 3,
        6 => [
            i64::MIN,
            i64::MAX,
            -1,
            i32::MAX as i64,
            1 << 32,
            u32::MAX as i64,
        ][v as usize % 6],
        _ => v as i8 as i64,
    }
}

/// Decodes a structured case into a model, and the seed of its random inputs.
pub fn structured(bytes: &[u8]) -> (pb::ModelProto, u64) {
    let mut r = Reader { bytes, at: 0 };
    let op = r.below(3);
    let opset = r.pick(&[13i64, 11, 12, 18, 1, 9, 13, 13]);
    let data_type = r.pick(&DATA_TYPES);
    let index_type = r.pick(&INDEX_TYPES);
    let data_rank = r.pick(&[1usize, 2, 3, 1, 2, 3, 4, 0, 5, 6, 2, 3, 1, 2, 7, 9]);
    let data_dims: Vec<Dim> = (0..data_rank).map(|_| dim(&mut r, None)).collect();
    let mut attributes = vec![];
    let op_type;
    let indices_dims: Vec<Dim>;
    let addressed: Box<dyn Fn(usize) -> i64>;
    let extent = |dims: &[Dim], i: i64| {
        usize::try_from(i)
            .ok()
            .and_then(|i| dims.get(i))
            .and_then(Dim::value)
            .unwrap_or(3)
    };
    match op {
        0 => {
            op_type = "Gather";
            let axis = int_attribute(&mut r, "axis", data_rank, false);
            let a = axis.as_ref().map_or(0, |a| a.i);
            let a = if a < 0 { a + data_rank as i64 } else { a };
            attributes.extend(axis);
            let rank = r.pick(&[1usize, 0, 1, 2, 1, 3, 0, 2, 4, 1, 2, 5]);
            indices_dims = (0..rank).map(|_| dim(&mut r, None)).collect();
            let n = extent(&data_dims, a);
            addressed = Box::new(move |_| n);
        }
        1 => {
            op_type = "GatherElements";
            let axis = int_attribute(&mut r, "axis", data_rank, false);
            let a = axis.as_ref().map_or(0, |a| a.i);
            let a = if a < 0 { a + data_rank as i64 } else { a };
            attributes.extend(axis);
            let rank = match r.byte() {
                0..=223 => data_rank,
                b => b as usize % 5,
            };
            indices_dims = (0..rank)
                .map(|j| {
                    let like = data_dims.get(j).cloned();
                    dim(&mut r, like.as_ref())
                })
                .collect();
            let n = extent(&data_dims, a);
            addressed = Box::new(move |_| n);
        }
        _ => {
            op_type = "GatherND";
            let batch = int_attribute(&mut r, "batch_dims", data_rank, true);
            let b = batch.as_ref().map_or(0, |a| a.i).clamp(0, 16) as usize;
            attributes.extend(batch);
            // Indices: the batch dims copied (mostly), some tuple dims, the depth last.
            let tuples = r.pick(&[1usize, 0, 1, 2, 0, 1, 3, 1]);
            let mut dims: Vec<Dim> = (0..b.min(data_rank))
                .map(|j| dim(&mut r, Some(&data_dims[j])))
                .collect();
            dims.extend((0..tuples).map(|_| dim(&mut r, None)));
            let depth = match r.byte() {
                d @ 0..=199 => Dim::Value(d as i64 % (data_rank as i64 - b as i64 + 2).max(1)),
                d @ 200..=223 => Dim::Value((data_rank + d as usize % 4) as i64),
                _ => dim(&mut r, None),
            };
            let depth_n = depth.value().unwrap_or(1).max(1) as usize;
            if r.byte() >= 16 {
                dims.push(depth);
            } // else rank-0 (or depth-less) indices
            indices_dims = dims;
            let data = data_dims.clone();
            addressed = Box::new(move |i| extent(&data, (b + i % depth_n) as i64));
        }
    }
    // Where data and indices come from: graph inputs (declared, maybe without a shape) or
    // initializers.
    let sources = r.byte();
    let mut graph = pb::GraphProto {
        name: "fuzz".into(),
        ..Default::default()
    };
    let mut node_inputs = vec![];
    for (k, (name, elem_type, dims)) in [
        ("data", data_type, &data_dims),
        ("indices", index_type, &indices_dims),
    ]
    .into_iter()
    .enumerate()
    {
        let as_initializer = sources >> (2 * k) & 3 == 0;
        match (as_initializer, concrete(dims)) {
            (true, Some(shape)) => {
                let mut rng = Rng::new(0x5eed + k as u64);
                let t = if k == 0 {
                    initializer(name, elem_type, &shape, |_| rng.next() as i64)
                } else {
                    let values: Vec<i64> = (0..shape.iter().product())
                        .map(|i| index_value(&mut r, addressed(i)))
                        .collect();
                    initializer(name, elem_type, &shape, |i| values[i])
                };
                graph.initializer.push(t);
            }
            _ => {
                let shaped = sources >> (2 * k) & 3 != 3;
                graph
                    .input
                    .push(value_info(name, elem_type, shaped.then_some(&dims[..])));
            }
        }
        node_inputs.push(name.to_string());
    }
    graph.node.push(pb::NodeProto {
        input: node_inputs,
        output: vec!["y".into()],
        name: "gather".into(),
        op_type: op_type.into(),
        attribute: attributes,
        ..Default::default()
    });
    // A second node, sometimes: the shape of data gathered (tract's op on TDims), the output
    // gathered again (two gathers in a row), or the indices cast first.
    let mut outputs = vec!["y".to_string()];
    match r.byte() % 8 {
        0 => {
            graph.node.push(pb::NodeProto {
                input: vec!["data".into()],
                output: vec!["shape".into()],
                op_type: "Shape".into(),
                ..Default::default()
            });
            graph.node.push(pb::NodeProto {
                input: vec!["shape".into(), "indices".into()],
                output: vec!["z".into()],
                op_type: "Gather".into(),
                ..Default::default()
            });
            outputs.push("z".into());
        }
        1 => {
            graph.initializer.push(initializer("zero", 7, &[1], |_| 0));
            graph.node.push(pb::NodeProto {
                input: vec!["y".into(), "zero".into()],
                output: vec!["z".into()],
                op_type: "Gather".into(),
                ..Default::default()
            });
            outputs = vec!["z".into()];
        }
        2 => {
            let node = &mut graph.node[0];
            node.input[1] = "indices64".into();
            graph.node.insert(
                0,
                pb::NodeProto {
                    input: vec!["indices".into()],
                    output: vec!["indices64".into()],
                    op_type: "Cast".into(),
                    attribute: vec![pb::AttributeProto {
                        name: "to".into(),
                        r#type: 2,
                        i: 7,
                        ..Default::default()
                    }],
                    ..Default::default()
                },
            );
        }
        _ => {}
    }
    // The outputs: declared without a type, or with data's.
    let typed = r.byte() & 1 == 1;
    graph.output = outputs
        .iter()
        .map(|name| match typed && name == "y" {
            true => value_info(name, data_type, None),
            false => pb::ValueInfoProto {
                name: name.clone(),
                ..Default::default()
            },
        })
        .collect();
    let seed = fnv(bytes) ^ r.byte() as u64;
    let proto = pb::ModelProto {
        ir_version: 8,
        opset_import: vec![pb::OperatorSetIdProto {
            domain: String::new(),
            version: opset,
        }],
        producer_name: "gather-jit-fuzz".into(),
        graph: Some(graph),
        ..Default::default()
    };
    (proto, seed)
}
