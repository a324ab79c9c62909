//! Unit tests of the planner: loops merged and dropped, strides, bands, streaming.
use super::*;
use crate::ir::{DType, Flavor, Signature};

fn plan(sig: Signature) -> Plan {
    Plan::new(&sig.validate().expect("valid")).expect("plan")
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

#[test]
fn fresh_outputs_never_stream() {
    let large = Signature::gather(
        &[8, 1024],
        &[(STREAMING_OUTPUT_BYTES / 4096) as usize],
        0,
        0,
    );
    assert!(plan(large.clone()).lookup.streaming);
    let fresh = large.with_output_memory(crate::OutputMemory::Fresh);
    assert!(!plan(fresh).lookup.streaming);
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
