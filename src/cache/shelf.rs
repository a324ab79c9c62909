//! [`Shelf`]: one op family's kernels in a [`KernelCache`](super::KernelCache): signature ->
//! `Arc<kernel>`, compiled once, least recently used out first, with counters.
//!
//! The map holds one slot per signature. A slot is created under the map's lock and filled
//! outside it through a `OnceLock`, so a signature requested by many threads at once is
//! compiled exactly once while other signatures compile in parallel. When the shelf is over
//! capacity the least recently used slots are dropped; a kernel a caller still holds stays
//! valid, and is freed when the last holder goes.
//!
//! Hits skip the lock: each thread keeps a view of the kernels it has been given (`views.rs`),
//! valid while the shelf's generation is unchanged. Any entry leaving the map (eviction,
//! `clear`) bumps the generation and empties every view of an older one right away, except a
//! view whose thread is inside a request at that moment: that thread empties it itself when
//! the request ends, and the shelf tries again at its next locked request. An evicted kernel
//! therefore outlives its eviction only in the hands of callers, never in an idle thread's
//! view.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use rustc_hash::FxHashMap;

use super::Cacheable;
use super::views::{Remembered, ThreadView, ViewKernels, ViewRegistry, empty_stale};
use crate::error::Result;

type Slot<K> = Arc<OnceLock<Result<Arc<K>>>>;

/// A cached signature: the kernel once compiled (a hit then costs one `Arc` clone), or the
/// slot that the compiling thread fills and others wait on.
enum State<K> {
    Ready(Arc<K>),
    Compiling(Slot<K>),
}

struct Entry<K> {
    state: State<K>,
    /// The shelf's clock at its latest use; shared with the thread views that hold the
    /// kernel, whose hits stamp it without the lock.
    last_used: Arc<AtomicU64>,
}

/// The map and the counters that change on every request that takes the lock.
struct Entries<K: Cacheable> {
    map: FxHashMap<K::Signature, Entry<K>>,
    hits: u64,
    misses: u64,
    evictions: u64,
}

/// Whether a request adds what it finds to the calling thread's view.
#[derive(Clone, Copy)]
pub(super) enum View {
    Remember,
    Skip,
}

/// A ready entry as read under the map's lock, for [`Shelf::remember`].
struct Found<K> {
    kernel: Arc<K>,
    last_used: Arc<AtomicU64>,
    generation: u64,
}

/// The thread views of every shelf of kernel type `K` on this thread (one per shelf it used).
pub(crate) type Views<K> = RefCell<Vec<ThreadView<K>>>;

/// Source of [`Shelf::id`]: unique for the process's life, unlike an address.
static NEXT_SHELF_ID: AtomicU64 = AtomicU64::new(0);

/// The counters of a shelf, summed over shelves by [`KernelCache::stats`](super::KernelCache).
#[derive(Default)]
pub(super) struct ShelfStats {
    pub(super) hits: u64,
    pub(super) misses: u64,
    pub(super) compilations: u64,
    pub(super) shared_code: u64,
    pub(super) evictions: u64,
    pub(super) compile_nanos: u64,
    pub(super) entries: usize,
}

/// One op family's kernels (see the module docs).
pub(super) struct Shelf<K: Cacheable> {
    id: u64,
    entries: Mutex<Entries<K>>,
    capacity: usize,
    compilations: AtomicU64,
    shared_code: AtomicU64,
    /// What compiles of this family share (the machine code of live gathers).
    share: K::Share,
    compile_nanos: AtomicU64,
    /// Bumped (under the map's lock) whenever an entry leaves the map; thread views of an
    /// older generation are stale.
    generation: AtomicU64,
    /// Advanced by 2 (under the map's lock) on every request that takes it and stamped on
    /// the entry used. A hit through a thread view stamps `clock + 1`: later than every
    /// locked request before it, so eviction stays least-recently-used at that grain.
    clock: AtomicU64,
    views: Mutex<ViewRegistry<K>>,
}

