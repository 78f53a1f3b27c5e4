//! The log events of a map's state changes, through the `tracing` facade
//! (the core does no I/O: the daemon installs the subscriber that writes
//! them; with none installed an event costs a relaxed load).
//!
//! # Contract
//! One event per state change, never per I/O: each fires where the change
//! is made, under the map's control lock (or, for the no-path timeout,
//! once per queue scan that expired I/O, and for unfenced writes, once per
//! queue scan that failed them). Every event carries the map's
//! name as `map`; a path's event its word as `path` and its 1-based group
//! as `group`; the reason as `cause` (and `error`, a path error's words).
//! Failures are `warn`, recoveries and switches `info`. A map a reload
//! replaced logs nothing: its successor logs the same change.
//!
//! | message                 | level | fields                                  |
//! |-------------------------|-------|-----------------------------------------|
//! | `path failed`           | warn  | map, path, group, cause (`path error` or `message`), error |
//! | `path reinstated`       | info  | map, path, group, cause (`checker` or `message`) |
//! | `access state changed`  | warn when the path can no longer carry I/O, else info | map, path, group, from, to |
//! | `group switched`        | info  | map, from, to (`none` before a first route), cause |
//! | `no usable path`        | warn  | map, from, queue_if_no_path (true: I/O is queued) |
//! | `group disabled` / `group enabled` | info | map, group                 |
//! | `queue_if_no_path set`  | info  | map, queue_if_no_path                   |
//! | `queued I/O timed out`  | warn  | map, count, no_path_timeout_ns          |
//! | `unfenced writes failed` | warn | map, count, fence_timeout_ns, why, what_to_do |
//!
//! A group switch's `cause` is `current group lost its usable paths` when
//! the group I/O went to has no usable path left, else what made the map
//! choose again: a message's verb (`switch_group`, `disable_group`,
//! `enable_group`), `failback` (the checker's), `path reinstated` (a path
//! returned after there was no route, or the initial group became
//! usable), `access state changed`, or `reload`.

use crate::io::PathError;
use crate::message::Message;
use crate::path::AccessState;
use std::fmt;

/// Why a map chose its route again.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Cause<'a> {
    /// The map is being built: nothing to log.
    Build,
    /// A control message.
    Message(&'a Message),
    /// The checker's failback.
    Failback,
    /// A path failed.
    PathFailed,
    /// A path was reinstated (by the checker or a message).
    PathReinstated,
    /// A path's ALUA/ANA access state changed.
    AccessChanged,
    /// The map took over from the map it replaces.
    Reload,
}

impl Cause<'_> {
    fn words(self) -> &'static str {
        match self {
            Cause::Build => "build",
            Cause::Message(message) => message.verb(),
            Cause::Failback => "failback",
            Cause::PathFailed => "path failed",
            Cause::PathReinstated => "path reinstated",
            Cause::AccessChanged => "access state changed",
            Cause::Reload => "reload",
        }
    }
}

/// A 1-based group number, or `none`.
struct GroupNumber(Option<usize>);

impl fmt::Display for GroupNumber {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(group) => write!(formatter, "{}", group + 1),
            None => formatter.write_str("none"),
        }
    }
}

/// Path `path` (in 0-based `group`) failed: by `error`, or by a message.
pub(crate) fn path_failed(map: &str, path: &str, group: usize, error: Option<PathError>) {
    let group = group + 1;
    match error {
        Some(error) => tracing::warn!(
            map,
            path,
            group,
            cause = "path error",
            error = %error,
            "path failed"
        ),
        None => tracing::warn!(map, path, group, cause = "message", "path failed"),
    }
}

/// Path `path` (in 0-based `group`) is back in use, by the checker or a
/// message.
pub(crate) fn path_reinstated(map: &str, path: &str, group: usize, by_message: bool) {
    let cause = if by_message { "message" } else { "checker" };
    tracing::info!(map, path, group = group + 1, cause, "path reinstated");
}

/// Path `path` (in 0-based `group`) went from access state `from` to `to`.
pub(crate) fn access_changed(
    map: &str,
    path: &str,
    group: usize,
    from: AccessState,
    to: AccessState,
) {
    let (group, from, to_word) = (group + 1, from.as_str(), to.as_str());
    if to.carries_io() {
        tracing::info!(map, path, group, from, to = to_word, "access state changed");
    } else {
        tracing::warn!(map, path, group, from, to = to_word, "access state changed");
    }
}

/// The route moved from group `from` to group `to` (0-based; `None`: no
/// route). `from_lost_paths`: `from` has no usable path left.
pub(crate) fn route_changed(
    map: &str,
    from: Option<usize>,
    to: Option<usize>,
    from_lost_paths: bool,
    queue_if_no_path: bool,
    cause: Cause<'_>,
) {
    if to.is_none() {
        tracing::warn!(
            map,
            from = %GroupNumber(from),
            queue_if_no_path,
            "no usable path"
        );
        return;
    }
    let cause = if from.is_some() && from_lost_paths {
        "current group lost its usable paths"
    } else {
        cause.words()
    };
    tracing::info!(
        map,
        from = %GroupNumber(from),
        to = %GroupNumber(to),
        cause,
        "group switched"
    );
}

/// Group `group` (0-based) was disabled or enabled by a message.
pub(crate) fn group_bypassed(map: &str, group: usize, disabled: bool) {
    let group = group + 1;
    if disabled {
        tracing::info!(map, group, "group disabled");
    } else {
        tracing::info!(map, group, "group enabled");
    }
}

/// `queue_if_no_path` was turned on or off.
pub(crate) fn queue_if_no_path_set(map: &str, queue_if_no_path: bool) {
    tracing::info!(map, queue_if_no_path, "queue_if_no_path set");
}

/// `count` I/Os waited `no_path_timeout_ns` for a path and failed.
pub(crate) fn queued_io_timed_out(map: &str, count: usize, no_path_timeout_ns: u64) {
    tracing::warn!(map, count, no_path_timeout_ns, "queued I/O timed out");
}

/// `count` writes went unanswered on paths that could not be fenced within
/// `fence_timeout_ns` past their I/O timeout, and failed with EIO.
pub(crate) fn unfenced_writes_failed(map: &str, count: usize, fence_timeout_ns: u64) {
    tracing::warn!(
        map,
        count,
        fence_timeout_ns,
        why = "the path still holds them and could not be fenced: a retry elsewhere could be \
               overwritten by the stale copy, so they fail (EIO) and are not retried",
        what_to_do = "the failed blocks may still change to the data of those writes until the \
                      path's storage is fenced: write them again only after the path's port is \
                      cut off or its server stopped (or the path answered), then read them \
                      back; see docs/SECURITY.md, Unfenced writes",
        "unfenced writes failed"
    );
}
