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
//! # The lowest rank
//! With at most 64 candidates the cache also keeps the lowest stored rank
//! and the set of candidates that hold it (a bit mask), and every store
//! keeps the two right: a rank below the lowest becomes the lowest, alone;
//! one equal to it joins the set; one above it leaves the set (so any
//! sequence of stores keeps them right, a refill's included). When the
//! set empties (its last member's rank rose), the lowest is unknown, and
//! the next pick finds it in one pass over the stored ranks. A pick then
//! takes the first member of the set at or after the cursor, else the
//! first member: the candidate a scan from the cursor for the lowest rank
//! with ties to the first met would take. Past 64 candidates every pick
//! makes that scan. The `picks_take_the_first_lowest_rank_from_the_cursor`
//! test below checks the picks against that scan, with ties everywhere.
//!
//! # Cost
//! A pick that hits, while the set of lowest ranks holds a member, is a
//! few operations on the mask (plus a rank per path marked since the last
//! pick); once it empties, a pass over the stored ranks. An I/O start is
//! one addition and the mask's update. Where picks spread I/O over equal
//! ranks (each start raises the picked one above the rest), a pass comes
//! once per round over the tied candidates; where one candidate is lowest
//! alone, once per pick, as a scan from the cursor would be.
//! How often the cache is refilled depends on the selector's spans:
//! historical-service-time's rank of a path whose estimate is fresh holds
//! until the estimate goes stale, so at a steady load refills are rare; a
//! rank that changes with the clock itself holds for one clock reading,
//! and then the ranks are computed once per clock reading (the queue's
//! callers read the clock once per batch of I/O, not once per I/O).

use super::scan::TieCursor;
use super::Pick;
use std::hint::select_unpredictable;

