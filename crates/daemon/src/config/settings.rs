//! The keys a map may take from `[defaults]` (selector, grouping policy,
//! failback, `no_path_retry`, checker and I/O timing, marginal paths):
//! each checked where it is written, then a map's own over the defaults'.

use super::error::{quoted, Located, Place, Source};
use super::raw::{RawMarginal, RawSettings, Scalar};
use super::{ConfigError, NoPathRetry};
use mpio_core::failback::Failback;
use mpio_core::marginal::MarginalPolicy;
use mpio_core::selector::SELECTOR_NAMES;
use toml::Spanned;

/// Longest checker interval: one hour.
pub const MAX_CHECKER_INTERVAL_MS: u64 = 3_600_000;
/// Longest probe timeout, I/O timeout, marginal window and recovery time:
/// one day.
pub const MAX_TIMEOUT_MS: u64 = 86_400_000;
/// Most attempts of one I/O.
pub const MAX_ATTEMPTS: u32 = 1024;
/// Most checker intervals `no_path_retry = N` may queue for (with the
/// longest interval, about seven years: the product always fits in ns).
pub const MAX_NO_PATH_RETRY: u32 = 65_535;
/// Most failures `[marginal] failures` may count.
pub const MAX_MARGINAL_FAILURES: u32 = 1000;
/// The selector a map gets when neither it nor `[defaults]` names one
/// (multipath-tools' default).
pub const DEFAULT_SELECTOR: &str = "service-time";

/// multipath.conf's `path_grouping_policy` values mpio knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Policy {
    /// One path per group, in file order (multipath-tools' default).
    Failover,
    /// All paths in one group.
    Multibus,
    /// A group per distinct `prio`, highest first.
    GroupByPrio,
}

/// Marginal-path keys as written at one level.
#[derive(Clone, Debug, Default)]
pub(super) struct MarginalSettings {
    /// The table is there (`[defaults.marginal]` or `[map.marginal]`).
    pub present: bool,
    pub enabled: Option<bool>,
    pub failures: Option<u32>,
    pub window_ms: Option<u64>,
    pub recovery_ms: Option<u64>,
}

/// The checked keys of one level (`[defaults]` or one map), each with
/// where it was written.
#[derive(Clone, Debug, Default)]
pub(super) struct Settings {
    pub selector: Option<Located<String>>,
    pub selector_args: Option<Located<Vec<Located<String>>>>,
    pub policy: Option<Located<Policy>>,
    pub failback: Option<Failback>,
    pub no_path_retry: Option<Located<NoPathRetry>>,
    pub checker_interval_ms: Option<u64>,
    pub checker_timeout_ms: Option<u64>,
    pub io_timeout_ms: Option<u64>,
    pub fence_timeout_ms: Option<u64>,
    pub hedge_reads: Option<bool>,
    pub max_attempts: Option<u32>,
    pub marginal: MarginalSettings,
}

