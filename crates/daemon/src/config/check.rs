//! From the written config ([`super::raw`]) to the checked one: names,
//! paths, the groups in whichever form they were given, exports and the
//! addresses the daemon listens on. The first refusal ends the check.

use super::error::{quoted, Located, Place, Source};
use super::grouping::{self, GroupPlan, PathPlan, Refusal};
use super::listen::{absolute_path, check_export, socket_address, Listeners};
use super::raw::{RawConfig, RawMap, RawPath, Scalar};
use super::settings::{self, check_words, integer, ns, Policy, Settings, DEFAULT_SELECTOR};
use super::wwid::{self, PathSource};
use super::{links, names};
use super::{ConfigError, DaemonConfig, MapConfig, NamedPath, NoPathRetry};
use mpio_core::checker::CheckerOptions;
use mpio_core::map::{MapOptions, MAX_PATHS};
use mpio_core::table::{Table, MAX_GROUPS};
use mpio_transport::blockdev::blacklist::Blacklist;
use mpio_transport::uri::parse_size;
use mpio_transport::Endpoint;
use std::collections::HashMap;
use toml::Spanned;

/// Most maps in one config.
pub const MAX_MAPS: usize = 1024;
/// Most exports of one map.
pub const MAX_EXPORTS: usize = 64;
/// Longest map or path name.
pub const MAX_NAME_BYTES: usize = 128;
/// Highest NUMA node a path may be given (the kernel's `MAX_NUMNODES`
/// is at most 1024).
pub const MAX_NUMA_NODE: u16 = 1023;

/// Where maps by WWID find their paths, and which devices never are.
struct Lookup<'a> {
    blacklist: &'a Blacklist,
    found: &'a dyn PathSource,
}

/// Checks the whole text; maps by WWID take their paths from `found`.
pub(super) fn check(text: &str, found: &dyn PathSource) -> Result<DaemonConfig, ConfigError> {
    let source = Source { text };
    let mut raw: RawConfig = toml::from_str(text).map_err(|error| source.toml_error(&error))?;
    let mut listeners = Listeners::default();

    let control_socket = match &raw.control_socket {
        Some(socket) => {
            let place = Place::of(socket, "control_socket");
            let path = absolute_path(&source, socket, place.key.clone())?;
            listeners.unix(&source, &path, &place, socket.get_ref())?;
            Some(path)
        }
        None => None,
    };
    let metrics = match &raw.metrics {
        Some(metrics) => {
            let listen = &metrics.get_ref().listen;
            let place = Place::of(listen, "metrics: listen");
            let address = socket_address(&source, listen, &place)?;
            if !address.ip().is_loopback() {
                return Err(source.error(
                    &place,
                    quoted(listen.get_ref()),
                    "metrics are served on a loopback address only (127.0.0.1, [::1]): they are not authenticated",
                ));
            }
            listeners.tcp(&source, address, &place, listen.get_ref())?;
            Some(address)
        }
        None => None,
    };
    let defaults = match raw.defaults.take() {
        Some(defaults) => Settings::check(&source, defaults.into_inner(), "defaults")?,
        None => Settings::default(),
    };
    let ublk_on_stop = super::ublk_stop::check(&source, raw.ublk.as_ref())?;
    let blacklist = wwid::blacklist(
        &source,
        raw.blacklist.as_ref(),
        raw.blacklist_exceptions.as_ref(),
    )?;
    let lookup = Lookup {
        blacklist: &blacklist,
        found,
    };
    if raw.map.is_empty() {
        return Err(source.error(
            &Place {
                span: text.len()..text.len(),
                key: "map".into(),
            },
            None,
            "the config defines no map: add a [[map]] table",
        ));
    }
    if let Some(extra) = raw.map.get(MAX_MAPS) {
        return Err(source.error(
            &Place::of(extra, format!("map[{MAX_MAPS}]")),
            None,
            format!("at most {MAX_MAPS} maps"),
        ));
    }
    let map_names = names::map_names(&source, &raw, found)?;
    let device_links = links::dev_dir(&source, raw.links.as_ref())?;
    let mut names: HashMap<String, Place> = HashMap::new();
    let mut maps = Vec::with_capacity(raw.map.len());
    for (map, map_name) in raw.map.into_iter().zip(map_names) {
        let map_place = map.span();
        let mut map = map.into_inner();
        let name = check_name(&source, &map_name, "map")?;
        let context = format!("map {name:?}");
        let name_place = Place::of(&map_name, format!("{context}: name"));
        if let Some(first) = names.get(&name) {
            let (line, _) = source.line_column(first.span.start);
            return Err(source.error(
                &name_place,
                quoted(&name),
                format!("a second map of this name (the first is at line {line})"),
            ));
        }
        names.insert(name.clone(), name_place);
        let map_place = Place {
            span: map_place,
            key: context.clone(),
        };
        let own = Settings::check(&source, map.take_settings(), &context)?;
        let checked = check_map(
            &source,
            map,
            name,
            &context,
            &map_place,
            own,
            &defaults,
            &mut listeners,
            &lookup,
        )?;
        maps.push(MapConfig {
            device_links: device_links.clone(),
            ..checked
        });
    }
    Ok(DaemonConfig {
        control_socket,
        metrics,
        maps,
        blacklist,
        ublk_on_stop,
    })
}

