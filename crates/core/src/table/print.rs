//! Printing a table the way dm prints a loaded multipath target
//! (`multipath_status`, `STATUSTYPE_TABLE`): words separated by one space,
//! no trailing space, and every count recomputed from what the table
//! holds rather than copied from the source.
//!
//! ```text
//! 0 8388608 multipath 1 queue_if_no_path 0 1 1 service-time 0 1 2 /dev/nullb0 1 1
//! ```
//!
//! # Features
//! In dm's order: `queue_if_no_path`, `pg_init_retries N`,
//! `pg_init_delay_msecs N`, `retain_attached_hw_handler`, `queue_mode M`.
//! The count is of words, as dm sums it: 1 for each flag, 2 for each
//! feature with a value.
//!
//! Printing shows a table as it is; [`Table::canonical`] first makes it
//! what dm keeps (`queue_mode rq`/`mq` vanish, `queue_mode bio` turns on
//! `retain_attached_hw_handler`), checked feature by feature against the
//! kernel (`tests/table_oracle.rs`).
//!
//! # Where mpio prints differently from dm
//! - Trailing space: dm ends the line with one; mpio does not.
//! - `queue_mode bio` with a hardware handler: dm drops the handler in
//!   that mode; mpio prints it (not yet checked against the kernel).
//! - Hardware handler: dm prints `1 <name>` and drops the handler's
//!   arguments; mpio prints `<count> <name> <args...>`, so the table reads
//!   back the same. No handler prints `0`, as in dm.
//! - Initial group: dm prints the group it is using now (which moves as
//!   paths fail); mpio prints the table's configured initial group.
//! - `<#per_path_args>`: dm prints the selector's fixed count; mpio prints
//!   the argument count of the group's first path, which is that fixed
//!   count once the table is [`Table::canonical`].
//!
//! # Contract
//! Printing never fails or panics. The printed line parses back
//! ([`Table::parse`]) to a table that prints identically, provided the
//! table keeps the invariants parsing gives: each group has at least one
//! path, a group's paths have the same number of arguments, and every
//! name and argument is one word without whitespace. A parsed or
//! canonical table always does.

use std::fmt;

use super::{Features, GroupSpec, PathSpec, QueueMode, Table};

impl fmt::Display for Table {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "{} {} multipath {}",
            self.start_sector, self.length_sectors, self.features
        )?;
        write!(formatter, " {}", self.hardware_handler.len())?;
        for word in &self.hardware_handler {
            write!(formatter, " {word}")?;
        }
        write!(formatter, " {} {}", self.groups.len(), self.initial_group)?;
        for group in &self.groups {
            write!(formatter, " {group}")?;
        }
        Ok(())
    }
}

impl Features {
    /// How many words the features print as (dm's `<#features>`): 1 per
    /// flag, 2 per feature with a value.
    pub(crate) fn word_count(&self) -> usize {
        usize::from(self.queue_if_no_path)
            + 2 * usize::from(self.pg_init_retries.is_some())
            + 2 * usize::from(self.pg_init_delay_msecs.is_some())
            + usize::from(self.retain_attached_hw_handler)
            + 2 * usize::from(self.queue_mode.is_some())
    }
}

/// `<#features> [feature...]` in dm's order.
impl fmt::Display for Features {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}", self.word_count())?;
        if self.queue_if_no_path {
            write!(formatter, " queue_if_no_path")?;
        }
        if let Some(retries) = self.pg_init_retries {
            write!(formatter, " pg_init_retries {retries}")?;
        }
        if let Some(delay) = self.pg_init_delay_msecs {
            write!(formatter, " pg_init_delay_msecs {delay}")?;
        }
        if self.retain_attached_hw_handler {
            write!(formatter, " retain_attached_hw_handler")?;
        }
        if let Some(mode) = self.queue_mode {
            write!(formatter, " queue_mode {mode}")?;
        }
        Ok(())
    }
}

