//! What the host looks like to the selectors: its NUMA layout, read from
//! sysfs (`/sys/devices/system/node`). Where sysfs has no node directory
//! (containers, non-NUMA kernels) the host is one node. And how much
//! memory it has ([`memory_bytes`]), which bounds memory disks and the
//! NBD server's buffers.
//!
//! The parsing takes text, not files, so tests inject any layout.

use mpio_core::numa::NumaTopology;
use std::path::Path;

/// Parses a kernel CPU list (`0-3,8,10-11`).
pub(crate) fn parse_cpu_list(text: &str) -> Result<Vec<u32>, String> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|part| !part.is_empty()) {
        let number = |word: &str| {
            word.parse::<u32>()
                .map_err(|_| format!("cpu list {text:?}: {word:?} is not a CPU number"))
        };
        match part.split_once('-') {
            Some((first, last)) => {
                let (first, last) = (number(first)?, number(last)?);
                if last < first || last - first > 65_536 {
                    return Err(format!("cpu list {text:?}: bad range {part:?}"));
                }
                cpus.extend(first..=last);
            }
            None => cpus.push(number(part)?),
        }
    }
    Ok(cpus)
}

/// Builds a layout from each node's CPU list and distance row, as sysfs
/// gives them (`nodes[i] = (cpulist, distance)` for node i).
pub(crate) fn topology_from_text(nodes: &[(String, String)]) -> Result<NumaTopology, String> {
    let mut cpu_node: Vec<u16> = Vec::new();
    let mut distance = Vec::with_capacity(nodes.len());
    for (node, (cpu_list, row)) in nodes.iter().enumerate() {
        for cpu in parse_cpu_list(cpu_list)? {
            let cpu = cpu as usize;
            if cpu_node.len() <= cpu {
                cpu_node.resize(cpu + 1, 0);
            }
            cpu_node[cpu] = node as u16;
        }
        let row: Vec<u32> = row
            .split_whitespace()
            .map(|word| {
                word.parse()
                    .map_err(|_| format!("node {node} distance {word:?} is not a number"))
            })
            .collect::<Result<_, _>>()?;
        distance.push(row);
    }
    NumaTopology::new(cpu_node, distance)
}

/// The host's layout from sysfs under `root` (normally
/// `/sys/devices/system/node`); one node if it is absent or unreadable.
pub(crate) fn read_topology(root: &Path) -> NumaTopology {
    let mut nodes = Vec::new();
    for node in 0.. {
        let directory = root.join(format!("node{node}"));
        let (Ok(cpu_list), Ok(distance)) = (
            std::fs::read_to_string(directory.join("cpulist")),
            std::fs::read_to_string(directory.join("distance")),
        ) else {
            break;
        };
        nodes.push((cpu_list, distance));
    }
    if nodes.is_empty() {
        return NumaTopology::default();
    }
    topology_from_text(&nodes).unwrap_or_default()
}

/// The layout of this host.
pub fn host_topology() -> NumaTopology {
    read_topology(Path::new("/sys/devices/system/node"))
}

/// The host's memory in bytes: `MemTotal` in `/proc/meminfo`, or `None`
/// where it cannot be read.
pub fn memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_mem_total(&text)
}

/// `MemTotal` (given in KiB) of a `/proc/meminfo` text, in bytes.
pub(crate) fn parse_mem_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|line| line.starts_with("MemTotal:"))?;
    let mut words = line["MemTotal:".len()..].split_whitespace();
    let kib: u64 = words.next()?.parse().ok()?;
    (words.next() == Some("kB")).then(|| kib.saturating_mul(1024))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_total_is_read_in_bytes() {
        let text = "MemTotal:       24684084 kB\nMemFree:        17073352 kB\n";
        assert_eq!(parse_mem_total(text), Some(24_684_084 * 1024));
        assert_eq!(parse_mem_total("MemFree: 1 kB\n"), None);
        assert_eq!(parse_mem_total("MemTotal: x kB\n"), None);
    }

    #[test]
    fn parses_cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n"),
            Ok(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list(""), Ok(vec![]));
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("a").is_err());
    }

    #[test]
    fn builds_a_two_node_layout() {
        let nodes = [
            ("0-1,4".to_string(), "10 21".to_string()),
            ("2-3".to_string(), "21 10\n".to_string()),
        ];
        let topology = topology_from_text(&nodes).unwrap();
        assert_eq!(topology.node_count(), 2);
        assert_eq!(topology.node_of_cpu(4), 0);
        assert_eq!(topology.node_of_cpu(3), 1);
        assert_eq!(topology.distance(0, 1), 21);
        assert!(topology_from_text(&[("0".into(), "10 20".into())]).is_err());
    }

    #[test]
    fn reads_sysfs_or_falls_back_to_one_node() {
        let missing = read_topology(Path::new("/nonexistent/mpio"));
        assert_eq!(missing, NumaTopology::default());
        // This host: whatever it has, every CPU maps to a node it lists.
        let host = host_topology();
        assert!(host.node_count() >= 1);
        assert!(usize::from(host.node_of_cpu(0)) < host.node_count());
    }
}
