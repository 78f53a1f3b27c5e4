//! The log events of a map's state changes (`events.rs`): one per change,
//! with its reason as fields; and the per-path transition counts the
//! checker reads for marginal paths.
#![cfg(not(loom))]

mod support {
    pub mod capture;
}

use mpio_core::io::{Buffer, Io, PathError};
use mpio_core::map::{Map, MapOptions, PathInfo, PathTransitions};
use mpio_core::message::Message;
use mpio_core::queue::Queue;
use mpio_core::table::Table;
use mpio_core::MapSlot;
use mpio_test_support::FakePath;
use std::sync::Arc;
use support::capture::{Capture, Captured};
use tracing::Level;

/// Two groups: `a` `b` in group 1, `c` in group 2.
fn map(queue_if_no_path: bool, no_path_timeout_ns: Option<u64>) -> Arc<Map> {
    let features = if queue_if_no_path {
        "1 queue_if_no_path"
    } else {
        "0"
    };
    let text =
        format!("0 2048 multipath {features} 0 2 1 round-robin 0 2 0 a b round-robin 0 1 0 c");
    let options = MapOptions {
        name: "mpathe".into(),
        no_path_timeout_ns,
        ..MapOptions::default()
    };
    Arc::new(
        Map::new(
            &Table::parse(&text).unwrap(),
            &[PathInfo::default(); 3],
            options,
        )
        .unwrap(),
    )
}

fn summary(events: &[Captured]) -> Vec<String> {
    events
        .iter()
        .map(|event| {
            let fields: Vec<String> = event
                .fields
                .iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect();
            format!("{} {}: {}", event.level, event.message, fields.join(" "))
        })
        .collect()
}

#[test]
fn path_failures_reinstatements_and_group_switches_are_logged_with_their_reason() {
    let map = map(true, None);
    let capture = Capture::default();
    capture.during(|| {
        map.fail_path(0, PathError::Timeout);
        map.fail_path(0, PathError::Timeout); // already failed: nothing
        map.message(&Message::FailPath("b".into())).unwrap();
        map.reinstate_path(0);
        map.message(&Message::ReinstatePath("b".into())).unwrap();
        map.message(&Message::SwitchGroup(2)).unwrap(); // on 2 already
        map.fail_back(1).unwrap();
        map.message(&Message::SwitchGroup(2)).unwrap();
    });
    assert_eq!(
        summary(&capture.take()),
        [
            "WARN path failed: cause=path error error=I/O timed out group=1 map=mpathe path=a",
            "WARN path failed: cause=message group=1 map=mpathe path=b",
            "INFO group switched: cause=current group lost its usable paths from=1 map=mpathe to=2",
            "INFO path reinstated: cause=checker group=1 map=mpathe path=a",
            "INFO path reinstated: cause=message group=1 map=mpathe path=b",
            "INFO group switched: cause=failback from=2 map=mpathe to=1",
            "INFO group switched: cause=switch_group from=1 map=mpathe to=2",
        ]
    );
}

/// An access state change is logged with the old and the new state, once
/// per change; the map leaves a group whose paths all went non-optimized
/// for one with an optimized path, and comes back when they return.
#[test]
fn access_state_changes_are_logged_with_both_states() {
    use mpio_core::path::AccessState;
    let map = map(true, None);
    let capture = Capture::default();
    capture.during(|| {
        map.set_access_state(0, AccessState::NonOptimized);
        map.set_access_state(1, AccessState::Inaccessible);
        map.set_access_state(1, AccessState::Inaccessible); // no change
        map.set_access_state(0, AccessState::Optimized);
    });
    assert_eq!(
        summary(&capture.take()),
        [
            "INFO access state changed: from=optimized group=1 map=mpathe path=a to=non-optimized",
            "WARN access state changed: from=optimized group=1 map=mpathe path=b to=inaccessible",
            "INFO group switched: cause=access state changed from=1 map=mpathe to=2",
            "INFO access state changed: from=non-optimized group=1 map=mpathe path=a to=optimized",
        ]
    );
}

