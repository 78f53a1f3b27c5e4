//! `historical-service-time [base_weight [threshold_multiplier]]`: send each
//! I/O down the candidate with the smallest predicted service time, learnt
//! from the service times of past I/Os (dm-ps-historical-service-time).
//!
//! # Rule
//! Each path keeps `hst`, a time-weighted exponential moving average of its
//! per-I/O service time. Its predicted cost is `(1 + in_flight) * hst`.
//! Two paths are compared as dm does:
//! - if their `hst` differ by no more than `threshold_multiplier` times
//!   (`hi <= threshold_multiplier * lo`), only `in_flight` counts;
//! - else an idle *stale* path wins (a probe, so its estimate refreshes);
//!   of two idle paths the staler one wins;
//! - else the lower predicted cost wins, but a stale winner only gets equal
//!   usage (fewer in flight).
//!
//! A path is stale once `now_ns > last_finish + candidates * hst`, where
//! `last_finish` is the time of its last completion (dm's
//! `stale_after = last_finish + valid_count * hst`). A stale idle path is
//! picked at once; its probe I/O then counts as in flight, so others stop
//! choosing it as a probe until it completes and is fresh again. Each
//! thread scans from just after its last pick; as in dm, a candidate whose
//! cost equals the best so far replaces it (dm's `cost1 > cost2` test),
//! while other ties keep the one met first.
//!
//! # Departure from dm with the default `threshold_multiplier` 0
//! dm's pairwise rule is not transitive (three paths can beat each other
//! in a circle), so its result depends on the scan order and each
//! comparison waits for the previous one: over 8 paths the scan alone
//! costs more than the 25 ns per I/O the whole map may add
//! (docs/BENCHMARKS.md).
//! With the default threshold (the common case) mpio instead ranks each
//! candidate on its own and takes the lowest rank (ties: first from the
//! thread's cursor), a minimum any order finds with independent work per
//! path (`rank`):
//! 1. idle stale paths first, the one stale longest first (dm exactly:
//!    such a path beats a busy one, and of two idle paths dm takes the
//!    staler);
//! 2. then every other path by `(1 + in_flight) * max(candidates * hst,
//!    now - last_finish)` in ns: dm's predicted cost `(1 + in_flight) *
//!    hst` (scaled by the candidate count, which keeps the order) while
//!    the estimate is fresh, and once it is stale the time the path has
//!    already gone without completing in its place, as a floor.
//!
//! This agrees with dm's `hst_compare` on every pair except two (the
//! `rank_agrees_with_dm_outside_its_two_departures` test checks the whole
//! grid):
//! - two idle, fresh paths: dm takes the one whose estimate goes stale
//!   first, mpio the cheaper (lower `hst`). At low load dm thereby rotates
//!   the idle paths; mpio sends to the fastest and leaves the rotation to
//!   staleness: an idle path is probed once its estimate goes stale
//!   (rule 1), as in dm.
//! - the cheaper of two paths, by predicted cost, is busy and stale: dm
//!   then compares in-flight counts only ("equal usage"), mpio raises the
//!   stale path's cost by the time it has gone without completing. Both
//!   distrust an estimate that is overdue; mpio's way keeps a single
//!   order.
//!
//! Ranks use whole ns of `hst` (dm: 1/1024 ns). Idle stale paths compare
//! their `stale_after` in units of 2 ns (one bit holds the class), the
//! others their cost in whole ns, so that of two costs 1 ns apart the
//! lower wins rather than the two taking turns.
//! With a `threshold_multiplier` above 0
//! (estimates within that factor compare by usage alone, another
//! non-transitive rule) mpio runs dm's pairwise scan exactly
//! (`better_with_threshold`).
//!
//! On completion, the service time counts from the later of the I/O's start
//! and the path's previous completion (overlapping I/Os are treated as
//! served one after the other), and `hst = hst * w + sample * (1 - w)`,
//! where `w = base_weight^(1 + sample / 2^24 ns)` (16.8 ms buckets, 0 from
//! bucket 63 on), so one slow sample moves the average more than one fast.
//!
//! # Arguments
//! Selector: `base_weight` 0..=1023 in 1/1024ths (default 972, ~0.95; 0
//! ignores history) and `threshold_multiplier` (default 0; 0 and 1 have no
//! effect). Both are always printed, as dm does. Per path `[repeat_count]`,
//! accepted and printed but not honoured (dm prints `0` for every path).
//!
//! # Concurrency
//! All of a path's learnt state is the calling queue's [`PathLoad`]:
//! `in_flight`, `service_time_ewma` (`hst` in ns, fixed point with 10
//! fraction bits, as dm; 0 reads as dm's initial 1 ns) and
//! `last_completion_ns`. Each queue learns from its own completions (so
//! each keeps its own estimate of every path, and probes stale paths on
//! its own); nothing is shared between threads.
//!
//! Per thread: a `RankCache` (`rank_cache.rs`), the rank of every
//! candidate and the tie cursor. With the default threshold a pick takes
//! the lowest stored rank; an I/O start adds the path's step to its rank,
//! an I/O end has the next pick rank the path again, and every candidate
//! is ranked again when the candidates change or the clock leaves the span
//! the ranks hold for (a fresh estimate's rank holds until it goes stale;
//! a busy stale path's only at the clock reading it was ranked at).

