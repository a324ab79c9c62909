//! The integration tests, one binary: the ops against candle's own (or a naive reference) on
//! random cases, hand-written edge cases, and sizes that overflow or cannot be allocated.

mod cases;
mod common;
mod props;
mod sizes;
