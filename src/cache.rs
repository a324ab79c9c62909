//! [`KernelCache`]: signature -> `Arc<Kernel>`, compiled once, bounded, with statistics.
//!
//! The map holds one slot per signature. A slot is created under the map's lock and filled
//! outside it through a `OnceLock`, so a signature requested by many threads at once is
//! compiled exactly once while other signatures compile in parallel. When the cache is over
//! capacity the least recently used slots are dropped; a kernel a caller still holds stays
//! valid, and its code is freed when the last kernel holding it goes.
//!
//! A miss reuses the machine code of a live kernel of this cache when only an outer dim
//! differs (a dynamic batch or sequence length; see [`Kernel::compile_shared`]): nothing is
//! compiled then.
//!
//! Hits skip the lock: each thread keeps a view of the kernels it has been given (its own
//! map, which answers a repeat of its latest signature without hashing; see [`ThreadView`]),
//! valid while the cache's generation is unchanged. Any entry leaving the map (eviction,
//! [`KernelCache::clear`]) bumps the generation, and a thread drops its stale view at its
//! next request; dropping the cache empties every thread's view of it at once, so a thread
//! that never asks again keeps nothing. A hit then costs a thread-local lookup and one
//! `Arc` clone instead of a lock, so threads that share a cache do not queue on each other;
//! [`KernelCache::with`] lends the kernel to a closure and saves the clone too.

use std::cell::{RefCell, UnsafeCell};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

use crate::error::Result;
use crate::ir::Signature;
use crate::kernel::{CodeShare, Kernel};
use crate::specialize::Tuning;

type Slot = Arc<OnceLock<Result<Arc<Kernel>>>>;

/// A cached signature: the kernel once compiled (a hit then costs one `Arc` clone), or the
/// slot that the compiling thread fills and others wait on.
enum State {
    Ready(Arc<Kernel>),
    Compiling(Slot),
}

struct Entry {
    state: State,
    /// The [`KernelCache::clock`] of its latest use; shared with the thread views that hold
    /// the kernel, whose hits stamp it without the lock.
    last_used: Arc<AtomicU64>,
}

/// The map and the counters that change on every request that takes the lock.
#[derive(Default)]
struct Entries {
    map: FxHashMap<Signature, Entry>,
    hits: u64,
    misses: u64,
    evictions: u64,
}

/// The kernels of one thread's view of one cache, shared with the cache (which holds a
/// `Weak`) so that dropping the cache can empty them: the thread may never make another
/// request that would.
///
/// Two parties reach the contents, never at the same time:
/// - the view's thread, only inside a request to the view's cache (`in_view`, `remember`),
///   so holding `&KernelCache`, and with its `VIEWS` borrowed mutably, so through no other
///   reference;
/// - the cache's `drop`, which holds `&mut KernelCache`: no request to it is in flight on
///   any thread, and every earlier one happened before (as the end of any borrow does,
///   for the value to be dropped at all).
///
/// Otherwise the contents are only dropped with the last `Arc`, which `Arc` makes exclusive.
/// A lock would cost two atomic read-modify-writes on every hit, for a lock that is never
/// contended (`cargo bench --bench gather -- S9/cache_hit`).
#[derive(Default)]
struct ViewKernels(UnsafeCell<Remembrance>);

// SAFETY: the contents are never reached from two threads at once (see `ViewKernels`), and
// they are `Send` (signatures, and `Arc`s of kernels, which are `Send + Sync`).
unsafe impl Sync for ViewKernels {}

impl ViewKernels {
    /// Runs `f` on the contents.
    ///
    /// # Safety
    /// The caller is one of the two parties of [`ViewKernels`]: the view's thread inside a
    /// request to the view's cache with its `VIEWS` borrowed mutably, or the cache's `drop`.
    unsafe fn with<R>(&self, f: impl FnOnce(&mut Remembrance) -> R) -> R {
        // SAFETY: by the caller's contract, no other reference to the contents is live.
        f(unsafe { &mut *self.0.get() })
    }
}

/// The thread views of one cache, as the cache holds them.
#[derive(Default)]
struct ViewRegistry {
    /// Per live view: its hit counter, written only by its thread, and its kernels.
    live: Vec<(Arc<AtomicU64>, Weak<ViewKernels>)>,
    /// The hits of views whose thread has dropped them.
    retired: u64,
}

