//! The seed's fault schedule: every fault, message, access change and
//! reload of the fault phase (the path checker runs on its own interval,
//! see `path_checker.rs`), drawn up front from the scenario's
//! [`FaultMix`] and played in time order.
//!
//! [`Event`] is the one place a new kind of disturbance goes: add a
//! variant here, draw it in [`Schedule::draw`], apply it in the runner's
//! `apply_event` (a topology reload, once the core has `Map::reload`, is
//! one variant carrying the new table).

use crate::rng::Rng;
use crate::scenario::{FaultMix, Scenario};
use crate::transport::Mode;
use mpio_core::io::{PathError, TargetError};
use mpio_core::message::Message;
use mpio_core::path::AccessState;

/// One scheduled disturbance.
#[derive(Clone, Debug)]
pub(crate) enum Event {
    /// A path's ground truth changes.
    PathMode {
        /// Path index.
        path: usize,
        /// The new mode.
        mode: Mode,
    },
    /// The storage refuses a block range for a while.
    TargetFault {
        /// First block.
        first_block: u64,
        /// Blocks covered.
        blocks: u64,
        /// What it answers.
        error: TargetError,
        /// How long, ns.
        duration_ns: u64,
    },
    /// A control message to the map.
    Message(Message),
    /// A path's ALUA/ANA access state changes.
    Access {
        /// Path index.
        path: usize,
        /// The new state.
        state: AccessState,
    },
    /// The device takes a new table (`mpio reload`): the same paths in the
    /// same groups, other selectors and features. I/O in flight finishes
    /// on the old map, waiting I/O moves to the new one.
    Reload {
        /// The new table, in dm's syntax.
        table: String,
    },
}

type Events = Vec<(u64, Event)>;

/// Calls `make` at random times before `end_ns`, `every_ns` apart on
/// average (uniform in half to one and a half times it); never if `None`.
fn episodes(
    every_ns: Option<u64>,
    end_ns: u64,
    rng: &mut Rng,
    events: &mut Events,
    mut make: impl FnMut(&mut Rng, u64, &mut Events),
) {
    let Some(every_ns) = every_ns else { return };
    let mut at_ns = rng.below(every_ns);
    while at_ns < end_ns {
        make(rng, at_ns, events);
        at_ns += rng.range(every_ns / 2, every_ns * 3 / 2);
    }
}

/// The fault phase's events, in time order.
#[derive(Debug)]
pub(crate) struct Schedule {
    events: Events,
    next: usize,
}

