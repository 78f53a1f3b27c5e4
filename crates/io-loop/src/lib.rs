//! What mpio's I/O loops share, below the transports and both engines
//! (the NBD server's event loops and the ublk threads): no sockets, rings
//! or maps, only the rules a loop turns by.
//!
//! - [`Rest`] (`rest.rs`): what a path queue says about a thread about
//!   to wait.
//! - [`Pace`] and [`Wait`] (`pace.rs`): the one policy by which a loop
//!   with requests at its queues polls or waits ([`SPIN_TURNS`] turns
//!   without work polled without sleeping, then waits of at most
//!   [`BUSY_WAIT`]).
//! - [`HostedLoop`] and [`Step`] (`hosted.rs`): a loop that another
//!   engine's thread runs beside its own work (its descriptor, its wait
//!   hint, one turn, its end), so the NBD loops run on the ublk threads
//!   without either engine knowing the other.
//! - [`Heartbeat`] (`heartbeat.rs`): a loop's liveness counter, bumped
//!   once per turn, for the daemon's watchdog.

#![warn(unreachable_pub)]

mod heartbeat;
mod hosted;
mod pace;
mod rest;

pub use heartbeat::{Beat, Heartbeat};
pub use hosted::{HostedLoop, Step};
pub use pace::{Pace, Wait, BUSY_WAIT, REST_BOUND, SPIN_TURNS};
pub use rest::Rest;
