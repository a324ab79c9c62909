//! Specialisation: a validated signature becomes a [`Plan`], a loop nest whose every extent and
//! stride is a constant.
//!
//! All three ops share one form: a nest of [`Loop`]s walks the output in row-major order; the
//! innermost body reads one index tuple (a [`Lookup`] of one coordinate for Gather and
//! GatherElements, `indices.shape[-1]` for GatherND), turns it into a data offset and copies one
//! contiguous slice of `slice_bytes`. Each loop advances three pointers by constant byte strides:
//! data, indices and output. Loops of extent 1 are dropped and adjacent loops that are contiguous
//! in all three buffers are merged, so GatherND on data `[1000,256,10,15]` with indices
//! `[25,125,3]` is one loop of 3125 lookups, each copying 60 bytes.
//!
//! GatherElements along the leading axis of a table too large for the cache (S7: `[1024,1024]`
//! f32, axis 0) is *banded*: an outer loop walks bands of columns, and each band is first copied
//! into a small scratch buffer, so every lookup of the band hits the L2 cache instead of
//! pulling a fresh line from L3 (see [`Band`]).
//!
//! The plan is plain data, independent of Cranelift; checked arithmetic happens here, once, so
//! the generated code can use the constants without overflow checks. Every stride is in bytes.

use std::fmt;
use std::sync::OnceLock;

use crate::error::{Error, Result};
use crate::ir::{IndexPolicy, IndexType, OutOfRange, ResolvedOp, Validated};

/// One loop of the nest. Strides are in bytes and advance the pointers per iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Loop {
    /// Number of iterations.
    pub extent: u64,
    /// Bytes the data pointer advances per iteration.
    pub data_stride: u64,
    /// Bytes the indices pointer advances per iteration.
    pub indices_stride: u64,
    /// Bytes the output pointer advances per iteration.
    pub output_stride: u64,
}

impl Loop {
    /// The strides of the data, indices and output pointers, in that order (the order of the
    /// generated code's pointer triples).
    pub fn strides(&self) -> [u64; 3] {
        [self.data_stride, self.indices_stride, self.output_stride]
    }
}

/// One coordinate of an index tuple: where it is read and what it selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Coordinate {
    /// Byte offset of this coordinate from the tuple's start in the indices buffer.
    pub index_offset: u64,
    /// Size of the data dimension it indexes (valid indices are `0..dim_size` after wrapping).
    pub dim_size: u64,
    /// Bytes of data per unit of this coordinate.
    pub data_stride: u64,
}

/// The body of the innermost loop: read a tuple, check it, copy one slice.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Lookup {
    /// The tuple's coordinates, in the order they are stored (and checked).
    pub coordinates: Vec<Coordinate>,
    /// Contiguous bytes copied per tuple (0 when only the indices are checked).
    pub slice_bytes: u64,
    /// Whether slices are written with non-temporal (streaming) stores: for large slices into
    /// an output of a quarter of the last-level cache or more ([`streaming_output_bytes`]),
    /// where reading the destination lines for ownership would add to the memory traffic.
    pub streaming: bool,
}

/// Outputs of at least this many bytes (a common server last-level cache) always stream;
/// on a host with a smaller last-level cache, smaller ones do too (see
/// [`streaming_output_bytes`]).
pub const STREAMING_OUTPUT_BYTES: u64 = 32 << 20;

/// The output size from which large slices are written with streaming stores on this host:
/// a quarter of its last-level cache, at most [`STREAMING_OUTPUT_BYTES`], which also applies
/// when the cache size is unknown (a size read is 1 MiB or more, so this is at least 256 KiB). A slice gather reads as many bytes of data as it writes, so from there on
/// one call's working set is half the cache or more, and on a cache shared with other cores
/// the output is evicted before it is read again: the stores then only cost the reads of the
/// lines they fill. Below a quarter of the cache the output is still cached when read, and
/// streaming is slower (`gather-jit bench --op gather --data-shape 30522x768 --indices-shape
/// 8x128` with and without streaming on hosts of different caches).
pub fn streaming_output_bytes() -> u64 {
    static BYTES: OnceLock<u64> = OnceLock::new();
    *BYTES.get_or_init(|| {
        last_level_cache_bytes().map_or(STREAMING_OUTPUT_BYTES, |cache| {
            (cache / 4).min(STREAMING_OUTPUT_BYTES)
        })
    })
}

