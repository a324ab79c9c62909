//! `--assert-outputs`: the model's outputs checked against reference tensors (an ONNX test
//! data set's `output_N.pb`, `NAME.npy` files, or an `.npz` archive), floats within a tolerance
//! and everything else exactly.

use std::fmt::{Debug, Display};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use tract_onnx::prelude::*;

use super::datum::{self, describe};
use super::tensors::{self, Found, Names, Role};
use crate::failure::{Failure, Result};

/// How far a float output may be from its reference: `|got - reference| <= atol + rtol *
/// |reference|`, as numpy's `assert_allclose` (and so ONNX's backend tests) has it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Tolerance {
    pub atol: f64,
    pub rtol: f64,
}

impl Tolerance {
    /// Whether `got` is close enough to `want`: equal (infinities of one sign included), both
    /// NaN, or both finite and within the tolerance.
    fn accepts(self, got: f64, want: f64) -> bool {
        if got == want || (got.is_nan() && want.is_nan()) {
            return true;
        }
        got.is_finite()
            && want.is_finite()
            && (got - want).abs() <= self.atol + self.rtol * want.abs()
    }
}

/// The reference of each output (`None`: none in the set), read and matched before the model
/// runs.
pub(super) struct References {
    /// The directory or archive, as given.
    path: PathBuf,
    slots: Vec<Option<Found>>,
}

/// The first element at which an output differs from its reference.
struct Difference {
    /// The element's position in the tensor's data.
    at: usize,
    got: String,
    want: String,
    /// How many elements differ.
    count: usize,
}

impl References {
    /// Reads the references in `path` and matches them to the outputs `names` (`NAME.npy`
    /// files of `inputs` are skipped). A set that holds a reference for no output is an
    /// error: it would check nothing.
    pub(super) fn read(path: &Path, names: &[String], inputs: &[String]) -> Result<References> {
        let found = tensors::read_set(path, Role::Output)?;
        let (mine, theirs) = (Names::new(names), Names::new(inputs));
        let slots = tensors::match_set(found, &mine, &theirs, Role::Output)?;
        if slots.iter().all(Option::is_none) {
            return Err(Failure::usage(format!(
                "--assert-outputs {}: no reference for any output (its outputs: {})",
                path.display(),
                names.join(", ")
            )));
        }
        Ok(References {
            path: path.to_path_buf(),
            slots,
        })
    }

    /// The reference files, as `(role, path)` for `-o`'s check that no output replaces one.
    pub(super) fn files(&self) -> Vec<(String, &Path)> {
        (self.slots.iter().flatten())
            .map(|found| ("reference input".to_string(), found.file.as_path()))
            .collect()
    }

    /// Checks each output against its reference. Returns the report (for `--json`), the line
    /// that says what matched, and the failure naming the first output that differs, if one
    /// does.
    pub(super) fn check(
        &self,
        names: &[String],
        outputs: &[TValue],
        tolerance: Tolerance,
    ) -> (Value, String, Option<Failure>) {
        let mut reports = Vec::new();
        let mut failure = None;
        let (mut matched, mut unchecked) = (0, Vec::new());
        for ((name, output), reference) in names.iter().zip(outputs).zip(&self.slots) {
            let Some(reference) = reference else {
                unchecked.push(name.as_str());
                reports.push(json!({"name": name, "reference": null, "result": "not checked"}));
                continue;
            };
            match compare(output, &reference.tensor, tolerance) {
                Ok(()) => {
                    matched += 1;
                    reports
                        .push(json!({"name": name, "reference": reference.at, "result": "match"}));
                }
                Err(why) => {
                    let message = match why {
                        Err(form) => format!(
                            "output '{name}' is {form}, the reference {} is {}",
                            reference.at,
                            describe(&reference.tensor)
                        ),
                        Ok(d) => format!(
                            "output '{name}' differs from {} at {:?}: {}, the reference {} ({}); {} of {} elements differ",
                            reference.at,
                            index_of(d.at, output.shape()),
                            d.got,
                            d.want,
                            rule(output.datum_type(), tolerance),
                            d.count,
                            output.len()
                        ),
                    };
                    reports.push(json!({"name": name, "reference": reference.at, "result": "differs", "message": message}));
                    failure.get_or_insert(Failure::disagreement(message));
                }
            }
        }
        let mut line = match (matched, unchecked.is_empty()) {
            (n, true) => format!(
                "assert-outputs: all {n} outputs match {}",
                self.path.display()
            ),
            (n, false) => format!(
                "assert-outputs: {n} of {} outputs match {}; not checked (no reference): {}",
                names.len(),
                self.path.display(),
                unchecked.join(", ")
            ),
        };
        line.push_str(&format!(
            " (floats within atol {} + rtol {} x |reference|, other types exactly)",
            tolerance.atol, tolerance.rtol
        ));
        let report = json!({
            "reference": self.path.display().to_string(),
            "atol": tolerance.atol,
            "rtol": tolerance.rtol,
            "match": failure.is_none(),
            "outputs": reports,
        });
        (report, line, failure)
    }
}

