//! Reliability of the cache and of kernels under load: a bounded cache really returns JIT
//! memory, held kernels outlive eviction, and many threads share one cache and one kernel.
//!
//! The memory tests measure the whole process's resident memory, so they run in a child
//! process (this same test binary, filtered to one ignored test) where no other test
//! allocates at the same time.

use std::collections::HashSet;
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use gather_jit::interp::interpret;
use gather_jit::{
    CacheStats, DType, Flavor, IndexType, Kernel, KernelCache, OutOfRange, Signature,
};
use gather_jit_workloads::XorShift;

// Kernels and the cache are shared between threads: checked at compile time.
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Kernel>();
    send_sync::<Arc<Kernel>>();
    send_sync::<KernelCache>();
    send_sync::<CacheStats>();
};

/// Data bytes where each element differs from its neighbours.
fn data_for(sig: &Signature, salt: u8) -> Vec<u8> {
    let validated = sig.validate().expect("valid");
    (0..validated.data_len() * sig.dtype.size())
        .map(|i| (i as u8).wrapping_mul(29).wrapping_add(salt) | 1)
        .collect()
}

/// Random in-range indices (some negative where the policy wraps, some out of range under
/// `Zero`) for `sig`, native-endian.
fn indices_for(sig: &Signature, rng: &mut XorShift) -> Vec<u8> {
    let validated = sig.validate().expect("valid");
    let mut out = Vec::new();
    let depth = *sig.indices_shape.last().unwrap_or(&1);
    for flat in 0..validated.indices_len() {
        let dim = match validated.op() {
            gather_jit::ir::ResolvedOp::GatherNd { batch_dims, .. } => {
                sig.data_shape[batch_dims + flat % depth]
            }
            gather_jit::ir::ResolvedOp::Gather { axis, .. }
            | gather_jit::ir::ResolvedOp::GatherElements { axis } => sig.data_shape[axis],
        } as i64;
        let mut value = rng.below(dim as u64) as i64;
        if sig.policy.out_of_range == OutOfRange::Zero && rng.below(4) == 0 {
            value += dim;
        }
        assert!(
            sig.index_type.try_encode(value.into(), &mut out),
            "{value} fits {}",
            sig.index_type
        );
    }
    out
}

/// A pool of distinct signatures (every op, several flavors, dtypes and policies), all with
/// `i32` indices and small shapes.
fn signature_pool(count: usize) -> Vec<Signature> {
    let dtypes = [DType::F32, DType::U8, DType::F64, DType::I16];
    (0..count)
        .map(|k| {
            let n = 2 + k / 6;
            let sig = match k % 6 {
                0 => Signature::gather(&[n, 3], &[4], 0, 0),
                1 => Signature::gather(&[2, n, 5], &[3], 1, 0).with_flavor(Flavor::OpenvinoGather8),
                2 => Signature::gather_elements(&[3, n], &[3, 2], 1),
                3 => Signature::gather_nd(&[n, 4, 3], &[5, 2], 0),
                4 => Signature::gather_nd(&[2, n, 7], &[2, 3, 1], 1)
                    .with_flavor(Flavor::OpenvinoGatherNd8),
                _ => Signature::gather(&[n, 40], &[6], 0, 0).with_out_of_range(OutOfRange::Zero),
            };
            sig.with_dtype(dtypes[k % dtypes.len()])
                .with_index_type(IndexType::I32)
        })
        .collect()
}

/// Runs `kernel` and the interpreter on the same inputs; panics if they differ.
#[track_caller]
fn run_and_check(kernel: &Kernel, data: &[u8], indices: &[u8]) {
    let validated = kernel.validated();
    let expected = interpret(validated, data, indices).expect("valid indices");
    let mut output = vec![0xEE; expected.len()];
    kernel
        .run_bytes(data, indices, &mut output)
        .expect("valid indices");
    assert_eq!(output, expected, "{}", kernel.signature());
}

/// Joins `handles`, failing (instead of hanging) if they do not all finish in `limit`.
fn join_within(
    handles: Vec<std::thread::JoinHandle<()>>,
    done: &mpsc::Receiver<()>,
    limit: Duration,
) {
    let deadline = Instant::now() + limit;
    for _ in 0..handles.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        done.recv_timeout(left)
            .unwrap_or_else(|_| panic!("threads did not finish within {limit:?}: deadlock?"));
    }
    for h in handles {
        h.join().expect("thread panicked");
    }
}