/// The size of the last-level cache CPU 0 sees (the highest level of data or unified cache),
/// from Linux's sysfs; `None` elsewhere, if it cannot be read, or if it reads under 1 MiB
/// (no last-level cache is that small: something else was read).
fn last_level_cache_bytes() -> Option<u64> {
    let caches = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    let read = |dir: &std::path::Path, name: &str| std::fs::read_to_string(dir.join(name)).ok();
    let (_, bytes) = caches
        .filter_map(|entry| {
            let dir = entry.ok()?.path();
            let kind = read(&dir, "type")?;
            if !matches!(kind.trim(), "Data" | "Unified") {
                return None;
            }
            let level: u32 = read(&dir, "level")?.trim().parse().ok()?;
            Some((level, parse_cache_size(read(&dir, "size")?.trim())?))
        })
        .max()?;
    (bytes >= 1 << 20).then_some(bytes)
}

/// `"8192K"`, `"32M"` or `"512"` (bytes) as bytes.
fn parse_cache_size(text: &str) -> Option<u64> {
    let (digits, unit) = [("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30)]
        .into_iter()
        .find_map(|(suffix, unit)| Some((text.strip_suffix(suffix)?, unit)))
        .unwrap_or((text, 1));
    digits.parse::<u64>().ok()?.checked_mul(unit)
}

/// What planning needs to know of the machine it plans for: probed once
/// ([`Host::current`]), or fixed ([`Host::REFERENCE`]) so that a plan is the same on every
/// machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Host {
    /// Outputs of at least this many bytes write their large slices with streaming stores
    /// (see [`streaming_output_bytes`]).
    pub streaming_output_bytes: u64,
}

impl Host {
    /// A machine with a last-level cache of at least 128 MiB: outputs of
    /// [`STREAMING_OUTPUT_BYTES`] and more stream.
    #[cfg_attr(
        not(feature = "unstable"),
        expect(dead_code, reason = "only the `unstable` API uses it")
    )]
    pub const REFERENCE: Host = Host {
        streaming_output_bytes: STREAMING_OUTPUT_BYTES,
    };

    /// This machine, as probed (once) from its cache sizes.
    pub fn current() -> Host {
        Host {
            streaming_output_bytes: streaming_output_bytes(),
        }
    }
}

/// Slices of at least this many bytes may stream (smaller ones are inlined moves).
pub const STREAMING_SLICE_BYTES: u64 = 512;

/// A band of columns copied to a scratch buffer before the inner loops of each iteration of
/// the bands loop: `rows` rows of `row_bytes` bytes, `row_stride` bytes apart, starting at
/// that iteration's data pointer (of its batch, when the plan has a batches loop). The inner
/// loops then read the scratch buffer (its rows are `row_bytes` apart, which the coordinate's
/// `data_stride` already says) instead of data.
///
/// Rows of a large table lie a multiple of 4 KiB apart, so a column band of the table itself
/// maps into a few cache sets and is evicted as fast as the whole table would be; the packed
/// copy does not (`cargo bench --bench gather -- 'S7/jit'` against `S7/jit_no_bands`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Band {
    /// Rows copied: the size of the indexed dimension.
    pub rows: u64,
    /// Bytes between rows in data.
    pub row_stride: u64,
    /// Bytes copied per row: the band's width.
    pub row_bytes: u64,
}

/// Choices of the specialisation pass that change the loop order, never the result. The
/// default is what measured best (`cargo bench --bench gather -- S7/`);
/// [`crate::Kernel::compile_tuned`] takes others, e.g. to test banding on small shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tuning {
    /// Band GatherElements (see [`Band`]) when the indexed table (dim size times row stride)
    /// has at least this many bytes; `u64::MAX` never bands.
    pub band_min_table_bytes: u64,
    /// Scratch a band aims for, in bytes (per thread); a table of many rows exceeds it to
    /// reach `band_min_row_bytes`, up to `band_max_rows * band_min_row_bytes`.
    pub band_scratch_bytes: u64,
    /// Narrowest band row worth packing, in bytes.
    pub band_min_row_bytes: u64,
    /// Most table rows worth packing: every band walks one row of indices and of output per
    /// table row, each on its own page, so many rows cost more TLB misses than bands save.
    pub band_max_rows: u64,
}

