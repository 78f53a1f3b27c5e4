//! What a clean shutdown ([`super::Daemon::shutdown`]) reports: one
//! record per export, NBD server or ublk device, with its map's name and
//! whether it abandoned anything.

use crate::ublk::UblkShutdown;
use mpio_server::ShutdownReport;

/// What one export's clean shutdown did ([`super::Daemon::shutdown`]).
#[derive(Clone, Debug)]
pub struct ExportShutdown {
    /// The map exported.
    pub map: String,
    /// The export's name.
    pub export: String,
    /// What it did and abandoned.
    pub report: ExportReport,
}

/// An NBD server's or a ublk device's shutdown.
#[derive(Clone, Debug)]
pub enum ExportReport {
    /// The NBD server drained, flushed and closed.
    Nbd(ShutdownReport),
    /// The ublk device was removed and the map flushed.
    Ublk(UblkShutdown),
}

impl ExportReport {
    /// Nothing was abandoned.
    pub fn is_clean(&self) -> bool {
        match self {
            ExportReport::Nbd(report) => report.is_clean(),
            ExportReport::Ublk(report) => report.is_clean(),
        }
    }
}

impl std::fmt::Display for ExportReport {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExportReport::Nbd(report) => report.fmt(formatter),
            ExportReport::Ublk(report) => report.fmt(formatter),
        }
    }
}
