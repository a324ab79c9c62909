//! Buffers whose size comes from the user (shapes, files), allocated fallibly: a size that does
//! not fit in memory is a [`Failure`] (exit status 2, one line), never an abort.

use std::fmt::Display;

use crate::failure::{Failure, Result};

/// An empty buffer with room for `len` bytes; `what` names it in the error.
///
/// # Errors
/// The allocation failed.
pub fn with_capacity(len: usize, what: impl Display) -> Result<Vec<u8>> {
    let mut buffer = Vec::new();
    buffer
        .try_reserve_exact(len)
        .map_err(|_| Failure::allocation(len, what))?;
    Ok(buffer)
}

/// `len` zero bytes; `what` names the buffer in the error.
///
/// # Errors
/// The allocation failed.
pub fn zeroed(len: usize, what: impl Display) -> Result<Vec<u8>> {
    let mut buffer = with_capacity(len, what)?;
    buffer.resize(len, 0);
    Ok(buffer)
}

/// The byte size of `elements` elements of `element_size` bytes.
///
/// # Errors
/// The size overflows `usize` (it cannot be allocated either).
pub fn byte_len(elements: usize, element_size: usize, what: impl Display) -> Result<usize> {
    elements.checked_mul(element_size).ok_or_else(|| {
        Failure::usage(format!(
            "cannot allocate {elements} elements of {element_size} bytes for {what}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn impossible_sizes_are_errors() {
        let e = zeroed(usize::MAX, "a test").unwrap_err();
        assert_eq!(e.code, Failure::USAGE);
        assert_eq!(
            e.one_line(),
            format!("cannot allocate {} bytes for a test", usize::MAX)
        );
        assert!(byte_len(usize::MAX, 2, "x").is_err());
        assert_eq!(byte_len(3, 4, "x").unwrap(), 12);
        assert_eq!(zeroed(5, "five").unwrap(), vec![0; 5]);
    }
}