#[cfg_attr(
    not(feature = "unstable"),
    expect(dead_code, reason = "only the `unstable` API uses them")
)]
impl Tuning {
    /// Never band.
    pub const NO_BANDS: Tuning = Tuning {
        band_min_table_bytes: u64::MAX,
        band_scratch_bytes: 0,
        band_min_row_bytes: u64::MAX,
        band_max_rows: 0,
    };

    /// Band every element gather that the plan's own rules allow (rows and contiguous columns,
    /// maybe inside a batches loop, a non-empty table, at least half as many index rows as
    /// table rows, a band width that divides the columns), within `scratch_bytes` of scratch
    /// (for tests: small tables then take the banded path too).
    pub const fn bands_always(scratch_bytes: u64) -> Tuning {
        Tuning {
            band_min_table_bytes: 0,
            band_scratch_bytes: scratch_bytes,
            band_min_row_bytes: 1,
            band_max_rows: u64::MAX,
        }
    }
}

impl Default for Tuning {
    /// The fastest settings of `gather-jit bench --op gather-elements --axis 0 [--no-bands |
    /// --band-scratch-kib N]` on square-ish tables.
    fn default() -> Tuning {
        Tuning {
            band_min_table_bytes: 2 << 20,
            band_scratch_bytes: 512 << 10,
            band_min_row_bytes: 256,
            band_max_rows: 4096,
        }
    }
}

/// A loop nest with every shape and stride folded into constants.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Plan {
    /// The loops, outermost first; never empty. The kernel's `start..end` range is over the
    /// first loop's extent.
    pub loops: Vec<Loop>,
    /// What the innermost body does.
    pub lookup: Lookup,
    /// The band copied to scratch per iteration of the bands loop, if banded: the plan's
    /// loops are then `[bands, rows, band columns]`, or `[batches, bands, rows, band
    /// columns]` (see `specialize::band`).
    pub band: Option<Band>,
    /// Type of the indices.
    pub index_type: IndexType,
    /// How bad indices are handled.
    pub policy: IndexPolicy,
    /// Total bytes of data, indices and output (for buffer checks).
    pub data_bytes: u64,
    /// Total bytes of indices.
    pub indices_bytes: u64,
    /// Total bytes of the output.
    pub output_bytes: u64,
}

