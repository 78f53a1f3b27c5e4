//! The watchdog: `WATCHDOG=1` to the service manager only while every
//! loop of the daemon still turns.
//!
//! # Rule
//! Every [`Notifier::watchdog_interval`] (half what the service manager
//! asked for) [`Watchdog::round`] reads the heartbeat of each NBD event
//! loop on its own thread, each ublk I/O thread (which also runs the NBD
//! loops it hosts) and the checker pool's thread. It sends `WATCHDOG=1`
//! when each one turned since the last round or waits for work
//! ([`Beat::alive_since`]); a heartbeat first seen this round counts as
//! alive. A loop stuck inside a turn withholds it, and logs which loops:
//! the service manager then ends the daemon and, with `Restart=`, starts
//! it again (a ublk device is taken over by the next daemon).
//!
//! [`Notifier::watchdog_interval`]: crate::notify::Notifier::watchdog_interval

use super::state::State;
use mpio_io_loop::{Beat, Heartbeat};
use mpio_transport::lock;
use std::sync::Arc;

/// What the last round read. See the module docs.
#[derive(Debug, Default)]
pub(super) struct Watchdog {
    last: Vec<(Arc<Heartbeat>, Beat)>,
}

impl Watchdog {
    /// Reads every heartbeat and sends `WATCHDOG=1` if all are alive.
    pub(super) fn round(&mut self, state: &State) {
        let now: Vec<(String, Arc<Heartbeat>, Beat)> = heartbeats(state)
            .into_iter()
            .map(|(name, heartbeat)| {
                let beat = heartbeat.read();
                (name, heartbeat, beat)
            })
            .collect();
        let stuck = stuck(&self.last, &now);
        if stuck.is_empty() {
            state.notifier.watchdog();
        } else {
            tracing::error!(
                loops = %stuck.join(", "),
                "watchdog withheld: these loops did not turn since the last check"
            );
        }
        self.last = now
            .into_iter()
            .map(|(_, heartbeat, beat)| (heartbeat, beat))
            .collect();
    }
}

/// The names of the loops in `now` that neither turned nor wait for
/// work since their reading in `last` (a loop new in `now` is alive).
fn stuck<'a>(
    last: &[(Arc<Heartbeat>, Beat)],
    now: &'a [(String, Arc<Heartbeat>, Beat)],
) -> Vec<&'a str> {
    now.iter()
        .filter(|(_, heartbeat, beat)| {
            last.iter()
                .find(|(earlier, _)| Arc::ptr_eq(earlier, heartbeat))
                .is_some_and(|&(_, earlier)| !beat.alive_since(earlier))
        })
        .map(|(name, _, _)| name.as_str())
        .collect()
}

/// Every heartbeat the daemon's loops beat, each named for the log.
fn heartbeats(state: &State) -> Vec<(String, Arc<Heartbeat>)> {
    let mut all = vec![("the checker pool".to_string(), state.checkers.heartbeat())];
    if let Some(engine) = lock(&state.nbd).as_ref() {
        let loops = engine.heartbeats().iter().enumerate();
        all.extend(
            loops.map(|(index, heartbeat)| (format!("NBD loop {index}"), Arc::clone(heartbeat))),
        );
    }
    let threads = state.ublk.heartbeats().into_iter().enumerate();
    all.extend(threads.map(|(index, heartbeat)| (format!("ublk thread {index}"), heartbeat)));
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(loops: &[(&str, &Arc<Heartbeat>)]) -> Vec<(String, Arc<Heartbeat>, Beat)> {
        loops
            .iter()
            .map(|(name, heartbeat)| (name.to_string(), Arc::clone(heartbeat), heartbeat.read()))
            .collect()
    }

    fn last(now: &[(String, Arc<Heartbeat>, Beat)]) -> Vec<(Arc<Heartbeat>, Beat)> {
        now.iter()
            .map(|(_, heartbeat, beat)| (Arc::clone(heartbeat), *beat))
            .collect()
    }

    #[test]
    fn a_loop_stuck_in_a_turn_is_named_and_turning_or_idle_loops_are_not() {
        let (turning, idle, stuck_loop) = (
            Arc::new(Heartbeat::default()),
            Arc::new(Heartbeat::default()),
            Arc::new(Heartbeat::default()),
        );
        let loops = [
            ("turning", &turning),
            ("idle", &idle),
            ("stuck", &stuck_loop),
        ];
        // First seen: alive, whatever they read.
        let first = read(&loops);
        assert!(stuck(&[], &first).is_empty());
        turning.beat();
        idle.beat();
        idle.idle();
        stuck_loop.beat();
        let second = read(&loops);
        assert!(stuck(&last(&first), &second).is_empty());
        // The third is inside a turn that does not end.
        turning.beat();
        let third = read(&loops);
        assert_eq!(stuck(&last(&second), &third), ["stuck"]);
        // A loop that appears later (an engine started by a reload).
        let late = Arc::new(Heartbeat::default());
        let fourth = read(&[("turning", &turning), ("late", &late)]);
        assert_eq!(stuck(&last(&third), &fourth), ["turning"]);
    }
}
