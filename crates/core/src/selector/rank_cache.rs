//! One thread's ranks of a group's paths, kept between picks so that a pick
//! is a minimum over stored numbers instead of a computation per path.
//!
//! # Contract
//! A selector that ranks each candidate on its own (lower is better, ties
//! to the first met from the thread's cursor, as `best_from_cursor`)
//! computes a [`Ranked`] from the path's load: the rank, how much it rises
//! when one more I/O starts on the path, and the span of clock readings it
//! holds for while the load stays as it is. The cache keeps the rank of
//! every candidate and the span all of them hold for, and answers a pick
//! from the stored ranks while
//! - the pick's [`Pick::generation`] is the one they were computed for
//!   (the candidates, and so their count, are the same), and
//! - the pick's clock reading lies in that span.
//!
//! Otherwise it ranks every candidate again ([`RankCache::best`]). Between
//! picks the queue reports each change of its loads, through the
//! selector's `started` and `completed` hooks:
//! - an I/O started ([`RankCache::started`]): the stored rank rises by its
//!   step, or, for a rank with no step, the path is ranked again;
//! - an I/O ended ([`RankCache::update`]): the path is marked, and the next
//!   pick ranks it again (so a burst of completions on one path costs one
//!   rank, and completions before a pick that ranks everything again cost
//!   none); a candidate past the 64th is ranked again at once.
//!
//! Every stored rank is right at every clock reading of its own span (a
//! step keeps it so), and the cache's span is the intersection of the
//! stored ranks' spans: a new rank narrows it. So a pick at a reading
//! inside it sees the ranks a full computation would give, and a pick
//! outside it computes them; the `cached_picks_are_full_scan_picks` test
//! of historical-service-time checks that over random histories (the clock
//! going back included).
//!
//! # Cost
//! A pick that hits is one compare and select per candidate (plus a rank
//! per path marked since the last pick), and an I/O start one addition.
//! How often the cache is refilled depends on the selector's spans:
//! historical-service-time's rank of a path whose estimate is fresh holds
//! until the estimate goes stale, so at a steady load refills are rare; a
//! rank that changes with the clock itself holds for one clock reading,
//! and then the ranks are computed once per clock reading (the queue's
//! callers read the clock once per batch of I/O, not once per I/O).

use super::scan::TieCursor;
use super::Pick;
use std::hint::select_unpredictable;

/// A candidate's rank (lower is better), how it changes when an I/O starts
/// on the path, and the clock readings, in ns, it holds for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ranked {
    pub(crate) rank: u64,
    /// With one more I/O in flight (and nothing else changed), the rank
    /// is `rank.saturating_add(step)` and holds for the same span;
    /// [`NO_STEP`] when the path must be ranked again instead.
    pub(crate) step: u64,
    /// The rank holds for `from_ns..=until_ns`, which contains the clock
    /// reading it was computed at.
    pub(crate) from_ns: u64,
    pub(crate) until_ns: u64,
}

/// [`Ranked::step`] of a rank that an I/O start changes in another way.
pub(crate) const NO_STEP: u64 = u64::MAX;

/// One thread's cached ranks of one group. See the module docs.
#[derive(Debug)]
pub struct RankCache {
    /// The tie breaker of every pick, cached or not.
    cursor: TieCursor,
    /// The rank of candidate `i` at `i` and again at `candidate_count +
    /// i`, so that a scan from the cursor reads one run of memory with no
    /// wrap.
    ranks: Vec<u64>,
    /// [`Ranked::step`] of candidate `i`.
    steps: Vec<u64>,
    /// The candidate index of each group position, [`NOT_A_CANDIDATE`]
    /// for the others.
    index_of: Vec<u16>,
    /// Bit `i` set: candidate `i`'s load changed since its rank was
    /// stored, and the next pick ranks it again. Candidates past the 64th
    /// are ranked again at once instead.
    changed: u64,
    /// The [`Pick::generation`] the cache was built for; `None` before the
    /// first pick.
    generation: Option<u64>,
    /// How many candidates that generation has.
    candidate_count: usize,
    /// Every stored rank holds for the clock readings
    /// `from_ns..=until_ns`; empty (`from_ns > until_ns`) when nothing is
    /// stored.
    from_ns: u64,
    until_ns: u64,
}

/// [`RankCache::index_of`] of a position that is not a candidate.
const NOT_A_CANDIDATE: u16 = u16::MAX;

impl Default for RankCache {
    fn default() -> Self {
        RankCache {
            cursor: TieCursor::default(),
            ranks: Vec::new(),
            steps: Vec::new(),
            index_of: Vec::new(),
            changed: 0,
            generation: None,
            candidate_count: 0,
            from_ns: u64::MAX,
            until_ns: 0,
        }
    }
}

impl RankCache {
    /// The thread's tie breaker, for a selector that scans without the
    /// cache (historical-service-time with a threshold).
    pub(crate) fn cursor(&mut self) -> &mut TieCursor {
        &mut self.cursor
    }

    /// True when the stored ranks hold at `now_ns`.
    #[inline(always)]
    fn holds_at(&self, now_ns: u64) -> bool {
        (self.from_ns <= now_ns) & (now_ns <= self.until_ns)
    }

    /// Forgets every stored rank.
    #[inline(always)]
    fn empty(&mut self) {
        self.from_ns = u64::MAX;
        self.until_ns = 0;
    }