impl Settings {
    /// Checks the keys of one level; `context` is the level's key prefix
    /// (`defaults`, `map "mpatha"`).
    pub(crate) fn check(
        source: &Source<'_>,
        raw: RawSettings,
        context: &str,
    ) -> Result<Settings, ConfigError> {
        let key = |name: &str| format!("{context}: {name}");
        let selector = raw
            .selector
            .as_ref()
            .map(|selector| check_selector(source, selector, key("selector")))
            .transpose()?;
        let selector_args = raw
            .selector_args
            .as_ref()
            .map(|args| check_words(source, args, &key("selector_args")))
            .transpose()?;
        let policy = raw
            .path_grouping_policy
            .as_ref()
            .map(|policy| check_policy(source, policy, key("path_grouping_policy")))
            .transpose()?;
        let failback = raw
            .failback
            .as_ref()
            .map(|failback| {
                let place = Place::of(failback, key("failback"));
                Failback::parse(&failback.get_ref().word()).map_err(|error| {
                    source.error(&place, Some(failback.get_ref().toml()), error.reason)
                })
            })
            .transpose()?;
        let no_path_retry = check_no_path_retry(source, &raw, &key)?;
        let checker_interval_ms = raw
            .checker_interval_ms
            .as_ref()
            .map(|value| {
                milliseconds(
                    source,
                    value,
                    key("checker_interval_ms"),
                    1,
                    MAX_CHECKER_INTERVAL_MS,
                )
            })
            .transpose()?;
        let checker_timeout_ms = raw
            .checker_timeout_ms
            .as_ref()
            .map(|value| milliseconds(source, value, key("checker_timeout_ms"), 1, MAX_TIMEOUT_MS))
            .transpose()?;
        let io_timeout_ms = raw
            .io_timeout_ms
            .as_ref()
            .map(|value| milliseconds(source, value, key("io_timeout_ms"), 0, MAX_TIMEOUT_MS))
            .transpose()?;
        let fence_timeout_ms = raw
            .fence_timeout_ms
            .as_ref()
            .map(|value| milliseconds(source, value, key("fence_timeout_ms"), 0, MAX_TIMEOUT_MS))
            .transpose()?;
        let max_attempts = raw
            .max_attempts
            .as_ref()
            .map(|value| {
                integer(
                    source,
                    value,
                    key("max_attempts"),
                    1,
                    u64::from(MAX_ATTEMPTS),
                )
            })
            .transpose()?
            .map(|value| value as u32);
        let marginal = match &raw.marginal {
            Some(marginal) => {
                check_marginal(source, marginal.get_ref(), &nested(context, "marginal"))?
            }
            None => MarginalSettings::default(),
        };
        Ok(Settings {
            selector,
            selector_args,
            policy,
            failback,
            no_path_retry,
            checker_interval_ms,
            checker_timeout_ms,
            io_timeout_ms,
            fence_timeout_ms,
            hedge_reads: raw.hedge_reads.map(|value| *value.get_ref()),
            max_attempts,
            marginal,
        })
    }

    /// A map's settings over the defaults: each key the map sets wins.
    /// `selector_args` goes with `selector`: a map that names its own
    /// selector does not inherit the defaults' arguments (they were
    /// meant for another selector).
    pub(crate) fn over(self, defaults: &Settings) -> Settings {
        let selector_args = match (&self.selector_args, &self.selector) {
            (Some(_), _) => self.selector_args,
            (None, Some(_)) => None,
            (None, None) => defaults.selector_args.clone(),
        };
        let marginal = MarginalSettings {
            present: self.marginal.present || defaults.marginal.present,
            enabled: if self.marginal.present {
                Some(self.marginal.enabled.unwrap_or(true))
            } else {
                defaults.marginal.enabled
            },
            failures: self.marginal.failures.or(defaults.marginal.failures),
            window_ms: self.marginal.window_ms.or(defaults.marginal.window_ms),
            recovery_ms: self.marginal.recovery_ms.or(defaults.marginal.recovery_ms),
        };
        Settings {
            selector: self.selector.or_else(|| defaults.selector.clone()),
            selector_args,
            policy: self.policy.or_else(|| defaults.policy.clone()),
            failback: self.failback.or(defaults.failback),
            no_path_retry: self
                .no_path_retry
                .or_else(|| defaults.no_path_retry.clone()),
            checker_interval_ms: self.checker_interval_ms.or(defaults.checker_interval_ms),
            checker_timeout_ms: self.checker_timeout_ms.or(defaults.checker_timeout_ms),
            io_timeout_ms: self.io_timeout_ms.or(defaults.io_timeout_ms),
            fence_timeout_ms: self.fence_timeout_ms.or(defaults.fence_timeout_ms),
            hedge_reads: self.hedge_reads.or(defaults.hedge_reads),
            max_attempts: self.max_attempts.or(defaults.max_attempts),
            marginal,
        }
    }

    /// The marginal-path policy: off unless a `marginal` table is there;
    /// its missing fields from [`MarginalPolicy::default`].
    pub(crate) fn marginal_policy(&self) -> Option<MarginalPolicy> {
        let marginal = &self.marginal;
        if !marginal.present || marginal.enabled == Some(false) {
            return None;
        }
        let defaults = MarginalPolicy::default();
        Some(MarginalPolicy {
            failures: marginal.failures.unwrap_or(defaults.failures),
            window_ns: marginal.window_ms.map_or(defaults.window_ns, ns),
            recovery_ns: marginal.recovery_ms.map_or(defaults.recovery_ns, ns),
        })
    }
}