/// The rule an output of `dt` is held to, for the message of a difference.
fn rule(dt: DatumType, tolerance: Tolerance) -> String {
    match dt.is_float() {
        true => format!(
            "tolerance {} + {} x |reference|",
            tolerance.atol, tolerance.rtol
        ),
        false => format!("{} must be equal", datum::type_name(dt)),
    }
}

/// Compares an output with its reference: `Err(Err(form))` if their types or shapes differ
/// (`form` describes the output), `Err(Ok(difference))` if their values do.
fn compare(
    got: &Tensor,
    want: &Tensor,
    tolerance: Tolerance,
) -> std::result::Result<(), std::result::Result<Difference, String>> {
    // tract computes shapes as its symbolic dims: compared as the int64 values they are.
    let got = match got.datum_type() {
        DatumType::TDim => got.cast_to::<i64>().map_err(|e| Err(format!("{e}")))?,
        _ => std::borrow::Cow::Borrowed(got),
    };
    if got.datum_type() != want.datum_type() || got.shape() != want.shape() {
        return Err(Err(describe(&got)));
    }
    let difference = match got.datum_type() {
        DatumType::F16 => floats::<f16>(&got, want, tolerance, |x| f64::from(x.to_f32())),
        DatumType::F32 => floats::<f32>(&got, want, tolerance, f64::from),
        DatumType::F64 => floats::<f64>(&got, want, tolerance, |x| x),
        DatumType::Bool => exact::<bool>(&got, want),
        DatumType::U8 => exact::<u8>(&got, want),
        DatumType::U16 => exact::<u16>(&got, want),
        DatumType::U32 => exact::<u32>(&got, want),
        DatumType::U64 => exact::<u64>(&got, want),
        DatumType::I8 => exact::<i8>(&got, want),
        DatumType::I16 => exact::<i16>(&got, want),
        DatumType::I32 => exact::<i32>(&got, want),
        DatumType::I64 => exact::<i64>(&got, want),
        DatumType::String => exact::<String>(&got, want),
        dt => return Err(Err(format!("{dt:?}, which cannot be compared"))),
    };
    difference.map_or(Ok(()), |d| Err(Ok(d)))
}

/// The position `at` of an element in a tensor of `shape`, as one index per axis.
fn index_of(mut at: usize, shape: &[usize]) -> Vec<usize> {
    let mut index = vec![0; shape.len()];
    for (axis, &n) in shape.iter().enumerate().rev() {
        if n > 0 {
            index[axis] = at % n;
            at /= n;
        }
    }
    index
}

/// The first difference of two tensors of type `T`, whose values must be equal.
fn exact<T: Datum + PartialEq + Display>(got: &Tensor, want: &Tensor) -> Option<Difference> {
    let (Ok(a), Ok(b)) = (datum::values::<T>(got), datum::values::<T>(want)) else {
        return None;
    };
    first_difference(a, b, |x, y| x == y, |x| x.to_string())
}

