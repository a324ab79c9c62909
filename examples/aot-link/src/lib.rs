//! Gather kernels compiled ahead of time by `build.rs` (with `gather_jit::aot`) and linked in
//! as a static library: [`KERNELS`], each callable safely on byte buffers through
//! [`Linked::run`]. [`check_against_interpreter`] runs one on random inputs and compares its
//! output with gather-jit's interpreter.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod signatures;

use gather_jit::ir::Validated;
use gather_jit::{Error, Op, Signature};
use gather_jit_workloads::random_inputs;

/// A kernel's C entry point: `(data, indices, output, bad_position) -> status` (see
/// `gather_jit::aot`).
pub type Entry = unsafe extern "C" fn(*const u8, *const u8, *mut u8, *mut u64) -> i32;

/// A kernel of the linked object, with the sizes of its buffers.
#[derive(Clone, Copy, Debug)]
pub struct Linked {
    /// The symbol it is exported under.
    pub symbol: &'static str,
    /// Its entry point.
    pub entry: Entry,
    /// The data buffer's size in bytes.
    pub data_bytes: usize,
    /// The indices buffer's size in bytes.
    pub indices_bytes: usize,
    /// The output buffer's size in bytes.
    pub output_bytes: usize,
}

// The entry points and `KERNELS`, as `build.rs` wrote them from the object.
include!(concat!(env!("OUT_DIR"), "/kernels.rs"));

/// Why [`Linked::run`] did not gather.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunError {
    /// A buffer is not of the kernel's size.
    WrongSize {
        /// `data`, `indices` or `output`.
        buffer: &'static str,
        /// The kernel's size of it, in bytes.
        expected: usize,
        /// The size given.
        actual: usize,
    },
    /// An index was rejected: the element position in the indices buffer of its index tuple.
    BadIndex {
        /// The position (in elements, not bytes).
        position: u64,
    },
}

impl Linked {
    /// Runs the kernel on native-endian, C-contiguous buffers of its signature's shapes and
    /// types (no alignment needed).
    ///
    /// # Errors
    /// [`RunError::WrongSize`] if a buffer's length is not the kernel's, before anything is
    /// read; [`RunError::BadIndex`] for a rejected index (the output is then partly written).
    // Inlined into callers in other crates, which then pay three compares rather than a call
    // on top of the kernel's.
    #[inline]
    pub fn run(&self, data: &[u8], indices: &[u8], output: &mut [u8]) -> Result<(), RunError> {
        for (buffer, expected, actual) in [
            ("data", self.data_bytes, data.len()),
            ("indices", self.indices_bytes, indices.len()),
            ("output", self.output_bytes, output.len()),
        ] {
            if expected != actual {
                return Err(RunError::WrongSize {
                    buffer,
                    expected,
                    actual,
                });
            }
        }
        let mut bad_position = 0u64;
        // SAFETY: the kernel reads `data_bytes` bytes of `data` and `indices_bytes` of
        // `indices` and writes `output_bytes` of `output` (checked equal to the slices'
        // lengths above), with any alignment; `output` is a unique borrow, so it overlaps
        // neither input; slices' pointers are never null, even when empty; `bad_position` is
        // a local the kernel may write. The kernel checks every index before it reads.
        let status = unsafe {
            (self.entry)(
                data.as_ptr(),
                indices.as_ptr(),
                output.as_mut_ptr(),
                &mut bad_position,
            )
        };
        match status {
            0 => Ok(()),
            _ => Err(RunError::BadIndex {
                position: bad_position,
            }),
        }
    }
}

/// The signature of the kernel exported as `symbol`.
pub fn signature(symbol: &str) -> Option<Signature> {
    (signatures::kernels().into_iter())
        .find(|(name, _)| *name == symbol)
        .map(|(_, signature)| signature)
}

/// Runs `kernel` on random data and random indices (every third of them negative, which the
/// ONNX rules wrap), and compares its output with gather-jit's interpreter. Returns the
/// number of output bytes compared.
///
/// # Errors
/// What differs, in words.
pub fn check_against_interpreter(kernel: &Linked, seed: u64) -> Result<usize, String> {
    let signature = signature(kernel.symbol).ok_or("no signature")?;
    let validated = signature.validate().map_err(|e| e.to_string())?;
    let (data, indices) = random_inputs(&validated, seed);
    let indices = with_negative_indices(&validated, &indices);
    let expected = gather_jit::interp::interpret(&validated, &data, &indices)
        .map_err(|e| format!("the interpreter failed: {e}"))?;
    let mut output = vec![0xA5u8; kernel.output_bytes];
    kernel
        .run(&data, &indices, &mut output)
        .map_err(|e| format!("{}: {e:?}", kernel.symbol))?;
    match output.iter().zip(&expected).position(|(a, b)| a != b) {
        None if output.len() == expected.len() => Ok(output.len()),
        None => Err(format!(
            "{}: {} output bytes, the interpreter's {}",
            kernel.symbol,
            output.len(),
            expected.len()
        )),
        Some(at) => Err(format!("{}: output byte {at} differs", kernel.symbol)),
    }
}

/// `indices` (valid, non-negative) with every third index `i` replaced by `i - dim`, the
/// negative index of the same element.
fn with_negative_indices(validated: &Validated, indices: &[u8]) -> Vec<u8> {
    let sig = validated.signature();
    let shape = &sig.indices_shape;
    let mut out = Vec::with_capacity(indices.len());
    for flat in 0..validated.indices_len() {
        let value = sig.index_type.read(indices, flat);
        // Only the last coordinate decides which dim a GatherND index selects.
        let last = flat % shape.last().copied().unwrap_or(1).max(1);
        let mut position = vec![0; shape.len()];
        if let Some(p) = position.last_mut() {
            *p = last;
        }
        let dim = sig.data_shape[validated.indexed_data_dim(&position)] as i128;
        let value = if flat % 3 == 0 { value - dim } else { value };
        assert!(
            sig.index_type.try_encode(value, &mut out),
            "signed index types"
        );
    }
    out
}

/// The element position in the indices buffer of the index tuple that the interpreter
/// rejects, if it rejects one: what a kernel stores to `bad_position`.
pub fn interpreter_bad_position(validated: &Validated, data: &[u8], indices: &[u8]) -> Option<u64> {
    let Err(Error::IndexOutOfRange { position, .. }) =
        gather_jit::interp::interpret(validated, data, indices)
    else {
        return None;
    };
    let sig = validated.signature();
    let shape = &sig.indices_shape;
    // The interpreter names the rejected element; a GatherND tuple (the last dim) is reported
    // at its first element.
    let mut position = position;
    if let (Op::GatherNd { .. }, Some(last)) = (sig.op, position.last_mut()) {
        *last = 0;
    }
    let flat = (position.iter().zip(shape)).fold(0, |flat, (&c, &n)| flat * n as u64 + c as u64);
    Some(flat)
}
