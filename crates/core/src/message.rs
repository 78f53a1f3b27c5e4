//! The control verbs, in `dmsetup message` words.

use serde::Serialize;

/// One control verb, parsed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "verb", content = "argument")]
pub enum Message {
    /// `fail_path P`: take path P out of use.
    FailPath(String),
    /// `reinstate_path P`: put path P back in use.
    ReinstatePath(String),
    /// `switch_group N`: send I/O to group N (1-based) and re-enable every group.
    SwitchGroup(u32),
    /// `enable_group N`: stop bypassing group N.
    EnableGroup(u32),
    /// `disable_group N`: bypass group N while another group is usable.
    DisableGroup(u32),
    /// `queue_if_no_path`: hold I/O while no path is usable.
    QueueIfNoPath,
    /// `fail_if_no_path`: fail I/O (and everything held) while no path is usable.
    FailIfNoPath,
}

/// A message that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("message {text:?}: {reason}")]
pub struct MessageError {
    /// The message as given.
    pub text: String,
    /// What was wrong.
    pub reason: String,
}

/// The verbs, for error messages and help.
pub(crate) const VERBS: &str = "fail_path P, reinstate_path P, switch_group N, enable_group N, \
                         disable_group N, queue_if_no_path, fail_if_no_path";

impl Message {
    /// The verb's word (`fail_path`, `switch_group`, ...).
    pub fn verb(&self) -> &'static str {
        match self {
            Message::FailPath(_) => "fail_path",
            Message::ReinstatePath(_) => "reinstate_path",
            Message::SwitchGroup(_) => "switch_group",
            Message::EnableGroup(_) => "enable_group",
            Message::DisableGroup(_) => "disable_group",
            Message::QueueIfNoPath => "queue_if_no_path",
            Message::FailIfNoPath => "fail_if_no_path",
        }
    }

    /// Parses one message (`fail_path 8:16`, `switch_group 2`, ...).
    ///
    /// # Errors
    /// Names the unknown verb, the missing or extra argument, or the bad
    /// group number.
    pub fn parse(text: &str) -> Result<Message, MessageError> {
        let error = |reason: String| MessageError {
            text: text.to_string(),
            reason,
        };
        let words: Vec<&str> = text.split_whitespace().collect();
        let (verb, arguments) = words
            .split_first()
            .ok_or_else(|| error(format!("empty; expected one of {VERBS}")))?;
        let one_argument = |what: &str| match arguments {
            [argument] => Ok(*argument),
            [] => Err(error(format!("{verb} needs {what}"))),
            _ => Err(error(format!("{verb} takes only {what}"))),
        };
        let group = |what: &str| -> Result<u32, MessageError> {
            let word = one_argument(what)?;
            match word.parse::<u32>() {
                Ok(number) if number >= 1 => Ok(number),
                _ => Err(error(format!(
                    "group number must be a whole number from 1, not {word:?}"
                ))),
            }
        };
        let no_argument = |message: Message| {
            if arguments.is_empty() {
                Ok(message)
            } else {
                Err(error(format!("{verb} takes no argument")))
            }
        };
        match *verb {
            "fail_path" => Ok(Message::FailPath(one_argument("a path")?.to_string())),
            "reinstate_path" => Ok(Message::ReinstatePath(one_argument("a path")?.to_string())),
            "switch_group" => Ok(Message::SwitchGroup(group("a group number")?)),
            "enable_group" => Ok(Message::EnableGroup(group("a group number")?)),
            "disable_group" => Ok(Message::DisableGroup(group("a group number")?)),
            "queue_if_no_path" => no_argument(Message::QueueIfNoPath),
            "fail_if_no_path" => no_argument(Message::FailIfNoPath),
            _ => Err(error(format!(
                "unknown verb {verb:?}; expected one of {VERBS}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_verb() {
        assert_eq!(
            Message::parse("fail_path 8:16"),
            Ok(Message::FailPath("8:16".into()))
        );
        assert_eq!(
            Message::parse(" reinstate_path  a "),
            Ok(Message::ReinstatePath("a".into()))
        );
        assert_eq!(
            Message::parse("switch_group 2"),
            Ok(Message::SwitchGroup(2))
        );
        assert_eq!(
            Message::parse("enable_group 1"),
            Ok(Message::EnableGroup(1))
        );
        assert_eq!(
            Message::parse("disable_group 3"),
            Ok(Message::DisableGroup(3))
        );
        assert_eq!(
            Message::parse("queue_if_no_path"),
            Ok(Message::QueueIfNoPath)
        );
        assert_eq!(Message::parse("fail_if_no_path"), Ok(Message::FailIfNoPath));
    }

    #[test]
    fn names_what_is_wrong() {
        let cases = [
            ("", "empty"),
            ("fail_path", "needs a path"),
            ("fail_path a b", "takes only a path"),
            ("switch_group 0", "from 1"),
            ("switch_group x", "not \"x\""),
            ("queue_if_no_path 1", "takes no argument"),
            ("frobnicate", "unknown verb \"frobnicate\""),
        ];
        for (text, fragment) in cases {
            let error = Message::parse(text).unwrap_err();
            assert!(error.to_string().contains(fragment), "{text:?}: {error}");
        }
    }
}