impl QueueMode {
    /// The value's word in a table: `bio`, `rq` or `mq`.
    pub fn word(self) -> &'static str {
        match self {
            QueueMode::Bio => "bio",
            QueueMode::Rq => "rq",
            QueueMode::Mq => "mq",
        }
    }
}

impl fmt::Display for QueueMode {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.word())
    }
}

/// `<selector> <#selector_args> [arg...] <#paths> <#per_path_args> { <path> [arg...] }+`
impl fmt::Display for GroupSpec {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{} {}", self.selector, self.selector_args.len())?;
        for arg in &self.selector_args {
            write!(formatter, " {arg}")?;
        }
        let path_arg_count = self.paths.first().map_or(0, |path| path.args.len());
        write!(formatter, " {} {path_arg_count}", self.paths.len())?;
        for path in &self.paths {
            write!(formatter, " {path}")?;
        }
        Ok(())
    }
}

/// `<path> [arg...]`
impl fmt::Display for PathSpec {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.name)?;
        for arg in &self.args {
            write!(formatter, " {arg}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Features, GroupSpec, PathSpec, QueueMode, Table};

    fn path(name: &str, args: &[&str]) -> PathSpec {
        PathSpec {
            name: name.to_owned(),
            args: args.iter().map(|arg| arg.to_string()).collect(),
            word: 0,
        }
    }

    fn table(features: Features, hardware_handler: &[&str], groups: Vec<GroupSpec>) -> Table {
        Table {
            start_sector: 0,
            length_sectors: 8_388_608,
            features,
            hardware_handler: hardware_handler
                .iter()
                .map(|word| word.to_string())
                .collect(),
            initial_group: u32::from(!groups.is_empty()),
            groups,
        }
    }

    fn round_robin(paths: Vec<PathSpec>) -> GroupSpec {
        GroupSpec {
            selector: "round-robin".to_owned(),
            selector_args: Vec::new(),
            paths,
            word: 0,
        }
    }

    #[test]
    fn prints_counts_from_the_vectors() {
        let printed = table(
            Features::default(),
            &[],
            vec![round_robin(vec![path("P1", &["1"]), path("P2", &["3"])])],
        )
        .to_string();
        assert_eq!(
            printed,
            "0 8388608 multipath 0 0 1 1 round-robin 0 2 1 P1 1 P2 3"
        );
    }

    #[test]
    fn prints_features_in_dm_order_counting_words() {
        let every = Features {
            queue_if_no_path: true,
            pg_init_retries: Some(50),
            pg_init_delay_msecs: Some(0),
            retain_attached_hw_handler: true,
            queue_mode: Some(QueueMode::Bio),
        };
        assert_eq!(every.word_count(), 8);
        assert_eq!(
            every.to_string(),
            "8 queue_if_no_path pg_init_retries 50 pg_init_delay_msecs 0 retain_attached_hw_handler queue_mode bio"
        );
        let some = Features {
            queue_mode: Some(QueueMode::Mq),
            queue_if_no_path: true,
            ..Features::default()
        };
        assert_eq!(some.to_string(), "3 queue_if_no_path queue_mode mq");
        assert_eq!(Features::default().to_string(), "0");
    }

    #[test]
    fn prints_hardware_handler_with_its_arguments() {
        let printed = table(Features::default(), &["alua", "1", "x"], Vec::new()).to_string();
        assert_eq!(printed, "0 8388608 multipath 0 3 alua 1 x 0 0");
    }

    #[test]
    fn prints_paths_without_arguments_and_no_trailing_space() {
        let printed = table(
            Features::default(),
            &[],
            vec![
                round_robin(vec![path("P1", &[])]),
                round_robin(vec![path("P2", &[])]),
            ],
        )
        .to_string();
        assert_eq!(
            printed,
            "0 8388608 multipath 0 0 2 1 round-robin 0 1 0 P1 round-robin 0 1 0 P2"
        );
    }
}
