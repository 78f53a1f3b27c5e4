//! Loom models of the core's lock-free parts: snapshot publication and the
//! I/O fast path racing control operations (path failure, reinstatement).
//!
//! Under `--cfg loom` the core's `sync` shim swaps in loom's `Arc`, `Mutex`
//! and atomics, so these models explore every interleaving (and every
//! value a weakly ordered load may return) of the real `Map` and `Queue`
//! code, up to a preemption bound.
//!
//! Run (the whole file takes a few seconds on 2 cores):
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p mpio-core --test loom --release
//! ```
//!
//! Each model sets a preemption bound of 3 unless `LOOM_MAX_PREEMPTIONS` is
//! set; raise it to search deeper. Without `--cfg loom` this file compiles
//! to nothing.
//!
//! Every model states the bug it exists to catch. Model 5b
//! (`retry_after_path_error_never_returns_to_the_failed_path`) holds
//! `Map::publish` to its order: the paths' failed flags after the
//! snapshot and generation.

#![cfg(loom)]

use loom::model::Builder;
use loom::sync::Arc;
use loom::thread;
use mpio_core::io::{Buffer, Completion, Io, PathError, PathOutcome};
use mpio_core::map::{Map, MapOptions, PathInfo};
use mpio_core::message::Message;
use mpio_core::queue::{PathCompletion, PathIo, PathQueue, Queue};
use mpio_core::table::{Features, GroupSpec, PathSpec, Table};

/// Runs `f` under loom with a default preemption bound of 3.
fn check(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    builder.check(f);
}

/// A map of one `round-robin` group with paths `a` (index 0) and `b`
/// (index 1), each with `repeat_count`.
fn two_path_map(repeat_count: u32) -> Arc<Map> {
    let path = |name: &str| PathSpec {
        name: name.into(),
        args: vec![repeat_count.to_string()],
        word: 0,
    };
    let table = Table {
        start_sector: 0,
        length_sectors: 8,
        features: Features::default(),
        hardware_handler: vec![],
        initial_group: 1,
        groups: vec![GroupSpec {
            selector: "round-robin".into(),
            selector_args: vec![],
            paths: vec![path("a"), path("b")],
            word: 0,
        }],
    };
    let options = MapOptions {
        io_timeout_ns: None,
        ..MapOptions::default()
    };
    Arc::new(Map::new(&table, &[PathInfo::default(); 2], options).expect("the test table builds"))
}

/// A transport queue that completes every I/O at once with `outcome`.
#[derive(Debug)]
struct Immediate {
    outcome: PathOutcome,
    done: Vec<PathCompletion>,
}

impl Immediate {
    fn new(outcome: PathOutcome) -> Self {
        Immediate {
            outcome,
            done: Vec::new(),
        }
    }
}

impl PathQueue for Immediate {
    fn submit(&mut self, io: PathIo, _now_ns: u64) {
        self.done.push(PathCompletion {
            tag: io.tag,
            buf: io.buf,
            outcome: self.outcome,
        });
    }

    fn poll(&mut self, _now_ns: u64, completions: &mut Vec<PathCompletion>) {
        completions.append(&mut self.done);
    }

    fn abort(&mut self, _tag: u64) -> Option<PathIo> {
        // Every I/O is already complete; it comes back through `poll`.
        None
    }
}

/// A queue over `map` whose paths all complete I/O successfully.
fn healthy_queue(map: &Arc<Map>, depth: usize) -> Queue<Immediate> {
    let paths = (0..map.paths().len())
        .map(|_| Immediate::new(PathOutcome::Ok))
        .collect();
    Queue::new(Arc::clone(map), paths, depth, 0)
}

/// A one-sector read tagged `user_data`.
fn read(user_data: u64) -> Io {
    Io::read(user_data, 0, Buffer::zeroed(512))
}

/// Polls `queue` at most `rounds` times and returns what it handed back.
fn drain(queue: &mut Queue<Immediate>, rounds: usize) -> Vec<Completion> {
    let mut completions = Vec::new();
    for _ in 0..rounds {
        queue.poll(0, &mut |completion| completions.push(completion));
        if queue.in_flight() == 0 {
            break;
        }
    }
    completions
}

