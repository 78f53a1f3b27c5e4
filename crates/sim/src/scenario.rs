//! What one seed simulates, drawn from the seed: the map (groups, paths,
//! selectors and their arguments, features, timeouts, NUMA layout), the
//! simulated I/O threads and their load, the paths' latencies, and which
//! fault kinds are on and how often (swarm testing: each seed enables a
//! random subset, so rare combinations get whole runs to themselves).

use crate::rng::Rng;
use mpio_core::failback::Failback;
use mpio_core::map::{Map, MapOptions, PathInfo};
use mpio_core::numa::NumaTopology;
use mpio_core::path::AccessState;
use mpio_core::selector::SELECTOR_NAMES;
use mpio_core::table::Table;
use std::fmt::Write;

/// Most paths a drawn map has.
pub(crate) const MAX_PATHS: usize = 8;
/// Most priority groups a drawn map has.
pub(crate) const MAX_GROUPS: usize = 4;
/// CPUs of the simulated host.
const CPUS: u32 = 8;

/// The fault kinds a seed may enable, and their rates. A rate is a mean
/// gap between two faults of the kind (ns); `None` disables the kind.
#[derive(Clone, Debug, Default)]
pub(crate) struct FaultMix {
    /// A path returns path errors for a while.
    pub error_every_ns: Option<u64>,
    /// A path hangs (attempts never complete until it ends).
    pub hang_every_ns: Option<u64>,
    /// A path gets slow (possibly beyond the I/O timeout).
    pub slow_every_ns: Option<u64>,
    /// A path flaps between healthy and failing.
    pub flap_every_ns: Option<u64>,
    /// A path drops its connection with I/O in flight.
    pub disconnect_every_ns: Option<u64>,
    /// Every path goes down at once, then one comes back first.
    pub all_down_every_ns: Option<u64>,
    /// The storage refuses a block range (medium error, out of range).
    pub target_every_ns: Option<u64>,
    /// A control message (`fail_path`, `switch_group`, ...).
    pub message_every_ns: Option<u64>,
    /// A path's ALUA/ANA access state changes.
    pub access_every_ns: Option<u64>,
    /// The path checker's interval in the fault phase: the core's
    /// checker probes every path through its fault model, fails those
    /// whose probe fails and reinstates those whose probe succeeds.
    /// `None`: no checker until the liveness phase (only messages
    /// reinstate).
    pub checker_every_ns: Option<u64>,
    /// The map is reloaded with a new table (other selectors and
    /// arguments, initial group and `queue_if_no_path`; the same paths in
    /// the same groups) while I/O runs.
    pub reload_every_ns: Option<u64>,
}

/// One simulated I/O thread.
#[derive(Clone, Copy, Debug)]
pub(crate) struct QueueSpec {
    /// Queue depth (I/Os in flight at most).
    pub depth: usize,
    /// CPU the thread claims to run on (for io-affinity and numa).
    pub cpu: u32,
}

/// Everything a seed simulates. See the module docs.
#[derive(Clone, Debug)]
pub(crate) struct Scenario {
    /// The seed it was drawn from.
    pub seed: u64,
    /// The map's table, in dm's syntax.
    pub table: String,
    /// Number of priority groups.
    pub group_count: usize,
    /// Paths per group, in table order.
    pub group_sizes: Vec<usize>,
    /// One entry per path, in table order.
    pub path_infos: Vec<PathInfo>,
    /// The map's options (timeouts, attempts, NUMA layout).
    pub options: MapOptions,
    /// The simulated I/O threads.
    pub queues: Vec<QueueSpec>,
    /// Disk size in 512-byte blocks.
    pub block_count: u64,
    /// Largest I/O, in blocks.
    pub max_io_blocks: u64,
    /// Chance (per mille) per step that a queue below its depth submits.
    pub submit_per_mille: u32,
    /// Each path's base latency, ns.
    pub base_latency_ns: Vec<u64>,
    /// Largest slowdown factor a `Slow` fault uses.
    pub max_slow_factor: u64,
    /// Chance (per mille) that a write ended by a path error landed.
    pub land_per_mille: u32,
    /// Chance (per mille) that an attempt cannot be aborted.
    pub stuck_per_mille: u32,
    /// Length of the fault phase, ns; the liveness phase follows.
    pub fault_phase_ns: u64,
    /// Largest clock step between two scheduler rounds, ns.
    pub step_max_ns: u64,
    /// Which faults, how often.
    pub faults: FaultMix,
    /// The path checker's failback policy: immediate, manual or
    /// followover (a deferred one would outlast the run).
    pub failback: Failback,
}

