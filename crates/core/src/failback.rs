//! Failback: when a map that failed over to a lower-priority group goes
//! back to its preferred group, as multipath.conf's `failback` says.
//!
//! Groups are in priority order (group 1 first), as multipathd writes
//! them. After a failover the map stays on the group it failed over to
//! even when a better group recovers (dm's `choose_pgpath` keeps the
//! current group while it has a usable path); failback is the daemon's
//! decision to send `switch_group` back. The policies, with the meaning
//! multipathd gives them (`check_path`, `followover_should_failback`,
//! `deferred_failback_tick` in multipath-tools):
//!
//! - `immediate`: switch to the preferred group as soon as it has a usable
//!   path, on every checker round (so a manual `switch_group` to a lower
//!   group is undone at the next round, as with multipathd);
//! - `manual`: never switch automatically; the admin sends `switch_group`;
//! - `followover`: switch only when the preferred group comes back from
//!   wholly down, i.e. every usable path of it returned in this round.
//!   A preferred group whose paths were up all along is left alone: the
//!   failover was asked for by someone else (another cluster node, the
//!   admin), so it is followed, not undone;
//! - `<seconds>`: switch once the preferred group has been usable for that
//!   long; every path of it that returns restarts the wait (multipathd
//!   re-arms `failback_tick` on each new path up), so a flapping group is
//!   not failed back to until it holds still.
//!
//! The preferred group is the first group in order that is not disabled
//! (`disable_group`) and has a usable path (not failed, and optimized or
//! non-optimized). With no route at all the map chooses by itself when a
//! path returns, so there is nothing to fail back from.
//!
//! This module is pure policy: time comes in as `now_ns` and the caller
//! (the path checker) sends the `switch_group` it decides.

use std::fmt;

/// Longest deferred failback accepted, in seconds (one day).
pub(crate) const MAX_FAILBACK_SECONDS: u32 = 86_400;

/// A failback policy, as multipath.conf's `failback` names it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Failback {
    /// Switch back as soon as the preferred group is usable.
    Immediate,
    /// Never switch back automatically (multipathd's default).
    #[default]
    Manual,
    /// Switch back only when the preferred group returns from wholly down.
    Followover,
    /// Switch back once the preferred group has been usable this long.
    Deferred {
        /// Seconds, 1 to `MAX_FAILBACK_SECONDS`.
        seconds: u32,
    },
}

/// A `failback` word that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("failback {word:?}: {reason}")]
pub struct FailbackError {
    /// The word as given.
    pub word: String,
    /// What is wrong with it.
    pub reason: String,
}

impl Failback {
    /// Parses `immediate`, `manual`, `followover` or a number of seconds.
    ///
    /// # Errors
    /// A [`FailbackError`] naming the word and the accepted forms.
    pub fn parse(word: &str) -> Result<Failback, FailbackError> {
        let error = |reason: String| FailbackError {
            word: word.to_string(),
            reason,
        };
        match word {
            "immediate" => Ok(Failback::Immediate),
            "manual" => Ok(Failback::Manual),
            "followover" => Ok(Failback::Followover),
            _ if !word.is_empty() && word.bytes().all(|byte| byte.is_ascii_digit()) => {
                match word.parse::<u32>() {
                    Ok(0) => Err(error("0 seconds: say immediate".into())),
                    Ok(seconds) if seconds <= MAX_FAILBACK_SECONDS => {
                        Ok(Failback::Deferred { seconds })
                    }
                    _ => Err(error(format!(
                        "at most {MAX_FAILBACK_SECONDS} seconds (one day)"
                    ))),
                }
            }
            _ => Err(error(
                "expected immediate, manual, followover or a number of seconds".into(),
            )),
        }
    }
}

impl fmt::Display for Failback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failback::Immediate => f.write_str("immediate"),
            Failback::Manual => f.write_str("manual"),
            Failback::Followover => f.write_str("followover"),
            Failback::Deferred { seconds } => write!(f, "{seconds}"),
        }
    }
}

/// What the policy is told about one path after a checker round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathView {
    /// The path's group (0-based).
    pub group: usize,
    /// Not failed, and of an access state that carries I/O.
    pub usable: bool,
    /// Failed before this round, reinstated by its probe in this round.
    pub returned: bool,
}

/// The map as the policy sees it after one checker round.
#[derive(Clone, Copy, Debug)]
pub struct Round<'a> {
    /// The caller's clock.
    pub now_ns: u64,
    /// The group I/O goes to (0-based); `None` when no path is usable.
    pub current_group: Option<usize>,
    /// Groups bypassed by `disable_group`, by group index.
    pub disabled: &'a [bool],
    /// Every path of the map.
    pub paths: &'a [PathView],
}

