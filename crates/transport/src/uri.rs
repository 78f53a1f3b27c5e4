//! Path words: the transport URIs a table may name directly.
//!
//! - `null:<size>[?latency_ns=<ns>]`: a null path of `size` bytes
//!   (suffixes `K`, `M`, `G`, `T`, powers of 1024).
//! - `memory:<disk>#<port>`: port `port` of RAM disk `disk`.
//! - `file:<absolute path>[?direct=0|1]`: a regular file or block device,
//!   with `O_DIRECT` unless `direct=0` asks for buffered I/O (the path
//!   itself may not contain `?`).
//! - `nbd://host[:port]/export`, `nbd+unix:///export?socket=/path`: an
//!   NBD server's export (see `crate::nbd::address`).
//! - dm's own path words, so that a `dmsetup table` line serves as it
//!   is: an absolute path (`/dev/sdb`) is `file:` that path (options
//!   and label included), and a
//!   device number (`8:16`) is `file:/dev/block/8:16`, the device's
//!   udev link (opened through sysfs where udev made none, see
//!   `crate::blockdev::node_of`). The word itself names the path, as
//!   dm's table prints it.
//!
//! A path word is in a table once (its word names the path in status,
//! messages, reloads and metrics), so several paths to one endpoint (the
//! benchmark's null paths, two connections to one NBD server) tell
//! themselves apart with a label: a null, file or nbd word may end in
//! `#<label>` (letters, digits, `-`, `_`, `.`), which names the path and
//! leads nowhere else: `null:4G#1`, `null:4G#2`.

/// Where a path leads, parsed from its word.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// A `null` path.
    Null {
        /// Size in bytes.
        size_bytes: u64,
        /// Completion latency in ns.
        latency_ns: u64,
    },
    /// A port of a memory disk.
    Memory {
        /// Disk name.
        disk: String,
        /// Port name.
        port: String,
    },
    /// A file or block device.
    File {
        /// Absolute path.
        path: String,
        /// Open with `O_DIRECT`.
        direct: bool,
    },
    /// An NBD server's export.
    Nbd(crate::nbd::address::Address),
}

/// A path word that names no transport, or names one badly.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("path {word:?}: {reason}")]
pub struct UriError {
    /// The path word.
    pub word: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Parses a size with an optional binary suffix (`4G`, `512`, `64K`).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let (digits, multiplier) = match text.char_indices().last() {
        Some((at, 'K' | 'k')) => (&text[..at], 1u64 << 10),
        Some((at, 'M' | 'm')) => (&text[..at], 1 << 20),
        Some((at, 'G' | 'g')) => (&text[..at], 1 << 30),
        Some((at, 'T' | 't')) => (&text[..at], 1 << 40),
        _ => (text, 1),
    };
    let value: u64 = digits
        .parse()
        .map_err(|_| format!("size {text:?} is not a number with an optional K, M, G or T"))?;
    value
        .checked_mul(multiplier)
        .ok_or_else(|| format!("size {text:?} is too large"))
}

/// Writes `bytes` in [`parse_size`]'s form, with the largest suffix that
/// divides it exactly (`4G`, `1536K`, `512`).
pub fn size_word(bytes: u64) -> String {
    for (shift, suffix) in [(40, 'T'), (30, 'G'), (20, 'M'), (10, 'K')] {
        if bytes != 0 && bytes.is_multiple_of(1u64 << shift) {
            return format!("{}{suffix}", bytes >> shift);
        }
    }
    bytes.to_string()
}

impl Endpoint {
    /// Whether a path of this kind serves an I/O whose buffer is a ublk
    /// request's own pages, registered in its thread's ring
    /// (`Buffer::kernel`): a file or block device reads and writes them
    /// on that ring, and a null path touches no data; a memory or NBD
    /// path needs the bytes in mpio. [`crate::PathHandle::takes_kernel_buffers`]
    /// says the same of the path built from it.
    pub fn takes_kernel_buffers(&self) -> bool {
        matches!(self, Endpoint::File { .. } | Endpoint::Null { .. })
    }

