//! A Prometheus counter must not go backwards while the process lives
//! (a reload is not a restart: `rate()` reads any drop as a reset and
//! counts the whole new value as increase).

use mpio_core::io::{Buffer, Io};
use mpio_core::map::MapOptions;
use mpio_core::table::Table;
use mpio_daemon::metrics::{render, MapMetrics};
use mpio_test_support::HANG_BOUND;
use mpio_transport::{device_queue, Transports};
use std::time::Instant;

fn sample(text: &str, prefix: &str) -> u64 {
    text.lines()
        .find(|line| line.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix} in\n{text}"))
        .rsplit_once(' ')
        .unwrap()
        .1
        .parse()
        .unwrap()
}

#[test]
fn path_counters_do_not_go_backwards_on_reload() {
    let transports = Transports::new();
    let table = Table::parse("0 2048 multipath 0 0 1 1 round-robin 0 1 1 memory:r#a 1").unwrap();
    let slot = transports
        .build(&table, MapOptions::default())
        .unwrap()
        .into_slot();
    let mut queue = device_queue(&slot, 8, 0);
    let mut write = |offset: u64| {
        let io = Io::write(offset, offset, Buffer::zeroed(4096));
        queue.submit(io, 1).unwrap();
        let started = Instant::now();
        let mut done = false;
        while !done {
            queue.poll(2, &mut |completion| {
                completion.result.unwrap();
                done = true;
            });
            assert!(started.elapsed() < HANG_BOUND, "I/O hung");
        }
    };
    for offset in 0..10 {
        write(offset * 4096);
    }
    let key = "mpio_path_dispatched_total{map=\"r\",path=\"memory:r#a\",group=\"1\"}";
    let before = sample(&render(&[MapMetrics::new("r", &slot.map())]), key);
    assert_eq!(before, 10);
    let map = slot.map();
    assert!(map.fail_path(0, mpio_core::io::PathError::Transport));
    assert!(map.reinstate_path(0));
    transports.reload(&slot, &table).unwrap();
    write(0);
    let text = render(&[MapMetrics::new("r", &slot.map())]);
    let after = sample(&text, key);
    assert_eq!(
        after, 11,
        "counter went from {before} to {after} across a reload"
    );
    let count_key = "mpio_path_latency_seconds_count{map=\"r\",path=\"memory:r#a\",group=\"1\"}";
    assert_eq!(sample(&text, count_key), 11, "the histogram is carried too");
    let failures = sample(&text, "mpio_map_path_failures_total{map=\"r\"}");
    assert_eq!(failures, 1, "the map's failure count is carried");
}
