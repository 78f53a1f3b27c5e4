//! The pace of a loop with requests at its queues: the one policy by
//! which both engines' loops decide, before each turn, whether to poll
//! at once or how long they may sleep.
//!
//! What the queues say together ([`crate::Rest`]) decides first: work
//! already waiting goes on at once; queues whose every completion lands
//! on the loop's own ring let it sleep on that ring, at most
//! [`REST_BOUND`] (the maps' own timers: I/O timeouts, stalls, held I/O,
//! are checked at least that often). Queues that complete where only a
//! poll sees them (NBD sockets, memory, null) are polled without sleeping
//! for [`SPIN_TURNS`] turns without work, which catches completions that
//! come within microseconds; after that the loop waits at most
//! [`BUSY_WAIT`] between polls, so a slow path costs a loop about one
//! wake-up per [`BUSY_WAIT`] instead of a CPU. A turn with work starts
//! the spin again.
//!
//! A loop with no request at its queues does not ask: it sleeps until
//! its next event.

use crate::Rest;
use std::time::Duration;

/// Turns without work during which a loop with requests at queues that
/// must be polled polls without sleeping.
pub const SPIN_TURNS: u32 = 64;
/// How long such a loop then waits between polls.
pub const BUSY_WAIT: Duration = Duration::from_micros(100);
/// The longest a loop sleeps on its ring while requests are at its
/// queues: their maps' own timers are checked at least this often.
pub const REST_BOUND: Duration = Duration::from_millis(1);

/// One loop's count of turns without work. See the module docs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Pace {
    idle_turns: u32,
}

/// What a loop with requests at its queues does before its next turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Sleep on the loop's ring, at most [`REST_BOUND`].
    OnRing,
    /// Go on at once: work already waits.
    Ready,
    /// Poll again without sleeping.
    Spin,
    /// Wait at most [`BUSY_WAIT`] for an event, then poll.
    Nap,
}

impl Wait {
    /// The longest the loop may sleep before its next turn: zero when it
    /// is to go on at once.
    pub fn bound(self) -> Duration {
        match self {
            Wait::OnRing => REST_BOUND,
            Wait::Ready | Wait::Spin => Duration::ZERO,
            Wait::Nap => BUSY_WAIT,
        }
    }
}

impl Pace {
    /// Counts a turn; `worked`: it handled a completion, which starts
    /// the spin again.
    pub fn turned(&mut self, worked: bool) {
        self.idle_turns = if worked {
            0
        } else {
            self.idle_turns.saturating_add(1)
        };
    }

    /// What a loop whose busy queues say `rest` together does before its
    /// next turn.
    pub fn wait(&self, rest: Rest) -> Wait {
        match rest {
            Rest::OnRing => Wait::OnRing,
            Rest::Ready => Wait::Ready,
            Rest::Poll if self.idle_turns < SPIN_TURNS => Wait::Spin,
            Rest::Poll => Wait::Nap,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Pace, Wait, BUSY_WAIT, REST_BOUND, SPIN_TURNS};
    use crate::Rest;
    use std::time::Duration;

    #[test]
    fn polled_queues_spin_then_nap_until_work_comes() {
        let mut pace = Pace::default();
        for _ in 0..SPIN_TURNS {
            assert_eq!(pace.wait(Rest::Poll), Wait::Spin);
            pace.turned(false);
        }
        assert_eq!(pace.wait(Rest::Poll), Wait::Nap);
        assert_eq!(pace.wait(Rest::Poll).bound(), BUSY_WAIT);
        pace.turned(true);
        assert_eq!(pace.wait(Rest::Poll), Wait::Spin);
        assert_eq!(pace.wait(Rest::Poll).bound(), Duration::ZERO);
    }

    #[test]
    fn resting_on_the_ring_and_waiting_work_do_not_count_turns() {
        let mut pace = Pace::default();
        for _ in 0..2 * SPIN_TURNS {
            pace.turned(false);
        }
        assert_eq!(pace.wait(Rest::OnRing).bound(), REST_BOUND);
        assert_eq!(pace.wait(Rest::Ready), Wait::Ready);
        assert_eq!(pace.wait(Rest::Ready).bound(), Duration::ZERO);
    }
}