/// 8 threads request random signatures (with many repeats, and bursts where all of them want
/// the same new one) from one cache and run every kernel against the interpreter. Each
/// signature compiles exactly once: the capacity exceeds the number of distinct signatures.
#[test]
fn eight_threads_share_one_cache_and_compile_each_signature_once() {
    const THREADS: usize = 8;
    const REQUESTS: usize = 150;
    let pool = Arc::new(signature_pool(36));
    let cache = Arc::new(KernelCache::new(64));
    let barrier = Arc::new(Barrier::new(THREADS));
    let requested = Arc::new(Mutex::new(HashSet::new()));
    let (done, finished) = mpsc::channel();
    let handles = (0..THREADS)
        .map(|t| {
            let (pool, cache, barrier) = (pool.clone(), cache.clone(), barrier.clone());
            let (requested, done) = (requested.clone(), done.clone());
            std::thread::spawn(move || {
                let mut rng = XorShift::new(t as u64 + 1);
                for round in 0..REQUESTS {
                    // Every 25th round all threads ask for the same signature at once.
                    let k = if round % 25 == 0 {
                        barrier.wait();
                        (round / 25 * 7) % pool.len()
                    } else {
                        rng.below(pool.len() as u64) as usize
                    };
                    let sig = &pool[k];
                    requested.lock().expect("set").insert(k);
                    let kernel = cache.get(sig).expect("valid signature");
                    assert_eq!(kernel.signature(), sig);
                    let data = data_for(sig, k as u8);
                    let indices = indices_for(sig, &mut rng);
                    run_and_check(&kernel, &data, &indices);
                }
                done.send(()).expect("main thread waits");
            })
        })
        .collect();
    join_within(handles, &finished, Duration::from_secs(120));
    let distinct = requested.lock().expect("set").len() as u64;
    let stats = cache.stats();
    assert_eq!(stats.compilations, distinct, "{stats:?}");
    assert_eq!(stats.misses, distinct, "{stats:?}");
    assert_eq!(
        stats.hits + stats.misses,
        (THREADS * REQUESTS) as u64,
        "{stats:?}"
    );
    assert_eq!(stats.evictions, 0, "{stats:?}");
    assert_eq!(stats.entries as u64, distinct, "{stats:?}");
}

/// 4 threads request 12 signatures from a cache of capacity 3, so entries are evicted all the
/// time and every thread's view keeps going stale: each request still returns the kernel of
/// its own signature (checked against the interpreter), every request is counted once, and
/// the cache stays within capacity.
#[test]
fn thread_views_stay_correct_under_constant_eviction() {
    const THREADS: usize = 4;
    const REQUESTS: usize = 120;
    let pool = Arc::new(signature_pool(12));
    let cache = Arc::new(KernelCache::new(3));
    let (done, finished) = mpsc::channel();
    let handles = (0..THREADS)
        .map(|t| {
            let (pool, cache, done) = (pool.clone(), cache.clone(), done.clone());
            std::thread::spawn(move || {
                let mut rng = XorShift::new(t as u64 + 40);
                for round in 0..REQUESTS {
                    // Runs of repeats (hits through the view) between random jumps.
                    let k = if round % 3 == 0 {
                        rng.below(pool.len() as u64) as usize
                    } else {
                        (t + round / 3) % pool.len()
                    };
                    let sig = &pool[k];
                    let kernel = cache.get(sig).expect("valid signature");
                    assert_eq!(kernel.signature(), sig);
                    if round % 10 == 0 {
                        let indices = indices_for(sig, &mut rng);
                        run_and_check(&kernel, &data_for(sig, k as u8), &indices);
                    }
                }
                done.send(()).expect("main thread waits");
            })
        })
        .collect();
    join_within(handles, &finished, Duration::from_secs(120));
    let stats = cache.stats();
    assert_eq!(
        stats.hits + stats.misses,
        (THREADS * REQUESTS) as u64,
        "{stats:?}"
    );
    assert!(stats.entries <= 3, "{stats:?}");
    assert!(stats.evictions > 0, "{stats:?}");
    assert_eq!(
        stats.entries as u64,
        stats.misses - stats.evictions,
        "{stats:?}"
    );
}

