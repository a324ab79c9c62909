//! The arithmetic of one update: how `current` and `update` combine under each reduction, on
//! each element type, under each flavor's ties and `bf16` rounding; the neutral values that
//! `use_init_val = false` starts from; and `mean`'s division. A compiled scatter must match
//! these bit for bit (NaN payloads aside).
//!
//! * Integers wrap (`+`, `-`, `*` in the type, as the C++ kernels compute them).
//! * `f32` and `f64` compute natively. `f16` and `bf16` compute in `f32` and round once per
//!   update: `f16` to nearest even, `bf16` by the flavor's [`Bf16Rounding`]. For `+`, `-`, `*`
//!   and `/` that `f32` step is exact enough that the `f16` result equals the correctly rounded
//!   native operation (24 >= 2 * 11 + 2 bits), as ONNX's reference computes it with numpy.
//! * `min` and `max` compare (`f16`/`bf16` as `f32`) and return one operand unchanged, the
//!   flavor's [`TieBreak`] deciding for equal or unordered operands.
//! * `bool` is false (0) or true (any other byte); a reduction writes 0 or 1: sum and max are
//!   or, prod and min are and, sub is xor.
//! * `mean` sums like `sum`, then divides the sum by the number of updates of the element, plus
//!   one with `use_init_val`: floats by an `f32` (or `f64`) division, integers as
//!   [`integer_mean`].

use half::f16;

use crate::types::DType;
use crate::types::{Bf16Rounding, Reduction, TieBreak};

/// What decides the arithmetic of one update besides the element type.
#[derive(Clone, Copy, Debug)]
pub(super) struct Arithmetic {
    pub reduction: Reduction,
    pub ties: TieBreak,
    pub bf16: Bf16Rounding,
}

/// `current = combine(current, update)` on one element of `dtype` (native-endian bytes). Under
/// `mean` this is the sum; [`finish_mean`] divides.
pub(super) fn combine(dtype: DType, arithmetic: Arithmetic, current: &mut [u8], update: &[u8]) {
    if arithmetic.reduction == Reduction::None {
        current.copy_from_slice(update);
        return;
    }
    macro_rules! lanes {
        ($t:ty) => {{
            let result = <$t as Lane>::combine(
                <$t as Lane>::load(current),
                <$t as Lane>::load(update),
                arithmetic,
            );
            result.store(current)
        }};
    }
    dispatch!(dtype, lanes)
}

/// Writes the neutral value of `reduction` into one element of `dtype`.
pub(super) fn write_neutral(dtype: DType, reduction: Reduction, element: &mut [u8]) {
    let bits = neutral_bits(dtype, reduction).unwrap_or(0);
    element.copy_from_slice(&bits.to_ne_bytes()[..dtype.size()]);
}

/// Divides the sum in one element of `dtype` by `count` (see [`integer_mean`] for integers).
pub(super) fn finish_mean(dtype: DType, bf16: Bf16Rounding, element: &mut [u8], count: u64) {
    macro_rules! lanes {
        ($t:ty) => {{ <$t as Lane>::mean(<$t as Lane>::load(element), count, bf16).store(element) }};
    }
    dispatch!(dtype, lanes)
}

/// The bits of the value `use_init_val = false` puts in an element before the updates fold
/// into it (OpenVINO ScatterElementsUpdate-12), in the low `dtype.size()` bytes: `sum` and
/// `mean` 0, `prod` 1, `max` the type's lowest finite value (`i32::MIN`, `-f32::MAX`, `f16`
/// `-65504`, `bf16` `0xff7f`; `bool` false), `min` its highest (`bool` true). `None` for the
/// reductions without one (`none`, `sub`).
///
/// ```
/// use gather_jit::DType;
/// use gather_jit::scatter::{Reduction, neutral_bits};
///
/// assert_eq!(neutral_bits(DType::F32, Reduction::Max), Some(u64::from((-f32::MAX).to_bits())));
/// assert_eq!(neutral_bits(DType::U8, Reduction::Min), Some(255));
/// assert_eq!(neutral_bits(DType::F16, Reduction::Prod), Some(0x3c00));
/// assert_eq!(neutral_bits(DType::I32, Reduction::Sub), None);
/// ```
pub fn neutral_bits(dtype: DType, reduction: Reduction) -> Option<u64> {
    macro_rules! lanes {
        ($t:ty) => {{ <$t as Lane>::neutral(reduction).map(Lane::bits) }};
    }
    match reduction {
        Reduction::None | Reduction::Sub => None,
        _ => dispatch!(dtype, lanes),
    }
}

