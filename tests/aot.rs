//! The `aot` module's refusals, its header and its kernels' relocations: what a caller sees
//! before any object runs (the objects' outputs are checked by the cross test, `tests/cross/`).

use gather_jit::aot::{ObjectBuilder, Target};
use gather_jit::{Error, QuantizedSignature, Signature};

fn builder(triple: &str) -> ObjectBuilder {
    ObjectBuilder::new(&Target::from_triple(triple).expect("target")).expect("builder")
}

#[test]
fn unknown_and_unsupported_triples_are_errors_naming_them() {
    for triple in [
        "",
        "not-a-triple",
        "wasm32-unknown-unknown",
        "mips-unknown-linux-gnu",
    ] {
        match Target::from_triple(triple) {
            Err(Error::UnsupportedTarget { triple: named, .. }) => assert_eq!(named, triple),
            other => panic!("{triple}: {other:?}"),
        }
    }
}

#[test]
fn the_three_documented_triples_make_objects_of_their_formats() {
    let sig = Signature::gather(&[5, 3], &[4], 0, 0);
    for (triple, magic) in [
        ("x86_64-unknown-linux-gnu", &b"\x7fELF"[..]),
        ("aarch64-unknown-linux-gnu", b"\x7fELF"),
        ("aarch64-apple-darwin", &0xfeed_facf_u32.to_le_bytes()),
    ] {
        let mut object = builder(triple);
        object.add("k", &sig).expect("compiles");
        let object = object.finish().expect("object");
        assert!(object.bytes().starts_with(magic), "{triple}");
        assert_eq!(object.triple(), triple);
    }
}

