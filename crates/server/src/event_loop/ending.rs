//! Ending an export on a loop, and ending the loop: the drain (read no
//! more, answer what was read, publish what is left), the stop (close the
//! export's connections, wait for its I/O at the map beside the other
//! exports' work, report), and the quit of the whole loop. See the
//! parent module's docs ("Draining and stopping an export").

use super::{mark_busy, EventLoop, LoopExit};
use crate::Shared;
use mpio_io_loop::BUSY_WAIT;
use mpio_transport::clock::now_ns;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Sender;
use std::time::Duration;

/// An export being stopped on this loop.
pub(super) struct Stopping {
    exit_by_ns: u64,
    done: Sender<LoopExit>,
    exit: LoopExit,
}

/// How long a quitting loop waits for I/O at its maps.
const QUIT_WAIT: Duration = Duration::from_secs(5);

impl EventLoop {
    /// Stops taking work for export `shared` (see the parent module): its
    /// connections still in their handshake close now; the others are
    /// read no more.
    pub(super) fn drain(&mut self, shared: &Shared) {
        let Some(&key) = self.export_keys.get(&shared.id) else {
            // Never served here: nothing to drain.
            shared.drain[self.settings.index].publish(0, 0);
            return;
        };
        let Some(export) = self.exports.get_mut(key) else {
            return;
        };
        if export.draining {
            return;
        }
        export.draining = true;
        self.ending.push(key);
        let in_handshake: Vec<u64> = self
            .slots
            .iter()
            .filter(|(_, slot)| slot.export == key && slot.connection.in_handshake())
            .map(|(key, _)| key)
            .collect();
        for connection in in_handshake {
            self.close(connection);
        }
    }

    /// Stops export `id` here: closes its connections and drops what
    /// waits for room; the loop then polls its queue until the map handed
    /// back every I/O or `exit_by_ns` passed, and reports to `done`.
    pub(super) fn stop(&mut self, id: u64, exit_by_ns: u64, done: Sender<LoopExit>) {
        let Some(&key) = self.export_keys.get(&id) else {
            // Never served here: nothing left behind.
            let _ = done.send(LoopExit::default());
            return;
        };
        let (unanswered, _) = self.exports[key].left(key, &self.slots);
        let connections: Vec<u64> = self
            .slots
            .iter()
            .filter(|(_, slot)| slot.export == key)
            .map(|(key, _)| key)
            .collect();
        let connections_closed = connections.len();
        for connection in connections {
            self.close(connection);
        }
        let export = &mut self.exports[key];
        // Waiting for room in the queue: counted in `unanswered`.
        for io in export.waiting.drain(..) {
            self.pool.give(io.buf);
        }
        if !export.draining && export.stopping.is_none() {
            self.ending.push(key);
        }
        export.draining = true;
        export.stopping = Some(Stopping {
            exit_by_ns,
            done,
            exit: LoopExit {
                unanswered,
                left_at_map: 0,
                connections_closed,
            },
        });
        mark_busy(&mut self.exports, &mut self.busy, key);
    }

    /// Publishes how far each draining export is here, and finishes the
    /// stops that are done.
    pub(super) fn publish_endings(&mut self) {
        let now = now_ns();
        let mut ending = std::mem::take(&mut self.ending);
        ending.retain(|&key| {
            let Some(export) = self.exports.get_mut(key) else {
                return false;
            };
            let Some(stopping) = &export.stopping else {
                let (unanswered, at_map) = export.left(key, &self.slots);
                export.shared.drain[self.settings.index].publish(unanswered, at_map);
                return true;
            };
            if export.queue.in_flight() > 0 && now < stopping.exit_by_ns {
                return true;
            }
            self.forget(key);
            false
        });
        self.ending = ending;
    }

    /// Drops export `key` (stopped, or its loop quitting), reporting
    /// what the map still held to its stopper, if any.
    pub(super) fn forget(&mut self, key: u64) {
        let Some(mut export) = self.exports.remove(key) else {
            return;
        };
        self.export_keys.remove(&export.shared.id);
        self.busy.retain(|&busy| busy != key);
        // Relaxed: see `Shared::waiting_for_path`.
        export.shared.waiting_for_path[self.settings.index].store(0, Ordering::Relaxed);
        for (_, request) in export.requests.iter() {
            export.shared.budget.release(request.hold);
        }
        for io in export.waiting.drain(..) {
            self.pool.give(io.buf);
        }
        if let Some(mut stopping) = export.stopping.take() {
            stopping.exit.left_at_map = export.queue.in_flight();
            // The stopper may have stopped waiting.
            let _ = stopping.done.send(stopping.exit);
        }
    }

    /// Ends the loop (its engine is going, or its host): closes every
    /// connection and waits, at most `QUIT_WAIT` (5 s), for the maps to finish
    /// what is in flight. Exports still here had no server left to stop
    /// them.
    pub(super) fn quit(mut self) {
        let keys: Vec<u64> = self.slots.iter().map(|(key, _)| key).collect();
        for key in keys {
            self.close(key);
        }
        let exit_by_ns = now_ns().saturating_add(QUIT_WAIT.as_nanos() as u64);
        loop {
            let mut in_flight = 0;
            for (_, export) in self.exports.iter_mut() {
                export.queue.poll(now_ns(), &mut |_| {});
                in_flight += export.queue.in_flight();
            }
            if in_flight == 0 || now_ns() >= exit_by_ns {
                break;
            }
            std::thread::sleep(BUSY_WAIT);
        }
        let keys: Vec<u64> = self.exports.iter().map(|(key, _)| key).collect();
        for key in keys {
            self.forget(key);
        }
    }
}