impl ViewRegistry {
    fn total_hits(&self) -> u64 {
        self.retired
            + self
                .live
                .iter()
                .map(|(hits, _)| hits.load(Ordering::Relaxed))
                .sum::<u64>()
    }

    /// Folds the counters of dropped views (only this registry still holds them) into
    /// `retired`, so the registry stays as long as the live views.
    fn sweep(&mut self) {
        let (dropped, live): (Vec<_>, Vec<_>) = std::mem::take(&mut self.live)
            .into_iter()
            .partition(|(hits, _)| Arc::strong_count(hits) == 1);
        self.retired += dropped
            .iter()
            .map(|(hits, _)| hits.load(Ordering::Relaxed))
            .sum::<u64>();
        self.live = live;
    }
}

/// One thread's view of one cache: the kernels the cache gave this thread while its
/// generation was `generation`.
struct ThreadView {
    cache: u64,
    generation: u64,
    kernels: Arc<ViewKernels>,
    /// Hits answered from this view; registered in the cache's [`ViewRegistry`].
    hits: Arc<AtomicU64>,
}

/// The kernels of a [`ThreadView`] by signature. While requests repeat one signature (a
/// runtime running one op in a loop), each is answered by one comparison with the latest,
/// without hashing (which took over a third of a hit's instructions); while they alternate
/// (the ops of a model in turn), that comparison would only fail, so they go straight to the
/// hash map.
#[derive(Default)]
struct Remembrance {
    kernels: Vec<(Signature, Remembered)>,
    /// Position in `kernels` by signature.
    positions: FxHashMap<Signature, usize>,
    /// Position of the latest kernel found (or added).
    latest: usize,
    /// Whether the latest request repeated the one before it.
    repeating: bool,
}

impl Remembrance {
    #[inline]
    fn get(&mut self, signature: &Signature) -> Option<&Remembered> {
        if self.repeating {
            match self.kernels.get(self.latest) {
                Some((latest, remembered)) if latest == signature => return Some(remembered),
                _ => self.repeating = false,
            }
        }
        let at = *self.positions.get(signature)?;
        self.repeating = at == self.latest;
        self.latest = at;
        Some(&self.kernels[at].1)
    }

    fn insert(&mut self, signature: &Signature, remembered: Remembered) {
        match self.positions.get(signature) {
            Some(&at) => {
                self.kernels[at].1 = remembered;
                self.latest = at;
            }
            None => {
                self.latest = self.kernels.len();
                self.positions.insert(signature.clone(), self.latest);
                self.kernels.push((signature.clone(), remembered));
            }
        }
    }

    fn len(&self) -> usize {
        self.kernels.len()
    }

    fn clear(&mut self) {
        self.kernels.clear();
        self.positions.clear();
        self.latest = 0;
        self.repeating = false;
    }
}

struct Remembered {
    kernel: Arc<Kernel>,
    last_used: Arc<AtomicU64>,
}

/// Whether a request adds what it finds to the calling thread's view.
#[derive(Clone, Copy)]
enum View {
    Remember,
    Skip,
}

/// A ready entry as read under the map's lock, for [`KernelCache::remember`].
struct Found {
    kernel: Arc<Kernel>,
    last_used: Arc<AtomicU64>,
    generation: u64,
}

thread_local! {
    /// This thread's views, one per cache it has used (usually one: the global cache).
    static VIEWS: RefCell<Vec<ThreadView>> = const { RefCell::new(Vec::new()) };
}

/// Source of [`KernelCache::id`]: unique for the process's life, unlike an address.
static NEXT_CACHE_ID: AtomicU64 = AtomicU64::new(0);

/// Counters of a [`KernelCache`], read with [`KernelCache::stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Requests answered from the cache (including those that waited for a compile in flight).
    pub hits: u64,
    /// Requests that created a new entry.
    pub misses: u64,
    /// Kernels compiled (successfully or not).
    pub compilations: u64,
    /// Kernels built on the machine code of another live kernel, whose loop nest differed
    /// at most in its outermost length (see [`Kernel::compile_shared`]): misses that ran no
    /// compile.
    pub shared_code: u64,
    /// Entries dropped to stay within capacity.
    pub evictions: u64,
    /// Total time spent compiling (and finding shared code).
    pub compile_time: Duration,
    /// Entries currently held.
    pub entries: usize,
}

