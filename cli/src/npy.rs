//! A small `.npy` reader and writer (format versions 1.0, 2.0 and 3.0).
//!
//! Reading accepts little- or big-endian, C or Fortran order, and returns native-endian
//! C-order bytes, which is what the kernels take. Writing produces version 1.0 (2.0 if the
//! header needs it), native-endian, C order. Only the element types of the IR are supported;
//! bf16 (which numpy lacks) is a 2-byte void, `|V2`.
//!
//! Hand-written rather than `npyz`, which parses the header (bf16's `|V2`, both byte orders and
//! Fortran order included) but not as this CLI must read a file: `npyz` 0.9 allocates a
//! header's declared length (up to 4 GiB) before reading it, quotes a malformed header whole in
//! a multi-line error, reads the data element by element into a `Vec` it allocates infallibly
//! (a second copy of the array; here the file's buffer becomes the array, and every buffer is
//! reserved fallibly), leaves Fortran order to the caller, and reads `.npz` through zip 0.6.
//! With the checks it would need around it, it would replace only the header's dict parser
//! below, for a dozen more crates in the build (a parser generator, and C code through
//! `stacker`).
//! `.npz` archives are read and written with the `zip` crate (see [`crate::npz`]).

use std::io::Read;

use gather_jit::{DType, IndexType};

const MAGIC: &[u8] = b"\x93NUMPY";

/// The element type of an `.npy` file: numpy's kind character and size in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ElementType {
    /// `f`, `i`, `u`, `b` or `V` (void: bf16).
    pub kind: u8,
    /// Bytes per element.
    pub size: usize,
}

impl ElementType {
    /// The IR element type, if the IR has one.
    pub fn dtype(self) -> Option<DType> {
        DType::ALL.into_iter().find(|&d| ElementType::of(d) == self)
    }

    /// The IR index type, if this is an integer type.
    pub fn index_type(self) -> Option<IndexType> {
        IndexType::from_name(self.dtype()?.name())
    }

    /// The `.npy` element type of an IR element type.
    pub fn of(dtype: DType) -> ElementType {
        let kind = match dtype {
            DType::F16 | DType::F32 | DType::F64 => b'f',
            DType::Bf16 => b'V',
            DType::I8 | DType::I16 | DType::I32 | DType::I64 => b'i',
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => b'u',
            DType::Bool => b'b',
        };
        ElementType {
            kind,
            size: dtype.size(),
        }
    }

    /// numpy's `descr` in native byte order (`<f4`, `|u1`, `|V2`).
    fn native_descr(self) -> String {
        let order = if self.size == 1 || self.kind == b'V' {
            '|'
        } else if cfg!(target_endian = "little") {
            '<'
        } else {
            '>'
        };
        format!("{order}{}{}", self.kind as char, self.size)
    }
}

/// An array read from `.npy`: C-order, native-endian bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Array {
    /// The element type.
    pub element: ElementType,
    /// The shape (empty for a scalar).
    pub shape: Vec<usize>,
    /// `product(shape) * element.size` bytes.
    pub bytes: Vec<u8>,
}

/// numpy's own bound on an `.npy` header (`numpy.load`'s `max_header_size`): a longer header
/// is refused before it is read.
pub const MAX_HEADER_LEN: usize = 10_000;

/// What is known of the length of an `.npy` file before it is read.
#[derive(Clone, Copy, Debug)]
pub enum Length {
    /// A regular file's length: the data is reserved whole once it matches the header.
    Known(u64),
    /// What another header says (an archive's word for its member): a length that differs
    /// from the `.npy` header's is refused, but the buffer grows only as bytes arrive, so a
    /// lying archive costs what its member really holds.
    Declared(u64),
}

/// The most reserved ahead of the bytes of a stream that has not proven its length.
const STREAM_RESERVE: usize = 1 << 24;