/// One kernel, called from 8 threads at once: whole gathers on different indices, and
/// disjoint `call_range` pieces of one gather writing into one shared output.
#[test]
fn one_kernel_called_from_many_threads_at_once() {
    let sig = Signature::gather(&[64, 33], &[48, 5], 0, 0).with_index_type(IndexType::I32);
    let kernel = Arc::new(Kernel::compile(&sig).expect("kernel"));
    let data = Arc::new(data_for(&sig, 7));
    let barrier = Arc::new(Barrier::new(8));
    let (done, finished) = mpsc::channel();
    let handles = (0..8)
        .map(|t| {
            let (kernel, data, barrier, done) =
                (kernel.clone(), data.clone(), barrier.clone(), done.clone());
            std::thread::spawn(move || {
                let mut rng = XorShift::new(t + 11);
                barrier.wait();
                for _ in 0..50 {
                    let indices = indices_for(kernel.signature(), &mut rng);
                    run_and_check(&kernel, &data, &indices);
                }
                done.send(()).expect("main thread waits");
            })
        })
        .collect();
    join_within(handles, &finished, Duration::from_secs(60));

    // The parallel split: 8 threads, each one range of the outer loop, one output buffer.
    let mut rng = XorShift::new(99);
    let indices = indices_for(&sig, &mut rng);
    let expected = interpret(kernel.validated(), &data, &indices).expect("valid");
    let mut output = vec![0u8; expected.len()];
    let extent = kernel.outer_extent();
    assert!(extent >= 8, "{}", kernel.plan());
    /// The output's address, sent to the threads that write disjoint parts of it.
    #[derive(Clone, Copy)]
    struct Shared(*mut u8);
    // SAFETY: each thread writes only the part of the output its range covers (the ranges are
    // disjoint), and the buffer outlives the scope.
    unsafe impl Send for Shared {}
    let out = Shared(output.as_mut_ptr());
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let (kernel, data, indices) = (&kernel, &data, &indices);
            s.spawn(move || {
                let out = out;
                let range = extent * t / 8..extent * (t + 1) / 8;
                // SAFETY: buffers sized by the signature (the interpreter accepted them); the
                // ranges of the 8 threads are disjoint, so are the output parts they write.
                unsafe { kernel.call_range(data.as_ptr(), indices.as_ptr(), out.0, range) }
                    .expect("valid indices");
            });
        }
    });
    assert_eq!(output, expected);
}

/// A kernel handle held by a caller stays valid after the cache evicts it, even while the
/// cache compiles (and frees) many other kernels whose code may reuse freed addresses.
#[test]
fn held_kernel_survives_eviction_and_churn() {
    let cache = KernelCache::new(2);
    let sig = Signature::gather_nd(&[5, 4, 3], &[6, 2], 0).with_index_type(IndexType::I32);
    let held = cache.get(&sig).expect("kernel");
    let pool = signature_pool(40);
    for other in &pool {
        let kernel = cache.get(other).expect("kernel");
        let mut rng = XorShift::new(5);
        run_and_check(&kernel, &data_for(other, 1), &indices_for(other, &mut rng));
    }
    let stats = cache.stats();
    assert_eq!(stats.entries, 2, "{stats:?}");
    assert_eq!(stats.evictions, 39, "{stats:?}");
    assert_eq!(Arc::strong_count(&held), 1, "the cache no longer holds it");
    let mut rng = XorShift::new(3);
    run_and_check(&held, &data_for(&sig, 2), &indices_for(&sig, &mut rng));
    cache.clear();
    run_and_check(&held, &data_for(&sig, 3), &indices_for(&sig, &mut rng));
    // Asking again builds a new kernel on the code `held` keeps alive; a fresh compile is a
    // different copy of that code. Both run beside the held one.
    let again = cache.get(&sig).expect("kernel");
    assert!(!Arc::ptr_eq(&again, &held) && again.reuses_code());
    let copy = Kernel::compile(&sig).expect("kernel");
    assert_ne!(copy.machine_code().as_ptr(), held.machine_code().as_ptr());
    run_and_check(&again, &data_for(&sig, 4), &indices_for(&sig, &mut rng));
    run_and_check(&copy, &data_for(&sig, 5), &indices_for(&sig, &mut rng));
    drop(again);
    run_and_check(&held, &data_for(&sig, 6), &indices_for(&sig, &mut rng));
}

