//! `io-affinity`, per path `<cpumask>`: send each I/O down the path mapped
//! to the CPU that submits it (dm-ps-io-affinity).
//!
//! # Rule
//! 1. The path whose cpumask holds `pick.cpu`, if usable. A CPU named by
//!    several masks belongs to the first such path (dm keeps the first
//!    mapping too); the others, in group order, are its next choices
//!    before step 2. dm instead drops them with a warning and refuses a
//!    path left with no CPU of its own; we accept it, as a standby for the
//!    CPUs it shares.
//! 2. Else a usable path on the submitting CPU's NUMA node (`pick.node`).
//!    A path is on [`PathSetup::node`](super::PathSetup::node) if known,
//!    else on every node holding a CPU of its mask.
//! 3. Else any candidate.
//!
//! In steps 2 and 3 the scan starts at `cpu % count`: the CPUs of a lost
//! path spread over the remaining ones, while each CPU still sticks to one
//! path (a per-thread rotation would bounce one CPU's I/O between paths,
//! undoing the locality this selector exists for). dm takes the first.
//!
//! # Arguments
//! No selector arguments. Per path one `<cpumask>`, read as the kernel's
//! `cpumask_parse`: hex, in comma-separated 32-bit groups (`1`, `8000`,
//! `ff,ffffffff`), CPUs below [`MAX_CPUS`]; it must name a CPU. The table
//! prints it back in the same form without leading zeros. (dm's `%*pb`
//! pads to the host's CPU count, which the core does not know.)
//!
//! # Status
//! One value per path, as dm: I/Os submitted on a CPU no mask names (the
//! same count on every path). Threads add their misses in batches of
//! [`MISS_BATCH`], so the count lags by fewer than that per thread.
//!
//! # Concurrency
//! The CPU and node tables are built in `new` and immutable. Shared: the
//! miss counter (relaxed, touched once per batch). Per thread: its
//! unflushed misses.

use super::{ArgError, PathSelector, Pick, Setup};
use crate::load::PathLoad;
use crate::sync::{AtomicU64, Ordering::Relaxed};

/// CPUs a mask may name: 0..MAX_CPUS.
pub(crate) const MAX_CPUS: usize = 4096;
/// Misses a thread counts before adding them to the shared counter.
pub(crate) const MISS_BATCH: u32 = 64;

/// Parses a cpumask the way the kernel's `cpumask_parse` does: hex groups
/// of up to 8 digits, the last group the lowest 32 CPUs; empty groups
/// (repeated commas) are skipped. Returns 32-bit words, lowest first,
/// without high zero words.
fn parse_cpumask(word: &str) -> Result<Vec<u32>, String> {
    let mut words = Vec::new();
    for group in word.rsplit(',').filter(|group| !group.is_empty()) {
        if words.len() == MAX_CPUS / 32 {
            return Err(format!(
                "cpumask {word:?} names CPUs beyond {}",
                MAX_CPUS - 1
            ));
        }
        if group.len() > 8 || !group.bytes().all(|byte| byte.is_ascii_hexdigit()) {
            return Err(format!(
                "cpumask {word:?}: {group:?} is not a group of 1 to 8 hex digits"
            ));
        }
        words.push(u32::from_str_radix(group, 16).expect("checked hex digits"));
    }
    while words.last() == Some(&0) {
        words.pop();
    }
    if words.is_empty() {
        return Err(format!("cpumask {word:?} names no CPU"));
    }
    Ok(words)
}

/// Prints a mask from [`parse_cpumask`] as the kernel's `%*pb` does, minus
/// the leading zero padding.
fn format_cpumask(words: &[u32]) -> String {
    let mut text = String::new();
    for (index, word) in words.iter().rev().enumerate() {
        if index == 0 {
            text.push_str(&format!("{word:x}"));
        } else {
            text.push_str(&format!(",{word:08x}"));
        }
    }
    text
}

