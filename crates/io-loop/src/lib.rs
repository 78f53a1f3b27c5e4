//! What mpio's I/O loops share, below the transports and both engines
//! (the NBD server's event loops and the ublk threads): no sockets, rings
//! or maps, only the rules a loop turns by.
//!
//! - [`Rest`] and [`Waker`] (`rest.rs`): what a path queue says about a
//!   thread about to wait, and the eventfd it may sleep on.

#![warn(unreachable_pub)]

mod rest;

pub use rest::{Rest, Waker};
