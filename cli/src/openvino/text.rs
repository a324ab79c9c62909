//! IR text made parseable: wrapped in one root element, with an XML declaration or DOCTYPE
//! and non-attribute tokens in start tags blanked out (byte offsets kept, so line numbers stay
//! the file's own); and XML errors worded in the terms of the user's file.

use crate::buffer;
use crate::failure::{Failure, Result};

/// The tag the text is wrapped in, so that several top-level elements parse.
const WRAPPER: &str = "gather-jit-file";

/// A parse error of the wrapped text in the terms of the user's file: its position there
/// (the wrapper's opening tag shifts line 1, its closing tag lies past the end) and no mention
/// of the wrapper element, which the user never wrote.
pub(super) fn xml_error(error: &roxmltree::Error, text: &str) -> String {
    let open_len = WRAPPER.len() + 2;
    // Where the file ends, as a position in the wrapped text (1-based, columns in chars).
    let last_line = text.rsplit('\n').next().unwrap_or("");
    let end_row = text.matches('\n').count() as u32 + 1;
    let end_col = last_line.chars().count() as u32 + 1;
    let end_col_wrapped = if end_row == 1 {
        end_col + open_len as u32
    } else {
        end_col
    };
    let pos = error.pos();
    let at_end = matches!(error, roxmltree::Error::UnexpectedEndOfStream)
        || (pos.row, pos.col) >= (end_row, end_col_wrapped);
    let (row, col) = if at_end {
        (end_row, end_col)
    } else if pos.row == 1 {
        (1, pos.col.saturating_sub(open_len as u32).max(1))
    } else {
        (pos.row, pos.col)
    };
    let message = match error {
        roxmltree::Error::UnexpectedCloseTag(open, close, _) if close == WRAPPER => {
            format!("<{open}> is not closed before the end of the file")
        }
        roxmltree::Error::UnexpectedCloseTag(open, close, _) if open == WRAPPER => {
            format!("</{close}> closes no open element")
        }
        roxmltree::Error::UnexpectedEndOfStream => "the file ends inside a tag".to_string(),
        other => {
            let text = other.to_string();
            let suffix = format!(" at {pos}");
            match text.find(&suffix) {
                Some(at) => format!("{}{}", &text[..at], &text[at + suffix.len()..]),
                None => text,
            }
        }
    };
    let place = if at_end {
        format!("at the end of the file (line {row}, column {col})")
    } else {
        format!("at line {row}, column {col}")
    };
    format!("not well-formed XML {place}: {message}")
}

/// How many ignored start-tag tokens are named in notes (each one costs a scan for its line
/// number); the rest are counted, so a file of millions of them costs neither time nor memory.
const NAMED_IGNORED_TOKENS: usize = 10;

/// How much of an ignored token a note quotes.
const QUOTED_TOKEN_CHARS: usize = 40;

/// Wraps `text` in one root element and blanks out what would stop it parsing (an XML
/// declaration or DOCTYPE, and non-attribute tokens in start tags), keeping byte offsets.
///
/// # Errors
/// No memory for the wrapped copy of `text`.
pub(super) fn prepare(text: &str, notes: &mut Vec<String>) -> Result<String> {
    let bytes = text.as_bytes();
    let open = format!("<{WRAPPER}>");
    let close = format!("</{WRAPPER}>");
    let len = (open.len() + close.len()).saturating_add(bytes.len());
    let mut out = buffer::with_capacity(len, "a copy of the file's text")?;
    out.extend_from_slice(open.as_bytes());
    out.extend_from_slice(bytes);
    // Ranges below are offsets into `text`; in `out` it starts after the opening tag.
    let blank = |out: &mut Vec<u8>, range: std::ops::Range<usize>| {
        for b in &mut out[range.start + open.len()..range.end + open.len()] {
            if *b != b'\n' && *b != b'\r' {
                *b = b' ';
            }
        }
    };
    let find = |from: usize, pat: &[u8]| -> usize {
        bytes[from..]
            .windows(pat.len())
            .position(|w| w == pat)
            .map_or(bytes.len(), |p| from + p + pat.len())
    };
    let line_of = |at: usize| bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
    let mut ignored = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'<' {
            i += 1;
            continue;
        }
        let rest = &bytes[i..];
        if rest.starts_with(b"<!--") {
            i = find(i + 4, b"-->");
        } else if rest.starts_with(b"<![CDATA[") {
            i = find(i + 9, b"]]>");
        } else if rest.starts_with(b"<?") {
            let end = find(i + 2, b"?>");
            if rest.starts_with(b"<?xml") && rest.get(5).is_some_and(u8::is_ascii_whitespace) {
                // The declaration may only open a document; after the wrapper it would not.
                blank(&mut out, i..end);
            }
            i = end;
        } else if rest.starts_with(b"<!") {
            // A DOCTYPE (without internal subset): not allowed inside the wrapper either.
            let end = find(i + 2, b">");
            blank(&mut out, i..end);
            i = end;
        } else if rest.starts_with(b"</") {
            i = find(i + 2, b">");
        } else {
            i = start_tag(bytes, i + 1, &mut |range| {
                ignored += 1;
                if ignored <= NAMED_IGNORED_TOKENS {
                    let token = String::from_utf8_lossy(&bytes[range.clone()]);
                    let token = match token.char_indices().nth(QUOTED_TOKEN_CHARS) {
                        Some((end, _)) => format!("{}...", &token[..end]),
                        None => token.into_owned(),
                    };
                    notes.push(format!(
                        "line {}: ignored '{token}' in a start tag",
                        line_of(range.start)
                    ));
                }
                blank(&mut out, range);
            });
        }
    }
    if ignored > NAMED_IGNORED_TOKENS {
        notes.push(format!(
            "ignored {} more tokens in start tags",
            ignored - NAMED_IGNORED_TOKENS
        ));
    }
    out.extend_from_slice(close.as_bytes());
    // Only whole tokens, which start and end at ASCII bytes, were replaced by spaces.
    String::from_utf8(out)
        .map_err(|e| Failure::disagreement(format!("the file's text became invalid UTF-8: {e}")))
}