/// Asserts that `queue` is drained clean: `completions` holds exactly one
/// successful completion for each of `0..count`, nothing is left in
/// flight, and no completion was stray.
fn assert_drained(queue: &Queue<Immediate>, completions: &[Completion], count: u64) {
    assert_eq!(queue.in_flight(), 0);
    assert_eq!(queue.stats().stray_completions, 0);
    let mut tags: Vec<u64> = completions
        .iter()
        .map(|completion| {
            assert_eq!(
                completion.result,
                Ok(()),
                "I/O {} failed although path b was always usable",
                completion.user_data
            );
            completion.user_data
        })
        .collect();
    tags.sort_unstable();
    assert_eq!(
        tags,
        (0..count).collect::<Vec<_>>(),
        "every I/O completes exactly once"
    );
}

/// Submits two reads on a fresh queue and returns how many went to each path.
fn fresh_routing(map: &Arc<Map>) -> [u64; 2] {
    let mut queue = healthy_queue(map, 2);
    for user_data in 0..2 {
        queue
            .submit(read(user_data), 0)
            .expect("depth 2 holds two I/Os");
    }
    let completions = drain(&mut queue, 2);
    assert_drained(&queue, &completions, 2);
    [
        queue.path_loads()[0].dispatched(),
        queue.path_loads()[1].dispatched(),
    ]
}

/// The map's published state agrees with itself: the generation I/O
/// threads poll is the generation of the snapshot they would fetch.
fn assert_settled(map: &Map, generation: u64) {
    assert_eq!(map.generation(), generation, "one publish per state change");
    assert_eq!(
        map.snapshot().generation,
        generation,
        "the published generation and snapshot disagree"
    );
}

/// Model 1a: two queues (one per I/O thread) route I/O while a control
/// thread fails path `a`.
///
/// Catches: a torn or transiently empty snapshot (an I/O failing with
/// `NoPath` or being lost while path `b` is usable); a publish that bumps
/// the generation before the new snapshot is visible, or a `Queue::refresh`
/// that keeps a stale snapshot (an I/O routed to `a` by a thread that had
/// already seen the generation that failed it); a lost or doubled
/// completion when the snapshot is swapped between dispatch and poll.
#[test]
fn snapshot_swap_during_select_fail_path() {
    check(|| {
        let map = two_path_map(1);
        let before = map.generation();
        let failed_generation = before + 1;

        let io_thread = |map: &Arc<Map>| {
            let map = Arc::clone(map);
            move || {
                let mut queue = healthy_queue(&map, 2);
                for user_data in 0..2 {
                    let seen = map.generation();
                    let on_a = queue.path_loads()[0].dispatched();
                    queue
                        .submit(read(user_data), 0)
                        .expect("depth 2 holds two I/Os");
                    let went_to_a = queue.path_loads()[0].dispatched() > on_a;
                    assert!(
                        !(went_to_a && seen >= failed_generation),
                        "I/O {user_data} routed to path a after this thread saw generation \
                         {seen}, which failed it"
                    );
                }
                let completions = drain(&mut queue, 3);
                assert_drained(&queue, &completions, 2);
                assert_eq!(queue.stats().retries, 0, "no attempt failed");
            }
        };
        let io_threads = [
            thread::spawn(io_thread(&map)),
            thread::spawn(io_thread(&map)),
        ];
        assert!(map.fail_path(0, PathError::Transport), "path a was healthy");
        for io_thread in io_threads {
            io_thread.join().unwrap();
        }

        assert_settled(&map, failed_generation);
        assert!(map.paths()[0].is_failed());
        assert_eq!(map.paths()[0].fail_count(), 1);
        assert_eq!(
            fresh_routing(&map),
            [0, 2],
            "a fresh queue must not use failed path a"
        );
    });
}

