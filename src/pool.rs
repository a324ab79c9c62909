//! The worker threads behind [`crate::Kernel::call_parallel`]: a small process-wide pool whose
//! idle workers spin for a while before sleeping.
//!
//! Why not rayon: a parallel gather of 50–200 µs is over before a sleeping thread has woken
//! up, so a pool whose workers sleep after a few dozen yields gives such calls no speedup;
//! workers that spin for a while after each job (200 µs unless [`set_worker_spin`] says
//! otherwise) are still awake when the next call of a busy runtime comes, as in ONNX
//! Runtime's spinning thread pool. A worker that is late costs nothing but its wake-up: parts are claimed one at a
//! time, so the caller runs the parts no worker has taken.
//!
//! One call uses the pool at a time; a call that finds it busy (another thread's call, or a
//! call from inside a part) runs its parts on the calling thread, so nothing can deadlock.
#![allow(
    unsafe_code,
    reason = "lends a parallel call's closure to the workers until every part has finished"
)]

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// How long an idle worker spins (burning its core) waiting for the next job before it sleeps,
/// unless [`set_worker_spin`] changed it.
pub const DEFAULT_WORKER_SPIN: Duration = Duration::from_micros(200);

static SPIN_NANOS: AtomicU64 = AtomicU64::new(DEFAULT_WORKER_SPIN.as_nanos() as u64);

/// Sets how long the worker threads of [`crate::Kernel::call_parallel`] spin after a job
/// before they sleep (`Duration::ZERO`: sleep at once, waking costs a few µs per call; longer:
/// more CPU burnt between calls). Takes effect from each worker's next wait.
#[cfg_attr(
    not(feature = "unstable"),
    expect(dead_code, reason = "only the `unstable` API uses it")
)]
pub fn set_worker_spin(spin: Duration) {
    let nanos = u64::try_from(spin.as_nanos()).unwrap_or(u64::MAX);
    SPIN_NANOS.store(nanos, Ordering::Relaxed);
}

/// The current spin time (see [`set_worker_spin`]).
pub fn worker_spin() -> Duration {
    Duration::from_nanos(SPIN_NANOS.load(Ordering::Relaxed))
}

/// The process-wide pool: one worker per available core beyond the caller's.
struct Pool {
    shared: Arc<Shared>,
    workers: Vec<Thread>,
    /// Held by the one caller whose job is current.
    turn: Mutex<()>,
}

/// What the caller and the workers share.
struct Shared {
    /// Bumped (after `current` is set) to announce a job.
    epoch: AtomicU64,
    current: Mutex<Option<Arc<Job>>>,
    /// `sleeping[w]`: worker `w` is parked (or about to park) and must be unparked.
    sleeping: Box<[AtomicBool]>,
}

/// One call's parts, claimed one at a time by whoever is free.
struct Job {
    /// The caller's `Fn(usize) + Sync` with its lifetime erased; see [`run`]'s SAFETY.
    part: *const (dyn Fn(usize) + Sync),
    claims: Claims,
}

type Payload = Box<dyn std::any::Any + Send>;

/// The bookkeeping of one call's parts.
struct Claims {
    parts: usize,
    next: AtomicUsize,
    done: AtomicUsize,
    /// The first panic of a part, resumed by the caller.
    panic: Mutex<Option<Payload>>,
}

impl Claims {
    fn new(parts: usize) -> Claims {
        Claims {
            parts,
            next: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            panic: Mutex::new(None),
        }
    }

    /// Claims and runs parts of `part` until none is left. A part's panic is kept for the
    /// caller (later ones are leaked, not dropped: dropping a payload may itself panic), so
    /// this never unwinds and every claimed part counts as done.
    fn work(&self, part: &(dyn Fn(usize) + Sync)) {
        loop {
            let index = self.next.fetch_add(1, Ordering::Relaxed);
            if index >= self.parts {
                return;
            }
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| part(index))) {
                let mut first = lock(&self.panic);
                if first.is_none() {
                    *first = Some(payload);
                } else {
                    drop(first);
                    std::mem::forget(payload);
                }
            }
            self.done.fetch_add(1, Ordering::Release);
        }
    }

    /// Resumes the first part's panic, if any.
    fn resume_panic(&self) {
        if let Some(payload) = lock(&self.panic).take() {
            resume_unwind(payload);
        }
    }
}

// SAFETY: `part` points to a `Sync` closure, so calling it from several threads is allowed;
// it is only dereferenced while the caller that owns it waits in `run` (see there).
unsafe impl Send for Job {}
// SAFETY: as above; every other field is `Sync`.
unsafe impl Sync for Job {}

