//! Path selectors: the policy that picks one path of a priority group for
//! each I/O. One file per selector, one trait, one registration line.
//!
//! # Contract
//! The engine owns path health and group membership. A selector never sees
//! a failed, standby or unavailable path: [`Pick::candidates`] holds only
//! usable paths of the best access class (optimized, else non-optimized),
//! is sorted by position and is never empty. `select` must return one of
//! them. A selector is pure policy over that view, the calling queue's
//! [`PathLoad`] of each path and its own per-thread state.
//!
//! # Concurrency
//! A selector instance is shared by every I/O thread (`&self`) and holds
//! only what its table said. State one thread reads and writes (a cursor,
//! a cache) lives in its [`PathSelector::ThreadState`], owned by that
//! thread's queue; load lives in that queue's [`PathLoad`] records, which
//! the queue keeps for every selector (see [`crate::load`] for why it is
//! per queue). Nothing a selector touches per I/O is written by another
//! thread.
//!
//! # Load changes
//! To a selector that declares [`PathSelector::OBSERVES_LOAD`], the queue
//! reports every change of its [`PathLoad`] records on the group's paths,
//! with that thread's state: an I/O started ([`PathSelector::started`]) or
//! ended ([`PathSelector::completed`]). So such a selector may keep what
//! it derives from the loads in its thread state between picks
//! (historical-service-time keeps each path's rank, see `rank_cache.rs`),
//! as long as a new [`Pick::generation`] or a clock reading it did not
//! derive it for makes it derive again.
//!
//! # Adding a selector
//! Write `selector/<name>.rs` with a type implementing [`PathSelector`],
//! then add one line to the `selectors!` invocation at the bottom of this
//! file. A selector that learns from completions implements
//! [`PathSelector::completed`] and sets [`PathSelector::OBSERVES_LOAD`]
//! (without it the queue never calls the hooks, and neither does the
//! tests' harness); load-aware scans share `scan.rs`.

use crate::load::PathLoad;
use crate::numa::NumaTopology;

/// Why a selector refused its arguments.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ArgError {
    /// `None` for a selector argument, `Some(i)` for the arguments of the
    /// path at group position `i`.
    pub path: Option<usize>,
    /// Index of the offending argument within its list.
    pub index: usize,
    /// What was wrong, for a human.
    pub message: String,
}

impl ArgError {
    /// An error about selector argument `index`.
    pub fn selector(index: usize, message: impl Into<String>) -> Self {
        ArgError {
            path: None,
            index,
            message: message.into(),
        }
    }

    /// An error about argument `index` of the path at group position `path`.
    pub fn path(path: usize, index: usize, message: impl Into<String>) -> Self {
        ArgError {
            path: Some(path),
            index,
            message: message.into(),
        }
    }
}

/// What a selector is told about one path when it is built.
#[derive(Clone, Copy, Debug)]
pub struct PathSetup<'a> {
    /// The per-path arguments from the table.
    pub args: &'a [String],
    /// The NUMA node the path's transport is attached to, if known.
    pub node: Option<u16>,
}

/// Everything a selector is built from.
#[derive(Clone, Copy, Debug)]
pub struct Setup<'a> {
    /// The selector arguments from the table.
    pub args: &'a [String],
    /// One entry per path, in group order.
    pub paths: &'a [PathSetup<'a>],
    /// The host's NUMA layout.
    pub numa: &'a NumaTopology,
}

/// What a selector sees when it picks a path for one I/O.
#[derive(Clone, Copy, Debug)]
pub struct Pick<'a> {
    /// Group positions of the usable paths of the best access class:
    /// sorted, never empty.
    pub candidates: &'a [u16],
    /// `usable[position]` is true exactly for the positions in `candidates`.
    pub usable: &'a [bool],
    /// The calling queue's load on every path of the group, by position.
    pub loads: &'a [PathLoad],
    /// Bytes the I/O moves (0 for flush).
    pub bytes: u64,
    /// The CPU the submitting thread runs on.
    pub cpu: u32,
    /// The NUMA node of `cpu`.
    pub node: u16,
    /// The caller's clock, in ns.
    pub now_ns: u64,
    /// Generation of the topology snapshot: it changes whenever the
    /// candidates may have, so per-thread caches key on it.
    pub generation: u64,
}

