//! Why the daemon could not start: the first map, export, socket or
//! thread that failed, named. [`super::Daemon::start`] stops what had
//! started before it returns one.

use crate::control::server::ControlError;
use crate::metrics::http::MetricsError;
use mpio_server::ServerError;
use mpio_transport::SetupError;

/// Why the daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The config file could not be read or checked.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The service manager's environment (`NOTIFY_SOCKET`,
    /// `WATCHDOG_USEC`) is not what the notify protocol says.
    #[error("{0}")]
    Notify(String),
    /// The config names no map.
    #[error("the config defines no map")]
    NoMaps,
    /// A map could not be built over its transports.
    #[error("map {map:?}: {source}")]
    Setup {
        /// The map.
        map: String,
        /// Why (boxed: a setup error is large, and rare).
        source: Box<SetupError>,
    },
    /// An export could not start.
    #[error("map {map:?} export {export:?}: {source}")]
    Export {
        /// The map.
        map: String,
        /// The export's name.
        export: String,
        /// Why.
        source: ServerError,
    },
    /// The control socket could not be opened.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// The metrics endpoint could not be opened.
    #[error("metrics: {0}")]
    Metrics(#[from] MetricsError),
    /// A thread could not be started.
    #[error("cannot start a thread: {0}")]
    Thread(#[from] std::io::Error),
}
