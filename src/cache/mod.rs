//! [`KernelCache`]: signature -> `Arc<kernel>` for every op family, compiled once, bounded,
//! with statistics.
//!
//! One cache holds a [`Shelf`] per kind of kernel (the gathers' [`Kernel`], the quantized
//! gathers' [`QuantizedKernel`], the scatters' [`ScatterKernel`]); `shelf.rs` is the map, its slots and its eviction, the same
//! code for each family (the [`Cacheable`] trait says how a family validates and builds), and
//! `views.rs` the per-thread views that answer repeat requests without a lock.
//!
//! A miss of the gathers' shelf reuses the machine code of one of its live kernels when only
//! an outer dim differs (a dynamic batch or sequence length; see [`Kernel::compile_shared`]):
//! nothing is compiled then.

mod shelf;
mod views;

use std::cell::RefCell;
use std::hash::Hash;
use std::sync::{Arc, LazyLock, OnceLock};
use std::thread::LocalKey;
use std::time::{Duration, Instant};

use crate::error::Result;
use crate::ir::{Signature, Validated};
use crate::kernel::{CodeShare, CompiledOp, Kernel, QuantizedKernel, ScatterKernel};
use crate::quant::{QuantizedLayout, QuantizedSignature};
use crate::scatter::{ScatterLayout, ScatterSignature};
use crate::specialize::Tuning;
use shelf::{Shelf, ShelfStats, View, Views};

/// A kind of kernel a [`KernelCache`] holds: how its signatures are validated and built (what
/// it is once built is [`CompiledOp`]).
pub(crate) trait Cacheable: CompiledOp + Sized + 'static {
    /// The complete key of a kernel.
    type Signature: Clone + Eq + Hash + Send + Sync + 'static;
    /// A signature that passed validation.
    type Validated: Clone + Send;
    /// What the builds of one shelf share.
    type Share: Default + Send + Sync;
    /// Checks `signature` (errors are returned and never cached).
    fn validate(signature: &Self::Signature) -> Result<Self::Validated>;
    /// Compiles (or reuses code from `share`); `started` is when the request began.
    fn build(validated: Self::Validated, started: Instant, share: &Self::Share) -> Result<Self>;
    /// Whether the kernel's code was another kernel's.
    fn reuses_code(&self) -> bool;
    /// This thread's views of the shelves of this kind.
    fn views() -> &'static LocalKey<Views<Self>>;
}

thread_local! {
    /// This thread's views of gather shelves (usually one: the global cache's).
    static GATHER_VIEWS: Views<Kernel> = const { RefCell::new(Vec::new()) };
    /// This thread's views of quantized shelves.
    static QUANTIZED_VIEWS: Views<QuantizedKernel> = const { RefCell::new(Vec::new()) };
    /// This thread's views of scatter shelves.
    static SCATTER_VIEWS: Views<ScatterKernel> = const { RefCell::new(Vec::new()) };
}

impl Cacheable for Kernel {
    type Signature = Signature;
    type Validated = Validated;
    type Share = CodeShare;

    fn validate(signature: &Signature) -> Result<Validated> {
        signature.validate()
    }

    fn build(validated: Validated, started: Instant, share: &CodeShare) -> Result<Kernel> {
        Kernel::build(validated, Tuning::default(), started, Some(share))
    }

    fn reuses_code(&self) -> bool {
        Kernel::reuses_code(self)
    }

    fn views() -> &'static LocalKey<Views<Kernel>> {
        &GATHER_VIEWS
    }
}

impl Cacheable for QuantizedKernel {
    type Signature = QuantizedSignature;
    type Validated = QuantizedLayout;
    type Share = ();

    fn validate(signature: &QuantizedSignature) -> Result<QuantizedLayout> {
        signature.validate()
    }

    fn build(layout: QuantizedLayout, started: Instant, _: &()) -> Result<QuantizedKernel> {
        QuantizedKernel::build(layout, started)
    }

    fn reuses_code(&self) -> bool {
        false
    }

    fn views() -> &'static LocalKey<Views<QuantizedKernel>> {
        &QUANTIZED_VIEWS
    }
}

impl Cacheable for ScatterKernel {
    type Signature = ScatterSignature;
    type Validated = ScatterLayout;
    type Share = ();

    fn validate(signature: &ScatterSignature) -> Result<ScatterLayout> {
        signature.validate()
    }

    fn build(layout: ScatterLayout, started: Instant, _: &()) -> Result<ScatterKernel> {
        ScatterKernel::build(layout, started)
    }

    fn reuses_code(&self) -> bool {
        false
    }

    fn views() -> &'static LocalKey<Views<ScatterKernel>> {
        &SCATTER_VIEWS
    }
}

/// Counters of a [`KernelCache`], read with [`KernelCache::stats`]: sums over its op
/// families.
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

impl CacheStats {
    fn add(mut self, shelf: ShelfStats) -> CacheStats {
        self.hits += shelf.hits;
        self.misses += shelf.misses;
        self.compilations += shelf.compilations;
        self.shared_code += shelf.shared_code;
        self.evictions += shelf.evictions;
        self.compile_time += Duration::from_nanos(shelf.compile_nanos);
        self.entries += shelf.entries;
        self
    }
}