// ---------------------------------------------------------------------------------------------
// Memory: a bounded cache returns the executable memory of evicted kernels.

/// Environment variable that makes [`memory_child`] run: the number of signatures.
const MEMORY_CHILD: &str = "GATHER_JIT_MEMORY_CHILD";

/// Environment variable that makes [`memory_child`] leak every kernel (a negative control).
const MEMORY_LEAK: &str = "GATHER_JIT_MEMORY_LEAK";

/// Capacity of the cache in the memory tests.
const CAPACITY: usize = 256;

/// The `i`-th of an endless series of distinct, valid signatures (the three ops in turn, with
/// a growing dim), each a separate kernel.
fn distinct_signature(i: usize) -> Signature {
    let n = 2 + i / 3;
    match i % 3 {
        0 => Signature::gather(&[n, 3], &[2], 0, 0),
        1 => Signature::gather_elements(&[2, n], &[2, 1], 1),
        _ => Signature::gather_nd(&[n, 2, 3], &[4, 1], 0),
    }
    .with_index_type(IndexType::I32)
}

/// Resident memory of this process in KiB (`VmRSS` of `/proc/self/status`).
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmRSS line")
}

/// What the child measured.
#[derive(Debug)]
struct MemoryReport {
    signatures: u64,
    /// RSS (KiB) once the cache is full and warm (after 2 x capacity compiles).
    warm_rss: u64,
    /// The largest RSS (KiB) seen after that.
    peak_rss: u64,
    /// At the end.
    final_rss: u64,
    compilations: u64,
    evictions: u64,
    seconds: f64,
}

/// Runs [`memory_child`] in a fresh process of this test binary and parses its report.
fn measure_in_child(signatures: usize, leak: bool) -> MemoryReport {
    let mut child = crate::util::this_test_binary();
    child
        .args([
            "--exact",
            "reliability::memory_child",
            "--ignored",
            "--nocapture",
        ])
        .args(["--test-threads", "1"])
        .env(MEMORY_CHILD, signatures.to_string())
        .env_remove(MEMORY_LEAK);
    if leak {
        child.env(MEMORY_LEAK, "1");
    }
    let out = child.output().expect("child runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for progress in stdout.lines().filter(|l| l.starts_with("progress")) {
        println!("{progress}");
    }
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("MEMORY ").map(|(_, report)| report))
        .unwrap_or_else(|| panic!("no report in {stdout}"));
    let field = |name: &str| -> f64 {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {line}"))
    };
    MemoryReport {
        signatures: field("signatures") as u64,
        warm_rss: field("warm_rss_kib") as u64,
        peak_rss: field("peak_rss_kib") as u64,
        final_rss: field("final_rss_kib") as u64,
        compilations: field("compilations") as u64,
        evictions: field("evictions") as u64,
        seconds: field("seconds"),
    }
}

