//! The checks made at each completion the caller receives: exactly once,
//! within its latency bound, and with a result the ground truth explains.
//!
//! # When may an I/O fail? ("usable path", precisely)
//! A path is *usable* when the map's control state has it not failed and
//! its access state is optimized or non-optimized; the map has a *route*
//! exactly when some path is usable. The map's failed flags are set only
//! by `fail_path` messages and by path failures the
//! [`SpuriousPathFailure`](crate::invariants::Invariant::SpuriousPathFailure)
//! invariant has explained by the ground truth (a path error the simulated
//! path reported, or an attempt it held past the I/O timeout). Given that:
//!
//! - `NoPath` is allowed only if, after some call on the queue between the
//!   I/O's production and its delivery, the map had no route and did not
//!   queue (`fail_if_no_path`). Within one call the map only loses paths,
//!   so "no route at the end of the call" covers the moment of decision.
//! - `NoPathTimeout` only if the map bounds the wait, the I/O is at least
//!   that old, and the map has no route at the end of the poll that
//!   produced it.
//! - `RetryLimit` only if the queue has been handed at least
//!   `max_attempts` path-failed attempts (path errors plus attempts given
//!   back after a timeout) per `RetryLimit` so far.
//! - A target error only if the storage gave that error for a block of
//!   the I/O during the I/O's life.
//! - `Invalid` exactly for the requests the simulator made out of range.
//! - `Unfenced` only for a write, write-zeroes or flush at least the I/O
//!   timeout plus the fence timeout old (its path held it that long).
//!
//! # The latency bound
//! `max_attempts` attempts of at most the runner's attempt bound each (the
//! slowest completion, or the I/O timeout plus one timeout scan), plus
//! one scheduler step per wait for a path, plus every moment the map had
//! no route (waiting; at most `no_path_timeout_ns` and a step when set,
//! counted from the first wait), plus every
//! moment a path was hung (an attempt a transport cannot abort is waited
//! for, however long the hang).

use crate::data::{decode, BLOCK_BYTES};
use crate::invariants::{Failure, Invariant};
use crate::runner::{CallView, Sim};
use crate::trace::{result_word, TraceEvent};
use mpio_core::io::{Completion, IoError, Op};

