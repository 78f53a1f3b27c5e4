//! What a thread about to wait may do about the requests its path queues
//! hold ([`Rest`]). A queue answers for itself; a thread watching several
//! combines their answers with [`Rest::and`] (or [`Rest::of`]), so one
//! queue that must be polled keeps the whole thread polling.

/// What a thread about to wait may do about a path queue's requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rest {
    /// Sleep on the thread's own io_uring: all the queue holds is with
    /// the kernel, and its next completion lands on that ring.
    OnRing,
    /// Poll at once: work is already waiting (a completion to reap, or
    /// I/O not yet submitted).
    Ready,
    /// Poll, now and then: the queue completes where only a poll sees it.
    Poll,
}

impl Rest {
    /// The rest for two queues watched together: any work waiting comes
    /// first, then any queue that must be polled.
    pub fn and(self, other: Rest) -> Rest {
        match (self, other) {
            (Rest::Ready, _) | (_, Rest::Ready) => Rest::Ready,
            (Rest::Poll, _) | (_, Rest::Poll) => Rest::Poll,
            (Rest::OnRing, Rest::OnRing) => Rest::OnRing,
        }
    }

    /// The rest for all of `rests` watched together ([`Rest::and`]);
    /// [`Rest::OnRing`] for none, as nothing then needs a poll.
    pub fn of(rests: impl IntoIterator<Item = Rest>) -> Rest {
        rests.into_iter().fold(Rest::OnRing, Rest::and)
    }
}

#[cfg(test)]
mod tests {
    use super::Rest;

    #[test]
    fn work_waiting_comes_first_then_polling() {
        assert_eq!(Rest::of([]), Rest::OnRing);
        assert_eq!(Rest::of([Rest::OnRing, Rest::OnRing]), Rest::OnRing);
        assert_eq!(Rest::of([Rest::OnRing, Rest::Poll]), Rest::Poll);
        assert_eq!(
            Rest::of([Rest::Poll, Rest::Ready, Rest::OnRing]),
            Rest::Ready
        );
        assert_eq!(Rest::Ready.and(Rest::Poll), Rest::Ready);
    }
}
