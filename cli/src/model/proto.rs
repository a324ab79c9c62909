//! ONNX `TensorProto` files (`.pb`, as in ONNX's test data sets) as tract tensors: the wire
//! data bounded before prost decodes it, then every field checked (type, dims, one storage,
//! length, value ranges), since tract's own `load_tensor` panics on what a damaged file holds;
//! and the external data files a model names, checked under the CLI's file policy.

use std::path::Path;

use gather_jit_tract::check_allocation;
use tract_onnx::pb::{GraphProto, TensorProto};
use tract_onnx::prelude::*;

use super::datum::{type_name, values};
use crate::failure::{Failure, Result};
use crate::files::{self, Cap, Input};

/// Reads a `TensorProto` file: its tensor and the name it carries (`None` if empty).
pub(super) fn read_pb(path: &Path) -> Result<(Tensor, Option<String>)> {
    let at = path.display().to_string();
    let bytes = files::read_whole(path, Cap::PROTOBUF)?;
    // prost allocates as it decodes, infallibly: ask for what it may need first.
    let need = decoded_bound(&bytes)
        .map_err(|e| Failure::usage(format!("{at}: not an ONNX TensorProto: {e}")))?;
    check_allocation(DatumType::U8, &[need])
        .map_err(|e| Failure::usage(format!("{at}: decoding it: {e}")))?;
    let proto = tract_onnx::tensor::proto_from_reader(&bytes[..])
        .map_err(|e| Failure::usage(format!("{at}: not an ONNX TensorProto: {e:#}")))?;
    drop(bytes);
    let name = Some(proto.name.clone()).filter(|n| !n.is_empty());
    Ok((proto_tensor(proto, &at)?, name))
}

/// The next varint of `bytes` from `*at`, which moves past it.
fn varint(bytes: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*at).ok_or("truncated")?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Ok(value);
        }
    }
    Err(format!("a varint longer than 10 bytes before byte {at}"))
}

/// An upper bound of the bytes prost allocates to decode `bytes` as a `TensorProto`: each
/// repeated number as 8 bytes, twice over for a growing `Vec`'s spare room (a packed varint
/// field grows 16-fold at most, one byte per number), each byte string or message copied, with
/// room for its `Vec` in a list. Fails on wire data that is no protobuf message.
fn decoded_bound(bytes: &[u8]) -> Result<usize, String> {
    let mut at = 0;
    let mut need = bytes.len();
    while at < bytes.len() {
        let key = varint(bytes, &mut at)?;
        let (field, wire) = (key >> 3, key & 7);
        let value = match wire {
            0 => varint(bytes, &mut at).map(|_| 16)?,
            1 | 5 => {
                at += if wire == 1 { 8 } else { 4 };
                16
            }
            2 => {
                let len = usize::try_from(varint(bytes, &mut at)?).unwrap_or(usize::MAX);
                let slice = (at.checked_add(len))
                    .and_then(|end| bytes.get(at..end))
                    .ok_or_else(|| format!("field {field} runs past the end of the file"))?;
                at += len;
                match field {
                    // Packed dims, int32_data, int64_data, uint64_data: one number per byte
                    // below 0x80.
                    1 | 5 | 7 | 11 => 16 * slice.iter().filter(|&&b| b < 0x80).count(),
                    // Packed float_data and double_data.
                    4 | 10 => 2 * len,
                    _ => 2 * len + 64,
                }
            }
            _ => return Err(format!("wire type {wire} of field {field} at byte {at}")),
        };
        if at > bytes.len() {
            return Err("truncated".into());
        }
        need = need.saturating_add(value);
    }
    Ok(need)
}

/// The datum type of ONNX data type `code`, or why there is none.
fn proto_datum(code: i32) -> Result<DatumType, String> {
    Ok(match code {
        1 => DatumType::F32,
        2 => DatumType::U8,
        3 => DatumType::I8,
        4 => DatumType::U16,
        5 => DatumType::I16,
        6 => DatumType::I32,
        7 => DatumType::I64,
        8 => DatumType::String,
        9 => DatumType::Bool,
        10 => DatumType::F16,
        11 => DatumType::F64,
        12 => DatumType::U32,
        13 => DatumType::U64,
        _ => {
            let name = match code {
                0 => "UNDEFINED",
                14 => "COMPLEX64",
                15 => "COMPLEX128",
                16 => "BFLOAT16",
                17..=20 => "a FLOAT8 type",
                21 => "UINT4",
                22 => "INT4",
                23 => "FLOAT4E2M1",
                _ => "unknown",
            };
            return Err(format!("data type {code} ({name}) is not supported"));
        }
    })
}

