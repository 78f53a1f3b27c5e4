//! Which CPU each I/O thread runs on, and which queue of a device it
//! serves.
//!
//! Thread `i` is CPU `i`'s: it serves, of every device, the hardware
//! queue that blk-mq sends the requests submitted on CPU `i`, and tells
//! its map queues that CPU (so `io-affinity` and `numa` pick by where the
//! I/O was submitted). Which queue that is, the kernel says per device
//! (GET_QUEUE_AFFINITY): 6.12 maps CPU `i` to queue `i`, 7.3 does not
//! ([`assign_queues`]). The thread itself is
//! pinned to the next CPU of the same NUMA node, in the order the CPUs
//! are listed, and to CPU `i` only when that CPU is alone on its node.
//! Every CPU still runs exactly one I/O thread.
//!
//! Why not CPU `i` itself: a thread on its submitters' CPU can only run
//! by preempting them. Each request an application queues wakes the
//! thread, which takes the CPU from the application in the middle of its
//! submissions; the two alternate a few requests at a time. On a
//! neighbouring CPU the thread runs beside its submitters and takes
//! their requests in larger batches (`docs/BENCHMARKS.md` has the
//! measurement). The neighbour stays on the node, so the thread's memory and its paths' NUMA distance are those
//! of the submitting CPU.

use mpio_core::numa::NumaTopology;

/// The CPU to run the thread of each of `queue_cpus` on (same order):
/// the next CPU listed on the same node, wrapping around, or the CPU
/// itself when no other CPU listed is on its node.
pub(crate) fn run_cpus(queue_cpus: &[u32], topology: &NumaTopology) -> Vec<u32> {
    queue_cpus
        .iter()
        .enumerate()
        .map(|(index, &cpu)| {
            let node = topology.node_of_cpu(cpu);
            let distinct = |other: &&u32| **other != cpu && topology.node_of_cpu(**other) == node;
            queue_cpus[index + 1..]
                .iter()
                .find(distinct)
                .or_else(|| queue_cpus[..index].iter().find(distinct))
                .copied()
                .unwrap_or(cpu)
        })
        .collect()
}

/// The hardware queue each thread serves, and the CPU whose requests it
/// gets there (same order as `queue_cpus`, the CPU each thread is for):
/// the queue whose CPUs (`affinity[q]`, from the kernel) include the
/// thread's. Where that matches no queue to each thread one to one (a
/// thread count below the CPUs'), thread `t` serves queue `t`, for the
/// first of its CPUs.
pub(crate) fn assign_queues(queue_cpus: &[u32], affinity: &[Vec<u32>]) -> Vec<(u16, u32)> {
    let matched: Vec<Option<usize>> = queue_cpus
        .iter()
        .map(|cpu| affinity.iter().position(|cpus| cpus.contains(cpu)))
        .collect();
    let mut queues: Vec<usize> = matched.iter().flatten().copied().collect();
    queues.sort_unstable();
    queues.dedup();
    let one_to_one = queues.len() == queue_cpus.len() && queue_cpus.len() == affinity.len();
    queue_cpus
        .iter()
        .zip(&matched)
        .enumerate()
        .map(|(thread, (&cpu, queue))| match queue {
            Some(queue) if one_to_one => (*queue as u16, cpu),
            _ => {
                let first = affinity.get(thread).and_then(|cpus| cpus.first());
                (thread as u16, first.copied().unwrap_or(cpu))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_thread_serves_the_queue_of_its_cpu() {
        // 6.12's map, and 7.3's in a 2-CPU guest.
        assert_eq!(
            assign_queues(&[0, 1], &[vec![0], vec![1]]),
            [(0, 0), (1, 1)]
        );
        assert_eq!(
            assign_queues(&[0, 1], &[vec![1], vec![0]]),
            [(1, 0), (0, 1)]
        );
        // Two threads on four CPUs: queue t, for its first CPU.
        assert_eq!(
            assign_queues(&[0, 1], &[vec![0, 2], vec![1, 3]]),
            [(0, 0), (1, 1)]
        );
        assert_eq!(
            assign_queues(&[0, 1], &[vec![2, 3], vec![0, 1]]),
            [(0, 2), (1, 0)]
        );
    }

    fn nodes(cpu_node: Vec<u16>, count: usize) -> NumaTopology {
        let distance = (0..count)
            .map(|from| {
                (0..count)
                    .map(|to| if from == to { 10 } else { 20 })
                    .collect()
            })
            .collect();
        NumaTopology::new(cpu_node, distance).unwrap()
    }

    #[test]
    fn each_thread_runs_on_the_next_cpu_of_its_node() {
        let one_node = NumaTopology::default();
        assert_eq!(run_cpus(&[0, 1], &one_node), [1, 0]);
        assert_eq!(run_cpus(&[0, 1, 2, 3], &one_node), [1, 2, 3, 0]);
        // Listed CPUs need not be contiguous.
        assert_eq!(run_cpus(&[0, 2, 4], &one_node), [2, 4, 0]);
        // Two nodes: each thread stays on its queue's node.
        let two = nodes(vec![0, 0, 1, 1], 2);
        assert_eq!(run_cpus(&[0, 1, 2, 3], &two), [1, 0, 3, 2]);
        let interleaved = nodes(vec![0, 1, 0, 1], 2);
        assert_eq!(run_cpus(&[0, 1, 2, 3], &interleaved), [2, 3, 0, 1]);
    }

    #[test]
    fn a_cpu_alone_on_its_node_runs_its_own_thread() {
        assert_eq!(run_cpus(&[0], &NumaTopology::default()), [0]);
        let lonely = nodes(vec![0, 1, 1], 2);
        assert_eq!(run_cpus(&[0, 1, 2], &lonely), [0, 2, 1]);
        // More threads than CPUs: a CPU listed twice is no neighbour of
        // itself.
        assert_eq!(run_cpus(&[0, 0], &NumaTopology::default()), [0, 0]);
        assert_eq!(
            run_cpus(&[0, 1, 0, 1], &NumaTopology::default()),
            [1, 0, 1, 0]
        );
    }
}