impl Schedule {
    /// Draws the schedule of `scenario` from `rng`.
    pub(crate) fn draw(scenario: &Scenario, rng: &mut Rng) -> Schedule {
        let mut events = Vec::new();
        let end_ns = scenario.fault_phase_ns;
        let paths = scenario.path_count();
        let groups = scenario.group_count;
        let FaultMix {
            error_every_ns,
            hang_every_ns,
            slow_every_ns,
            flap_every_ns,
            disconnect_every_ns,
            all_down_every_ns,
            target_every_ns,
            message_every_ns,
            access_every_ns,
            checker_every_ns: _,
            reload_every_ns,
        } = scenario.faults.clone();

        let path_episode = |mode: Mode, rng: &mut Rng, at_ns: u64, events: &mut Events| {
            let path = rng.index(paths);
            let duration_ns = rng.range(1, 30) * 1_000_000;
            events.push((at_ns, Event::PathMode { path, mode }));
            events.push((
                at_ns + duration_ns,
                Event::PathMode {
                    path,
                    mode: Mode::Healthy,
                },
            ));
        };
        episodes(
            error_every_ns,
            end_ns,
            rng,
            &mut events,
            |rng, at_ns, events| {
                let error =
                    rng.pick(&[PathError::Transport, PathError::Unknown, PathError::Timeout]);
                path_episode(Mode::Error(error), rng, at_ns, events);
            },
        );
        episodes(
            hang_every_ns,
            end_ns,
            rng,
            &mut events,
            |rng, at_ns, events| {
                path_episode(Mode::Hang, rng, at_ns, events);
            },
        );
        let max_slow_factor = scenario.max_slow_factor;
        episodes(
            slow_every_ns,
            end_ns,
            rng,
            &mut events,
            |rng, at_ns, events| {
                let factor = rng.range(2, max_slow_factor);
                path_episode(Mode::Slow { factor }, rng, at_ns, events);
            },
        );
        episodes(
            disconnect_every_ns,
            end_ns,
            rng,
            &mut events,
            |rng, at_ns, events| {
                path_episode(Mode::Disconnected, rng, at_ns, events);
            },
        );
        episodes(
            flap_every_ns,
            end_ns,
            rng,
            &mut events,
            |rng, at_ns, events| {
                let path = rng.index(paths);
                let period_ns = rng.range(200, 3_000) * 1_000;
                let flips = rng.range(2, 20);
                for flip in 0..flips {
                    let mode = if flip % 2 == 0 {
                        Mode::Error(PathError::Transport)
                    } else {
                        Mode::Healthy
                    };
                    events.push((at_ns + flip * period_ns, Event::PathMode { path, mode }));
                }
                events.push((
                    at_ns + flips * period_ns,
                    Event::PathMode {
                        path,
                        mode: Mode::Healthy,
                    },
                ));
            },
        );
        episodes(
            all_down_every_ns,
            end_ns,
            rng,
            &mut events,
            |rng, at_ns, events| {
                let down = rng.pick(&[Mode::Error(PathError::Transport), Mode::Disconnected]);
                for path in 0..paths {
                    events.push((at_ns, Event::PathMode { path, mode: down }));
                }
                let first_back = rng.index(paths);
                let back_ns = at_ns + rng.range(1, 20) * 1_000_000;
                let rest_ns = back_ns + rng.range(1, 20) * 1_000_000;
                for path in 0..paths {
                    let at_ns = if path == first_back { back_ns } else { rest_ns };
                    events.push((
                        at_ns,
                        Event::PathMode {
                            path,
                            mode: Mode::Healthy,
                        },
                    ));
                }
            },
        );
        let block_count = scenario.block_count;
        episodes(
            target_every_ns,
            end_ns,
            rng,
            &mut events,
            |rng, at_ns, events| {
                // Out of range: the storage shrank below the map for a while,
                // so the refused range is the disk's tail.
                let (first_block, error) = if rng.chance(300) {
                    (rng.below(block_count), TargetError::OutOfRange)
                } else {
                    (rng.below(block_count), TargetError::Medium)
                };
                let blocks = match error {
                    TargetError::OutOfRange => block_count - first_block,
                    _ => rng.range(1, 4).min(block_count - first_block),
                };
                events.push((
                    at_ns,
                    Event::TargetFault {
                        first_block,
                        blocks,
                        error,
                        duration_ns: rng.range(1, 20) * 1_000_000,
                    },
                ));
            },
        );
        episodes(
            message_every_ns,
            end_ns,
            rng,
            &mut events,
            |rng, at_ns, events| {
                let group = rng.range(1, groups as u64) as u32;
                let path = Scenario::path_name(rng.index(paths));
                let message = match rng.below(7) {
                    0 => Message::FailPath(path),
                    1 => Message::ReinstatePath(path),
                    2 => Message::SwitchGroup(group),
                    3 => Message::DisableGroup(group),
                    4 => Message::EnableGroup(group),
                    5 => Message::QueueIfNoPath,
                    _ => Message::FailIfNoPath,
                };
                events.push((at_ns, Event::Message(message)));
            },
        );
        episodes(
            access_every_ns,
            end_ns,
            rng,
            &mut events,
            |rng, at_ns, events| {
                let state = rng.pick(&[
                    AccessState::Optimized,
                    AccessState::Optimized,
                    AccessState::NonOptimized,
                    AccessState::Standby,
                    AccessState::Unavailable,
                ]);
                let path = rng.index(paths);
                events.push((at_ns, Event::Access { path, state }));
            },
        );
        // Drawn last, so that every other event of a seed stays as it was
        // before reloads were simulated.
        episodes(
            reload_every_ns,
            end_ns,
            rng,
            &mut events,
            |rng, at_ns, events| {
                let table = scenario.draw_reload_table(rng);
                events.push((at_ns, Event::Reload { table }));
            },
        );
        events.retain(|(at_ns, _)| *at_ns < end_ns);
        // Stable: events drawn for the same instant keep their draw order.
        events.sort_by_key(|(at_ns, _)| *at_ns);
        Schedule { events, next: 0 }
    }

    /// The next event due at or before `now_ns`, if any.
    pub(crate) fn next_due(&mut self, now_ns: u64) -> Option<Event> {
        let (at_ns, event) = self.events.get(self.next)?;
        if *at_ns > now_ns {
            return None;
        }
        self.next += 1;
        Some(event.clone())
    }

    /// Number of events drawn.
    pub(crate) fn len(&self) -> usize {
        self.events.len()
    }
}