/// Reads an `.npy` file from `reader` with a bound: the header first, then exactly the bytes
/// its shape and `descr` announce, then one byte more to prove the end. A `length` that
/// differs from what the header announces is refused before any data is read or allocated.
///
/// # Errors
/// A message naming what is wrong: magic, version, a header past [`MAX_HEADER_LEN`], an
/// unsupported `descr`, a data length that does not match the shape, a bool byte other than 0
/// or 1, or no memory for the data.
pub fn read(reader: &mut dyn Read, length: Length) -> Result<Array, String> {
    let mut prefix = [0u8; 12];
    let got = read_up_to(reader, &mut prefix[..10])?;
    if got < MAGIC.len() || !prefix.starts_with(MAGIC) {
        return Err("not an .npy file (no \\x93NUMPY magic)".into());
    }
    if got < 10 {
        return Err("truncated .npy header".into());
    }
    let (major, minor) = (prefix[6], prefix[7]);
    let (header_len, header_start) = match major {
        1 => (u16::from_le_bytes([prefix[8], prefix[9]]) as usize, 10usize),
        2 | 3 => {
            if read_up_to(reader, &mut prefix[10..12])? < 2 {
                return Err("truncated .npy header".into());
            }
            let len = u32::from_le_bytes([prefix[8], prefix[9], prefix[10], prefix[11]]);
            (usize::try_from(len).unwrap_or(usize::MAX), 12)
        }
        _ => return Err(format!("unsupported .npy format version {major}.{minor}")),
    };
    if header_len > MAX_HEADER_LEN {
        return Err(format!(
            "the .npy header announces {header_len} bytes, more than the {MAX_HEADER_LEN} numpy \
             itself reads"
        ));
    }
    let mut header = vec![0u8; header_len];
    if read_up_to(reader, &mut header)? < header_len {
        return Err("truncated .npy header".into());
    }
    let header = std::str::from_utf8(&header).map_err(|_| "the .npy header is not text")?;
    let header = Header::parse(header)?;
    let (element, big_endian) = parse_descr(header.descr)?;
    let shape = header.shape;
    let len = shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .and_then(|n| n.checked_mul(element.size))
        .ok_or("shape too large")?;
    let expected = || {
        format!(
            "expected {len} bytes of data for shape {shape:?} and descr '{}'",
            header.descr
        )
    };
    let reserve = match length {
        Length::Known(size) | Length::Declared(size) => {
            let body = size.saturating_sub((header_start + header_len) as u64);
            if body != len as u64 {
                return Err(format!("{}, found {body}", expected()));
            }
            if let Length::Known(_) = length {
                len
            } else {
                len.min(STREAM_RESERVE)
            }
        }
    };
    let mut bytes = Vec::new();
    let no_memory = || format!("cannot allocate {len} bytes for the data");
    bytes.try_reserve_exact(reserve).map_err(|_| no_memory())?;
    // read_to_end grows the buffer fallibly past `reserve` (an OutOfMemory error, not an
    // abort).
    (reader.take(len as u64))
        .read_to_end(&mut bytes)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::OutOfMemory => no_memory(),
            _ => e.to_string(),
        })?;
    if bytes.len() < len {
        return Err(format!("{}, found {}", expected(), bytes.len()));
    }
    if read_up_to(reader, &mut [0u8])? > 0 {
        return Err(format!("{}, found more", expected()));
    }
    if element.kind == b'b'
        && let Some(i) = bytes.iter().position(|&b| b > 1)
    {
        return Err(format!("bool element {i} is {}, not 0 or 1", bytes[i]));
    }
    if big_endian != cfg!(target_endian = "big") && element.size > 1 && element.kind != b'V' {
        for chunk in bytes.chunks_exact_mut(element.size) {
            chunk.reverse();
        }
    }
    if header.fortran_order && shape.len() > 1 {
        bytes = fortran_to_c(&bytes, &shape, element.size)?;
    }
    Ok(Array {
        element,
        shape,
        bytes,
    })
}

/// Fills as much of `buf` as `reader` holds; returns how much that was (less than `buf.len()`
/// only at the end).
fn read_up_to(reader: &mut dyn Read, buf: &mut [u8]) -> Result<usize, String> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(filled)
}

