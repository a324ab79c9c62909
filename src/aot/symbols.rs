//! Which names an object's kernels can be exported under, so that the object links and its
//! header parses.

use crate::error::{Error, Result};

/// The names of the entry points' buffer parameters, which the header's size macros use.
pub(super) const BUFFER_NAMES: [&str; 5] = ["data", "indices", "scales", "zero_points", "output"];

/// Whether `symbol` can be exported beside the symbols `taken`: a C identifier that is no C
/// keyword, no function the kernels call, none of the object's own names, not taken, and not
/// spelled as a size macro of the header.
pub(super) fn check_symbol<'a>(
    symbol: &str,
    taken: impl Iterator<Item = &'a str> + Clone,
) -> Result<()> {
    let invalid = |reason| {
        Err(Error::InvalidSymbol {
            symbol: symbol.to_string(),
            reason,
        })
    };
    let mut chars = symbol.chars();
    let Some(first) = chars.next() else {
        return invalid("empty");
    };
    if !(first.is_ascii_alphabetic() || first == '_')
        || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return invalid("not a C identifier (letters, digits and _, not starting with a digit)");
    }
    if symbol.len() > 200 {
        return invalid("longer than 200 characters");
    }
    if symbol.contains("__gather_jit_") {
        return invalid("contains __gather_jit_, which the object's own symbols use");
    }
    // Exporting one of the functions the kernels call would bind their calls to the entry
    // point itself; a C keyword would make the header unparsable.
    if ["memcpy", "memmove", "memset"].contains(&symbol) {
        return invalid("names a C library function the object's kernels call");
    }
    if C_KEYWORDS.contains(&symbol) {
        return invalid("a C or C++ keyword");
    }
    // A name the C program the object is linked into, or its C library, already defines would
    // collide at link time or, worse, silently take the place of the library's.
    if C_PROGRAM_NAMES.contains(&symbol) {
        return invalid("a name a C program or its C library defines");
    }
    let mut rest = symbol.chars().skip(1);
    if symbol.starts_with('_')
        && rest
            .next()
            .is_some_and(|c| c == '_' || c.is_ascii_uppercase())
    {
        return invalid("reserved for the C implementation (starts with __, or _ and a capital)");
    }
    if taken.clone().any(|other| other == symbol) {
        return invalid("already exported by this object");
    }
    // The header `#define`s `SYMBOL_DATA_BYTES` and the like for every kernel: a symbol
    // spelled as another's size macro would be replaced by a number in its declaration.
    let size_macro = |of: &str, name: &str| {
        BUFFER_NAMES.iter().any(|buffer| {
            name.strip_prefix(of)
                .and_then(|rest| rest.strip_prefix('_'))
                .and_then(|rest| rest.strip_suffix("_BYTES"))
                .is_some_and(|middle| middle.eq_ignore_ascii_case(buffer))
        })
    };
    if taken
        .into_iter()
        .any(|other| size_macro(other, symbol) || size_macro(symbol, other))
    {
        return invalid("spelled as another kernel's size macro in the header");
    }
    Ok(())
}

/// Names that a C program (`main`) or the C library it links (the functions and objects of C's
/// standard headers a program most commonly meets, and the startup and POSIX names beside
/// them) defines: not the whole of any libc, but the ones an export would shadow by accident.
const C_PROGRAM_NAMES: &[&str] = &[
    "main",
    "errno",
    "environ",
    "exit",
    "_exit",
    "abort",
    "atexit",
    "at_quick_exit",
    "quick_exit",
    "malloc",
    "calloc",
    "realloc",
    "free",
    "aligned_alloc",
    "posix_memalign",
    "memcmp",
    "memchr",
    "strlen",
    "strcmp",
    "strncmp",
    "strcpy",
    "strncpy",
    "strcat",
    "strchr",
    "strdup",
    "printf",
    "fprintf",
    "sprintf",
    "snprintf",
    "vprintf",
    "puts",
    "putchar",
    "getchar",
    "fopen",
    "fclose",
    "fread",
    "fwrite",
    "fflush",
    "stdin",
    "stdout",
    "stderr",
    "read",
    "write",
    "open",
    "close",
    "signal",
    "raise",
    "system",
    "getenv",
    "setenv",
    "time",
    "clock",
    "sleep",
    "qsort",
    "bsearch",
    "abs",
    "labs",
    "rand",
    "srand",
    "setjmp",
    "longjmp",
    "assert",
    "_start",
    "_init",
    "_fini",
];

/// Keywords of C and C++ that a declaration cannot take as a function name.
const C_KEYWORDS: &[&str] = &[
    "alignas",
    "alignof",
    "and",
    "asm",
    "auto",
    "bool",
    "break",
    "case",
    "catch",
    "char",
    "class",
    "const",
    "constexpr",
    "continue",
    "default",
    "delete",
    "do",
    "double",
    "else",
    "enum",
    "explicit",
    "extern",
    "false",
    "float",
    "for",
    "friend",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "mutable",
    "namespace",
    "new",
    "not",
    "nullptr",
    "operator",
    "or",
    "private",
    "protected",
    "public",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "template",
    "this",
    "throw",
    "true",
    "try",
    "typedef",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "while",
    "_Bool",
    "_Complex",
    "_Alignas",
    "_Alignof",
    "_Atomic",
    "_Generic",
    "_Noreturn",
    "_Static_assert",
    "_Thread_local",
    "int32_t",
    "uint64_t",
];