#[test]
fn no_path_groups_and_queue_if_no_path_are_logged_once_per_change() {
    let map = map(true, None);
    let capture = Capture::default();
    capture.during(|| {
        map.message(&Message::DisableGroup(1)).unwrap();
        map.message(&Message::DisableGroup(1)).unwrap(); // no change
        map.message(&Message::EnableGroup(1)).unwrap();
        map.fail_path(0, PathError::Transport);
        map.fail_path(1, PathError::ConnectionLost);
        map.fail_path(2, PathError::Unknown);
        map.message(&Message::FailIfNoPath).unwrap();
        map.message(&Message::FailIfNoPath).unwrap(); // no change
        map.reinstate_path(2);
    });
    let events = capture.take();
    assert_eq!(
        summary(&events),
        [
            "INFO group disabled: group=1 map=mpathe",
            "INFO group switched: cause=disable_group from=1 map=mpathe to=2",
            "INFO group enabled: group=1 map=mpathe",
            "INFO group switched: cause=enable_group from=2 map=mpathe to=1",
            "WARN path failed: cause=path error error=transport error group=1 map=mpathe path=a",
            "WARN path failed: cause=path error error=connection lost group=1 map=mpathe path=b",
            "INFO group switched: cause=current group lost its usable paths from=1 map=mpathe to=2",
            "WARN path failed: cause=path error error=unknown error group=2 map=mpathe path=c",
            "WARN no usable path: from=2 map=mpathe queue_if_no_path=true",
            "INFO queue_if_no_path set: map=mpathe queue_if_no_path=false",
            "INFO path reinstated: cause=checker group=2 map=mpathe path=c",
            "INFO group switched: cause=path reinstated from=none map=mpathe to=2",
        ]
    );
    assert_eq!(events[8].level, Level::WARN);
}

#[test]
fn queued_io_timing_out_is_one_event_per_scan_not_per_io() {
    let map = map(true, Some(1_000));
    for path in 0..3 {
        map.fail_path(path, PathError::Transport);
    }
    let mut queue = Queue::new(
        Arc::clone(&map),
        vec![FakePath::hung(), FakePath::hung(), FakePath::hung()],
        8,
        0,
    );
    let capture = Capture::default();
    let mut failed = 0;
    capture.during(|| {
        for user_data in 0..5 {
            let io = Io::read(user_data, 0, Buffer::zeroed(512));
            queue.submit(io, 0).unwrap();
        }
        queue.poll(500, &mut |_| panic!("not yet"));
        queue.poll(1_000, &mut |_| failed += 1);
    });
    assert_eq!(failed, 5);
    assert_eq!(
        summary(&capture.take()),
        ["WARN queued I/O timed out: count=5 map=mpathe no_path_timeout_ns=1000"]
    );
}

#[test]
fn transitions_count_failures_by_error_and_reinstatements_by_message_across_a_reload() {
    let old = map(true, None);
    old.fail_path(0, PathError::Transport);
    old.message(&Message::FailPath("b".into())).unwrap();
    old.reinstate_path(0);
    old.fail_path(0, PathError::Transport);
    old.message(&Message::ReinstatePath("a".into())).unwrap();
    old.message(&Message::ReinstatePath("b".into())).unwrap();
    old.message(&Message::ReinstatePath("c".into())).unwrap(); // not failed
    let expected = [
        PathTransitions {
            failed: false,
            failed_by_error: 2,
            reinstated_by_message: 1,
        },
        PathTransitions {
            failed: false,
            failed_by_error: 0,
            reinstated_by_message: 1,
        },
        PathTransitions::default(),
    ];
    assert_eq!(old.path_transitions(), expected);
    let slot = MapSlot::new(Arc::clone(&old), Arc::new(()));
    let new = map(true, None);
    let capture = Capture::default();
    capture.during(|| {
        slot.install(Arc::clone(&new), Arc::new(()));
        // The replaced map passes the failure on; only the new map logs.
        old.fail_path(2, PathError::Timeout);
    });
    assert_eq!(
        summary(&capture.take()),
        ["WARN path failed: cause=path error error=I/O timed out group=2 map=mpathe path=c"]
    );
    let mut expected = expected;
    expected[2] = PathTransitions {
        failed: true,
        failed_by_error: 1,
        reinstated_by_message: 0,
    };
    assert_eq!(new.path_transitions(), expected, "carried over by word");
}