/// Walks a start tag from just after its `<`, calling `junk` with each token that is not an
/// attribute (`name="value"`); returns the index after the tag.
fn start_tag(bytes: &[u8], mut i: usize, junk: &mut dyn FnMut(std::ops::Range<usize>)) -> usize {
    let is_name = |b: u8| b.is_ascii_alphanumeric() || b"_-.:".contains(&b) || b >= 0x80;
    while i < bytes.len() && is_name(bytes[i]) {
        i += 1;
    }
    loop {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        match bytes.get(i) {
            None => return i,
            Some(b'>') => return i + 1,
            Some(b'/') if bytes.get(i + 1) == Some(&b'>') => return i + 2,
            _ => {}
        }
        // An attribute is a name, optional spaces, `=`, optional spaces and a quoted value.
        let start = i;
        let mut j = i;
        while j < bytes.len() && is_name(bytes[j]) {
            j += 1;
        }
        let name_end = j;
        while j < bytes.len() && bytes[j].is_ascii_whitespace() {
            j += 1;
        }
        if name_end > start && bytes.get(j) == Some(&b'=') {
            j += 1;
            while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                j += 1;
            }
            if let Some(&quote @ (b'"' | b'\'')) = bytes.get(j) {
                let close = bytes[j + 1..].iter().position(|&b| b == quote);
                i = close.map_or(bytes.len(), |p| j + 1 + p + 1);
                continue;
            }
        }
        // Not an attribute: blank the token up to the next space or end of tag.
        let mut end = start;
        while end < bytes.len()
            && !bytes[end].is_ascii_whitespace()
            && bytes[end] != b'>'
            && !(bytes[end] == b'/' && bytes.get(end + 1) == Some(&b'>'))
        {
            end += 1;
        }
        let end = end.max(start + 1);
        junk(start..end);
        i = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roxmltree::Document;

    #[test]
    fn prepare_keeps_line_numbers() {
        let text = "<?xml version=\"1.0\"?>\n<a x=\"1\" ... y='2'/>\n<b/>";
        let mut notes = Vec::new();
        let out = prepare(text, &mut notes).unwrap();
        assert_eq!(out.lines().count(), 3);
        assert!(out.contains("<a x=\"1\"     y='2'/>"));
        assert_eq!(notes, vec!["line 2: ignored '...' in a start tag"]);
        Document::parse(&out).unwrap();
        // Past ten, ignored tokens are counted, and long ones quoted in part.
        let long = "x".repeat(100);
        let text = format!("<a {long}/>\n{}", "<b ... />\n".repeat(20));
        let mut notes = Vec::new();
        prepare(&text, &mut notes).unwrap();
        assert_eq!(notes.len(), 11, "{notes:?}");
        assert_eq!(
            notes[0],
            format!("line 1: ignored '{}...' in a start tag", &long[..40])
        );
        assert_eq!(notes[10], "ignored 11 more tokens in start tags");
    }
}