impl Plan {
    /// Builds the plan for a validated signature with the default [`Tuning`].
    ///
    /// # Errors
    /// [`Error::SizeOverflow`] if a stride does not fit in 64 bits (validation already bounds
    /// every tensor by `isize::MAX` bytes, so this is a safety net).
    #[cfg_attr(
        not(feature = "unstable"),
        expect(dead_code, reason = "only the `unstable` API uses it")
    )]
    pub fn new(signature: &Validated) -> Result<Plan> {
        Plan::with_tuning(signature, Tuning::default())
    }

    /// Builds the plan for a validated signature.
    ///
    /// # Errors
    /// As [`Plan::new`].
    pub fn with_tuning(signature: &Validated, tuning: Tuning) -> Result<Plan> {
        Plan::for_host(signature, tuning, Host::current())
    }

    /// Builds the plan for a validated signature on a machine described by `host`: a pure
    /// function of its arguments (golden tests pass [`Host::REFERENCE`]).
    ///
    /// # Errors
    /// As [`Plan::new`].
    pub fn for_host(signature: &Validated, tuning: Tuning, host: Host) -> Result<Plan> {
        let sig = signature.signature();
        let element = sig.dtype.size() as u64;
        let index_size = sig.index_type.size() as u64;
        let overflow = || Error::SizeOverflow {
            what: "plan",
            shape: sig.data_shape.clone(),
        };
        let data_strides = byte_strides(&sig.data_shape, element).ok_or_else(overflow)?;
        let indices_strides = byte_strides(&sig.indices_shape, index_size).ok_or_else(overflow)?;
        let data = &sig.data_shape;
        let indices = &sig.indices_shape;
        // Each dim walked: (extent, data stride, indices stride); output is row-major.
        let mut dims: Vec<(u64, u64, u64)> = Vec::new();
        let mut coordinates: Vec<Coordinate>;
        let slice_elements: u64;
        match signature.op() {
            ResolvedOp::Gather { axis, batch_dims } => {
                for d in 0..batch_dims {
                    dims.push((data[d] as u64, data_strides[d], indices_strides[d]));
                }
                let between: u64 = data[batch_dims..axis].iter().map(|&d| d as u64).product();
                let slice: u64 = data[axis + 1..].iter().map(|&d| d as u64).product();
                // An empty dim before or after the axis makes the output empty: nothing is
                // copied, but the indices are still checked (see `interp` for the rule), so walk
                // them once each, without the data dims; under `Zero` nothing is checked either.
                let empty_output = between == 0 || slice == 0;
                if !empty_output {
                    for d in batch_dims..axis {
                        dims.push((data[d] as u64, data_strides[d], 0));
                    }
                } else if sig.policy.out_of_range == OutOfRange::Zero {
                    dims.push((0, 0, 0));
                }
                for d in batch_dims..indices.len() {
                    dims.push((indices[d] as u64, 0, indices_strides[d]));
                }
                coordinates = vec![Coordinate {
                    index_offset: 0,
                    dim_size: data[axis] as u64,
                    data_stride: data_strides[axis],
                }];
                slice_elements = if empty_output { 0 } else { slice };
            }
            ResolvedOp::GatherElements { axis } => {
                for d in 0..indices.len() {
                    let data_stride = if d == axis { 0 } else { data_strides[d] };
                    dims.push((indices[d] as u64, data_stride, indices_strides[d]));
                }
                coordinates = vec![Coordinate {
                    index_offset: 0,
                    dim_size: data[axis] as u64,
                    data_stride: data_strides[axis],
                }];
                slice_elements = 1;
            }
            ResolvedOp::GatherNd {
                batch_dims,
                index_depth,
            } => {
                for d in 0..batch_dims {
                    dims.push((data[d] as u64, data_strides[d], indices_strides[d]));
                }
                for d in batch_dims..indices.len() - 1 {
                    dims.push((indices[d] as u64, 0, indices_strides[d]));
                }
                coordinates = (0..index_depth)
                    .map(|j| Coordinate {
                        index_offset: j as u64 * index_size,
                        dim_size: data[batch_dims + j] as u64,
                        data_stride: data_strides[batch_dims + j],
                    })
                    .collect();
                slice_elements = data[batch_dims + index_depth..]
                    .iter()
                    .map(|&d| d as u64)
                    .product();
            }
        }
        let slice_bytes = slice_elements.checked_mul(element).ok_or_else(overflow)?;
        let mut loops = build_loops(&dims, slice_bytes).ok_or_else(overflow)?;
        let band = match signature.op() {
            ResolvedOp::GatherElements { .. } => {
                band(&mut loops, &mut coordinates[0], element, index_size, tuning)
            }
            _ => None,
        };
        let output_bytes = (signature.output_len() as u64)
            .checked_mul(element)
            .ok_or_else(overflow)?;
        Ok(Plan {
            loops,
            lookup: Lookup {
                coordinates,
                slice_bytes,
                // A banded plan writes every element inline.
                streaming: band.is_none()
                    && slice_bytes >= STREAMING_SLICE_BYTES
                    && output_bytes >= host.streaming_output_bytes,
            },
            band,
            index_type: sig.index_type,
            policy: sig.policy,
            data_bytes: signature.data_len() as u64 * element,
            indices_bytes: signature.indices_len() as u64 * index_size,
            output_bytes,
        })
    }

    /// Number of lookups (innermost iterations) the whole nest performs.
    pub fn lookups(&self) -> u64 {
        self.loops.iter().map(|l| l.extent).product()
    }
}

/// The widest band row: wider ones gain nothing (the budget is for many rows).
pub const MAX_BAND_ROW_BYTES: u64 = 16 << 10;

/// The largest band, whatever the [`Tuning`]: each thread's scratch buffer grows to the
/// largest band it packs, and that allocation cannot fail gracefully mid-call. Far above any
/// band that pays (the default budget is 512 KiB).
pub const MAX_BAND_BYTES: u64 = 64 << 20;

