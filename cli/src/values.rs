//! The values flags take: shapes, element and index types (in numpy's, ONNX's and OpenVINO's
//! spellings too), flavors, GGUF formats, integers and counts; each parser's error names the
//! accepted forms.

use std::fmt;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use gather_jit::scatter::{Reduction, ScatterFlavor};
use gather_jit::{DType, Flavor, GgufFormat, IndexType};

/// A tensor shape as written on the command line: `2x3x4`, `2,3,4`, `[2,3,4]`, `(2, 3, 4)`;
/// `0` for an empty dim; `scalar`, `[]` or `()` for rank 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape(pub Vec<usize>);

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("scalar");
        }
        let dims: Vec<String> = self.0.iter().map(usize::to_string).collect();
        f.write_str(&dims.join("x"))
    }
}

/// The shape forms [`parse_shape`] takes, for its errors.
const SHAPE_FORMS: &str = "expected a shape such as 2x3x4, 2,3,4 or [2,3,4] \
     (0 is an empty dim; scalar or [] is rank 0)";

/// Parses a GGUF block format: `q4_0` or `q8_0` (any case).
///
/// # Errors
/// Anything else, naming the accepted forms.
pub fn parse_gguf_format(text: &str) -> Result<GgufFormat, String> {
    GgufFormat::from_name(text.trim())
        .ok_or_else(|| format!("expected a GGUF block format: q4_0 or q8_0, not '{text}'"))
}

/// Parses a shape in this crate's spelling (`2x3x4`), numpy's and ONNX's (`2,3,4`, `[2, 3, 4]`,
/// `(2, 3, 4)`, `(3,)`) or as rank 0 (`scalar`, `[]`, `()`).
///
/// # Errors
/// Anything else, naming the accepted forms.
pub fn parse_shape(text: &str) -> Result<Shape, String> {
    let text = text.trim();
    if text == "scalar" {
        return Ok(Shape(Vec::new()));
    }
    let bracketed = [('[', ']'), ('(', ')')]
        .into_iter()
        .find_map(|(open, close)| text.strip_prefix(open)?.strip_suffix(close));
    let dims = match bracketed {
        // A list or tuple may end in a comma, as numpy prints `(3,)`.
        Some(inner) => {
            let inner = inner.trim();
            if inner.is_empty() {
                return Ok(Shape(Vec::new()));
            }
            inner.strip_suffix(',').unwrap_or(inner)
        }
        None => text,
    };
    let separator = if dims.contains(',') { ',' } else { 'x' };
    dims.split(separator)
        .map(|dim| {
            let dim = dim.trim();
            if dim.is_empty() || !dim.bytes().all(|b| b.is_ascii_digit()) {
                return Err(SHAPE_FORMS.to_string());
            }
            dim.parse::<usize>()
                .map_err(|_| format!("dim {dim} is too large ({SHAPE_FORMS})"))
        })
        .collect::<Result<Vec<usize>, String>>()
        .map(Shape)
}

/// A `--flavor` name: a gather flavor's, a scatter flavor's, or both (`onnx` and `tensorrt`
/// name a gather and a scatter flavor each); which one applies follows `--op`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlavorName(&'static str);

impl FlavorName {
    /// Every name, the gathers' first, then the scatter-only ones.
    pub fn all() -> Vec<&'static str> {
        let mut names: Vec<&'static str> = Flavor::ALL.map(Flavor::name).to_vec();
        for scatter in ScatterFlavor::ALL.map(ScatterFlavor::name) {
            if !names.contains(&scatter) {
                names.push(scatter);
            }
        }
        names
    }

    /// The name as given.
    pub fn name(self) -> &'static str {
        self.0
    }

    /// The gather flavor of this name, if there is one.
    pub fn gather(self) -> Option<Flavor> {
        Flavor::from_name(self.0)
    }

    /// The scatter flavor of this name, if there is one.
    pub fn scatter(self) -> Option<ScatterFlavor> {
        ScatterFlavor::from_name(self.0)
    }
}

impl From<Flavor> for FlavorName {
    fn from(flavor: Flavor) -> FlavorName {
        FlavorName(flavor.name())
    }
}

