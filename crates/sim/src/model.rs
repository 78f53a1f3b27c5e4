//! The reference disk: what each block may hold when a read looks at it,
//! given every write the caller issued and how each one ended.
//!
//! # What mpio promises about writes (and what this model checks)
//! Times here are *sequence numbers*: one counter, bumped at every
//! submission and every completion the caller sees, so that "before" means
//! "before in the caller's program order".
//!
//! - An acknowledged write landed once, at some point after its
//!   submission and before its completion.
//! - A write that completed with an error may have landed (a path error
//!   after the data reached the disk, a retry elsewhere) or not, but never
//!   after its completion: mpio completes an I/O only once no attempt of
//!   it is left in any transport (an attempt a transport cannot abort is
//!   waited for), and an aborted attempt never lands (the `PathQueue`
//!   contract).
//! - A write still in flight may land at any time.
//!
//! So a read `R` may return the value of write `X` iff `X` was submitted
//! before `R` completed, and no acknowledged write `Y` surely landed after
//! `X` and before `R` began: `Y` surely lands after `X` when `Y` was
//! submitted after the last moment `X` could land (`X`'s completion, or
//! never for a write in flight), and surely before `R` when `Y` completed
//! before `R` was submitted. With `T` the latest submission among the
//! acknowledged writes completed before `R` began, `X` is possible iff
//! `latest_landing(X) >= T`. The disk's initial zeros are a write
//! submitted and acknowledged at sequence 0.
//!
//! Two reads of a block with no write that could land between them must
//! agree: this catches a write landing after its completion even when no
//! later write covers it. And a copy of a write that a path held and
//! applied late (a ghost, see `transport.rs`) is checked as it lands
//! ([`ReferenceDisk::check_landing`]): it may land only while its write is
//! in flight or after it failed as unfenced (the caller was told it may
//! still land; its record stays in flight for good).

use std::fmt::Write;

/// `latest_landing` of a write that has not completed.
const IN_FLIGHT: u64 = u64::MAX;

#[derive(Clone, Copy, Debug)]
struct WriteRecord {
    io: u64,
    value: u64,
    submit_seq: u64,
    /// Completion sequence, or [`IN_FLIGHT`].
    latest_landing: u64,
    acknowledged: bool,
}

#[derive(Clone, Copy, Debug)]
struct ReadRecord {
    value: u64,
    start_seq: u64,
    end_seq: u64,
}

/// The history of every block. See the module docs.
#[derive(Debug)]
pub(crate) struct ReferenceDisk {
    writes: Vec<Vec<WriteRecord>>,
    last_read: Vec<Option<ReadRecord>>,
}

impl ReferenceDisk {
    /// `block_count` blocks of zeros.
    pub(crate) fn new(block_count: u64) -> Self {
        let initial = WriteRecord {
            io: u64::MAX,
            value: 0,
            submit_seq: 0,
            latest_landing: 0,
            acknowledged: true,
        };
        ReferenceDisk {
            writes: vec![vec![initial]; block_count as usize],
            last_read: vec![None; block_count as usize],
        }
    }

    /// Write `io` of `value` to `blocks` was submitted at `seq`.
    pub(crate) fn write_submitted(
        &mut self,
        io: u64,
        blocks: std::ops::Range<u64>,
        value: u64,
        seq: u64,
    ) {
        for block in blocks {
            self.writes[block as usize].push(WriteRecord {
                io,
                value,
                submit_seq: seq,
                latest_landing: IN_FLIGHT,
                acknowledged: false,
            });
        }
    }

    /// Write `io` to `blocks` completed at `seq`, acknowledged or failed.
    pub(crate) fn write_completed(
        &mut self,
        io: u64,
        blocks: std::ops::Range<u64>,
        acknowledged: bool,
        seq: u64,
    ) {
        for block in blocks {
            if let Some(record) = self.writes[block as usize]
                .iter_mut()
                .rev()
                .find(|record| record.io == io)
            {
                record.latest_landing = seq;
                record.acknowledged = acknowledged;
            }
        }
    }