impl Job {
    /// Runs parts of this job until none is left (see [`Claims::work`]).
    fn work(&self) {
        // SAFETY: `Claims::work` calls `part` only for an index it claimed below `parts`, and
        // the caller of `run` does not return before all of those are done, so the closure is
        // still alive whenever it is called.
        let part = unsafe { &*self.part };
        self.claims.work(part);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while holding these locks, but a poisoned one is still consistent.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let wanted = cores.saturating_sub(1);
        let shared = Arc::new(Shared {
            epoch: AtomicU64::new(0),
            current: Mutex::new(None),
            sleeping: (0..wanted).map(|_| AtomicBool::new(false)).collect(),
        });
        let workers = (0..wanted)
            .map_while(|w| {
                let shared = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name(format!("gather-jit-{w}"))
                    .spawn(move || worker(&shared, w))
                    .ok()
                    .map(|handle| handle.thread().clone())
            })
            .collect();
        Pool {
            shared,
            workers,
            turn: Mutex::new(()),
        }
    })
}

/// The number of threads a job can run on: the workers and the caller.
pub(crate) fn threads() -> usize {
    pool().workers.len() + 1
}

fn worker(shared: &Shared, w: usize) {
    let mut seen = 0;
    loop {
        seen = shared.wait_for_job(seen, w);
        let job = lock(&shared.current).clone();
        if let Some(job) = job {
            job.work();
        }
    }
}

impl Shared {
    /// Waits (spinning for [`worker_spin`], then parked) until `epoch` differs from `seen`.
    fn wait_for_job(&self, seen: u64, w: usize) -> u64 {
        let started = Instant::now();
        let spin = worker_spin();
        let mut spins = 0u32;
        loop {
            let epoch = self.epoch.load(Ordering::Acquire);
            if epoch != seen {
                return epoch;
            }
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(256) && started.elapsed() > spin {
                break;
            }
        }
        // SeqCst on both sides (here and in `run`): either this worker sees the new epoch, or
        // the caller sees `sleeping` and unparks it.
        self.sleeping[w].store(true, Ordering::SeqCst);
        loop {
            let epoch = self.epoch.load(Ordering::SeqCst);
            if epoch != seen {
                self.sleeping[w].store(false, Ordering::Relaxed);
                return epoch;
            }
            std::thread::park();
        }
    }
}

/// Runs `part(0)`, …, `part(parts - 1)` on the calling thread and the pool's workers and
/// returns when all have finished. A panic in a part is resumed here, after all finished.
///
/// This is how [`Kernel::run_bytes_parallel`](crate::Kernel::run_bytes_parallel) spreads its
/// parts; a benchmark's reference work runs the same way, on the same threads.
#[cfg(feature = "unstable")]
pub fn run_parts(parts: usize, part: &(dyn Fn(usize) + Sync)) {
    run(parts, part);
}

