//! One map started: built over the daemon's transports
//! ([`Transports::build_named`](mpio_transport::Transports::build_named)),
//! its checker added to the pool, its ublk devices made and its NBD
//! servers started, all on one [`DeviceSlot`](mpio_transport::DeviceSlot).
//! A ublk device gets its `/dev/mpio/NAME` links ([`crate::links`]).
//! A ublk device that cannot be made is logged and left out, and the
//! other exports serve; an NBD export that cannot start fails the map.
//! [`names_of`] and [`map_options`] turn a map's config into what
//! [`Transports`](mpio_transport::Transports) takes, for a start and a
//! reload alike.

use super::error::DaemonError;
use super::settings::ServerSettings;
use super::state::State;
use crate::config::MapConfig;
use crate::config::UblkNumber;
use crate::links::{kept_for_another, DeviceLinks};
use crate::running::{RunningMap, RunningUblk};
use mpio_server::{Server, ServerConfig, ServerError};
use mpio_transport::probe::SlotChecker;
use mpio_transport::PathNames;
use std::sync::Arc;

/// Each path word of `config` with the URI it names.
pub(super) fn names_of(config: &MapConfig) -> PathNames {
    config
        .paths
        .iter()
        .map(|path| (path.name.clone(), path.uri.clone()))
        .collect()
}

/// `config`'s map options, with the host's NUMA layout.
pub(super) fn map_options(config: &MapConfig) -> mpio_core::map::MapOptions {
    mpio_core::map::MapOptions {
        numa: mpio_transport::host::host_topology(),
        ..config.options()
    }
}

/// Builds one map and starts its checker and exports. A ublk device that
/// cannot be made is logged and left out, and the other exports serve.
pub(super) fn start_map(
    state: &State,
    config: MapConfig,
    settings: ServerSettings,
) -> Result<RunningMap, DaemonError> {
    let (transports, ublk) = (&state.transports, &state.ublk);
    let setup = |source| DaemonError::Setup {
        map: config.name.clone(),
        source: Box::new(source),
    };
    let device = transports
        .build_named(&config.table, map_options(&config), &names_of(&config))
        .map_err(setup)?;
    let slot = device.into_slot();
    let checker = state
        .checkers
        .add(SlotChecker::on_slot(Arc::clone(&slot), config.checker));
    let mut servers = Vec::with_capacity(config.exports.len());
    let mut ublk_devices = Vec::new();
    for export in &config.exports {
        if let Some(number) = export.ublk {
            let kept = match number {
                UblkNumber::Fixed(id) => kept_for_another(id, &config.name, config.wwid.as_deref()),
                UblkNumber::Any => None,
            };
            let made = match kept {
                Some(why) => Err(why),
                None => ublk
                    .add(&slot, number, export.read_only)
                    .map_err(|error| error.to_string()),
            };
            match made {
                Ok(device) => {
                    tracing::info!(
                        map = %config.name,
                        export = %export.name,
                        device = %device.path(),
                        data = device.data_mode(),
                        features = %device.features().join(", "),
                        "ublk device ready"
                    );
                    if let Some(dev_dir) = &config.device_links {
                        let wwid = config.wwid.as_deref();
                        let links = DeviceLinks::new(dev_dir, device.id(), &config.name, wwid);
                        ublk.link(&config.name, &device, links);
                    }
                    ublk_devices.push(RunningUblk {
                        export: export.name.clone(),
                        number,
                        read_only: export.read_only,
                        device,
                    });
                }
                Err(error) => {
                    tracing::error!(map = %config.name, export = %export.name, %error, "no ublk device");
                }
            }
        }
        if export.socket.is_none() && export.tcp.is_none() {
            continue;
        }
        let server_config = ServerConfig {
            unix_socket: export.socket.clone(),
            socket_mode: export.socket_mode,
            socket_group: export.socket_group,
            tcp: export.tcp,
            export_name: export.name.clone(),
            read_only: export.read_only,
            queue_depth: settings.queue_depth,
            max_connections: export.max_connections.unwrap_or(settings.max_connections),
            max_buffered_bytes: settings.max_buffered_bytes,
            ..ServerConfig::default()
        };
        let export_error = |source| DaemonError::Export {
            map: config.name.clone(),
            export: export.name.clone(),
            source,
        };
        let engine = state
            .nbd_engine(settings)
            .map_err(|error| export_error(ServerError::Start(error)))?;
        let server =
            Server::start_on(&engine, &server_config, Arc::clone(&slot)).map_err(export_error)?;
        servers.push(server);
    }
    tracing::info!(map = %config.name, paths = slot.map().paths().len(), "map started");
    Ok(RunningMap {
        config,
        slot,
        checker,
        servers,
        ublk_devices,
    })
}