/// A setting given in ms, in ns. (The checks bound every ms setting far
/// below where this could overflow.)
pub(super) fn ns(ms: u64) -> u64 {
    ms * 1_000_000
}

fn check_selector(
    source: &Source<'_>,
    selector: &Spanned<String>,
    key: String,
) -> Result<Located<String>, ConfigError> {
    let place = Place::of(selector, key);
    let name = selector.get_ref();
    if !SELECTOR_NAMES.contains(&name.as_str()) {
        return Err(source.error(
            &place,
            quoted(name),
            format!(
                "no such selector; the selectors are {}",
                SELECTOR_NAMES.join(", ")
            ),
        ));
    }
    Ok(Located {
        value: name.clone(),
        place,
    })
}

/// The context of table `key` inside the table of `context`, as the
/// error locator writes it: `defaults.marginal`, `map "m" marginal`.
fn nested(context: &str, key: &str) -> String {
    match context.chars().last() {
        Some(last) if last.is_alphanumeric() || last == '_' => format!("{context}.{key}"),
        _ => format!("{context} {key}"),
    }
}

/// Checks an argument list (`selector_args`, a path's `args`): each an
/// integer or a one-word string.
pub(super) fn check_words(
    source: &Source<'_>,
    words: &Spanned<Vec<Spanned<Scalar>>>,
    key: &str,
) -> Result<Located<Vec<Located<String>>>, ConfigError> {
    let mut checked = Vec::with_capacity(words.get_ref().len());
    for (index, word) in words.get_ref().iter().enumerate() {
        let place = Place::of(word, format!("{key}[{index}]"));
        let text = word.get_ref().word();
        if text.is_empty() || text.bytes().any(|byte| byte.is_ascii_whitespace()) {
            return Err(source.error(
                &place,
                Some(word.get_ref().toml()),
                "an argument is one word: not empty, no spaces",
            ));
        }
        checked.push(Located { value: text, place });
    }
    if checked.len() > mpio_core::table::MAX_ARGS {
        return Err(source.error(
            &Place::of(words, key),
            None,
            format!(
                "{} arguments; at most {}",
                checked.len(),
                mpio_core::table::MAX_ARGS
            ),
        ));
    }
    Ok(Located {
        value: checked,
        place: Place::of(words, key),
    })
}

fn check_policy(
    source: &Source<'_>,
    policy: &Spanned<String>,
    key: String,
) -> Result<Located<Policy>, ConfigError> {
    let place = Place::of(policy, key);
    let value = match policy.get_ref().as_str() {
        "failover" => Policy::Failover,
        "multibus" => Policy::Multibus,
        "group_by_prio" => Policy::GroupByPrio,
        other => {
            let why = match other {
                "group_by_serial" | "group_by_node_name" | "group_by_tpg" => {
                    "multipath-tools' policy, not supported by mpio (it has no serial, node or TPG to group by); "
                }
                _ => "",
            };
            return Err(source.error(
                &place,
                quoted(other),
                format!("{why}expected failover, multibus or group_by_prio"),
            ));
        }
    };
    Ok(Located { value, place })
}