/// A thread-safe cache of compiled kernels keyed by the complete [`Signature`].
pub struct KernelCache {
    id: u64,
    entries: Mutex<Entries>,
    capacity: usize,
    compilations: AtomicU64,
    shared_code: AtomicU64,
    /// The machine code of this cache's kernels, offered to later misses.
    code: CodeShare,
    compile_nanos: AtomicU64,
    /// Bumped (under the map's lock) whenever an entry leaves the map; thread views of an
    /// older generation are stale.
    generation: AtomicU64,
    /// Advanced by 2 (under the map's lock) on every request that takes it and stamped on
    /// the entry used. A hit through a thread view stamps `clock + 1`: later than every
    /// locked request before it, so eviction stays least-recently-used at that grain.
    clock: AtomicU64,
    views: Mutex<ViewRegistry>,
}

impl std::fmt::Debug for KernelCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelCache")
            .field("capacity", &self.capacity)
            .field("stats", &self.stats())
            .finish()
    }
}

impl Default for KernelCache {
    fn default() -> Self {
        KernelCache::new(KernelCache::DEFAULT_CAPACITY)
    }
}

impl KernelCache {
    /// Capacity of [`KernelCache::default`] and of the process-wide cache.
    pub const DEFAULT_CAPACITY: usize = 4096;

    /// An empty cache holding at most `capacity` kernels (at least one).
    pub fn new(capacity: usize) -> KernelCache {
        KernelCache {
            id: NEXT_CACHE_ID.fetch_add(1, Ordering::Relaxed),
            entries: Mutex::new(Entries::default()),
            capacity: capacity.max(1),
            compilations: AtomicU64::new(0),
            shared_code: AtomicU64::new(0),
            code: CodeShare::default(),
            compile_nanos: AtomicU64::new(0),
            generation: AtomicU64::new(0),
            clock: AtomicU64::new(0),
            views: Mutex::new(ViewRegistry::default()),
        }
    }

