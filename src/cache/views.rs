//! Each thread's view of a [`Shelf`](super::shelf::Shelf): the kernels that thread was given,
//! which answer its repeat requests without the shelf's lock, and the one flag that lets the
//! shelf take them back while the thread is elsewhere (or idle for good).
//!
//! This file holds the cache's `unsafe`: a view's contents sit in an `UnsafeCell` reached by
//! whoever holds the view's `busy` flag, so that a hit costs one uncontended atomic swap rather
//! than a lock's two read-modify-writes (`cargo bench --bench gather -- S9/cache_hit`).
#![allow(
    unsafe_code,
    reason = "a view's kernels sit in an `UnsafeCell` reached only by the holder of its `busy` flag"
)]

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use rustc_hash::FxHashMap;

use super::Cacheable;

/// The kernels of one thread's view of one shelf, shared with the shelf (which holds a
/// `Weak`) so that the shelf can empty them when they go stale, whether or not the thread ever
/// makes another request.
pub(crate) struct ViewKernels<K: Cacheable> {
    /// Set while one party (the view's thread in a request, or the shelf emptying the view)
    /// holds the contents; a party that finds it set does without them.
    busy: AtomicBool,
    contents: UnsafeCell<Remembrance<K>>,
}

// SAFETY: the contents are reached only by the party that swapped `busy` from false to true
// (`try_with`), so never from two threads at once, and they are `Send` (signatures, and
// `Arc`s of kernels, which are `Send + Sync`).
unsafe impl<K: Cacheable> Sync for ViewKernels<K> {}

impl<K: Cacheable> Default for ViewKernels<K> {
    fn default() -> Self {
        ViewKernels {
            busy: AtomicBool::new(false),
            contents: UnsafeCell::new(Remembrance::default()),
        }
    }
}

impl<K: Cacheable> ViewKernels<K> {
    /// Runs `f` on the contents, unless another party holds them (then `None`, at once).
    #[inline]
    pub(super) fn try_with<R>(&self, f: impl FnOnce(&mut Remembrance<K>) -> R) -> Option<R> {
        if self.busy.swap(true, Ordering::Acquire) {
            return None;
        }
        /// Clears `busy` when `f` returns or unwinds.
        struct Release<'a>(&'a AtomicBool);
        impl Drop for Release<'_> {
            #[inline]
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        let _release = Release(&self.busy);
        // SAFETY: `busy` was false and this call set it: no other party reaches the contents
        // until `_release` clears it, after the last use of this reference.
        Some(f(unsafe { &mut *self.contents.get() }))
    }
}

/// The kernels of a view by signature, and the shelf generation they were handed out in.
///
/// While requests repeat one signature (a runtime running one op in a loop), each is answered
/// by one comparison with the latest, without hashing (which took over a third of a hit's
/// instructions); while they alternate (the ops of a model in turn), that comparison would
/// only fail, so they go straight to the hash map.
pub(crate) struct Remembrance<K: Cacheable> {
    kernels: Vec<(K::Signature, Remembered<K>)>,
    /// Position in `kernels` by signature.
    positions: FxHashMap<K::Signature, usize>,
    /// Position of the latest kernel found (or added).
    latest: usize,
    /// Whether the latest request repeated the one before it.
    repeating: bool,
    /// The shelf's generation when these kernels were in its map: once the shelf's moves on,
    /// some may have been evicted, and the view is emptied.
    pub(super) generation: u64,
}

impl<K: Cacheable> Default for Remembrance<K> {
    fn default() -> Self {
        Remembrance {
            kernels: Vec::new(),
            positions: FxHashMap::default(),
            latest: 0,
            repeating: false,
            generation: 0,
        }
    }
}

