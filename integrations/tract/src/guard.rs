//! Defences against hostile models: panics caught as errors, a plan run with each node's
//! outputs checked for size first, and allocations probed before tract makes them.

use tract_onnx::tract_hir::internal::*;

/// Runs `f`, turning a panic inside it into an error `"{phase} panicked: {message}"`, so that
/// tract's calls on an untrusted model (see the crate docs) fail like any other. The process's
/// panic hook still runs first; this function leaves it alone.
///
/// Whatever `f` had borrowed may be left half-updated by the panic (which is why `f` need not be
/// `UnwindSafe`): drop it rather than use it again. tract's models and plans taken by value
/// go with the unwinding.
///
/// # Errors
/// `f`'s own error, or the panic as an error naming `phase`.
pub fn catch_panic<T>(phase: &str, f: impl FnOnce() -> TractResult<T>) -> TractResult<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let message = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("a panic without a message")
                .to_string();
            // A payload whose drop panics as well must not unwind out of here; one whose drop
            // panics twice is leaked.
            if let Err(again) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                drop(payload);
            })) {
                std::mem::forget(again);
            }
            Err(format_err!("{phase} panicked: {message}"))
        }
    }
}

/// Runs `plan` on `inputs` as `plan.run(inputs)` does, after checking before each node's
/// evaluation that the outputs its op declares for these very inputs have sizes that fit in
/// memory's address range: tract computes a tensor's bytes with wrapping arithmetic, so a
/// shape taken from a hostile value (TopK's `k` of `2^62 + 5` on 3 rows: 60 bytes allocated,
/// 3,600 written) would make it write past the allocation. A refused node is an error naming
/// it.
///
/// The check asks each op for its output facts, given the inputs' types and shapes and, for
/// inputs of at most 64 elements (the counts and shapes that ops such as TopK, Reshape or
/// Range read), their values; an op that cannot state its facts from these, or states
/// symbolic ones, is not checked. It narrows what a hostile model can do at run time; tract's
/// analysis and constant folding (`into_typed`, `into_optimized`) run its ops without it. It
/// costs a few allocations per node: time runs with `plan.run`, once a checked run on the
/// same inputs has passed.
///
/// # Errors
/// As `plan.run`, or a node whose output would not fit.
pub fn run_checked(plan: &Arc<TypedSimplePlan>, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
    let mut state = SimpleState::new(plan)?;
    state.run_plan_with_eval(inputs, |ctx, op_state, node, inputs| {
        check_output_sizes(node, &inputs)?;
        tract_onnx::tract_core::plan::eval(ctx, op_state, node, inputs)
    })
}

/// Inputs of at most this many elements reach an op's `output_facts` with their values, so
/// that the shape an op reads from a value is the one checked; larger ones by type and shape.
pub(crate) const VALUE_FACT_ELEMENTS: usize = 64;

/// Fails if `node`'s op declares, for `inputs`, an output whose bytes exceed `isize::MAX` (or
/// overflow) or whose shape holds a negative dim.
pub(crate) fn check_output_sizes(node: &TypedNode, inputs: &[TValue]) -> TractResult<()> {
    if let Some(topk) = node.op_as::<tract_onnx::tract_core::ops::array::Topk>() {
        return check_topk(node, topk.axis, inputs);
    }
    let facts: TVec<TypedFact> = inputs
        .iter()
        .map(|value| {
            // A value tract cannot make a fact of (an exotic one) is given by type and shape.
            let konst = (value.len() <= VALUE_FACT_ELEMENTS)
                .then(|| TypedFact::try_from(value.clone().into_arc_tensor()).ok())
                .flatten();
            konst.unwrap_or_else(|| TypedFact::dt_shape(value.datum_type(), value.shape()))
        })
        .collect();
    let facts: TVec<&TypedFact> = facts.iter().collect();
    // An op that cannot say (say, one that needs the value of a large input) is not checked.
    let Ok(outputs) = node.op.output_facts(&facts) else {
        return Ok(());
    };
    'outputs: for (slot, fact) in outputs.iter().enumerate() {
        let mut dims = Vec::with_capacity(fact.rank());
        for dim in fact.shape.iter() {
            match dim.to_i64() {
                Ok(dim) => dims.push(dim),
                Err(_) => continue 'outputs,
            }
        }
        let refuse = || {
            format_err!(
                "{}: output {slot} of shape {dims:?} ({:?}) does not fit in memory",
                node.name,
                fact.datum_type
            )
        };
        let mut bytes = Some(fact.datum_type.size_of());
        for &dim in &dims {
            let dim = usize::try_from(dim).map_err(|_| refuse())?;
            bytes = bytes.and_then(|b| b.checked_mul(dim));
        }
        let empty = dims.contains(&0);
        if !empty && bytes.is_none_or(|b| b > isize::MAX as usize) {
            return Err(refuse());
        }
    }
    Ok(())
}