    /// The process-wide cache used by [`crate::jit`] and its siblings.
    pub fn global() -> &'static KernelCache {
        static GLOBAL: LazyLock<KernelCache> = LazyLock::new(KernelCache::default);
        &GLOBAL
    }

    /// The kernel for `signature`, compiling it on first use.
    ///
    /// # Errors
    /// The signature's validation error (not cached), or a code generation error.
    pub fn get(&self, signature: &Signature) -> Result<Arc<Kernel>> {
        self.get_for(signature, View::Remember)
    }

    /// [`KernelCache::get`], adding what it finds to this thread's view or not.
    fn get_for(&self, signature: &Signature, view: View) -> Result<Arc<Kernel>> {
        if let Some(kernel) = self.in_view(signature, Arc::clone) {
            return Ok(kernel);
        }
        if let Some(kernel) = self.lookup(signature, view) {
            return Ok(kernel);
        }
        // Validate before taking a slot, so invalid signatures never occupy one.
        let started = Instant::now();
        let validated = signature.validate()?;
        let slot = {
            let mut guard = self.lock();
            let entries = &mut *guard;
            let now = self.tick();
            match entries.map.get_mut(signature) {
                // Another thread inserted it since `lookup`.
                Some(entry) => {
                    entry.last_used.store(now, Ordering::Relaxed);
                    entries.hits += 1;
                    match &entry.state {
                        State::Ready(kernel) => {
                            let found = self.found(entry, kernel);
                            drop(guard);
                            return Ok(self.hand_out(signature, found, view));
                        }
                        State::Compiling(slot) => Arc::clone(slot),
                    }
                }
                None => {
                    entries.misses += 1;
                    let slot = Slot::default();
                    let entry = Entry {
                        state: State::Compiling(Arc::clone(&slot)),
                        last_used: Arc::new(AtomicU64::new(now)),
                    };
                    entries.map.insert(signature.clone(), entry);
                    self.evict_over_capacity(entries);
                    slot
                }
            }
        };
        let result = slot
            .get_or_init(|| {
                let kernel = Kernel::build(validated, Tuning::default(), started, Some(&self.code))
                    .map(Arc::new);
                let reused = kernel.as_ref().is_ok_and(|kernel| kernel.reuses_code());
                match reused {
                    true => &self.shared_code,
                    false => &self.compilations,
                }
                .fetch_add(1, Ordering::Relaxed);
                if let Ok(kernel) = &kernel {
                    let nanos = kernel.compile_time().as_nanos().min(u64::MAX as u128) as u64;
                    self.compile_nanos.fetch_add(nanos, Ordering::Relaxed);
                }
                kernel
            })
            .clone();
        if let Ok(kernel) = &result {
            // Later hits skip the slot. (The entry may have been evicted meanwhile.)
            let mut guard = self.lock();
            if let Some(entry) = guard.map.get_mut(signature) {
                entry.state = State::Ready(Arc::clone(kernel));
                let found = self.found(entry, kernel);
                drop(guard);
                self.hand_out(signature, found, view);
            }
        }
        result
    }

    /// The kernels for `signatures`, in order: [`KernelCache::get`] of each, with the misses
    /// compiled in parallel on the calling thread and the crate's worker threads (those of
    /// [`Kernel::call_parallel`], one per further core). For a runtime that knows its model's
    /// gather shapes when it loads it: the compiles then take about 1 / cores of the time.
    /// A signature listed twice is compiled once. While another thread's parallel call holds
    /// the workers, the compiles run on the calling thread alone, and a parallel call meanwhile
    /// runs on its own caller.
    pub fn get_all(&self, signatures: &[Signature]) -> Vec<Result<Arc<Kernel>>> {
        let kernels: Vec<OnceLock<Result<Arc<Kernel>>>> =
            signatures.iter().map(|_| OnceLock::new()).collect();
        let caller = std::thread::current().id();
        crate::pool::run(signatures.len(), &|i| {
            // A worker's view would keep the kernel (and its code) alive until that worker's
            // next request to this cache, which may never come.
            let view = match std::thread::current().id() == caller {
                true => View::Remember,
                false => View::Skip,
            };
            let _ = kernels[i].set(self.get_for(&signatures[i], view));
        });
        kernels
            .into_iter()
            .map(|kernel| kernel.into_inner().expect("pool::run runs every part"))
            .collect()
    }

    /// Calls `f` with the kernel for `signature`, compiling it on first use.
    ///
    /// The cheapest way to reach a cached kernel: a hit from this thread's view lends the
    /// kernel without touching its reference count (two atomic read-modify-writes that
    /// [`KernelCache::get`] pays for the `Arc` it returns). Requests to any cache made from
    /// inside `f` still work but take the locked path.
    ///
    /// # Errors
    /// As [`KernelCache::get`]; `f` is not called then.
    pub fn with<R>(&self, signature: &Signature, f: impl FnOnce(&Kernel) -> R) -> Result<R> {
        let mut f = Some(f);
        let hit = self.in_view(signature, |kernel| f.take().map(|f| f(kernel)));
        match (hit.flatten(), f) {
            (Some(result), _) => Ok(result),
            (None, Some(f)) => Ok(f(&*self.get(signature)?)),
            (None, None) => unreachable!("the view takes `f` only when it returns its result"),
        }
    }

    /// The fastest path: a kernel this thread was given before, while nothing has left the
    /// map since, passed to `use_kernel` (whose result is returned). No lock, and no write to
    /// memory another thread writes to, except for a fresher stamp on the entry's `last_used`.
    fn in_view<R>(
        &self,
        signature: &Signature,
        use_kernel: impl FnOnce(&Arc<Kernel>) -> R,
    ) -> Option<R> {
        // `try_*`: during thread teardown, or re-entered from a kernel's drop or from
        // `with`'s closure, the view is simply not used.
        VIEWS
            .try_with(|views| {
                let mut views = views.try_borrow_mut().ok()?;
                let at = views.iter().position(|view| view.cache == self.id)?;
                if views[at].generation != self.generation.load(Ordering::Acquire) {
                    // Stale: some entry left the map. Dropping the view frees what it held.
                    let stale = views.swap_remove(at);
                    drop(views);
                    drop(stale);
                    return None;
                }
                let view = &views[at];
                // SAFETY: this is the view's thread, inside a request to its cache (`self`),
                // with `VIEWS` borrowed mutably.
                unsafe {
                    view.kernels.with(|kernels| {
                        let remembered = kernels.get(signature)?;
                        let stamp = self.clock.load(Ordering::Relaxed) + 1;
                        if remembered.last_used.load(Ordering::Relaxed) < stamp {
                            remembered.last_used.store(stamp, Ordering::Relaxed);
                        }
                        // Only this thread writes its counter: no read-modify-write needed.
                        let hits = view.hits.load(Ordering::Relaxed);
                        view.hits.store(hits + 1, Ordering::Relaxed);
                        Some(use_kernel(&remembered.kernel))
                    })
                }
            })
            .ok()
            .flatten()
    }

    /// What [`KernelCache::remember`] needs of a ready entry; called under the map's lock, so
    /// that `generation` is one in which the entry was in the map.
    fn found(&self, entry: &Entry, kernel: &Arc<Kernel>) -> Found {
        Found {
            kernel: Arc::clone(kernel),
            last_used: Arc::clone(&entry.last_used),
            generation: self.generation.load(Ordering::Relaxed),
        }
    }

    /// Adds a kernel found in the map to this thread's view (unless the view has seen a
    /// later generation) and returns it.
    fn remember(&self, signature: &Signature, found: Found) -> Arc<Kernel> {
        let Found {
            kernel,
            last_used,
            generation,
        } = found;
        let _ = VIEWS.try_with(|views| {
            let Ok(mut views) = views.try_borrow_mut() else {
                return;
            };
            let at = match views.iter().position(|view| view.cache == self.id) {
                Some(at) => at,
                None => {
                    // Views of dropped caches (already emptied): their registry, the only
                    // other holder of `hits`, is gone.
                    views.retain(|view| Arc::strong_count(&view.hits) > 1);
                    let kernels = Arc::new(ViewKernels::default());
                    let hits = Arc::new(AtomicU64::new(0));
                    let mut registry = self.registry();
                    registry.sweep();
                    registry
                        .live
                        .push((Arc::clone(&hits), Arc::downgrade(&kernels)));
                    drop(registry);
                    views.push(ThreadView {
                        cache: self.id,
                        generation,
                        kernels,
                        hits,
                    });
                    views.len() - 1
                }
            };
            let view = &mut views[at];
            // SAFETY: this is the view's thread, inside a request to its cache (`self`),
            // with `VIEWS` borrowed mutably.
            unsafe {
                view.kernels.with(|kernels| {
                    if generation != view.generation || kernels.len() >= self.capacity {
                        if generation < view.generation {
                            return;
                        }
                        kernels.clear();
                        view.generation = generation;
                    }
                    kernels.insert(
                        signature,
                        Remembered {
                            kernel: Arc::clone(&kernel),
                            last_used,
                        },
                    );
                })
            }
        });
        kernel
    }

    /// The locked fast path: a compiled kernel already in the map (compiled by another
    /// thread, or dropped from this thread's view).
    fn lookup(&self, signature: &Signature, view: View) -> Option<Arc<Kernel>> {
        let mut guard = self.lock();
        let entries = &mut *guard;
        let now = self.tick();
        let entry = entries.map.get_mut(signature)?;
        let State::Ready(kernel) = &entry.state else {
            return None;
        };
        entry.last_used.store(now, Ordering::Relaxed);
        let found = self.found(entry, kernel);
        entries.hits += 1;
        drop(guard);
        Some(self.hand_out(signature, found, view))
    }

    /// `found`'s kernel, remembered in this thread's view if `view` says so.
    fn hand_out(&self, signature: &Signature, found: Found, view: View) -> Arc<Kernel> {
        match view {
            View::Remember => self.remember(signature, found),
            View::Skip => found.kernel,
        }
    }

    /// Advances the clock; called with the map's lock held.
    fn tick(&self) -> u64 {
        let now = self.clock.load(Ordering::Relaxed) + 2;
        self.clock.store(now, Ordering::Relaxed);
        now
    }

    /// Current counters.
    pub fn stats(&self) -> CacheStats {
        let entries = self.lock();
        let view_hits = self.registry().total_hits();
        CacheStats {
            hits: entries.hits + view_hits,
            misses: entries.misses,
            compilations: self.compilations.load(Ordering::Relaxed),
            shared_code: self.shared_code.load(Ordering::Relaxed),
            evictions: entries.evictions,
            compile_time: Duration::from_nanos(self.compile_nanos.load(Ordering::Relaxed)),
            entries: entries.map.len(),
        }
    }

    /// The maximum number of kernels held.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Drops every entry. Kernels still held elsewhere stay valid; those held by other
    /// threads' views are released at those threads' next request to this cache.
    pub fn clear(&self) {
        let mut entries = self.lock();
        entries.map.clear();
        self.generation.fetch_add(1, Ordering::Release);
        drop(entries);
        // This thread's view goes now (unless it is borrowed: inside `with`'s closure or a
        // kernel's drop, then at its next request, as other threads' views).
        let _ = VIEWS.try_with(|views| {
            let Ok(mut views) = views.try_borrow_mut() else {
                return;
            };
            let dropped: Vec<ThreadView> =
                views.extract_if(.., |view| view.cache == self.id).collect();
            drop(views);
            drop(dropped);
        });
    }

    fn registry(&self) -> MutexGuard<'_, ViewRegistry> {
        // Each update of the registry leaves it consistent: a poisoned lock is still usable.
        self.views.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock(&self) -> MutexGuard<'_, Entries> {
        // A panic while holding the lock cannot leave the map inconsistent (each update is a
        // single insert or remove), so a poisoned lock is still usable.
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn evict_over_capacity(&self, entries: &mut Entries) {
        while entries.map.len() > self.capacity {
            let oldest = entries
                .map
                .iter()
                .min_by_key(|(_, e)| e.last_used.load(Ordering::Relaxed))
                .map(|(k, _)| k.clone());
            let Some(key) = oldest else { break };
            entries.map.remove(&key);
            entries.evictions += 1;
            self.generation.fetch_add(1, Ordering::Release);
        }
    }
}