impl<K: Cacheable> Remembrance<K> {
    #[inline(always)]
    pub(super) fn get(&mut self, signature: &K::Signature) -> Option<&Remembered<K>> {
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

    pub(super) fn insert(&mut self, signature: &K::Signature, remembered: Remembered<K>) {
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

    pub(super) fn len(&self) -> usize {
        self.kernels.len()
    }

    /// Takes every kernel out (for the caller to drop outside any lock or borrow) and starts
    /// afresh at `generation`.
    pub(super) fn take(&mut self, generation: u64) -> Remembrance<K> {
        let taken = std::mem::take(self);
        self.generation = generation;
        taken
    }
}

/// A kernel in a view, with the stamp of its shelf entry (which the view's hits refresh).
pub(crate) struct Remembered<K> {
    pub(super) kernel: Arc<K>,
    pub(super) last_used: Arc<AtomicU64>,
}

/// One thread's view of one shelf.
pub(crate) struct ThreadView<K: Cacheable> {
    /// The shelf's [`id`](super::shelf::Shelf): unique for the process's life.
    pub(super) shelf: u64,
    pub(super) kernels: Arc<ViewKernels<K>>,
    /// Hits answered from this view, written by its thread only; registered with the shelf.
    pub(super) hits: Arc<AtomicU64>,
}

/// The thread views of one shelf, as the shelf holds them.
pub(super) struct ViewRegistry<K: Cacheable> {
    /// Per live view: its hit counter and its kernels.
    live: Vec<(Arc<AtomicU64>, Weak<ViewKernels<K>>)>,
    /// The hits of views whose thread has dropped them.
    retired: u64,
    /// Stale views that were busy when the shelf last tried to empty them.
    pub(super) pending: bool,
}

impl<K: Cacheable> Default for ViewRegistry<K> {
    fn default() -> Self {
        ViewRegistry {
            live: Vec::new(),
            retired: 0,
            pending: false,
        }
    }
}

impl<K: Cacheable> ViewRegistry<K> {
    pub(super) fn total_hits(&self) -> u64 {
        self.retired
            + self
                .live
                .iter()
                .map(|(hits, _)| hits.load(Ordering::Relaxed))
                .sum::<u64>()
    }

    /// Registers a new view (and folds the counters of views whose thread has dropped them,
    /// which only this registry still holds, into `retired`, so the registry stays as long as
    /// the live views).
    pub(super) fn register(&mut self, view: &ThreadView<K>) {
        let (dropped, live): (Vec<_>, Vec<_>) = std::mem::take(&mut self.live)
            .into_iter()
            .partition(|(hits, _)| Arc::strong_count(hits) == 1);
        self.retired += dropped
            .iter()
            .map(|(hits, _)| hits.load(Ordering::Relaxed))
            .sum::<u64>();
        self.live = live;
        self.live
            .push((Arc::clone(&view.hits), Arc::downgrade(&view.kernels)));
    }

    /// Every live view's kernels, for [`empty_stale`] to visit outside the registry's lock.
    pub(super) fn views(&self) -> Vec<Arc<ViewKernels<K>>> {
        self.live
            .iter()
            .filter_map(|(_, view)| view.upgrade())
            .collect()
    }
}

/// Empties each of `views` whose generation is not `generation` (all of them with `None`),
/// returning what it took, for the caller to drop outside any lock, and whether a stale view
/// was busy (its thread is in a request, at whose end it empties the view itself).
pub(super) fn empty_stale<K: Cacheable>(
    views: &[Arc<ViewKernels<K>>],
    generation: Option<u64>,
) -> (Vec<Remembrance<K>>, bool) {
    let mut taken = Vec::new();
    let mut busy = false;
    for view in views {
        let emptied = view.try_with(|kernels| match generation {
            // A view of this generation, or of a later one (a pass that started since), stays.
            Some(now) if kernels.generation >= now => None,
            _ => Some(kernels.take(generation.unwrap_or(kernels.generation))),
        });
        match emptied {
            Some(Some(kernels)) => taken.push(kernels),
            Some(None) => {}
            None => busy = true,
        }
    }
    (taken, busy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Kernel, Signature};

    fn remembered(signature: &Signature) -> Remembered<Kernel> {
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
        let mut view = Remembrance::<Kernel>::default();
        view.insert(&a, remembered(&a));
        view.insert(&b, remembered(&b));
        let found = |view: &mut Remembrance<Kernel>, sig: &Signature| {
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

        // After a take nothing is found, whatever the bit said, and the generation is new.
        let taken = view.take(7);
        assert_eq!((taken.len(), view.generation), (2, 7));
        assert!(view.get(&b).is_none() && view.get(&a).is_none());
        view.insert(&c, remembered(&c));
        assert_eq!(found(&mut view, &c), Some(c.clone()));
        assert_eq!(found(&mut view, &c), Some(c));
        assert!(view.repeating);
    }

    /// A view held by one party is refused to another, at once, and free again afterwards
    /// (also after a panic inside).
    #[test]
    fn a_busy_view_is_refused_and_released_even_on_a_panic() {
        let view = ViewKernels::<Kernel>::default();
        let nested = view.try_with(|_| view.try_with(|_| ()).is_none());
        assert_eq!(nested, Some(true));
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            view.try_with(|_| panic!("inside"))
        }));
        assert!(panicked.is_err());
        assert_eq!(view.try_with(|kernels| kernels.len()), Some(0));
    }
}