use super::queue_length::parse_unhonoured_repeat_count;
use super::rank_cache::{RankCache, Ranked, NO_STEP};
use super::scan::best_from_cursor;
use super::{parse_u32_arg, ArgError, PathSelector, Pick, Setup};
use crate::load::PathLoad;

/// Fraction bits of `hst` and of the weights.
const FIXED_SHIFT: u32 = 10;
/// 1.0 in fixed point.
const FIXED_1: u64 = 1 << FIXED_SHIFT;
/// Largest `hst`: `FIXED_MAX * FIXED_1` still fits a u64.
const FIXED_MAX: u64 = u64::MAX >> FIXED_SHIFT;
/// Default `base_weight`: 0.95 in fixed point.
pub(crate) const DEFAULT_BASE_WEIGHT: u32 = 972;
/// A weight bucket spans 2^24 ns (~16.8 ms) of service time.
const BUCKET_SHIFT: u32 = 24;
/// Weight buckets; the last has weight 0.
const WEIGHT_COUNT: usize = 64;

/// `x^n` with `x` fixed point (`FIXED_SHIFT` fraction bits), rounding each
/// product, in O(log n) squarings (the kernel's `fixed_power`).
fn fixed_power(mut x: u64, mut n: u32) -> u64 {
    let half = 1 << (FIXED_SHIFT - 1);
    let mut result = FIXED_1;
    while n != 0 {
        if n & 1 != 0 {
            result = (result * x + half) >> FIXED_SHIFT;
        }
        n >>= 1;
        x = (x * x + half) >> FIXED_SHIFT;
    }
    result
}

/// One step of the moving average: `last * weight + next * (1 - weight)`.
/// Both values are at most `FIXED_MAX` and `weight <= FIXED_1`, so the sum
/// is at most `FIXED_MAX * FIXED_1 + FIXED_1 / 2`, which fits a u64, and
/// the result is at most `max(last, next)`.
fn fixed_ema(last: u64, next: u64, weight: u64) -> u64 {
    (last * weight + next * (FIXED_1 - weight) + (FIXED_1 >> 1)) >> FIXED_SHIFT
}

/// The historical-service-time selector.
#[derive(Debug)]
pub struct HistoricalServiceTime {
    /// `weights[n] = base_weight^(n + 1)` (at most 1023), the last 0.
    weights: [u16; WEIGHT_COUNT],
    threshold_multiplier: u32,
    /// `repeat_count` of each path as given, by position.
    repeat_count: Vec<u32>,
}

/// The `hst` learnt in `load`: dm's initial 1 ns before the first sample.
/// (`completed` only ever stores averages of samples clamped to
/// `FIXED_MAX`, so a learnt value needs no clamping here.)
#[inline(always)]
fn learnt_hst(load: &PathLoad) -> u64 {
    as_learnt(load.service_time_ewma())
}

/// A stored estimate as it is used: 0 (nothing learnt) reads as 1 ns.
#[inline(always)]
fn as_learnt(hst: u64) -> u64 {
    match hst {
        0 => FIXED_1,
        hst => hst,
    }
}

/// One path as [`better`] sees it, with everything a comparison needs
/// worked out once per candidate rather than once per comparison.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Estimate {
    /// `hst`, fixed point, never 0.
    hst: u64,
    in_flight: u32,
    /// When the estimate goes stale, ns.
    stale_after_ns: u64,
    /// Stale at the time of the pick.
    stale: bool,
    /// Nothing in flight.
    idle: bool,
    /// Predicted cost `(1 + in_flight) * hst`, saturated: it saturates
    /// only past 2^64 fixed-point ns, hours of predicted service, where
    /// every such path is equally hopeless. At equal usage, costs compare
    /// as the `hst` do (dm compares those), short of that saturation.
    cost: u64,
}

impl Estimate {
    /// Reads `load` at `now_ns`; the group has `path_count` usable paths.
    #[inline(always)]
    fn of(load: &PathLoad, path_count: usize, now_ns: u64) -> Self {
        let hst = learnt_hst(load);
        let in_flight = load.in_flight();
        // At most MAX_PATHS (2^10) * (FIXED_MAX >> FIXED_SHIFT) (2^44).
        let window_ns = path_count as u64 * (hst >> FIXED_SHIFT);
        let stale_after_ns = load.last_completion_ns().saturating_add(window_ns);
        Estimate {
            hst,
            in_flight,
            stale_after_ns,
            stale: stale_after_ns < now_ns,
            idle: in_flight == 0,
            cost: (1 + u64::from(in_flight)).saturating_mul(hst),
        }
    }
}

