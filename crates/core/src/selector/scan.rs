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
#[derive(Clone, Debug, Default)]
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
    let start = cursor.start(len);
    let mut best_index = start;
    let mut best_in_flight = u32::MAX;
    // Every path a candidate (the usual case): candidate `i` is position
    // `i`, so the scan reads the loads without going through
    // `candidates`.
    let all = len == pick.loads.len();
    let mut index = start;
    for _ in 0..len {
        let position = if all {
            index
        } else {
            usize::from(candidates[index])
        };
        let in_flight = pick.loads[position].in_flight();
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
/// first met, with a non-strict one to the last). `key` takes a position.
/// `path_count` is the group's: when every path is a candidate, candidate
/// `i` is position `i`, and the scan skips the read of `candidates`.
#[inline(always)]
pub(crate) fn best_from_cursor<K>(
    cursor: &mut TieCursor,
    candidates: &[u16],
    path_count: usize,
    mut key: impl FnMut(usize) -> K,
    better: impl Fn(&K, &K) -> bool,
) -> u16 {
    // Two copies of the loop, so that neither tests which case it is in
    // on every step. `key` moves into one of them (a `&mut` to it was
    // called out of line).
    let best_index = if candidates.len() == path_count {
        scan_from(cursor, candidates.len(), key, &better)
    } else {
        scan_from(
            cursor,
            candidates.len(),
            |index| key(usize::from(candidates[index])),
            &better,
        )
    };
    cursor.picked(best_index);
    candidates[best_index]
}

/// The scan of [`best_from_cursor`] over `len` candidates, `key` taking a
/// candidate index; returns the best index.
#[inline(always)]
fn scan_from<K>(
    cursor: &TieCursor,
    len: usize,
    mut key: impl FnMut(usize) -> K,
    better: impl Fn(&K, &K) -> bool,
) -> usize {
    let mut index = cursor.start(len);
    let mut best_index = index;
    let mut best = key(index);
    // A fixed trip count, so the loop's exit predicts well whatever the
    // cursor (two loops split at the cursor saved instructions but
    // mispredicted their exits).
    for _ in 1..len {
        index += 1;
        if index == len {
            index = 0;
        }
        let candidate = key(index);
        if better(&candidate, &best) {
            best = candidate;
            best_index = index;
        }
    }
    best_index
}