/// The tensor a `TensorProto` holds, checked: a supported data type, dims that are sizes,
/// data in the file (not external) of as many elements as the shape has, and room for it.
fn proto_tensor(mut proto: TensorProto, at: &str) -> Result<Tensor> {
    let bad = |message: String| Failure::usage(format!("{at}: {message}"));
    let dt = proto_datum(proto.data_type).map_err(bad)?;
    if proto.segment.is_some() {
        return Err(bad("a segment of a tensor is not supported".into()));
    }
    if proto.data_location == Some(1) || !proto.external_data.is_empty() {
        return Err(bad("data in an external file is not supported".into()));
    }
    let mut shape = Vec::new();
    for &dim in &proto.dims {
        shape.push(usize::try_from(dim).map_err(|_| bad(format!("dim {dim} is negative")))?);
    }
    check_allocation(dt, &shape).map_err(|e| bad(e.to_string()))?;
    // check_allocation found the byte size to fit in memory, so the count fits too.
    let count: usize = shape.iter().product();
    let count_is = |field: &str, n: usize| -> Result<()> {
        match n == count {
            true => Ok(()),
            false => Err(bad(format!(
                "{field} holds {n} values, shape {shape:?} has {count} elements"
            ))),
        }
    };
    if !proto.raw_data.is_empty() && has_values(&proto) {
        return Err(bad(
            "both raw_data and a typed field hold values (ONNX takes one or the other)".into(),
        ));
    }
    if !proto.raw_data.is_empty() || (count > 0 && dt != DatumType::String && !has_values(&proto)) {
        if dt == DatumType::String {
            return Err(bad(
                "strings in raw_data (ONNX keeps them in string_data)".into()
            ));
        }
        let size = dt.size_of();
        let raw = &mut proto.raw_data;
        if raw.len() != count * size {
            return Err(bad(format!(
                "raw_data holds {} bytes, shape {shape:?} of {} needs {}",
                raw.len(),
                type_name(dt),
                count * size
            )));
        }
        // ONNX's raw data is little-endian.
        if cfg!(target_endian = "big") {
            raw.chunks_exact_mut(size).for_each(<[u8]>::reverse);
        }
        if dt == DatumType::Bool {
            raw.iter_mut().for_each(|b| *b = u8::from(*b != 0));
        }
        // SAFETY: `dt` is a plain-data type whose every bit pattern is valid (bools made 0 or
        // 1 just above), and `raw` holds `count` native-endian elements of it (its length
        // checked above).
        return unsafe { Tensor::from_raw_dt(dt, &shape, raw) }.map_err(Failure::usage);
    }
    let narrow = |values: &[i32]| -> Result<Vec<i64>> {
        count_is("int32_data", values.len())?;
        Ok(values.iter().map(|&v| i64::from(v)).collect())
    };
    match dt {
        DatumType::F32 => {
            count_is("float_data", proto.float_data.len())?;
            Tensor::from_shape(&shape, &proto.float_data).map_err(Failure::usage)
        }
        DatumType::F64 => {
            count_is("double_data", proto.double_data.len())?;
            Tensor::from_shape(&shape, &proto.double_data).map_err(Failure::usage)
        }
        DatumType::I64 => {
            count_is("int64_data", proto.int64_data.len())?;
            Tensor::from_shape(&shape, &proto.int64_data).map_err(Failure::usage)
        }
        DatumType::U64 | DatumType::U32 => {
            count_is("uint64_data", proto.uint64_data.len())?;
            let wide = Tensor::from_shape(&shape, &proto.uint64_data).map_err(Failure::usage)?;
            in_range(wide, dt, at)
        }
        DatumType::String => {
            count_is("string_data", proto.string_data.len())?;
            let mut strings = Vec::new();
            for (i, bytes) in proto.string_data.into_iter().enumerate() {
                strings.push(
                    String::from_utf8(bytes)
                        .map_err(|_| bad(format!("string {i} is not UTF-8")))?,
                );
            }
            tract_ndarray::ArrayD::from_shape_vec(shape.as_slice(), strings)
                .map(Tensor::from)
                .map_err(|e| bad(e.to_string()))
        }
        DatumType::F16 => {
            let bits = narrow(&proto.int32_data)?;
            let bits = Tensor::from_shape(&shape, &bits).map_err(Failure::usage)?;
            let bits = in_range(bits, DatumType::U16, at)?;
            let bits = values::<u16>(&bits).map_err(Failure::usage)?;
            let halves: Vec<f16> = bits.iter().map(|&b| f16::from_bits(b)).collect();
            Tensor::from_shape(&shape, &halves).map_err(Failure::usage)
        }
        DatumType::Bool => {
            let values = narrow(&proto.int32_data)?;
            let bools: Vec<bool> = values.iter().map(|&v| v != 0).collect();
            Tensor::from_shape(&shape, &bools).map_err(Failure::usage)
        }
        // The other integers (int8, int16, uint8, uint16, int32) are in int32_data.
        _ => {
            let wide = narrow(&proto.int32_data)?;
            let wide = Tensor::from_shape(&shape, &wide).map_err(Failure::usage)?;
            in_range(wide, dt, at)
        }
    }
}

