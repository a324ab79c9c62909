//! Compiles the kernels of `src/signatures.rs` into one object for the target being built,
//! packs it into a static library and declares its entry points for `include!`.
//!
//! The object is for the target's baseline CPU (`Target::from_triple`), as portable as the
//! Rust code around it; `GATHER_JIT_AOT_HOST_CPU=1` in a native build (TARGET = HOST) uses
//! `Target::host()` instead: every CPU feature of the build machine, the JIT's own code
//! generator, like `-C target-cpu=native` for the Rust code.

use std::error::Error;
use std::fmt::Write as _;
use std::path::Path;

use gather_jit::aot::{Object, ObjectBuilder, Target};

#[path = "src/signatures.rs"]
mod signatures;

fn main() -> Result<(), Box<dyn Error>> {
    println!("cargo:rerun-if-changed=src/signatures.rs");
    println!("cargo:rerun-if-env-changed=GATHER_JIT_AOT_HOST_CPU");
    let triple = std::env::var("TARGET")?;
    let native = std::env::var("HOST")? == triple;
    let host_cpu = std::env::var_os("GATHER_JIT_AOT_HOST_CPU").is_some_and(|v| v == "1");
    if host_cpu && !native {
        return Err(format!("GATHER_JIT_AOT_HOST_CPU=1 needs a native build, not {triple}").into());
    }
    let target = if host_cpu {
        Target::host()?
    } else {
        Target::from_triple(&triple)?
    };
    let mut object = ObjectBuilder::new(&target)?;
    for (symbol, signature) in signatures::kernels() {
        object.add(symbol, &signature)?;
    }
    let object = object.finish()?;

    let out = std::env::var("OUT_DIR")?;
    let out = Path::new(&out);
    // The names rustc looks for with `-l static=gather_kernels`.
    let msvc = std::env::var("CARGO_CFG_TARGET_ENV")? == "msvc";
    let library = if msvc {
        "gather_kernels.lib"
    } else {
        "libgather_kernels.a"
    };
    std::fs::write(out.join("kernels.o"), object.bytes())?;
    std::fs::write(out.join(library), archive(&object))?;
    std::fs::write(out.join("kernels.h"), object.header("GATHER_KERNELS_H"))?;
    std::fs::write(out.join("kernels.rs"), declarations(&object, host_cpu))?;
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=gather_kernels");
    Ok(())
}

/// `object` as a static library: an `ar` archive of one member, with the GNU symbol table
/// (which GNU ld and MSVC's linker read). A crate's rlib does not keep it as it is: rustc
/// copies its member into the rlib, with the symbol table of the target's own format.
fn archive(object: &Object) -> Vec<u8> {
    fn header(out: &mut Vec<u8>, name: &str, size: usize) {
        // name, mtime, uid, gid, mode, size, magic: fixed-width ASCII fields; zero dates keep
        // the build reproducible.
        let line = format!("{name:<16}{:<12}{:<6}{:<6}{:<8}{size:<10}`\n", 0, 0, 0, 644);
        out.extend_from_slice(line.as_bytes());
    }
    // The names the object's symbol table spells: Mach-O's start with an underscore.
    let prefix = match std::env::var("CARGO_CFG_TARGET_VENDOR").as_deref() {
        Ok("apple") => "_",
        _ => "",
    };
    let symbols: Vec<String> = (object.kernels().iter())
        .map(|k| format!("{prefix}{}", k.symbol()))
        .collect();
    let table_bytes = 4 + 4 * symbols.len() + symbols.iter().map(|s| s.len() + 1).sum::<usize>();
    let table_padded = table_bytes + table_bytes % 2;
    // Every symbol is in the one member, which follows the magic and the table.
    let member_at = (8 + 60 + table_padded) as u32;
    let mut ar = b"!<arch>\n".to_vec();
    header(&mut ar, "/", table_bytes);
    ar.extend_from_slice(&(symbols.len() as u32).to_be_bytes());
    for _ in &symbols {
        ar.extend_from_slice(&member_at.to_be_bytes());
    }
    for symbol in &symbols {
        ar.extend_from_slice(symbol.as_bytes());
        ar.push(0);
    }
    if table_bytes % 2 == 1 {
        ar.push(b'\n');
    }
    header(&mut ar, "kernels.o/", object.bytes().len());
    ar.extend_from_slice(object.bytes());
    if object.bytes().len() % 2 == 1 {
        ar.push(b'\n');
    }
    ar
}

/// The Rust side of the object's header: each kernel's buffer sizes and its entry point, and
/// the table of [`Linked`] kernels the crate defines.
fn declarations(object: &Object, host_cpu: bool) -> String {
    let mut rs = String::new();
    let cpu = if host_cpu { "host" } else { "baseline" };
    let _ = writeln!(
        rs,
        "// Written by build.rs: the kernels of kernels.o.\n\n\
         /// The target triple the object was compiled for.\n\
         pub const TARGET: &str = {:?};\n\
         /// The CPU features it uses: `baseline` (every CPU of the architecture) or `host`.\n\
         pub const CPU: &str = {cpu:?};\n",
        object.triple()
    );
    let mut table = String::new();
    for kernel in object.kernels() {
        let symbol = kernel.symbol();
        let upper = symbol.to_ascii_uppercase();
        for buffer in kernel.buffers() {
            let _ = writeln!(
                rs,
                "/// The size of `{symbol}`'s {name} buffer in bytes.\n\
                 pub const {upper}_{}_BYTES: usize = {};",
                buffer.name.to_ascii_uppercase(),
                buffer.bytes,
                name = buffer.name,
            );
        }
        let _ = writeln!(
            rs,
            "unsafe extern \"C\" {{\n    \
             /// `{}`\n    \
             pub fn {symbol}(data: *const u8, indices: *const u8, output: *mut u8, \
             bad_position: *mut u64) -> i32;\n}}\n",
            kernel.description()
        );
        let _ = writeln!(
            table,
            "    Linked {{\n        symbol: {symbol:?},\n        entry: {symbol},\n        \
             data_bytes: {upper}_DATA_BYTES,\n        indices_bytes: {upper}_INDICES_BYTES,\n        \
             output_bytes: {upper}_OUTPUT_BYTES,\n    }},"
        );
    }
    let _ = writeln!(
        rs,
        "/// Every kernel of the object, in the order of `signatures::kernels()`.\n\
         pub static KERNELS: [Linked; {}] = [\n{table}];",
        object.kernels().len()
    );
    rs
}
