//! Machine code shared between kernels whose loop nests differ only where the code does not
//! look (a dynamic batch or sequence length): [`code_plan`] is the key, [`CodeShare`] the map
//! of live code by key. Each [`crate::KernelCache`] has one.

use std::sync::{Arc, Mutex, MutexGuard, Weak};

use rustc_hash::FxHashMap;

use super::{JitCode, lower};
use crate::error::Result;
use crate::specialize::Plan;

/// The plan that becomes native code, and the key under which that code is shared.
///
/// It is `plan` without what the code does not depend on. The bands loop (and batches loop)
/// of a banded plan runs in Rust (`Kernel::call_range` packs each band, then calls the code on
/// it), so only the two inner loops remain, reading the scratch buffer as their data; `band`
/// stays, as it decides the helpers the code calls. The code walks `start..end` of the
/// outermost loop and reads its extent only when that loop is also the innermost, to cap the
/// unrolled trip, which never exceeds [`lower::MAX_UNROLL`]; so the extent is capped there
/// for a single loop and dropped (0) otherwise. The buffer sizes go: the kernel checks them
/// before each call. Signatures that differ only in an outer dim (a dynamic batch or sequence
/// length) thus share one code.
pub(crate) fn code_plan(plan: &Plan) -> Plan {
    let loops = match plan.band {
        Some(_) => &plan.loops[plan.loops.len() - 2..],
        None => &plan.loops[..],
    };
    let mut loops = loops.to_vec();
    loops[0].extent = match loops.len() {
        1 => loops[0].extent.min(lower::MAX_UNROLL),
        _ => 0,
    };
    Plan {
        loops,
        data_bytes: 0,
        indices_bytes: 0,
        output_bytes: 0,
        ..plan.clone()
    }
}

/// Machine code offered for reuse, by [`code_plan`]: each [`crate::KernelCache`] has one, and
/// [`crate::Kernel::compile_shared`] uses a process-wide one. An entry is dead once the last
/// kernel holding its code is dropped.
#[derive(Default)]
pub(crate) struct CodeShare(Mutex<Offered>);

#[derive(Default)]
struct Offered {
    code: FxHashMap<Plan, Weak<JitCode>>,
    /// The map's length at which dead entries are next swept: twice the live ones after the
    /// last sweep (at least 64), so a sweep costs a constant per insert and the map stays
    /// within twice the live code plus 64.
    sweep_at: usize,
}

impl CodeShare {
    /// The code for `plan`: a live kernel's from this share whose plan has the same
    /// [`code_plan`], else freshly compiled (and offered from then on). The flag says whether
    /// the code was reused.
    pub(crate) fn code_for(&self, plan: &Plan) -> Result<(Arc<JitCode>, bool)> {
        let key = code_plan(plan);
        if let Some(code) = self.lock().code.get(&key).and_then(Weak::upgrade) {
            return Ok((code, true));
        }
        // Compiled without the lock, so other plans compile meanwhile; two threads compiling
        // the same key both succeed, and the later one's code is offered from then on.
        let code = Arc::new(JitCode::compile_code_plan(&key)?);
        let mut offered = self.lock();
        if offered.code.len() >= offered.sweep_at {
            // Entries whose kernels are all gone.
            offered.code.retain(|_, code| code.strong_count() > 0);
            offered.sweep_at = (2 * offered.code.len()).max(64);
        }
        offered.code.insert(key, Arc::downgrade(&code));
        Ok((code, false))
    }

    /// Entries in the map, live or not (for tests).
    #[cfg(test)]
    fn entries(&self) -> usize {
        self.lock().code.len()
    }

