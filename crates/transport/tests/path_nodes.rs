//! A path's NUMA node given by word (`MapOptions::path_nodes`, a
//! config's `numa_node`) reaches the selectors when the map is built:
//! the `numa` selector sends a thread's I/O down the path on its node.

use mpio_core::io::{Buffer, Io};
use mpio_core::map::MapOptions;
use mpio_core::numa::NumaTopology;
use mpio_core::table::Table;
use mpio_transport::Transports;

/// Reads through a queue of a thread on `cpu`; returns how many I/Os
/// each of ports `a` and `b` completed.
fn reads_on_cpu(path_nodes: &[(&str, u16)], cpu: u32) -> (u64, u64) {
    let transports = Transports::new();
    let table = Table::parse("0 2048 multipath 0 0 1 1 numa 0 2 0 memory:d#a memory:d#b").unwrap();
    let options = MapOptions {
        numa: NumaTopology::new(vec![0, 1], vec![vec![10, 20], vec![20, 10]]).unwrap(),
        path_nodes: path_nodes
            .iter()
            .map(|(word, node)| (word.to_string(), *node))
            .collect(),
        ..MapOptions::default()
    };
    let device = transports.build(&table, options).unwrap();
    let mut queue = device.queue(4, cpu);
    let mut done = 0;
    for index in 0..32 {
        queue
            .submit(Io::read(index, 0, Buffer::zeroed(512)), 0)
            .unwrap();
        while done <= index {
            done += queue.poll(0, &mut |completion| {
                assert!(completion.result.is_ok());
            }) as u64;
        }
    }
    (
        transports.port("d", "a").completed(),
        transports.port("d", "b").completed(),
    )
}

#[test]
fn a_given_node_steers_the_numa_selector() {
    let nodes = [("memory:d#a", 0), ("memory:d#b", 1)];
    assert_eq!(reads_on_cpu(&nodes, 1), (0, 32), "cpu 1 is on node 1");
    assert_eq!(reads_on_cpu(&nodes, 0), (32, 0), "cpu 0 is on node 0");
    let swapped = [("memory:d#a", 1), ("memory:d#b", 0)];
    assert_eq!(reads_on_cpu(&swapped, 1), (32, 0));
}