/// Bands an element gather when it pays (see [`Band`]): rewrites `loops` from `[rows of
/// indices, columns]` to `[bands, rows of indices, columns of a band]`, or from `[batches,
/// rows of indices, columns]` to `[batches, bands, rows of indices, columns of a band]`, and
/// points `coordinate` at the scratch rows. Applies only to such a nest whose inner loop walks
/// data, indices and output contiguously and whose rows loop is the indexed axis (data stride
/// 0; this alone tells a batches loop from an outermost axis over two unmerged loops), with a
/// table of at least `tuning.band_min_table_bytes` and at most `tuning.band_max_rows` rows, at
/// least half as many rows of indices as table rows (each band copy is then read often
/// enough), and a band width that divides the columns into at least two bands of at least
/// `tuning.band_min_row_bytes` within the scratch budget.
fn band(
    loops: &mut Vec<Loop>,
    coordinate: &mut Coordinate,
    element: u64,
    index_size: u64,
    tuning: Tuning,
) -> Option<Band> {
    let (batches, rows_of_indices, columns) = match loops[..] {
        [rows_of_indices, columns] => (None, rows_of_indices, columns),
        [batches, rows_of_indices, columns] => (Some(batches), rows_of_indices, columns),
        _ => return None,
    };
    // `Kernel::call_range` relies on this too: a band's indices start `width` indices on.
    let contiguous = columns.data_stride == element
        && columns.output_stride == element
        && columns.indices_stride == index_size;
    let table_bytes = coordinate.dim_size.checked_mul(coordinate.data_stride)?;
    if !contiguous
        || rows_of_indices.data_stride != 0
        || table_bytes < tuning.band_min_table_bytes
        || coordinate.dim_size > tuning.band_max_rows
        // An empty table has no band to pack (nor a data pointer to advance).
        || coordinate.dim_size == 0
        || rows_of_indices.extent.checked_mul(2)? < coordinate.dim_size
    {
        return None;
    }
    // The widest band that fits the budget (and `MAX_BAND_BYTES`) and divides the columns; at most
    // `MAX_BAND_ROW_BYTES / element` candidates are tried, whatever the shape (a fuzzed
    // signature with 37e9 columns once made this search take 30 s).
    let max_band_bytes = (tuning.band_scratch_bytes / coordinate.dim_size)
        .max(tuning.band_min_row_bytes)
        .min(MAX_BAND_ROW_BYTES)
        .min(MAX_BAND_BYTES / coordinate.dim_size);
    let width = (1..=(columns.extent / 2).min(max_band_bytes / element))
        .rev()
        .find(|&w| columns.extent % w == 0)?;
    if width * element < tuning.band_min_row_bytes {
        return None;
    }
    let band = Band {
        rows: coordinate.dim_size,
        row_stride: coordinate.data_stride,
        row_bytes: width * element,
    };
    let bands = Loop {
        extent: columns.extent / width,
        data_stride: width * element,
        indices_stride: width.checked_mul(columns.indices_stride)?,
        output_stride: width * element,
    };
    let band_columns = Loop {
        extent: width,
        ..columns
    };
    *loops = batches
        .into_iter()
        .chain([bands, rows_of_indices, band_columns])
        .collect();
    coordinate.data_stride = band.row_bytes;
    Some(band)
}

/// Row-major byte strides of `shape` (zero dims count as one, as in the size check).
fn byte_strides(shape: &[usize], element: u64) -> Option<Vec<u64>> {
    let mut strides = vec![0; shape.len()];
    let mut stride = element;
    for (s, &d) in strides.iter_mut().zip(shape).rev() {
        *s = stride;
        stride = stride.checked_mul((d as u64).max(1))?;
    }
    Some(strides)
}

