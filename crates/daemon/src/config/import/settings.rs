//! Each multipath.conf keyword of a `defaults`, `overrides`, `multipath`
//! or `device` block, against mpio's map settings: the keys it becomes,
//! or that mpio already behaves so, or why it is not carried over — by
//! multipath.conf(5)'s meaning of each value.

use super::report::{Outcome, Value, Why};

/// Where a block of settings is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Scope {
    /// `defaults`.
    Defaults,
    /// `overrides` (and its `protocol`).
    Overrides,
    /// A `devices` entry.
    Device,
    /// A `multipaths` entry.
    Multipath,
}

/// mpio keys that are top-level keys, not map settings: written above
/// `[defaults]`, and read by [`super::sections::MapOut::named_by_bindings`].
pub(super) const TOP_LEVEL: &[&str] = &["user_friendly_names", "bindings_file"];

/// Keywords multipath-tools takes only in `defaults`.
const DEFAULTS_ONLY: &[&str] = &[
    "verbosity",
    "polling_interval",
    "max_polling_interval",
    "reassign_maps",
    "multipath_dir",
    "pg_timeout",
    "uid_attrs",
    "getuid_callout",
    "max_fds",
    "queue_without_daemon",
    "checker_timeout",
    "allow_usb_devices",
    "bindings_file",
    "wwids_file",
    "prkeys_file",
    "log_checker_err",
    "force_sync",
    "strict_timing",
    "partition_delimiter",
    "config_dir",
    "marginal_pathgroups",
    "find_multipaths",
    "find_multipaths_timeout",
    "uxsock_timeout",
    "retrigger_tries",
    "retrigger_delay",
    "missing_uev_wait_timeout",
    "disable_changed_wwids",
    "remove_retries",
    "enable_foreign",
    "recheck_wwid",
];

/// Keywords multipath-tools takes in `devices` entries only.
const DEVICE_ONLY: &[&str] = &[
    "vendor",
    "product",
    "revision",
    "product_blacklist",
    "vpd_vendor",
    "hardware_handler",
];

/// Keywords a `multipaths` entry takes beside `wwid` and `alias`.
const MULTIPATH: &[&str] = &[
    "path_grouping_policy",
    "path_selector",
    "prio",
    "prio_args",
    "failback",
    "rr_weight",
    "no_path_retry",
    "rr_min_io",
    "rr_min_io_rq",
    "flush_on_last_del",
    "features",
    "reservation_key",
    "user_friendly_names",
    "deferred_remove",
    "san_path_err_threshold",
    "san_path_err_forget_rate",
    "san_path_err_recovery_time",
    "marginal_path_err_sample_time",
    "marginal_path_err_rate_threshold",
    "marginal_path_err_recheck_gap_time",
    "marginal_path_double_failed_time",
    "delay_watch_checks",
    "delay_wait_checks",
    "skip_kpartx",
    "max_sectors_kb",
    "ghost_delay",
];

/// Whether multipath-tools takes `name` in `scope`; `None` if it does.
fn misplaced(name: &str, scope: Scope) -> Option<String> {
    let takes = match scope {
        Scope::Defaults => !DEVICE_ONLY.contains(&name),
        Scope::Overrides => !DEFAULTS_ONLY.contains(&name) && !DEVICE_ONLY.contains(&name),
        Scope::Device => !DEFAULTS_ONLY.contains(&name),
        Scope::Multipath => MULTIPATH.contains(&name),
    };
    let known = DEFAULTS_ONLY.contains(&name)
        || DEVICE_ONLY.contains(&name)
        || MULTIPATH.contains(&name)
        || KNOWN_ELSEWHERE.contains(&name);
    (known && !takes).then(|| "multipath-tools does not take it in this section".to_string())
}

/// Keywords of multipath.conf(5) not in the lists above.
const KNOWN_ELSEWHERE: &[&str] = &[
    "uid_attribute",
    "path_checker",
    "alias_prefix",
    "fast_io_fail_tmo",
    "dev_loss_tmo",
    "eh_deadline",
    "all_tg_pt",
    "retain_attached_hw_handler",
    "detect_prio",
    "detect_checker",
];

/// Seconds as written, times 1000; `None` for anything but a count.
fn seconds_ms(value: &str) -> Option<i64> {
    value.parse::<i64>().ok()?.checked_mul(1000)
}

/// `yes`/`no` as multipath-tools reads a flag (`1`/`0` too).
fn flag(value: &str) -> Option<bool> {
    match value {
        "yes" | "1" => Some(true),
        "no" | "0" => Some(false),
        _ => None,
    }
}

fn set(key: &'static str, value: Value) -> Outcome {
    Outcome::Set(vec![(key, value)])
}

fn no(reason: &str) -> Outcome {
    Outcome::Dropped(Why::NoEquivalent, reason.to_string())
}

fn differs(reason: impl Into<String>) -> Outcome {
    Outcome::Dropped(Why::DifferentMeaning, reason.into())
}

fn ignored(reason: impl Into<String>) -> Outcome {
    Outcome::Dropped(Why::IgnoredByMultipathTools, reason.into())
}