impl Drop for KernelCache {
    /// Empties every thread's view of this cache, so that its kernels go now unless a caller
    /// holds them: a thread that never makes another request would otherwise keep its view.
    fn drop(&mut self) {
        let registry = self.views.get_mut().unwrap_or_else(|p| p.into_inner());
        for (_, view) in &registry.live {
            let Some(view) = view.upgrade() else {
                continue;
            };
            // SAFETY: this is the cache's `drop` (`&mut self`: no request is in flight).
            let emptied = unsafe { view.with(std::mem::take) };
            drop(emptied);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remembered(signature: &Signature) -> Remembered {
        Remembered {
            kernel: Arc::new(Kernel::compile(signature).expect("compiles")),
            last_used: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The view answers by one comparison only while requests repeat, and never with another
    /// signature's kernel.
    #[test]
    fn remembrance_compares_with_the_latest_only_while_requests_repeat() {
        let [a, b, c] = [2, 3, 4].map(|rows| Signature::gather(&[rows, 2], &[1], 0, 0));
        let mut view = Remembrance::default();
        view.insert(&a, remembered(&a));
        view.insert(&b, remembered(&b));
        let found = |view: &mut Remembrance, sig: &Signature| {
            view.get(sig).map(|r| r.kernel.signature().clone())
        };
        // (request, repeating afterwards)
        let steps = [
            (&a, false),
            (&a, true),
            (&a, true),
            (&b, false),
            (&a, false),
            (&b, false),
        ];
        for (i, (sig, repeating)) in steps.into_iter().enumerate() {
            assert_eq!(found(&mut view, sig).as_ref(), Some(sig), "step {i}");
            assert_eq!(view.repeating, repeating, "step {i}");
        }
        assert_eq!(found(&mut view, &c), None);
        assert!(!view.repeating);

        // Re-inserting a signature replaces its kernel in place.
        view.get(&b);
        view.get(&b);
        assert!(view.repeating);
        let again = remembered(&b);
        let fresh = Arc::as_ptr(&again.kernel);
        view.insert(&b, again);
        assert_eq!(view.len(), 2);
        let got = view.get(&b).map(|r| Arc::as_ptr(&r.kernel));
        assert_eq!(got, Some(fresh));

        // After a clear nothing is found, whatever the bit said.
        view.clear();
        assert!(view.get(&b).is_none() && view.get(&a).is_none());
        view.insert(&c, remembered(&c));
        assert_eq!(found(&mut view, &c), Some(c.clone()));
        assert_eq!(found(&mut view, &c), Some(c));
        assert!(view.repeating);
    }
}