/// The start of an `.npy` file holding native-endian C-order data of `shape`: magic, version,
/// header length and header, padded so that the data that follows starts at a multiple of 64.
pub fn header(element: ElementType, shape: &[usize]) -> Vec<u8> {
    let shape_text = match shape {
        [] => "()".to_string(),
        [d] => format!("({d},)"),
        dims => {
            let dims: Vec<String> = dims.iter().map(usize::to_string).collect();
            format!("({})", dims.join(", "))
        }
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape_text}, }}",
        element.native_descr()
    );
    // Pad with spaces and a newline so that the data starts at a multiple of 64 bytes.
    let (version, prefix) = if header.len() + 1 + 10 <= u16::MAX as usize {
        (1u8, 10)
    } else {
        (2u8, 12)
    };
    let total = (prefix + header.len() + 1).div_ceil(64) * 64;
    header.extend(std::iter::repeat_n(' ', total - prefix - header.len() - 1));
    header.push('\n');
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[version, 0]);
    if version == 1 {
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    out
}

/// The three keys of an `.npy` header dict.
struct Header<'a> {
    descr: &'a str,
    fortran_order: bool,
    shape: Vec<usize>,
}

/// How much of a malformed header an error message quotes.
const QUOTED_HEADER_CHARS: usize = 120;