/// True when `a` is the better choice than `b` under dm's comparison
/// (`hst_compare`) with the default `threshold_multiplier` 0, where the
/// estimates always differ enough to count: the rule is spelt out in the
/// module docs, and the tests check this against a plain transcription.
///
/// Branch-free on purpose: the inputs change with every I/O, so a
/// branchy version mispredicts on most comparisons, and a scan over 8
/// paths makes 7 of them per I/O.
#[inline(always)]
fn better(a: &Estimate, b: &Estimate) -> bool {
    // dm's `!out2 * stale1 - !out1 * stale2`: an idle stale path beats a
    // busy one; of two idle paths, the one stale longest.
    let idle_rule = (a.idle & a.stale) | (b.idle & b.stale) | (a.idle & b.idle);
    let a_key = if b.idle { a.stale_after_ns } else { 0 };
    let b_key = if a.idle { b.stale_after_ns } else { 0 };
    let staler = a_key < b_key;
    // Otherwise the lower predicted cost ...
    let b_cheaper = a.cost > b.cost;
    // ... but a stale winner's estimate may be too optimistic: equal usage.
    let winner_stale = if b_cheaper { b.stale } else { a.stale };
    let by_cost = if winner_stale {
        a.in_flight < b.in_flight
    } else {
        !b_cheaper
    };
    if idle_rule {
        staler
    } else {
        by_cost
    }
}

/// The rank of a candidate for the default `threshold_multiplier` 0, lower
/// is better, and the clock readings it holds for: see "Departure from
/// dm" in the module docs. The group has `path_count` candidates.
///
/// Class 0 (below 2^63): idle and stale, by `stale_after` (the one stale
/// longest first). Class 1 (2^63 and up): by `(1 + in_flight) *
/// max(window, now - last_finish)` in ns, where `window = path_count *
/// hst` is the same window that decides staleness, so for a fresh path
/// the max is the window and for a stale one the time since its last
/// completion: `max(stale_after, now) - last_finish` is that max without
/// a second multiplication (`stale_after >= last_finish`, so it cannot
/// underflow). Class 0 compares `stale_after` halved (units of 2 ns), to
/// make room for the class bit; class 1 adds its cost to 2^63, saturating
/// (costs past 2^63 ns, hopeless alike, tie).
///
/// Until the load changes, the rank of an idle stale path holds from just
/// after `stale_after` on, and that of a fresh path up to `stale_after`;
/// the rank of a busy stale path grows with the clock, so it holds for
/// `now_ns` only. One more I/O in flight adds the max to a class 1 rank
/// (the step); it turns a class 0 path into a busy one, ranked anew.
#[inline(always)]
fn rank(load: &PathLoad, path_count: usize, now_ns: u64) -> Ranked {
    rank_of(
        learnt_hst(load),
        load.in_flight(),
        load.last_completion_ns(),
        path_count,
        now_ns,
    )
}

/// [`rank`] of a path whose learnt `hst` (fixed point, never 0), in-flight
/// count and last completion are given.
#[inline(always)]
fn rank_of(hst: u64, in_flight: u32, last_ns: u64, path_count: usize, now_ns: u64) -> Ranked {
    let hst_ns = hst >> FIXED_SHIFT;
    // At most MAX_PATHS (2^10) * (FIXED_MAX >> FIXED_SHIFT) (2^44).
    let window_ns = path_count as u64 * hst_ns;
    let stale_after_ns = last_ns.saturating_add(window_ns);
    let fresh = now_ns <= stale_after_ns;
    if in_flight == 0 && !fresh {
        return Ranked {
            rank: stale_after_ns >> 1,
            step: NO_STEP,
            // `stale_after < now`, so this does not overflow.
            from_ns: stale_after_ns + 1,
            until_ns: u64::MAX,
        };
    }
    // A step of u64::MAX (a last completion at 0 and a clock at u64::MAX)
    // reads as NO_STEP: ranked anew, which is always right.
    let step = stale_after_ns.max(now_ns) - last_ns;
    let (from_ns, until_ns) = if fresh {
        (0, stale_after_ns)
    } else {
        (now_ns, now_ns)
    };
    Ranked {
        rank: (1u64 << 63).saturating_add((1 + u64::from(in_flight)).saturating_mul(step)),
        step,
        from_ns,
        until_ns,
    }
}

/// [`better`] with a `threshold_multiplier` above 0: estimates within
/// that factor of each other (`hi <= multiplier * lo`) are compared by
/// usage alone.
#[inline(always)]
fn better_with_threshold(a: &Estimate, b: &Estimate, threshold_multiplier: u32) -> bool {
    let multiplier = u64::from(threshold_multiplier);
    if a.hst.max(b.hst) > a.hst.min(b.hst).saturating_mul(multiplier) {
        better(a, b)
    } else {
        a.in_flight < b.in_flight
    }
}

/// A pick among `candidates` by dm's pairwise scan with a
/// `threshold_multiplier` above 0 (no rank, so no cache). Out of line, and
/// given the pick's fields rather than the pick: the default pick, inlined
/// into the queue, then carries none of this code and need not build the
/// pick in memory.
#[inline(never)]
fn select_with_threshold(
    thread: &mut RankCache,
    candidates: &[u16],
    loads: &[PathLoad],
    now_ns: u64,
    multiplier: u32,
) -> u16 {
    let count = candidates.len();
    best_from_cursor(
        thread.cursor(),
        candidates,
        loads.len(),
        |position| Estimate::of(&loads[position], count, now_ns),
        |a, b| better_with_threshold(a, b, multiplier),
    )
}

