//! The table (or JSON) `demo` and `layer` print of their rows, fitted to the terminal.

use std::borrow::Cow;
use std::io::{self, Write};

use clap::Args;
use serde_json::{Value, json};

use crate::failure::{Failure, Result};
use crate::report::{Agreement, Row, shape_text};
use crate::timing::{gbps, human_time, nanos};

/// How `demo` and `layer` print their rows.
#[derive(Args, Clone, Debug, Default)]
pub struct TableArgs {
    /// Print every column, however wide the table (by default columns are left out until it
    /// fits 100 columns)
    #[arg(long, conflicts_with = "json")]
    pub wide: bool,
    /// Print the rows as a JSON array (times in nanoseconds, every field) instead of a table
    #[arg(long)]
    pub json: bool,
}

/// The widest a table gets without `--wide`: a terminal beside an editor, or a review pane.
pub const TABLE_WIDTH: usize = 100;

/// The columns left out, in this order, until a table fits [`TABLE_WIDTH`]: the op and the
/// types repeat what most labels say, the output shape follows from the others.
const LEFT_OUT_FIRST: [usize; 4] = [1, 5, 4, 3];

/// The narrowest the case column is cut to when a table is still too wide (long layer names).
const NARROWEST_LABEL: usize = 12;

/// Prints rows as an aligned text table: all columns if `wide`, else as many as fit
/// [`TABLE_WIDTH`] (a last line names those left out).
///
/// # Errors
/// Writing to `out` failed.
pub fn print_table(out: &mut dyn Write, rows: &[Row], wide: bool) -> io::Result<()> {
    let header = [
        "case", "op", "data", "indices", "output", "types", "compile", "jit", "interp", "GB/s",
        "agree",
    ];
    let cells: Vec<[String; 11]> = rows
        .iter()
        .map(|r| {
            [
                r.label.clone(),
                r.op.clone(),
                shape_text(&r.data_shape),
                shape_text(&r.indices_shape),
                shape_text(&r.output_shape),
                r.types.clone(),
                human_time(r.compile),
                human_time(r.jit),
                r.interp.map_or_else(|| "-".to_string(), human_time),
                format!("{:.2}", gbps(r.bytes_moved, r.jit)),
                match (r.agreement, r.sampled) {
                    (Agreement::Yes, Some(_)) => "yes (sampled)".to_string(),
                    (agreement, _) => agreement.text().to_string(),
                },
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut shown = [true; 11];
    let total = |shown: &[bool; 11], widths: &[usize; 11]| {
        let columns = shown.iter().filter(|&&s| s).count();
        let cells: usize = (widths.iter().zip(shown))
            .map(|(w, &s)| if s { *w } else { 0 })
            .sum();
        cells + 2 * columns.saturating_sub(1)
    };
    if !wide {
        for column in LEFT_OUT_FIRST {
            if total(&shown, &widths) <= TABLE_WIDTH {
                break;
            }
            shown[column] = false;
        }
        let excess = total(&shown, &widths).saturating_sub(TABLE_WIDTH);
        widths[0] = widths[0]
            .saturating_sub(excess)
            .max(NARROWEST_LABEL.min(widths[0]));
    }
    let mut line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .enumerate()
            .filter(|&(i, _)| shown[i])
            .map(|(i, (cell, w))| {
                let cell = cut(cell, w);
                // Text columns align left, numbers right.
                if i < 6 || i == 10 {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        writeln!(out, "{}", padded.join("  ").trim_end())
    };
    line(&header.map(String::from))?;
    line(&widths.map(|w| "-".repeat(w)))?;
    for row in &cells {
        line(row)?;
    }
    let left_out: Vec<&str> = (header.iter().zip(shown))
        .filter(|&(_, s)| !s)
        .map(|(h, _)| *h)
        .collect();
    if !left_out.is_empty() {
        writeln!(
            out,
            "({} left out to fit {TABLE_WIDTH} columns: --wide shows them)",
            left_out.join(", ")
        )?;
    }
    for row in rows {
        if let Some(detail) = &row.detail {
            writeln!(out, "{}: {detail}", row.label)?;
        }
    }
    for row in rows {
        if let Some(checked) = row.sampled {
            let elements: usize = row.output_shape.iter().product();
            writeln!(
                out,
                "(sampled: {checked} of {elements} elements of {}; --full-check checks all)",
                row.label
            )?;
        }
    }
    if rows.iter().any(|r| r.agreement == Agreement::NotChecked) {
        writeln!(
            out,
            "(the reference interpreter was not run: --no-check; agreement not checked)"
        )?;
    }
    Ok(())
}

/// `text` cut to `width` characters, its last one an ellipsis if anything was cut.
fn cut(text: &str, width: usize) -> Cow<'_, str> {
    if text.chars().count() <= width {
        return Cow::Borrowed(text);
    }
    let kept: String = text.chars().take(width.saturating_sub(1)).collect();
    Cow::Owned(format!("{kept}…"))
}

/// The rows as a JSON array (times in nanoseconds).
pub fn rows_json(rows: &[Row]) -> Value {
    Value::Array(
        rows.iter()
            .map(|r| {
                json!({
                    "case": r.label,
                    "op": r.op,
                    "data_shape": r.data_shape,
                    "indices_shape": r.indices_shape,
                    "output_shape": r.output_shape,
                    "types": r.types,
                    "compile_ns": nanos(r.compile),
                    "jit_ns": nanos(r.jit),
                    "interp_ns": r.interp.map(nanos),
                    "bytes_moved": r.bytes_moved,
                    "gbps": gbps(r.bytes_moved, r.jit),
                    "checked": r.agreement != Agreement::NotChecked,
                    "sampled": r.sampled.is_some(),
                    "checked_elements": match (r.agreement, r.sampled) {
                        (Agreement::NotChecked, _) => None,
                        (_, Some(checked)) => Some(checked),
                        (_, None) => Some(r.output_shape.iter().product::<usize>()),
                    },
                    "agree": (r.agreement != Agreement::NotChecked)
                        .then_some(r.agreement != Agreement::No),
                    "detail": r.detail,
                })
            })
            .collect(),
    )
}

/// Prints the rows (table or JSON) and fails with status 1 if any row disagrees.
///
/// # Errors
/// A disagreement, naming the rows (even if `out` was closed), else a failed write.
pub fn finish(out: &mut dyn Write, rows: &[Row], table: &TableArgs) -> Result<()> {
    let printed = if table.json {
        writeln!(out, "{}", rows_json(rows))
    } else {
        print_table(out, rows, table.wide)
    };
    crate::progress::note_debug_timings();
    let bad: Vec<&str> = rows
        .iter()
        .filter(|r| r.agreement == Agreement::No)
        .map(|r| r.label.as_str())
        .collect();
    if bad.is_empty() {
        printed.map_err(Failure::stdout)
    } else {
        Err(Failure::disagreement(format!(
            "JIT and interpreter disagree on {}",
            bad.join(", ")
        )))
    }
}