/// See [`run_parts`].
pub(crate) fn run(parts: usize, part: &(dyn Fn(usize) + Sync)) {
    let pool = pool();
    let turn = if parts <= 1 || pool.workers.is_empty() {
        None
    } else {
        match pool.turn.try_lock() {
            Ok(turn) => Some(turn),
            Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    };
    let Some(turn) = turn else {
        // Alone: every part on this thread, with the same panic rule as with workers.
        let claims = Claims::new(parts);
        claims.work(part);
        return claims.resume_panic();
    };
    // SAFETY: the lifetime of `part` is erased so workers can hold the pointer, which is only
    // dereferenced for a claimed part (`Job::work`); this function does not return, nor
    // unwind, before every part is done (the loop below; `Claims::work` never unwinds).
    let erased = unsafe {
        std::mem::transmute::<&(dyn Fn(usize) + Sync), &'static (dyn Fn(usize) + Sync)>(part)
    };
    let job = Arc::new(Job {
        part: erased,
        claims: Claims::new(parts),
    });
    let shared = &pool.shared;
    *lock(&shared.current) = Some(Arc::clone(&job));
    shared.epoch.fetch_add(1, Ordering::SeqCst);
    for (w, thread) in pool.workers.iter().enumerate().take(parts - 1) {
        if shared.sleeping[w].load(Ordering::SeqCst) {
            thread.unpark();
        }
    }
    job.work();
    let (started, spin) = (Instant::now(), worker_spin());
    while job.claims.done.load(Ordering::Acquire) < parts {
        if started.elapsed() < spin {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
    *lock(&shared.current) = None;
    drop(turn);
    job.claims.resume_panic();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `parts` parts that each count themselves, and returns the counts.
    fn counts(parts: usize) -> Vec<usize> {
        let counts: Vec<AtomicUsize> = (0..parts).map(|_| AtomicUsize::new(0)).collect();
        run(parts, &|part| {
            counts[part].fetch_add(1, Ordering::Relaxed);
        });
        counts.into_iter().map(AtomicUsize::into_inner).collect()
    }

    #[test]
    fn every_part_runs_exactly_once() {
        for parts in [0, 1, 2, 3, 7, 64] {
            for _ in 0..50 {
                assert_eq!(counts(parts), vec![1; parts], "{parts} parts");
            }
        }
    }

    #[test]
    fn calls_from_many_threads_and_from_inside_a_part_all_complete() {
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..200 {
                        assert_eq!(counts(5), vec![1; 5]);
                    }
                });
            }
        });
        // A part that calls `run` finds the pool busy and runs the inner parts itself.
        let inner = AtomicUsize::new(0);
        run(3, &|_| {
            assert_eq!(counts(4), vec![1; 4]);
            inner.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(inner.into_inner(), 3);
    }

    #[test]
    fn a_panicking_part_is_resumed_after_all_parts_finished() {
        let finished = AtomicUsize::new(0);
        let result = catch_unwind(AssertUnwindSafe(|| {
            run(4, &|part| {
                if part == 1 {
                    panic!("part one");
                }
                std::thread::sleep(Duration::from_millis(5));
                finished.fetch_add(1, Ordering::Relaxed);
            })
        }));
        let payload = result.expect_err("the panic reaches the caller");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"part one"));
        assert_eq!(finished.load(Ordering::Relaxed), 3);
        // The pool still works afterwards.
        assert_eq!(counts(3), vec![1; 3]);
    }

    #[test]
    fn sleeping_workers_are_woken() {
        for _ in 0..5 {
            std::thread::sleep(DEFAULT_WORKER_SPIN * 3);
            assert_eq!(counts(2), vec![1; 2]);
        }
    }

    #[test]
    fn spin_time_is_settable() {
        set_worker_spin(Duration::from_micros(7));
        assert_eq!(worker_spin(), Duration::from_micros(7));
        assert_eq!(counts(3), vec![1; 3]);
        set_worker_spin(Duration::MAX);
        assert_eq!(worker_spin(), Duration::from_nanos(u64::MAX));
        set_worker_spin(DEFAULT_WORKER_SPIN);
    }

    #[test]
    fn parts_run_at_the_same_time_on_several_cores() {
        if threads() < 2 {
            return;
        }
        // Part 0 waits for part 1 to start: only possible if a worker runs part 1. Another
        // test may hold the pool (then parts run serially), so try a few times.
        let overlapped = (0..100).any(|_| {
            let started = AtomicBool::new(false);
            let overlapped = AtomicBool::new(false);
            run(2, &|part| {
                if part == 1 {
                    started.store(true, Ordering::SeqCst);
                } else {
                    let waiting = Instant::now();
                    while waiting.elapsed() < Duration::from_millis(20) {
                        if started.load(Ordering::SeqCst) {
                            overlapped.store(true, Ordering::SeqCst);
                            break;
                        }
                        std::hint::spin_loop();
                    }
                }
            });
            std::thread::sleep(DEFAULT_WORKER_SPIN * 2);
            overlapped.into_inner()
        });
        assert!(overlapped, "no call ran its two parts at once");
    }

    #[test]
    fn a_panicking_part_of_a_call_run_alone_still_lets_the_other_parts_run() {
        // Nested, so the inner call finds the pool busy and runs alone (the fallback path).
        let inner = AtomicUsize::new(0);
        run(2, &|_| {
            let result = catch_unwind(AssertUnwindSafe(|| {
                run(4, &|part| {
                    inner.fetch_add(1, Ordering::Relaxed);
                    assert_ne!(part, 1, "part one fails");
                })
            }));
            assert!(result.is_err(), "the inner panic reaches its caller");
        });
        assert_eq!(inner.into_inner(), 8, "every inner part ran, twice");
    }

    /// A panic payload whose drop panics too.
    struct Bomb;

    impl Drop for Bomb {
        fn drop(&mut self) {
            if !std::thread::panicking() {
                panic!("dropping a Bomb");
            }
        }
    }

    #[test]
    fn payloads_that_panic_when_dropped_neither_hang_nor_escape_early() {
        for _ in 0..20 {
            let finished = AtomicUsize::new(0);
            let result = catch_unwind(AssertUnwindSafe(|| {
                run(4, &|part| {
                    if part < 2 {
                        std::panic::panic_any(Bomb);
                    }
                    std::thread::sleep(Duration::from_millis(1));
                    finished.fetch_add(1, Ordering::Relaxed);
                })
            }));
            assert_eq!(finished.load(Ordering::Relaxed), 2, "run returned early");
            let payload = result.expect_err("a Bomb reaches the caller");
            assert!(payload.is::<Bomb>());
            // Dropping it would panic; the test has seen what it needs.
            std::mem::forget(payload);
        }
    }
}
