//! The scan the load-aware selectors share (queue-length, queue-depth,
//! service-time, historical-service-time): walk the candidates from a
//! per-thread cursor and keep the best, so that equally good paths take
//! turns instead of the first always winning. dm gets the same effect by
//! moving the chosen path to the tail of its list, under a lock we do not
//! need.

use super::Pick;

/// One thread's tie breaker: the candidate index its next scan starts at.
/// Shared by the scanning selectors (queue-length, queue-depth,
/// service-time, historical-service-time).
#[derive(Debug, Default)]
pub struct TieCursor {
    /// Index into `Pick::candidates`; may be out of range after the
    /// candidates shrank, and is then read as 0.
    next: usize,
}

impl TieCursor {
    /// The index to start scanning `len` candidates at.
    #[inline]
    pub(crate) fn start(&self, len: usize) -> usize {
        if self.next < len {
            self.next
        } else {
            0
        }
    }

    /// Records that the candidate at `index` was picked: the next scan
    /// starts just after it, making it the least preferred among equals.
    #[inline]
    pub(crate) fn picked(&mut self, index: usize) {
        self.next = index + 1;
    }
}

/// Picks the candidate with the fewest I/Os in flight, stopping at the
/// first idle one; ties go to the first met from the cursor. The rule of
/// queue-length and queue-depth.
#[inline]
pub(crate) fn fewest_in_flight(cursor: &mut TieCursor, pick: &Pick<'_>) -> u16 {
    let candidates = pick.candidates;
    let len = candidates.len();
    let mut index = cursor.start(len);
    let mut best_index = index;
    let mut best_in_flight = u32::MAX;
    for _ in 0..len {
        let in_flight = pick.loads[usize::from(candidates[index])].in_flight();
        if in_flight < best_in_flight {
            best_in_flight = in_flight;
            best_index = index;
            if in_flight == 0 {
                break;
            }
        }
        index += 1;
        if index == len {
            index = 0;
        }
    }
    cursor.picked(best_index);
    candidates[best_index]
}

/// Picks the candidate whose `key` is best by `better(candidate, best)`,
/// scanning once from the cursor: a candidate replaces the best met so
/// far when `better` says so (so with a strict `better` ties go to the
/// first met, with a non-strict one to the last).
#[inline(always)]
pub(crate) fn best_from_cursor<K>(
    cursor: &mut TieCursor,
    candidates: &[u16],
    key: impl Fn(u16) -> K,
    better: impl Fn(&K, &K) -> bool,
) -> u16 {
    let len = candidates.len();
    let mut index = cursor.start(len);
    let mut best_index = index;
    let mut best = key(candidates[index]);
    for _ in 1..len {
        index += 1;
        if index == len {
            index = 0;
        }
        let candidate = key(candidates[index]);
        if better(&candidate, &best) {
            best = candidate;
            best_index = index;
        }
    }
    cursor.picked(best_index);
    candidates[best_index]
}