impl Scenario {
    /// The scenario of `seed`.
    pub(crate) fn draw(seed: u64) -> Scenario {
        let mut rng = Rng::new(seed);
        let path_count = rng.range(1, MAX_PATHS as u64) as usize;
        let group_count = rng.range(1, path_count.min(MAX_GROUPS) as u64) as usize;
        // Split the paths into `group_count` non-empty groups.
        let mut cuts: Vec<usize> = (1..path_count).collect();
        rng.shuffle(&mut cuts);
        let mut cuts: Vec<usize> = cuts.into_iter().take(group_count - 1).collect();
        cuts.sort_unstable();
        let mut sizes = Vec::with_capacity(group_count);
        let mut previous = 0;
        for cut in cuts.into_iter().chain([path_count]) {
            sizes.push(cut - previous);
            previous = cut;
        }

        let node_count = rng.range(1, 2) as u16;
        let cpu_node: Vec<u16> = (0..CPUS)
            .map(|_| rng.below(u64::from(node_count)) as u16)
            .collect();
        let distance = (0..node_count)
            .map(|from| {
                (0..node_count)
                    .map(|to| if from == to { 10 } else { 20 })
                    .collect()
            })
            .collect();
        let numa = NumaTopology::new(cpu_node, distance).expect("a square matrix over its nodes");

        let block_count = rng.range(8, 64);
        let table = draw_table(&mut rng, block_count, &sizes);
        let path_infos = (0..path_count)
            .map(|_| PathInfo {
                node: rng
                    .chance(700)
                    .then(|| rng.below(u64::from(node_count)) as u16),
                access: match rng.below(10) {
                    0..=6 => AccessState::Optimized,
                    7 => AccessState::NonOptimized,
                    8 => AccessState::Standby,
                    _ => AccessState::Unavailable,
                },
            })
            .collect();

        let io_timeout_ns = rng.range(1, 10) * 1_000_000;
        let options = MapOptions {
            name: format!("sim{seed}"),
            numa,
            io_timeout_ns: Some(io_timeout_ns),
            fence_timeout_ns: None,
            hedge_reads: false,
            no_path_timeout_ns: rng.chance(800).then(|| rng.range(1, 30) * 1_000_000),
            max_attempts: rng.pick(&[2, 4, 8, 16, 64]),
            path_nodes: Default::default(),
        };
        let queues = (0..rng.range(1, 4))
            .map(|_| QueueSpec {
                depth: rng.range(1, 16) as usize,
                cpu: rng.below(u64::from(CPUS) + 2) as u32,
            })
            .collect();
        let base_latency_ns = (0..path_count)
            .map(|_| rng.range(10, 200) * 1_000)
            .collect();
        let faults = FaultMix {
            error_every_ns: rate(&mut rng, 5, 60),
            hang_every_ns: rate(&mut rng, 10, 80),
            slow_every_ns: rate(&mut rng, 10, 80),
            flap_every_ns: rate(&mut rng, 10, 80),
            disconnect_every_ns: rate(&mut rng, 10, 80),
            all_down_every_ns: rate(&mut rng, 30, 150),
            target_every_ns: rate(&mut rng, 5, 60),
            message_every_ns: rate(&mut rng, 2, 30),
            access_every_ns: rate(&mut rng, 10, 80),
            checker_every_ns: rng.chance(850).then(|| rng.range(1, 10) * 1_000_000),
            reload_every_ns: None,
        };
        let mut scenario = Scenario {
            seed,
            table,
            group_count,
            group_sizes: sizes,
            path_infos,
            options,
            queues,
            block_count,
            max_io_blocks: rng.range(1, 8),
            submit_per_mille: rng.range(100, 900) as u32,
            base_latency_ns,
            max_slow_factor: rng.range(2, 200),
            land_per_mille: rng.pick(&[0, 200, 500, 1000]),
            stuck_per_mille: rng.pick(&[0, 0, 100, 500]),
            fault_phase_ns: rng.range(50, 200) * 1_000_000,
            step_max_ns: rng.range(20, 400) * 1_000,
            faults,
            failback: Failback::Manual,
        };
        // Drawn last, so that every other draw of a seed stays as it was
        // before reloads were simulated.
        scenario.faults.reload_every_ns = rate(&mut rng, 10, 80);
        // Likewise for the fence timeout (unbounded a fifth of the time).
        scenario.options.fence_timeout_ns = rng.chance(800).then(|| rng.range(1, 20) * 1_000_000);
        scenario.options.hedge_reads = rng.chance(700);
        // Likewise for the checker's failback policy.
        scenario.failback =
            rng.pick(&[Failback::Immediate, Failback::Manual, Failback::Followover]);
        scenario
    }

