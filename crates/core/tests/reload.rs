//! Reload edge cases over a path that holds its I/O: a completion a queue
//! finished inside `submit` survives the reload that replaces the queue;
//! a path error racing the install reaches the new map; the new map takes
//! over the paths' access states.
#![cfg(not(loom))]

use mpio_core::io::{Buffer, Completion, Io, PathError};
use mpio_core::map::{Map, MapOptions, PathInfo};
use mpio_core::queue::{PathCompletion, PathIo, PathQueue};
use mpio_core::table::{Features, GroupSpec, PathSpec, Table};
use mpio_core::{MapSlot, ReloadingQueue};
use mpio_test_support::FakePath;
use std::sync::Arc;

fn map(queue_if_no_path: bool, sectors: u64) -> Arc<Map> {
    let path = |name: &str| PathSpec {
        name: name.into(),
        args: vec![],
        word: 0,
    };
    let table = Table {
        start_sector: 0,
        length_sectors: sectors,
        features: Features {
            queue_if_no_path,
            ..Features::default()
        },
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
    Arc::new(Map::new(&table, &[PathInfo::default(); 2], options).unwrap())
}

fn read(user_data: u64, offset: u64) -> Io {
    Io::read(user_data, offset, Buffer::zeroed(512))
}

type Opener = fn(&Arc<Map>, &()) -> Vec<FakePath>;
/// Paths that hold every I/O.
fn open(map: &Arc<Map>, _: &()) -> Vec<FakePath> {
    (0..map.paths().len()).map(|_| FakePath::hung()).collect()
}

fn poll(queue: &mut ReloadingQueue<FakePath, (), Opener>) -> Vec<Completion> {
    let mut done = Vec::new();
    queue.poll(0, &mut |c| done.push(c));
    done
}

/// An I/O that finished inside `submit` (here: no path and no
/// queue_if_no_path) waits in the queue's ready list for the next poll. A
/// reload before that poll must not drop the queue with the completion in
/// it (`in_flight()` is 0 then: only an idle queue is dropped).
#[test]
fn completion_finished_at_submit_survives_a_reload() {
    let old = map(false, 8);
    old.fail_path(0, PathError::Transport);
    old.fail_path(1, PathError::Transport);
    let slot = Arc::new(MapSlot::new(Arc::clone(&old), Arc::new(())));
    let mut queue = ReloadingQueue::new(Arc::clone(&slot), open as Opener, 4, 0);
    queue.submit(read(7, 0), 0).unwrap();
    assert_eq!(queue.in_flight(), 0, "finished at submit, not yet handed");
    slot.install(map(false, 8), Arc::new(()));
    let done = poll(&mut queue);
    assert_eq!(done.len(), 1, "the NoPath completion of I/O 7 was lost");
}

/// Same with an invalid request (range beyond the end).
#[test]
fn invalid_io_completion_survives_a_reload() {
    let slot = Arc::new(MapSlot::new(map(true, 8), Arc::new(())));
    let mut queue = ReloadingQueue::new(Arc::clone(&slot), open as Opener, 4, 0);
    queue.submit(read(9, 1 << 20), 0).unwrap();
    slot.install(map(true, 8), Arc::new(()));
    // The next submit follows the reload too.
    queue.submit(read(10, 0), 0).unwrap();
    let done = poll(&mut queue);
    assert!(
        done.iter().any(|c| c.user_data == 9),
        "I/O 9's completion was lost"
    );
}

/// A path whose every attempt ends in a path error at the next poll, and
/// which runs `hook` inside that poll (to install a reload concurrently
/// with the I/O thread's poll, deterministically).
struct Failing {
    held: Vec<PathIo>,
    fails: bool,
    hook: Option<Box<dyn FnOnce()>>,
}

impl std::fmt::Debug for Failing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Failing")
    }
}

impl PathQueue for Failing {
    fn submit(&mut self, io: PathIo, _now_ns: u64) {
        self.held.push(io);
    }
    fn poll(&mut self, _now_ns: u64, completions: &mut Vec<PathCompletion>) {
        if self.held.is_empty() || !self.fails {
            return;
        }
        if let Some(hook) = self.hook.take() {
            hook();
        }
        for io in self.held.drain(..) {
            completions.push(PathCompletion {
                tag: io.tag,
                buf: io.buf,
                outcome: mpio_core::io::PathOutcome::Path(PathError::ConnectionLost),
            });
        }
    }
    fn abort(&mut self, _tag: u64) -> Option<PathIo> {
        None
    }
}