fn same(reason: &str) -> Outcome {
    Outcome::Same(reason.to_string())
}

/// A "no"/"off" value of a feature mpio has off too, else `other`.
fn off_or(value: &str, other: Outcome) -> Outcome {
    if matches!(value, "no" | "off" | "0") {
        same("off, as in mpio unless its config turns it on")
    } else {
        other
    }
}

/// What keyword `name` with `value` becomes in `scope`.
pub(super) fn setting(name: &str, value: &str, scope: Scope) -> Outcome {
    if let Some(reason) = misplaced(name, scope) {
        return ignored(reason);
    }
    match name {
        "path_selector" => selector(value),
        "path_grouping_policy" => match value {
            "failover" | "multibus" | "group_by_prio" => {
                set("path_grouping_policy", Value::Text(value.into()))
            }
            "group_by_serial" | "group_by_node_name" | "group_by_tpg" => differs(
                "mpio groups by file order, into one group, or by ALUA/ANA priority \
                 (group_by_prio); it knows no serial, node name or target port group",
            ),
            _ => ignored("not a policy multipath-tools knows"),
        },
        "failback" => match value {
            "immediate" | "manual" | "followover" => set("failback", Value::Text(value.into())),
            _ => match value.parse::<i64>() {
                Ok(seconds) => set("failback", Value::Integer(seconds)),
                Err(_) => ignored("not a failback multipath-tools knows"),
            },
        },
        "no_path_retry" => match value {
            "queue" | "fail" => set("no_path_retry", Value::Text(value.into())),
            "0" => set("no_path_retry", Value::Text("fail".into())),
            _ => match value.parse::<i64>() {
                Ok(count) => set("no_path_retry", Value::Integer(count)),
                Err(_) => ignored("not a no_path_retry multipath-tools knows"),
            },
        },
        "polling_interval" => match seconds_ms(value) {
            Some(ms) => set("checker_interval_ms", Value::Integer(ms)),
            None => ignored("not a number of seconds"),
        },
        "checker_timeout" => match seconds_ms(value) {
            Some(ms) => set("checker_timeout_ms", Value::Integer(ms)),
            None => ignored("not a number of seconds"),
        },
        "features" => features(value),
        "prio" => match value {
            "alua" | "ana" | "sysfs" => same(
                "a map by WWID takes each path's priority from its ALUA or ANA state \
                 (50 optimized, 10 non-optimized, 1 standby, 0 otherwise)",
            ),
            "const" | "none" => differs(
                "every path one priority: mpio's maps by WWID take the ALUA/ANA state's; \
                 only group_by_prio uses it",
            ),
            _ => no("mpio's priorities are ALUA/ANA states; it runs no other prioritizer"),
        },
        "prio_args" if value.is_empty() => same("no arguments"),
        "prio_args" => no("mpio's ALUA/ANA priorities take no arguments"),
        "detect_prio" => match flag(value) {
            Some(true) => same("mpio always reads ALUA/ANA states"),
            _ => differs("mpio always reads ALUA/ANA states"),
        },
        "hardware_handler" => match value.split_whitespace().collect::<Vec<_>>()[..] {
            [] | ["0"] => same("no hardware handler"),
            ["1", "alua"] => same(
                "mpio reads ALUA states from sysfs, which the kernel's scsi_dh_alua \
                 (attached to ALUA devices at scan) keeps",
            ),
            _ => no("mpio sends no path-initialization commands (emc, rdac, hp_sw handlers)"),
        },
        "retain_attached_hw_handler" => match flag(value) {
            Some(true) => same("mpio attaches no handler and leaves the kernel's in place"),
            _ => ignored("multipath-tools retains the attached handler on every kernel since 4.3"),
        },
        "user_friendly_names" => match (flag(value), scope) {
            (Some(false), Scope::Device) => same("a map without alias is named by its WWID"),
            (Some(true), Scope::Device) => no(
                "mpio has no per-vendor settings: user_friendly_names is a top-level key for \
                 every map",
            ),
            (Some(flag), _) => set("user_friendly_names", Value::Flag(flag)),
            (None, _) => ignored("not yes or no"),
        },
        "marginal_path_double_failed_time" => match value.parse::<i64>() {
            Ok(seconds) => Outcome::Set(vec![
                ("marginal.failures", Value::Integer(2)),
                (
                    "marginal.window_ms",
                    Value::Integer(seconds.saturating_mul(1000)),
                ),
            ]),
            Err(_) => off_or(value, ignored("not a number of seconds")),
        },
        "marginal_path_err_recheck_gap_time" => match seconds_ms(value) {
            Some(ms) => set("marginal.recovery_ms", Value::Integer(ms)),
            None => off_or(value, ignored("not a number of seconds")),
        },
        "marginal_path_err_sample_time" | "marginal_path_err_rate_threshold" => off_or(
            value,
            no("mpio counts path failures; it sends no test I/O to sample an error rate"),
        ),
        "marginal_pathgroups" => off_or(
            value,
            differs("mpio holds a marginal path out of use, not in a group of its own"),
        ),
        "san_path_err_threshold"
        | "san_path_err_forget_rate"
        | "san_path_err_recovery_time"
        | "delay_watch_checks"
        | "delay_wait_checks" => off_or(
            value,
            differs(
                "counts failures over checker rounds with a forget rate; mpio's [marginal] \
                 counts them in a time window (failures, window_ms, recovery_ms)",
            ),
        ),
        "queue_without_daemon" => match flag(value) {
            Some(false) => {
                same("a stopped mpio daemon removes its ublk devices, failing their I/O")
            }
            _ => differs(
                "mpio's daemon is the data path: a stopped daemon removes its devices; only \
                 one that died leaves its ublk devices holding I/O for the next",
            ),
        },
        "rr_weight" if value == "uniform" => same("paths weigh the same"),
        "rr_weight" => no("mpio's selectors do not weigh paths by priority"),
        "rr_min_io" | "rr_min_io_rq" => no(
            "a map by WWID's paths take its selector's default repeat count; per-path \
             selector args are set in [[map.path]] args",
        ),
        "path_checker" | "detect_checker" => no(
            "mpio's checker probes each path with a read through its transport; there is \
             no choice of checker",
        ),
        "uid_attribute" | "uid_attrs" => differs(
            "mpio reads WWIDs from sysfs (SCSI VPD page 0x83, NVMe wwid), not udev \
             properties; a config's WWID may be in either form",
        ),
        "multipath_dir"
        | "pg_timeout"
        | "getuid_callout"
        | "config_dir"
        | "disable_changed_wwids" => ignored("deprecated: multipath-tools ignores its value"),
        "verbosity" | "log_checker_err" => no("the daemon's logging is not part of its config"),
        "max_polling_interval" => no(
            "mpio checks every checker_interval_ms; it does not lengthen the interval for \
             healthy paths",
        ),
        "alias_prefix" => no("mpio's user-friendly names always start with mpath"),
        "find_multipaths" | "find_multipaths_timeout" | "reassign_maps" => {
            no("mpio makes maps only for its config's [[map]]s")
        }
        "bindings_file" => set("bindings_file", Value::Text(value.into())),
        "wwids_file" | "prkeys_file" => no("mpio's maps are all in its config"),
        "reservation_key" | "all_tg_pt" => no("mpio does not manage persistent reservations"),
        "fast_io_fail_tmo" | "dev_loss_tmo" | "eh_deadline" => {
            no("SCSI transport timeouts mpio does not set; io_timeout_ms bounds each of its I/Os")
        }
        "skip_kpartx" | "partition_delimiter" => {
            no("mpio makes no kpartx devices; the kernel partitions a ublk device itself")
        }
        "max_sectors_kb" => no("a ublk device takes requests of up to 512 KiB"),
        "allow_usb_devices" => {
            no("mpio does not tell USB devices apart: blacklist them by devnode")
        }
        "recheck_wwid" => match flag(value) {
            Some(true) => same("mpio looks each map's devices up by WWID every checker round"),
            _ => differs("mpio looks each map's devices up by WWID every checker round"),
        },
        "enable_foreign" => no("mpio lists NVMe namespaces by WWID; it drives no foreign library"),
        "vendor" | "product" | "revision" | "product_blacklist" | "vpd_vendor" => no(
            "mpio has no per-vendor settings: what this entry sets is reported keyword by \
             keyword",
        ),
        "max_fds"
        | "flush_on_last_del"
        | "deferred_remove"
        | "force_sync"
        | "strict_timing"
        | "uxsock_timeout"
        | "retrigger_tries"
        | "retrigger_delay"
        | "missing_uev_wait_timeout"
        | "remove_retries"
        | "ghost_delay" => no("multipathd housekeeping mpio has no part of"),
        _ => ignored("not a multipath.conf keyword: multipath-tools ignores it with a warning"),
    }
}