    /// A table for a reload: the scenario's paths in the same groups, with
    /// selectors, their arguments, the initial group and
    /// `queue_if_no_path` drawn anew.
    pub(crate) fn draw_reload_table(&self, rng: &mut Rng) -> String {
        draw_table(rng, self.block_count, &self.group_sizes)
    }

    /// Builds the scenario's map.
    ///
    /// # Errors
    /// The table or map error, which means the scenario drawer is wrong.
    pub(crate) fn build_map(&self) -> Result<Map, String> {
        let table = Table::parse(&self.table).map_err(|error| format!("table: {error}"))?;
        Map::new(&table, &self.path_infos, self.options.clone())
            .map_err(|error| format!("map: {error}"))
    }

    /// Path `index`'s name in the table.
    pub(crate) fn path_name(index: usize) -> String {
        format!("p{index}")
    }

    /// Number of paths.
    pub(crate) fn path_count(&self) -> usize {
        self.path_infos.len()
    }

    /// Longest a healthy or slow path takes to complete an attempt, ns.
    pub(crate) fn max_latency_ns(&self) -> u64 {
        let base = self.base_latency_ns.iter().copied().max().unwrap_or(0);
        base * self.max_slow_factor + base / 2 + 1
    }

    /// A one-paragraph description, for replay output.
    pub(crate) fn describe(&self) -> String {
        let mut text = format!("table: {}\n", self.table);
        let _ = writeln!(
            text,
            "io_timeout {}ms, fence_timeout {:?}ms, hedge_reads {}, no_path_timeout {:?}ms, \
             max_attempts {}, {} queue(s) {:?}",
            self.options.io_timeout_ns.unwrap_or(0) / 1_000_000,
            self.options.fence_timeout_ns.map(|ns| ns / 1_000_000),
            self.options.hedge_reads,
            self.options.no_path_timeout_ns.map(|ns| ns / 1_000_000),
            self.options.max_attempts,
            self.queues.len(),
            self.queues
                .iter()
                .map(|queue| (queue.depth, queue.cpu))
                .collect::<Vec<_>>(),
        );
        let _ = writeln!(
            text,
            "{} blocks, io up to {} blocks, fault phase {}ms, step up to {}us, \
             landing {}‰, unabortable {}‰",
            self.block_count,
            self.max_io_blocks,
            self.fault_phase_ns / 1_000_000,
            self.step_max_ns / 1_000,
            self.land_per_mille,
            self.stuck_per_mille,
        );
        let _ = writeln!(text, "checker failback {:?}", self.failback);
        let _ = write!(text, "faults: {:?}", self.faults);
        text
    }
}