/// What to do after a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Nothing.
    Stay,
    /// Send `switch_group` for this group (0-based; the message is 1-based).
    SwitchGroup(usize),
    /// A deferred failback is due at this time unless the preferred group
    /// changes before; decide again then.
    WaitUntil(u64),
}

/// The preferred group of `round`: the first group in order that is not
/// disabled and has a usable path.
pub(crate) fn preferred_group(round: &Round<'_>) -> Option<usize> {
    round
        .paths
        .iter()
        .filter(|path| path.usable && !round.disabled.get(path.group).copied().unwrap_or(false))
        .map(|path| path.group)
        .min()
}

/// A failback policy with the one piece of state it keeps: the deadline of
/// a deferred failback.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailbackState {
    policy: Failback,
    deadline_ns: Option<u64>,
}

impl FailbackState {
    /// `policy`, with no failback pending.
    pub fn new(policy: Failback) -> Self {
        FailbackState {
            policy,
            deadline_ns: None,
        }
    }

    /// The policy.
    pub fn policy(&self) -> Failback {
        self.policy
    }

    /// When a deferred failback is due, if one is pending.
    pub fn deadline_ns(&self) -> Option<u64> {
        self.deadline_ns
    }

    /// Decides after a checker round (or at a deadline it asked for).
    pub fn decide(&mut self, round: &Round<'_>) -> Decision {
        let target = round
            .current_group
            .and_then(|current| preferred_group(round).filter(|&best| best < current));
        let Some(target) = target else {
            self.deadline_ns = None;
            return Decision::Stay;
        };
        let mut target_paths = round
            .paths
            .iter()
            .filter(|path| path.group == target && path.usable);
        match self.policy {
            Failback::Immediate => Decision::SwitchGroup(target),
            Failback::Manual => Decision::Stay,
            // `target` has a usable path, so `all` is not vacuously true.
            Failback::Followover if target_paths.all(|path| path.returned) => {
                Decision::SwitchGroup(target)
            }
            Failback::Followover => Decision::Stay,
            Failback::Deferred { seconds } => {
                let restart = target_paths.any(|path| path.returned);
                let deadline_ns = match self.deadline_ns {
                    Some(deadline_ns) if !restart => deadline_ns,
                    _ => round
                        .now_ns
                        .saturating_add(u64::from(seconds) * 1_000_000_000),
                };
                if round.now_ns >= deadline_ns {
                    self.deadline_ns = None;
                    Decision::SwitchGroup(target)
                } else {
                    self.deadline_ns = Some(deadline_ns);
                    Decision::WaitUntil(deadline_ns)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    fn path(group: usize, usable: bool, returned: bool) -> PathView {
        PathView {
            group,
            usable,
            returned,
        }
    }

    fn round<'a>(now_ns: u64, current: Option<usize>, paths: &'a [PathView]) -> Round<'a> {
        Round {
            now_ns,
            current_group: current,
            disabled: &[false, false, false],
            paths,
        }
    }

    #[test]
    fn parses_and_prints_the_multipath_conf_words() {
        for (word, policy) in [
            ("immediate", Failback::Immediate),
            ("manual", Failback::Manual),
            ("followover", Failback::Followover),
            ("15", Failback::Deferred { seconds: 15 }),
            ("86400", Failback::Deferred { seconds: 86_400 }),
        ] {
            assert_eq!(Failback::parse(word), Ok(policy));
            assert_eq!(policy.to_string(), word);
        }
        for bad in [
            "",
            "0",
            "86401",
            "-5",
            "1.5",
            "Immediate",
            "99999999999",
            "5s",
        ] {
            let error = Failback::parse(bad).unwrap_err();
            assert_eq!(error.word, bad);
        }
    }

    #[test]
    fn preferred_group_skips_disabled_and_unusable_groups() {
        let paths = [
            path(0, false, false),
            path(1, true, false),
            path(2, true, false),
        ];
        let mut view = round(0, Some(2), &paths);
        assert_eq!(preferred_group(&view), Some(1));
        view.disabled = &[false, true, false];
        assert_eq!(preferred_group(&view), Some(2));
        let none = [path(0, false, false)];
        assert_eq!(preferred_group(&round(0, None, &none)), None);
    }

    #[test]
    fn nothing_to_do_on_the_preferred_group_or_without_a_route() {
        for policy in [
            Failback::Immediate,
            Failback::Manual,
            Failback::Followover,
            Failback::Deferred { seconds: 1 },
        ] {
            let mut state = FailbackState::new(policy);
            let paths = [path(0, true, true), path(1, true, false)];
            assert_eq!(state.decide(&round(0, Some(0), &paths)), Decision::Stay);
            assert_eq!(state.decide(&round(0, None, &paths)), Decision::Stay);
            // A better group exists only above the current one.
            let paths = [path(0, false, false), path(1, true, true)];
            assert_eq!(state.decide(&round(0, Some(1), &paths)), Decision::Stay);
            assert_eq!(state.deadline_ns(), None);
        }
    }

    #[test]
    fn immediate_switches_back_whenever_the_preferred_group_is_usable() {
        let mut state = FailbackState::new(Failback::Immediate);
        let paths = [path(0, true, true), path(1, true, false)];
        assert_eq!(
            state.decide(&round(0, Some(1), &paths)),
            Decision::SwitchGroup(0)
        );
        // Also when nothing returned: a manual switch to group 2 is undone.
        let paths = [path(0, true, false), path(1, true, false)];
        assert_eq!(
            state.decide(&round(0, Some(1), &paths)),
            Decision::SwitchGroup(0)
        );
    }

    #[test]
    fn manual_never_switches() {
        let mut state = FailbackState::new(Failback::Manual);
        let paths = [path(0, true, true), path(1, true, false)];
        assert_eq!(state.decide(&round(0, Some(1), &paths)), Decision::Stay);
    }

    #[test]
    fn followover_switches_only_when_the_group_returns_from_wholly_down() {
        let mut state = FailbackState::new(Failback::Followover);
        // The first path of group 1 returns; its sibling is still down.
        let paths = [
            path(0, true, true),
            path(0, false, false),
            path(1, true, false),
        ];
        assert_eq!(
            state.decide(&round(0, Some(1), &paths)),
            Decision::SwitchGroup(0)
        );
        // Group 1 was up all along (someone switched away): stay.
        let paths = [
            path(0, true, false),
            path(0, true, false),
            path(1, true, false),
        ];
        assert_eq!(state.decide(&round(0, Some(1), &paths)), Decision::Stay);
        // A second path returns while another of the group was already up.
        let paths = [
            path(0, true, true),
            path(0, true, false),
            path(1, true, false),
        ];
        assert_eq!(state.decide(&round(0, Some(1), &paths)), Decision::Stay);
    }

    #[test]
    fn deferred_waits_and_each_return_restarts_the_wait() {
        let mut state = FailbackState::new(Failback::Deferred { seconds: 10 });
        let returned = [path(0, true, true), path(1, true, false)];
        let steady = [path(0, true, false), path(1, true, false)];
        assert_eq!(
            state.decide(&round(0, Some(1), &returned)),
            Decision::WaitUntil(10 * SECOND)
        );
        assert_eq!(
            state.decide(&round(4 * SECOND, Some(1), &steady)),
            Decision::WaitUntil(10 * SECOND)
        );
        // Another return (a flap) at 6 s restarts the wait.
        assert_eq!(
            state.decide(&round(6 * SECOND, Some(1), &returned)),
            Decision::WaitUntil(16 * SECOND)
        );
        assert_eq!(
            state.decide(&round(15 * SECOND, Some(1), &steady)),
            Decision::WaitUntil(16 * SECOND)
        );
        assert_eq!(
            state.decide(&round(16 * SECOND, Some(1), &steady)),
            Decision::SwitchGroup(0)
        );
        assert_eq!(state.deadline_ns(), None);
    }

    #[test]
    fn deferred_forgets_the_wait_when_the_group_goes_down_again() {
        let mut state = FailbackState::new(Failback::Deferred { seconds: 10 });
        let returned = [path(0, true, true), path(1, true, false)];
        let down = [path(0, false, false), path(1, true, false)];
        let steady = [path(0, true, false), path(1, true, false)];
        state.decide(&round(0, Some(1), &returned));
        assert_eq!(
            state.decide(&round(5 * SECOND, Some(1), &down)),
            Decision::Stay
        );
        assert_eq!(state.deadline_ns(), None);
        // Seen usable again without a return (say, an access-state
        // change): the wait starts afresh.
        assert_eq!(
            state.decide(&round(12 * SECOND, Some(1), &steady)),
            Decision::WaitUntil(22 * SECOND)
        );
    }

    #[test]
    fn deadline_saturates() {
        let mut state = FailbackState::new(Failback::Deferred {
            seconds: MAX_FAILBACK_SECONDS,
        });
        let paths = [path(0, true, true), path(1, true, false)];
        assert_eq!(
            state.decide(&round(u64::MAX - 1, Some(1), &paths)),
            Decision::WaitUntil(u64::MAX)
        );
    }
}