impl<K: Cacheable> Shelf<K> {
    /// An empty shelf holding at most `capacity` kernels (at least one).
    pub(super) fn new(capacity: usize) -> Shelf<K> {
        Shelf {
            id: NEXT_SHELF_ID.fetch_add(1, Ordering::Relaxed),
            entries: Mutex::new(Entries {
                map: FxHashMap::default(),
                hits: 0,
                misses: 0,
                evictions: 0,
            }),
            capacity: capacity.max(1),
            compilations: AtomicU64::new(0),
            shared_code: AtomicU64::new(0),
            share: K::Share::default(),
            compile_nanos: AtomicU64::new(0),
            generation: AtomicU64::new(0),
            clock: AtomicU64::new(0),
            views: Mutex::new(ViewRegistry::default()),
        }
    }

    pub(super) fn capacity(&self) -> usize {
        self.capacity
    }

    /// What this shelf's builds share.
    pub(super) fn share(&self) -> &K::Share {
        &self.share
    }

    /// The kernel for `signature`, compiling it on first use; added to this thread's view
    /// or not, as `view` says.
    pub(super) fn get_for(&self, signature: &K::Signature, view: View) -> Result<Arc<K>> {
        if let Some(kernel) = self.in_view(signature, Arc::clone) {
            return Ok(kernel);
        }
        if let Some(kernel) = self.lookup(signature, view) {
            return Ok(kernel);
        }
        // Validate before taking a slot, so invalid signatures never occupy one.
        let started = Instant::now();
        let validated = K::validate(signature)?;
        let (slot, evicted) = {
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
                        State::Compiling(slot) => (Arc::clone(slot), Vec::new()),
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
                    (slot, self.evict_over_capacity(entries))
                }
            }
        };
        // Evicted kernels go with the views that held them, outside the map's lock.
        if !evicted.is_empty() {
            drop(evicted);
            self.empty_stale_views();
        }
        let result = slot
            .get_or_init(|| {
                let kernel = build_anywhere::<K>(validated, started, &self.share).map(Arc::new);
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
            let ours = guard
                .map
                .get_mut(signature)
                .filter(|entry| match &entry.state {
                    State::Compiling(current) => Arc::ptr_eq(current, &slot),
                    State::Ready(ready) => Arc::ptr_eq(ready, kernel),
                });
            if let Some(entry) = ours {
                entry.state = State::Ready(Arc::clone(kernel));
                let found = self.found(entry, kernel);
                drop(guard);
                self.hand_out(signature, found, view);
            }
        }
        result
    }

    /// Calls `f` with the kernel for `signature` (see [`KernelCache::with`](super::KernelCache::with)).
    pub(super) fn with<R>(&self, signature: &K::Signature, f: impl FnOnce(&K) -> R) -> Result<R> {
        let mut f = Some(f);
        let hit = self.in_view(signature, |kernel| f.take().map(|f| f(kernel)));
        match (hit.flatten(), f) {
            (Some(result), _) => Ok(result),
            (None, Some(f)) => Ok(f(&*self.get_for(signature, View::Remember)?)),
            (None, None) => unreachable!("the view takes `f` only when it returns its result"),
        }
    }

    /// The fastest path: a kernel this thread was given before, while nothing has left the
    /// map since, passed to `use_kernel` (whose result is returned). No lock; one swap of the
    /// view's own flag, and no write to memory another thread writes to but a fresher stamp
    /// on the entry's `last_used`.
    #[inline]
    fn in_view<R>(
        &self,
        signature: &K::Signature,
        use_kernel: impl FnOnce(&Arc<K>) -> R,
    ) -> Option<R> {
        // Kernels taken from a stale view, dropped at the end, after the view and `VIEWS` are
        // released (a kernel's drop may re-enter the cache).
        let mut stale = None;
        // `try_*`: during thread teardown, or re-entered from a kernel's drop or from
        // `with`'s closure, the view is simply not used.
        K::views()
            .try_with(|views| {
                let views = views.try_borrow_mut().ok()?;
                let view = views.iter().find(|view| view.shelf == self.id)?;
                view.kernels
                    .try_with(|kernels| {
                        let generation = self.generation.load(Ordering::Acquire);
                        if kernels.generation != generation {
                            stale = Some(kernels.take(generation));
                            return None;
                        }
                        let remembered = kernels.get(signature)?;
                        let stamp = self.clock.load(Ordering::Relaxed) + 1;
                        if remembered.last_used.load(Ordering::Relaxed) < stamp {
                            remembered.last_used.store(stamp, Ordering::Relaxed);
                        }
                        // Only this thread writes its counter: no read-modify-write needed.
                        let hits = view.hits.load(Ordering::Relaxed);
                        view.hits.store(hits + 1, Ordering::Relaxed);
                        let result = use_kernel(&remembered.kernel);
                        // An eviction while `use_kernel` ran found this view busy and left it
                        // to this thread.
                        let now = self.generation.load(Ordering::Acquire);
                        if now != generation {
                            stale = Some(kernels.take(now));
                        }
                        Some(result)
                    })
                    .flatten()
            })
            .ok()
            .flatten()
    }

    /// What [`Shelf::remember`] needs of a ready entry; called under the map's lock, so that
    /// `generation` is one in which the entry was in the map.
    fn found(&self, entry: &Entry<K>, kernel: &Arc<K>) -> Found<K> {
        Found {
            kernel: Arc::clone(kernel),
            last_used: Arc::clone(&entry.last_used),
            generation: self.generation.load(Ordering::Relaxed),
        }
    }

    /// Adds a kernel found in the map to this thread's view (unless the view has seen a
    /// later generation) and returns it.
    fn remember(&self, signature: &K::Signature, found: Found<K>) -> Arc<K> {
        let Found {
            kernel,
            last_used,
            generation,
        } = found;
        let taken = K::views().try_with(|views| {
            let mut views = views.try_borrow_mut().ok()?;
            let at = match views.iter().position(|view| view.shelf == self.id) {
                Some(at) => at,
                None => {
                    // Views of dropped shelves (already emptied): their registry, the only
                    // other holder of `hits`, is gone.
                    views.retain(|view| Arc::strong_count(&view.hits) > 1);
                    let view = ThreadView {
                        shelf: self.id,
                        kernels: Arc::new(ViewKernels::default()),
                        hits: Arc::new(AtomicU64::new(0)),
                    };
                    self.registry().register(&view);
                    views.push(view);
                    views.len() - 1
                }
            };
            views[at]
                .kernels
                .try_with(|kernels| {
                    let mut taken = None;
                    if generation != kernels.generation || kernels.len() >= self.capacity {
                        if generation < kernels.generation {
                            return None;
                        }
                        taken = Some(kernels.take(generation));
                    }
                    kernels.insert(
                        signature,
                        Remembered {
                            kernel: Arc::clone(&kernel),
                            last_used,
                        },
                    );
                    // An eviction since `found` may have found this view busy.
                    let now = self.generation.load(Ordering::Acquire);
                    if now != kernels.generation {
                        taken = Some(kernels.take(now));
                    }
                    taken
                })
                .flatten()
        });
        // Whatever was taken drops here, after the view and `VIEWS` are released.
        drop(taken);
        kernel
    }

    /// The locked fast path: a compiled kernel already in the map (compiled by another
    /// thread, or dropped from this thread's view).
    fn lookup(&self, signature: &K::Signature, view: View) -> Option<Arc<K>> {
        let mut guard = self.lock();
        let entries = &mut *guard;
        let now = self.tick();
        let found = entries.map.get_mut(signature).and_then(|entry| {
            let State::Ready(kernel) = &entry.state else {
                return None;
            };
            entry.last_used.store(now, Ordering::Relaxed);
            Some(self.found(entry, kernel))
        });
        if found.is_some() {
            entries.hits += 1;
        }
        drop(guard);
        // A stale view that was busy when its kernels were evicted gets another try.
        if self.registry().pending {
            self.empty_stale_views();
        }
        Some(self.hand_out(signature, found?, view))
    }

    /// `found`'s kernel, remembered in this thread's view if `view` says so.
    fn hand_out(&self, signature: &K::Signature, found: Found<K>, view: View) -> Arc<K> {
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
    pub(super) fn stats(&self) -> ShelfStats {
        let entries = self.lock();
        let view_hits = self.registry().total_hits();
        ShelfStats {
            hits: entries.hits + view_hits,
            misses: entries.misses,
            compilations: self.compilations.load(Ordering::Relaxed),
            shared_code: self.shared_code.load(Ordering::Relaxed),
            evictions: entries.evictions,
            compile_nanos: self.compile_nanos.load(Ordering::Relaxed),
            entries: entries.map.len(),
        }
    }

    /// Drops every entry, and every thread view's kernels but those in use at this moment
    /// (their threads drop them when the request ends).
    pub(super) fn clear(&self) {
        let mut entries = self.lock();
        let map = std::mem::take(&mut entries.map);
        self.generation.fetch_add(1, Ordering::AcqRel);
        drop(entries);
        drop(map);
        self.empty_stale_views();
    }

    /// Empties the views of an older generation than the shelf's (see the module docs);
    /// what they held is dropped here, outside every lock and borrow.
    fn empty_stale_views(&self) {
        // One pass at a time, with its write of `pending`: a pass that started earlier (and
        // read an older generation) cannot clear the flag a later pass set.
        let (taken, views) = {
            let mut registry = self.registry();
            let views = registry.views();
            let generation = self.generation.load(Ordering::Acquire);
            let (taken, busy) = empty_stale(&views, Some(generation));
            registry.pending = busy;
            (taken, views)
        };
        // Kernels (and views whose thread has gone) drop here, outside the lock.
        drop(taken);
        drop(views);
    }

    fn registry(&self) -> MutexGuard<'_, ViewRegistry<K>> {
        // Each update of the registry leaves it consistent: a poisoned lock is still usable.
        self.views.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock(&self) -> MutexGuard<'_, Entries<K>> {
        // A panic while holding the lock cannot leave the map inconsistent (each update is a
        // single insert or remove), so a poisoned lock is still usable.
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Drops least recently used entries until the map is within capacity; returns them, for
    /// the caller to drop after it releases the lock.
    fn evict_over_capacity(&self, entries: &mut Entries<K>) -> Vec<Entry<K>> {
        let mut evicted = Vec::new();
        while entries.map.len() > self.capacity {
            let oldest = entries
                .map
                .iter()
                .min_by_key(|(_, e)| e.last_used.load(Ordering::Relaxed))
                .map(|(k, _)| k.clone());
            let Some(key) = oldest else { break };
            evicted.extend(entries.map.remove(&key));
            entries.evictions += 1;
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
        evicted
    }
}

impl<K: Cacheable> Drop for Shelf<K> {
    /// Empties every thread's view of this shelf, so that its kernels go now unless a caller
    /// holds them: a thread that never makes another request would otherwise keep its view.
    fn drop(&mut self) {
        let views = self.registry().views();
        // `&mut self`: no request is in flight, so no view is busy.
        let (taken, _) = empty_stale(&views, None);
        drop(taken);
    }
}

/// `K::build`, retried once on a fresh scoped thread if it panics: a request made from a
/// thread-local destructor after the compiler's thread-locals (ours or Cranelift's) were
/// destroyed would otherwise panic there, which aborts the process.
fn build_anywhere<K: Cacheable>(
    validated: K::Validated,
    started: Instant,
    share: &K::Share,
) -> Result<K> {
    let retry = validated.clone();
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        K::build(validated, started, share)
    })) {
        Ok(result) => result,
        Err(_) => std::thread::scope(|s| s.spawn(|| K::build(retry, started, share)).join())
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
    }
}
