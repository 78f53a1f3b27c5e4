//! [`Device`]: a map built over its transports, with what each of its
//! paths leads to; a thread opens its own queue over it, or the device
//! becomes a [`DeviceSlot`] that takes new tables while it serves.

use crate::{open_paths, AnyQueue, DeviceSlot, PathHandle};
use mpio_core::io::PathError;
use mpio_core::map::Map;
use mpio_core::queue::Queue;
use mpio_core::MapSlot;
use std::sync::Arc;

/// A map together with what each of its paths leads to.
#[derive(Debug)]
pub struct Device {
    /// The map.
    pub map: Arc<Map>,
    /// What each path leads to, in [`Map::paths`] order.
    pub paths: Vec<PathHandle>,
}

impl Device {
    /// The word of every path that cannot serve yet, with why
    /// ([`PathHandle::unready`]).
    pub fn unready_paths(&self) -> impl Iterator<Item = (&str, String)> + '_ {
        self.unready()
            .map(|(index, reason)| (self.map.path_name(index), reason))
    }

    /// The index of every path that cannot serve yet, with why.
    fn unready(&self) -> impl Iterator<Item = (usize, String)> + '_ {
        self.paths
            .iter()
            .enumerate()
            .filter_map(|(index, path)| Some((index, path.unready()?)))
    }

    /// Fails every path that cannot serve yet, saying why: the checker
    /// brings it back once its probe reads through it.
    pub(crate) fn fail_unready(&self) {
        let map = &self.map;
        for (index, reason) in self.unready() {
            tracing::warn!(
                map = map.name(),
                path = map.path_name(index),
                %reason,
                "path cannot serve yet: it starts failed, and the checker reinstates it once \
                 it answers"
            );
            map.fail_path(index, PathError::ConnectionLost);
        }
    }

    /// Opens a queue of `depth` I/Os over the device for a thread on `cpu`.
    pub fn queue(&self, depth: usize, cpu: u32) -> Queue<AnyQueue> {
        Queue::new(
            Arc::clone(&self.map),
            open_paths(&self.paths, depth, None),
            depth,
            cpu,
        )
    }

    /// The device as a slot that
    /// [`Transports::reload`](crate::Transports::reload) can give a new
    /// table, for the [`device_queue`](crate::device_queue)s that follow
    /// it.
    pub fn into_slot(self) -> Arc<DeviceSlot> {
        Arc::new(MapSlot::new(self.map, Arc::new(self.paths)))
    }
}
