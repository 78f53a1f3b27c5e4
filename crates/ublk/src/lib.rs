//! mpio's ublk frontend: a map served as a Linux block device,
//! `/dev/ublkbN`, through the kernel's ublk driver (`ublk_drv`).
//!
//! - `uapi`: the driver's ABI, written out by hand (no bindgen or
//!   libclang to build), checked against the kernel header by a test.
//! - `control`: `/dev/ublk-control` — add, set parameters, start, stop,
//!   delete.
//! - `engine`: the engine and its devices' life cycle (add, recover,
//!   remove); its I/O threads, one per CPU, each serve one CPU's hardware
//!   queue of every device through the map's per-thread core queue, told
//!   that CPU (so `io-affinity` and `numa` pick by the submitting CPU).
//! - `thread`: one I/O thread and its turn (how it waits, what it hands
//!   its queues); `ring`: its io_uring and waker, the ring's `unsafe`;
//!   `hosted`: another engine's loop it runs beside its queues.
//! - `placement`: which CPU each thread runs on (a neighbour of the CPU
//!   whose queue it serves, on the same NUMA node).
//! - `queue`: one device's queue on one thread (request descriptors, tag
//!   buffers, fetch and commit); `buffers`: each thread's table of
//!   zero-copy buffers, a range of it per device queue.
//!
//! How data moves is chosen per device when it is made:
//! - Zero copy, where the kernel offers `UBLK_F_AUTO_BUF_REG` (6.16+)
//!   and every path of the map is a file or block device: the kernel
//!   registers each read's or write's own pages in the thread's ring,
//!   and the path's I/O, on that ring, reads into or writes from them
//!   ([`mpio_core::io::Buffer::kernel`]); no byte is copied in mpio.
//! - Otherwise a copy each way: the kernel copies a write's data into the
//!   tag's buffer before handing the request over and a read's data out
//!   of it at commit; the buffer itself travels with the I/O through the
//!   map to the path, which reads into or writes from it.

#![warn(unreachable_pub)]

mod buffers;
mod control;
mod engine;
mod error;
mod hosted;
mod keeper;
mod params;
mod placement;
mod queue;
mod ring;
mod thread;
mod uapi;
#[cfg(test)]
mod uapi_header;

pub use engine::{DeviceOptions, Engine, EngineConfig, StoppedDevice, TryStop, UblkDevice};
pub use error::{StuckCommand, UblkError};
pub use keeper::{keep, Kept, LOCK_FILE};
pub use thread::Released;
pub use uapi::{CtrlCmd, DevInfo, IoCmd, IoDesc, ParamBasic, ParamDiscard, Params};