/// The child: compiles `$GATHER_JIT_MEMORY_CHILD` distinct signatures through a cache of
/// capacity 256, running every 50th kernel while the data is small, and prints one
/// `MEMORY key=value ...` line.
#[test]
#[ignore = "the child process of the memory tests; does nothing unless GATHER_JIT_MEMORY_CHILD is set"]
fn memory_child() {
    let Some(count) = std::env::var(MEMORY_CHILD)
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    else {
        return;
    };
    let leak = std::env::var_os(MEMORY_LEAK).is_some();
    let started = Instant::now();
    let cache = KernelCache::new(CAPACITY);
    let warm_after = 2 * CAPACITY;
    let (mut warm_rss, mut peak_rss) = (0, 0);
    for i in 0..count {
        let sig = distinct_signature(i);
        let kernel = cache.get(&sig).expect("valid signature");
        // Run a sample of the kernels, only small ones: the data of the later signatures
        // grows to hundreds of KiB, and the allocator keeps heap that large buffers came
        // from (glibc raises its mmap threshold after a free), which would hide the JIT's
        // figure behind the test's own data.
        if i % 50 == 0 && kernel.validated().data_len() <= 4096 {
            let mut rng = XorShift::new(i as u64 + 1);
            run_and_check(
                &kernel,
                &data_for(&sig, i as u8),
                &indices_for(&sig, &mut rng),
            );
        }
        if leak {
            // The negative control: what the measurement shows if evicted kernels leaked.
            std::mem::forget(Arc::clone(&kernel));
        }
        drop(kernel);
        if i + 1 == warm_after {
            warm_rss = rss_kib();
        }
        if i + 1 > warm_after && (i + 1) % 64 == 0 {
            peak_rss = peak_rss.max(rss_kib());
        }
        if count >= 10_000 && (i + 1) % (count / 20) == 0 {
            println!(
                "progress signatures={} rss_kib={} seconds={:.1}",
                i + 1,
                rss_kib(),
                started.elapsed().as_secs_f64()
            );
        }
    }
    let stats = cache.stats();
    println!(
        "\nMEMORY signatures={count} warm_rss_kib={warm_rss} peak_rss_kib={peak_rss} \
         final_rss_kib={} \
         compilations={} evictions={} seconds={:.2}",
        rss_kib(),
        stats.compilations,
        stats.evictions,
        started.elapsed().as_secs_f64()
    );
}

/// Largest RSS growth (KiB) allowed after the warm point. A leak of the smallest possible
/// JIT allocation, one 4 KiB page per evicted kernel (each module maps its code in whole
/// pages), would add `evicted * 4 KiB`: 9.7 MiB for the 2,488 kernels compiled after the warm
/// point of the fast test; the negative control measures about 7 KiB per leaked kernel. Without
/// a leak the growth is allocator noise (under 100 KiB measured).
const RSS_GROWTH_BOUND_KIB: u64 = 4 * 1024;

/// Checks a child's report: every signature compiled once, all but `CAPACITY` evicted, and
/// resident memory flat after the warm point.
#[track_caller]
fn assert_bounded(report: &MemoryReport) {
    println!("{report:?}");
    assert_eq!(report.compilations, report.signatures, "{report:?}");
    assert_eq!(
        report.evictions,
        report.signatures - CAPACITY as u64,
        "{report:?}"
    );
    let growth = report.peak_rss.saturating_sub(report.warm_rss);
    assert!(
        growth < RSS_GROWTH_BOUND_KIB,
        "RSS grew by {growth} KiB: {report:?}"
    );
    let end = report.final_rss.saturating_sub(report.warm_rss);
    assert!(
        end < RSS_GROWTH_BOUND_KIB,
        "RSS ended {end} KiB above the warm point: {report:?}"
    );
}

/// The fast variant: 3,000 distinct signatures through a cache of 256 keep RSS flat; the same
/// run with every kernel leaked (the negative control) shows the growth a leak would cause,
/// so the bound is known to catch one.
#[test]
fn bounded_cache_returns_jit_memory() {
    let report = measure_in_child(3_000, false);
    assert_bounded(&report);
    let leaked = measure_in_child(3_000, true);
    let growth = leaked.peak_rss.saturating_sub(leaked.warm_rss);
    assert!(
        growth > 2 * RSS_GROWTH_BOUND_KIB,
        "the leaking control grew only {growth} KiB: the measurement cannot see a leak"
    );
}

/// The figure: 100,000 distinct signatures through a cache of 256 (about two minutes
/// in the test profile; see `docs/safety.md` for the command).
#[test]
#[ignore = "slow: 100,000 compilations; see docs/safety.md"]
fn bounded_cache_returns_jit_memory_100k() {
    let report = measure_in_child(100_000, false);
    assert_bounded(&report);
    println!(
        "{:.0} compilations per second",
        report.signatures as f64 / report.seconds
    );
}

/// Set in the child of `a_dropped_cache_returns_its_memory`: how many signatures it compiles.
const DROP_CHILD: &str = "GATHER_JIT_DROP_CHILD";

