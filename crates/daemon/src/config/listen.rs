//! Exports and the addresses the daemon listens on (the control socket,
//! metrics, NBD exports, ublk device numbers): each checked, and no
//! address used twice.

use super::error::{quoted, Place, Source};
use super::raw::{RawExport, RawUblk, Scalar};
use super::{ConfigError, ExportConfig, UblkNumber};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use toml::Spanned;

/// Longest NBD export name (the protocol's limit).
pub const MAX_EXPORT_NAME_BYTES: usize = 4096;

/// One `[[map.export]]`.
pub(super) fn check_export(
    source: &Source<'_>,
    export: &Spanned<RawExport>,
    index: usize,
    context: &str,
    map_name: &str,
    listeners: &mut Listeners,
) -> Result<ExportConfig, ConfigError> {
    let raw = export.get_ref();
    let label = match &raw.name {
        Some(name) => format!("{context} export {:?}", name.get_ref()),
        None => format!("{context} export[{index}]"),
    };
    let name = match &raw.name {
        Some(name) => {
            let text = name.get_ref();
            if text.is_empty() || text.len() > MAX_EXPORT_NAME_BYTES {
                return Err(source.error(
                    &Place::of(name, format!("{label}: name")),
                    quoted(text),
                    format!("an export name is 1 to {MAX_EXPORT_NAME_BYTES} bytes"),
                ));
            }
            text.clone()
        }
        None => map_name.to_string(),
    };
    let ublk = match &raw.ublk {
        Some(ublk) => {
            let place = Place::of(ublk, format!("{label}: ublk"));
            let number = ublk_number(source, ublk, &place)?;
            if let Some(UblkNumber::Fixed(number)) = number {
                listeners.ublk(source, number, &place)?;
            }
            number
        }
        None => None,
    };
    if raw.socket.is_none() && raw.tcp.is_none() && ublk.is_none() {
        return Err(source.error(
            &Place::of(export, label),
            None,
            "an export needs a socket, a tcp address, ublk, or several of them",
        ));
    }
    let socket = match &raw.socket {
        Some(socket) => {
            let place = Place::of(socket, format!("{label}: socket"));
            let path = absolute_path(source, socket, place.key.clone())?;
            listeners.unix(source, &path, &place, socket.get_ref())?;
            Some(path)
        }
        None => None,
    };
    let tcp = match &raw.tcp {
        Some(tcp) => {
            let place = Place::of(tcp, format!("{label}: tcp"));
            let address = socket_address(source, tcp, &place)?;
            listeners.tcp(source, address, &place, tcp.get_ref())?;
            Some(address)
        }
        None => None,
    };
    let socket_mode = match &raw.socket_mode {
        Some(mode) => {
            let place = Place::of(mode, format!("{label}: socket_mode"));
            let text = mode.get_ref();
            u32::from_str_radix(text, 8)
                .ok()
                .filter(|bits| *bits <= 0o777)
                .ok_or_else(|| {
                    source.error(
                        &place,
                        quoted(text),
                        "expected octal permission bits, 0 to 777 (\"0660\")",
                    )
                })?
        }
        None => DEFAULT_SOCKET_MODE,
    };
    let socket_group = match &raw.socket_group {
        Some(group) => {
            let place = Place::of(group, format!("{label}: socket_group"));
            let id = match group.get_ref() {
                Scalar::Integer(id) => u32::try_from(*id).ok(),
                Scalar::Text(name) => group_id(name),
            };
            Some(id.ok_or_else(|| {
                source.error(
                    &place,
                    Some(group.get_ref().toml()),
                    "expected a group name of /etc/group or a group id",
                )
            })?)
        }
        None => None,
    };
    if raw.socket.is_none() && (raw.socket_mode.is_some() || raw.socket_group.is_some()) {
        return Err(source.error(
            &Place::of(export, label),
            None,
            "socket_mode and socket_group need a socket",
        ));
    }
    let max_connections = match &raw.max_connections {
        Some(count) => {
            let place = Place::of(count, format!("{label}: max_connections"));
            let value = usize::try_from(*count.get_ref())
                .ok()
                .filter(|value| (1..=MAX_CONNECTIONS).contains(value))
                .ok_or_else(|| {
                    source.error(
                        &place,
                        Some(count.get_ref().to_string()),
                        format!("expected 1 to {MAX_CONNECTIONS} connections"),
                    )
                })?;
            Some(value)
        }
        None => None,
    };
    Ok(ExportConfig {
        name,
        socket,
        socket_mode,
        socket_group,
        tcp,
        ublk,
        max_connections,
        read_only: raw.read_only,
    })
}

