//! mpio's transports: what a path is. Each transport gives a per-thread
//! queue implementing [`mpio_core::queue::PathQueue`]; [`AnyQueue`] holds
//! any of them so one map can mix transports with one `match` per I/O and
//! no `dyn` call.
//!
//! [`Transports`] turns the path words of a table into [`PathHandle`]s,
//! keeping the shared objects behind them (memory disks and their ports) by
//! name; a [`Device`] opens per-thread queues from its handles, and a
//! [`DeviceSlot`] serves a map that can be reloaded, each thread on its own
//! [`DeviceQueue`].
//!
//! This file is the façade: each type above lives in a file of its own
//! (`any_queue.rs`, `transports.rs`, `setup_error.rs`, `device.rs`,
//! `path_handle.rs`, `device_queue.rs`, and `lock.rs` for [`lock`]), and is
//! used from here.

#![warn(unreachable_pub)]

mod any_queue;
pub mod blockdev;
pub mod clock;
mod device;
mod device_queue;
mod file;
pub mod host;
pub mod limits;
mod lock;
mod memory;
mod nbd;
mod null;
mod path_handle;
mod path_size;
pub mod probe;
mod setup_error;
mod transports;
mod unready;
pub mod uri;

pub use any_queue::AnyQueue;
pub use device::Device;
pub use device_queue::{device_queue, device_queue_on, DeviceQueue, DeviceSlot};
pub use file::{is_path_completion, FileError, FilePath, RingShare};
pub use lock::lock;
pub use memory::{PortControl, CHUNK_SIZE as MEMORY_CHUNK_SIZE};
pub use nbd::address::{Address as NbdAddress, Socket as NbdSocket};
pub use nbd::queue::NbdQueue;
pub use nbd::queue::FIRST_BACKOFF as NBD_FIRST_BACKOFF;
pub use nbd::replay::replay as nbd_replay;
pub use nbd::target::NbdTarget;
pub(crate) use path_handle::open_paths;
pub use path_handle::{paths_limits, PathHandle};
pub use setup_error::SetupError;
pub use transports::{PathNames, Transports};
pub use uri::{Endpoint, UriError};