/// The child: compiles `$GATHER_JIT_DROP_CHILD` distinct signatures into a cache of the
/// default capacity, on this thread and (the same ones, as hits) on a second thread that then
/// idles, keeps one probe kernel, drops the cache and prints `DROP key=value ...`: RSS before,
/// with the cache full, and after the drop, and the probe's strong count.
#[test]
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[ignore = "the child process of a_dropped_cache_returns_its_memory; does nothing unless GATHER_JIT_DROP_CHILD is set"]
fn drop_child() {
    let Some(count) = std::env::var(DROP_CHILD)
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    else {
        return;
    };
    let baseline = rss_kib();
    let cache = Arc::new(KernelCache::default());
    let probe = cache.get(&distinct_signature(0)).expect("valid");
    for i in 1..count {
        cache.get(&distinct_signature(i)).expect("valid");
    }
    let (taken, idle) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
    let other = std::thread::spawn({
        let cache = Arc::clone(&cache);
        let (taken, idle) = (taken.0, idle.1);
        move || {
            for i in 0..count {
                cache.get(&distinct_signature(i)).expect("cached");
            }
            drop(cache);
            taken.send(()).expect("parent waits");
            idle.recv().expect("parent says when");
        }
    });
    taken.1.recv().expect("thread sends");
    let full = rss_kib();
    drop(Arc::into_inner(cache).expect("the thread let go of its handle"));
    let dropped = rss_kib();
    // glibc keeps freed heap (in each thread's arena) until asked to give it back: what the
    // process holds is the figure after the trim.
    unsafe extern "C" {
        fn malloc_trim(pad: usize) -> i32;
    }
    // SAFETY: glibc's `malloc_trim` takes a padding in bytes and only releases free memory.
    unsafe { malloc_trim(0) };
    let trimmed = rss_kib();
    println!(
        "\nDROP signatures={count} baseline_rss_kib={baseline} full_rss_kib={full} \
         dropped_rss_kib={dropped} trimmed_rss_kib={trimmed} probe_strong_count={}",
        Arc::strong_count(&probe)
    );
    idle.0.send(()).expect("thread waits");
    other.join().expect("thread ends");
}

/// After 4,000 compiles (hit on a second, idle thread too), dropping the cache gives back the
/// memory of every kernel no caller holds: once glibc returns its free heap, RSS is back
/// within a quarter of the growth the cache caused, and the probe's only holder is the
/// caller. (Before the fix, every thread's view kept its kernels: the probe's count was 3,
/// and RSS stayed near the full figure.)
#[test]
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn a_dropped_cache_returns_its_memory() {
    let out = crate::util::this_test_binary()
        .args([
            "--exact",
            "reliability::drop_child",
            "--ignored",
            "--nocapture",
        ])
        .args(["--test-threads", "1"])
        .env(DROP_CHILD, "4000")
        .output()
        .expect("child runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child failed: {stdout}");
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("DROP ").map(|(_, report)| report))
        .unwrap_or_else(|| panic!("no report in {stdout}"));
    println!("{line}");
    let field = |name: &str| -> u64 {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {line}"))
    };
    assert_eq!(field("probe_strong_count"), 1, "{line}");
    let (baseline, full, trimmed) = (
        field("baseline_rss_kib"),
        field("full_rss_kib"),
        field("trimmed_rss_kib"),
    );
    let growth = full.saturating_sub(baseline);
    assert!(
        growth > 8 * 1024,
        "4,000 kernels should take megabytes: {line}"
    );
    assert!(
        trimmed.saturating_sub(baseline) < growth / 4,
        "RSS after the drop stays near the full cache's: {line}"
    );
}

/// A quantized signature per `i`, all distinct.
fn distinct_quantized(i: usize) -> gather_jit::QuantizedSignature {
    gather_jit::QuantizedSignature::gguf(gather_jit::GgufFormat::Q8_0, 2 + i, 32, &[1])
}