/// The CPUs of a mask, ascending.
fn cpus(words: &[u32]) -> impl Iterator<Item = usize> + '_ {
    (0..words.len() * 32).filter(|cpu| words[cpu / 32] & (1 << (cpu % 32)) != 0)
}

/// Lists of positions in one allocation: list `i` is
/// `items[offsets[i]..offsets[i + 1]]`.
#[derive(Debug)]
struct Lists {
    offsets: Vec<u32>,
    items: Vec<u16>,
}

impl Lists {
    fn new(lists: &[Vec<u16>]) -> Self {
        let mut offsets = vec![0];
        let mut items = Vec::new();
        for list in lists {
            items.extend_from_slice(list);
            offsets.push(items.len() as u32);
        }
        Lists { offsets, items }
    }

    /// List `index`; empty past the end.
    #[inline]
    fn get(&self, index: usize) -> &[u16] {
        match (self.offsets.get(index), self.offsets.get(index + 1)) {
            (Some(&start), Some(&end)) => &self.items[start as usize..end as usize],
            _ => &[],
        }
    }
}

/// The first usable path of `list`, scanning from `start % len` around.
#[inline]
fn first_usable_from(list: &[u16], start: usize, usable: &[bool]) -> Option<u16> {
    let len = list.len();
    let mut index = start.checked_rem(len)?;
    for _ in 0..len {
        if usable[usize::from(list[index])] {
            return Some(list[index]);
        }
        index += 1;
        if index == len {
            index = 0;
        }
    }
    None
}

/// The io-affinity selector.
#[derive(Debug)]
pub struct IoAffinity {
    /// By CPU: the paths whose mask holds it, in group order.
    cpu_paths: Lists,
    /// By node: the paths on it, in group order.
    node_paths: Lists,
    /// Each path's mask as parsed, by position.
    masks: Vec<Vec<u32>>,
    /// I/Os submitted on an unmapped CPU, flushed in batches.
    map_misses: AtomicU64,
}

/// One thread's misses not yet added to the shared count.
#[derive(Debug, Default)]
pub struct IoAffinityThread {
    unflushed_misses: u32,
}

impl PathSelector for IoAffinity {
    const NAME: &'static str = "io-affinity";
    const TABLE_PATH_ARGS: usize = 1;
    const STATUS_INFO_ARGS: usize = 1;
    type ThreadState = IoAffinityThread;

    fn new(setup: &Setup<'_>) -> Result<Self, ArgError> {
        if !setup.args.is_empty() {
            return Err(ArgError::selector(
                0,
                "io-affinity takes no selector arguments",
            ));
        }
        let mut masks = Vec::with_capacity(setup.paths.len());
        let mut cpu_lists: Vec<Vec<u16>> = Vec::new();
        let mut node_lists: Vec<Vec<u16>> = vec![Vec::new(); setup.numa.node_count()];
        for (position, path) in setup.paths.iter().enumerate() {
            let word = match path.args {
                [word] => word,
                [] => return Err(ArgError::path(position, 0, "io-affinity needs a cpumask")),
                _ => {
                    return Err(ArgError::path(
                        position,
                        1,
                        "too many path arguments: at most 1",
                    ))
                }
            };
            let mask =
                parse_cpumask(word).map_err(|message| ArgError::path(position, 0, message))?;
            let mut nodes: Vec<u16> = match path.node {
                Some(node) => vec![node],
                None => cpus(&mask)
                    .map(|cpu| setup.numa.node_of_cpu(cpu as u32))
                    .collect(),
            };
            nodes.sort_unstable();
            nodes.dedup();
            for node in nodes {
                let node = usize::from(node);
                if node >= node_lists.len() {
                    node_lists.resize(node + 1, Vec::new());
                }
                node_lists[node].push(position as u16);
            }
            for cpu in cpus(&mask) {
                if cpu >= cpu_lists.len() {
                    cpu_lists.resize(cpu + 1, Vec::new());
                }
                cpu_lists[cpu].push(position as u16);
            }
            masks.push(mask);
        }
        Ok(IoAffinity {
            cpu_paths: Lists::new(&cpu_lists),
            node_paths: Lists::new(&node_lists),
            masks,
            map_misses: AtomicU64::new(0),
        })
    }

