//! The integration tests, one binary: the ops against candle's own (or a naive reference) on
//! random cases, and hand-written edge cases.

mod cases;
mod common;
mod props;
