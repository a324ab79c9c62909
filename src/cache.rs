//! [`KernelCache`]: signature -> `Arc<Kernel>`, compiled once, bounded, with statistics.
//!
//! The map holds one slot per signature. A slot is created under the map's lock and filled
//! outside it through a `OnceLock`, so a signature requested by many threads at once is
//! compiled exactly once while other signatures compile in parallel. When the cache is over
//! capacity the least recently used slots are dropped; a kernel a caller still holds stays
//! valid, and its code is freed when the last handle goes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

use crate::error::Result;
use crate::ir::Signature;
use crate::kernel::Kernel;
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
    last_used: u64,
}

/// The map and the counters that change on every request, under one lock.
#[derive(Default)]
struct Entries {
    map: FxHashMap<Signature, Entry>,
    clock: u64,
    hits: u64,
    misses: u64,
    evictions: u64,
}

/// Counters of a [`KernelCache`], read with [`KernelCache::stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Requests answered from the cache (including those that waited for a compile in flight).
    pub hits: u64,
    /// Requests that created a new entry.
    pub misses: u64,
    /// Kernels compiled (successfully or not).
    pub compilations: u64,
    /// Entries dropped to stay within capacity.
    pub evictions: u64,
    /// Total time spent compiling.
    pub compile_time: Duration,
    /// Entries currently held.
    pub entries: usize,
}

/// A thread-safe cache of compiled kernels keyed by the complete [`Signature`].
pub struct KernelCache {
    entries: Mutex<Entries>,
    capacity: usize,
    compilations: AtomicU64,
    compile_nanos: AtomicU64,
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
            entries: Mutex::new(Entries::default()),
            capacity: capacity.max(1),
            compilations: AtomicU64::new(0),
            compile_nanos: AtomicU64::new(0),
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
        if let Some(kernel) = self.lookup(signature) {
            return Ok(kernel);
        }
        // Validate before taking a slot, so invalid signatures never occupy one.
        let started = Instant::now();
        let validated = signature.validate()?;
        let slot = {
            let mut guard = self.lock();
            let entries = &mut *guard;
            entries.clock += 1;
            let now = entries.clock;
            match entries.map.get_mut(signature) {
                // Another thread inserted it since `lookup`.
                Some(entry) => {
                    entry.last_used = now;
                    entries.hits += 1;
                    match &entry.state {
                        State::Ready(kernel) => return Ok(Arc::clone(kernel)),
                        State::Compiling(slot) => Arc::clone(slot),
                    }
                }
                None => {
                    entries.misses += 1;
                    let slot = Slot::default();
                    let entry = Entry {
                        state: State::Compiling(Arc::clone(&slot)),
                        last_used: now,
                    };
                    entries.map.insert(signature.clone(), entry);
                    self.evict_over_capacity(entries);
                    slot
                }
            }
        };
        let result = slot
            .get_or_init(|| {
                self.compilations.fetch_add(1, Ordering::Relaxed);
                let kernel =
                    Kernel::compile_validated(validated, Tuning::default(), started).map(Arc::new);
                if let Ok(kernel) = &kernel {
                    let nanos = kernel.compile_time().as_nanos().min(u64::MAX as u128) as u64;
                    self.compile_nanos.fetch_add(nanos, Ordering::Relaxed);
                }
                kernel
            })
            .clone();
        if let Ok(kernel) = &result {
            // Later hits skip the slot. (The entry may have been evicted meanwhile.)
            if let Some(entry) = self.lock().map.get_mut(signature) {
                entry.state = State::Ready(Arc::clone(kernel));
            }
        }
        result
    }

    /// The fast path: a compiled kernel already in the map.
    fn lookup(&self, signature: &Signature) -> Option<Arc<Kernel>> {
        let mut guard = self.lock();
        let entries = &mut *guard;
        entries.clock += 1;
        let now = entries.clock;
        let entry = entries.map.get_mut(signature)?;
        let State::Ready(kernel) = &entry.state else {
            return None;
        };
        entry.last_used = now;
        let kernel = Arc::clone(kernel);
        entries.hits += 1;
        Some(kernel)
    }

    /// Current counters.
    pub fn stats(&self) -> CacheStats {
        let entries = self.lock();
        CacheStats {
            hits: entries.hits,
            misses: entries.misses,
            compilations: self.compilations.load(Ordering::Relaxed),
            evictions: entries.evictions,
            compile_time: Duration::from_nanos(self.compile_nanos.load(Ordering::Relaxed)),
            entries: entries.map.len(),
        }
    }

    /// The maximum number of kernels held.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Drops every entry (kernels still held elsewhere stay valid).
    pub fn clear(&self) {
        self.lock().map.clear();
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
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, _)| k.clone());
            let Some(key) = oldest else { break };
            entries.map.remove(&key);
            entries.evictions += 1;
        }
    }
}
