//! A loop of another engine that a ublk thread runs beside its devices'
//! queues ([`crate::Engine::host`]: the daemon's NBD loops, made for the
//! threads' CPUs), kept to the [`HostedLoop`] contract, so a daemon with
//! ublk and NBD exports has one I/O thread per CPU.
//!
//! A poll of the loop's descriptor (an epoll descriptor, for an NBD loop)
//! stays armed on the thread's ring; the thread never waits longer than
//! the loop's wait hint, and takes a turn of the loop, without waiting,
//! when that poll completes or the hint has passed. A hosted NBD loop
//! costs its connections one more system call per wake-up (the thread's
//! ring, then the loop's non-blocking epoll wait); the devices' queues
//! pay nothing for it but that waits are cut short while the loop has
//! work.

use crate::ring::Ring;
use mpio_io_loop::{HostedLoop, Step};
use std::time::Duration;

/// A loop a ublk thread runs (see the module docs).
pub(crate) struct Hosted {
    hosted_loop: Box<dyn HostedLoop>,
    /// A poll of the loop's descriptor is on the ring.
    armed: bool,
}

impl Hosted {
    /// `hosted_loop`, its descriptor not yet watched.
    pub(crate) fn new(hosted_loop: Box<dyn HostedLoop>) -> Hosted {
        Hosted {
            hosted_loop,
            armed: false,
        }
    }

    /// Puts a poll of the loop's descriptor on `ring` if none is there,
    /// and returns how long the loop may wait (its wait hint).
    pub(crate) fn arm(&mut self, ring: &mut Ring) -> Option<Duration> {
        if !self.armed {
            ring.watch(self.hosted_loop.as_raw_fd());
            self.armed = true;
        }
        self.hosted_loop.wait_hint()
    }

    /// Ends the loop (its thread ends).
    pub(crate) fn quit(self) {
        self.hosted_loop.quit();
    }
}

/// Takes one turn of the hosted loop, if any, without waiting; `polled`:
/// its poll on the ring completed (and must be put there again). A loop
/// told to quit is ended and dropped.
pub(crate) fn step(hosted: &mut Option<Hosted>, polled: bool) {
    let Some(running) = hosted.as_mut() else {
        return;
    };
    if polled {
        running.armed = false;
    }
    if running.hosted_loop.step(Some(Duration::ZERO)) == Step::Ends {
        if let Some(ended) = hosted.take() {
            ended.quit();
        }
    }
}