/// Model 1b: as 1a, but the control thread fails path `a` and reinstates
/// it through messages, so the queue may see two snapshot swaps.
///
/// Catches: an I/O lost, doubled or failed across two swaps (e.g. a
/// snapshot dropped while a dispatch still routes by it); a reinstatement
/// that leaves the published state behind the control state.
#[test]
fn snapshot_swap_during_select_fail_and_reinstate() {
    check(|| {
        let map = two_path_map(1);
        let before = map.generation();

        let io_thread = thread::spawn({
            let map = Arc::clone(&map);
            move || {
                let mut queue = healthy_queue(&map, 2);
                queue.submit(read(0), 0).expect("depth 2 holds two I/Os");
                let mut completions = drain(&mut queue, 1);
                queue.submit(read(1), 0).expect("depth 2 holds two I/Os");
                completions.extend(drain(&mut queue, 3));
                assert_drained(&queue, &completions, 2);
                assert_eq!(queue.stats().retries, 0, "no attempt failed");
            }
        });
        map.message(&Message::FailPath("a".into())).unwrap();
        map.message(&Message::ReinstatePath("a".into())).unwrap();
        io_thread.join().unwrap();

        assert_settled(&map, before + 2);
        assert!(!map.paths()[0].is_failed());
        assert_eq!(map.paths()[0].fail_count(), 1);
        assert_eq!(
            fresh_routing(&map),
            [1, 1],
            "a fresh queue uses reinstated path a again"
        );
    });
}

/// Model 2: two threads fail path `a` at once (an I/O thread because its
/// I/O errored, the control thread by message), and the control thread
/// then reinstates it.
///
/// Catches: a check-then-set in `fail_path` outside the control lock (two
/// winners, `fail_count` 2); health and publishing out of step
/// (`is_failed` not matching the last transition that won, or a snapshot
/// that disagrees with it). (Load counters are per queue, written by one
/// thread each, so there is no shared counter left to race on.)
#[test]
fn fail_path_racing_fail_path_and_reinstate() {
    check(|| {
        let map = two_path_map(1);
        let before = map.generation();

        let io_thread = thread::spawn({
            let map = Arc::clone(&map);
            move || map.fail_path(0, PathError::Transport)
        });
        let path = &map.paths()[0];
        let control_won = map.fail_path(0, PathError::ConnectionLost);
        let reinstated = map.reinstate_path(0);
        let io_won = io_thread.join().unwrap();

        let failures = u32::from(io_won) + u32::from(control_won);
        let reinstatements = u32::from(reinstated);
        assert!(failures >= 1, "someone failed the healthy path");
        assert_eq!(
            path.fail_count(),
            failures,
            "one count per winning fail_path"
        );
        // Transitions alternate healthy -> failed -> healthy -> ...
        assert!(failures == reinstatements || failures == reinstatements + 1);
        assert_eq!(
            path.is_failed(),
            failures > reinstatements,
            "is_failed follows the last transition"
        );
        assert_settled(&map, before + u64::from(failures + reinstatements));
        let route = map
            .snapshot()
            .route
            .as_ref()
            .map(|route| route.candidates.to_vec());
        let expected: &[u16] = if path.is_failed() { &[1] } else { &[0, 1] };
        assert_eq!(
            route.as_deref(),
            Some(expected),
            "the snapshot matches path health"
        );
    });
}

/// Model 3: a reader that sees the generation move fetches a snapshot at
/// least that new, whose route matches the health of its own generation,
/// while a control thread fails path `a` then reinstates it.
///
/// Catches: `Map::publish` storing the generation before swapping in the
/// new snapshot, so that a thread that saw the new number routes by the
/// old snapshot (and, believing it current, never refetches); a generation
/// that goes backwards; a snapshot whose route was computed from another
/// generation's health (torn publish).
#[test]
fn new_generation_implies_new_snapshot() {
    check(|| {
        let map = two_path_map(1);
        let before = map.generation();

        let reader = thread::spawn({
            let map = Arc::clone(&map);
            move || {
                let mut last = before;
                for _ in 0..3 {
                    let seen = map.generation();
                    assert!(seen >= last, "generation went back from {last} to {seen}");
                    last = seen;
                    if seen == before {
                        thread::yield_now();
                        continue;
                    }
                    let snapshot = map.snapshot();
                    assert!(
                        snapshot.generation >= seen,
                        "saw generation {seen} but fetched snapshot {}",
                        snapshot.generation
                    );
                    let route = snapshot.route.as_ref().expect("path b is always usable");
                    let expected: &[u16] = if snapshot.generation == before + 1 {
                        &[1]
                    } else {
                        &[0, 1]
                    };
                    assert_eq!(
                        &*route.candidates, expected,
                        "snapshot {} routes by another generation's health",
                        snapshot.generation
                    );
                }
            }
        });
        assert!(map.fail_path(0, PathError::Timeout));
        assert!(map.reinstate_path(0));
        reader.join().unwrap();
        assert_settled(&map, before + 2);
    });
}