/// Issue 28: a thread that took kernels and then idles used to keep them (and their code)
/// after the cache evicted them, capacity times the number of idle threads. Now an eviction
/// empties every idle thread's view at once: once the cache holds only newer kernels, no
/// evicted one is alive, for either op family, while the other thread still idles.
#[test]
fn an_idle_threads_view_lets_go_of_evicted_kernels() {
    const CAPACITY: usize = 8;
    let cache = Arc::new(KernelCache::new(CAPACITY));
    let (taken, idle) = (mpsc::channel(), mpsc::channel::<()>());
    let other = std::thread::spawn({
        let cache = Arc::clone(&cache);
        let (taken, idle) = (taken.0, idle.1);
        move || {
            for i in 0..CAPACITY {
                // Twice: the second is a hit from this thread's view.
                for _ in 0..2 {
                    drop(cache.get(&distinct_signature(i)).expect("valid"));
                    drop(cache.get_quantized(&distinct_quantized(i)).expect("valid"));
                }
            }
            taken.send(()).expect("the test waits");
            let _ = idle.recv();
        }
    });
    taken.1.recv().expect("the thread took its kernels");
    let gathers: Vec<_> = (0..CAPACITY)
        .map(|i| Arc::downgrade(&cache.get(&distinct_signature(i)).expect("cached")))
        .collect();
    let quantized: Vec<_> = (0..CAPACITY)
        .map(|i| Arc::downgrade(&cache.get_quantized(&distinct_quantized(i)).expect("cached")))
        .collect();
    for i in CAPACITY..2 * CAPACITY {
        cache.get(&distinct_signature(i)).expect("valid");
        cache.get_quantized(&distinct_quantized(i)).expect("valid");
    }
    let stats = cache.stats();
    assert_eq!(stats.entries, 2 * CAPACITY, "{stats:?}");
    let alive = gathers.iter().filter(|k| k.strong_count() > 0).count();
    let alive_quantized = quantized.iter().filter(|k| k.strong_count() > 0).count();
    idle.0.send(()).expect("the thread waits");
    other.join().expect("the thread ends");
    assert_eq!(
        (alive, alive_quantized),
        (0, 0),
        "evicted kernels kept alive while a thread idles"
    );
}

/// Issue 28: eight threads asking for one new quantized signature at once compiled it about
/// eight times; the process-wide cache now counts it, once.
#[test]
fn a_quantized_signature_asked_for_by_many_threads_at_once_compiles_once() {
    const THREADS: usize = 8;
    for round in 0..4 {
        let cache = KernelCache::new(16);
        // A signature no other test compiles, new each round.
        let signature = gather_jit::QuantizedSignature::gguf(
            gather_jit::GgufFormat::Q4_0,
            977 + round,
            64,
            &[3],
        );
        let barrier = Barrier::new(THREADS);
        let kernels: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..THREADS)
                .map(|_| {
                    scope.spawn(|| {
                        barrier.wait();
                        cache.get_quantized(&signature).expect("valid")
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("thread"))
                .collect()
        });
        assert!(kernels.iter().all(|k| Arc::ptr_eq(k, &kernels[0])));
        let stats = cache.stats();
        assert_eq!(
            (stats.compilations, stats.misses),
            (1, 1),
            "round {round}: {stats:?}"
        );
        assert_eq!(stats.hits, THREADS as u64 - 1, "round {round}: {stats:?}");
    }
    // The process-wide cache behind `jit_quantized` is the same cache: it counts the compile.
    let before = KernelCache::global().stats().compilations;
    let kernel = gather_jit::jit_quantized(&distinct_quantized(70_001)).expect("valid");
    assert!(KernelCache::global().stats().compilations > before);
    let again = gather_jit::jit_quantized(&distinct_quantized(70_001)).expect("valid");
    assert!(Arc::ptr_eq(&kernel, &again));
}

/// Issue 28: the quantized cache grew without limit (7.3 MB per 1,000 signatures); it now
/// holds at most its capacity, evicting the least recently used.
#[test]
fn the_quantized_kernels_of_a_cache_are_bounded() {
    let cache = KernelCache::new(4);
    let first = Arc::downgrade(&cache.get_quantized(&distinct_quantized(0)).expect("valid"));
    for i in 1..40 {
        cache.get_quantized(&distinct_quantized(i)).expect("valid");
    }
    let stats = cache.stats();
    assert_eq!((stats.entries, stats.evictions), (4, 36), "{stats:?}");
    assert_eq!(
        first.strong_count(),
        0,
        "the first kernel outlived its eviction"
    );
}