impl<'a> Header<'a> {
    /// Parses the Python dict literal `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`.
    fn parse(text: &'a str) -> Result<Header<'a>, String> {
        let bad = |what: &str| {
            let text = text.trim();
            let quoted = match text.char_indices().nth(QUOTED_HEADER_CHARS) {
                Some((end, _)) => format!("{}...", &text[..end]),
                None => text.to_string(),
            };
            format!("malformed .npy header ({what}): {quoted}")
        };
        let mut p = Cursor::new(text);
        p.expect(b'{').ok_or_else(|| bad("no '{'"))?;
        let (mut descr, mut fortran_order, mut shape) = (None, None, None);
        loop {
            if p.eat(b'}') {
                break;
            }
            let key = p.string().ok_or_else(|| bad("key"))?;
            p.expect(b':').ok_or_else(|| bad("':'"))?;
            match key {
                "descr" => {
                    if p.peek() == Some(b'[') {
                        return Err("structured dtypes are not supported".into());
                    }
                    descr = Some(p.string().ok_or_else(|| bad("descr"))?);
                }
                "fortran_order" => {
                    fortran_order = Some(p.boolean().ok_or_else(|| bad("fortran_order"))?)
                }
                "shape" => shape = Some(p.tuple()?.ok_or_else(|| bad("shape"))?),
                other => return Err(bad(&format!("unknown key '{other}'"))),
            }
            if !p.eat(b',') {
                p.expect(b'}').ok_or_else(|| bad("no '}'"))?;
                break;
            }
        }
        Ok(Header {
            descr: descr.ok_or_else(|| bad("no 'descr'"))?,
            fortran_order: fortran_order.ok_or_else(|| bad("no 'fortran_order'"))?,
            shape: shape.ok_or_else(|| bad("no 'shape'"))?,
        })
    }
}

/// A cursor over the header text that skips whitespace before each token.
struct Cursor<'a> {
    text: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn new(text: &'a str) -> Cursor<'a> {
        Cursor {
            text: text.as_bytes(),
            at: 0,
        }
    }

    fn peek(&mut self) -> Option<u8> {
        while self.text.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
        self.text.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> bool {
        let found = self.peek() == Some(byte);
        if found {
            self.at += 1;
        }
        found
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        self.eat(byte).then_some(())
    }

    /// A quoted string without escapes.
    fn string(&mut self) -> Option<&'a str> {
        let quote = self.peek().filter(|&q| q == b'\'' || q == b'"')?;
        let start = self.at + 1;
        let len = self.text[start..].iter().position(|&b| b == quote)?;
        self.at = start + len + 1;
        std::str::from_utf8(&self.text[start..start + len]).ok()
    }

    fn boolean(&mut self) -> Option<bool> {
        self.peek()?;
        for (word, value) in [("True", true), ("False", false)] {
            if self.text[self.at..].starts_with(word.as_bytes()) {
                self.at += word.len();
                return Some(value);
            }
        }
        None
    }

    /// A tuple of non-negative integers: `()`, `(3,)`, `(2, 3)`; `Ok(None)` if malformed.
    ///
    /// # Errors
    /// No memory for the dims (a header may list millions).
    fn tuple(&mut self) -> Result<Option<Vec<usize>>, String> {
        if self.expect(b'(').is_none() {
            return Ok(None);
        }
        let mut dims = Vec::new();
        loop {
            if self.eat(b')') {
                return Ok(Some(dims));
            }
            if self.peek().is_none() {
                return Ok(None);
            }
            let digits = self.text[self.at..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
            let number = std::str::from_utf8(&self.text[self.at..self.at + digits]).ok();
            let Some(dim) = number.and_then(|n| n.parse().ok()) else {
                return Ok(None);
            };
            dims.try_reserve(1).map_err(|_| {
                format!(
                    "cannot allocate memory for the {} dims of the shape",
                    dims.len() + 1
                )
            })?;
            dims.push(dim);
            self.at += digits;
            if !self.eat(b',') {
                return Ok(self.expect(b')').map(|()| dims));
            }
        }
    }
}

/// Splits `descr` into an element type and whether it is big-endian.
fn parse_descr(descr: &str) -> Result<(ElementType, bool), String> {
    let unsupported = || {
        format!(
            "element type '{descr}' is not supported (bool, int8..int64, uint8..uint64, float16/32/64; bf16 as |V2)"
        )
    };
    let bytes = descr.as_bytes();
    let (big_endian, rest) = match bytes.first() {
        Some(b'<') => (false, &bytes[1..]),
        Some(b'>') => (true, &bytes[1..]),
        Some(b'|') | Some(b'=') => (cfg!(target_endian = "big"), &bytes[1..]),
        _ => (cfg!(target_endian = "big"), bytes),
    };
    let (&kind, size) = rest.split_first().ok_or_else(unsupported)?;
    let size: usize = std::str::from_utf8(size)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(unsupported)?;
    let element = ElementType { kind, size };
    element.dtype().ok_or_else(unsupported)?;
    Ok((element, big_endian))
}

/// Reorders a Fortran-order (column-major) buffer into C order.
///
/// # Errors
/// No memory for the reordered copy.
fn fortran_to_c(bytes: &[u8], shape: &[usize], size: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    out.try_reserve_exact(bytes.len()).map_err(|_| {
        format!(
            "cannot allocate {} bytes to reorder the Fortran-order data",
            bytes.len()
        )
    })?;
    if bytes.is_empty() {
        return Ok(out);
    }
    // Column-major strides, in elements.
    let mut strides = vec![1usize; shape.len()];
    for d in 1..shape.len() {
        strides[d] = strides[d - 1] * shape[d - 1];
    }
    let mut coords = vec![0usize; shape.len()];
    let mut offset = 0usize;
    loop {
        out.extend_from_slice(&bytes[offset * size..(offset + 1) * size]);
        // Advance the C-order counter, last dim fastest, keeping `offset` in step.
        let mut d = shape.len();
        loop {
            if d == 0 {
                return Ok(out);
            }
            d -= 1;
            coords[d] += 1;
            offset += strides[d];
            if coords[d] < shape[d] {
                break;
            }
            offset -= strides[d] * shape[d];
            coords[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads a whole file held in memory, its size known, as a regular file is read.
    fn parse(file: Vec<u8>) -> Result<Array, String> {
        read(&mut &file[..], Length::Known(file.len() as u64))
    }

    fn serialize(element: ElementType, shape: &[usize], bytes: &[u8]) -> Vec<u8> {
        let mut file = header(element, shape);
        file.extend_from_slice(bytes);
        file
    }

    #[test]
    fn round_trip_keeps_type_shape_and_bytes() {
        for (dtype, shape) in [
            (DType::F32, vec![2, 3]),
            (DType::I64, vec![]),
            (DType::U8, vec![5]),
            (DType::Bf16, vec![0, 4]),
            (DType::Bool, vec![1, 1, 1]),
        ] {
            let len: usize = shape.iter().product::<usize>() * dtype.size();
            let bytes: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let file = serialize(ElementType::of(dtype), &shape, &bytes);
            assert_eq!(file.len() % 64, len % 64, "data starts at a multiple of 64");
            let array = parse(file).unwrap();
            assert_eq!(array.element.dtype(), Some(dtype));
            assert_eq!(array.shape, shape);
            assert_eq!(array.bytes, bytes);
        }
    }

    #[test]
    fn reads_big_endian_and_fortran_order() {
        // numpy: np.array([[1, 2, 3], [4, 5, 6]], dtype='>i2', order='F')
        let header = "{'descr': '>i2', 'fortran_order': True, 'shape': (2, 3), }";
        let mut file = MAGIC.to_vec();
        file.extend_from_slice(&[1, 0]);
        file.extend_from_slice(&(header.len() as u16).to_le_bytes());
        file.extend_from_slice(header.as_bytes());
        for v in [1i16, 4, 2, 5, 3, 6] {
            file.extend_from_slice(&v.to_be_bytes());
        }
        let array = parse(file).unwrap();
        let values: Vec<i16> = array
            .bytes
            .chunks_exact(2)
            .map(|c| i16::from_ne_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(values, [1, 2, 3, 4, 5, 6]);
        assert_eq!(array.element.index_type(), Some(IndexType::I16));
    }

    #[test]
    fn rejects_what_it_cannot_read() {
        assert!(parse(b"PK\x03\x04".to_vec()).is_err());
        let file = serialize(ElementType::of(DType::F32), &[4], &[0; 12]);
        assert!(parse(file).unwrap_err().contains("expected 16 bytes"));
        let mut file = serialize(ElementType::of(DType::F32), &[1], &[0; 4]);
        let at = file.windows(3).position(|w| w == b"<f4").unwrap();
        file[at..at + 3].copy_from_slice(b"<c8");
        assert!(parse(file).unwrap_err().contains("'<c8' is not supported"));
    }

    #[test]
    fn a_malformed_header_is_quoted_in_part() {
        let header = format!("{{'descr': '<f4', 'shape': ({}", "1, ".repeat(3_000));
        let mut file = MAGIC.to_vec();
        file.extend_from_slice(&[2, 0]);
        file.extend_from_slice(&(header.len() as u32).to_le_bytes());
        file.extend_from_slice(header.as_bytes());
        let error = parse(file).unwrap_err();
        assert!(
            error.starts_with("malformed .npy header (shape)"),
            "{error}"
        );
        assert!(error.len() < 200 && error.ends_with("..."), "{error}");
    }

    #[test]
    fn a_header_longer_than_numpy_reads_is_refused_unread() {
        let mut file = MAGIC.to_vec();
        file.extend_from_slice(&[2, 0]);
        file.extend_from_slice(&u32::MAX.to_le_bytes());
        // Nothing follows: the length alone is refused, before any of the header is read.
        let error = read(&mut &file[..], Length::Declared(1 << 33)).unwrap_err();
        assert!(error.contains("announces 4294967295 bytes"), "{error}");
    }

    #[test]
    fn a_stream_is_read_to_what_its_header_announces_and_one_byte_more() {
        let file = serialize(ElementType::of(DType::F32), &[2], &[0; 8]);
        let declared = Length::Declared(file.len() as u64);
        let array = read(&mut &file[..], declared).unwrap();
        assert_eq!(array.bytes, [0; 8]);
        // A stream without end (an archive bomb's member that its archive lies about): one
        // byte past the announced data is read, not the rest.
        let mut endless = (&file[..]).chain(std::io::repeat(7));
        let error = read(&mut endless, declared).unwrap_err();
        assert!(error.ends_with(", found more"), "{error}");
        let error = read(&mut &file[..file.len() - 1], declared).unwrap_err();
        assert!(error.ends_with(", found 7"), "{error}");
        // A known size that disagrees with the header is refused before the data is read.
        let error = read(&mut &file[..], Length::Declared(1 << 40));
        assert!(
            error.unwrap_err().contains("found 1099511627"),
            "size checked first"
        );
    }

    #[test]
    fn bools_other_than_0_and_1_are_refused() {
        let file = serialize(ElementType::of(DType::Bool), &[3], &[0, 1, 2]);
        assert_eq!(parse(file).unwrap_err(), "bool element 2 is 2, not 0 or 1");
    }

    #[test]
    fn truncated_headers_are_refused() {
        let file = serialize(ElementType::of(DType::F32), &[2], &[0; 8]);
        for end in [3, 6, 9, 20] {
            let error = parse(file[..end].to_vec()).unwrap_err();
            assert!(error.contains(".npy"), "{end}: {error}");
        }
    }
}