/// Model 4a: two I/O threads fail the same path at once.
///
/// Catches: the lock-free `is_failed` fast path of `fail_path` (or
/// `set_failed`) letting both callers win: `fail_count` 2, two publishes.
#[test]
fn concurrent_fail_path_has_one_winner() {
    check(|| {
        let map = two_path_map(1);
        let before = map.generation();

        let other = thread::spawn({
            let map = Arc::clone(&map);
            move || map.fail_path(0, PathError::Transport)
        });
        let mine = map.fail_path(0, PathError::Timeout);
        let theirs = other.join().unwrap();

        assert!(
            mine ^ theirs,
            "exactly one fail_path wins (mine {mine}, theirs {theirs})"
        );
        assert_eq!(map.paths()[0].fail_count(), 1);
        assert!(map.paths()[0].is_failed());
        assert_settled(&map, before + 1);
    });
}

/// Model 4b: the `fail_path` message races an I/O thread's `fail_path`.
///
/// Catches: the message path and the I/O path each counting the same
/// failure (`fail_count` 2), or the I/O thread claiming a failure the
/// message already made.
#[test]
fn fail_path_message_races_io_failure() {
    check(|| {
        let map = two_path_map(1);
        let before = map.generation();

        let io_thread = thread::spawn({
            let map = Arc::clone(&map);
            move || map.fail_path(0, PathError::Transport)
        });
        map.message(&Message::FailPath("a".into())).unwrap();
        let io_won = io_thread.join().unwrap();

        assert_eq!(map.paths()[0].fail_count(), 1, "one failure, counted once");
        assert!(map.paths()[0].is_failed());
        // The message always publishes; the I/O thread only when it won.
        assert_settled(&map, before + 1 + u64::from(io_won));
        let route = map
            .snapshot()
            .route
            .as_ref()
            .map(|route| route.candidates.to_vec());
        assert_eq!(route.as_deref(), Some(&[1u16][..]));
    });
}

/// Model 5a: two queues each send an I/O to path `a`, which errors on
/// every attempt; both fail over to `b` concurrently.
///
/// Catches: one failure counted or published twice (`fail_count` 2, two
/// generations); an I/O lost, completed twice, or failed (`NoPath`,
/// `RetryLimit`) during concurrent failover; an error not retried, or a
/// completion taken for another I/O's (stray). Passes on the current core
/// even though a retry may return to `a` once (model 5b).
#[test]
fn two_queues_fail_over_the_same_path() {
    check(|| {
        let map = two_path_map(1);
        let before = map.generation();

        let io_thread = |map: &Arc<Map>| {
            let map = Arc::clone(map);
            move || {
                let paths = vec![
                    Immediate::new(PathOutcome::Path(PathError::Transport)),
                    Immediate::new(PathOutcome::Ok),
                ];
                let mut queue = Queue::new(map, paths, 1, 0);
                queue.submit(read(0), 0).expect("depth 1 holds one I/O");
                let completions = drain(&mut queue, 4);
                assert_drained(&queue, &completions, 1);
                let stats = queue.path_loads();
                assert_eq!(
                    stats[0].path_errors(),
                    stats[0].dispatched(),
                    "every attempt on a errors"
                );
                assert_eq!(
                    queue.stats().retries,
                    stats[0].path_errors(),
                    "every path error is retried"
                );
                assert_eq!(stats[1].dispatched(), 1, "the I/O ends on b, once");
            }
        };
        let io_threads = [
            thread::spawn(io_thread(&map)),
            thread::spawn(io_thread(&map)),
        ];
        for io_thread in io_threads {
            io_thread.join().unwrap();
        }

        // The first I/O dispatched found `a` healthy, so `a` failed, once.
        assert!(map.paths()[0].is_failed());
        assert_eq!(map.paths()[0].fail_count(), 1);
        assert_settled(&map, before + 1);
    });
}

