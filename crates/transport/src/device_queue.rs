//! [`DeviceSlot`] and [`DeviceQueue`]: a device that takes new tables
//! while it serves, and one thread's queue on it, which opens path
//! queues from the handles of whatever map the slot serves (see
//! [`mpio_core::ReloadingQueue`]) and answers for them all whether its thread
//! may rest before its next poll.

use crate::{open_paths, AnyQueue, PathHandle};
use mpio_core::map::Map;
use mpio_core::{MapSlot, ReloadingQueue};
use mpio_io_loop::{Rest, Waker};
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// A device that takes new tables while it serves: the map now served and
/// its path handles (see [`mpio_core::ReloadingQueue`]).
pub type DeviceSlot = MapSlot<Vec<PathHandle>>;

/// A thread's queue on a [`DeviceSlot`]: a [`ReloadingQueue`] opening
/// path queues from the handles of whatever map the slot serves, which
/// also answers for all those path queues whether its thread may rest
/// ([`DeviceQueue::rest`]). It is used as the [`ReloadingQueue`] it
/// holds (`Deref`) for everything else.
pub struct DeviceQueue(ReloadingQueue<AnyQueue, Vec<PathHandle>, Opener>);

/// How a [`DeviceQueue`] opens the path queues of a map it moves to.
type Opener = Box<dyn FnMut(&Arc<Map>, &Vec<PathHandle>) -> Vec<AnyQueue> + Send>;

impl DeviceQueue {
    /// What a thread about to wait may do about this queue's requests:
    /// what every path queue of every map it still holds I/O on says
    /// together ([`AnyQueue::rest`], [`Rest::of`]).
    pub fn rest(&mut self) -> Rest {
        Rest::of(
            self.0
                .queues_mut()
                .flat_map(|queue| queue.path_queues_mut().iter_mut())
                .map(AnyQueue::rest),
        )
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
    waking_device_queue(slot, depth, cpu, None)
}

/// As [`device_queue`], with path queues that signal `waker` at each
/// completion where their transport can ([`DeviceQueue::rest`]).
pub fn waking_device_queue(
    slot: &Arc<DeviceSlot>,
    depth: usize,
    cpu: u32,
    waker: Option<Waker>,
) -> DeviceQueue {
    DeviceQueue(ReloadingQueue::new(
        Arc::clone(slot),
        Box::new(move |_: &Arc<Map>, paths: &Vec<PathHandle>| open_paths(paths, depth, waker)),
        depth,
        cpu,
    ))
}

#[cfg(test)]
#[allow(unsafe_code)]
mod tests {
    use crate::{waking_device_queue, Transports};
    use mpio_core::map::MapOptions;
    use mpio_core::table::Table;
    use mpio_io_loop::{Rest, Waker};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    fn eventfd() -> OwnedFd {
        // SAFETY: eventfd has no preconditions; the result is checked.
        let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        assert!(raw >= 0, "eventfd: {}", std::io::Error::last_os_error());
        // SAFETY: `raw` is a new descriptor that nothing else owns.
        unsafe { OwnedFd::from_raw_fd(raw) }
    }

    /// A map of file paths lets its thread rest on the waker; one path
    /// that only a poll sees keeps it polling.
    #[test]
    fn a_device_queue_answers_for_all_its_paths() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, vec![0u8; 1 << 20]).unwrap();
            format!("file:{}?direct=0", path.display())
        };
        let (a, b) = (file("a"), file("b"));
        let waker = eventfd();
        let transports = Transports::new();
        let rest_of = |words: &[&str]| {
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
            waking_device_queue(&slot, 4, 0, Some(Waker(waker.as_raw_fd()))).rest()
        };
        assert_eq!(rest_of(&[&a, &b]), Rest::OnWaker, "file paths");
        assert_eq!(
            rest_of(&[&a, "memory:disk#port"]),
            Rest::Poll,
            "a memory path beside a file path"
        );
    }
}