/// One map.
#[allow(clippy::too_many_arguments)]
fn check_map(
    source: &Source<'_>,
    map: RawMap,
    name: String,
    context: &str,
    map_place: &Place,
    own: Settings,
    defaults: &Settings,
    listeners: &mut Listeners,
    lookup: &Lookup<'_>,
) -> Result<MapConfig, ConfigError> {
    let own_policy = own.policy.clone();
    let own_retry = own.no_path_retry.clone();
    let own_selector = own
        .selector
        .as_ref()
        .map(|selector| &selector.place)
        .or(own.selector_args.as_ref().map(|args| &args.place))
        .cloned();
    let settings = own.over(defaults);

    let (paths, named, found_bytes) = match &map.wwid {
        Some(wwid) => {
            let (paths, named, bytes) =
                wwid::paths(source, &map, wwid, context, lookup.blacklist, lookup.found)?;
            (paths, named, bytes)
        }
        None => {
            let (paths, named) = check_paths(source, &map.path, context)?;
            (paths, named, None)
        }
    };
    let size = map
        .size
        .as_ref()
        .map(|size| {
            let place = Place::of(size, format!("{context}: size"));
            size_bytes(size.get_ref())
                .map(|bytes| Located {
                    value: bytes,
                    place: place.clone(),
                })
                .map_err(|reason| source.error(&place, Some(size.get_ref().toml()), reason))
        })
        .transpose()?
        .or_else(|| {
            // A map by WWID is as large as its devices unless it says;
            // with none reporting a size, as its recovered device.
            let recovered = || {
                map.wwid
                    .as_ref()
                    .and_then(|_| wwid::recovered_bytes(&map, lookup.found))
            };
            found_bytes.or_else(recovered).map(|bytes| Located {
                value: bytes,
                place: map_place.clone(),
            })
        });

    // Which form: a table, explicit groups, or a policy (the map's own or
    // the defaults'; a default policy does not conflict with a map's own
    // groups or table).
    let group_place = map
        .group
        .first()
        .map(|group| Place::of(group, format!("{context} group[0]")));
    let forms = [
        map.table
            .as_ref()
            .map(|table| ("table", Place::of(table, format!("{context}: table")))),
        group_place.map(|place| ("[[map.group]]", place)),
        own_policy.map(|policy| ("path_grouping_policy", policy.place)),
    ];
    let mut given: Vec<&(&str, Place)> = forms.iter().flatten().collect();
    given.sort_by_key(|(_, place)| place.span.start);
    if let [first, second, ..] = given[..] {
        let (line, _) = source.line_column(first.1.span.start);
        return Err(source.error(
            &second.1,
            None,
            format!(
                "{} is given too (line {line}); give the groups one way: a table, \
                 [[map.group]]s or a path_grouping_policy",
                first.0
            ),
        ));
    }

    let (table, no_path_retry) = if let Some(table) = &map.table {
        if let Some(initial) = &map.initial_group {
            return Err(source.error(
                &Place::of(initial, format!("{context}: initial_group")),
                Some(initial.get_ref().to_string()),
                "a table gives its own initial group",
            ));
        }
        // What a table says itself is not said again beside it.
        if let Some(place) = own_selector {
            return Err(source.error(
                &place,
                None,
                "a table names each group's selector and arguments itself",
            ));
        }
        if let Some(place) = paths.iter().find_map(|path| path.args_place.as_ref()) {
            return Err(source.error(place, None, "a table gives each path's arguments itself"));
        }
        from_table(
            source,
            table,
            context,
            &paths,
            size.as_ref(),
            own_retry.as_ref(),
            defaults.no_path_retry.as_ref().map(|retry| retry.value),
        )?
    } else {
        if paths.is_empty() {
            return Err(source.error(map_place, None, "the map has no [[map.path]]"));
        }
        let Some(size) = size else {
            let reason = if map.wwid.is_some() {
                "size missing: no device with this WWID reports a size now (a LUN behind an \
                 unavailable or offline port reports 0) and the map has no ublk device left \
                 to take it from; give the map's size (\"1G\", 1073741824)"
            } else {
                "size missing: the map's size in bytes (\"1G\", 1073741824) is needed unless a \
                 table gives it"
            };
            return Err(source.error(map_place, None, reason));
        };
        let groups = if map.group.is_empty() {
            let policy = settings
                .policy
                .as_ref()
                .map_or(Policy::Failover, |policy| policy.value);
            let prios: Vec<u32> = paths.iter().map(|path| path.prio).collect();
            let (selector, selector_args) = map_selector(&settings, map_place);
            grouping::by_policy(policy, &prios)
                .into_iter()
                .map(|group| GroupPlan {
                    selector: selector.clone(),
                    selector_args: selector_args.clone(),
                    paths: group,
                })
                .collect()
        } else {
            explicit_groups(source, &map, context, &paths, &settings, map_place)?
        };
        if groups.len() > MAX_GROUPS {
            return Err(source.error(
                map_place,
                None,
                format!("{} groups; a map has at most {MAX_GROUPS}", groups.len()),
            ));
        }
        check_arg_counts(source, &groups, &paths)?;
        let initial_group = match &map.initial_group {
            Some(initial) => integer(
                source,
                initial,
                format!("{context}: initial_group"),
                1,
                groups.len() as u64,
            )? as u32,
            None => 1,
        };
        let no_path_retry = settings
            .no_path_retry
            .as_ref()
            .map_or(NoPathRetry::Fail, |retry| retry.value);
        let table = grouping::table_of(
            &groups,
            &paths,
            size.value / 512,
            initial_group,
            no_path_retry != NoPathRetry::Fail,
        );
        let table = grouping::validate_plan(&table, &groups, &paths, map_place)
            .map_err(|(place, value, reason)| source.error(&place, value, reason))?;
        (table, no_path_retry)
    };

    // Unset keys take the engine's own defaults, so there is one source
    // for each.
    let checker_defaults = CheckerOptions::default();
    let map_defaults = MapOptions::default();
    let checker = CheckerOptions {
        interval_ns: settings
            .checker_interval_ms
            .map_or(checker_defaults.interval_ns, ns),
        probe_timeout_ns: settings
            .checker_timeout_ms
            .map_or(checker_defaults.probe_timeout_ns, ns),
        failback: settings.failback.unwrap_or(checker_defaults.failback),
        fail_active_paths: true,
        marginal: settings.marginal_policy(),
    };
    let io_timeout_ns = match settings.io_timeout_ms {
        Some(0) => None,
        Some(ms) => Some(ns(ms)),
        None => map_defaults.io_timeout_ns,
    };
    let fence_timeout_ns = match settings.fence_timeout_ms {
        Some(0) => None,
        Some(ms) => Some(ns(ms)),
        None => map_defaults.fence_timeout_ns,
    };
    if map.export.len() > MAX_EXPORTS {
        return Err(source.error(
            &Place::of(
                &map.export[MAX_EXPORTS],
                format!("{context} export[{MAX_EXPORTS}]"),
            ),
            None,
            format!("at most {MAX_EXPORTS} exports per map"),
        ));
    }
    let exports = map
        .export
        .iter()
        .enumerate()
        .map(|(index, export)| check_export(source, export, index, context, &name, listeners))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(MapConfig {
        name,
        wwid: map.wwid.as_ref().map(|wwid| wwid.get_ref().clone()),
        source: map.wwid.as_ref().map(|_| std::sync::Arc::from(source.text)),
        table,
        paths: named,
        io_timeout_ns,
        fence_timeout_ns,
        hedge_reads: settings.hedge_reads.unwrap_or(map_defaults.hedge_reads),
        no_path_retry,
        max_attempts: settings.max_attempts.unwrap_or(map_defaults.max_attempts),
        checker,
        exports,
        device_links: None,
    })
}

