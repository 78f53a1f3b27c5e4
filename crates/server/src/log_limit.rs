//! Log events that a client can cause, at most one a second per kind: a
//! client sending bad requests (or connections) as fast as it can must
//! not flood the log, nor stall an event loop on a full stderr. What is
//! not logged is counted and said with the next event (its `held_back`
//! field); the server's counters (`crate::stats`) count everything.
//! Events go through `tracing` at `warn`.

use mpio_transport::clock::now_ns;

/// Shortest gap between two lines of one kind, ns.
const GAP_NS: u64 = 1_000_000_000;

/// One kind of line, limited. See the module docs.
#[derive(Debug, Default)]
pub struct LimitedLog {
    /// When the last line went out (`None`: never).
    last_ns: Option<u64>,
    /// Lines held back since.
    held_back: u64,
}

impl LimitedLog {
    /// Logs `line()` (a `tracing` warning) unless a line of this kind went
    /// out less than a second ago; then only counts it.
    pub fn note(&mut self, line: impl FnOnce() -> String) {
        let now = now_ns();
        if self
            .last_ns
            .is_some_and(|last| now.saturating_sub(last) < GAP_NS)
        {
            self.held_back += 1;
            return;
        }
        let held_back = std::mem::take(&mut self.held_back);
        self.last_ns = Some(now);
        // Built here, not inside the macro: at most once a second, and
        // whether or not a subscriber listens (the test counts builds).
        let line = line();
        if held_back > 0 {
            tracing::warn!(held_back, "{line} ({held_back} more like it not shown)");
        } else {
            tracing::warn!("{line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_prints_one_line_and_counts_the_rest() {
        let mut log = LimitedLog::default();
        let mut printed = 0;
        for _ in 0..1000 {
            log.note(|| {
                printed += 1;
                "request refused".into()
            });
        }
        assert_eq!(printed, 1);
        assert_eq!(log.held_back, 999);
    }
}