    /// Checks that write value `value` may land on block `block` at `seq`
    /// (a late copy of it, held by a path, just landed): only a write the
    /// caller was never told ended may (in flight, or failed as unfenced,
    /// which the caller was told may still land). A copy landing after
    /// its write completed is the stale overwrite fencing prevents.
    pub(crate) fn check_landing(&self, block: u64, value: u64, seq: u64) -> Result<(), String> {
        let history = &self.writes[block as usize];
        if history
            .iter()
            .any(|write| write.value == value && write.latest_landing >= seq)
        {
            return Ok(());
        }
        Err(format!(
            "block {block}: a held copy of write value {value} landed at seq {seq}, after the \
             write completed ({})",
            history
                .iter()
                .filter(|write| write.value == value)
                .map(|write| format!(
                    "io{} seq {}..{}{}",
                    write.io,
                    write.submit_seq,
                    write.latest_landing,
                    if write.acknowledged {
                        " acked"
                    } else {
                        " failed"
                    }
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }

    /// Checks that block `block`, read by a read submitted at `start_seq`
    /// and completed at `end_seq`, may hold `found` (`None`: content no
    /// write wrote). Returns what is wrong otherwise.
    pub(crate) fn check_read(
        &mut self,
        block: u64,
        found: Option<u64>,
        start_seq: u64,
        end_seq: u64,
    ) -> Result<(), String> {
        let history = &self.writes[block as usize];
        let Some(value) = found else {
            return Err(format!(
                "block {block} holds bytes that no write wrote there (torn or misplaced)"
            ));
        };
        let newest_sure = history
            .iter()
            .filter(|write| write.acknowledged && write.latest_landing < start_seq)
            .map(|write| write.submit_seq)
            .max()
            .unwrap_or(0);
        let possible = |write: &&WriteRecord| {
            write.submit_seq < end_seq && write.latest_landing >= newest_sure
        };
        if !history
            .iter()
            .filter(possible)
            .any(|write| write.value == value)
        {
            let mut message = format!(
                "block {block} read value {value} (seq {start_seq}..{end_seq}); possible values:"
            );
            for write in history.iter().filter(possible) {
                let _ = write!(
                    message,
                    " {} (io{} seq {}..{}{})",
                    write.value,
                    write.io,
                    write.submit_seq,
                    write.latest_landing,
                    if write.acknowledged { " acked" } else { "" }
                );
            }
            return Err(message);
        }
        if let Some(previous) = self.last_read[block as usize] {
            if previous.end_seq < start_seq && previous.value != value {
                let between = history.iter().any(|write| {
                    write.submit_seq < end_seq && write.latest_landing > previous.start_seq
                });
                if !between {
                    return Err(format!(
                        "block {block} read {value} (seq {start_seq}..{end_seq}) but an earlier \
                         read saw {} (seq {}..{}) and no write could land between them",
                        previous.value, previous.start_seq, previous.end_seq
                    ));
                }
            }
        }
        let newer =
            self.last_read[block as usize].is_none_or(|previous| previous.end_seq < end_seq);
        if newer {
            self.last_read[block as usize] = Some(ReadRecord {
                value,
                start_seq,
                end_seq,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_acknowledged_write_hides_older_values() {
        let mut disk = ReferenceDisk::new(1);
        disk.write_submitted(1, 0..1, 7, 1);
        // While in flight: either the old zeros or the new value.
        assert!(disk.check_read(0, Some(0), 2, 3).is_ok());
        assert!(disk.check_read(0, Some(7), 4, 5).is_ok());
        disk.write_completed(1, 0..1, true, 6);
        assert!(disk.check_read(0, Some(7), 7, 8).is_ok());
        assert!(disk.check_read(0, Some(0), 9, 10).is_err());
        assert!(disk.check_read(0, None, 11, 12).is_err());
    }

    #[test]
    fn a_failed_write_may_have_landed_but_not_after_its_completion() {
        let mut disk = ReferenceDisk::new(1);
        disk.write_submitted(1, 0..1, 7, 1);
        disk.write_completed(1, 0..1, false, 2);
        assert!(disk.check_read(0, Some(7), 3, 4).is_ok());
        disk.write_submitted(2, 0..1, 9, 5);
        disk.write_completed(2, 0..1, true, 6);
        let error = disk.check_read(0, Some(7), 7, 8).unwrap_err();
        assert!(error.contains("possible values: 9"), "{error}");
    }

    #[test]
    fn a_held_copy_may_land_only_while_its_write_is_in_flight() {
        let mut disk = ReferenceDisk::new(1);
        disk.write_submitted(1, 0..1, 7, 1);
        assert!(disk.check_landing(0, 7, 2).is_ok());
        disk.write_completed(1, 0..1, true, 3);
        let error = disk.check_landing(0, 7, 4).unwrap_err();
        assert!(error.contains("after the write completed"), "{error}");
        // Failed as unfenced: never completed in the model's books.
        disk.write_submitted(2, 0..1, 9, 5);
        assert!(disk.check_landing(0, 9, 99).is_ok());
    }

    #[test]
    fn reads_agree_when_no_write_could_land_between() {
        let mut disk = ReferenceDisk::new(1);
        disk.write_submitted(1, 0..1, 7, 1);
        disk.write_completed(1, 0..1, false, 2);
        assert!(disk.check_read(0, Some(0), 3, 4).is_ok());
        let error = disk.check_read(0, Some(7), 5, 6).unwrap_err();
        assert!(error.contains("no write could land"), "{error}");
    }

    #[test]
    fn concurrent_acknowledged_writes_leave_either_value() {
        let mut disk = ReferenceDisk::new(1);
        disk.write_submitted(1, 0..1, 7, 1);
        disk.write_submitted(2, 0..1, 9, 2);
        disk.write_completed(2, 0..1, true, 3);
        disk.write_completed(1, 0..1, true, 4);
        assert!(disk.check_read(0, Some(7), 5, 6).is_ok());
        let mut other = ReferenceDisk::new(1);
        other.write_submitted(1, 0..1, 7, 1);
        other.write_submitted(2, 0..1, 9, 2);
        other.write_completed(2, 0..1, true, 3);
        other.write_completed(1, 0..1, true, 4);
        assert!(other.check_read(0, Some(9), 5, 6).is_ok());
        assert!(other.check_read(0, Some(0), 7, 8).is_err());
    }
}