/// A fault rate: off half the time, else a mean gap of `low..=high` ms.
/// A table over `block_count` blocks whose groups hold `sizes` paths (in
/// order, from `p0`), each with a selector and valid arguments drawn from
/// `rng`, and a drawn initial group and `queue_if_no_path`.
fn draw_table(rng: &mut Rng, block_count: u64, sizes: &[usize]) -> String {
    let queue_if_no_path = rng.chance(500);
    let features = if queue_if_no_path {
        "1 queue_if_no_path"
    } else {
        "0"
    };
    let group_count = sizes.len();
    let initial_group = rng.range(1, group_count as u64);
    let mut table = format!("0 {block_count} multipath {features} 0 {group_count} {initial_group}");
    let mut path_index = 0;
    for &size in sizes {
        let selector = rng.pick(SELECTOR_NAMES);
        group_text(rng, &mut table, selector, size, path_index);
        path_index += size;
    }
    table
}

fn rate(rng: &mut Rng, low: u64, high: u64) -> Option<u64> {
    rng.chance(500).then(|| rng.range(low, high) * 1_000_000)
}

/// Appends one group of `size` paths, from path `first`, with `selector`
/// and valid random arguments, to `table`.
fn group_text(rng: &mut Rng, table: &mut String, selector: &str, size: usize, first: usize) {
    // How many per-path arguments the group gives, and one path's words.
    let (selector_args, path_arg_count): (Vec<String>, usize) = match selector {
        "round-robin" | "queue-length" => (Vec::new(), rng.index(2)),
        "service-time" => (Vec::new(), rng.index(3)),
        "historical-service-time" => {
            let count = rng.index(3);
            let args = [rng.below(1024).to_string(), rng.below(10).to_string()];
            (args[..count].to_vec(), rng.index(2))
        }
        "io-affinity" => (Vec::new(), 1),
        _ => (Vec::new(), 0),
    };
    let mut words = vec![selector.to_string(), selector_args.len().to_string()];
    words.extend(selector_args);
    words.extend([size.to_string(), path_arg_count.to_string()]);
    for path in first..first + size {
        words.push(Scenario::path_name(path));
        let args: Vec<String> = match selector {
            "io-affinity" => vec![format!("{:x}", rng.range(1, 0xff))],
            "round-robin" => vec![rng.range(1, 4).to_string()],
            "queue-length" | "historical-service-time" => vec![rng.range(0, 3).to_string()],
            "service-time" => vec![rng.range(0, 3).to_string(), rng.range(0, 100).to_string()],
            _ => Vec::new(),
        };
        words.extend(args.into_iter().take(path_arg_count));
    }
    table.push(' ');
    table.push_str(&words.join(" "));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn every_drawn_map_builds_and_the_draws_cover_the_space() {
        let mut selectors = BTreeSet::new();
        let mut shapes = BTreeSet::new();
        for seed in 0..1000 {
            let scenario = Scenario::draw(seed);
            let map = scenario
                .build_map()
                .unwrap_or_else(|error| panic!("seed {seed}: {error}\n{}", scenario.table));
            assert_eq!(map.paths().len(), scenario.path_count());
            assert_eq!(map.groups().len(), scenario.group_count);
            shapes.insert((scenario.group_count, scenario.path_count()));
            for word in scenario.table.split_whitespace() {
                if SELECTOR_NAMES.contains(&word) {
                    selectors.insert(word.to_string());
                }
            }
        }
        assert_eq!(selectors.len(), SELECTOR_NAMES.len(), "{selectors:?}");
        for groups in 1..=MAX_GROUPS {
            assert!(shapes.iter().any(|&(count, _)| count == groups));
        }
        for paths in 1..=MAX_PATHS {
            assert!(shapes.iter().any(|&(_, count)| count == paths));
        }
    }
}