/// OpenVINO's integer `mean`: the sum (wrapped in the element type) divided by `count`,
/// rounded down, exactly as its reference computes it: in `f64` under round-downward,
/// `floor(rd(rd(sum) / count))`. That is `floor(sum / count)` whenever the sum has at most 53
/// significant bits; beyond, the two downward roundings to `f64` show.
///
/// ```
/// use gather_jit::scatter::integer_mean;
///
/// assert_eq!(integer_mean(-7, 3), -3); // floor(-2.33), where C's division truncates to -2
/// assert_eq!(integer_mean(7, 2), 3);
/// // 2^60 + 5 is not an f64: it rounds down to 2^60 before the division.
/// assert_eq!(integer_mean((1 << 60) + 5, 1), 1 << 60);
/// ```
///
/// # Panics
/// If `count` is 0.
pub fn integer_mean(sum: i128, count: u64) -> i128 {
    assert!(count > 0, "a mean of no values");
    round_down_to_f64(round_down_to_f64(sum).div_euclid(i128::from(count)))
}

/// The largest `f64` not above `value`, as an integer (`value` is an `i64` or `u64` sum).
fn round_down_to_f64(value: i128) -> i128 {
    const EXACT: u128 = 1 << 53;
    if value.unsigned_abs() <= EXACT {
        return value;
    }
    let nearest = value as f64;
    // Above 2^53 every f64 is an integer, so the conversion back is exact.
    if nearest as i128 > value {
        nearest.next_down() as i128
    } else {
        nearest as i128
    }
}

/// One element type's arithmetic.
trait Lane: Copy {
    fn load(bytes: &[u8]) -> Self;
    fn store(self, bytes: &mut [u8]);
    fn bits(self) -> u64;
    fn combine(current: Self, update: Self, arithmetic: Arithmetic) -> Self;
    fn neutral(reduction: Reduction) -> Option<Self>;
    fn mean(sum: Self, count: u64, bf16: Bf16Rounding) -> Self;
}

/// Calls `$lanes!(T)` with the Rust type of `$dtype`.
macro_rules! dispatch {
    ($dtype:expr, $lanes:ident) => {
        match $dtype {
            DType::F16 => $lanes!(f16),
            DType::Bf16 => $lanes!(Bf16),
            DType::F32 => $lanes!(f32),
            DType::F64 => $lanes!(f64),
            DType::I8 => $lanes!(i8),
            DType::U8 => $lanes!(u8),
            DType::I16 => $lanes!(i16),
            DType::U16 => $lanes!(u16),
            DType::I32 => $lanes!(i32),
            DType::U32 => $lanes!(u32),
            DType::I64 => $lanes!(i64),
            DType::U64 => $lanes!(u64),
            DType::Bool => $lanes!(Bool),
        }
    };
}
use dispatch;