/// tract's TopK takes its output's shape from `k` without a check (and its `output_facts`
/// cannot state it when `k` has rank 1, as ONNX gives it), so `k` is checked here: ONNX
/// requires `0 <= k <= ` the axis's length, which also bounds the output by the input.
pub(crate) fn check_topk(node: &TypedNode, axis: usize, inputs: &[TValue]) -> TractResult<()> {
    let [input, k] = inputs else {
        bail!("{}: TopK takes 2 inputs, got {}", node.name, inputs.len());
    };
    let len = *input.shape().get(axis).ok_or_else(|| {
        format_err!(
            "{}: TopK axis {axis} is out of range for rank {}",
            node.name,
            input.rank()
        )
    })?;
    ensure!(
        k.len() == 1,
        "{}: TopK's k must hold one value, it has shape {:?}",
        node.name,
        k.shape()
    );
    let k = k.cast_to::<i64>()?.try_as_plain_ram()?.as_slice::<i64>()?[0];
    ensure!(
        usize::try_from(k).is_ok_and(|k| k <= len),
        "{}: TopK's k {k} is out of range for axis {axis} of length {len}",
        node.name
    );
    Ok(())
}

/// `tensor`'s bytes in host memory, as a plain view holding at least the bytes its type and
/// shape say: an error naming `op` and `what` (the input) for a tensor whose storage is not
/// plain (block-quantized weights, packed matrices, device memory), whose bytes the kernels
/// cannot read and on which tract's pointer accessors panic.
pub(crate) fn plain_bytes<'t>(
    tensor: &'t Tensor,
    op: &str,
    what: &str,
) -> TractResult<PlainView<'t>> {
    let plain = tensor
        .try_as_plain_ram()
        .with_context(|| format!("{op}: the {what} tensor's storage is not plain"))?;
    let expected = tensor_bytes(tensor.datum_type(), tensor.shape())?;
    ensure!(
        plain.as_bytes().len() >= expected,
        "{op}: the {what} tensor holds {} bytes, its type and shape say {expected}",
        plain.as_bytes().len()
    );
    Ok(plain)
}

/// The bytes of a tensor of `dt` and `shape`; an error if they overflow a `usize`.
pub(crate) fn tensor_bytes(dt: DatumType, shape: &[usize]) -> TractResult<usize> {
    if shape.contains(&0) {
        return Ok(0);
    }
    shape
        .iter()
        .try_fold(dt.size_of(), |bytes, &dim| bytes.checked_mul(dim))
        .ok_or_else(|| {
            format_err!("a {dt:?} tensor of shape {shape:?} has more bytes than fit in memory")
        })
}

/// Outputs of at most this many bytes are allocated without [`probe_allocation`] first: a
/// refusal that small means the allocator cannot find one page, and then the allocations that
/// follow every evaluation whatever its output (the output value's `Arc`, tract's vectors of
/// values) abort the process anyway, so a probe could only move the abort, at a cost per call
/// (an aligned allocation and its release) that the smallest gathers would feel.
pub(crate) const PROBE_FROM_BYTES: usize = 4096;

/// Checks that a tensor of `dt` and `shape` fits in memory now: its size does not overflow, and
/// the allocator grants a block of its bytes at tract's alignment (then freed at once). Call
/// it before `Tensor::uninitialized_dt`, `Tensor::zero_dt`, `Tensor::from_raw_dt` and the like
/// when the shape comes from untrusted input: tract allocates a tensor's `Blob` infallibly and
/// panics ("failed to allocate") when the allocator refuses, where this returns an error that
/// names the bytes. Another thread may take the memory between this check and the
/// allocation, so it narrows that window rather than closing it.
///
/// # Errors
/// The size overflows, or the allocator refuses it.
pub fn check_allocation(dt: DatumType, shape: &[usize]) -> TractResult<()> {
    let bytes = tensor_bytes(dt, shape)?;
    probe_allocation(bytes, || format!("a {dt:?} tensor of shape {shape:?}"))
}

/// Asks the allocator for `bytes` at tract's tensor alignment (`vector_size()`, as
/// `Tensor::uninitialized_dt` asks), and frees them at once; `what` names them in the error.
pub(crate) fn probe_allocation(bytes: usize, what: impl FnOnce() -> String) -> TractResult<()> {
    if bytes == 0 {
        return Ok(());
    }
    let refused = |what: String| format_err!("could not allocate {bytes} bytes for {what}");
    let Ok(layout) = std::alloc::Layout::from_size_align(bytes, vector_size()) else {
        return Err(refused(what()));
    };
    // SAFETY: the layout's size is not zero. `black_box` keeps the optimiser from removing
    // the unused allocation and folding its null check to "granted" (which it does).
    let block = std::hint::black_box(unsafe { std::alloc::alloc(layout) });
    if block.is_null() {
        return Err(refused(what()));
    }
    // SAFETY: `block` was allocated just above with this layout and is not used after.
    unsafe { std::alloc::dealloc(block, layout) };
    Ok(())
}