    #[inline]
    fn select(&self, thread: &mut IoAffinityThread, pick: &Pick<'_>) -> u16 {
        let cpu = pick.cpu as usize;
        let mapped = self.cpu_paths.get(cpu);
        if let Some(&position) = mapped.iter().find(|&&p| pick.usable[usize::from(p)]) {
            return position;
        }
        if mapped.is_empty() {
            thread.unflushed_misses += 1;
            if thread.unflushed_misses == MISS_BATCH {
                // Relaxed: a statistic for status output.
                self.map_misses.fetch_add(u64::from(MISS_BATCH), Relaxed);
                thread.unflushed_misses = 0;
            }
        }
        let local = self.node_paths.get(usize::from(pick.node));
        if let Some(position) = first_usable_from(local, cpu, pick.usable) {
            return position;
        }
        pick.candidates[cpu % pick.candidates.len()]
    }

    fn table_path_args(&self, position: usize) -> Vec<String> {
        vec![format_cpumask(&self.masks[position])]
    }

    fn status_path_info(&self, _position: usize, _load: &PathLoad) -> Vec<String> {
        // Relaxed: a statistic.
        vec![self.map_misses.load(Relaxed).to_string()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::numa::NumaTopology;
    use crate::selector::testing::{build, build_on, usable_sets, Harness};
    use proptest::prelude::*;

    #[test]
    fn parses_cpumasks_like_the_kernel() {
        let high = format!("80000000{}", ",00000000".repeat(127));
        let cases: [(&str, Option<Vec<u32>>); 13] = [
            ("1", Some(vec![1])),
            ("8000", Some(vec![0x8000])),
            ("FF,ffffffff", Some(vec![0xffff_ffff, 0xff])),
            ("1,00000000", Some(vec![0, 1])),
            ("1,0", Some(vec![0, 1])),
            ("0,00000001", Some(vec![1])),
            (",1,,", Some(vec![1])),
            (&high, Some([vec![0; 127], vec![0x8000_0000]].concat())),
            ("0", None),
            ("", None),
            ("0x1", None),
            ("123456789", None),
            ("1,g", None),
        ];
        for (word, expected) in cases {
            assert_eq!(parse_cpumask(word).ok(), expected, "{word:?}");
        }
        assert!(parse_cpumask(&format!("1,{high}")).is_err(), "CPU 4096");
        assert_eq!(format_cpumask(&[0xffff_ffff, 0xff]), "ff,ffffffff");
        assert_eq!(format_cpumask(&[1, 0, 0x10]), "10,00000000,00000001");
        assert_eq!(format_cpumask(&[0x8000]), "8000");
    }

    #[test]
    fn parses_path_args_and_prints_canonical_masks() {
        let selector: IoAffinity = build(&[], &[&["1"], &["FF,0000FFFF"]]).unwrap();
        assert_eq!(selector.table_path_args(0), ["1"]);
        assert_eq!(selector.table_path_args(1), ["ff,0000ffff"]);
        let error = build::<IoAffinity>(&["1"], &[&["1"]]).unwrap_err();
        assert_eq!((error.path, error.index), (None, 0));
        let error = build::<IoAffinity>(&[], &[&["1"], &[]]).unwrap_err();
        assert_eq!((error.path, error.index), (Some(1), 0));
        let error = build::<IoAffinity>(&[], &[&["1", "2"]]).unwrap_err();
        assert_eq!((error.path, error.index), (Some(0), 1));
        let error = build::<IoAffinity>(&[], &[&["1"], &["0"]]).unwrap_err();
        assert_eq!((error.path, error.index), (Some(1), 0));
    }

    /// CPUs 0-1 on node 0, 2-3 on node 1.
    fn two_nodes() -> NumaTopology {
        NumaTopology::new(vec![0, 0, 1, 1], vec![vec![10, 20], vec![20, 10]]).unwrap()
    }

    #[test]
    fn mapped_cpu_then_same_node_then_any() {
        let masks: [&[&str]; 4] = [&["1"], &["2"], &["4"], &["8"]];
        let selector: IoAffinity = build_on(&[], &masks, &[None; 4], &two_nodes()).unwrap();
        let mut harness = Harness::new(4);
        // (usable, cpu, node, expected)
        let cases: [(&[u16], u32, u16, u16); 7] = [
            (&[0, 1, 2, 3], 0, 0, 0),
            (&[0, 1, 2, 3], 3, 1, 3),
            (&[1, 2, 3], 0, 0, 1),
            (&[0, 1, 2], 3, 1, 2),
            (&[2, 3], 0, 0, 2),
            (&[2, 3], 1, 0, 3),
            // Unmapped CPU 7 on node 1: node 1's paths from 7 % 2.
            (&[0, 1, 2, 3], 7, 1, 3),
        ];
        for (usable, cpu, node, expected) in cases {
            harness.set_usable(usable);
            (harness.cpu, harness.node) = (cpu, node);
            assert_eq!(harness.pick(&selector), expected, "{usable:?} cpu {cpu}");
        }
    }

    #[test]
    fn shared_cpus_fall_back_in_group_order_and_known_nodes_win() {
        // CPU 1 is in masks 0 and 1. Path 2 says it is on node 0 although
        // its CPU 2 is on node 1.
        let masks: [&[&str]; 4] = [&["3"], &["2"], &["4"], &["8"]];
        let nodes = [None, None, Some(0), None];
        let selector: IoAffinity = build_on(&[], &masks, &nodes, &two_nodes()).unwrap();
        let mut harness = Harness::new(4);
        harness.cpu = 1;
        assert_eq!(harness.pick(&selector), 0);
        harness.set_usable(&[1, 2, 3]);
        assert_eq!(harness.pick(&selector), 1);
        // Unmapped CPU 9 on node 0: path 2 is node 0's (any would give 3).
        harness.set_usable(&[2, 3]);
        (harness.cpu, harness.node) = (9, 0);
        assert_eq!(harness.pick(&selector), 2);
    }

    #[test]
    fn counts_misses_in_batches() {
        let selector: IoAffinity = build(&[], &[&["1"]]).unwrap();
        let mut harness = Harness::new(1);
        harness.cpu = 5;
        for _ in 0..MISS_BATCH * 2 + 3 {
            assert_eq!(harness.pick(&selector), 0);
        }
        harness.cpu = 0;
        harness.pick(&selector);
        let expected = (MISS_BATCH * 2).to_string();
        assert_eq!(selector.status_path_info(0, &harness.loads[0]), [expected]);
    }

    proptest! {
        #[test]
        fn never_picks_a_non_candidate(
            masks in prop::collection::vec(1u32.., 5),
            sets in usable_sets(5),
            cpu in 0u32..40,
            node in 0u16..3,
        ) {
            let words: Vec<String> = masks.iter().map(|mask| format!("{mask:x}")).collect();
            let args: Vec<[&str; 1]> = words.iter().map(|word| [word.as_str()]).collect();
            let args: Vec<&[&str]> = args.iter().map(|arg| &arg[..]).collect();
            let selector: IoAffinity = build_on(&[], &args, &[None; 5], &two_nodes()).unwrap();
            let mut harness = Harness::new(5);
            (harness.cpu, harness.node) = (cpu, node);
            for set in sets {
                harness.set_usable(&set);
                let position = harness.pick(&selector);
                // The first usable path whose mask holds the CPU, if any.
                let claimant = set
                    .iter()
                    .copied()
                    .find(|&p| cpu < 32 && masks[usize::from(p)] & (1 << cpu) != 0);
                if let Some(claimant) = claimant {
                    prop_assert_eq!(position, claimant);
                }
            }
        }
    }
}
