//! The one-line summary the service manager shows (`STATUS=` in the
//! notify protocol, `systemctl status`): maps, paths up and down, and
//! the exports served.

use super::state::State;
use mpio_transport::lock;

/// `3 maps, paths: 5 up, 1 down, exports: 2 NBD, 1 ublk`.
pub(super) fn service_status(state: &State) -> String {
    let maps = lock(&state.maps);
    let (mut up, mut down, mut nbd, mut ublk) = (0, 0, 0, 0);
    for running in maps.iter() {
        let map = running.map();
        let failed = map.paths().iter().filter(|path| path.is_failed()).count();
        down += failed;
        up += map.paths().len() - failed;
        nbd += running.servers.len();
        ublk += running.ublk_devices.len();
    }
    format!(
        "{} map{}, paths: {up} up, {down} down, exports: {nbd} NBD, {ublk} ublk",
        maps.len(),
        if maps.len() == 1 { "" } else { "s" }
    )
}