impl From<ScatterFlavor> for FlavorName {
    fn from(flavor: ScatterFlavor) -> FlavorName {
        FlavorName(flavor.name())
    }
}

impl fmt::Display for FlavorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// `--flavor`: the library's gather and scatter flavor names, listed in `--help`.
pub fn flavor_parser() -> impl TypedValueParser<Value = FlavorName> {
    PossibleValuesParser::new(FlavorName::all()).map(|name| {
        let known = FlavorName::all().into_iter().find(|n| *n == name);
        FlavorName(known.expect("a listed flavor name"))
    })
}

/// `--reduction`: OpenVINO's names and ONNX's (`add` = `sum`, `mul` = `prod`), listed in
/// `--help`.
pub fn reduction_parser() -> impl TypedValueParser<Value = Reduction> {
    PossibleValuesParser::new([
        "none", "add", "sum", "mul", "prod", "max", "min", "sub", "mean",
    ])
    .map(|name| Reduction::from_name(&name).expect("a listed reduction name"))
}

/// Other names of the element types, as numpy (`float32`, `bool_`), ONNX's `TensorProto`
/// (`FLOAT16`, `DOUBLE`, `INT64`) and OpenVINO (`FP32`, `boolean`) write them; matched
/// ignoring case, like the IR's own names (`f32`, and OpenVINO's `I64`, `BF16`).
const DTYPE_SPELLINGS: [(&str, DType); 20] = [
    ("float16", DType::F16),
    ("half", DType::F16),
    ("fp16", DType::F16),
    ("bfloat16", DType::Bf16),
    ("float32", DType::F32),
    ("fp32", DType::F32),
    ("float64", DType::F64),
    ("double", DType::F64),
    ("fp64", DType::F64),
    ("int8", DType::I8),
    ("uint8", DType::U8),
    ("int16", DType::I16),
    ("uint16", DType::U16),
    ("int32", DType::I32),
    ("uint32", DType::U32),
    ("int64", DType::I64),
    ("uint64", DType::U64),
    ("bool_", DType::Bool),
    ("boolean", DType::Bool),
    ("bool8", DType::Bool),
];

/// The element type `text` names, in any spelling of [`DTYPE_SPELLINGS`] or the IR's own.
pub fn dtype_named(text: &str) -> Option<DType> {
    let lower = text.trim().to_ascii_lowercase();
    DType::from_name(&lower).or_else(|| {
        DTYPE_SPELLINGS
            .iter()
            .find(|(name, _)| *name == lower)
            .map(|&(_, dtype)| dtype)
    })
}

/// `--dtype`: an element type in the IR's spelling or numpy's, ONNX's or OpenVINO's.
///
/// # Errors
/// An unknown name, or `float` (f32 to ONNX, float64 to numpy), naming the accepted forms.
pub fn parse_dtype(text: &str) -> Result<DType, String> {
    if text.trim().eq_ignore_ascii_case("float") {
        return Err(
            "'float' is 32-bit in ONNX but 64-bit in numpy: write f32 (float32) or \
                    f64 (float64)"
                .to_string(),
        );
    }
    dtype_named(text).ok_or_else(|| {
        format!(
            "expected an element type: {} (or numpy's, ONNX's or OpenVINO's name such as \
             float32, int64, float16, bfloat16, bool_, FP32)",
            DType::ALL.map(DType::name).join(" ")
        )
    })
}

/// `--index-type`: an integer type in the IR's spelling or numpy's, ONNX's or OpenVINO's.
///
/// # Errors
/// A name that is not an integer type, naming the accepted forms.
pub fn parse_index_type(text: &str) -> Result<IndexType, String> {
    dtype_named(text)
        .and_then(|dtype| IndexType::from_name(dtype.name()))
        .ok_or_else(|| {
            format!(
                "expected an integer index type: {} (or numpy's, ONNX's or OpenVINO's name \
                 such as int32, int64, uint8, I64)",
                IndexType::ALL.map(IndexType::name).join(" ")
            )
        })
}

/// An integer flag (`--axis -1`, `--batch-dims 1`).
///
/// # Errors
/// Anything but an integer that fits in 64 bits.
pub fn parse_integer(text: &str) -> Result<i64, String> {
    text.trim()
        .parse()
        .map_err(|_| "expected an integer such as 1 or -1".to_string())
}

