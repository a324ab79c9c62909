//! The gathers' vectors (`tests/conformance/**.json` but `quantized/` and `scatter/`; format: its
//! `README.md`): the files, and each case's signature and inputs as native-endian bytes.

use std::path::PathBuf;

use gather_jit::{DType, Flavor, IndexType, Op, Signature};
use serde_json::Value;

/// Every `*.json` file under `tests/conformance/`, recursively, sorted by path, but for the
/// quantized gathers' cases under `quantized/` and the scatters' under `scatter/` (other
/// formats, with runners of their own).
pub fn case_files() -> Vec<PathBuf> {
    super::json_files("", &["quantized", "scatter"])
}

/// Builds the signature a case describes (flavor, op and attributes, types, shapes); the
/// policy is the flavor's default.
pub fn signature_of(name: &str, case: &Value) -> Signature {
    let flavor_name = str_field(name, case, "flavor");
    let flavor = Flavor::from_name(flavor_name)
        .unwrap_or_else(|| panic!("{name}: unknown flavor {flavor_name:?}"));
    let attrs = &case["attrs"];
    let attr = |key: &str| -> i64 {
        match attrs.get(key) {
            None => 0,
            Some(v) => v
                .as_i64()
                .unwrap_or_else(|| panic!("{name}: attribute {key} is not an integer: {v}")),
        }
    };
    let op = match str_field(name, case, "op") {
        "Gather" => Op::Gather {
            axis: attr("axis"),
            batch_dims: attr("batch_dims"),
        },
        "GatherElements" => Op::GatherElements { axis: attr("axis") },
        "GatherND" => Op::GatherNd {
            batch_dims: attr("batch_dims"),
        },
        other => panic!("{name}: unknown op {other:?}"),
    };
    let index_type_name = str_field(name, &case["indices"], "dtype");
    let index_type = IndexType::from_name(index_type_name)
        .unwrap_or_else(|| panic!("{name}: unsupported index type {index_type_name:?}"));
    Signature::new(
        op,
        &shape_of(name, &case["data"]),
        &shape_of(name, &case["indices"]),
    )
    .with_flavor(flavor)
    .with_dtype(dtype_of(name, &case["data"]))
    .with_index_type(index_type)
}

pub fn str_field<'a>(name: &str, value: &'a Value, key: &str) -> &'a str {
    value[key]
        .as_str()
        .unwrap_or_else(|| panic!("{name}: missing string field {key:?}"))
}

pub fn dtype_of(name: &str, tensor: &Value) -> DType {
    let dtype = str_field(name, tensor, "dtype");
    DType::from_name(dtype).unwrap_or_else(|| panic!("{name}: unsupported dtype {dtype:?}"))
}

pub fn shape_of(name: &str, tensor: &Value) -> Vec<usize> {
    tensor["shape"]
        .as_array()
        .unwrap_or_else(|| panic!("{name}: missing shape"))
        .iter()
        .map(|d| {
            d.as_u64()
                .and_then(|d| usize::try_from(d).ok())
                .unwrap_or_else(|| panic!("{name}: bad dim {d}"))
        })
        .collect()
}

pub fn values_of<'a>(name: &str, values: &'a Value) -> &'a [Value] {
    values
        .as_array()
        .unwrap_or_else(|| panic!("{name}: values must be an array"))
}

/// Encodes JSON values as native-endian elements of `dtype`; every conversion must be exact.
/// Floats may also be the strings `"nan"`, `"inf"` and `"-inf"`.
pub fn encode_data(name: &str, dtype: DType, values: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    for v in values_of(name, values) {
        let inexact = || -> ! { panic!("{name}: {v} is not an exact {dtype} value") };
        let float = v.as_f64().or_else(|| match v.as_str() {
            Some("nan") => Some(f64::NAN),
            Some("inf") => Some(f64::INFINITY),
            Some("-inf") => Some(f64::NEG_INFINITY),
            _ => None,
        });
        let int = v
            .as_i64()
            .map(i128::from)
            .or_else(|| v.as_u64().map(i128::from));
        macro_rules! push_int {
            ($t:ty) => {{
                let x = int.and_then(|i| <$t>::try_from(i).ok());
                out.extend_from_slice(&x.unwrap_or_else(|| inexact()).to_ne_bytes())
            }};
        }
        macro_rules! push_float {
            ($x:expr) => {{
                let f = float.unwrap_or_else(|| inexact());
                let x = $x(f);
                let exact =
                    f64::from(x) == f && (f != 0.0 || x.is_sign_negative() == f.is_sign_negative());
                if !(f.is_nan() || exact) {
                    inexact();
                }
                out.extend_from_slice(&x.to_ne_bytes())
            }};
        }
        match dtype {
            DType::F16 => push_float!(half::f16::from_f64),
            DType::Bf16 => push_float!(half::bf16::from_f64),
            DType::F32 => push_float!(|f: f64| f as f32),
            DType::F64 => push_float!(|f: f64| f),
            DType::I8 => push_int!(i8),
            DType::U8 => push_int!(u8),
            DType::I16 => push_int!(i16),
            DType::U16 => push_int!(u16),
            DType::I32 => push_int!(i32),
            DType::U32 => push_int!(u32),
            DType::I64 => push_int!(i64),
            DType::U64 => push_int!(u64),
            DType::Bool => out.push(u8::from(v.as_bool().unwrap_or_else(|| inexact()))),
        }
    }
    out
}

/// Encodes JSON integers as native-endian indices of `index_type`; every value must fit.
pub fn encode_indices(name: &str, index_type: IndexType, values: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    for v in values_of(name, values) {
        let value = v
            .as_i64()
            .map(i128::from)
            .or_else(|| v.as_u64().map(i128::from))
            .unwrap_or_else(|| panic!("{name}: index {v} is not an integer"));
        assert!(
            index_type.try_encode(value, &mut out),
            "{name}: index {value} does not fit {index_type}"
        );
    }
    out
}
