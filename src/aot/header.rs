//! [`Object`]: the written object's bytes, its kernels, and the C header that declares them.

use std::fmt::Write as _;

use super::AotKernel;

/// A relocatable object of ahead-of-time kernels, and what its header declares.
#[derive(Clone, Debug)]
pub struct Object {
    pub(super) bytes: Vec<u8>,
    pub(super) triple: String,
    pub(super) kernels: Vec<AotKernel>,
}

impl Object {
    /// The object file's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The target triple it was compiled for.
    pub fn triple(&self) -> &str {
        &self.triple
    }

    /// The exported kernels, in the order they were added.
    pub fn kernels(&self) -> &[AotKernel] {
        &self.kernels
    }

    /// A C header declaring every kernel and its buffers' sizes, guarded by `guard` (in which
    /// every character but ASCII letters, digits and `_` becomes `_`, and which gets a leading
    /// `_` if it starts with a digit or is empty, so that it is a C identifier).
    pub fn header(&self, guard: &str) -> String {
        let mut guard: String = (guard.chars())
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        if guard.chars().next().is_none_or(|c| c.is_ascii_digit()) {
            guard.insert(0, '_');
        }
        let mut h = String::new();
        let _ = writeln!(
            h,
            "/* Kernels compiled ahead of time by gather-jit for {}.\n \
             * Buffers are C-contiguous and native-endian. A kernel returns 0, or 1 when an\n \
             * index is rejected, after storing the element position of the first rejected\n \
             * index in the indices buffer to *bad_position. */\n\
             #ifndef {guard}\n#define {guard}\n\n#include <stdint.h>\n\n\
             #ifdef __cplusplus\nextern \"C\" {{\n#endif\n",
            self.triple
        );
        for kernel in &self.kernels {
            let _ = writeln!(h, "/* {} */", kernel.description());
            for buffer in &kernel.buffers {
                let _ = writeln!(
                    h,
                    "#define {}_{}_BYTES {}",
                    kernel.symbol,
                    buffer.name.to_ascii_uppercase(),
                    buffer.bytes
                );
            }
            let params: Vec<String> = (kernel.buffers.iter())
                .map(|buffer| match buffer.name {
                    "output" => "void *output".to_string(),
                    name => format!("const void *{name}"),
                })
                .collect();
            let _ = writeln!(
                h,
                "int32_t {}({}, uint64_t *bad_position);\n",
                kernel.symbol,
                params.join(", ")
            );
        }
        let _ = writeln!(h, "#ifdef __cplusplus\n}}\n#endif\n\n#endif /* {guard} */");
        h
    }
}
