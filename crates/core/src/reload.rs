//! Live reload: a running device takes a new table (another selector,
//! paths added or removed, other groups) with no pause and no I/O lost,
//! as dm's `reload` + `resume` and `mpio reload` do.
//!
//! # Shape
//! A map's table, groups, selectors and paths are fixed for its life, so a
//! reload builds a whole new [`Map`] and takes over from the old one what
//! it knew of each path word ([`Map::carry_over_from`]). A [`MapSlot`]
//! holds the map a device serves now, together with what the transport
//! layer attached to it (its path handles, say), and an epoch that moves
//! at every [`MapSlot::install`].
//!
//! Each I/O thread drives a [`ReloadingQueue`]: a [`Queue`] on the current
//! map and the queues of earlier maps that still hold I/O. At its first
//! submit or poll after a reload it opens a queue on the new map (through
//! the opener the transport layer gave it) and sends new I/O there. I/O
//! waiting for a path moves to the new map at once, as if submitted there;
//! I/O a path holds finishes where it is (a retry after a path error stays
//! on the old map's other paths, and moves to the new map if the old one
//! has none: the new map's `queue_if_no_path` decides), and an old queue
//! is dropped once empty.
//! Nothing a path holds is ever submitted twice.
//!
//! # Concurrency
//! Per submit and poll the fast path reads one atomic, the epoch; the
//! slot's lock is taken only to install a map and to fetch it after one.
//!
//! # Depth
//! For a while after a reload a thread may hold more than its depth: the
//! old queues' I/O plus up to `depth` new ones.

use crate::io::{Completion, Io};
use crate::map::Map;
use crate::queue::{PathQueue, Queue};
use crate::sync::{lock, Arc, AtomicU64, Mutex, Ordering};

/// The map a device serves now, what the transport layer attached to it,
/// and the epoch of the last install. See the module docs.
#[derive(Debug)]
pub struct MapSlot<T> {
    current: Mutex<Installed<T>>,
    epoch: AtomicU64,
}

#[derive(Debug)]
struct Installed<T> {
    map: Arc<Map>,
    attached: Arc<T>,
    epoch: u64,
}

impl<T> MapSlot<T> {
    /// A slot serving `map`, with `attached` beside it, at epoch 0.
    pub fn new(map: Arc<Map>, attached: Arc<T>) -> Self {
        MapSlot {
            current: Mutex::new(Installed {
                map,
                attached,
                epoch: 0,
            }),
            epoch: AtomicU64::new(0),
        }
    }

    /// The map served now.
    pub fn map(&self) -> Arc<Map> {
        Arc::clone(&lock(&self.current).map)
    }

    /// The map served now, its attachment and its epoch, read together.
    pub fn current(&self) -> (Arc<Map>, Arc<T>, u64) {
        let installed = lock(&self.current);
        (
            Arc::clone(&installed.map),
            Arc::clone(&installed.attached),
            installed.epoch,
        )
    }

    /// The epoch of the last install: it moves exactly when the map does.
    #[inline]
    pub fn epoch(&self) -> u64 {
        // Acquire pairs with the Release in `install`: a thread that sees
        // the new epoch finds the new map installed.
        self.epoch.load(Ordering::Acquire)
    }

    /// Serves `map` (with `attached`) from now on, after it took over the
    /// old map's path state ([`Map::carry_over_from`]). Returns the map it
    /// replaced, whose I/O finishes on the queues that hold it.
    pub fn install(&self, map: Arc<Map>, attached: Arc<T>) -> Arc<Map> {
        let mut installed = lock(&self.current);
        Map::carry_over_from(&map, &installed.map);
        let epoch = installed.epoch + 1;
        let old = std::mem::replace(
            &mut *installed,
            Installed {
                map,
                attached,
                epoch,
            },
        );
        // Release: see `epoch`.
        self.epoch.store(epoch, Ordering::Release);
        old.map
    }
}

/// One thread's queue to whatever map a [`MapSlot`] serves, across
/// reloads. `open` gives the transport queues of a map, one per path in
/// [`Map::paths`] order, from what the transport layer attached to it.
#[derive(Debug)]
pub struct ReloadingQueue<P: PathQueue, T, O> {
    slot: Arc<MapSlot<T>>,
    open: O,
    cpu: u32,
    epoch: u64,
    current: Queue<P>,
    /// Queues of earlier maps that still hold I/O.
    draining: Vec<Queue<P>>,
}