impl Sim {
    /// Checks one completion handed over by `queue`'s poll; `view` is the
    /// route after that poll (`fails_for_no_path` also covers the calls
    /// on the queue since its previous poll).
    pub(crate) fn complete(
        &mut self,
        queue: usize,
        completion: Completion,
        view: CallView,
    ) -> Result<(), Failure> {
        let id = completion.user_data;
        let exactly_once = |detail: String| Err(Failure::new(Invariant::ExactlyOnce, detail));
        let Some(io) = self.ios.get(id as usize).cloned() else {
            return exactly_once(format!("queue {queue} completed io{id}, never submitted"));
        };
        if io.done {
            return exactly_once(format!("io{id} completed a second time"));
        }
        if io.queue != queue {
            return exactly_once(format!(
                "io{id} was submitted on queue {} but completed on queue {queue}",
                io.queue
            ));
        }
        self.ios[id as usize].done = true;
        self.tracks[queue].outstanding -= 1;
        let seq = self.next_seq();
        let result = completion.result;
        self.record(TraceEvent::Complete {
            queue,
            io: id,
            result: result_word(&result),
        });

        let elapsed_ns = self.now_ns - io.submit_ns;
        let bound_ns = self.latency_bound_ns(io.submit_ns);
        if elapsed_ns > bound_ns {
            return Err(Failure::new(
                Invariant::Latency,
                format!("io{id} took {elapsed_ns}ns; its bound was {bound_ns}ns"),
            ));
        }
        let failed_while_usable = |detail: String| {
            Err(Failure::new(
                Invariant::FailedWhileUsable,
                format!("io{id} ({:?}) {detail}", io.op),
            ))
        };
        if io.invalid {
            return match result {
                Err(IoError::Invalid(_)) => Ok(()),
                other => failed_while_usable(format!(
                    "lies beyond the device, yet completed with {other:?}"
                )),
            };
        }
        if io.verifying && result.is_err() {
            return Err(Failure::new(
                Invariant::Verification,
                format!("verification read io{id} failed: {result:?}"),
            ));
        }
        // A write failed as unfenced may still land: its record stays in
        // flight for good.
        if io.op.is_write() && result != Err(IoError::Unfenced) {
            self.model
                .write_completed(id, io.blocks.clone(), result.is_ok(), seq);
        }
        let error = match result {
            Ok(()) if io.op == Op::Read => {
                return self.check_read(id, &completion.buf, io.blocks, io.submit_seq, seq);
            }
            Ok(()) => return Ok(()),
            Err(error) => error,
        };
        match error {
            IoError::Invalid(reason) => {
                failed_while_usable(format!("refused as invalid: {reason}"))
            }
            IoError::Target(target) => {
                let explained = self.world.borrow().target_fault_explains(
                    target,
                    io.blocks.clone(),
                    io.submit_ns,
                    self.now_ns,
                );
                if explained {
                    Ok(())
                } else {
                    Err(Failure::new(
                        Invariant::UnexplainedTargetError,
                        format!(
                            "io{id} ({:?} blocks {}..{}) failed with {target}, which the storage \
                             never gave for those blocks during its life",
                            io.op, io.blocks.start, io.blocks.end
                        ),
                    ))
                }
            }
            IoError::Unfenced => {
                let options = &self.scenario.options;
                let limit_ns = options
                    .io_timeout_ns
                    .zip(options.fence_timeout_ns)
                    .map(|(timeout, fence)| timeout + fence);
                match limit_ns {
                    Some(limit_ns) if io.op != Op::Read && elapsed_ns >= limit_ns => Ok(()),
                    _ => failed_while_usable(format!(
                        "failed as unfenced after {elapsed_ns}ns (I/O timeout plus fence \
                         timeout {limit_ns:?})"
                    )),
                }
            }
            IoError::NoPath if !view.fails_for_no_path => failed_while_usable(
                "failed with NoPath while a usable path existed or the map queued".into(),
            ),
            IoError::NoPath => Ok(()),
            IoError::NoPathTimeout => {
                let limit_ns = self.scenario.options.no_path_timeout_ns;
                match limit_ns {
                    Some(limit_ns) if elapsed_ns >= limit_ns && view.no_route => Ok(()),
                    _ => failed_while_usable(format!(
                        "failed with NoPathTimeout after {elapsed_ns}ns (limit {limit_ns:?}, \
                         route now: {})",
                        !view.no_route
                    )),
                }
            }
            IoError::RetryLimit => {
                self.tracks[queue].retry_limited += 1;
                let needed = self.tracks[queue].retry_limited
                    * u64::from(self.scenario.options.max_attempts);
                let evidence = self.world.borrow().queue_failure_evidence(queue);
                if needed > evidence {
                    failed_while_usable(format!(
                        "hit the retry limit, but queue {queue} saw only {evidence} path-failed \
                         attempts for {} retry-limited I/Os of {} attempts",
                        self.tracks[queue].retry_limited, self.scenario.options.max_attempts
                    ))
                } else {
                    Ok(())
                }
            }
        }
    }

    fn check_read(
        &mut self,
        id: u64,
        buf: &mpio_core::io::Buffer,
        blocks: std::ops::Range<u64>,
        start_seq: u64,
        end_seq: u64,
    ) -> Result<(), Failure> {
        let expected = (blocks.end - blocks.start) as usize * BLOCK_BYTES;
        if buf.len() != expected {
            return Err(Failure::new(
                Invariant::ReferenceDisk,
                format!("read io{id} returned {} bytes for {expected}", buf.len()),
            ));
        }
        for (block, bytes) in blocks.zip(buf.as_slice().chunks_exact(BLOCK_BYTES)) {
            self.blocks_checked += 1;
            self.model
                .check_read(block, decode(bytes, block), start_seq, end_seq)
                .map_err(|detail| {
                    Failure::new(Invariant::ReferenceDisk, format!("io{id}: {detail}"))
                })?;
        }
        Ok(())
    }

    /// The longest an I/O submitted at `submit_ns` may take if it
    /// completes now. See the module docs.
    fn latency_bound_ns(&self, submit_ns: u64) -> u64 {
        let attempts = u64::from(self.scenario.options.max_attempts);
        let step_ns = self.scenario.step_max_ns;
        // The wait limit counts from the I/O's first wait, however often
        // a path comes and goes: past it, the I/O fails at its next poll.
        let waiting_ns = match self.scenario.options.no_path_timeout_ns {
            Some(limit_ns) => self.no_route_overlap_ns(submit_ns).min(limit_ns + step_ns),
            None => self.no_route_overlap_ns(submit_ns),
        };
        attempts * self.attempt_bound_ns()
            + (attempts + 1) * step_ns
            + waiting_ns
            + self.world.borrow().hang_overlap_ns(submit_ns, self.now_ns)
    }
}
