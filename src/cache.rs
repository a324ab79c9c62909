//! [`KernelCache`]: signature -> `Arc<Kernel>`, compiled once, bounded, with statistics.
//!
//! The map holds one slot per signature. A slot is created under the map's lock and filled
//! outside it through a `OnceLock`, so a signature requested by many threads at once is
//! compiled exactly once while other signatures compile in parallel. When the cache is over
//! capacity the least recently used slots are dropped; a kernel a caller still holds stays
//! valid, and its code is freed when the last handle goes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use rustc_hash::FxHashMap;

use crate::error::Result;
use crate::ir::Signature;
use crate::kernel::Kernel;

type Slot = Arc<OnceLock<Result<Arc<Kernel>>>>;

struct Entry {
    slot: Slot,
    last_used: u64,
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
    entries: Mutex<FxHashMap<Signature, Entry>>,
    capacity: usize,
    clock: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    compilations: AtomicU64,
    evictions: AtomicU64,
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
            entries: Mutex::new(FxHashMap::default()),
            capacity: capacity.max(1),
            clock: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            compilations: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
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
        let slot = {
            let now = self.clock.fetch_add(1, Ordering::Relaxed);
            let mut entries = self.lock();
            if let Some(entry) = entries.get_mut(signature) {
                entry.last_used = now;
                self.hits.fetch_add(1, Ordering::Relaxed);
                entry.slot.clone()
            } else {
                // Validate before taking a slot, so invalid signatures never occupy one.
                drop(entries);
                signature.validate()?;
                let mut entries = self.lock();
                self.misses.fetch_add(1, Ordering::Relaxed);
                let slot = entries
                    .entry(signature.clone())
                    .or_insert_with(|| Entry {
                        slot: Slot::default(),
                        last_used: now,
                    })
                    .slot
                    .clone();
                self.evict_over_capacity(&mut entries);
                slot
            }
        };
        slot.get_or_init(|| {
            self.compilations.fetch_add(1, Ordering::Relaxed);
            let kernel = Kernel::compile(signature).map(Arc::new);
            if let Ok(kernel) = &kernel {
                let nanos = kernel.compile_time().as_nanos().min(u64::MAX as u128) as u64;
                self.compile_nanos.fetch_add(nanos, Ordering::Relaxed);
            }
            kernel
        })
        .clone()
    }

    /// Current counters.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            compilations: self.compilations.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            compile_time: Duration::from_nanos(self.compile_nanos.load(Ordering::Relaxed)),
            entries: self.lock().len(),
        }
    }

    /// The maximum number of kernels held.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Drops every entry (kernels still held elsewhere stay valid).
    pub fn clear(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> MutexGuard<'_, FxHashMap<Signature, Entry>> {
        // A panic while holding the lock cannot leave the map inconsistent (each update is a
        // single insert or remove), so a poisoned lock is still usable.
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn evict_over_capacity(&self, entries: &mut FxHashMap<Signature, Entry>) {
        while entries.len() > self.capacity {
            let oldest = entries
                .iter()
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(key) => {
                    entries.remove(&key);
                    self.evictions.fetch_add(1, Ordering::Relaxed);
                }
                None => break,
            }
        }
    }
}