/// Whether a `TensorProto` holds values in one of its typed fields.
fn has_values(proto: &TensorProto) -> bool {
    !(proto.float_data.is_empty()
        && proto.int32_data.is_empty()
        && proto.int64_data.is_empty()
        && proto.double_data.is_empty()
        && proto.uint64_data.is_empty()
        && proto.string_data.is_empty())
}

/// `wide` (int64 or uint64 values of a typed field) as `dt`, every value checked to fit.
fn in_range(wide: Tensor, dt: DatumType, at: &str) -> Result<Tensor> {
    let narrow = wide.cast_to_dt(dt).map_err(Failure::usage)?.into_owned();
    let back = narrow
        .cast_to_dt(wide.datum_type())
        .map_err(Failure::usage)?;
    let (a, b) = (wide.as_bytes(), back.as_bytes());
    let size = wide.datum_type().size_of();
    match (a.chunks_exact(size).zip(b.chunks_exact(size))).position(|(x, y)| x != y) {
        None => Ok(narrow),
        Some(i) => Err(Failure::usage(format!(
            "{at}: value {} of element {i} does not fit {}",
            match wide.datum_type() {
                DatumType::U64 => values::<u64>(&wide).map_err(Failure::usage)?[i].to_string(),
                _ => values::<i64>(&wide).map_err(Failure::usage)?[i].to_string(),
            },
            type_name(dt)
        ))),
    }
}

