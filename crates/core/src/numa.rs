//! The host's NUMA layout as the selectors need it: which node each CPU is
//! on and how far apart nodes are. Read from sysfs by the caller (outside
//! the core) or built by hand in tests.

/// Node distances as the kernel reports them (10 = local).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NumaTopology {
    cpu_node: Vec<u16>,
    /// `distance[a][b]`, square, one row per node.
    distance: Vec<Vec<u32>>,
}

/// Distance the kernel reports for a node to itself.
pub(crate) const LOCAL_DISTANCE: u32 = 10;

impl Default for NumaTopology {
    /// One node holding every CPU.
    fn default() -> Self {
        NumaTopology {
            cpu_node: Vec::new(),
            distance: vec![vec![LOCAL_DISTANCE]],
        }
    }
}

impl NumaTopology {
    /// A layout from a CPU-to-node table and a square distance matrix.
    ///
    /// # Errors
    /// Returns a message if the matrix is not square or a CPU names a node
    /// the matrix does not have.
    pub fn new(cpu_node: Vec<u16>, distance: Vec<Vec<u32>>) -> Result<Self, String> {
        let node_count = distance.len();
        if node_count == 0 {
            return Err("the distance matrix has no node".into());
        }
        if let Some(row) = distance.iter().position(|row| row.len() != node_count) {
            return Err(format!("distance row {row} is not {node_count} long"));
        }
        if let Some(cpu) = cpu_node
            .iter()
            .position(|&node| usize::from(node) >= node_count)
        {
            return Err(format!("cpu {cpu} is on a node outside the matrix"));
        }
        Ok(NumaTopology { cpu_node, distance })
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.distance.len()
    }

    /// The node of `cpu`; CPUs the table does not list are on node 0.
    pub fn node_of_cpu(&self, cpu: u32) -> u16 {
        self.cpu_node.get(cpu as usize).copied().unwrap_or(0)
    }

    /// Distance from node `from` to node `to`; unknown nodes are far away.
    pub fn distance(&self, from: u16, to: u16) -> u32 {
        self.distance
            .get(usize::from(from))
            .and_then(|row| row.get(usize::from(to)))
            .copied()
            .unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_shape() {
        assert!(NumaTopology::new(vec![0, 1], vec![vec![10, 20], vec![20, 10]]).is_ok());
        assert!(NumaTopology::new(vec![0, 2], vec![vec![10, 20], vec![20, 10]]).is_err());
        assert!(NumaTopology::new(vec![], vec![vec![10, 20]]).is_err());
        assert!(NumaTopology::new(vec![], vec![]).is_err());
        let topology = NumaTopology::new(vec![0, 1], vec![vec![10, 21], vec![21, 10]]).unwrap();
        assert_eq!(topology.node_of_cpu(1), 1);
        assert_eq!(topology.node_of_cpu(99), 0);
        assert_eq!(topology.distance(0, 1), 21);
        assert_eq!(topology.distance(0, 5), u32::MAX);
    }
}