/// A count or a seed (`--seed 7`, `--time-ms 300`).
///
/// # Errors
/// Anything but a whole number from 0 to 2^64-1.
pub fn parse_count(text: &str) -> Result<u64, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("expected a whole number from 0 to {}", u64::MAX))
}

/// A count between `low` and `high` inclusive (`--index-limit`, `--output-offset`), so that a
/// negative or out-of-range value is refused with the flag's own bounds rather than
/// Rust's integer parse error.
///
/// # Errors
/// Anything but a whole number from `low` to `high`.
pub fn count_between(text: &str, low: u64, high: u64) -> Result<u64, String> {
    text.trim()
        .parse()
        .ok()
        .filter(|n| (low..=high).contains(n))
        .ok_or_else(|| format!("expected a whole number from {low} to {high}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse_and_print() {
        assert_eq!(parse_shape("2x3x4"), Ok(Shape(vec![2, 3, 4])));
        assert_eq!(parse_shape("0"), Ok(Shape(vec![0])));
        assert_eq!(parse_shape("scalar"), Ok(Shape(vec![])));
        assert_eq!(Shape(vec![2, 0]).to_string(), "2x0");
        assert_eq!(Shape(vec![]).to_string(), "scalar");
        for (numpy, dims) in [
            ("2,3,4", vec![2, 3, 4]),
            ("[2,3,4]", vec![2, 3, 4]),
            ("[2, 3, 4]", vec![2, 3, 4]),
            ("(2, 3, 4)", vec![2, 3, 4]),
            ("(3,)", vec![3]),
            ("[]", vec![]),
            ("()", vec![]),
        ] {
            assert_eq!(parse_shape(numpy), Ok(Shape(dims)), "{numpy}");
        }
        for bad in [
            "",
            "2x",
            "x2",
            "2xx3",
            "2,,3",
            "2x3,4",
            "[2,3",
            "[,]",
            "-1",
            "[-1]",
            "2x3.0",
            "99999999999999999999999",
        ] {
            assert!(parse_shape(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn flavor_names_are_the_gathers_and_the_scatters() {
        let parse = |name: &str| {
            let known = FlavorName::all().into_iter().find(|n| *n == name);
            known.map(FlavorName)
        };
        let onnx = parse("onnx").unwrap();
        assert_eq!(onnx.gather(), Some(Flavor::Onnx));
        assert_eq!(onnx.scatter(), Some(ScatterFlavor::Onnx));
        let gather8 = parse("openvino-gather8").unwrap();
        assert_eq!(gather8.gather(), Some(Flavor::OpenvinoGather8));
        assert_eq!(gather8.scatter(), None);
        let update = parse("openvino-scatterupdate3").unwrap();
        assert_eq!(update.gather(), None);
        assert_eq!(
            update.scatter(),
            Some(ScatterFlavor::OpenvinoScatterUpdate3)
        );
        // Each name once: onnx and tensorrt are not listed twice.
        let all = FlavorName::all();
        assert_eq!(all.len(), Flavor::ALL.len() + ScatterFlavor::ALL.len() - 2);
        assert_eq!(Reduction::from_name("add"), Some(Reduction::Sum));
        assert_eq!(Reduction::from_name("mul"), Some(Reduction::Prod));
    }

    #[test]
    fn dtypes_in_every_spelling() {
        for (text, dtype) in [
            ("f32", DType::F32),
            ("float32", DType::F32),
            ("FP32", DType::F32),
            ("FLOAT16", DType::F16),
            ("bfloat16", DType::Bf16),
            ("BF16", DType::Bf16),
            ("double", DType::F64),
            ("bool_", DType::Bool),
            ("boolean", DType::Bool),
            ("INT64", DType::I64),
            ("u8", DType::U8),
        ] {
            assert_eq!(parse_dtype(text), Ok(dtype), "{text}");
        }
        assert!(parse_dtype("float").unwrap_err().contains("numpy"));
        assert!(parse_dtype("f8").is_err());
        assert_eq!(parse_index_type("int32"), Ok(IndexType::I32));
        assert_eq!(parse_index_type("I64"), Ok(IndexType::I64));
        assert!(parse_index_type("float32").is_err());
    }
}