/// Checks the external data files that the tensors of `graph` (and of its subgraphs) name,
/// relative to `dir`, under the file policy: each must be a regular file. tract reads them
/// itself (a memory map of the file, bounds-checked against the offset and length each tensor
/// declares), and its `open` would wait forever on a FIFO.
///
/// # Errors
/// A location that is a FIFO, a device, a socket or a directory, or cannot be opened.
pub(super) fn check_external_data(graph: &GraphProto, dir: &Path) -> Result<()> {
    let mut tensors: Vec<&TensorProto> = graph.initializer.iter().collect();
    for sparse in &graph.sparse_initializer {
        tensors.extend(sparse.values.iter().chain(&sparse.indices));
    }
    for attribute in graph.node.iter().flat_map(|node| &node.attribute) {
        tensors.extend(attribute.t.iter().chain(&attribute.tensors));
        for subgraph in attribute.g.iter().chain(&attribute.graphs) {
            check_external_data(subgraph, dir)?;
        }
    }
    for tensor in tensors {
        let location = tensor
            .external_data
            .iter()
            .find(|entry| entry.key == "location");
        if let Some(location) = location {
            Input::open(&dir.join(&location.value))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `TensorProto` of ONNX type `data_type` and `dims`, its values set by `fill`.
    fn proto(data_type: i32, dims: &[i64], fill: impl FnOnce(&mut TensorProto)) -> TensorProto {
        let mut proto = TensorProto {
            data_type,
            dims: dims.to_vec(),
            ..TensorProto::default()
        };
        fill(&mut proto);
        proto
    }

    fn error(proto: TensorProto) -> String {
        match proto_tensor(proto, "t.pb") {
            Ok(tensor) => panic!("accepted as {tensor:?}"),
            Err(e) => e.one_line(),
        }
    }

    /// The typed fields ONNX keeps each type in: small integers, bools and float16 bits in
    /// int32_data, uint32 in uint64_data, strings in string_data.
    #[test]
    fn typed_fields_become_tensors_of_their_type() {
        let i8s = proto(3, &[3], |p| p.int32_data = vec![-128, 0, 127]);
        let i8s = proto_tensor(i8s, "t.pb").expect("int8");
        assert_eq!(values::<i8>(&i8s).expect("i8"), [-128, 0, 127]);
        let u32s = proto(12, &[2], |p| p.uint64_data = vec![0, u64::from(u32::MAX)]);
        let u32s = proto_tensor(u32s, "t.pb").expect("uint32");
        assert_eq!(values::<u32>(&u32s).expect("u32"), [0, u32::MAX]);
        let bools = proto(9, &[2], |p| p.int32_data = vec![1, 0]);
        let bools = proto_tensor(bools, "t.pb").expect("bool");
        assert_eq!(values::<bool>(&bools).expect("bool"), [true, false]);
        // 0x3c00 is 1.0 and 0xc000 is -2.0 in float16.
        let halves = proto(10, &[2], |p| p.int32_data = vec![0x3c00, 0xc000]);
        let halves = proto_tensor(halves, "t.pb").expect("float16");
        let halves: Vec<f32> = (values::<f16>(&halves).expect("f16").iter())
            .map(|h| h.to_f32())
            .collect();
        assert_eq!(halves, [1.0, -2.0]);
        let strings = proto(8, &[2, 1], |p| {
            p.string_data = vec![b"ab".to_vec(), b"".to_vec()]
        });
        let strings = proto_tensor(strings, "t.pb").expect("strings");
        assert_eq!(strings.shape(), [2, 1]);
        assert_eq!(
            values::<String>(&strings).expect("strings"),
            ["ab".to_string(), String::new()]
        );
    }

    /// Raw bools are bytes, any but 0 true (as numpy and tract read them); raw data is
    /// little-endian.
    #[test]
    fn raw_data_is_little_endian_and_bools_are_nonzero_bytes() {
        let bools = proto(9, &[3], |p| p.raw_data = vec![0, 1, 7]);
        let bools = proto_tensor(bools, "t.pb").expect("bool");
        assert_eq!(values::<bool>(&bools).expect("bool"), [false, true, true]);
        let ints = proto(6, &[1], |p| p.raw_data = vec![1, 2, 0, 0]);
        let ints = proto_tensor(ints, "t.pb").expect("int32");
        assert_eq!(values::<i32>(&ints).expect("i32"), [0x0201]);
    }

    /// Values out of their type's range, a count that does not fit the shape, strings in raw
    /// data, and text that is not UTF-8 are errors naming the file.
    #[test]
    fn typed_values_are_checked() {
        let cases = [
            (
                proto(3, &[1], |p| p.int32_data = vec![300]),
                "t.pb: value 300 of element 0 does not fit i8",
            ),
            (
                proto(12, &[1], |p| p.uint64_data = vec![1 << 32]),
                "t.pb: value 4294967296 of element 0 does not fit u32",
            ),
            (
                proto(10, &[1], |p| p.int32_data = vec![-1]),
                "t.pb: value -1 of element 0 does not fit u16",
            ),
            (
                proto(7, &[2, 2], |p| p.int64_data = vec![1, 2, 3]),
                "t.pb: int64_data holds 3 values, shape [2, 2] has 4 elements",
            ),
            (
                proto(8, &[1], |p| p.raw_data = b"ab".to_vec()),
                "t.pb: strings in raw_data (ONNX keeps them in string_data)",
            ),
            (
                proto(8, &[1], |p| p.string_data = vec![vec![0xff]]),
                "t.pb: string 0 is not UTF-8",
            ),
        ];
        for (proto, expected) in cases {
            assert_eq!(error(proto), expected);
        }
    }

    /// The bound of what prost allocates covers a packed varint field's growth to 8 bytes a
    /// number (twice, for a growing `Vec`), and wire data that is no message is refused.
    #[test]
    fn decoded_bound_covers_packed_growth_and_refuses_bad_wire_data() {
        // Field 7 (int64_data), packed: 100 one-byte varints.
        let mut bytes = vec![7 << 3 | 2, 100];
        bytes.extend([1u8; 100]);
        assert_eq!(decoded_bound(&bytes), Ok(bytes.len() + 1600));
        assert!(
            decoded_bound(&[7 << 3 | 2, 100, 1]).is_err(),
            "runs past the end"
        );
        assert!(decoded_bound(&[1 << 3 | 3]).is_err(), "a group");
        assert!(decoded_bound(&[0x80; 11]).is_err(), "a varint of 11 bytes");
    }
}