/// The map's selector and arguments (for policy groups and groups that
/// name no selector): the map's or the defaults', else service-time.
fn map_selector(settings: &Settings, map_place: &Place) -> (Located<String>, Vec<Located<String>>) {
    let selector = settings.selector.clone().unwrap_or_else(|| Located {
        value: DEFAULT_SELECTOR.into(),
        place: map_place.clone(),
    });
    let args = settings
        .selector_args
        .as_ref()
        .map_or_else(Vec::new, |args| args.value.clone());
    (selector, args)
}

/// The `[[map.path]]`s: their plans (names, argument places) and the
/// checked name, URI and prio of each.
fn check_paths(
    source: &Source<'_>,
    raw: &[Spanned<RawPath>],
    context: &str,
) -> Result<(Vec<PathPlan>, Vec<NamedPath>), ConfigError> {
    if let Some(extra) = raw.get(MAX_PATHS) {
        return Err(source.error(
            &Place::of(extra, format!("{context} path[{MAX_PATHS}]")),
            None,
            format!("at most {MAX_PATHS} paths per map"),
        ));
    }
    let mut plans = Vec::with_capacity(raw.len());
    let mut named: Vec<NamedPath> = Vec::with_capacity(raw.len());
    let mut seen_names: HashMap<String, usize> = HashMap::new();
    let mut seen_uris: HashMap<String, usize> = HashMap::new();
    for path in raw {
        let place_of_path = path.span();
        let path = path.get_ref();
        let name = check_name(source, &path.name, &format!("{context} path"))?;
        let path_context = format!("{context} path {name:?}");
        let line_of = |offset: usize| source.line_column(offset).0;
        if let Some(&first) = seen_names.get(&name) {
            return Err(source.error(
                &Place::of(&path.name, format!("{path_context}: name")),
                quoted(&name),
                format!(
                    "a second path of this name in the map (the first is at line {})",
                    line_of(first)
                ),
            ));
        }
        seen_names.insert(name.clone(), path.name.span().start);

        let uri_place = Place::of(&path.uri, format!("{path_context}: uri"));
        let uri = path.uri.get_ref();
        if let Err(error) = Endpoint::parse(uri) {
            return Err(source.error(&uri_place, quoted(uri), error.reason));
        }
        if let Some(&first) = seen_uris.get(uri) {
            return Err(source.error(
                &uri_place,
                quoted(uri),
                format!(
                    "a second path to the same URI (the first is at line {})",
                    line_of(first)
                ),
            ));
        }
        seen_uris.insert(uri.clone(), path.uri.span().start);

        let prio = path
            .prio
            .as_ref()
            .map(|prio| {
                integer(
                    source,
                    prio,
                    format!("{path_context}: prio"),
                    0,
                    i32::MAX as u64,
                )
            })
            .transpose()?
            .unwrap_or(0) as u32;
        let numa_node = path
            .numa_node
            .as_ref()
            .map(|node| {
                integer(
                    source,
                    node,
                    format!("{path_context}: numa_node"),
                    0,
                    u64::from(MAX_NUMA_NODE),
                )
            })
            .transpose()?
            .map(|node| node as u16);
        let (args, args_place) = match &path.args {
            Some(args) => {
                let key = format!("{path_context}: args");
                let checked = check_words(source, args, &key)?;
                (checked.value, Some(checked.place))
            }
            None => (Vec::new(), None),
        };
        plans.push(PathPlan {
            name: name.clone(),
            place: Place {
                span: place_of_path,
                key: path_context,
            },
            prio,
            args,
            args_place,
        });
        named.push(NamedPath {
            name,
            uri: uri.clone(),
            numa_node,
        });
    }
    Ok((plans, named))
}