/// `path_selector "NAME COUNT ARGS..."`, the dm table's words.
fn selector(value: &str) -> Outcome {
    let words: Vec<&str> = value.split_whitespace().collect();
    let Some((name, rest)) = words.split_first() else {
        return ignored("empty selector");
    };
    let args = match rest.split_first() {
        None => Vec::new(),
        Some((count, args)) if count.parse::<usize>().ok() == Some(args.len()) => args.to_vec(),
        Some(_) => return ignored("the selector's argument count does not match its arguments"),
    };
    let mut keys = vec![("selector", Value::Text((*name).to_string()))];
    if !args.is_empty() {
        keys.push((
            "selector_args",
            Value::List(
                args.iter()
                    .map(|arg| {
                        arg.parse::<i64>()
                            .map_or_else(|_| Value::Text((*arg).to_string()), Value::Integer)
                    })
                    .collect(),
            ),
        ));
    }
    Outcome::Set(keys)
}

/// `features "N WORDS..."`.
fn features(value: &str) -> Outcome {
    let words: Vec<&str> = value.split_whitespace().collect();
    match words[..] {
        [] | ["0"] => same("no features"),
        ["1", "queue_if_no_path"] => set("queue_if_no_path", Value::Flag(true)),
        _ => no(
            "dm features other than queue_if_no_path (pg_init_retries, queue_mode, ...) have \
             no mpio equivalent; no_path_retry gives queueing",
        ),
    }
}