/// Model 5b: an I/O errors on path `a` while another thread (a second
/// queue, or the path checker) fails `a` too. After its own `fail_path`
/// returns, the I/O thread must not send the retry back to `a`.
///
/// Catches `Map::fail_path` setting the path's failed flag
/// (`PathShared::set_failed`, Release) *before* it publishes the snapshot
/// and generation that exclude the path. The I/O thread's `fail_path`
/// sees the flag on its lock-free fast path and returns false without
/// waiting; `Queue::retry` then refreshes, still reads the old generation,
/// keeps the old snapshot, and round-robin (repeat_count 2, one I/O of the
/// two left on `a`) re-dispatches the I/O to `a`. `PathShared::is_failed`'s
/// docs promised the opposite order ("a thread that sees the path failed also
/// sees the snapshot generation bump that the control code made before
/// it"). If `a` swallows the retry instead of erroring it, the I/O waits
/// a whole `io_timeout_ns` on a path already known dead.
#[test]
fn retry_after_path_error_never_returns_to_the_failed_path() {
    check(|| {
        let map = two_path_map(2);

        let io_thread = thread::spawn({
            let map = Arc::clone(&map);
            move || {
                let paths = vec![
                    Immediate::new(PathOutcome::Path(PathError::Transport)),
                    Immediate::new(PathOutcome::Ok),
                ];
                let mut queue = Queue::new(Arc::clone(&map), paths, 1, 0);
                queue.submit(read(0), 0).expect("depth 1 holds one I/O");
                let completions = drain(&mut queue, 4);
                assert_drained(&queue, &completions, 1);
                assert!(
                    queue.path_loads()[0].dispatched() <= 1,
                    "the I/O went back to path a after its error there had failed a"
                );
            }
        });
        map.fail_path(0, PathError::ConnectionLost);
        io_thread.join().unwrap();

        assert_eq!(map.paths()[0].fail_count(), 1);
        assert_eq!(map.generation(), map.snapshot().generation);
    });
}

/// Model 6: a reload installs a new map while another thread reads the
/// slot the way a `ReloadingQueue` does (the epoch, then the map).
///
/// Catches: the epoch published before the map it announces (a reader
/// that saw the new epoch fetching the old map, and never looking again),
/// or a path failed before the reload lost by the new map.
#[test]
fn reload_publishes_the_map_before_its_epoch() {
    use mpio_core::MapSlot;
    check(|| {
        let old = two_path_map(1);
        old.fail_path(1, PathError::Transport);
        let slot = Arc::new(MapSlot::new(Arc::clone(&old), Arc::new(())));
        let reader = thread::spawn({
            let slot = Arc::clone(&slot);
            move || {
                let epoch = slot.epoch();
                let (map, _, installed_epoch) = slot.current();
                assert!(
                    installed_epoch >= epoch,
                    "saw epoch {epoch}, fetched the map of epoch {installed_epoch}"
                );
                (epoch, map)
            }
        });
        let new = two_path_map(1);
        slot.install(Arc::clone(&new), Arc::new(()));
        let (epoch, map) = reader.join().unwrap();
        if epoch == 1 {
            assert!(Arc::ptr_eq(&map, &new), "epoch 1 is the new map");
        }
        assert!(new.paths()[1].is_failed(), "the failure carried over");
        assert_eq!(new.paths()[1].fail_count(), 1);
        assert!(!new.paths()[0].is_failed());
    });
}