    fn lock(&self) -> MutexGuard<'_, Offered> {
        // Each update is a single insert or sweep, so a poisoned map is still consistent.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn plan_of(signature: &crate::Signature, tuning: crate::Tuning) -> Plan {
        Plan::with_tuning(&signature.validate().expect("valid"), tuning).expect("plan")
    }

    /// A share reuses code only while a kernel holds it, and tells apart what the code
    /// depends on: index type, policy, table size.
    #[test]
    fn a_share_reuses_code_only_while_it_is_held_and_only_for_an_equal_key() {
        use crate::{IndexPolicy, IndexType, NegativeIndices, OutOfRange, Tuning};
        let policy = |negative, out_of_range| IndexPolicy {
            negative,
            out_of_range,
        };
        let share = CodeShare::default();
        let sig = |n: usize| crate::Signature::gather_elements(&[n, 37], &[n, 29], 1);
        let code = |signature: &crate::Signature| {
            share
                .code_for(&plan_of(signature, Tuning::default()))
                .expect("compiles")
        };
        let (first, reused) = code(&sig(40));
        assert!(!reused);
        // Two loops (rows, elements): the rows' extent is not in the key at all.
        for n in [2, 7, 41, 1000] {
            let (other, reused) = code(&sig(n));
            assert!(reused && Arc::ptr_eq(&other, &first), "{n} rows");
        }
        let variants = [
            sig(40).with_index_type(IndexType::U64),
            sig(40).with_index_type(IndexType::I32),
            sig(40).with_policy(policy(NegativeIndices::Invalid, OutOfRange::Error)),
            sig(40).with_policy(policy(NegativeIndices::Wrap, OutOfRange::Clamp)),
            sig(40).with_policy(policy(NegativeIndices::Wrap, OutOfRange::Zero)),
            crate::Signature::gather_elements(&[40, 38], &[40, 29], 1),
            crate::Signature::gather_elements(&[40, 37], &[40, 30], 1),
        ];
        for variant in &variants {
            let (other, reused) = code(variant);
            assert!(!reused && !Arc::ptr_eq(&other, &first), "{variant}");
        }
        drop(first);
        assert!(!code(&sig(40)).1, "nothing held it");
    }

    /// A single loop keeps its extent up to the longest trip: lengths from 8 up share, shorter
    /// ones do not (their trip is shorter).
    #[test]
    fn a_single_loop_shares_code_from_the_longest_trip_up() {
        let share = CodeShare::default();
        let plan = |rows: usize| {
            let sig = crate::Signature::gather(&[50, 2], &[rows], 0, 0);
            plan_of(&sig, crate::Tuning::default())
        };
        assert_eq!(plan(9).loops.len(), 1);
        let (eight, _) = share.code_for(&plan(8)).expect("compiles");
        for rows in [9, 100, 5000] {
            let (code, reused) = share.code_for(&plan(rows)).expect("compiles");
            assert!(reused && Arc::ptr_eq(&code, &eight), "{rows}");
        }
        let (seven, reused) = share.code_for(&plan(7)).expect("compiles");
        assert!(!reused && !Arc::ptr_eq(&seven, &eight));
    }

    /// Banded plans share the code of their two inner loops across batches.
    #[test]
    fn banded_plans_share_code_across_batches() {
        let share = CodeShare::default();
        let tuning = crate::Tuning::bands_always(64);
        let sig =
            |batch: usize| crate::Signature::gather_elements(&[batch, 9, 64], &[batch, 12, 64], 1);
        let plans: Vec<Plan> = [2, 3, 5, 40].map(|b| plan_of(&sig(b), tuning)).to_vec();
        assert!(plans.iter().all(|p| p.band.is_some()), "{plans:?}");
        let (first, _) = share.code_for(&plans[0]).expect("compiles");
        for plan in &plans[1..] {
            let (code, reused) = share.code_for(plan).expect("compiles");
            assert!(reused && Arc::ptr_eq(&code, &first));
        }
        // Another table (10 rows) is another bounds check.
        let other = plan_of(
            &crate::Signature::gather_elements(&[2, 10, 64], &[2, 12, 64], 1),
            tuning,
        );
        assert!(other.band.is_some());
        assert!(!share.code_for(&other).expect("compiles").1);
    }

    /// Dead entries are swept as the map grows: it stays within twice the live code plus 64.
    #[test]
    fn a_share_sweeps_dead_code() {
        let share = CodeShare::default();
        let held: Vec<_> = (0..10)
            .map(|n| {
                let sig = crate::Signature::gather(&[n + 1, 3], &[2], 0, 0);
                share
                    .code_for(&plan_of(&sig, crate::Tuning::default()))
                    .expect("compiles")
            })
            .collect();
        for n in 0..300 {
            let sig = crate::Signature::gather(&[n + 100, 3], &[2], 0, 0);
            drop(share.code_for(&plan_of(&sig, crate::Tuning::default())));
            assert!(
                share.entries() <= 2 * held.len() + 64,
                "{} entries",
                share.entries()
            );
        }
        assert!(held.iter().all(|(code, _)| Arc::strong_count(code) == 1));
    }
}