/// The first difference of two tensors of float type `T` (compared as f64, made by `wide`)
/// beyond `tolerance`.
fn floats<T: Datum + Copy + Debug>(
    got: &Tensor,
    want: &Tensor,
    tolerance: Tolerance,
    wide: impl Fn(T) -> f64,
) -> Option<Difference> {
    let (Ok(a), Ok(b)) = (datum::values::<T>(got), datum::values::<T>(want)) else {
        return None;
    };
    first_difference(
        a,
        b,
        |x, y| tolerance.accepts(wide(*x), wide(*y)),
        |x| format!("{x:?}"),
    )
}

/// The first pair of `a` and `b` that `same` rejects, shown by `show`, with how many do.
fn first_difference<T>(
    a: &[T],
    b: &[T],
    same: impl Fn(&T, &T) -> bool,
    show: impl Fn(&T) -> String,
) -> Option<Difference> {
    let mut first: Option<Difference> = None;
    for (at, (x, y)) in a.iter().zip(b).enumerate() {
        if !same(x, y) {
            match &mut first {
                Some(d) => d.count += 1,
                None => {
                    first = Some(Difference {
                        at,
                        got: show(x),
                        want: show(y),
                        count: 1,
                    })
                }
            }
        }
    }
    first
}

#[cfg(test)]
mod tests {
    use super::*;

    /// numpy's `assert_allclose` rule: `|got - want| <= atol + rtol * |want|`, NaN equal to
    /// NaN, an infinity only equal to itself.
    #[test]
    fn tolerance_is_allclose() {
        let t = Tolerance {
            atol: 0.5,
            rtol: 0.25,
        };
        // 0.5 + 0.25 * 4 = 1.5 either side of 4.
        assert!(t.accepts(5.5, 4.0) && t.accepts(2.5, 4.0));
        assert!(!t.accepts(5.51, 4.0) && !t.accepts(2.49, 4.0));
        // Relative to the reference, not the output: 0.5 + 0.25 * 0 = 0.5 around 0.
        assert!(t.accepts(0.5, 0.0) && !t.accepts(0.0, 2.5));
        assert!(t.accepts(f64::NAN, f64::NAN) && !t.accepts(f64::NAN, 1.0));
        assert!(!t.accepts(1.0, f64::NAN));
        assert!(t.accepts(f64::INFINITY, f64::INFINITY));
        assert!(!t.accepts(f64::INFINITY, f64::NEG_INFINITY));
        assert!(!t.accepts(f64::MAX, f64::INFINITY) && !t.accepts(f64::INFINITY, f64::MAX));
        let exact = Tolerance {
            atol: 0.0,
            rtol: 0.0,
        };
        assert!(exact.accepts(1.0, 1.0) && !exact.accepts(1.0, 1.0 + f64::EPSILON));
    }

    /// A flat position as one index per axis, row-major.
    #[test]
    fn index_of_is_row_major() {
        assert_eq!(index_of(5, &[2, 3]), [1, 2]);
        assert_eq!(index_of(7, &[2, 2, 2]), [1, 1, 1]);
        assert_eq!(index_of(0, &[]), Vec::<usize>::new());
    }

    /// Integers and strings must be equal; the first difference is counted with the others,
    /// and tract's symbolic-dim outputs are compared as int64.
    #[test]
    fn exact_types_find_the_first_difference() {
        let t = Tolerance {
            atol: 1.0,
            rtol: 1.0,
        };
        let got = tensor1(&[1i64, 2, 3, 4]);
        let want = tensor1(&[1i64, 5, 3, 6]);
        let Err(Ok(d)) = compare(&got, &want, t) else {
            panic!("no difference found");
        };
        assert_eq!(
            (d.at, d.got.as_str(), d.want.as_str(), d.count),
            (1, "2", "5", 2)
        );
        let dims = tensor1(&[TDim::from(3), TDim::from(4)]);
        assert!(compare(&dims, &tensor1(&[3i64, 4]), t).is_ok());
        let strings = tensor1(&["a".to_string()]);
        assert!(compare(&strings, &tensor1(&["b".to_string()]), t).is_err());
        let Err(Err(form)) = compare(&got, &tensor1(&[1i32, 2, 3, 4]), t) else {
            panic!("types differ");
        };
        assert_eq!(form, "i64 [4]");
    }
}
