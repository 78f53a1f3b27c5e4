//! NBD path words, as the NBD URI standard writes them:
//!
//! - `nbd://host[:port]/[export]`: TCP (port 10809 by default; an IPv6
//!   host in brackets, `nbd://[::1]:10809/disk`);
//! - `nbd+unix:///[export]?socket=/path`: a unix socket.
//!
//! The export name is the path after the first `/` (empty: the server's
//! default export). Percent-encoding and TLS (`nbds`) are not supported
//! and give a clear error.

use mpio_nbd::consts::{DEFAULT_PORT, MAX_NAME_LEN};
use std::fmt;
use std::path::PathBuf;

/// Where an NBD server listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Socket {
    /// A TCP host and port.
    Tcp {
        /// Host name or address (IPv6 without brackets).
        host: String,
        /// Port.
        port: u16,
    },
    /// A unix socket.
    Unix(PathBuf),
}

/// An NBD server and the export to use on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Address {
    /// Where the server listens.
    pub socket: Socket,
    /// The export's name (`""`: the default export).
    pub export: String,
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.socket {
            Socket::Tcp { host, port } if host.contains(':') => {
                write!(f, "nbd://[{host}]:{port}/{}", self.export)
            }
            Socket::Tcp { host, port } => write!(f, "nbd://{host}:{port}/{}", self.export),
            Socket::Unix(path) => {
                write!(f, "nbd+unix:///{}?socket={}", self.export, path.display())
            }
        }
    }
}

impl Address {
    /// Parses the part of an `nbd` or `nbd+unix` word after `scheme:`.
    ///
    /// # Errors
    /// A reason naming what is wrong (the caller adds the word).
    pub fn parse(scheme: &str, rest: &str) -> Result<Address, String> {
        let rest = rest
            .strip_prefix("//")
            .ok_or_else(|| format!("{scheme} URIs start with {scheme}://"))?;
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, export) = match rest.split_once('/') {
            Some((authority, export)) => (authority, export),
            None => (rest, ""),
        };
        if export.contains('%') {
            return Err("percent-encoded export names are not supported".into());
        }
        if export.len() > MAX_NAME_LEN {
            return Err(format!("export name longer than {MAX_NAME_LEN} bytes"));
        }
        let socket = match scheme {
            "nbd" => {
                if !query.is_empty() {
                    return Err(format!("nbd:// URIs take no query (found {query:?})"));
                }
                parse_host_port(authority)?
            }
            "nbd+unix" => {
                if !authority.is_empty() {
                    return Err(format!(
                        "nbd+unix URIs have no host (found {authority:?}): nbd+unix:///export?socket=/path"
                    ));
                }
                let mut socket = None;
                for pair in query.split('&').filter(|pair| !pair.is_empty()) {
                    match pair.split_once('=') {
                        Some(("socket", path)) if !path.is_empty() => {
                            socket = Some(PathBuf::from(path));
                        }
                        _ => return Err(format!("unknown nbd+unix query {pair:?} (socket=/path)")),
                    }
                }
                Socket::Unix(socket.ok_or("nbd+unix URIs need ?socket=/path")?)
            }
            _ => return Err(format!("unsupported NBD scheme {scheme:?} (nbd, nbd+unix)")),
        };
        Ok(Address {
            socket,
            export: export.to_string(),
        })
    }
}

fn parse_host_port(authority: &str) -> Result<Socket, String> {
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        let (host, after) = bracketed
            .split_once(']')
            .ok_or("an IPv6 host needs its closing ]")?;
        match after {
            "" => (host, None),
            _ => (
                host,
                Some(
                    after
                        .strip_prefix(':')
                        .ok_or("after [host] comes :port or /")?,
                ),
            ),
        }
    } else {
        match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err("nbd:// URIs need a host: nbd://host[:port]/export".into());
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(port) => port
            .parse()
            .map_err(|_| format!("port {port:?} is not a number from 0 to 65535"))?,
    };
    Ok(Socket::Tcp {
        host: host.to_string(),
        port,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(host: &str, port: u16, export: &str) -> Address {
        Address {
            socket: Socket::Tcp {
                host: host.into(),
                port,
            },
            export: export.into(),
        }
    }

    #[test]
    fn parses_and_prints_tcp_and_unix() {
        let cases = [
            (
                "nbd",
                "//10.0.0.1:10810/export",
                tcp("10.0.0.1", 10810, "export"),
            ),
            ("nbd", "//localhost", tcp("localhost", 10809, "")),
            ("nbd", "//[::1]:99/a/b", tcp("::1", 99, "a/b")),
            (
                "nbd+unix",
                "///disk?socket=/run/a.sock",
                Address {
                    socket: Socket::Unix("/run/a.sock".into()),
                    export: "disk".into(),
                },
            ),
            (
                "nbd+unix",
                "///?socket=/run/a.sock",
                Address {
                    socket: Socket::Unix("/run/a.sock".into()),
                    export: String::new(),
                },
            ),
        ];
        for (scheme, rest, expected) in cases {
            let address = Address::parse(scheme, rest).unwrap();
            assert_eq!(address, expected);
            let printed = address.to_string();
            let (scheme, rest) = printed.split_once(':').unwrap();
            assert_eq!(Address::parse(scheme, rest).unwrap(), expected);
        }
    }

    #[test]
    fn refuses_bad_words_with_a_reason() {
        for (scheme, rest, reason) in [
            ("nbd", "host/x", "start with"),
            ("nbd", "///x", "need a host"),
            ("nbd", "//h:99999/x", "port"),
            ("nbd", "//h/x?socket=/a", "no query"),
            ("nbd", "//[::1/x", "closing ]"),
            ("nbd+unix", "///x", "socket=/path"),
            ("nbd+unix", "//host/x?socket=/a", "no host"),
            ("nbd+unix", "///x?sock=/a", "unknown nbd+unix query"),
            ("nbd", "//h/a%20b", "percent"),
            ("nbds", "//h/x", "unsupported"),
        ] {
            let error = Address::parse(scheme, rest).unwrap_err();
            assert!(error.contains(reason), "{scheme}:{rest}: {error}");
        }
    }
}