/// The `[[map.group]]`s: every name known, every path in exactly one group.
fn explicit_groups(
    source: &Source<'_>,
    map: &RawMap,
    context: &str,
    paths: &[PathPlan],
    settings: &Settings,
    map_place: &Place,
) -> Result<Vec<GroupPlan>, ConfigError> {
    let index_of: HashMap<&str, usize> = paths
        .iter()
        .enumerate()
        .map(|(index, path)| (path.name.as_str(), index))
        .collect();
    let mut group_of: Vec<Option<(usize, usize)>> = vec![None; paths.len()];
    let (map_selector, map_args) = map_selector(settings, map_place);
    let mut groups = Vec::with_capacity(map.group.len());
    for (number, group) in map.group.iter().enumerate() {
        let group_context = format!("{context} group[{number}]");
        let group = group.get_ref();
        let own = super::raw::RawSettings {
            selector: group.selector.clone(),
            selector_args: group.selector_args.clone(),
            ..Default::default()
        };
        let own = Settings::check(source, own, &group_context)?;
        let selector = own.selector.clone().unwrap_or_else(|| map_selector.clone());
        let selector_args = match (own.selector_args, own.selector) {
            (Some(args), _) => args.value,
            (None, Some(_)) => Vec::new(),
            (None, None) => map_args.clone(),
        };
        let paths_key = format!("{group_context}: paths");
        if group.paths.get_ref().is_empty() {
            return Err(source.error(
                &Place::of(&group.paths, paths_key),
                None,
                "a group needs at least one path",
            ));
        }
        let mut members = Vec::with_capacity(group.paths.get_ref().len());
        for (position, word) in group.paths.get_ref().iter().enumerate() {
            let place = Place::of(word, format!("{paths_key}[{position}]"));
            let Some(&index) = index_of.get(word.get_ref().as_str()) else {
                let known: Vec<&str> = paths.iter().map(|path| path.name.as_str()).collect();
                return Err(source.error(
                    &place,
                    quoted(word.get_ref()),
                    format!(
                        "no [[map.path]] of this name; the map's paths are {}",
                        known.join(", ")
                    ),
                ));
            };
            if let Some((first_group, offset)) = group_of[index] {
                let (line, _) = source.line_column(offset);
                return Err(source.error(
                    &place,
                    quoted(word.get_ref()),
                    format!(
                        "already in group[{first_group}] (line {line}); a path is in one group"
                    ),
                ));
            }
            group_of[index] = Some((number, word.span().start));
            members.push(index);
        }
        groups.push(GroupPlan {
            selector,
            selector_args,
            paths: members,
        });
    }
    if let Some(index) = group_of.iter().position(Option::is_none) {
        return Err(source.error(
            &paths[index].place,
            None,
            "in no [[map.group]]: with explicit groups every path must be in one",
        ));
    }
    Ok(groups)
}