/// `no_path_retry` and its alias `queue_if_no_path` at one level; when
/// both are there they must agree.
fn check_no_path_retry(
    source: &Source<'_>,
    raw: &RawSettings,
    key: &dyn Fn(&str) -> String,
) -> Result<Option<Located<NoPathRetry>>, ConfigError> {
    let retry = match &raw.no_path_retry {
        Some(retry) => {
            let place = Place::of(retry, key("no_path_retry"));
            let refuse =
                |reason: String| source.error(&place, Some(retry.get_ref().toml()), reason);
            let parsed = match retry.get_ref() {
                Scalar::Text(text) if text == "queue" => Ok(NoPathRetry::Queue),
                Scalar::Text(text) if text == "fail" => Ok(NoPathRetry::Fail),
                Scalar::Integer(count) => Err(Some(*count)),
                // multipath.conf writes the count as a bare word.
                Scalar::Text(text) => Err(text.parse::<i64>().ok()),
            };
            let value = match parsed {
                Ok(value) => value,
                Err(Some(count)) if (1..=i64::from(MAX_NO_PATH_RETRY)).contains(&count) => {
                    NoPathRetry::Checks(count as u32)
                }
                Err(Some(0)) => return Err(refuse("0 checker intervals: say \"fail\"".into())),
                Err(_) => {
                    return Err(refuse(format!(
                        "expected \"queue\", \"fail\" or 1 to {MAX_NO_PATH_RETRY} checker intervals"
                    )))
                }
            };
            Some(Located { value, place })
        }
        None => None,
    };
    let Some(queue) = &raw.queue_if_no_path else {
        return Ok(retry);
    };
    let place = Place::of(queue, key("queue_if_no_path"));
    let queues = *queue.get_ref();
    match retry {
        None => Ok(Some(Located {
            value: if queues {
                NoPathRetry::Queue
            } else {
                NoPathRetry::Fail
            },
            place,
        })),
        Some(retry) => {
            if queues == (retry.value != NoPathRetry::Fail) {
                Ok(Some(retry))
            } else {
                let (line, _) = source.line_column(retry.place.span.start);
                Err(source.error(
                    &place,
                    Some(queues.to_string()),
                    format!(
                        "contradicts no_path_retry {} (line {line}); give one of the two",
                        retry_word(retry.value)
                    ),
                ))
            }
        }
    }
}

/// `no_path_retry`'s value as it is written.
pub(super) fn retry_word(retry: NoPathRetry) -> String {
    match retry {
        NoPathRetry::Fail => "\"fail\"".into(),
        NoPathRetry::Queue => "\"queue\"".into(),
        NoPathRetry::Checks(count) => count.to_string(),
    }
}

fn check_marginal(
    source: &Source<'_>,
    raw: &RawMarginal,
    context: &str,
) -> Result<MarginalSettings, ConfigError> {
    let key = |name: &str| format!("{context}: {name}");
    Ok(MarginalSettings {
        present: true,
        enabled: raw.enabled.as_ref().map(|enabled| *enabled.get_ref()),
        failures: raw
            .failures
            .as_ref()
            .map(|value| {
                integer(
                    source,
                    value,
                    key("failures"),
                    2,
                    u64::from(MAX_MARGINAL_FAILURES),
                )
            })
            .transpose()?
            .map(|value| value as u32),
        window_ms: raw
            .window_ms
            .as_ref()
            .map(|value| milliseconds(source, value, key("window_ms"), 1, MAX_TIMEOUT_MS))
            .transpose()?,
        recovery_ms: raw
            .recovery_ms
            .as_ref()
            .map(|value| milliseconds(source, value, key("recovery_ms"), 1, MAX_TIMEOUT_MS))
            .transpose()?,
    })
}

/// An integer in `min..=max`.
pub(super) fn integer(
    source: &Source<'_>,
    value: &Spanned<i64>,
    key: String,
    min: u64,
    max: u64,
) -> Result<u64, ConfigError> {
    bounded(source, value, key, min, max, || {
        format!("expected {min} to {max}")
    })
}

/// A time in ms in `min..=max`, with the bounds said in words.
pub(super) fn milliseconds(
    source: &Source<'_>,
    value: &Spanned<i64>,
    key: String,
    min: u64,
    max: u64,
) -> Result<u64, ConfigError> {
    bounded(source, value, key, min, max, || {
        let zero = if min == 0 { " (0: never)" } else { "" };
        format!("expected {min} to {max} ms{zero}: {}", duration_words(max))
    })
}

/// `value` if it is in `min..=max`, else an error at it saying `expected()`.
fn bounded(
    source: &Source<'_>,
    value: &Spanned<i64>,
    key: String,
    min: u64,
    max: u64,
    expected: impl FnOnce() -> String,
) -> Result<u64, ConfigError> {
    let number = *value.get_ref();
    match u64::try_from(number) {
        Ok(number) if (min..=max).contains(&number) => Ok(number),
        _ => Err(source.error(&Place::of(value, key), Some(number.to_string()), expected())),
    }
}

/// `one hour`, `one day`.
fn duration_words(ms: u64) -> &'static str {
    match ms {
        MAX_CHECKER_INTERVAL_MS => "at most one hour",
        MAX_TIMEOUT_MS => "at most one day",
        _ => "out of range",
    }
}
