//! What `explain` prints of a scatter's kernel: its two passes and how one write is done.

use super::INLINE_COPY_BYTES;
use super::combine::Arithmetic;
use super::writes::ELEMENTS_UNROLL;
use crate::codegen::chunks;
use crate::scatter::{Reduction, ResolvedScatter, ScatterLayout};

/// How one write (one slice of `slice_len` elements) is done: what `explain` prints.
pub(crate) fn write_text(layout: &ScatterLayout) -> String {
    let sig = layout.signature();
    let element = sig.dtype.size() as u64;
    let slice = layout.slice_len() as u64;
    let bytes = slice * element;
    let how = match sig.reduction {
        Reduction::None if bytes > INLINE_COPY_BYTES => "memcpy".to_string(),
        Reduction::None => format!("{} inline move(s)", chunks(bytes).len()),
        _ => {
            let arithmetic = Arithmetic::of(layout);
            let lanes = arithmetic.vector_type().filter(|_| bytes >= 16);
            match lanes {
                Some(ty) => format!(
                    "{} {} in {ty} lanes ({} vector(s) + {} element(s))",
                    sig.reduction,
                    sig.dtype,
                    bytes / 16,
                    (bytes % 16) / element
                ),
                None => format!("{} {} element by element", sig.reduction, sig.dtype),
            }
        }
    };
    let order = match layout.op() {
        ResolvedScatter::Nd { index_depth } => format!(
            "for each of {} tuple(s) of {index_depth} index(es)",
            layout.index_count()
        ),
        ResolvedScatter::Elements { axis } => format!(
            "for each of {} index(es), along data axis {axis} ({ELEMENTS_UNROLL} a loop trip)",
            layout.index_count()
        ),
        ResolvedScatter::Update { axis } => format!(
            "for each of {} outer position(s), for each of {} index(es) along data axis {axis}",
            layout.outer_len(),
            layout.index_count()
        ),
    };
    let duplicates = if sig.flavor.forbids_duplicates() {
        format!(
            "\nthen: look for duplicate indices (flavor {} forbids them); one fails the call \
             before anything is written",
            sig.flavor
        )
    } else {
        String::new()
    };
    if layout.updates_len() == 0 {
        return format!(
            "pass 1: check the {} index(es) in row-major order (negative={}); a bad one fails \
             the call{duplicates}\npass 2: none (no updates, nothing to write)",
            layout.indices_len(),
            match sig.negative {
                crate::types::NegativeIndices::Wrap => "wrap",
                crate::types::NegativeIndices::Invalid => "invalid",
            },
        );
    }
    let init = if !sig.use_init_val && sig.reduction != Reduction::None {
        format!(
            "every element an update lands on set to {}'s neutral value (use_init_val=false); \
             then ",
            sig.reduction
        )
    } else {
        String::new()
    };
    let mean = if sig.reduction == Reduction::Mean {
        "\n  count each element's updates; the sums are divided by the counts after the kernel \
         returns"
    } else {
        ""
    };
    let scan = match layout.op() {
        ResolvedScatter::Nd { .. } => "",
        // `Lowering::scan_indices`.
        _ => " (one scan without branches, then the first bad one looked up if there is one)",
    };
    format!(
        "pass 1: check the {} index(es) in row-major order (negative={}){scan}; a bad one fails \
         the call before anything is written{duplicates}\n\
         pass 2: {init}{order}, in index order:\n  write {slice} element(s) ({bytes} bytes): \
         {how}{mean}\n\
         a parallel call splits data into ranges of whole slices: each part runs pass 2 and \
         writes its own range only (a call over all of data tests no ranges)",
        layout.indices_len(),
        match sig.negative {
            crate::types::NegativeIndices::Wrap => "wrap",
            crate::types::NegativeIndices::Invalid => "invalid",
        },
    )
}