impl<P, T, O> ReloadingQueue<P, T, O>
where
    P: PathQueue,
    O: FnMut(&Arc<Map>, &T) -> Vec<P>,
{
    /// A queue of `depth` I/Os for a thread on `cpu`, on the slot's map.
    ///
    /// # Panics
    /// As [`Queue::new`].
    pub fn new(slot: Arc<MapSlot<T>>, mut open: O, depth: usize, cpu: u32) -> Self {
        let (map, attached, epoch) = slot.current();
        let paths = open(&map, &attached);
        ReloadingQueue {
            current: Queue::new(map, paths, depth, cpu),
            slot,
            open,
            cpu,
            epoch,
            draining: Vec::new(),
        }
    }

    /// The queue on the current map (as of this thread's last submit or
    /// poll).
    pub fn current(&self) -> &Queue<P> {
        &self.current
    }

    /// Queues of earlier maps still holding I/O.
    pub fn draining(&self) -> usize {
        self.draining.len()
    }

    /// Every queue this thread holds: the current map's, then the draining
    /// ones, oldest first.
    pub fn queues(&self) -> impl Iterator<Item = &Queue<P>> {
        std::iter::once(&self.current).chain(self.draining.iter())
    }

    /// I/Os waiting for a path, over every map.
    pub fn waiting_for_path(&self) -> usize {
        self.queues().map(Queue::waiting_for_path).sum()
    }

    /// [`ReloadingQueue::queues`], mutably.
    pub fn queues_mut(&mut self) -> impl Iterator<Item = &mut Queue<P>> {
        std::iter::once(&mut self.current).chain(self.draining.iter_mut())
    }

    /// I/Os submitted and not yet handed back, over every map.
    pub fn in_flight(&self) -> usize {
        self.queues().map(Queue::in_flight).sum()
    }

    /// See [`Queue::submit`]; I/O goes to the current map.
    ///
    /// # Errors
    /// Gives `io` back if the current map's queue holds its depth of I/Os.
    #[inline]
    pub fn submit(&mut self, io: Io, now_ns: u64) -> Result<(), Io> {
        if self.slot.epoch() != self.epoch {
            self.follow(now_ns);
        }
        self.current.submit(io, now_ns)
    }

    /// See [`Queue::poll`]; polls the current map's queue and every
    /// draining one, and drops those that are empty.
    #[inline]
    pub fn poll(&mut self, now_ns: u64, sink: &mut impl FnMut(Completion)) -> usize {
        if self.slot.epoch() != self.epoch {
            self.follow(now_ns);
        }
        // The draining queues first: what moves from them to the current
        // map is then dispatched, or finished, and handed in this call.
        let mut handed = 0;
        if !self.draining.is_empty() {
            handed += self.poll_draining(now_ns, sink);
        }
        handed + self.current.poll(now_ns, sink)
    }

    /// Moves to the slot's new map: a queue on it becomes current, the old
    /// one's waiting I/O moves over, and the old one drains.
    #[cold]
    #[inline(never)]
    fn follow(&mut self, now_ns: u64) {
        let (map, attached, epoch) = self.slot.current();
        let paths = (self.open)(&map, &attached);
        let queue = Queue::new(map, paths, self.current.depth(), self.cpu);
        let mut old = std::mem::replace(&mut self.current, queue);
        old.hand_over_waiting();
        self.epoch = epoch;
        Self::move_waiting(&mut old, &mut self.current, now_ns);
        if !old.is_idle() {
            self.draining.push(old);
        }
    }

    /// Polls the draining queues. I/O that waits for a path there (a retry
    /// found the old map without one) moves to the current map, where the
    /// paths are reinstated and the messages go. (A path an old map fails
    /// is failed in the current one by the map itself:
    /// [`Map::carry_over_from`].)
    #[cold]
    #[inline(never)]
    fn poll_draining(&mut self, now_ns: u64, sink: &mut impl FnMut(Completion)) -> usize {
        let mut handed = 0;
        for old in &mut self.draining {
            handed += old.poll(now_ns, sink);
            Self::move_waiting(old, &mut self.current, now_ns);
        }
        self.draining.retain(|old| !old.is_idle());
        handed
    }

    /// Moves `from`'s waiting I/O to `to`, as many as `to` has room for
    /// (attempts and first wait kept); the rest waits in `from` until a
    /// later poll.
    fn move_waiting(from: &mut Queue<P>, to: &mut Queue<P>, now_ns: u64) {
        let room = to.depth() - to.in_flight();
        from.take_waiting(room, |handover| {
            // `to` had room for every I/O taken.
            if to.accept_handover(handover, now_ns).is_err() {
                unreachable!("a queue with room refused an I/O");
            }
        });
    }
}
