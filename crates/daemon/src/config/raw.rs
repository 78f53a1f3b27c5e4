//! The config as written: serde structs that mirror the TOML one to one,
//! every value kept with its byte span ([`Spanned`]) so that the checks in
//! [`super::check`] can name the line of a bad value. Unknown keys and
//! wrong types are refused here, by serde, with toml's span.

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use std::fmt;
use toml::Spanned;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    pub control_socket: Option<Spanned<String>>,
    pub metrics: Option<Spanned<RawMetrics>>,
    pub defaults: Option<Spanned<RawSettings>>,
    pub blacklist: Option<Spanned<RawBlacklist>>,
    pub blacklist_exceptions: Option<Spanned<RawBlacklist>>,
    pub ublk: Option<Spanned<RawUblkStop>>,
    pub user_friendly_names: Option<Spanned<bool>>,
    pub bindings_file: Option<Spanned<String>>,
    pub links: Option<Spanned<RawLinks>>,
    #[serde(default)]
    pub map: Vec<Spanned<RawMap>>,
}

/// `[ublk]`: what a clean stop does with the ublk devices.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawUblkStop {
    pub on_stop: Option<Spanned<String>>,
    pub keep_timeout_ms: Option<Spanned<i64>>,
}

/// `[links]`: the `/dev/mpio/NAME` and `/dev/disk/by-id/mpio-WWID` links
/// of the maps' ublk devices.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLinks {
    pub enabled: Option<Spanned<bool>>,
    pub dev_dir: Option<Spanned<String>>,
}

/// `[blacklist]`: patterns of devices that are never paths of a map by
/// WWID; `[blacklist_exceptions]`: patterns of devices it does not hold
/// out.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBlacklist {
    #[serde(default)]
    pub devnode: Vec<Spanned<String>>,
    #[serde(default)]
    pub wwid: Vec<Spanned<String>>,
}

/// `[metrics]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMetrics {
    pub listen: Spanned<String>,
}

/// Declares [`RawSettings`], [`RawMap`] (a map's own keys, then the
/// settings keys again, because serde's `flatten` does not combine with
/// `deny_unknown_fields`) and [`RawMap::take_settings`] from one list of
/// the settings keys.
macro_rules! settings_keys {
    ($($key:ident: $value:ty,)+) => {
        /// The keys a map takes from `[defaults]` unless it sets them
        /// itself.
        #[derive(Debug, Default, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub(super) struct RawSettings {
            $(pub $key: Option<Spanned<$value>>,)+
        }

        /// `[[map]]`: its own keys and the [`RawSettings`] keys.
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub(super) struct RawMap {
            pub name: Option<Spanned<String>>,
            pub wwid: Option<Spanned<String>>,
            pub size: Option<Spanned<Scalar>>,
            pub table: Option<Spanned<String>>,
            pub initial_group: Option<Spanned<i64>>,
            #[serde(default)]
            pub path: Vec<Spanned<RawPath>>,
            #[serde(default)]
            pub group: Vec<Spanned<RawGroup>>,
            #[serde(default)]
            pub export: Vec<Spanned<RawExport>>,
            $(pub $key: Option<Spanned<$value>>,)+
        }

        impl RawMap {
            /// The map's [`RawSettings`] keys, moved out.
            pub(crate) fn take_settings(&mut self) -> RawSettings {
                RawSettings {
                    $($key: self.$key.take(),)+
                }
            }
        }
    };
}

settings_keys! {
    selector: String,
    selector_args: Vec<Spanned<Scalar>>,
    path_grouping_policy: String,
    failback: Scalar,
    no_path_retry: Scalar,
    queue_if_no_path: bool,
    checker_interval_ms: i64,
    checker_timeout_ms: i64,
    io_timeout_ms: i64,
    fence_timeout_ms: i64,
    hedge_reads: bool,
    max_attempts: i64,
    marginal: RawMarginal,
}

/// `[defaults.marginal]` or `[map.marginal]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMarginal {
    pub enabled: Option<Spanned<bool>>,
    pub failures: Option<Spanned<i64>>,
    pub window_ms: Option<Spanned<i64>>,
    pub recovery_ms: Option<Spanned<i64>>,
}

/// `[[map.path]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPath {
    pub name: Spanned<String>,
    pub uri: Spanned<String>,
    pub prio: Option<Spanned<i64>>,
    pub numa_node: Option<Spanned<i64>>,
    pub args: Option<Spanned<Vec<Spanned<Scalar>>>>,
}

/// `[[map.group]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGroup {
    pub selector: Option<Spanned<String>>,
    pub selector_args: Option<Spanned<Vec<Spanned<Scalar>>>>,
    pub paths: Spanned<Vec<Spanned<String>>>,
}

/// `[[map.export]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExport {
    pub name: Option<Spanned<String>>,
    pub socket: Option<Spanned<String>>,
    pub tcp: Option<Spanned<String>>,
    pub ublk: Option<Spanned<RawUblk>>,
    pub socket_mode: Option<Spanned<String>>,
    pub socket_group: Option<Spanned<Scalar>>,
    pub max_connections: Option<Spanned<i64>>,
    #[serde(default)]
    pub read_only: bool,
}

/// `ublk = true` (the kernel picks the number), `false`, or `ublk = N`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum RawUblk {
    Flag(bool),
    Number(i64),
}

/// A value that may be written as an integer or a string (`size = 4096`
/// or `"4K"`, `failback = 10` or `"manual"`, selector arguments `[1]` or
/// `["1"]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Scalar {
    Integer(i64),
    Text(String),
}

impl Scalar {
    /// The value as TOML writes it (strings quoted), for error messages.
    pub(crate) fn toml(&self) -> String {
        match self {
            Scalar::Integer(value) => value.to_string(),
            Scalar::Text(text) => format!("{text:?}"),
        }
    }

    /// The value as a word (integers in decimal, strings as they are).
    pub(crate) fn word(&self) -> String {
        match self {
            Scalar::Integer(value) => value.to_string(),
            Scalar::Text(text) => text.clone(),
        }
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ScalarVisitor;

        impl Visitor<'_> for ScalarVisitor {
            type Value = Scalar;

            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("an integer or a string")
            }

            fn visit_i64<E: de::Error>(self, value: i64) -> Result<Scalar, E> {
                Ok(Scalar::Integer(value))
            }

            fn visit_u64<E: de::Error>(self, value: u64) -> Result<Scalar, E> {
                i64::try_from(value)
                    .map(Scalar::Integer)
                    .map_err(|_| E::invalid_value(de::Unexpected::Unsigned(value), &self))
            }

            fn visit_str<E: de::Error>(self, value: &str) -> Result<Scalar, E> {
                Ok(Scalar::Text(value.to_string()))
            }
        }

        deserializer.deserialize_any(ScalarVisitor)
    }
}
