//! The devices thread's round ([`crate::devices::Rounds`]): every map's
//! block-device paths get their access state; every map by WWID is
//! checked again from its config text, and reloaded (through
//! [`reload`], under the control lock like a control request) when the
//! devices with its WWID, or their priorities under `group_by_prio`,
//! changed. A rescan that finds no device leaves the map as it is: its
//! paths fail by themselves. A rescan that fails is logged once, not
//! every round, until it succeeds again.

use super::reload::reload;
use super::state::State;
use crate::config::DaemonConfig;
use crate::control::protocol::ReloadSource;
use crate::devices;
use mpio_transport::{lock, DeviceSlot};
use std::sync::Arc;

/// What the last rescan of each map by WWID could not do, so that it is
/// logged once, not every round.
#[derive(Debug, Default)]
pub(super) struct Rescans {
    failed: std::collections::HashMap<String, String>,
}

/// One round of [`crate::devices`] over every map (see the module docs).
pub(super) fn device_round(state: &State, rescans: &mut Rescans) {
    let sysfs = mpio_transport::blockdev::Sysfs::host();
    /// What a round needs of one map, copied out of the list.
    struct Watched {
        name: String,
        slot: Arc<DeviceSlot>,
        source: Option<Arc<str>>,
        table: String,
    }
    let maps: Vec<Watched> = lock(&state.maps)
        .iter()
        .map(|running| Watched {
            name: running.config.name.clone(),
            slot: Arc::clone(&running.slot),
            source: running.config.source.clone(),
            table: running.config.table.to_string(),
        })
        .collect();
    for Watched {
        name,
        slot,
        source,
        table,
    } in maps
    {
        let (map, handles, _) = slot.current();
        devices::refresh_access(&map, &handles, &sysfs);
        let Some(text) = source else {
            continue;
        };
        let found = DaemonConfig::parse(&text)
            .map_err(|error| error.to_string())
            .and_then(|config| {
                config
                    .map(&name)
                    .map(|map| map.table.to_string())
                    .ok_or_else(|| format!("no map named {name:?}"))
            });
        let outcome = match found {
            Ok(found) if found == table => Ok(()),
            Ok(_) => {
                let _control = lock(&state.control);
                let reload_source = ReloadSource::Config {
                    origin: "rescan".into(),
                    text: text.to_string(),
                };
                reload(state, &name, reload_source).map(|_| ())
            }
            Err(error) => Err(error),
        };
        match outcome {
            Ok(()) => {
                rescans.failed.remove(&name);
            }
            Err(error) => {
                if rescans.failed.get(&name) != Some(&error) {
                    tracing::warn!(map = %name, %error, "rescan by wwid: the map keeps its paths");
                    rescans.failed.insert(name, error);
                }
            }
        }
    }
}
