//! How every NBD export's server runs: the settings the daemon is started
//! with (`mpio serve`'s flags), the same for every export and fixed for
//! the daemon's life (a reload does not change them).

use mpio_server::ServerConfig;

/// How every export's NBD server runs (the [`ServerConfig`] fields that are
/// not per export).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerSettings {
    /// Event loops serving every NBD export; 0: one per CPU.
    pub loops: usize,
    /// Depth of each event loop's queue over the map.
    pub queue_depth: usize,
    /// Most client connections at once, per export.
    pub max_connections: usize,
    /// How long (µs) an event loop polls after work before sleeping.
    pub idle_spin_us: u64,
    /// Most request and reply buffer bytes each export holds past its
    /// connections' first small requests ([`mpio_server::budget`]).
    pub max_buffered_bytes: usize,
}

impl Default for ServerSettings {
    fn default() -> Self {
        let server = ServerConfig::default();
        ServerSettings {
            loops: server.loops,
            queue_depth: server.queue_depth,
            max_connections: server.max_connections,
            idle_spin_us: server.idle_spin_us,
            max_buffered_bytes: server.max_buffered_bytes,
        }
    }
}