/// A thread-safe cache of compiled kernels of every op family, each keyed by its complete
/// signature ([`Signature`] for the gathers, [`QuantizedSignature`] for the quantized ones,
/// [`ScatterSignature`] for the scatters).
///
/// Each signature is compiled once however many threads ask for it at once; each family
/// holds at most [`KernelCache::capacity`] kernels, the least recently used leaving first. A
/// kernel the cache lets go stays valid in the hands of callers that hold it, and is freed
/// with the last of them; the cache's own per-thread views let go of it at once (or, for a
/// thread inside a request at that moment, when that request ends), so a thread that goes
/// idle keeps nothing the cache has evicted. Dropping the cache lets go of everything.
///
/// Hits skip the lock: each thread keeps a view of the kernels it has been given, so a hit
/// costs a thread-local lookup, one swap of a flag only that thread normally touches, and (for
/// [`KernelCache::get`]) one `Arc` clone; [`KernelCache::with`] lends the kernel to a closure
/// and saves the clone too.
pub struct KernelCache {
    gathers: Shelf<Kernel>,
    quantized: Shelf<QuantizedKernel>,
    scatters: Shelf<ScatterKernel>,
}

impl std::fmt::Debug for KernelCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelCache")
            .field("capacity", &self.capacity())
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
    /// Capacity of [`KernelCache::default`] and of the process-wide cache, per op family.
    pub const DEFAULT_CAPACITY: usize = 4096;

    /// An empty cache holding at most `capacity` kernels (at least one) of each op family.
    pub fn new(capacity: usize) -> KernelCache {
        KernelCache {
            gathers: Shelf::new(capacity),
            quantized: Shelf::new(capacity),
            scatters: Shelf::new(capacity),
        }
    }

    /// The process-wide cache used by [`crate::jit`], [`crate::jit_quantized`] and their
    /// siblings.
    pub fn global() -> &'static KernelCache {
        static GLOBAL: LazyLock<KernelCache> = LazyLock::new(KernelCache::default);
        &GLOBAL
    }

    /// The kernel for `signature`, compiling it on first use.
    ///
    /// # Errors
    /// The signature's validation error (not cached), or a code generation error.
    pub fn get(&self, signature: &Signature) -> Result<Arc<Kernel>> {
        self.gathers.get_for(signature, View::Remember)
    }

    /// The quantized kernel for `signature`, compiling it on first use.
    ///
    /// # Errors
    /// As [`QuantizedKernel::compile`] (validation errors are not cached).
    pub fn get_quantized(&self, signature: &QuantizedSignature) -> Result<Arc<QuantizedKernel>> {
        self.quantized.get_for(signature, View::Remember)
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
            // A worker's view would hold the kernel until the cache evicts it, for a thread
            // that will not ask for it.
            let view = match std::thread::current().id() == caller {
                true => View::Remember,
                false => View::Skip,
            };
            let _ = kernels[i].set(self.gathers.get_for(&signatures[i], view));
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
        self.gathers.with(signature, f)
    }

    /// [`KernelCache::with`] for a quantized kernel.
    ///
    /// # Errors
    /// As [`KernelCache::get_quantized`]; `f` is not called then.
    pub fn with_quantized<R>(
        &self,
        signature: &QuantizedSignature,
        f: impl FnOnce(&QuantizedKernel) -> R,
    ) -> Result<R> {
        self.quantized.with(signature, f)
    }

    /// The scatter kernel for `signature`, compiled on first use.
    ///
    /// # Errors
    /// As [`ScatterKernel::compile`] (validation errors are not cached).
    pub fn get_scatter(&self, signature: &ScatterSignature) -> Result<Arc<ScatterKernel>> {
        self.scatters.get_for(signature, View::Remember)
    }

    /// [`KernelCache::with`] for a scatter kernel.
    ///
    /// # Errors
    /// As [`KernelCache::get_scatter`]; `f` is not called then.
    pub fn with_scatter<R>(
        &self,
        signature: &ScatterSignature,
        f: impl FnOnce(&ScatterKernel) -> R,
    ) -> Result<R> {
        self.scatters.with(signature, f)
    }

    /// Current counters, summed over the op families.
    pub fn stats(&self) -> CacheStats {
        CacheStats::default()
            .add(self.gathers.stats())
            .add(self.quantized.stats())
            .add(self.scatters.stats())
    }

    /// The maximum number of kernels held of each op family.
    pub fn capacity(&self) -> usize {
        self.gathers.capacity()
    }

    /// Drops every entry. Kernels still held by callers stay valid; those in threads' views
    /// are let go at once (or, for a thread inside a request, when that request ends).
    pub fn clear(&self) {
        self.gathers.clear();
        self.quantized.clear();
        self.scatters.clear();
    }
}

// `Kernel::compile_shared` lives here: the code it shares is the process-wide cache's.
impl Kernel {
    /// As [`Kernel::compile`], but reusing the machine code of a live kernel made by this
    /// function or held by the process-wide [`KernelCache`] whose loop nest differs at most in
    /// the outermost loop's length (each [`KernelCache`] does the same among its own kernels). Signatures that differ
    /// only in an outer dim, such as a dynamic batch or sequence length, then cost a
    /// validation and a plan instead of a Cranelift compile. The kernel behaves exactly as a
    /// freshly compiled one; [`Kernel::reuses_code`] says which it got.
    ///
    /// # Errors
    /// As [`Kernel::compile`].
    pub fn compile_shared(signature: &Signature) -> Result<Kernel> {
        let started = Instant::now();
        let share = KernelCache::global().gathers.share();
        Kernel::build(
            signature.validate()?,
            Tuning::default(),
            started,
            Some(share),
        )
    }
}