impl HistoricalServiceTime {
    /// The weight of a sample of `service_ns`.
    #[inline]
    fn weight(&self, service_ns: u64) -> u64 {
        let bucket = (service_ns >> BUCKET_SHIFT).min(WEIGHT_COUNT as u64 - 1);
        u64::from(self.weights[bucket as usize])
    }
}

impl PathSelector for HistoricalServiceTime {
    const NAME: &'static str = "historical-service-time";
    const TABLE_PATH_ARGS: usize = 1;
    const STATUS_INFO_ARGS: usize = 3;
    type ThreadState = RankCache;
    const OBSERVES_LOAD: bool = true;

    fn new(setup: &Setup<'_>) -> Result<Self, ArgError> {
        let args = setup.args;
        if args.len() > 2 {
            return Err(ArgError::selector(
                2,
                "too many selector arguments: at most 2",
            ));
        }
        let base_weight = match args.first() {
            None => DEFAULT_BASE_WEIGHT,
            Some(word) => parse_u32_arg(word, "base_weight", 0, FIXED_1 as u32 - 1)
                .map_err(|message| ArgError::selector(0, message))?,
        };
        let threshold_multiplier = match args.get(1) {
            None => 0,
            Some(word) => parse_u32_arg(word, "threshold_multiplier", 0, u32::MAX)
                .map_err(|message| ArgError::selector(1, message))?,
        };
        let mut weights = [0; WEIGHT_COUNT];
        for (n, weight) in weights.iter_mut().enumerate().take(WEIGHT_COUNT - 1) {
            *weight = fixed_power(u64::from(base_weight), n as u32 + 1) as u16;
        }
        let repeat_count = setup
            .paths
            .iter()
            .enumerate()
            .map(|(position, path)| parse_unhonoured_repeat_count(position, path.args, 1))
            .collect::<Result<_, _>>()?;
        Ok(HistoricalServiceTime {
            weights,
            threshold_multiplier,
            repeat_count,
        })
    }

    #[inline(always)]
    fn select(&self, thread: &mut RankCache, pick: &Pick<'_>) -> u16 {
        match self.threshold_multiplier {
            0 => {
                let (loads, now_ns) = (pick.loads, pick.now_ns);
                thread.best(pick, move |position, count| {
                    rank(&loads[position], count, now_ns)
                })
            }
            multiplier => select_with_threshold(
                thread,
                pick.candidates,
                pick.loads,
                pick.now_ns,
                multiplier,
            ),
        }
    }

    /// Raises the path's cached rank (with a threshold the cache is never
    /// filled, and this only checks that).
    #[inline]
    fn started(&self, thread: &mut RankCache, position: usize, load: &PathLoad, now_ns: u64) {
        thread.started(position, |count| rank(load, count, now_ns));
    }

    /// Learns from the sample, then has the cache rank the path again (at
    /// the next pick).
    #[inline]
    fn completed(
        &self,
        thread: &mut RankCache,
        position: usize,
        load: &PathLoad,
        start_ns: u64,
        now_ns: u64,
    ) {
        let previous_ns = load.last_completion_ns();
        // Overlapping I/Os are served one after the other. A caller clock
        // that went back (previous completion later than now) counts from
        // the I/O's own start and keeps the later completion time.
        let (busy_from_ns, completion_ns) = if previous_ns <= now_ns {
            (start_ns.max(previous_ns), now_ns)
        } else {
            (start_ns, previous_ns)
        };
        let service_ns = now_ns.saturating_sub(busy_from_ns);
        let sample = service_ns.saturating_mul(FIXED_1).min(FIXED_MAX);
        let hst = fixed_ema(learnt_hst(load), sample, self.weight(service_ns));
        load.learn(hst, completion_ns);
        thread.update(position, |count| {
            rank_of(as_learnt(hst), load.in_flight(), completion_ns, count, now_ns)
        });
    }

    fn table_args(&self) -> Vec<String> {
        // weights[0] is base_weight^1, exactly base_weight: what dm prints.
        vec![
            self.weights[0].to_string(),
            self.threshold_multiplier.to_string(),
        ]
    }

    fn table_path_args(&self, position: usize) -> Vec<String> {
        vec![self.repeat_count[position].to_string()]
    }