/// A path selection policy. See the module docs for the contract.
pub trait PathSelector: Sized + Send + Sync + std::fmt::Debug + 'static {
    /// The name used in tables (`round-robin`, ...).
    const NAME: &'static str;
    /// How many per-path arguments the canonical table prints per path
    /// (dm's `table_info_args`).
    const TABLE_PATH_ARGS: usize;
    /// How many values [`PathSelector::status_path_info`] prints per path
    /// (dm's `info_args`).
    const STATUS_INFO_ARGS: usize;
    /// State owned by one I/O thread.
    type ThreadState: Default + Send + std::fmt::Debug;
    /// True when the selector implements [`PathSelector::started`] or
    /// [`PathSelector::completed`]: only then does the queue call them
    /// (for the others, the calls are empty, but the lookup of the thread
    /// state for a completion would still cost its instructions per I/O).
    const OBSERVES_LOAD: bool = false;

    /// Builds the selector for one group.
    ///
    /// # Errors
    /// An [`ArgError`] naming the argument that is malformed, out of range,
    /// or too many.
    fn new(setup: &Setup<'_>) -> Result<Self, ArgError>;

    /// Picks one of `pick.candidates` and returns its position.
    fn select(&self, thread: &mut Self::ThreadState, pick: &Pick<'_>) -> u16;

    /// The calling queue started an I/O on the path at group `position`
    /// at `now_ns` (the caller's clock); `load` already counts it. Default:
    /// nothing.
    #[inline]
    fn started(
        &self,
        _thread: &mut Self::ThreadState,
        _position: usize,
        _load: &PathLoad,
        _now_ns: u64,
    ) {
    }

    /// What the selector learns from a completion on the path at group
    /// `position`, whose load is `load`, dispatched at `start_ns` (the
    /// caller's clock); called after the in-flight counts dropped it.
    /// Default: nothing.
    #[inline]
    fn completed(
        &self,
        _thread: &mut Self::ThreadState,
        _position: usize,
        _load: &PathLoad,
        _start_ns: u64,
        _now_ns: u64,
    ) {
    }

    /// The canonical selector arguments (dm's table output).
    fn table_args(&self) -> Vec<String> {
        Vec::new()
    }

    /// The canonical arguments of the path at `position`; exactly
    /// `TABLE_PATH_ARGS` of them.
    fn table_path_args(&self, position: usize) -> Vec<String>;

    /// The selector's live information about the path at `position`
    /// (dm's status info); exactly `STATUS_INFO_ARGS` values.
    /// `load` is the sum over every queue (see [`crate::map::Map::path_load`]).
    fn status_path_info(&self, _position: usize, _load: &PathLoad) -> Vec<String> {
        Vec::new()
    }
}

/// Declares the registered selectors: the [`Selector`] and
/// [`SelectorThreadState`] enums and their dispatch. Each arm is matched
/// once per I/O on a value that never changes for a group, so the branch
/// is perfectly predicted and the callee is monomorphised (no `dyn`).
macro_rules! selectors {
    ($($variant:ident => $module:ident :: $type:ident,)+) => {
        $(mod $module;)+
        $(pub use $module::$type;)+

        /// A built selector of any registered kind.
        // An explicit tag byte: without it the kind hides in a niche of a
        // variant's field, and every match per I/O decodes it (a load, an
        // xor, a test and a cmov before the jump).
        #[derive(Debug)]
        #[repr(u8)]
        pub enum Selector {
            $(
                #[doc = concat!("`", stringify!($module), "`")]
                $variant($type),
            )+
        }

        /// The per-thread state of a [`Selector`] of the same kind.
        #[derive(Debug)]
        pub enum SelectorThreadState {
            $(
                #[doc = concat!("`", stringify!($module), "`")]
                $variant(<$type as PathSelector>::ThreadState),
            )+
        }

        /// The names of every registered selector, in registration order.
        pub const SELECTOR_NAMES: &[&str] = &[$(<$type as PathSelector>::NAME),+];

        impl Selector {
            /// Builds the selector called `name`: `None` if no selector
            /// has that name, else the selector or the [`ArgError`] of its
            /// arguments.
            pub fn build(name: &str, setup: &Setup<'_>) -> Option<Result<Self, ArgError>> {
                $(
                    if name == <$type as PathSelector>::NAME {
                        return Some(<$type as PathSelector>::new(setup).map(Selector::$variant));
                    }
                )+
                None
            }

            /// The selector's table name.
            pub fn name(&self) -> &'static str {
                match self { $(Selector::$variant(_) => <$type as PathSelector>::NAME,)+ }
            }

            /// Per-path argument count in the canonical table.
            pub(crate) fn table_path_arg_count(&self) -> usize {
                match self { $(Selector::$variant(_) => <$type as PathSelector>::TABLE_PATH_ARGS,)+ }
            }

            /// Per-path value count in status output.
            pub(crate) fn status_info_arg_count(&self) -> usize {
                match self { $(Selector::$variant(_) => <$type as PathSelector>::STATUS_INFO_ARGS,)+ }
            }

            /// A fresh per-thread state for this selector.
            pub fn new_thread_state(&self) -> SelectorThreadState {
                match self { $(Selector::$variant(_) => SelectorThreadState::$variant(Default::default()),)+ }
            }

            /// [`PathSelector::select`] with the pick built by `pick`, then
            /// `start(position)`, which counts the I/O on the
            /// picked path's load ([`PathLoad::start_io`]) and returns
            /// that load, then [`PathSelector::started`], all inside the
            /// selector's arm. One jump on the selector's kind serves the
            /// pick and the start, and where the selector is inlined the
            /// pick's fields it does not read are never loaded (built
            /// before the match, every field was loaded, and spilled, on
            /// every I/O); a selector called out of line gets the pick in
            /// memory in its own arm only.
            ///
            /// # Panics
            /// If `thread` was made by a selector of another kind.
            #[inline(always)]
            pub fn select_and_start<'a>(
                &self,
                thread: &mut SelectorThreadState,
                pick: impl FnOnce() -> Pick<'a>,
                start: impl FnOnce(u16) -> &'a PathLoad,
            ) -> u16 {
                // One jump on the selector's kind, then one compare to
                // check the state is of the same kind (a pair match costs
                // a compare chain per I/O).
                match self {
                    $(Selector::$variant(selector) => match thread {
                        SelectorThreadState::$variant(state) => {
                            let pick = pick();
                            let position = selector.select(state, &pick);
                            let load = start(position);
                            if <$type as PathSelector>::OBSERVES_LOAD {
                                selector.started(state, usize::from(position), load, pick.now_ns);
                            }
                            position
                        }
                        #[allow(unreachable_patterns)]
                        _ => panic!("selector thread state of another kind"),
                    },)+
                }
            }

            /// See [`PathSelector::completed`]. `thread` gives the calling
            /// thread's state; it is called only for a selector that
            /// observes load ([`PathSelector::OBSERVES_LOAD`]), so the
            /// others cost no lookup of it.
            ///
            /// # Panics
            /// If the state is of another kind.
            #[inline(always)]
            pub fn completed<'s>(
                &self,
                thread: impl FnOnce() -> &'s mut SelectorThreadState,
                position: usize,
                load: &PathLoad,
                start_ns: u64,
                now_ns: u64,
            ) {
                match self {
                    $(Selector::$variant(selector) if <$type as PathSelector>::OBSERVES_LOAD => match thread() {
                        SelectorThreadState::$variant(state) => {
                            selector.completed(state, position, load, start_ns, now_ns)
                        }
                        #[allow(unreachable_patterns)]
                        _ => panic!("selector thread state of another kind"),
                    },)+
                    _ => {}
                }
            }

            /// See [`PathSelector::table_args`].
            pub(crate) fn table_args(&self) -> Vec<String> {
                match self { $(Selector::$variant(selector) => selector.table_args(),)+ }
            }

            /// See [`PathSelector::table_path_args`].
            pub(crate) fn table_path_args(&self, position: usize) -> Vec<String> {
                match self { $(Selector::$variant(selector) => selector.table_path_args(position),)+ }
            }

            /// See [`PathSelector::status_path_info`].
            pub(crate) fn status_path_info(&self, position: usize, load: &PathLoad) -> Vec<String> {
                match self { $(Selector::$variant(selector) => selector.status_path_info(position, load),)+ }
            }
        }
    };
}

/// Parses a decimal `u32` argument, naming it in the error.
pub(crate) fn parse_u32_arg(word: &str, what: &str, min: u32, max: u32) -> Result<u32, String> {
    let value: u32 = word
        .parse()
        .map_err(|_| format!("{what} must be a whole number, not {word:?}"))?;
    if !(min..=max).contains(&value) {
        return Err(format!("{what} must be in {min}..={max}, not {value}"));
    }
    Ok(value)
}

selectors! {
    RoundRobin => round_robin::RoundRobin,
    QueueLength => queue_length::QueueLength,
    ServiceTime => service_time::ServiceTime,
    HistoricalServiceTime => historical_service_time::HistoricalServiceTime,
    IoAffinity => io_affinity::IoAffinity,
    Numa => numa::Numa,
    QueueDepth => queue_depth::QueueDepth,
}

mod rank_cache;
mod scan;

#[cfg(test)]
pub(crate) mod testing;
