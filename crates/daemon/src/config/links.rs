//! `[links]`: whether the daemon links each map's ublk devices by name
//! and WWID ([`crate::links`]), and under which directory.

use super::error::Source;
use super::listen::absolute_path;
use super::raw::RawLinks;
use super::ConfigError;
use std::path::PathBuf;
use toml::Spanned;

/// The directory the links are made under unless `dev_dir` says.
pub const DEFAULT_DEV_DIR: &str = "/dev";

/// The directory the links go in; `None` with `enabled = false`.
pub(super) fn dev_dir(
    source: &Source<'_>,
    raw: Option<&Spanned<RawLinks>>,
) -> Result<Option<PathBuf>, ConfigError> {
    let Some(raw) = raw.map(Spanned::get_ref) else {
        return Ok(Some(PathBuf::from(DEFAULT_DEV_DIR)));
    };
    let dir = match &raw.dev_dir {
        Some(dir) => absolute_path(source, dir, "links: dev_dir".into())?,
        None => PathBuf::from(DEFAULT_DEV_DIR),
    };
    let enabled = raw.enabled.as_ref().is_none_or(|flag| *flag.get_ref());
    Ok(enabled.then_some(dir))
}
