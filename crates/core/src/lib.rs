//! mpio's multipath core: the dm table grammar, the map / priority group /
//! path model, the path selectors and the failover engine.
//!
//! The core opens no socket or file, starts no thread and never reads a
//! clock: transports and frontends plug in through [`queue::PathQueue`],
//! and time comes in as `now_ns` arguments, so the deterministic simulator
//! drives the very code that runs in production.

#![warn(unreachable_pub)]

pub mod checker;
mod events;
pub mod failback;
pub mod io;
pub mod load;
pub mod map;
pub mod marginal;
pub mod message;
pub mod numa;
pub mod path;
pub mod queue;
mod reload;
pub mod selector;
mod slab;
mod snapshot;
mod stall;
pub mod status;
mod sync;
pub mod table;

pub use reload::{MapSlot, ReloadingQueue};
pub use slab::Slab;
pub use stall::STALL_FLOOR_NS;