/// Candidates whose lowest rank the cache tracks in a mask: one bit each.
const TRACKED_MAX: usize = 64;

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
    /// The rank of candidate `i`.
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
    /// Bit `i` set: candidate `i`'s stored rank is `least`, the lowest
    /// stored. 0 when the lowest is unknown, and always with more than
    /// [`TRACKED_MAX`] candidates.
    tied: u64,
    /// The lowest stored rank while `tied` is not 0; meaningless else.
    least: u64,
    /// The [`Pick::generation`] the cache was built for, plus 1
    /// (wrapping); 0 before the first pick. (A plain number, so that a
    /// pick checks it with one compare. A generation of `u64::MAX` would
    /// read as none built and rebuild the cache at every pick: right,
    /// only slower; a snapshot counter never gets there.)
    built_for: u64,
    /// How many candidates that generation has.
    candidate_count: usize,
    /// The position and candidate index of the last pick; `usize::MAX`
    /// for the position before the first. The pick that rebuilds the
    /// cache sets it, so it always names a candidate of the generation
    /// the cache holds.
    picked: (usize, usize),
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
            tied: 0,
            least: u64::MAX,
            built_for: 0,
            candidate_count: 0,
            picked: (usize::MAX, 0),
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
        if self.built_for != pick.generation.wrapping_add(1) {
            self.rebuild(pick.candidates, pick.loads.len(), pick.generation);
        }
        if !self.holds_at(pick.now_ns) {
            self.refill(pick.candidates, rank);
        } else if self.changed != 0 {
            self.rank_changed(pick.candidates, rank);
        }
        let count = self.candidate_count;
        let start = self.cursor.start(count);
        let index = if count <= TRACKED_MAX {
            if self.tied == 0 {
                self.find_least();
            }
            // The members at or after the cursor (`start < count <= 64`,
            // so the shift is in range), else all of them: which one it
            // is varies from pick to pick, so no branch.
            let after = self.tied & (u64::MAX << start);
            select_unpredictable(after != 0, after, self.tied).trailing_zeros() as usize
        } else {
            self.least_from(start)
        };
        self.cursor.picked(index);
        let position = pick.candidates[index];
        self.picked = (usize::from(position), index);
        position
    }

    /// Sets the cache up, empty, for `candidates`, of `generation`; the
    /// group has `path_count` paths.
    #[cold]
    #[inline(never)]
    fn rebuild(&mut self, candidates: &[u16], path_count: usize, generation: u64) {
        let count = candidates.len();
        self.ranks.clear();
        self.ranks.resize(count, u64::MAX);
        self.steps.clear();
        self.steps.resize(count, NO_STEP);
        self.index_of.clear();
        self.index_of.resize(path_count, NOT_A_CANDIDATE);
        for (index, &position) in candidates.iter().enumerate() {
            // Candidates are fewer than MAX_PATHS (1,024).
            self.index_of[usize::from(position)] = index as u16;
        }
        self.built_for = generation.wrapping_add(1);
        self.candidate_count = count;
        self.tied = 0;
        self.empty();
    }

    /// Ranks every one of `candidates` (those the cache was built for)
    /// again; each store keeps the lowest rank right, as any store does.
    /// (Out of line, and given the pick's fields rather than the
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
        // The queue starts the path it just picked: its candidate index is
        // at hand, without waiting for the loads of the position and then
        // of `index_of` (the next pick waits for this start's rank).
        let index = if position == self.picked.0 {
            self.picked.1
        } else {
            match self.candidate_index(position) {
                Some(index) => index,
                None => return,
            }
        };
        let step = self.steps[index];
        if step == NO_STEP {
            self.store(index, rank(self.candidate_count));
        } else {
            let raised = self.ranks[index].saturating_add(step);
            self.ranks[index] = raised;
            self.tie(index, raised);
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
        self.steps[index] = ranked.step;
        self.from_ns = self.from_ns.max(ranked.from_ns);
        self.until_ns = self.until_ns.min(ranked.until_ns);
        self.tie(index, ranked.rank);
    }

    /// Keeps `least` and `tied` right after candidate `index`'s stored
    /// rank became `rank` (see "The lowest rank" in the module docs):
    /// below the lowest, it is the lowest alone; equal, it joins the set;
    /// above, it leaves it. An unknown lowest stays unknown (no rank can
    /// tell it without the others), so `tied` is not 0 only with at most
    /// [`TRACKED_MAX`] candidates, and then `index < 64`.
    #[inline(always)]
    fn tie(&mut self, index: usize, rank: u64) {
        // Known or not stays so for many stores in a row (unknown: past
        // 64 candidates, or from a drained set to the next pick): a branch
        // that predicts well, and spares the unknown case the work.
        if self.tied == 0 {
            return;
        }
        let bit = 1u64 << index;
        // How a new rank compares with the lowest varies with the load:
        // selects, no branches.
        let kept = select_unpredictable(rank == self.least, self.tied | bit, self.tied & !bit);
        self.tied = select_unpredictable(rank < self.least, bit, kept);
        self.least = self.least.min(rank);
    }

    /// Finds the lowest stored rank and the candidates that hold it (at
    /// most [`TRACKED_MAX`] candidates), in one pass that keeps both as
    /// [`RankCache::tie`] does. (One pass, of selects: a pass of its own
    /// for the lowest is vectorised into 64-bit compares emulated with
    /// 32-bit ones, which cost more than the selects.)
    #[inline(always)]
    fn find_least(&mut self) {
        let mut least = u64::MAX;
        let mut tied = 0;
        for (index, &rank) in self.ranks[..self.candidate_count].iter().enumerate() {
            let bit = 1u64 << index;
            let kept = select_unpredictable(rank == least, tied | bit, tied);
            tied = select_unpredictable(rank < least, bit, kept);
            least = least.min(rank);
        }
        self.least = least;
        self.tied = tied;
    }

    /// With more than [`TRACKED_MAX`] candidates: the first candidate from
    /// `start` (wrapping) whose stored rank is the lowest, in one pass
    /// from `start` to the end and on from 0. From `u64::MAX` with a
    /// strict compare, so that ranks of `u64::MAX` alone still yield
    /// `start`. Out of line: so many paths are rare.
    #[inline(never)]
    fn least_from(&self, start: usize) -> usize {
        let ranks = &self.ranks[..self.candidate_count];
        let mut best = (u64::MAX, start);
        let mut scan = |from: usize, run: &[u64]| {
            for (offset, &rank) in run.iter().enumerate() {
                // Which rank is lower varies from pick to pick: no branch.
                best = select_unpredictable(rank < best.0, (rank, from + offset), best);
            }
        };
        scan(start, &ranks[start..]);
        scan(0, &ranks[..start]);
        best.1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::PathLoad;
    use proptest::prelude::*;

    /// Ranks drawn from few values, so that ties are common, with
    /// saturation at the top.
    const RANKS: [u64; 5] = [0, 1, 2, u64::MAX - 1, u64::MAX];
    /// Steps: none, small, one that saturates, and no step.
    const STEPS: [u64; 5] = [0, 1, 2, u64::MAX - 1, NO_STEP];

    /// One path's rank as the test's model holds it.
    #[derive(Clone, Copy, Debug)]
    struct Truth {
        rank: u64,
        step: u64,
        /// The last clock reading the rank holds for.
        until_ns: u64,
    }

    /// The candidate the contract names: the lowest rank of `truth` over
    /// `candidates`, ties to the first from candidate index `start`.
    fn first_lowest_from(truth: &[Truth], candidates: &[u16], start: usize) -> u16 {
        let count = candidates.len();
        let offset = (0..count)
            .min_by_key(|&offset| truth[usize::from(candidates[(start + offset) % count])].rank)
            .unwrap();
        candidates[(start + offset) % count]
    }

    /// The model's path as the cache is told it.
    fn ranked(truth: &Truth) -> Ranked {
        Ranked {
            rank: truth.rank,
            step: truth.step,
            from_ns: 0,
            until_ns: truth.until_ns,
        }
    }

    /// Starts an I/O on the path at `position`, in the model and in the
    /// cache: its rank rises by its step or, with none, takes the rank
    /// and step `value` picks.
    fn start_io(cache: &mut RankCache, truth: &mut [Truth], position: usize, value: usize) {
        let path = &mut truth[position];
        if path.step == NO_STEP {
            path.rank = RANKS[value % RANKS.len()];
            path.step = STEPS[value / RANKS.len() % STEPS.len()];
        } else {
            path.rank = path.rank.saturating_add(path.step);
        }
        let now = *path;
        cache.started(position, |_| ranked(&now));
    }

    /// Drives a cache over `path_count` paths through `ops`, with a model
    /// of every path's rank, and checks every pick against
    /// [`first_lowest_from`]. Each op, by `kind`: picks and starts an I/O
    /// on the pick (0..=3); starts one on path `which`, picked or not (4);
    /// gives path `which` rank and step `value` (5..=6, as an ended I/O
    /// does); moves the clock one tick, past ranks whose span ends (7); or
    /// makes the paths whose bit is set in a mix of `which` the candidates
    /// (8).
    fn check_picks(path_count: usize, ops: &[(u8, u16, u8)]) {
        let mut cache = RankCache::default();
        let loads: Vec<PathLoad> = (0..path_count).map(|_| PathLoad::default()).collect();
        let mut truth = vec![
            Truth {
                rank: 0,
                step: 0,
                until_ns: u64::MAX,
            };
            path_count
        ];
        let mut candidates: Vec<u16> = (0..path_count as u16).collect();
        let mut generation = 0;
        let mut now_ns = 0;
        for &(kind, which, value) in ops {
            let value = usize::from(value);
            let which = usize::from(which) % path_count;
            match kind % 9 {
                0..=3 => {
                    let usable: Vec<bool> = (0..path_count as u16)
                        .map(|position| candidates.contains(&position))
                        .collect();
                    let pick = Pick {
                        candidates: &candidates,
                        usable: &usable,
                        loads: &loads,
                        bytes: 0,
                        cpu: 0,
                        node: 0,
                        now_ns,
                        generation,
                    };
                    let start = cache.cursor.start(candidates.len());
                    let expected = first_lowest_from(&truth, &candidates, start);
                    let position = cache.best(&pick, |position, count| {
                        assert_eq!(count, candidates.len());
                        ranked(&truth[position])
                    });
                    assert_eq!(position, expected, "ranks {truth:?}, cursor {start}");
                    start_io(&mut cache, &mut truth, usize::from(position), value);
                }
                4 => start_io(&mut cache, &mut truth, which, value),
                5 | 6 => {
                    truth[which].rank = RANKS[value % RANKS.len()];
                    truth[which].step = STEPS[value / RANKS.len() % STEPS.len()];
                    truth[which].until_ns = now_ns + (value % 3) as u64;
                    let now = truth[which];
                    cache.update(which, |_| ranked(&now));
                }
                7 => {
                    now_ns += 1;
                    for path in &mut truth {
                        path.until_ns = path.until_ns.max(now_ns);
                    }
                }
                _ => {
                    let mix = (which as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    let usable: Vec<u16> = (0..path_count as u16)
                        .filter(|&position| mix >> (position % 64) & 1 != 0)
                        .collect();
                    if !usable.is_empty() {
                        candidates = usable;
                        generation += 1;
                    }
                }
            }
        }
    }

    proptest! {
        /// Picks by the tracked lowest rank are those of a scan from the
        /// cursor, through starts, ends, refills and new candidates, with
        /// ties everywhere; at 65 and 70 paths, past what a mask tracks.
        #[test]
        fn picks_take_the_first_lowest_rank_from_the_cursor(
            path_count in prop_oneof![1..=8usize, Just(64usize), Just(65usize), Just(70usize)],
            ops in prop::collection::vec((any::<u8>(), any::<u16>(), any::<u8>()), 0..400),
        ) {
            check_picks(path_count, &ops);
        }
    }
}
