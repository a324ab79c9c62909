//! A reader of the `.npy` files numpy's `np.save` writes for the test data (format 1.0,
//! little-endian `<f4` / `<f2` / `<i8`, C order), into tract tensors.

#![allow(dead_code)]

use std::path::Path;

use tract_onnx::prelude::*;

/// The array in the `.npy` file at `path`; panics (with the path) on anything else.
pub fn read(path: &Path) -> Tensor {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&bytes[..6], b"\x93NUMPY", "{}: not .npy", path.display());
    assert_eq!(bytes[6], 1, "{}: format {}", path.display(), bytes[6]);
    let header_len = usize::from(u16::from_le_bytes([bytes[8], bytes[9]]));
    let header = std::str::from_utf8(&bytes[10..10 + header_len]).expect("an ASCII header");
    let body = &bytes[10 + header_len..];
    assert!(
        header.contains("'fortran_order': False"),
        "{}: {header}",
        path.display()
    );
    let descr = header
        .split("'descr': '")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .expect("a descr");
    let shape: Vec<usize> = header
        .split("'shape': (")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .expect("a shape")
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| d.parse().expect("a dim"))
        .collect();
    let dt = match descr {
        "<f4" => f32::datum_type(),
        "<f2" => f16::datum_type(),
        "<i8" => i64::datum_type(),
        other => panic!("{}: dtype {other}", path.display()),
    };
    assert_eq!(
        body.len(),
        shape.iter().product::<usize>() * dt.size_of(),
        "{}",
        path.display()
    );
    // SAFETY: the three types are plain data, and `body` holds exactly the shape's elements
    // (asserted above), little-endian as on the machines these tests run on.
    unsafe { Tensor::from_raw_dt(dt, &shape, body) }.expect("a tensor")
}
