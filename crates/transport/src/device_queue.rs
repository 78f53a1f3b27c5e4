//! [`DeviceSlot`] and [`DeviceQueue`]: a device that takes new tables
//! while it serves, and one thread's queue on it, which opens path
//! queues from the handles of whatever map the slot serves (see
//! [`mpio_core::reload`]).

use crate::{open_paths, AnyQueue, PathHandle};
use mpio_core::map::Map;
use mpio_core::reload::{MapSlot, ReloadingQueue};
use mpio_io_loop::Waker;
use std::sync::Arc;

/// A device that takes new tables while it serves: the map now served and
/// its path handles (see [`mpio_core::reload`]).
pub type DeviceSlot = MapSlot<Vec<PathHandle>>;

/// A thread's queue on a [`DeviceSlot`], opening path queues from the
/// handles of whatever map the slot serves.
pub type DeviceQueue = ReloadingQueue<
    AnyQueue,
    Vec<PathHandle>,
    Box<dyn FnMut(&Arc<Map>, &Vec<PathHandle>) -> Vec<AnyQueue> + Send>,
>;

/// Opens a [`DeviceQueue`] of `depth` I/Os on `slot` for a thread on `cpu`.
pub fn device_queue(slot: &Arc<DeviceSlot>, depth: usize, cpu: u32) -> DeviceQueue {
    waking_device_queue(slot, depth, cpu, None)
}

/// As [`device_queue`], with path queues that signal `waker` at each
/// completion where their transport can ([`AnyQueue::rest`]).
pub fn waking_device_queue(
    slot: &Arc<DeviceSlot>,
    depth: usize,
    cpu: u32,
    waker: Option<Waker>,
) -> DeviceQueue {
    ReloadingQueue::new(
        Arc::clone(slot),
        Box::new(move |_: &Arc<Map>, paths: &Vec<PathHandle>| open_paths(paths, depth, waker)),
        depth,
        cpu,
    )
}
