//! What a thread about to wait may do about the requests its path queues
//! hold ([`Rest`]), and the eventfd it sleeps on meanwhile ([`Waker`]).
//! A queue answers for itself; a thread watching several combines their
//! answers with [`Rest::and`] (or [`Rest::of`]), so one queue that must
//! be polled keeps the whole thread polling.

/// An eventfd a thread sleeps on, borrowed by the path queues it opens:
/// each completion they post while it rests signals it (see [`Rest`]).
/// The thread keeps it open for as long as those queues live.
#[derive(Clone, Copy, Debug)]
pub struct Waker(pub std::os::fd::RawFd);

/// What a thread about to wait may do about a path queue's requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rest {
    /// Sleep until the [`Waker`] fires: all the queue holds is with the
    /// kernel, and its next completion signals the waker (armed now).
    OnWaker,
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
            (Rest::OnWaker, Rest::OnWaker) => Rest::OnWaker,
        }
    }

    /// The rest for all of `rests` watched together ([`Rest::and`]);
    /// [`Rest::OnWaker`] for none, as nothing then needs a poll.
    pub fn of(rests: impl IntoIterator<Item = Rest>) -> Rest {
        rests.into_iter().fold(Rest::OnWaker, Rest::and)
    }
}

#[cfg(test)]
mod tests {
    use super::Rest;

    #[test]
    fn work_waiting_comes_first_then_polling() {
        assert_eq!(Rest::of([]), Rest::OnWaker);
        assert_eq!(Rest::of([Rest::OnWaker, Rest::OnWaker]), Rest::OnWaker);
        assert_eq!(Rest::of([Rest::OnWaker, Rest::Poll]), Rest::Poll);
        assert_eq!(
            Rest::of([Rest::Poll, Rest::Ready, Rest::OnWaker]),
            Rest::Ready
        );
        assert_eq!(Rest::Ready.and(Rest::Poll), Rest::Ready);
    }
}