macro_rules! integer_lane {
    ($($t:ty),*) => {$(
        impl Lane for $t {
            fn load(bytes: &[u8]) -> Self {
                <$t>::from_ne_bytes(bytes.try_into().expect("one element"))
            }
            fn store(self, bytes: &mut [u8]) {
                bytes.copy_from_slice(&self.to_ne_bytes());
            }
            fn bits(self) -> u64 {
                // The value's bits, zero-extended.
                let mut wide = [0u8; 8];
                wide[..size_of::<$t>()].copy_from_slice(&self.to_ne_bytes());
                u64::from_ne_bytes(wide)
            }
            fn combine(current: Self, update: Self, arithmetic: Arithmetic) -> Self {
                match arithmetic.reduction {
                    Reduction::None => update,
                    Reduction::Sum | Reduction::Mean => current.wrapping_add(update),
                    Reduction::Sub => current.wrapping_sub(update),
                    Reduction::Prod => current.wrapping_mul(update),
                    Reduction::Max => current.max(update),
                    Reduction::Min => current.min(update),
                }
            }
            fn neutral(reduction: Reduction) -> Option<Self> {
                match reduction {
                    Reduction::Sum | Reduction::Mean => Some(0),
                    Reduction::Prod => Some(1),
                    Reduction::Max => Some(<$t>::MIN),
                    Reduction::Min => Some(<$t>::MAX),
                    Reduction::None | Reduction::Sub => None,
                }
            }
            fn mean(sum: Self, count: u64, _: Bf16Rounding) -> Self {
                // The mean of values of the type lies within the type.
                <$t>::try_from(integer_mean(i128::from(sum), count)).expect("mean in range")
            }
        }
    )*};
}
integer_lane!(i8, u8, i16, u16, i32, u32, i64, u64);

macro_rules! float_lane {
    ($($t:ty),*) => {$(
        impl Lane for $t {
            fn load(bytes: &[u8]) -> Self {
                <$t>::from_ne_bytes(bytes.try_into().expect("one element"))
            }
            fn store(self, bytes: &mut [u8]) {
                bytes.copy_from_slice(&self.to_ne_bytes());
            }
            fn bits(self) -> u64 {
                u64::from(self.to_bits())
            }
            fn combine(current: Self, update: Self, arithmetic: Arithmetic) -> Self {
                match arithmetic.reduction {
                    Reduction::None => update,
                    Reduction::Sum | Reduction::Mean => current + update,
                    Reduction::Sub => current - update,
                    Reduction::Prod => current * update,
                    Reduction::Max => pick(current, update, current, update, true, arithmetic.ties),
                    Reduction::Min => {
                        pick(current, update, current, update, false, arithmetic.ties)
                    }
                }
            }
            fn neutral(reduction: Reduction) -> Option<Self> {
                match reduction {
                    Reduction::Sum | Reduction::Mean => Some(0.0),
                    Reduction::Prod => Some(1.0),
                    Reduction::Max => Some(<$t>::MIN),
                    Reduction::Min => Some(<$t>::MAX),
                    Reduction::None | Reduction::Sub => None,
                }
            }
            fn mean(sum: Self, count: u64, _: Bf16Rounding) -> Self {
                // OpenVINO divides by the count converted to the element type.
                sum / count as $t
            }
        }
    )*};
}
float_lane!(f32, f64);

/// `f32` arithmetic on two `f32` operands (sum, sub, prod), `None` for the others.
fn f32_arithmetic(current: f32, update: f32, reduction: Reduction) -> Option<f32> {
    match reduction {
        Reduction::Sum | Reduction::Mean => Some(current + update),
        Reduction::Sub => Some(current - update),
        Reduction::Prod => Some(current * update),
        Reduction::None | Reduction::Max | Reduction::Min => None,
    }
}

impl Lane for f16 {
    fn load(bytes: &[u8]) -> Self {
        f16::from_bits(u16::from_ne_bytes(bytes.try_into().expect("one element")))
    }
    fn store(self, bytes: &mut [u8]) {
        bytes.copy_from_slice(&self.to_bits().to_ne_bytes());
    }
    fn bits(self) -> u64 {
        u64::from(self.to_bits())
    }
    fn combine(current: Self, update: Self, arithmetic: Arithmetic) -> Self {
        let (c, u) = (current.to_f32(), update.to_f32());
        match arithmetic.reduction {
            Reduction::None => update,
            Reduction::Max => pick(current, update, c, u, true, arithmetic.ties),
            Reduction::Min => pick(current, update, c, u, false, arithmetic.ties),
            r => f16::from_f32(f32_arithmetic(c, u, r).expect("arithmetic reduction")),
        }
    }
    fn neutral(reduction: Reduction) -> Option<Self> {
        match reduction {
            Reduction::Sum | Reduction::Mean => Some(f16::ZERO),
            Reduction::Prod => Some(f16::ONE),
            Reduction::Max => Some(f16::MIN),
            Reduction::Min => Some(f16::MAX),
            Reduction::None | Reduction::Sub => None,
        }
    }
    fn mean(sum: Self, count: u64, _: Bf16Rounding) -> Self {
        f16::from_f32(sum.to_f32() / count as f32)
    }
}