/// dm gives one per-path argument count per group: all paths of a group
/// must give the same number of `args`.
fn check_arg_counts(
    source: &Source<'_>,
    groups: &[GroupPlan],
    paths: &[PathPlan],
) -> Result<(), ConfigError> {
    for group in groups {
        let first = &paths[group.paths[0]];
        for &index in &group.paths[1..] {
            let path = &paths[index];
            if path.args.len() != first.args.len() {
                let place = path.args_place.as_ref().unwrap_or(&path.place);
                return Err(source.error(
                    place,
                    None,
                    format!(
                        "{} argument(s), but path {:?} of the same group has {}: a dm table gives every path of a group the same number",
                        path.args.len(),
                        first.name,
                        first.args.len()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// A `table = "..."` map: the table as written, its path words names of
/// `paths` or URIs, `size` (if given) agreeing with it, and
/// `no_path_retry` with its `queue_if_no_path`.
fn from_table(
    source: &Source<'_>,
    table: &Spanned<String>,
    context: &str,
    paths: &[PathPlan],
    size: Option<&Located<u64>>,
    own_retry: Option<&Located<NoPathRetry>>,
    default_retry: Option<NoPathRetry>,
) -> Result<(Table, NoPathRetry), ConfigError> {
    let text = table.get_ref();
    let key = format!("{context}: table");
    // The place of word `position`: at the word itself when the string is
    // written without escapes, so that its column is right; else at the
    // string.
    let place_of_word = |position: usize| -> Place {
        let span = table.span();
        let raw = &source.text[span.clone()];
        let quote = if raw.starts_with("\"\"\"") || raw.starts_with("'''") {
            3
        } else {
            1
        };
        let body = raw.get(quote..raw.len().saturating_sub(quote));
        match (
            body == Some(text.as_str()),
            grouping::word_offset(text, position),
        ) {
            (true, Some(offset)) => Place {
                span: span.start + quote + offset..span.start + quote + offset,
                key: key.clone(),
            },
            _ => Place::of(table, key.clone()),
        }
    };
    let refuse = |error: mpio_core::table::TableError| {
        source.error(&place_of_word(error.position), None, error.to_string())
    };
    let parsed = Table::parse(text).map_err(refuse)?;
    for group in &parsed.groups {
        for path in &group.paths {
            let word = path.name.as_str();
            if !paths.iter().any(|named| named.name == word) {
                if let Err(error) = Endpoint::parse(word) {
                    return Err(source.error(&place_of_word(path.word), None, format!("word {} ({word:?}): neither a [[map.path]] name of this map nor a transport URI ({})", path.word, error.reason)));
                }
            }
        }
    }
    let bytes = parsed.size_bytes();
    if let Some(size) = size {
        if size.value != bytes {
            return Err(source.error(
                &size.place,
                None,
                format!(
                    "{} bytes, but the table's length is {} sectors ({bytes} bytes)",
                    size.value, parsed.length_sectors
                ),
            ));
        }
    }
    // The table's queue_if_no_path is the map's own word on it: the map's
    // no_path_retry must agree; a default only refines "queue" to N.
    let queues = parsed.features.queue_if_no_path;
    let no_path_retry = match (own_retry, default_retry) {
        (Some(retry), _) => {
            if (retry.value != NoPathRetry::Fail) != queues {
                let (line, _) = source.line_column(table.span().start);
                return Err(source.error(
                    &retry.place,
                    Some(settings::retry_word(retry.value)),
                    format!(
                        "the table (line {line}) {} queue_if_no_path",
                        if queues { "has" } else { "does not have" }
                    ),
                ));
            }
            retry.value
        }
        (None, Some(NoPathRetry::Checks(count))) if queues => NoPathRetry::Checks(count),
        (None, _) if queues => NoPathRetry::Queue,
        (None, _) => NoPathRetry::Fail,
    };
    match grouping::validate(&parsed) {
        Ok(canonical) => Ok((canonical, no_path_retry)),
        Err(Refusal::Table(error)) => Err(refuse(error)),
        Err(Refusal::Map(error)) => {
            Err(source.error(&Place::of(table, key.clone()), None, error.to_string()))
        }
    }
}

/// A map or path name: one word of letters, digits, `.`, `_` and `-`.
fn check_name(
    source: &Source<'_>,
    name: &Spanned<String>,
    what: &str,
) -> Result<String, ConfigError> {
    let text = name.get_ref();
    if !is_name(text) {
        return Err(source.error(
            &Place::of(name, format!("{what}: name")),
            quoted(text),
            format!("a name is 1 to {MAX_NAME_BYTES} letters, digits, '.', '_' or '-' (so that it is one word, and no path name reads as a URI)"),
        ));
    }
    Ok(text.clone())
}

/// Whether `text` may name a map or a path: 1 to [`MAX_NAME_BYTES`]
/// letters, digits, `.`, `_` and `-`.
pub(super) fn is_name(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= MAX_NAME_BYTES
        && text
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-'))
}

/// `size`: bytes as an integer, or a string with a binary suffix
/// (`K`, `M`, `G`, `T`) or `s` for 512-byte sectors; a positive multiple
/// of 512.
fn size_bytes(size: &Scalar) -> Result<u64, String> {
    let bytes = match size {
        Scalar::Integer(bytes) => {
            u64::try_from(*bytes).map_err(|_| "a size is not negative".to_string())?
        }
        Scalar::Text(text) => match text.strip_suffix('s') {
            Some(sectors) => sectors
                .parse::<u64>()
                .map_err(|_| "expected a number of sectors before 's'".to_string())?
                .checked_mul(512)
                .ok_or_else(|| "too large: the size in bytes must fit in 64 bits".to_string())?,
            None => parse_size(text)
                .map_err(|reason| format!("{reason} (or 's' for 512-byte sectors)"))?,
        },
    };
    if bytes == 0 {
        return Err("a map is not empty".into());
    }
    if !bytes.is_multiple_of(512) {
        return Err(format!(
            "{bytes} bytes is not a whole number of 512-byte sectors"
        ));
    }
    Ok(bytes)
}