    /// Parses a path word.
    ///
    /// # Errors
    /// A [`UriError`] naming the word and what is wrong.
    pub fn parse(word: &str) -> Result<Endpoint, UriError> {
        let error = |reason: String| UriError {
            word: word.to_string(),
            reason,
        };
        if word.starts_with('/') {
            // `file:` with its options and label; errors name the word.
            return Endpoint::parse(&format!("file:{word}")).map_err(|file| error(file.reason));
        }
        if let Some(numbers) = device_number(word) {
            let (major, minor) = numbers.map_err(error)?;
            return Ok(Endpoint::File {
                path: format!("/dev/block/{major}:{minor}"),
                direct: true,
            });
        }
        let (scheme, rest) = word.split_once(':').ok_or_else(|| {
            error("not a transport URI (null:<size>, memory:<disk>#<port>, file:<path>)".into())
        })?;
        // A label (see the module docs) names the path, not the endpoint.
        let rest = match rest.rsplit_once('#') {
            Some((endpoint, label)) if scheme != "memory" && is_name(label) => endpoint,
            _ => rest,
        };
        match scheme {
            "null" => {
                let (size, query) = rest.split_once('?').unwrap_or((rest, ""));
                let size_bytes = parse_size(size).map_err(error)?;
                if size_bytes == 0 {
                    return Err(error("a null path needs a size above 0".into()));
                }
                let mut latency_ns = 0;
                for pair in query.split('&').filter(|pair| !pair.is_empty()) {
                    match pair.split_once('=') {
                        Some(("latency_ns", value)) => {
                            latency_ns = value.parse().map_err(|_| {
                                error(format!("latency_ns {value:?} is not a number"))
                            })?;
                        }
                        _ => {
                            return Err(error(format!(
                                "unknown null option {pair:?} (latency_ns=N)"
                            )))
                        }
                    }
                }
                Ok(Endpoint::Null {
                    size_bytes,
                    latency_ns,
                })
            }
            "memory" => {
                let (disk, port) = rest
                    .split_once('#')
                    .ok_or_else(|| error("memory paths are memory:<disk>#<port>".into()))?;
                if !is_name(disk) || !is_name(port) {
                    return Err(error(
                        "disk and port names are letters, digits, - _ and .".into(),
                    ));
                }
                Ok(Endpoint::Memory {
                    disk: disk.to_string(),
                    port: port.to_string(),
                })
            }
            "file" => {
                let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
                if !path.starts_with('/') {
                    return Err(error(
                        "file paths are absolute: file:/dev/sdb, file:/srv/lun.img".into(),
                    ));
                }
                let mut direct = true;
                for pair in query.split('&').filter(|pair| !pair.is_empty()) {
                    direct = match pair {
                        "direct=1" => true,
                        "direct=0" => false,
                        _ => {
                            return Err(error(format!(
                                "unknown file option {pair:?} (direct=0 or direct=1)"
                            )))
                        }
                    };
                }
                Ok(Endpoint::File {
                    path: path.to_string(),
                    direct,
                })
            }
            "nbd" | "nbd+unix" => crate::nbd::address::Address::parse(scheme, rest)
                .map(Endpoint::Nbd)
                .map_err(error),
            _ => Err(error(format!(
                "unknown transport {scheme:?} (null, memory, file, nbd, nbd+unix)"
            ))),
        }
    }
}

/// `MAJOR:MINOR` as dm writes a device's numbers (`8:16`), if the word
/// has that form; an error if the numbers are past what the kernel's
/// device numbers hold (12 bits of major, 20 of minor), as dm refuses
/// them.
fn device_number(word: &str) -> Option<Result<(u32, u32), String>> {
    let (major, minor) = word.split_once(':')?;
    let digits = |text: &str| !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit());
    if !digits(major) || !digits(minor) {
        return None;
    }
    let fits = |text: &str, bits: u32| {
        text.parse::<u32>()
            .ok()
            .filter(|number| *number >> bits == 0)
    };
    Some(
        fits(major, 12)
            .zip(fits(minor, 20))
            .ok_or_else(|| "a device number past 4095:1048575".to_string()),
    )
}

/// A disk, port or label name: letters, digits, `-`, `_` and `.`.
fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_words() {
        assert_eq!(parse_size("4G"), Ok(4 << 30));
        assert_eq!(parse_size("512"), Ok(512));
        for bytes in [0, 512, 1536 << 10, 4 << 30, 3 << 40, 4097] {
            assert_eq!(parse_size(&size_word(bytes)), Ok(bytes));
        }
        assert_eq!(size_word(4 << 30), "4G");
        assert!(parse_size("x").is_err());
        assert!(parse_size("99999999999T").is_err());
        assert_eq!(
            Endpoint::parse("null:1M?latency_ns=250"),
            Ok(Endpoint::Null {
                size_bytes: 1 << 20,
                latency_ns: 250
            })
        );
        assert_eq!(
            Endpoint::parse("memory:disk0#port1"),
            Ok(Endpoint::Memory {
                disk: "disk0".into(),
                port: "port1".into()
            })
        );
        // `file:` words, and dm's words for a device (its path, or its
        // numbers); a bare path takes `file:`'s options and label.
        for (word, path, direct) in [
            ("file:/srv/lun.img", "/srv/lun.img", true),
            ("file:/dev/shm/x?direct=0", "/dev/shm/x", false),
            ("/dev/sdb", "/dev/sdb", true),
            ("8:16", "/dev/block/8:16", true),
            ("/dev/sdb?direct=0#a", "/dev/sdb", false),
        ] {
            assert_eq!(
                Endpoint::parse(word),
                Ok(Endpoint::File {
                    path: path.into(),
                    direct
                }),
                "{word}"
            );
        }
        // A label names the path and leads where the word without it does.
        for (labelled, plain) in [
            ("null:4G#1", "null:4G"),
            ("null:1M?latency_ns=250#slow-2", "null:1M?latency_ns=250"),
            ("file:/srv/lun.img?direct=0#b", "file:/srv/lun.img?direct=0"),
            (
                "nbd+unix:///e?socket=/run/s.sock#a",
                "nbd+unix:///e?socket=/run/s.sock",
            ),
            ("nbd://127.0.0.1:10809/e#second", "nbd://127.0.0.1:10809/e"),
        ] {
            assert_eq!(
                Endpoint::parse(labelled),
                Endpoint::parse(plain),
                "{labelled}"
            );
            assert!(Endpoint::parse(plain).is_ok(), "{plain}");
        }
        for bad in [
            "null:4G#",
            "null:4G#a/b",
            "memory:disk0#port1#2",
            "file:relative.img",
            "file:",
            "file:/x?direct=2",
            "file:/x?sync=1",
            "8:",
            ":16",
            "8:16a",
            "99999999999:1",
            "4096:0",
            "8:1048576",
            "/dev/sdb?sync=1",
            "null:",
            "null:0",
            "null:1M?x=1",
            "memory:disk0",
            "memory:#p",
            "nvme:x",
        ] {
            let error = Endpoint::parse(bad).unwrap_err();
            assert_eq!(error.word, bad);
        }
    }
}