/// Which operand `max` (or `min`) keeps, comparing the values `c` and `u` they stand for (a
/// half-precision operand compares as its `f32` value).
fn pick<T, K: PartialOrd>(current: T, update: T, c: K, u: K, max: bool, ties: TieBreak) -> T {
    use std::cmp::Ordering::{Greater, Less};
    // `None` when a NaN makes the two unordered.
    let order = c.partial_cmp(&u);
    let keep_current = match ties {
        // max: current > update ? current : update (min: <).
        TieBreak::Update => order == Some(if max { Greater } else { Less }),
        // max: current < update ? update : current (min: update < current ? update : current).
        TieBreak::Current => order != Some(if max { Less } else { Greater }),
    };
    if keep_current { current } else { update }
}

/// A `bf16` element (bits), so that its rounding can follow the flavor.
#[derive(Clone, Copy)]
struct Bf16(u16);

impl Bf16 {
    fn to_f32(self) -> f32 {
        f32::from_bits(u32::from(self.0) << 16)
    }
}

impl Lane for Bf16 {
    fn load(bytes: &[u8]) -> Self {
        Bf16(u16::from_ne_bytes(bytes.try_into().expect("one element")))
    }
    fn store(self, bytes: &mut [u8]) {
        bytes.copy_from_slice(&self.0.to_ne_bytes());
    }
    fn bits(self) -> u64 {
        u64::from(self.0)
    }
    fn combine(current: Self, update: Self, arithmetic: Arithmetic) -> Self {
        let (c, u) = (current.to_f32(), update.to_f32());
        match arithmetic.reduction {
            Reduction::None => update,
            Reduction::Max => pick(current, update, c, u, true, arithmetic.ties),
            Reduction::Min => pick(current, update, c, u, false, arithmetic.ties),
            r => Bf16(
                arithmetic
                    .bf16
                    .round(f32_arithmetic(c, u, r).expect("arithmetic reduction")),
            ),
        }
    }
    fn neutral(reduction: Reduction) -> Option<Self> {
        match reduction {
            Reduction::Sum | Reduction::Mean => Some(Bf16(0)),
            Reduction::Prod => Some(Bf16(0x3f80)),
            Reduction::Max => Some(Bf16(0xff7f)),
            Reduction::Min => Some(Bf16(0x7f7f)),
            Reduction::None | Reduction::Sub => None,
        }
    }
    fn mean(sum: Self, count: u64, bf16: Bf16Rounding) -> Self {
        Bf16(bf16.round(sum.to_f32() / count as f32))
    }
}

/// A `bool` element: false is 0, anything else true.
#[derive(Clone, Copy)]
struct Bool(u8);

impl Lane for Bool {
    fn load(bytes: &[u8]) -> Self {
        Bool(bytes[0])
    }
    fn store(self, bytes: &mut [u8]) {
        bytes[0] = self.0;
    }
    fn bits(self) -> u64 {
        u64::from(self.0)
    }
    fn combine(current: Self, update: Self, arithmetic: Arithmetic) -> Self {
        let (c, u) = (current.0 != 0, update.0 != 0);
        let value = match arithmetic.reduction {
            Reduction::None => return update,
            Reduction::Sum | Reduction::Max | Reduction::Mean => c | u,
            Reduction::Prod | Reduction::Min => c & u,
            Reduction::Sub => c ^ u,
        };
        Bool(u8::from(value))
    }
    fn neutral(reduction: Reduction) -> Option<Self> {
        match reduction {
            Reduction::Sum | Reduction::Max | Reduction::Mean => Some(Bool(0)),
            Reduction::Prod | Reduction::Min => Some(Bool(1)),
            Reduction::None | Reduction::Sub => None,
        }
    }
    fn mean(sum: Self, _: u64, _: Bf16Rounding) -> Self {
        // Validation rejects mean on bool; the sum is the closest meaning.
        sum
    }
}