    /// dm's `hst in_flight stale_after`: `hst` fixed point (ns * 1024), and
    /// `stale_after` in ns counting every path of the group (status does
    /// not know which are usable; dm counts its valid paths).
    fn status_path_info(&self, _position: usize, load: &PathLoad) -> Vec<String> {
        let estimate = Estimate::of(load, self.repeat_count.len(), 0);
        vec![
            estimate.hst.to_string(),
            estimate.in_flight.to_string(),
            estimate.stale_after_ns.to_string(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Ordering;
    use crate::selector::scan::best_from_cursor;
    use crate::selector::testing::{
        assert_balanced_io, build, end_io, no_args, usable_sets, Harness,
    };
    use proptest::prelude::*;

    /// A path's learnt state: `hst` in whole ns, in flight, last finish.
    fn learnt(hst_ns: u64, in_flight: u32, last_finish_ns: u64) -> PathLoad {
        PathLoad::with(in_flight, 0, hst_ns << FIXED_SHIFT, last_finish_ns)
    }

    /// dm's `hst_compare` transcribed plainly, branch by branch: the oracle
    /// [`better`] must agree with. `Less` when `a` is the better choice.
    fn compare(a: &Estimate, b: &Estimate, threshold_multiplier: u32) -> Ordering {
        // `hi > multiplier * lo`; with the default 0 always true (hst >= 1).
        let multiplier = u64::from(threshold_multiplier);
        let over_threshold =
            multiplier == 0 || a.hst.max(b.hst) > a.hst.min(b.hst).saturating_mul(multiplier);
        if !over_threshold {
            return a.in_flight.cmp(&b.in_flight);
        }
        let (a_idle, b_idle) = (a.in_flight == 0, b.in_flight == 0);
        if (a_idle && a.stale) || (b_idle && b.stale) || (a_idle && b_idle) {
            // dm's `!out2 * stale1 - !out1 * stale2`: an idle stale path beats
            // a busy one; of two idle paths, the one stale longest.
            let a_key = if b_idle { a.stale_after_ns } else { 0 };
            let b_key = if a_idle { b.stale_after_ns } else { 0 };
            return a_key.cmp(&b_key);
        }
        let b_better = if a.in_flight == b.in_flight {
            a.hst > b.hst
        } else {
            a.cost > b.cost
        };
        // A stale winner's estimate may be too optimistic: equal usage only.
        let winner_stale = if b_better { b.stale } else { a.stale };
        if winner_stale {
            a.in_flight.cmp(&b.in_flight)
        } else if b_better {
            Ordering::Greater
        } else {
            Ordering::Less
        }
    }

    /// Path states `(hst in ns, in flight, last finish)` over a grid small
    /// enough to compare every pair and dense enough for ties, equal
    /// deadlines, idle, stale and threshold edges; judged with each of
    /// [`GRID_PATH_COUNTS`] candidates at each of [`GRID_NOWS_NS`].
    fn grid_states() -> Vec<(u64, u32, u64)> {
        let mut states = Vec::new();
        for hst_ns in [0, 1, 2, 100] {
            for in_flight in [0, 1, 2] {
                for last in [0, 10, 1_000] {
                    states.push((hst_ns, in_flight, last));
                }
            }
        }
        states
    }

    /// Candidate counts of the grid tests.
    const GRID_PATH_COUNTS: [usize; 2] = [1, 3];

    /// Clock readings of the grid tests.
    const GRID_NOWS_NS: [u64; 4] = [0, 11, 1_002, 9_000];

    /// Every pair of paths of the grid ([`grid_states`]).
    #[test]
    fn branch_free_rule_agrees_with_dm_transcription() {
        let states = grid_states();
        for path_count in GRID_PATH_COUNTS {
            for now_ns in GRID_NOWS_NS {
                let estimates: Vec<Estimate> = states
                    .iter()
                    .map(|&(hst_ns, in_flight, last)| {
                        Estimate::of(&learnt(hst_ns, in_flight, last), path_count, now_ns)
                    })
                    .collect();
                for threshold in [0, 1, 2, 3, u32::MAX] {
                    for a in &estimates {
                        for b in &estimates {
                            let better = match threshold {
                                0 => better(a, b),
                                _ => better_with_threshold(a, b, threshold),
                            };
                            assert_eq!(
                                better,
                                compare(a, b, threshold) == Ordering::Less,
                                "{a:?} vs {b:?}, threshold {threshold}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// The default rule ([`rank`]) against dm's `hst_compare` on every pair
    /// of the same grid: they agree except in exactly the two situations
    /// the module docs name, where mpio's choice is the one stated there.
    #[test]
    fn rank_agrees_with_dm_outside_its_two_departures() {
        let states = grid_states();
        let (mut agreed, mut departed) = (0, 0);
        for path_count in GRID_PATH_COUNTS {
            for now_ns in GRID_NOWS_NS {
                let paths: Vec<(PathLoad, Estimate)> = states
                    .iter()
                    .map(|&(hst_ns, in_flight, last)| {
                        let load = learnt(hst_ns, in_flight, last);
                        let estimate = Estimate::of(&load, path_count, now_ns);
                        (load, estimate)
                    })
                    .collect();
                for (a_load, a) in &paths {
                    for (b_load, b) in &paths {
                        let (a_rank, b_rank) = (
                            rank(a_load, path_count, now_ns).rank,
                            rank(b_load, path_count, now_ns).rank,
                        );
                        let dm = compare(a, b, 0);
                        let idle_rule = (a.idle && a.stale) || (b.idle && b.stale) || (a.idle && b.idle);
                        let both_idle_fresh = a.idle && b.idle && !a.stale && !b.stale;
                        let dm_cost_winner_stale = if a.cost == b.cost {
                            a.stale || b.stale
                        } else if a.cost < b.cost {
                            a.stale
                        } else {
                            b.stale
                        };
                        let context = format!("{a:?} vs {b:?}, {path_count} paths, now {now_ns}");
                        if both_idle_fresh {
                            // Departure 1: the cheaper, not the staler.
                            assert_eq!(a_rank < b_rank, a.hst < b.hst, "{context}");
                            departed += 1;
                        } else if !idle_rule && dm_cost_winner_stale {
                            // Departure 2: a stale busy path's cost floors at
                            // the time it went without completing.
                            let floor = |e: &Estimate| e.stale_after_ns.max(now_ns) - (e.stale_after_ns - path_count as u64 * (e.hst >> FIXED_SHIFT));
                            let cost = |e: &Estimate| (1 + u64::from(e.in_flight)).saturating_mul(floor(e));
                            assert_eq!(a_rank < b_rank, cost(a) < cost(b), "{context}");
                            departed += 1;
                        } else {
                            // Elsewhere one order: strictly better for one is
                            // strictly better for the other, ties aside.
                            if a_rank < b_rank {
                                assert_eq!(dm, Ordering::Less, "{context}");
                            }
                            if dm == Ordering::Less {
                                assert!(a_rank <= b_rank, "{context}");
                            }
                            agreed += 1;
                        }
                    }
                }
            }
        }
        // The grid reaches all three regions (it holds many idle pairs, so
        // departures are far more common here than under load).
        assert_eq!((agreed, departed), (7_238, 3_130));
    }

    #[test]
    fn parses_defaults_ranges_and_errors() {
        let selector: HistoricalServiceTime = build(&[], &[&[], &["0"], &["5"]]).unwrap();
        assert_eq!(selector.table_args(), ["972", "0"]);
        let printed: Vec<Vec<String>> = (0..3).map(|p| selector.table_path_args(p)).collect();
        assert_eq!(printed, [["1"], ["0"], ["5"]]);
        let selector: HistoricalServiceTime = build(&["0"], &[&[]]).unwrap();
        assert_eq!(selector.table_args(), ["0", "0"]);
        let selector: HistoricalServiceTime = build(&["1023", "4294967295"], &[&[]]).unwrap();
        assert_eq!(selector.table_args(), ["1023", "4294967295"]);
        let error = |args: &[&str], path_args: &[&str]| {
            let error = build::<HistoricalServiceTime>(args, &[path_args]).unwrap_err();
            (error.path, error.index)
        };
        assert_eq!(error(&["1024"], &[]), (None, 0));
        assert_eq!(error(&["1", "x"], &[]), (None, 1));
        assert_eq!(error(&["1", "2", "3"], &[]), (None, 2));
        assert_eq!(error(&[], &["1", "2"]), (Some(0), 1));
        assert_eq!(error(&[], &["x"]), (Some(0), 0));
    }

    #[test]
    fn weights_are_powers_of_the_base() {
        assert_eq!(fixed_power(972, 0), FIXED_1);
        assert_eq!(fixed_power(512, 1), 512);
        assert_eq!(fixed_power(512, 2), 256);
        let selector: HistoricalServiceTime = build(&[], &[&[]]).unwrap();
        assert_eq!(&selector.weights[..5], [972, 923, 876, 832, 790]);
        assert_eq!(selector.weights[WEIGHT_COUNT - 1], 0);
        assert_eq!(selector.weight(0), 972);
        assert_eq!(selector.weight((1 << BUCKET_SHIFT) + 1), 923);
        assert_eq!(selector.weight(u64::MAX), 0);
    }

    #[test]
    fn end_io_averages_serialised_service_times() {
        let selector: HistoricalServiceTime = build(&[], &[&[]]).unwrap();
        let path = PathLoad::default();
        let mut thread = RankCache::default();
        let mut complete = |bytes, start_ns, now_ns| {
            end_io(&selector, &mut thread, 0, &path, bytes, start_ns, now_ns);
        };
        let hst = || path.service_time_ewma();
        path.start_io(512);
        path.start_io(512);
        // From the initial 1 ns: (1024 * 972 + 1000 * 1024 * 52 + 512) >> 10.
        complete(512, 1_000, 2_000);
        assert_eq!((hst(), path.last_completion_ns()), (52_972, 2_000));
        // Started at 1500, but the path was busy until 2000: 500 ns.
        complete(512, 1_500, 2_500);
        assert_eq!(hst(), 76_282);
        // The caller's clock went back behind the last completion: count
        // from our own start, keep the later completion time.
        path.learn(76_282, 10_000);
        path.start_io(1);
        complete(1, 2_500, 3_500);
        assert_eq!(hst(), fixed_ema(76_282, 1_000 * FIXED_1, 972));
        assert_eq!(path.last_completion_ns(), 10_000);
        // A sample in the last bucket replaces the history.
        path.start_io(1);
        let long_ns = 63 << BUCKET_SHIFT;
        complete(1, 10_000, 10_000 + long_ns);
        assert_eq!(hst(), long_ns * FIXED_1);
        assert_eq!((path.in_flight(), path.in_flight_bytes()), (0, 0));
        // The clock going backwards is a 0 ns sample, not a wrap.
        path.start_io(1);
        complete(1, u64::MAX, 5);
        assert!(hst() < long_ns * FIXED_1);
    }

    #[test]
    fn selects_by_formula() {
        let now = 1_000_000;
        // (threshold_multiplier, [(hst ns, in_flight, last finish) x 2], pick)
        type Case = (&'static str, [(u64, u32, u64); 2], u16);
        let cases: [Case; 13] = [
            // Fresh paths: (1 + 3) * 100 > (1 + 1) * 150.
            ("0", [(100, 3, now), (150, 1, now)], 1),
            // (1 + 2) * 100 < (1 + 1) * 190.
            ("0", [(100, 2, now), (190, 1, now)], 0),
            // Within 2x: in flight alone decides.
            ("2", [(100, 2, now), (190, 1, now)], 1),
            // Beyond 2x: the estimate decides again.
            ("2", [(100, 2, now), (250, 1, now)], 0),
            // Equal in flight: lower hst.
            ("0", [(300, 1, now), (200, 1, now)], 1),
            // Slow path idle and stale: probed, though busy path 0 is cheaper.
            ("0", [(100, 2, now), (10_000, 0, 0)], 1),
            // Slow path idle but fresh: not probed.
            ("0", [(100, 2, now), (10_000, 0, now - 1)], 0),
            // Both idle: the one stale longest.
            ("0", [(100, 0, now - 5_000), (10_000, 0, now - 30_000)], 1),
            // Cheaper path 0 is stale: equal usage only, so fewer in flight.
            ("0", [(100, 5, 0), (1_000, 1, now)], 1),
            // mpio's departures (module docs). Both idle and fresh: dm takes
            // path 1 (stale at now + 100, path 0 at now + 200), mpio the
            // cheaper path 0.
            ("0", [(100, 0, now), (300, 0, now - 500)], 0),
            // ... with a threshold, dm's rule exactly: path 1.
            ("1", [(100, 0, now), (300, 0, now - 500)], 1),
            // Path 0 is cheaper (2 * 100 < 3 * 150) but stale and busy: dm
            // takes it for fewer in flight, mpio floors its cost at the
            // 1,000 ns it went without completing: 2 * 1000 > 3 * 300.
            ("0", [(100, 1, now - 1_000), (150, 2, now)], 1),
            ("1", [(100, 1, now - 1_000), (150, 2, now)], 0),
        ];
        for (index, (threshold, paths, expected)) in cases.into_iter().enumerate() {
            let selector: HistoricalServiceTime = build(&["972", threshold], &[&[], &[]]).unwrap();
            let mut harness = Harness::new(2);
            harness.now_ns = now;
            for (load, (hst_ns, in_flight, last)) in harness.loads.iter_mut().zip(paths) {
                *load = learnt(hst_ns, in_flight, last);
            }
            for _ in 0..2 {
                assert_eq!(harness.pick(&selector), expected, "case {index}");
            }
        }
    }

    #[test]
    fn status_reports_hst_in_flight_and_stale_after() {
        let selector: HistoricalServiceTime = build(&[], &[&[], &[], &[]]).unwrap();
        // Unmeasured: dm's initial 1 ns, stale 3 paths * 1 ns after time 0.
        assert_eq!(
            selector.status_path_info(0, &PathLoad::default()),
            ["1024", "0", "3"]
        );
        assert_eq!(
            selector.status_path_info(0, &learnt(100, 2, 5_000)),
            ["102400", "2", "5300"]
        );
    }

    /// The pick a full scan makes: every candidate ranked at the harness's
    /// clock, the lowest taken from a copy of the thread's cursor.
    fn full_scan_pick(harness: &mut Harness<HistoricalServiceTime>) -> u16 {
        let count = harness.candidates.len();
        let mut cursor = harness.thread.cursor().clone();
        best_from_cursor(
            &mut cursor,
            &harness.candidates,
            harness.loads.len(),
            |position| rank(&harness.loads[position], count, harness.now_ns).rank,
            |a, b| a < b,
        )
    }

    /// Drives `path_count` paths, each starting from a learnt state of
    /// `start` (`hst` in ns and how long ago it last completed, cycled
    /// over the paths), with the clock starting at `clock_ns`, through
    /// `ops`, and checks every cached pick against [`full_scan_pick`].
    /// Each op first moves the clock by `step - 1,500` ns (backwards too; a
    /// `step` of 0 jumps 10 ms ahead, past every estimate's window), then,
    /// by `kind`: picks and starts an I/O (0..=4), ends in-flight I/O
    /// number `which` (5..=8), or makes a new usable set (9): every path
    /// for a `which` divisible by 4, else the paths whose bit is set in a
    /// mix of `which`.
    fn check_cached_picks(
        path_count: usize,
        start: &[(u64, u64)],
        clock_ns: u64,
        ops: &[(u8, u16, u16)],
    ) {
        let selector: HistoricalServiceTime = build(&[], &no_args(path_count)).unwrap();
        let mut harness = Harness::new(path_count);
        harness.now_ns = clock_ns;
        for (load, &(hst_ns, age_ns)) in harness.loads.iter_mut().zip(start.iter().cycle()) {
            *load = learnt(hst_ns, 0, clock_ns.saturating_sub(age_ns));
        }
        let mut in_flight: Vec<(u16, u64)> = Vec::new();
        for &(kind, which, step) in ops {
            harness.now_ns = match step {
                0 => harness.now_ns.saturating_add(10_000_000),
                step => harness
                    .now_ns
                    .saturating_add(u64::from(step))
                    .saturating_sub(1_500),
            };
            match kind % 10 {
                0..=4 => {
                    let expected = full_scan_pick(&mut harness);
                    let position = harness.pick(&selector);
                    assert_eq!(position, expected, "at {} ns", harness.now_ns);
                    harness.start_io(&selector, position);
                    in_flight.push((position, harness.now_ns));
                }
                5..=8 if !in_flight.is_empty() => {
                    let (position, start_ns) =
                        in_flight.swap_remove(usize::from(which) % in_flight.len());
                    harness.end_io(&selector, position, 4096, start_ns);
                }
                _ => {
                    let mix = u64::from(which).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    let usable: Vec<u16> = (0..path_count as u16)
                        .filter(|&p| which % 4 == 0 || mix >> (p % 64) & 1 != 0)
                        .collect();
                    if !usable.is_empty() {
                        harness.set_usable(&usable);
                    }
                }
            }
        }
    }

    proptest! {
        /// The rank cache never changes a pick (see `rank_cache.rs`): from
        /// fresh paths or learnt ones, at a clock near 0 or near its end.
        #[test]
        fn cached_picks_are_full_scan_picks(
            path_count in 1..=8usize,
            start in prop::collection::vec((0..3_000u64, 0..20_000u64), 1..4),
            clock_ns in prop_oneof![Just(1_000_000u64), Just(u64::MAX - 50_000), any::<u64>()],
            ops in prop::collection::vec((any::<u8>(), any::<u16>(), 0..4_000u16), 0..300),
        ) {
            check_cached_picks(path_count, &start, clock_ns, &ops);
        }

        /// The same with candidates past the 64th, which are ranked again
        /// at each completion instead of at the next pick.
        #[test]
        fn cached_picks_are_full_scan_picks_over_70_paths(
            start in prop::collection::vec((0..3_000u64, 0..20_000u64), 1..4),
            ops in prop::collection::vec((any::<u8>(), any::<u16>(), 0..4_000u16), 0..300),
        ) {
            check_cached_picks(70, &start, 1_000_000, &ops);
        }

        /// A rank holds, unchanged, over the whole span it claims.
        #[test]
        fn a_rank_holds_over_its_span(
            hst in 0..=FIXED_MAX,
            in_flight in 0..4u32,
            last_ns in 0..1u64 << 40,
            path_count in 1..=16usize,
            now_ns in 0..1u64 << 41,
            pick in any::<u64>(),
        ) {
            let load = PathLoad::with(in_flight, 0, hst, last_ns);
            let ranked = rank(&load, path_count, now_ns);
            prop_assert!(ranked.from_ns <= now_ns && now_ns <= ranked.until_ns);
            let span = ranked.until_ns - ranked.from_ns;
            for at in [ranked.from_ns, ranked.until_ns, ranked.from_ns + pick % span.saturating_add(1)] {
                prop_assert_eq!(rank(&load, path_count, at).rank, ranked.rank, "at {}", at);
            }
            // One more I/O in flight: the step, over the whole span, and
            // the same step after it (or a rank with none).
            let busier = PathLoad::with(in_flight + 1, 0, hst, last_ns);
            if ranked.step != NO_STEP {
                for at in [ranked.from_ns, ranked.until_ns, ranked.from_ns + pick % span.saturating_add(1)] {
                    let raised = rank(&busier, path_count, at);
                    prop_assert_eq!(raised.rank, ranked.rank.saturating_add(ranked.step), "at {}", at);
                    prop_assert_eq!(raised.step, ranked.step, "at {}", at);
                }
            }
        }

        #[test]
        fn never_picks_a_non_candidate(
            sets in usable_sets(6),
            state in prop::collection::vec((0..=FIXED_MAX, any::<u32>(), any::<u64>()), 6),
            now_ns in any::<u64>(),
            threshold in any::<u32>(),
        ) {
            let threshold = threshold.to_string();
            let selector: HistoricalServiceTime = build(&["0", &threshold], &no_args(6)).unwrap();
            let mut harness = Harness::new(6);
            harness.now_ns = now_ns;
            for (load, (hst, in_flight, last)) in harness.loads.iter_mut().zip(state) {
                *load = PathLoad::with(in_flight, 0, hst, last);
            }
            for set in sets {
                harness.set_usable(&set);
                harness.pick(&selector);
            }
        }

        #[test]
        fn balanced_io_returns_counters_to_zero(ops in prop::collection::vec(any::<(bool, u16, u32)>(), 0..200)) {
            let selector: HistoricalServiceTime = build(&[], &no_args(4)).unwrap();
            assert_balanced_io(&selector, 4, &ops);
        }
    }
}
