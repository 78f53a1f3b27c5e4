//! A probe path a test scripts, for the checker's tests: every probe
//! queue opened to it answers as its shared [`Script`] says, at the poll
//! after a probe is sent; and map builders.

use mpio_core::checker::ProbePath;
use mpio_core::io::{PathError, PathOutcome};
use mpio_core::map::{Map, MapOptions, PathInfo};
use mpio_core::queue::{PathCompletion, PathIo, PathQueue};
use mpio_core::table::Table;
use std::sync::{Arc, Mutex};

/// How a scripted path answers, shared by every probe queue opened to it.
#[derive(Debug)]
pub struct Script {
    /// The answer to every probe, at the poll after it is sent.
    pub outcome: PathOutcome,
    /// Answers nothing while set.
    pub hangs: bool,
    /// Gives a probe back on `abort`.
    pub gives_back: bool,
    /// The smallest I/O it takes.
    pub min_block: u32,
    /// Probe queues opened to it.
    pub opened: u32,
    /// Probes sent to it: (tag, length in bytes).
    pub sent: Vec<(u64, u32)>,
}

/// A path whose probes answer as its script says.
#[derive(Clone, Debug)]
pub struct ScriptedPath(Arc<Mutex<Script>>);

impl ScriptedPath {
    /// A path that answers every probe successfully.
    pub fn new() -> Self {
        ScriptedPath(Arc::new(Mutex::new(Script {
            outcome: PathOutcome::Ok,
            hangs: false,
            gives_back: true,
            min_block: 1,
            opened: 0,
            sent: Vec::new(),
        })))
    }

    /// Its script, to change how it answers.
    pub fn script(&self) -> std::sync::MutexGuard<'_, Script> {
        self.0.lock().unwrap()
    }

    /// Answers every probe from now on with a path error.
    #[allow(dead_code, reason = "not every test binary scripts failures")]
    pub fn fail(&self) {
        self.script().outcome = PathOutcome::Path(PathError::Transport);
    }

    /// Answers every probe from now on successfully.
    #[allow(dead_code, reason = "not every test binary scripts failures")]
    pub fn heal(&self) {
        self.script().outcome = PathOutcome::Ok;
    }
}

/// One probe queue to a [`ScriptedPath`].
#[derive(Debug)]
pub struct ScriptedQueue {
    script: Arc<Mutex<Script>>,
    held: Vec<PathIo>,
}

impl ProbePath for ScriptedPath {
    type Queue = ScriptedQueue;

    fn open_probe(&self) -> ScriptedQueue {
        self.script().opened += 1;
        ScriptedQueue {
            script: Arc::clone(&self.0),
            held: Vec::new(),
        }
    }

    fn min_block(&self) -> u32 {
        self.script().min_block
    }
}

impl PathQueue for ScriptedQueue {
    fn submit(&mut self, io: PathIo, _now_ns: u64) {
        self.script.lock().unwrap().sent.push((io.tag, io.len));
        self.held.push(io);
    }

    fn poll(&mut self, _now_ns: u64, completions: &mut Vec<PathCompletion>) {
        let script = self.script.lock().unwrap();
        if script.hangs {
            return;
        }
        completions.extend(self.held.drain(..).map(|io| PathCompletion {
            tag: io.tag,
            buf: io.buf,
            outcome: script.outcome,
        }));
    }

    fn abort(&mut self, tag: u64) -> Option<PathIo> {
        if !self.script.lock().unwrap().gives_back {
            return None;
        }
        let position = self.held.iter().position(|io| io.tag == tag)?;
        Some(self.held.remove(position))
    }

    fn abandon(&mut self, _tag: u64) -> Option<PathIo> {
        None
    }
}

/// A map of `sectors` over one round-robin group of `words`.
#[allow(dead_code, reason = "not every test binary has one group")]
pub fn map(words: &[&str], sectors: u64) -> Arc<Map> {
    groups_map(&[words], sectors)
}

/// A map of `sectors` over one round-robin group per entry of `groups`.
pub fn groups_map(groups: &[&[&str]], sectors: u64) -> Arc<Map> {
    let mut text = format!("0 {sectors} multipath 0 0 {} 1", groups.len());
    let mut count = 0;
    for words in groups {
        text.push_str(&format!(
            " round-robin 0 {} 0 {}",
            words.len(),
            words.join(" ")
        ));
        count += words.len();
    }
    let table = Table::parse(&text).unwrap();
    let infos = vec![PathInfo::default(); count];
    Arc::new(Map::new(&table, &infos, MapOptions::default()).unwrap())
}
