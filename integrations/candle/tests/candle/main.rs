//! The integration tests, one binary: the ops against candle's own (or a naive reference) on
//! random cases, hand-written edge cases, sizes that overflow or cannot be allocated, the
//! scatters, and the backward passes.

mod cases;
mod common;
mod grad;
mod props;
mod scatter;
mod sizes;
