//! [`DeviceSlot`] and [`DeviceQueue`]: a device that takes new tables
//! while it serves, and one thread's queue on it, which opens path
//! queues from the handles of whatever map the slot serves (see
//! [`mpio_core::ReloadingQueue`]), answers for them all whether its thread
//! may rest before its next poll, and moves its file paths' entries and
//! completions to and from the thread's ring when they share it
//! ([`RingShare`]).

use crate::{open_paths, AnyQueue, PathHandle, RingShare};
use io_uring::squeue;
use mpio_core::map::Map;
use mpio_core::{MapSlot, ReloadingQueue};
use mpio_io_loop::Rest;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// A device that takes new tables while it serves: the map now served and
/// its path handles (see [`mpio_core::ReloadingQueue`]).
pub type DeviceSlot = MapSlot<Vec<PathHandle>>;

/// A thread's queue on a [`DeviceSlot`]: a [`ReloadingQueue`] opening
/// path queues from the handles of whatever map the slot serves, which
/// also answers for all those path queues whether its thread may rest
/// ([`DeviceQueue::rest`]) and exchanges their I/O with the thread's ring
/// ([`DeviceQueue::deliver`], [`DeviceQueue::drain_entries`]). It is used
/// as the [`ReloadingQueue`] it holds (`Deref`) for everything else.
pub struct DeviceQueue(ReloadingQueue<AnyQueue, Vec<PathHandle>, Opener>);

/// How a [`DeviceQueue`] opens the path queues of a map it moves to.
type Opener = Box<dyn FnMut(&Arc<Map>, &Vec<PathHandle>) -> Vec<AnyQueue> + Send>;

impl DeviceQueue {
    /// What a thread about to wait may do about this queue's requests:
    /// what every path queue of every map it still holds I/O on says
    /// together ([`AnyQueue::rest`], [`Rest::of`]).
    pub fn rest(&mut self) -> Rest {
        Rest::of(self.path_queues().map(AnyQueue::rest))
    }

    /// Hands its file paths the completions of `completions` that are
    /// theirs (taken from the thread's ring), before the thread polls it;
    /// the others stay.
    pub fn deliver(&mut self, completions: &mut Vec<(u64, i32)>) {
        for queue in self.path_queues() {
            if completions.is_empty() {
                return;
            }
            if let AnyQueue::File(queue) = queue {
                queue.deliver(completions);
            }
        }
    }

    /// Hands every entry its file paths wrote for the thread's ring to
    /// `push`, after the thread polled it.
    pub fn drain_entries(&mut self, push: &mut impl FnMut(squeue::Entry)) {
        for queue in self.path_queues() {
            if let AnyQueue::File(queue) = queue {
                queue.drain_entries(push);
            }
        }
    }

    /// Every path queue of every map it still holds I/O on.
    fn path_queues(&mut self) -> impl Iterator<Item = &mut AnyQueue> {
        self.0
            .queues_mut()
            .flat_map(|queue| queue.path_queues_mut().iter_mut())
    }
}

impl Deref for DeviceQueue {
    type Target = ReloadingQueue<AnyQueue, Vec<PathHandle>, Opener>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl DerefMut for DeviceQueue {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

/// Opens a [`DeviceQueue`] of `depth` I/Os on `slot` for a thread on `cpu`.
pub fn device_queue(slot: &Arc<DeviceSlot>, depth: usize, cpu: u32) -> DeviceQueue {
    device_queue_on(slot, depth, cpu, None)
}

/// As [`device_queue`], with file path queues on the thread's ring
/// `share` if given.
pub fn device_queue_on(
    slot: &Arc<DeviceSlot>,
    depth: usize,
    cpu: u32,
    share: Option<RingShare>,
) -> DeviceQueue {
    DeviceQueue(ReloadingQueue::new(
        Arc::clone(slot),
        Box::new(move |_: &Arc<Map>, paths: &Vec<PathHandle>| {
            open_paths(paths, depth, share.as_ref())
        }),
        depth,
        cpu,
    ))
}

#[cfg(test)]
mod tests {
    use crate::{device_queue_on, RingShare, Transports};
    use io_uring::IoUring;
    use mpio_core::map::MapOptions;
    use mpio_core::table::Table;
    use mpio_io_loop::Rest;

    /// A map of file paths on its thread's ring lets the thread rest on
    /// that ring; one path that only a poll sees, or file paths on rings
    /// of their own, keep it polling.
    #[test]
    fn a_device_queue_answers_for_all_its_paths() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, vec![0u8; 1 << 20]).unwrap();
            format!("file:{}?direct=0", path.display())
        };
        let (a, b) = (file("a"), file("b"));
        let ring = IoUring::new(8).unwrap();
        let share = RingShare::lend(&ring, 8).unwrap();
        let transports = Transports::new();
        let rest_of = |words: &[&str], share: Option<RingShare>| {
            let text = format!(
                "0 2048 multipath 0 0 1 1 round-robin 0 {} 0 {}",
                words.len(),
                words.join(" ")
            );
            let table = Table::parse(&text).unwrap();
            let slot = transports
                .build(&table, MapOptions::default())
                .unwrap()
                .into_slot();
            device_queue_on(&slot, 4, 0, share).rest()
        };
        assert_eq!(
            rest_of(&[&a, &b], Some(share.clone())),
            Rest::OnRing,
            "file paths"
        );
        assert_eq!(
            rest_of(&[&a, "memory:disk#port"], Some(share)),
            Rest::Poll,
            "a memory path beside a file path"
        );
        assert_eq!(rest_of(&[&a], None), Rest::Poll, "a ring of its own");
    }
}
