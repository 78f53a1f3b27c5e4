//! [`PathHandle`]: what one path leads to, resolved once at build, from
//! which each thread opens its own queue to the path ([`AnyQueue`]).

use crate::file::FilePath;
use crate::limits::Limits;
use crate::memory::{MemoryDisk, MemoryQueue, PortControl};
use crate::nbd::{NbdQueue, NbdTarget};
use crate::null::NullQueue;
use crate::AnyQueue;
use crate::RingShare;
use std::sync::Arc;

/// What one path leads to, resolved: all a thread needs to open its own
/// queue to it, with no registry lookup.
#[derive(Clone, Debug)]
pub enum PathHandle {
    /// A `null` path.
    Null {
        /// Completion latency in ns.
        latency_ns: u64,
    },
    /// A port of a memory disk.
    Memory {
        /// The disk.
        disk: Arc<MemoryDisk>,
        /// The port's switches.
        port: Arc<PortControl>,
    },
    /// A file or block device, opened once for every thread.
    File(Arc<FilePath>),
    /// An NBD server's export.
    Nbd(Arc<NbdTarget>),
}

impl PathHandle {
    /// Whether the path serves an I/O whose buffer is a ublk request's own
    /// pages, as [`crate::Endpoint::takes_kernel_buffers`] says of the
    /// endpoint it was built from.
    pub fn takes_kernel_buffers(&self) -> bool {
        matches!(self, PathHandle::File(_) | PathHandle::Null { .. })
    }

    /// The smallest I/O the path takes: every offset and length must be a
    /// multiple of it (1 where the transport has no such limit of its
    /// own; a file's `O_DIRECT` alignment is at most [`BUFFER_ALIGN`]).
    ///
    /// [`BUFFER_ALIGN`]: mpio_core::io::BUFFER_ALIGN
    pub fn min_block(&self) -> u32 {
        match self {
            PathHandle::Nbd(target) => target.min_block(),
            PathHandle::Null { .. } | PathHandle::Memory { .. } | PathHandle::File(_) => 1,
        }
    }

    /// What the path's storage takes; `None` while the path is not open
    /// or settled ([`PathHandle::unready`]).
    pub fn limits(&self) -> Option<Limits> {
        match self {
            PathHandle::Null { .. } | PathHandle::Memory { .. } => Some(Limits::ANY),
            PathHandle::File(file) => file.limits(),
            PathHandle::Nbd(target) => target.limits(),
        }
    }

    /// Why the path cannot serve yet: a file that could not be opened,
    /// read or sized, an NBD server not reached or an export that does
    /// not fit. `None` for a path that is open (it may still fail I/O).
    pub fn unready(&self) -> Option<String> {
        match self {
            PathHandle::Null { .. } | PathHandle::Memory { .. } => None,
            PathHandle::File(file) => file.unready(),
            PathHandle::Nbd(target) => target.unready(),
        }
    }

    /// Adds `limits` to what the path must take if it opens or settles
    /// from now on: a block device advertising them serves its map.
    pub fn require(&self, limits: Limits) {
        match self {
            PathHandle::Null { .. } | PathHandle::Memory { .. } => {}
            PathHandle::File(file) => file.require(limits),
            PathHandle::Nbd(target) => target.require(limits),
        }
    }

    /// Opens one thread's queue to the path, with room for `depth` I/Os;
    /// a file path's goes through the thread's ring `share` if given.
    pub fn open(&self, depth: usize, share: Option<&RingShare>) -> AnyQueue {
        match self {
            PathHandle::Null { latency_ns } => AnyQueue::Null(NullQueue::new(*latency_ns, depth)),
            PathHandle::Memory { disk, port } => {
                AnyQueue::Memory(MemoryQueue::new(Arc::clone(disk), Arc::clone(port), depth))
            }
            PathHandle::File(file) => AnyQueue::File(file.open_queue(depth, share.cloned())),
            PathHandle::Nbd(target) => AnyQueue::Nbd(NbdQueue::open(Arc::clone(target), depth)),
        }
    }
}

/// What every path of a map that is open or settled takes; `None` when
/// none is ([`PathHandle::limits`]).
pub fn paths_limits(paths: &[PathHandle]) -> Option<Limits> {
    Limits::of_all(paths.iter().filter_map(PathHandle::limits))
}

/// One transport queue per path, in [`Map::paths`] order.
pub(crate) fn open_paths(
    paths: &[PathHandle],
    depth: usize,
    share: Option<&RingShare>,
) -> Vec<AnyQueue> {
    paths.iter().map(|path| path.open(depth, share)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Endpoint;

    /// The endpoint and the path built from it agree on which kinds take
    /// a ublk request's registered pages: null and file, not NBD or
    /// memory.
    #[test]
    fn a_path_takes_kernel_buffers_as_its_endpoint_says() {
        let null = Endpoint::parse("null:1M").unwrap();
        assert!(null.takes_kernel_buffers());
        assert!(PathHandle::Null { latency_ns: 0 }.takes_kernel_buffers());
        assert!(Endpoint::parse("file:/srv/lun.img")
            .unwrap()
            .takes_kernel_buffers());
        assert!(!Endpoint::parse("memory:disk#port")
            .unwrap()
            .takes_kernel_buffers());
        let Endpoint::Nbd(address) = Endpoint::parse("nbd://127.0.0.1:10809/e").unwrap() else {
            panic!("an NBD endpoint");
        };
        assert!(!Endpoint::Nbd(address.clone()).takes_kernel_buffers());
        assert!(!PathHandle::Nbd(Arc::new(NbdTarget::new(address, 1 << 20))).takes_kernel_buffers());
    }
}
