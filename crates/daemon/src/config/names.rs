//! Each map's name: its own `name` (multipath.conf's `alias`), which
//! always wins; else, for a map by WWID, with `user_friendly_names = true`
//! the name the bindings file ([`super::bindings`]) binds to its WWID —
//! a new binding written there for a WWID that has none — and without,
//! the WWID itself (in multipath-tools' form), as multipath names maps.
//!
//! # Contract
//! - A map's own `name` is never written to the bindings file, and a new
//!   binding never takes a name a map of the config has.
//! - New bindings are made for the WWIDs without one in sorted order, so
//!   the names depend on the config's set of WWIDs and the file only:
//!   not on the order of the maps in the file, nor on the order their
//!   devices are found in. A name once bound stays its WWID's, so a
//!   restart, a reboot, a reload or a rescan gives a map the name it has.
//! - The file is read, and written when a binding was added, through the
//!   [`PathSource`] (the host's files; none for the fuzz target).
//!
//! # Errors
//! A map that is not by WWID and has no `name`; a WWID that is not a
//! name; a bindings file that cannot be read, is malformed (the error
//! names the file and its line), binds a map's WWID to another map's
//! name, or cannot be written.

use super::bindings::{Bindings, DEFAULT_BINDINGS_FILE};
use super::check::is_name;
use super::error::{quoted, Place, Source};
use super::listen::absolute_path;
use super::raw::RawConfig;
use super::wwid::{multipath_form, PathSource};
use super::ConfigError;
use std::collections::HashSet;
use std::path::PathBuf;
use toml::Spanned;

/// The name of each map of `raw`, in file order, spanned where it was
/// written: at `name`, else at the map's `wwid`.
pub(super) fn map_names(
    source: &Source<'_>,
    raw: &RawConfig,
    found: &dyn PathSource,
) -> Result<Vec<Spanned<String>>, ConfigError> {
    let file = raw
        .bindings_file
        .as_ref()
        .map(|file| absolute_path(source, file, "bindings_file".into()))
        .transpose()?;
    let friendly = raw
        .user_friendly_names
        .as_ref()
        .is_some_and(|flag| *flag.get_ref());
    let mut unnamed = Vec::new();
    for (index, map) in raw.map.iter().enumerate() {
        let map = map.get_ref();
        match (&map.name, &map.wwid) {
            (Some(_), _) => {}
            (None, Some(wwid)) => unnamed.push((index, wwid)),
            (None, None) => {
                return Err(source.error(
                    &Place::of(&raw.map[index], format!("map[{index}]: name")),
                    None,
                    "name missing: a map needs a name unless it is a map by wwid (then \
                     user_friendly_names or its WWID names it)",
                ))
            }
        }
    }
    let mut names: Vec<Option<Spanned<String>>> = raw
        .map
        .iter()
        .map(|map| map.get_ref().name.clone())
        .collect();
    if friendly && !unnamed.is_empty() {
        let wwids: Vec<&str> = unnamed
            .iter()
            .map(|(_, wwid)| wwid.get_ref().as_str())
            .collect();
        let named = friendly_names(source, raw, file, &wwids, found)?;
        for ((index, wwid), name) in unnamed.iter().zip(named) {
            names[*index] = Some(Spanned::new(wwid.span(), name));
        }
    } else {
        for (index, wwid) in unnamed {
            let name = multipath_form(wwid.get_ref());
            if !is_name(&name) {
                return Err(source.error(
                    &Place::of(wwid, format!("map[{index}]: wwid")),
                    quoted(wwid.get_ref()),
                    format!(
                        "a map by wwid without a name is named by its WWID, but {name:?} is no \
                         name (1 to {} letters, digits, '.', '_' or '-'): give the map a name, \
                         or set user_friendly_names = true",
                        super::MAX_NAME_BYTES
                    ),
                ));
            }
            names[index] = Some(Spanned::new(wwid.span(), name));
        }
    }
    Ok(names
        .into_iter()
        .map(|name| name.expect("named above"))
        .collect())
}

/// The bindings file's names for `wwids` (the file at `file`, else the
/// default), binding the new ones and writing the file if it gained any.
fn friendly_names(
    source: &Source<'_>,
    raw: &RawConfig,
    file: Option<PathBuf>,
    wwids: &[&str],
    found: &dyn PathSource,
) -> Result<Vec<String>, ConfigError> {
    let place = match &raw.bindings_file {
        Some(given) => Place::of(given, "bindings_file"),
        None => Place::of(
            raw.user_friendly_names.as_ref().expect("set when friendly"),
            "user_friendly_names",
        ),
    };
    let file = file.unwrap_or_else(|| PathBuf::from(DEFAULT_BINDINGS_FILE));
    let shown = quoted(&file.display().to_string());
    let refuse = |reason: String| source.error(&place, shown.clone(), reason);
    let text = found
        .read_bindings(&file)
        .map_err(|error| refuse(format!("cannot read the bindings file: {error}")))?
        .unwrap_or_default();
    let mut bindings = Bindings::parse(&text, is_name).map_err(|bad| {
        refuse(format!(
            "line {} of the bindings file: {}",
            bad.line, bad.reason
        ))
    })?;
    let own: Vec<(&str, usize)> = raw
        .map
        .iter()
        .filter_map(|map| {
            let name = map.get_ref().name.as_ref()?;
            Some((name.get_ref().as_str(), name.span().start))
        })
        .collect();
    let taken: HashSet<&str> = own.iter().map(|(name, _)| *name).collect();
    let (names, added) = bindings.assign(wwids, &taken);
    for (wwid, name) in wwids.iter().zip(&names) {
        if let Some((_, offset)) = own.iter().find(|(own, _)| own == name) {
            let line = bindings.of(wwid).expect("assigned").line;
            let (map_line, _) = source.line_column(*offset);
            return Err(refuse(format!(
                "line {line} of the bindings file binds WWID {wwid:?} to {name:?}, the name of \
                 the map at line {map_line}: rename that map, give this one a name, or edit \
                 the bindings file"
            )));
        }
    }
    if added {
        found
            .write_bindings(&file, bindings.text())
            .map_err(|error| {
                refuse(format!(
                    "cannot write the bindings file: {error} (a new name that is not kept would \
                 change at the next start: make it writable, set user_friendly_names = false, \
                 or give the maps by wwid a name)"
                ))
            })?;
    }
    Ok(names)
}