    /// The best candidate of `pick` by the ranks `rank(position,
    /// candidate_count)` computes at `pick.now_ns` (ties: the first from
    /// the cursor): from the stored ranks when they hold, else after
    /// ranking every candidate again.
    #[inline(always)]
    pub(crate) fn best(&mut self, pick: &Pick<'_>, rank: impl Fn(usize, usize) -> Ranked) -> u16 {
        if self.generation != Some(pick.generation) {
            self.rebuild(pick.candidates, pick.loads.len(), pick.generation);
        }
        if !self.holds_at(pick.now_ns) {
            self.refill(pick.candidates, rank);
        } else if self.changed != 0 {
            self.rank_changed(pick.candidates, rank);
        }
        let count = self.candidate_count;
        let start = self.cursor.start(count);
        let run = &self.ranks[start..start + count];
        // From u64::MAX with a strict compare: a run of u64::MAX still
        // yields offset 0, the first from the cursor, as the tie rule
        // wants; and the loop covers the whole run (8 paths: two rounds of
        // its unrolled body, no leftover).
        let mut best_offset = 0;
        let mut best = u64::MAX;
        let mut offset = 0;
        while offset < run.len() {
            let rank = run[offset];
            // Which rank is lower changes from pick to pick: no branch.
            let lower = rank < best;
            best = select_unpredictable(lower, rank, best);
            best_offset = select_unpredictable(lower, offset, best_offset);
            offset += 1;
        }
        // Whether the best lies past the wrap varies too.
        let index = start + best_offset;
        let index = select_unpredictable(index >= count, index.wrapping_sub(count), index);
        self.cursor.picked(index);
        pick.candidates[index]
    }

    /// Sets the cache up, empty, for `candidates`, of `generation`; the
    /// group has `path_count` paths.
    #[cold]
    #[inline(never)]
    fn rebuild(&mut self, candidates: &[u16], path_count: usize, generation: u64) {
        let count = candidates.len();
        self.ranks.clear();
        self.ranks.resize(2 * count, u64::MAX);
        self.steps.clear();
        self.steps.resize(count, NO_STEP);
        self.index_of.clear();
        self.index_of.resize(path_count, NOT_A_CANDIDATE);
        for (index, &position) in candidates.iter().enumerate() {
            // Candidates are fewer than MAX_PATHS (1,024).
            self.index_of[usize::from(position)] = index as u16;
        }
        self.generation = Some(generation);
        self.candidate_count = count;
        self.empty();
    }

    /// Ranks every one of `candidates` (those the cache was built for)
    /// again. (Out of line, and given the pick's fields rather than the
    /// pick, so that the caller need not build the pick in memory.)
    #[inline(never)]
    fn refill(&mut self, candidates: &[u16], rank: impl Fn(usize, usize) -> Ranked) {
        let count = self.candidate_count;
        self.changed = 0;
        self.from_ns = 0;
        self.until_ns = u64::MAX;
        for (index, &position) in candidates.iter().enumerate() {
            self.store(index, rank(usize::from(position), count));
        }
    }

    /// Ranks the candidates marked in `changed` again (the cache holds at
    /// the clock reading `rank` ranks at).
    #[inline(always)]
    fn rank_changed(&mut self, candidates: &[u16], rank: impl Fn(usize, usize) -> Ranked) {
        while self.changed != 0 {
            let index = self.changed.trailing_zeros() as usize;
            self.changed &= self.changed - 1;
            let ranked = rank(usize::from(candidates[index]), self.candidate_count);
            self.store(index, ranked);
        }
    }

    /// An I/O started on the path at `position`: its stored rank rises by
    /// its step (right wherever the rank held), or, with no step, is
    /// `rank(candidate_count)` (ranked with the I/O counted, at the clock
    /// reading of the start; its span narrows the cache's).
    #[inline(always)]
    pub(crate) fn started(&mut self, position: usize, rank: impl FnOnce(usize) -> Ranked) {
        let Some(index) = self.candidate_index(position) else {
            return;
        };
        let step = self.steps[index];
        if step == NO_STEP {
            self.store(index, rank(self.candidate_count));
        } else {
            let raised = self.ranks[index].saturating_add(step);
            self.ranks[index] = raised;
            self.ranks[self.candidate_count + index] = raised;
        }
    }

    /// The load of the path at `position` changed in another way (an I/O
    /// ended): the next pick ranks it again, or, for a candidate past the
    /// 64th, `rank(candidate_count)` is its rank from now on (its span
    /// narrows the cache's, as for a start).
    #[inline(always)]
    pub(crate) fn update(&mut self, position: usize, rank: impl FnOnce(usize) -> Ranked) {
        if let Some(index) = self.candidate_index(position) {
            if index < 64 {
                self.changed |= 1 << index;
            } else {
                self.store(index, rank(self.candidate_count));
            }
        }
    }

    /// The candidate index of `position`, if the cache was built and the
    /// path is a candidate. (If the candidates changed since, the next
    /// pick's generation rebuilds the cache anyway.)
    #[inline(always)]
    fn candidate_index(&self, position: usize) -> Option<usize> {
        match self.index_of.get(position) {
            None | Some(&NOT_A_CANDIDATE) => None,
            Some(&index) => Some(usize::from(index)),
        }
    }

    /// Stores candidate `index`'s rank and keeps only the clock readings
    /// it holds for too.
    #[inline(always)]
    fn store(&mut self, index: usize, ranked: Ranked) {
        self.ranks[index] = ranked.rank;
        self.ranks[self.candidate_count + index] = ranked.rank;
        self.steps[index] = ranked.step;
        self.from_ns = self.from_ns.max(ranked.from_ns);
        self.until_ns = self.until_ns.min(ranked.until_ns);
    }
}