/// `ublk = true | false | N`: whether the export is a ublk device, and
/// which.
fn ublk_number(
    source: &Source<'_>,
    ublk: &Spanned<RawUblk>,
    place: &Place,
) -> Result<Option<UblkNumber>, ConfigError> {
    match ublk.get_ref() {
        RawUblk::Flag(false) => Ok(None),
        RawUblk::Flag(true) => Ok(Some(UblkNumber::Any)),
        RawUblk::Number(number) => match u32::try_from(*number) {
            Ok(number) if number < MAX_UBLK_NUMBER => Ok(Some(UblkNumber::Fixed(number))),
            _ => Err(source.error(
                place,
                Some(number.to_string()),
                format!(
                    "a ublk device number is 0 to {} (or true: any)",
                    MAX_UBLK_NUMBER - 1
                ),
            )),
        },
    }
}

/// ublk device numbers are below 2^20 (the kernel's minor numbers).
const MAX_UBLK_NUMBER: u32 = 1 << 20;

/// Most connections an export may be given (each holds buffers and a
/// descriptor; see docs/SECURITY.md).
pub(crate) const MAX_CONNECTIONS: usize = 65_536;

/// An export socket's mode unless the config says otherwise: only its
/// owner may connect, since whoever connects can write the disk.
pub const DEFAULT_SOCKET_MODE: u32 = 0o600;

/// The id of group `name` in `/etc/group` (`name:password:id:members`),
/// or of a group written as its id.
fn group_id(name: &str) -> Option<u32> {
    if let Ok(id) = name.parse() {
        return Some(id);
    }
    let groups = std::fs::read_to_string("/etc/group").ok()?;
    groups.lines().find_map(|line| {
        let mut fields = line.split(':');
        (fields.next()? == name).then_some(())?;
        fields.nth(1)?.parse().ok()
    })
}

/// Every address the config listens on, to refuse a second use of one.
#[derive(Default)]
pub(super) struct Listeners {
    unix: HashMap<PathBuf, Place>,
    tcp: Vec<(SocketAddr, Place)>,
    ublk: HashMap<u32, Place>,
}

impl Listeners {
    /// A ublk device number is one export's.
    pub(crate) fn ublk(
        &mut self,
        source: &Source<'_>,
        number: u32,
        place: &Place,
    ) -> Result<(), ConfigError> {
        if let Some(first) = self.ublk.get(&number) {
            return Err(taken(source, place, &number.to_string(), first));
        }
        self.ublk.insert(number, place.clone());
        Ok(())
    }

    pub(crate) fn unix(
        &mut self,
        source: &Source<'_>,
        path: &PathBuf,
        place: &Place,
        written: &str,
    ) -> Result<(), ConfigError> {
        if let Some(first) = self.unix.get(path) {
            return Err(taken(source, place, written, first));
        }
        self.unix.insert(path.clone(), place.clone());
        Ok(())
    }

    /// Two TCP listeners clash on the same port when their addresses are
    /// equal or either is the unspecified address (it takes the port on
    /// every address). Port 0 (any free port) never clashes.
    pub(crate) fn tcp(
        &mut self,
        source: &Source<'_>,
        address: SocketAddr,
        place: &Place,
        written: &str,
    ) -> Result<(), ConfigError> {
        for (other, first) in &self.tcp {
            let clash = address.port() != 0
                && address.port() == other.port()
                && (address.ip() == other.ip()
                    || address.ip().is_unspecified()
                    || other.ip().is_unspecified());
            if clash {
                return Err(taken(source, place, written, first));
            }
        }
        self.tcp.push((address, place.clone()));
        Ok(())
    }
}

/// An absolute file system path.
pub(super) fn absolute_path(
    source: &Source<'_>,
    path: &Spanned<String>,
    key: String,
) -> Result<PathBuf, ConfigError> {
    let text = path.get_ref();
    if !text.starts_with('/') {
        return Err(source.error(
            &Place::of(path, key),
            quoted(text),
            "expected an absolute path",
        ));
    }
    Ok(PathBuf::from(text))
}

/// An IP address and port.
pub(super) fn socket_address(
    source: &Source<'_>,
    text: &Spanned<String>,
    place: &Place,
) -> Result<SocketAddr, ConfigError> {
    text.get_ref().parse().map_err(|_| {
        source.error(
            place,
            quoted(text.get_ref()),
            "expected an IP address and port (127.0.0.1:10809, [::1]:10809)",
        )
    })
}

/// The error for `written`, at `place`, naming the key at `first` that
/// already listens there.
fn taken(source: &Source<'_>, place: &Place, written: &str, first: &Place) -> ConfigError {
    source.error(
        place,
        quoted(written),
        format!(
            "already listened on by {} (line {})",
            first.key,
            source.line_column(first.span.start).0
        ),
    )
}
