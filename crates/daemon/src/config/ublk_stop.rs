//! `[ublk]`: what a clean stop (SIGTERM, `systemctl stop` or `restart`)
//! does with the daemon's ublk devices.

use super::error::{quoted, Place, Source};
use super::raw::RawUblkStop;
use super::settings::milliseconds;
use super::ConfigError;
use std::time::Duration;
use toml::Spanned;

/// How long a kept device's I/O waits for the next daemon by default.
pub const DEFAULT_KEEP_TIMEOUT_MS: u64 = 120_000;
/// The longest `keep_timeout_ms`: a day.
pub const MAX_KEEP_TIMEOUT_MS: u64 = 86_400_000;

/// What a clean stop does with each ublk device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UblkOnStop {
    /// A device with a fixed number stays, its I/O waiting for the next
    /// daemon, which takes it over; if none has after `timeout`, the
    /// device is removed and its waiting I/O fails. A device numbered by
    /// the kernel is removed: no daemon could find it again.
    Keep {
        /// How long the I/O may wait for the next daemon.
        timeout: Duration,
    },
    /// Every device is removed once the block layer has the answers to
    /// what it sent.
    Remove,
}

impl Default for UblkOnStop {
    fn default() -> Self {
        UblkOnStop::Keep {
            timeout: Duration::from_millis(DEFAULT_KEEP_TIMEOUT_MS),
        }
    }
}

impl std::fmt::Display for UblkOnStop {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UblkOnStop::Keep { timeout } => {
                write!(formatter, "keep (for {} ms)", timeout.as_millis())
            }
            UblkOnStop::Remove => formatter.write_str("remove"),
        }
    }
}

/// Checks `[ublk]` (absent: the default).
pub(super) fn check(
    source: &Source<'_>,
    raw: Option<&Spanned<RawUblkStop>>,
) -> Result<UblkOnStop, ConfigError> {
    let Some(raw) = raw.map(Spanned::get_ref) else {
        return Ok(UblkOnStop::default());
    };
    let keep = match &raw.on_stop {
        None => true,
        Some(word) => match word.get_ref().as_str() {
            "keep" => true,
            "remove" => false,
            other => {
                return Err(source.error(
                    &Place::of(word, "ublk: on_stop"),
                    quoted(other),
                    "expected \"keep\" (the devices wait for the next daemon) or \"remove\"",
                ))
            }
        },
    };
    match (&raw.keep_timeout_ms, keep) {
        (None, true) => Ok(UblkOnStop::default()),
        (None, false) => Ok(UblkOnStop::Remove),
        (Some(ms), true) => {
            let ms = milliseconds(
                source,
                ms,
                "ublk: keep_timeout_ms".into(),
                1,
                MAX_KEEP_TIMEOUT_MS,
            )?;
            Ok(UblkOnStop::Keep {
                timeout: Duration::from_millis(ms),
            })
        }
        (Some(ms), false) => Err(source.error(
            &Place::of(ms, "ublk: keep_timeout_ms"),
            Some(ms.get_ref().to_string()),
            "a removed device waits for no one: keep_timeout_ms goes with on_stop = \"keep\"",
        )),
    }
}