/// Turns walked dims into loops: drops extent-1 dims, merges contiguous neighbours, and gives
/// each loop its output stride (the bytes its inner loops and the slice write).
fn build_loops(dims: &[(u64, u64, u64)], slice_bytes: u64) -> Option<Vec<Loop>> {
    if dims.iter().any(|d| d.0 == 0) {
        // Nothing is gathered and no index is read (the indices are empty too, or the walk
        // above already dropped the dims that made only the output empty).
        return Some(vec![Loop {
            extent: 0,
            data_stride: 0,
            indices_stride: 0,
            output_stride: 0,
        }]);
    }
    let mut merged: Vec<(u64, u64, u64)> = Vec::new();
    for &(extent, data, indices) in dims.iter().filter(|d| d.0 != 1) {
        if let Some(last) = merged.last_mut() {
            // Merge `last` (outer) with this (inner) when walking both is one linear walk.
            if last.1 == data.checked_mul(extent)? && last.2 == indices.checked_mul(extent)? {
                *last = (last.0.checked_mul(extent)?, data, indices);
                continue;
            }
        }
        merged.push((extent, data, indices));
    }
    if merged.is_empty() {
        merged.push((1, 0, 0));
    }
    let mut loops = Vec::with_capacity(merged.len());
    let mut output_stride = slice_bytes;
    for &(extent, data_stride, indices_stride) in merged.iter().rev() {
        loops.push(Loop {
            extent,
            data_stride,
            indices_stride,
            output_stride,
        });
        output_stride = output_stride.checked_mul(extent)?;
    }
    loops.reverse();
    Some(loops)
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "plan: {} lookup(s), index type {}, {}",
            self.lookups(),
            self.index_type,
            self.policy
        )?;
        for (depth, l) in self.loops.iter().enumerate() {
            writeln!(
                f,
                "{:indent$}loop {depth}: extent {}, strides (bytes) data {}, indices {}, output {}",
                "",
                l.extent,
                l.data_stride,
                l.indices_stride,
                l.output_stride,
                indent = 2 * depth + 2
            )?;
        }
        let indent = 2 * self.loops.len() + 2;
        for (j, c) in self.lookup.coordinates.iter().enumerate() {
            writeln!(
                f,
                "{:indent$}index {j}: at +{} bytes, dim size {}, data stride {} bytes",
                "", c.index_offset, c.dim_size, c.data_stride
            )?;
        }
        if let Some(band) = self.band {
            writeln!(
                f,
                "  each iteration of loop {} first copies {} rows of {} bytes ({} bytes apart) \
                 to scratch, which the loops inside read as data",
                self.loops.len() - 3,
                band.rows,
                band.row_bytes,
                band.row_stride
            )?;
        }
        let how = if self.lookup.streaming {
            " (streaming stores)"
        } else {
            ""
        };
        write!(
            f,
            "{:indent$}copy {} bytes{how}",
            "", self.lookup.slice_bytes
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{DType, Flavor, Signature};

    fn plan(sig: Signature) -> Plan {
        Plan::new(&sig.validate().expect("valid")).expect("plan")
    }

    #[test]
    fn cache_sizes_parse_as_sysfs_writes_them() {
        assert_eq!(parse_cache_size("8192K"), Some(8 << 20));
        assert_eq!(parse_cache_size("32M"), Some(32 << 20));
        assert_eq!(parse_cache_size("1G"), Some(1 << 30));
        assert_eq!(parse_cache_size("512"), Some(512));
        for bad in ["", "K", "12Q", "-1K", "99999999999999999999G"] {
            assert_eq!(parse_cache_size(bad), None, "{bad}");
        }
    }

    #[test]
    fn outputs_from_the_host_threshold_stream_and_smaller_ones_do_not() {
        let threshold = streaming_output_bytes();
        assert!(((256 << 10)..=STREAMING_OUTPUT_BYTES).contains(&threshold));
        // Rows of 4 KiB: `lookups` of them make the output.
        let rows = |lookups: u64| plan(Signature::gather(&[8, 1024], &[lookups as usize], 0, 0));
        let at = threshold.div_ceil(4096);
        assert!(rows(at).lookup.streaming, "{threshold}");
        if at > 1 {
            assert!(!rows(at - 1).lookup.streaming, "{threshold}");
        }
        // Slices under 512 bytes never stream.
        let small = plan(Signature::gather(
            &[8, 64],
            &[(threshold / 256 + 1) as usize],
            0,
            0,
        ));
        assert!(!small.lookup.streaming);
    }

    fn lp(extent: u64, data: u64, indices: u64, output: u64) -> Loop {
        Loop {
            extent,
            data_stride: data,
            indices_stride: indices,
            output_stride: output,
        }
    }

    #[test]
    fn gather_nd_seed_layer_is_one_loop_of_60_byte_copies() {
        let p = plan(Signature::gather_nd(&[1000, 256, 10, 15], &[25, 125, 3], 0));
        assert_eq!(p.loops, vec![lp(3125, 0, 24, 60)]);
        assert_eq!(p.lookup.slice_bytes, 60);
        let dims: Vec<u64> = p.lookup.coordinates.iter().map(|c| c.dim_size).collect();
        assert_eq!(dims, vec![1000, 256, 10]);
        let strides: Vec<u64> = p.lookup.coordinates.iter().map(|c| c.data_stride).collect();
        assert_eq!(strides, vec![256 * 150 * 4, 150 * 4, 15 * 4]);
    }

    #[test]
    fn gather_nd_batch_dims_2_layer() {
        let p = plan(
            Signature::gather_nd(&[30, 2, 100, 35], &[30, 2, 3, 1], 2)
                .with_flavor(Flavor::OpenvinoGatherNd8),
        );
        // The two batch dims merge (contiguous in data and indices); the 3 tuples are inner.
        assert_eq!(
            p.loops,
            vec![lp(60, 100 * 35 * 4, 3 * 8, 3 * 140), lp(3, 0, 8, 140)]
        );
        assert_eq!(p.lookup.slice_bytes, 140);
    }

    #[test]
    fn gather_nd_batch_dims_3_layer_is_element_gather() {
        let p = plan(Signature::gather_nd(
            &[1, 64, 64, 320],
            &[1, 64, 64, 1, 1],
            3,
        ));
        assert_eq!(p.loops, vec![lp(4096, 320 * 4, 8, 4)]);
        assert_eq!(p.lookup.slice_bytes, 4);
    }

    #[test]
    fn gather1_layer_axis_1() {
        let p = plan(
            Signature::gather(&[6, 12, 10, 24], &[15, 4, 20, 28], 1, 0)
                .with_flavor(Flavor::OpenvinoGather1),
        );
        assert_eq!(
            p.loops,
            vec![lp(6, 12 * 240 * 4, 0, 33600 * 960), lp(33600, 0, 8, 960)]
        );
        assert_eq!(p.lookup.coordinates[0].data_stride, 960);
    }

    #[test]
    fn gather_elements_keeps_data_strides_of_non_axis_dims() {
        let p = plan(Signature::gather_elements(&[3, 5], &[2, 4], 0));
        assert_eq!(p.loops, vec![lp(2, 0, 32, 16), lp(4, 4, 8, 4)]);
        let p = plan(Signature::gather_elements(&[64, 4096], &[64, 4096], 1));
        assert_eq!(
            p.loops,
            vec![lp(64, 4096 * 4, 4096 * 8, 4096 * 4), lp(4096, 0, 8, 4)]
        );
    }

    #[test]
    fn empty_dim_between_batch_and_axis_still_walks_indices() {
        let p = plan(Signature::gather(&[0, 5], &[3], 1, 0));
        assert_eq!(p.loops, vec![lp(3, 0, 8, 0)]);
        assert_eq!(p.lookup.slice_bytes, 0);
        // Under Zero nothing is checked, so nothing is walked.
        let p = plan(Signature::gather(&[0, 5], &[3], 1, 0).with_out_of_range(OutOfRange::Zero));
        assert_eq!(p.lookups(), 0);
    }

    #[test]
    fn empty_dim_after_the_axis_walks_only_the_indices() {
        // Output [130^4, 3, 0] is empty: one lookup per index, not 130^4 per index.
        let p = plan(Signature::gather(&[130, 130, 130, 130, 5, 0], &[3], 4, 0));
        assert_eq!(p.loops, vec![lp(3, 0, 8, 0)]);
        assert_eq!(p.lookup.slice_bytes, 0);
        let p = plan(
            Signature::gather(&[130, 130, 130, 130, 5, 0], &[3], 4, 0)
                .with_out_of_range(OutOfRange::Zero),
        );
        assert_eq!(p.lookups(), 0);
    }

    #[test]
    fn scalar_indices_give_one_lookup() {
        let p = plan(Signature::gather(&[7, 2], &[], 0, 0));
        assert_eq!(p.loops, vec![lp(1, 0, 0, 8)]);
    }

    #[test]
    fn large_leading_axis_element_gathers_band_into_scratch() {
        let s7 = Signature::gather_elements(&[1024, 1024], &[1024, 1024], 0);
        let p = plan(s7.clone());
        // 512 KiB of scratch over 1024 rows: bands of 128 f32 columns.
        assert_eq!(
            p.band,
            Some(Band {
                rows: 1024,
                row_stride: 4096,
                row_bytes: 512
            })
        );
        assert_eq!(
            p.loops,
            vec![
                lp(8, 512, 1024, 512),
                lp(1024, 0, 8192, 4096),
                lp(128, 4, 8, 4)
            ]
        );
        assert_eq!(p.lookup.coordinates[0].data_stride, 512);
        assert_eq!(p.lookups(), 1024 * 1024);
        let no_bands = Plan::with_tuning(&s7.validate().expect("valid"), Tuning::NO_BANDS);
        assert_eq!(no_bands.expect("plan").band, None);
    }

    #[test]
    fn batched_element_gathers_band_inside_the_batches_loop() {
        // S7's table three times over, gathered along axis 1: the batches loop stays outside
        // S7's banded nest.
        let p = plan(Signature::gather_elements(
            &[3, 1024, 1024],
            &[3, 1024, 1024],
            1,
        ));
        assert_eq!(
            p.band.map(|band| (band.rows, band.row_bytes)),
            Some((1024, 512))
        );
        assert_eq!(
            p.loops,
            vec![
                lp(3, 4 << 20, 8 << 20, 4 << 20),
                lp(8, 512, 1024, 512),
                lp(1024, 0, 8192, 4096),
                lp(128, 4, 8, 4)
            ]
        );
        assert!(
            p.to_string()
                .contains("each iteration of loop 1 first copies 1024 rows")
        );
        // Two batches loops do not band: indices that cover 2 of every 3 tables keep the two
        // batch dims from merging into one loop.
        let two_outer = plan(Signature::gather_elements(
            &[2, 3, 1024, 1024],
            &[2, 2, 1024, 1024],
            2,
        ));
        assert_eq!(two_outer.loops.len(), 4);
        assert_eq!(two_outer.band, None);
        // Three loops whose first is the indexed axis (trailing dims that do not merge) are
        // not batches: the middle loop walks data, so it is not the rows of a table.
        for (data, indices) in [([8, 8, 16], [8, 8, 12]), ([6, 3, 8], [4, 3, 5])] {
            let signature = Signature::gather_elements(&data, &indices, 0);
            let p = Plan::with_tuning(
                &signature.validate().expect("valid"),
                Tuning::bands_always(64),
            )
            .expect("plan");
            assert_eq!(p.loops.len(), 3, "{data:?}");
            assert_eq!(p.loops[0].data_stride, 0, "{data:?}: the axis is outermost");
            assert_eq!(p.band, None, "{data:?}");
        }
    }

    #[test]
    fn element_gathers_band_only_when_it_pays() {
        let bands = |data: &[usize], indices: &[usize], axis: i64| {
            plan(Signature::gather_elements(data, indices, axis))
                .band
                .is_some()
        };
        // The table fits the cache.
        assert!(!bands(&[256, 1024], &[256, 1024], 0));
        // Too few index rows to pay for copying every table row.
        assert!(!bands(&[1024, 1024], &[400, 1024], 0));
        // Along the inner axis the lookups stay within a row.
        assert!(!bands(&[64, 16384], &[64, 16384], 1));
        // 1021 columns: no divisor gives bands of 256 bytes or more.
        assert!(!bands(&[1024, 1021], &[1024, 1021], 0));
        // An empty table, even when everything else would band.
        let empty = Signature::gather_elements(&[0, 8], &[4, 8], 0);
        let always = Plan::with_tuning(
            &empty.validate().expect("valid"),
            Tuning::bands_always(1024),
        );
        assert_eq!(always.expect("plan").band, None);
        // 8192 rows: each band would walk 8192 pages of indices and of output.
        assert!(!bands(&[8192, 512], &[8192, 512], 0));
        // 4096 rows: bands of 256 bytes, which take 1 MiB of scratch (above the 512 KiB aim).
        let p = plan(Signature::gather_elements(&[4096, 1024], &[4096, 1024], 0));
        assert_eq!(p.band.map(|band| band.row_bytes), Some(256));
        // 1024 rows of 4096 columns (16 MiB): bands of 128 columns.
        assert!(bands(&[1024, 4096], &[1024, 4096], 0));
        // Trailing dims merge into the columns.
        assert!(bands(&[1024, 32, 32], &[1024, 32, 32], 0));
    }

    #[test]
    fn band_width_is_capped_whatever_the_columns() {
        // From the fuzzer: 130^5 columns. The band is the widest divisor within the cap (and
        // the search for it tries at most the cap's number of widths).
        let huge = Signature::gather_elements(&[130; 6], &[130; 6], 0).with_dtype(DType::F16);
        let budget = Tuning::bands_always(u64::MAX);
        let p = Plan::with_tuning(&huge.validate().expect("valid"), budget).expect("plan");
        let band = p.band.expect("bands");
        assert!(band.row_bytes <= MAX_BAND_ROW_BYTES);
        assert_eq!(130u64.pow(5) % (band.row_bytes / 2), 0);
        // 8125 = 5^4 * 13 is the largest divisor of 130^5 = 2^5 * 5^5 * 13^5 up to 8192.
        assert_eq!(band.row_bytes, 2 * 8125);
    }
}