/// A path error the old map sees while a reload is installed (the I/O
/// thread is inside its poll, past the epoch check) fails the path in the
/// old map after `carry_over_from` copied its state and before the old
/// queue notes path errors (`hand_over_waiting`): the new map must still
/// learn that the path failed.
#[test]
fn path_error_racing_an_install_reaches_the_new_map() {
    let old = map(true, 8);
    let slot = Arc::new(MapSlot::new(Arc::clone(&old), Arc::new(())));
    let new = map(true, 8);
    let hook: Box<dyn FnOnce()> = Box::new({
        let slot = Arc::clone(&slot);
        let new = Arc::clone(&new);
        move || {
            slot.install(new, Arc::new(()));
        }
    });
    let hook = std::cell::Cell::new(Some(hook));
    let opened = std::cell::Cell::new(0);
    // The old map's paths fail; the new map's (same words) hold their I/O.
    let opener = move |map: &Arc<Map>, _: &()| -> Vec<Failing> {
        opened.set(opened.get() + 1);
        let fails = opened.get() == 1;
        (0..map.paths().len())
            .map(|_| Failing {
                held: Vec::new(),
                fails,
                hook: if fails { hook.take() } else { None },
            })
            .collect()
    };
    let mut queue = ReloadingQueue::new(Arc::clone(&slot), opener, 4, 0);
    // round-robin from the start sends the first I/O to path a (index 0).
    queue.submit(read(1, 0), 0).unwrap();
    for _ in 0..4 {
        queue.poll(0, &mut |_| {});
    }
    assert!(old.paths()[0].is_failed(), "the old map failed path a");
    assert!(
        new.paths()[0].is_failed(),
        "the new map serves path a as healthy: the failure seen during the install was lost"
    );
}

/// A path an ALUA/ANA update made standby on the old map stays standby in
/// the new one, rather than coming back as the table's initial access and
/// taking I/O on a standby port.
#[test]
fn access_state_carries_over_a_reload() {
    use mpio_core::path::AccessState;
    let old = map(true, 8);
    old.set_access_state(0, AccessState::Standby);
    let slot = Arc::new(MapSlot::new(Arc::clone(&old), Arc::new(())));
    let new = map(true, 8);
    slot.install(Arc::clone(&new), Arc::new(()));
    let snapshot = new.snapshot();
    let route = snapshot.route.as_ref().expect("path b is usable");
    assert_eq!(
        &route.candidates[..],
        &[1],
        "standby path a is a candidate in the new map"
    );
}

/// A checker whose probe ended just as a reload landed reinstates the path
/// on the map it probed for; the map that replaced it gets the
/// reinstatement too, as it gets failures, so the path does not stay
/// failed until the checker's next round.
#[test]
fn a_reinstatement_on_a_replaced_map_reaches_the_new_map() {
    use mpio_core::io::PathError;
    let old = map(true, 8);
    assert!(old.fail_path(0, PathError::Transport));
    let slot = Arc::new(MapSlot::new(Arc::clone(&old), Arc::new(())));
    let new = map(true, 8);
    slot.install(Arc::clone(&new), Arc::new(()));
    assert!(new.paths()[0].is_failed(), "the failure carried over");
    assert!(old.reinstate_path(0), "reinstated on the replaced map");
    assert!(!new.paths()[0].is_failed(), "and passed on to the new map");
    // Failed only in the new map: the replaced map passes it on and says so.
    assert!(new.fail_path(1, PathError::Timeout));
    assert!(old.reinstate_path(1));
    assert!(!new.paths()[1].is_failed());
    assert!(!old.reinstate_path(1), "nothing left to reinstate anywhere");
}

/// A map held across many reloads holds every map that replaced it (each
/// passes failures on to the next); dropping it drops the whole chain
/// without recursing once per reload (some 20,000 of them once overflowed the
/// stack).
#[test]
fn a_long_chain_of_reloaded_maps_drops_without_recursing() {
    let first = map(false, 8);
    let mut last = Arc::clone(&first);
    for _ in 0..20_000 {
        let next = map(false, 8);
        Map::carry_over_from(&next, &last);
        last = next;
    }
    drop(last);
    // On a thread with a small stack: a recursive drop needs one frame
    // per map.
    std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || drop(first))
        .unwrap()
        .join()
        .expect("the chain dropped");
}
