//! A map taken out of the daemon: by `mpio remove MAP`, or because a
//! reload of the config file no longer has it.
//!
//! # Rule
//! A map whose ublk device someone holds open (mounted, swap, a device
//! stacked on it, a process) is not removed: the answer names each
//! holder found (`crate::holders`). `--force` removes it anyway: its
//! disk goes at once and the holders' I/O fails; the device itself is
//! deleted once they close it (its number stays taken until then).
//! Otherwise each device is claimed exclusively before anything stops,
//! so nothing mounts it meanwhile; then the map's NBD exports drain
//! (their requests read are answered and flushed, within
//! [`REMOVE_DEADLINE`]), its ublk devices are removed and the map
//! flushed, and its checker stops. Each step is logged and told in the
//! answer.

use super::state::State;
use crate::config::UblkOnStop;
use crate::holders::Claim;
use mpio_transport::lock;
use std::collections::VecDeque;
use std::path::Path;
use std::time::Duration;

/// How long a removed map's NBD exports have to answer the requests they
/// read and flush, as at a shutdown.
pub(super) const REMOVE_DEADLINE: Duration = Duration::from_secs(30);

/// Takes map `name` out of the daemon (see the module docs); returns what
/// was done, a line per export.
///
/// # Errors
/// No such map, or one of its devices is held (unless `force`): nothing
/// was changed.
pub(super) fn remove_map(state: &State, name: &str, force: bool) -> Result<Vec<String>, String> {
    let (running, mut claims) = {
        let mut maps = lock(&state.maps);
        let index = super::dispatch::position(&maps, name)?;
        let mut claims = VecDeque::new();
        if !force {
            for device in &maps[index].ublk_devices {
                let path = device.device.path();
                match Claim::take(Path::new(&path)) {
                    Ok(claim) => claims.push_back(claim),
                    Err(holders) => {
                        return Err(format!(
                            "map {name:?} not removed: {path} is in use: {}; unmount or close \
                             it first, or remove with --force (its holders' I/O then fails)",
                            holders.join("; ")
                        ))
                    }
                }
            }
        }
        (maps.remove(index), claims)
    };
    let mut done = Vec::new();
    for server in running.servers {
        let export = server.export().name.clone();
        let report = server.shutdown(REMOVE_DEADLINE);
        tracing::info!(map = %name, %export, "export of a removed map shut down: {report}");
        done.push(format!("export {export}: {report}"));
    }
    for device in running.ublk_devices {
        let export = device.export.clone();
        let claim = claims.pop_front();
        let report = state.ublk.stop(
            device,
            &running.slot,
            UblkOnStop::Remove,
            REMOVE_DEADLINE,
            claim,
        );
        tracing::info!(map = %name, %export, "device of a removed map: {report}");
        done.push(format!("export {export}: {report}"));
    }
    running.checker.stop();
    Ok(done)
}