#[test]
fn symbols_must_be_unused_c_identifiers() {
    let sig = Signature::gather(&[5, 3], &[4], 0, 0);
    let mut object = builder("x86_64-unknown-linux-gnu");
    object.add("ok_1", &sig).expect("compiles");
    for bad in [
        "",
        "1st",
        "with space",
        "dash-ed",
        "é",
        "ok_1",
        "x__gather_jit_kernel",
        // Names a C program or its C library defines, and those C reserves for itself.
        "main",
        "errno",
        "exit",
        "memset",
        "__start",
        "_Exit",
    ] {
        match object.add(bad, &sig) {
            Err(Error::InvalidSymbol { symbol, .. }) => assert_eq!(symbol, bad),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
}

#[test]
fn signatures_fail_validation_as_they_do_for_the_jit() {
    let bad = Signature::gather(&[5, 3], &[4], 2, 0);
    let jit = gather_jit::jit(&bad).expect_err("invalid").to_string();
    let mut object = builder("aarch64-unknown-linux-gnu");
    assert_eq!(object.add("k", &bad).expect_err("invalid").to_string(), jit);
}

#[test]
fn the_header_declares_every_kernel_with_its_buffer_sizes() {
    let mut object = builder("aarch64-unknown-linux-gnu");
    object
        .add("rows", &Signature::gather(&[10, 4], &[3], 0, 0))
        .expect("compiles");
    let q = QuantizedSignature::gguf(gather_jit::GgufFormat::Q8_0, 4, 32, &[2]);
    object.add_quantized("q8", &q).expect("compiles");
    let header = object.finish().expect("object").header("KERNELS_H");
    for line in [
        "#ifndef KERNELS_H",
        "#define rows_DATA_BYTES 160",
        "#define rows_INDICES_BYTES 24",
        "#define rows_OUTPUT_BYTES 48",
        "int32_t rows(const void *data, const void *indices, void *output, uint64_t *bad_position);",
        // Four rows of one Q8_0 block (2 bytes of scale and 32 quants).
        "#define q8_DATA_BYTES 136",
        "#define q8_OUTPUT_BYTES 256",
        "int32_t q8(const void *data, const void *indices, const void *scales, const void *zero_points, void *output, uint64_t *bad_position);",
    ] {
        assert!(header.lines().any(|l| l == line), "{line}\n{header}");
    }
}

/// Cranelift's riscv64 backend has no 128-bit vectors without the V extension (which
/// `riscv64gc` lacks) and hit `unreachable!()` on the vector moves of a kernel copying 64-byte
/// rows: `add` panicked. A kernel that needs vectors is now refused as the target's limit;
/// one that needs none still compiles.
#[test]
fn a_target_without_vector_registers_refuses_vector_code_instead_of_panicking() {
    let mut object = builder("riscv64gc-unknown-linux-gnu");
    let rows = Signature::gather(&[10, 16], &[3], 0, 0);
    match object.add("rows", &rows) {
        Err(Error::UnsupportedTarget { triple, reason, .. }) => {
            assert_eq!(triple, "riscv64gc-unknown-linux-gnu");
            assert!(reason.contains("vector"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let scalars = Signature::gather(&[10], &[3], 0, 0);
    object.add("scalars", &scalars).expect("no vectors needed");
    let object = object
        .finish()
        .expect("an object of the kernel that compiled");
    assert_eq!(object.kernels().len(), 1);
    assert!(object.header("H").contains("int32_t scalars("));
}

#[test]
fn relocations_are_the_memcpy_calls_of_large_slices() {
    for triple in ["x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu"] {
        let mut object = builder(triple);
        // Rows of 1 KiB are copied with memcpy, rows of 64 bytes inline.
        let large = Signature::gather(&[10, 256], &[3], 0, 0);
        let small = Signature::gather(&[10, 16], &[3], 0, 0);
        object.add("large", &large).expect("compiles");
        object.add("small", &small).expect("compiles");
        let object = object.finish().expect("object");
        let [large, small] = object.kernels() else {
            panic!("two kernels")
        };
        assert_eq!(small.relocations(), [], "{triple}");
        assert!(!large.relocations().is_empty(), "{triple}");
        for relocation in large.relocations() {
            assert_eq!(relocation.symbol, "memcpy", "{triple}");
            assert!(relocation.offset + 4 <= large.machine_code().len());
        }
        if triple.starts_with("x86_64") {
            // The callee's address is loaded from the GOT (`mov r64, [rip + disp32]`), whose
            // displacement the linker writes: zeros until then.
            let [got] = large.relocations() else {
                panic!("one call: {:?}", large.relocations())
            };
            assert_eq!(got.kind, "X86GOTPCRel4");
            let code = large.machine_code();
            assert_eq!(code[got.offset - 2], 0x8B, "a mov");
            assert_eq!(code[got.offset - 1] & 0xC7, 0x05, "rip-relative");
            assert_eq!(code[got.offset..got.offset + 4], [0; 4]);
        }
    }
}

/// These combinations panicked inside Cranelift or `cranelift-object` (aarch64's GOT
/// relocations in COFF, s390x objects other than ELF, big-endian aarch64), or failed the
/// verifier with a page of CLIF as the reason (32-bit pointers): now refused by name.
#[test]
fn targets_the_backends_cannot_write_are_refused_not_panicked_on() {
    for triple in [
        "aarch64-pc-windows-msvc",
        "s390x-apple-darwin",
        "s390x-pc-windows-msvc",
        "aarch64_be-unknown-linux-gnu",
        "aarch64-unknown-linux-gnu_ilp32",
    ] {
        match Target::from_triple(triple) {
            Err(Error::UnsupportedTarget {
                triple: named,
                reason,
                ..
            }) => {
                assert_eq!(named, triple);
                assert!(reason.len() < 100, "{reason}");
            }
            other => panic!("{triple}: {other:?}"),
        }
    }
}

/// Exported as `memcpy`, the entry point bound the kernel's own memcpy calls to itself; as
/// `int`, the header did not parse.
#[test]
fn symbols_the_kernels_call_or_c_keywords_are_refused() {
    let sig = Signature::gather(&[10, 512], &[3], 0, 0);
    let mut object = builder("x86_64-unknown-linux-gnu");
    for bad in ["memcpy", "memmove", "memset", "int", "void"] {
        match object.add(bad, &sig) {
            Err(Error::InvalidSymbol { symbol, .. }) => assert_eq!(symbol, bad),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
}

#[test]
fn header_guards_become_c_identifiers() {
    let mut object = builder("x86_64-unknown-linux-gnu");
    object
        .add("k", &Signature::gather(&[5, 3], &[4], 0, 0))
        .expect("compiles");
    let object = object.finish().expect("object");
    for (guard, expected) in [
        ("H */ int x; /*", "H____int_x____"),
        ("9a", "_9a"),
        ("", "_"),
    ] {
        let header = object.header(guard);
        assert!(
            header.contains(&format!("#ifndef {expected}\n")),
            "{guard:?}\n{header}"
        );
        assert!(!header.contains("int x;"), "{header}");
    }
}

#[test]
fn a_symbol_spelled_as_another_kernels_size_macro_is_refused() {
    let sig = Signature::gather(&[5, 3], &[4], 0, 0);
    let mut object = builder("x86_64-unknown-linux-gnu");
    object.add("a", &sig).expect("compiles");
    for bad in ["a_OUTPUT_BYTES", "a_data_BYTES", "a_ZERO_POINTS_BYTES"] {
        assert!(
            matches!(object.add(bad, &sig), Err(Error::InvalidSymbol { .. })),
            "{bad}"
        );
    }
    object.add("a_OUTPUT", &sig).expect("not a macro's name");
    // The other way round: `b` would make `b_INDICES_BYTES`, an existing kernel's name.
    let mut object = builder("x86_64-unknown-linux-gnu");
    object.add("b_INDICES_BYTES", &sig).expect("compiles");
    assert!(matches!(
        object.add("b", &sig),
        Err(Error::InvalidSymbol { .. })
    ));
}

#[test]
fn a_symbol_whose_kernel_the_target_refused_can_be_added_again() {
    let mut object = builder("riscv64gc-unknown-linux-gnu");
    let rows = Signature::gather(&[10, 16], &[3], 0, 0);
    assert!(object.add("k", &rows).is_err(), "vector moves on riscv64gc");
    object
        .add("k", &Signature::gather(&[10], &[3], 0, 0))
        .expect("the name is free again");
    let object = object.finish().expect("object");
    assert_eq!(object.kernels().len(), 1);
}
