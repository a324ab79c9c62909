//! Timing statistics: per-call times of a measured function (median, percentiles), and how
//! `bench`, `run`, `demo` and `layer` print times and rates.

use std::time::{Duration, Instant};

/// Per-call statistics of a measured function.
pub struct Stats {
    /// Median nanoseconds per call (the 50th percentile).
    pub median: f64,
    /// 90th percentile of the samples, nanoseconds per call.
    pub p90: f64,
    /// 99th percentile of the samples, nanoseconds per call.
    pub p99: f64,
    /// Fastest sample, nanoseconds per call.
    pub min: f64,
    /// Slowest sample, nanoseconds per call.
    pub max: f64,
    /// Number of samples.
    pub samples: usize,
    /// Calls per sample (under [`Plan::iterations`] the last sample may have fewer).
    pub calls_per_sample: u64,
    /// Timed calls in all: the iterations.
    pub iterations: u64,
}

/// The warm-up calls a measurement makes unless told otherwise (`--warmup`): one to warm
/// caches and pages, and one whose time sizes the samples.
pub const DEFAULT_WARMUP: u64 = 2;

/// How a function is measured: calls that are not timed, then timed calls, either for a time
/// budget or a fixed number of them (`bench --warmup N --iterations N`, as trtexec's
/// `--warmUp` / `--iterations` and benchmark_app's `-niter`).
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Calls before the timed ones, not timed; the last one's time sizes the samples.
    pub warmup: u64,
    /// Timed calls in all, instead of `budget`.
    pub iterations: Option<u64>,
    /// How long the timed calls take in all, without `iterations` (at least 5 samples, at
    /// most 10 000).
    pub budget: Duration,
}

impl Plan {
    /// Timed calls for `budget`, after the default warm-up.
    pub fn budget(budget: Duration) -> Plan {
        Plan {
            warmup: DEFAULT_WARMUP,
            iterations: None,
            budget,
        }
    }
}

/// Times `f` for about `budget` (see [`measure_with`]).
pub fn measure(budget: Duration, f: impl FnMut()) -> Stats {
    measure_with(Plan::budget(budget), f)
}

/// Times `f` as `plan` says. Each sample runs `f` enough times to take ~10 µs, as the last
/// warm-up call measured it, so the clock's own cost does not dominate short calls; with no
/// warm-up each sample is one call. With a number of iterations, the samples are made small
/// enough that there are at least 5 of them where the iterations allow.
pub fn measure_with(plan: Plan, mut f: impl FnMut()) -> Stats {
    let mut calls_per_sample = 1;
    for left in (0..plan.warmup).rev() {
        let t = Instant::now();
        f();
        if left == 0 {
            let once = t.elapsed().as_nanos().max(1) as u64;
            calls_per_sample = (10_000 / once).clamp(1, 10_000);
        }
    }
    let mut per_call = Vec::new();
    let mut iterations = 0;
    let mut sample = |calls: u64, per_call: &mut Vec<f64>| {
        let t = Instant::now();
        for _ in 0..calls {
            f();
        }
        per_call.push(t.elapsed().as_nanos() as f64 / calls as f64);
        iterations += calls;
    };
    match plan.iterations {
        Some(total) => {
            // At least one call, so that there is a sample (the flags refuse 0).
            let total = total.max(1);
            calls_per_sample = calls_per_sample.min((total / 5).max(1));
            let mut left = total;
            while left > 0 {
                let calls = calls_per_sample.min(left);
                sample(calls, &mut per_call);
                left -= calls;
            }
        }
        None => {
            let started = Instant::now();
            while per_call.len() < 5 || (per_call.len() < 10_000 && started.elapsed() < plan.budget)
            {
                sample(calls_per_sample, &mut per_call);
            }
        }
    }
    per_call.sort_by(f64::total_cmp);
    Stats {
        median: per_call[per_call.len() / 2],
        p90: percentile(&per_call, 90),
        p99: percentile(&per_call, 99),
        min: per_call[0],
        max: per_call[per_call.len() - 1],
        samples: per_call.len(),
        calls_per_sample,
        iterations,
    }
}

/// The `p`th percentile of `sorted` (not empty) by the nearest-rank rule: the smallest sample
/// that at least `p`% of the samples do not exceed.
fn percentile(sorted: &[f64], p: usize) -> f64 {
    let rank = (sorted.len() * p).div_ceil(100).max(1);
    sorted[rank.min(sorted.len()) - 1]
}

/// The median in nanoseconds of `f`'s time, one call per sample, for at most `samples` samples
/// or `budget` (at least three samples).
pub fn measure_each(budget: Duration, samples: usize, mut f: impl FnMut()) -> f64 {
    let started = Instant::now();
    let mut times = Vec::with_capacity(samples);
    while times.len() < samples && (times.len() < 3 || started.elapsed() < budget) {
        let t = Instant::now();
        f();
        times.push(t.elapsed().as_nanos() as f64);
    }
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Whole-number nanoseconds of `d`, saturating.
pub fn nanos(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

/// `850 ns`, `12.3 µs`, `4.56 ms`, `1.23 s`.
pub fn human_time(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.1} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// Gigabytes (10^9 bytes) per second, 0 for a zero time.
pub fn gbps(bytes: u64, d: Duration) -> f64 {
    if d.is_zero() {
        0.0
    } else {
        bytes as f64 / d.as_nanos() as f64
    }
}
