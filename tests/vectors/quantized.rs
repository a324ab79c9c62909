//! The quantized gathers' vectors (`tests/conformance/quantized/`, format: its `README.md`):
//! the files, and each case's signature and inputs as native-endian bytes.

use std::path::PathBuf;

use gather_jit::quant::QuantizedLayout;
use gather_jit::{
    BlockQuantization, DType, Error, GgufFormat, IndexPolicy, IndexType, NegativeIndices,
    OutOfRange, QuantizedSignature,
};
use half::{bf16, f16};
use serde_json::Value;

/// Every `*.json` file of the suites under `tests/conformance/quantized/`, sorted by path.
pub fn case_files() -> Vec<PathBuf> {
    super::json_files("quantized", &[])
}

/// The `shape` of a tensor in a case.
pub fn shape(v: &Value) -> Vec<usize> {
    v["shape"]
        .as_array()
        .expect("shape")
        .iter()
        .map(|d| d.as_u64().expect("dim") as usize)
        .collect()
}

/// The float type a case names.
pub fn dtype(name: &str) -> DType {
    match name {
        "float32" => DType::F32,
        "float16" => DType::F16,
        "bfloat16" => DType::Bf16,
        other => panic!("float dtype {other}"),
    }
}

/// A tensor's values as native-endian floats of `dtype`; each must be exact.
pub fn floats(v: &Value, dtype: DType) -> Vec<u8> {
    let mut out = Vec::new();
    for x in v["values"].as_array().expect("values") {
        let x = x.as_f64().expect("float");
        match dtype {
            DType::F16 => {
                let h = f16::from_f64(x);
                assert_eq!(h.to_f64(), x, "{x} is an f16");
                out.extend_from_slice(&h.to_ne_bytes());
            }
            DType::Bf16 => {
                let h = bf16::from_f64(x);
                assert_eq!(h.to_f64(), x, "{x} is a bf16");
                out.extend_from_slice(&h.to_ne_bytes());
            }
            _ => {
                assert_eq!(f64::from(x as f32), x, "{x} is an f32");
                out.extend_from_slice(&(x as f32).to_ne_bytes());
            }
        }
    }
    out
}

/// A tensor's values as bytes.
pub fn bytes(v: &Value) -> Vec<u8> {
    v["values"]
        .as_array()
        .expect("values")
        .iter()
        .map(|x| x.as_u64().expect("byte") as u8)
        .collect()
}

/// The indices' type and native-endian bytes.
pub fn indices(v: &Value) -> (IndexType, Vec<u8>) {
    let index_type = match v["dtype"].as_str() {
        Some("int32") => IndexType::I32,
        Some("int64") => IndexType::I64,
        other => panic!("index dtype {other:?}"),
    };
    let mut out = Vec::new();
    for x in v["values"].as_array().expect("values") {
        let x = x.as_i64().expect("index");
        match index_type {
            IndexType::I32 => out.extend_from_slice(&(x as i32).to_ne_bytes()),
            _ => out.extend_from_slice(&x.to_ne_bytes()),
        }
    }
    (index_type, out)
}

/// The signature a case describes: the logical shape from the stored one and the attributes.
pub fn signature_of(case: &Value) -> QuantizedSignature {
    let data_shape = shape(&case["data"]);
    let indices_shape = shape(&case["indices"]);
    let (index_type, _) = indices(&case["indices"]);
    let attrs = &case["attrs"];
    match case["op"].as_str() {
        Some("GatherBlockQuantized") => {
            let bits = attrs["bits"].as_u64().expect("bits") as u8;
            let mut logical = data_shape;
            if let Some(last) = logical.last_mut()
                && (bits == 4 || bits == 8)
            {
                *last *= usize::from(8 / bits);
            }
            let quantization = BlockQuantization {
                gather_axis: attrs["gather_axis"].as_i64().expect("gather_axis"),
                quantize_axis: attrs["quantize_axis"].as_i64().expect("quantize_axis"),
                block_size: attrs["block_size"].as_u64().expect("block_size") as usize,
                bits,
                zero_points: case.get("zero_points").is_some(),
            };
            QuantizedSignature::block_quantized(&logical, &indices_shape, quantization)
                .with_dtype(dtype(
                    case["scales"]["dtype"].as_str().expect("scales dtype"),
                ))
                .with_index_type(index_type)
        }
        Some("GgufRows") => {
            let format = GgufFormat::from_name(attrs["format"].as_str().expect("format"))
                .expect("q4_0 or q8_0");
            let row_len = data_shape[1] / format.block_bytes() * GgufFormat::BLOCK_VALUES;
            QuantizedSignature::gguf(format, data_shape[0], row_len, &indices_shape)
                .with_index_type(index_type)
        }
        other => panic!("op {other:?}"),
    }
}

/// A case's inputs, of a signature that validates.
pub struct Inputs {
    /// The signature (with ONNX Runtime's `Zero` policy for its out-of-range cases).
    pub signature: QuantizedSignature,
    /// Its layout.
    pub layout: QuantizedLayout,
    /// The stored data.
    pub data: Vec<u8>,
    /// The indices, native-endian.
    pub indices: Vec<u8>,
    /// The scales, native-endian (none for GGUF).
    pub scales: Vec<u8>,
    /// The stored zero points, if the case has them.
    pub zero_points: Option<Vec<u8>>,
}

/// What a case holds.
pub enum Loaded {
    /// Where ONNX Runtime departs from the definition (`onnxruntime_only`) and the counterpart
    /// in `definition/` is checked instead: nothing to run.
    Counterpart,
    /// A signature that does not validate.
    Invalid(Error),
    /// Scales or zero points (named) whose shape is not the layout's.
    Mismatch(&'static str),
    /// Inputs to run.
    Inputs(Box<Inputs>),
}

/// Loads the case `name`.
///
/// # Panics
/// If the file's data shape is not the signature's.
pub fn load(name: &str, case: &Value) -> Loaded {
    let mut signature = signature_of(case);
    if let Some(why) = case.get("onnxruntime_only").and_then(Value::as_str) {
        if name.contains("index-out-of-range") {
            // ONNX Runtime zero-fills an out-of-range index's slice: the `Zero` policy.
            signature = signature.with_policy(IndexPolicy {
                negative: NegativeIndices::Wrap,
                out_of_range: OutOfRange::Zero,
            });
        } else {
            // ORT refuses what this crate supports, or accepts what the definition refuses:
            // the counterpart in definition/ is checked instead.
            assert!(why.contains("definition/"), "{name}: {why}");
            return Loaded::Counterpart;
        }
    }
    let layout = match signature.validate() {
        Ok(layout) => layout,
        Err(e) => return Loaded::Invalid(e),
    };
    let data = bytes(&case["data"]);
    let (_, indices) = indices(&case["indices"]);
    let mut scales = Vec::new();
    let mut zero_points = None;
    if let Some(s) = case
        .get("scales")
        .filter(|_| !layout.scales_shape().is_empty())
    {
        scales = floats(s, signature.dtype);
        if shape(s) != layout.scales_shape() {
            return Loaded::Mismatch("scales");
        }
    }
    if let Some(zp) = case.get("zero_points") {
        if Some(&shape(zp)[..]) != layout.zero_points_bytes_shape() {
            return Loaded::Mismatch("zero points");
        }
        zero_points = Some(bytes(zp));
    }
    assert_eq!(
        shape(&case["data"]),
        layout.data_bytes_shape(),
        "{name}: data shape"
    );
    Loaded::Inputs(Box::new(Inputs {
        signature,
        layout,
        data,
        indices,
        scales,
        zero_points,
    }))
}
