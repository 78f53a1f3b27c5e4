//! The queue's timers, run from [`Queue::poll`]: attempts past the I/O
//! timeout (failed path, abort, retry), attempts past the fence timeout
//! (abandoned: a read retried, a write failed unfenced), reads past their
//! path's hedge delay (taken back and sent down another path), and I/O
//! waiting too long for a path.

use super::{route_of, timeout_scan_period_ns, PathQueue, Queue, SlotState};
use crate::io::{IoError, Op, PathError};
use crate::sync::Arc;

impl<P: PathQueue> Queue<P> {
    /// Times out hung attempts and I/Os that waited too long for a path.
    pub(super) fn expire(&mut self, now_ns: u64) {
        let no_path_limit = self.map.options().no_path_timeout_ns;
        if let Some(limit) =
            no_path_limit.filter(|limit| now_ns.saturating_sub(self.earliest_wait_ns) >= *limit)
        {
            self.earliest_wait_ns = u64::MAX;
            // The whole list, not up to the first I/O still in time: an I/O
            // that waits again goes to the back with the time of its first
            // wait, so the list is not in order of those times (the
            // simulator found an I/O held 37.6 ms past a 20 ms limit behind
            // younger ones). Survivors keep their order.
            let waiting = self.waiting.len();
            for _ in 0..waiting {
                let Some(index) = self.waiting.pop_front() else {
                    break;
                };
                match self.slots[index as usize].state {
                    SlotState::Waiting { since_ns } if now_ns.saturating_sub(since_ns) >= limit => {
                        self.finish(index, Err(IoError::NoPathTimeout));
                    }
                    SlotState::Waiting { since_ns } => {
                        self.earliest_wait_ns = self.earliest_wait_ns.min(since_ns);
                        self.waiting.push_back(index);
                    }
                    _ => self.waiting.push_back(index),
                }
            }
            // One event per scan that expired I/O, not one per I/O.
            if self.waiting.len() < waiting {
                let expired = waiting - self.waiting.len();
                crate::events::queued_io_timed_out(self.map.name(), expired, limit);
            }
        }
        let Some(timeout) = self.map.options().io_timeout_ns else {
            return;
        };
        if now_ns < self.next_timeout_scan_ns {
            return;
        }
        // Scanning costs one pass over the slots: do it often enough that
        // an I/O is timed out within a sixteenth of its timeout, not on
        // every poll.
        self.next_timeout_scan_ns = now_ns.saturating_add(timeout_scan_period_ns(timeout));
        let fence_limit = self.map.options().fence_timeout_ns;
        let mut unfenced = 0;
        for index in 0..self.slots.len() as u32 {
            let slot = &mut self.slots[index as usize];
            let SlotState::OnPath { path, timed_out } = slot.state else {
                continue;
            };
            let age_ns = now_ns.saturating_sub(slot.start_ns);
            if age_ns < timeout {
                continue;
            }
            let path = path as usize;
            let tag = slot.tag(index);
            // Past its fence timeout, an attempt the path still holds is
            // let go: a read is retried, a write fails (see `unfenced`).
            let fence_passed =
                fence_limit.is_some_and(|limit| age_ns - timeout >= limit) && timed_out;
            if fence_passed {
                if let Some(io) = self.path_queues[path].abandon(tag) {
                    self.slots[index as usize].buf = io.buf;
                    self.end_attempt(index, path, now_ns);
                    unfenced += usize::from(self.unfenced(index, now_ns));
                    continue;
                }
            }
            // A timed-out attempt the transport could not give back is
            // asked for again on every scan; the path is failed once.
            if !timed_out {
                self.loads[path].path_error();
                self.map.fail_path(path, PathError::Timeout);
            }
            match self.path_queues[path].abort(tag) {
                Some(io) => {
                    self.slots[index as usize].buf = io.buf;
                    self.end_attempt(index, path, now_ns);
                    self.retry(index, now_ns);
                }
                None => {
                    self.slots[index as usize].state = SlotState::OnPath {
                        path: path as u32,
                        timed_out: true,
                    };
                }
            }
        }
        // One event per scan that failed writes, not one per I/O.
        if unfenced > 0 {
            crate::events::unfenced_writes_failed(
                self.map.name(),
                unfenced,
                fence_limit.unwrap_or(0),
            );
        }
    }

    /// Slot `index`'s attempt was abandoned by its path past the fence
    /// timeout (it may still take effect there): a read is retried, and
    /// anything that changes or flushes the disk fails with
    /// [`IoError::Unfenced`] rather than race its stale copy. True if it
    /// failed.
    #[cold]
    pub(super) fn unfenced(&mut self, index: u32, now_ns: u64) -> bool {
        // The simulator's second canary, compiled only under
        // `--cfg mpio_canary_unfenced` (never in a normal build): retries
        // an unfenced write as if it were a read.
        // `crates/sim/tests/canary_unfenced.rs` proves the simulator's
        // reference disk catches the stale copy landing.
        let retried = cfg!(mpio_canary_unfenced) || self.slots[index as usize].op == Op::Read;
        if retried {
            self.retry(index, now_ns);
            return false;
        }
        self.finish(index, Err(IoError::Unfenced));
        true
    }

    /// Takes back every read held longer than its path's hedge delay and
    /// never taken back before, if the transport can let go of it and the
    /// route has another path that is neither stalled nor held out, and
    /// sends it there (see [`crate::stall`]). Not a retry: it does not
    /// count toward the attempt limit, and the once-only rule bounds it.
    #[cold]
    #[inline(never)]
    pub(super) fn hedge_reads(&mut self, now_ns: u64) {
        let snapshot = Arc::clone(&self.snapshot);
        let Some((route, first_path)) = route_of(&self.map, &snapshot) else {
            return;
        };
        let mut taken = false;
        for index in 0..self.slots.len() as u32 {
            let slot = &self.slots[index as usize];
            let SlotState::OnPath {
                path,
                timed_out: false,
            } = slot.state
            else {
                continue;
            };
            let path = path as usize;
            if slot.op != Op::Read
                || slot.hedged
                || !self.stalls.hedge_due(path, slot.start_ns, now_ns)
                || !self.stalls.has_alternative(path, route, first_path, now_ns)
            {
                continue;
            }
            let tag = slot.tag(index);
            let Some(io) = self.path_queues[path].abandon(tag) else {
                continue;
            };
            self.slots[index as usize].buf = io.buf;
            self.end_attempt(index, path, now_ns);
            self.loads[path].hedged_read();
            self.stalls.gave_up(path, now_ns);
            self.stats.hedged_reads += 1;
            let slot = &mut self.slots[index as usize];
            slot.attempts -= 1;
            slot.hedged = true;
            slot.state = SlotState::Accepted;
            taken = true;
        }
        if !taken {
            return;
        }
        // Route around the paths just given up on, then send the reads.
        let timeout = self.map.options().io_timeout_ns;
        self.stalls
            .check(now_ns, &self.loads, timeout, Some((route, first_path)));
        for index in 0..self.slots.len() as u32 {
            if self.slots[index as usize].state == SlotState::Accepted {
                self.redispatch(index, now_ns);
            }
        }
    }
}
