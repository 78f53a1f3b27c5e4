//! Prometheus metrics of a memory-path map after I/O and a path failure,
//! read back line by line as a scraper would: every family has one HELP
//! and one TYPE line before its samples, labels parse (escapes included),
//! histogram buckets are cumulative and `+Inf` equals `_count`, and the
//! values match what happened. Then the HTTP server, through a real TCP
//! client: `GET /metrics`, 404, an oversize request, a silent client that
//! cannot hold the server, a non-loopback address refused, and stop.

use mpio_core::io::{Buffer, Io, PathError, PathOutcome};
use mpio_core::map::{Map, MapOptions};
use mpio_core::queue::Queue;
use mpio_core::table::Table;
use mpio_daemon::clients::MAX_CLIENTS;
use mpio_daemon::metrics::http::{MetricsError, MetricsServer, CLIENT_TIMEOUT};
use mpio_daemon::metrics::{render, MapMetrics, CONTENT_TYPE};
use mpio_test_support::{wait_until, HANG_BOUND};
use mpio_transport::{AnyQueue, Transports};
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{mpsc, Arc};
use std::time::Instant;

/// Runs `io` through `queue` to its completion.
fn run(queue: &mut Queue<AnyQueue>, io: Io) {
    let mut now = 1;
    queue.submit(io, now).unwrap();
    let started = Instant::now();
    loop {
        now += 1_000;
        let mut done = None;
        queue.poll(now, &mut |completion| done = Some(completion.result));
        if let Some(result) = done {
            result.unwrap();
            return;
        }
        assert!(started.elapsed() < HANG_BOUND, "I/O hung");
    }
}

fn write(offset: u64) -> Io {
    Io::write(offset, offset, Buffer::zeroed(4096))
}

/// A map of memory ports `a`, `b` (group 1) and `c` (group 2) after 20
/// writes, then port `a` failing under 20 more (one path failure). The
/// queue is returned too: path counts are sums over live queues.
fn map_after_io() -> (Arc<Map>, Queue<AnyQueue>, Transports) {
    let transports = Transports::new();
    let table = Table::parse(
        "0 2048 multipath 0 0 2 1 round-robin 0 2 1 memory:m#a 1 memory:m#b 1 \
         round-robin 0 1 1 memory:m#c 1",
    )
    .unwrap();
    let device = transports.build(&table, MapOptions::default()).unwrap();
    let mut queue = device.queue(8, 0);
    for block in 0..20 {
        run(&mut queue, write(block * 4096));
    }
    transports
        .port("m", "a")
        .fail(PathOutcome::Path(PathError::Transport));
    for block in 0..20 {
        run(&mut queue, write(block * 4096));
    }
    (device.map, queue, transports)
}

/// One sample line: name, labels, value.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// The exposition text, parsed and checked as a scraper reads it.
struct Exposition {
    kinds: HashMap<String, String>,
    samples: Vec<Sample>,
}

/// The family a sample belongs to (a histogram's `_bucket`, `_sum` and
/// `_count` belong to the histogram).
fn family_of<'a>(name: &'a str, kinds: &HashMap<String, String>) -> &'a str {
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = name.strip_suffix(suffix) {
            if kinds.get(base).is_some_and(|kind| kind == "histogram") {
                return base;
            }
        }
    }
    name
}

/// Parses `{a="x",b="y\"z"}`: returns the labels and the rest of the line.
fn parse_labels(text: &str) -> (BTreeMap<String, String>, &str) {
    let mut labels = BTreeMap::new();
    let mut rest = text.strip_prefix('{').expect("labels open with {");
    loop {
        if let Some(after) = rest.strip_prefix('}') {
            return (labels, after);
        }
        let equals = rest.find('=').expect("label =");
        let name = rest[..equals].to_string();
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "label name {name:?}"
        );
        let mut chars = rest[equals + 1..].char_indices();
        assert_eq!(
            chars.next().map(|(_, c)| c),
            Some('"'),
            "label value quoted"
        );
        let mut value = String::new();
        let end = loop {
            let (at, c) = chars.next().expect("label value ends");
            match c {
                '\\' => match chars.next().expect("escape").1 {
                    'n' => value.push('\n'),
                    '\\' => value.push('\\'),
                    '"' => value.push('"'),
                    other => panic!("unknown escape \\{other}"),
                },
                '"' => break at,
                '\n' => panic!("raw line feed in a label value"),
                c => value.push(c),
            }
        };
        labels.insert(name, value);
        rest = &rest[equals + 1 + end + 1..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

fn parse(text: &str) -> Exposition {
    let mut helps: HashMap<String, usize> = HashMap::new();
    let mut kinds: HashMap<String, String> = HashMap::new();
    let mut samples = Vec::new();
    let mut finished_families: Vec<String> = Vec::new();
    let mut current: Option<String> = None;
    assert!(text.ends_with('\n'), "the text ends with a line feed");
    for line in text.lines() {
        if let Some(help) = line.strip_prefix("# HELP ") {
            let (name, doc) = help.split_once(' ').expect("HELP name text");
            assert!(!doc.is_empty());
            *helps.entry(name.to_string()).or_default() += 1;
            assert_eq!(helps[name], 1, "two HELP lines for {name}");
            continue;
        }
        if let Some(kind) = line.strip_prefix("# TYPE ") {
            let (name, kind) = kind.split_once(' ').expect("TYPE name kind");
            assert!(helps.contains_key(name), "TYPE before HELP for {name}");
            assert!(
                ["counter", "gauge", "histogram"].contains(&kind),
                "kind {kind}"
            );
            assert!(
                kinds.insert(name.into(), kind.into()).is_none(),
                "two TYPE lines for {name}"
            );
            if let Some(previous) = current.replace(name.to_string()) {
                finished_families.push(previous);
            }
            continue;
        }
        assert!(!line.starts_with('#'), "unknown comment {line}");
        let brace = line.find('{').expect("every sample here has labels");
        let name = &line[..brace];
        let (labels, rest) = parse_labels(&line[brace..]);
        let value: f64 = rest
            .strip_prefix(' ')
            .expect("space before the value")
            .parse()
            .unwrap_or_else(|_| panic!("value of {line}"));
        let family = family_of(name, &kinds);
        assert!(kinds.contains_key(family), "{name} has no TYPE line");
        assert_eq!(
            current.as_deref(),
            Some(family),
            "{name}'s samples are not together under their family"
        );
        assert!(!finished_families.iter().any(|done| done == family));
        if kinds[family] == "counter" {
            assert!(name.ends_with("_total"), "counter {name} without _total");
        }
        samples.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    Exposition { kinds, samples }
}

impl Exposition {
    /// The value of `name` for the sample whose labels include `with`.
    fn value(&self, name: &str, with: &[(&str, &str)]) -> f64 {
        let found: Vec<&Sample> = self
            .samples
            .iter()
            .filter(|sample| {
                sample.name == name
                    && with.iter().all(|(key, value)| {
                        sample.labels.get(*key).map(String::as_str) == Some(value)
                    })
            })
            .collect();
        assert_eq!(found.len(), 1, "{name} {with:?}: {found:?}");
        found[0].value
    }

    /// Checks every histogram: per label set, `le` ascending, counts
    /// cumulative, the last `+Inf` and equal to `_count`; `_sum` present.
    /// Returns how many histograms it checked.
    fn check_histograms(&self) -> usize {
        let mut checked = 0;
        for (family, _) in self.kinds.iter().filter(|(_, kind)| *kind == "histogram") {
            let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
            for sample in self
                .samples
                .iter()
                .filter(|s| s.name == format!("{family}_bucket"))
            {
                let mut labels = sample.labels.clone();
                let le = labels.remove("le").expect("a bucket has le");
                let le = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().unwrap()
                };
                series
                    .entry(format!("{labels:?}"))
                    .or_default()
                    .push((le, sample.value));
            }
            for (labels, buckets) in &series {
                assert!(
                    buckets.windows(2).all(|pair| pair[0].0 < pair[1].0),
                    "le order"
                );
                assert!(
                    buckets.windows(2).all(|pair| pair[0].1 <= pair[1].1),
                    "{labels}: buckets not cumulative: {buckets:?}"
                );
                let (last_le, last_count) = *buckets.last().unwrap();
                assert_eq!(last_le, f64::INFINITY, "{labels}: no +Inf bucket");
                let count = self
                    .samples
                    .iter()
                    .find(|s| {
                        s.name == format!("{family}_count") && format!("{:?}", s.labels) == *labels
                    })
                    .expect("_count");
                assert_eq!(count.value, last_count, "{labels}: +Inf != _count");
                assert!(self
                    .samples
                    .iter()
                    .any(|s| s.name == format!("{family}_sum")
                        && format!("{:?}", s.labels) == *labels));
                checked += 1;
            }
        }
        checked
    }
}

#[test]
fn a_map_after_io_and_a_failure_renders_as_prometheus_reads_it() {
    let (map, _queue, _transports) = map_after_io();
    let text = render(&[MapMetrics {
        name: "odd \"name\"\\",
        map: &map,
        waiting_for_path: Some(0),
    }]);
    let exposition = parse(&text);
    let map_label = ("map", "odd \"name\"\\");
    let a = [map_label, ("path", "memory:m#a"), ("group", "1")];
    let b = [map_label, ("path", "memory:m#b"), ("group", "1")];
    let c = [map_label, ("path", "memory:m#c"), ("group", "2")];
    assert_eq!(
        exposition.value("mpio_map_path_failures_total", &[map_label]),
        1.0
    );
    assert_eq!(
        exposition.value("mpio_map_current_group", &[map_label]),
        1.0
    );
    assert_eq!(exposition.value("mpio_map_queueing", &[map_label]), 0.0);
    assert_eq!(
        exposition.value("mpio_map_waiting_for_path", &[map_label]),
        0.0
    );
    assert_eq!(exposition.value("mpio_path_active", &a), 0.0);
    assert_eq!(exposition.value("mpio_path_active", &b), 1.0);
    assert_eq!(exposition.value("mpio_path_active", &c), 1.0);
    assert_eq!(exposition.value("mpio_path_failures_total", &a), 1.0);
    assert_eq!(exposition.value("mpio_path_failures_total", &b), 0.0);
    assert_eq!(exposition.value("mpio_path_errors_total", &a), 1.0);
    // Memory ports give nothing up, so nothing is hedged.
    assert_eq!(exposition.value("mpio_path_hedged_reads_total", &a), 0.0);
    assert_eq!(exposition.value("mpio_path_in_flight", &b), 0.0);
    // 40 writes and one retry: a took 10 of the first 20 and one that
    // failed; b the rest.
    let dispatched_a = exposition.value("mpio_path_dispatched_total", &a);
    let dispatched_b = exposition.value("mpio_path_dispatched_total", &b);
    assert_eq!(dispatched_a + dispatched_b, 41.0);
    assert_eq!(dispatched_a, 11.0);
    assert_eq!(
        exposition.value("mpio_path_dispatched_bytes_total", &b),
        dispatched_b * 4096.0
    );
    assert_eq!(exposition.value("mpio_path_dispatched_total", &c), 0.0);
    // Every attempt ended, so each path's histogram counts its attempts.
    assert_eq!(
        exposition.value("mpio_path_latency_seconds_count", &a),
        11.0
    );
    assert_eq!(
        exposition.value("mpio_path_latency_seconds_count", &b),
        dispatched_b
    );
    assert_eq!(exposition.check_histograms(), 3);
}

#[test]
fn an_empty_daemon_renders_nothing() {
    assert_eq!(render(&[]), "");
}

/// Sends `request` over TCP and reads the whole answer.
fn http(address: std::net::SocketAddr, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(HANG_BOUND)).unwrap();
    stream.write_all(request).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

fn serve_map() -> (MetricsServer, Arc<Map>, Queue<AnyQueue>, Transports) {
    let (map, queue, transports) = map_after_io();
    let scraped = Arc::clone(&map);
    let server = MetricsServer::start("127.0.0.1:0".parse().unwrap(), move || {
        render(&[MapMetrics::new("mpatha", &scraped)])
    })
    .unwrap();
    (server, map, queue, transports)
}

#[test]
fn get_metrics_over_tcp_answers_the_rendered_map() {
    let (server, _map, _queue, _transports) = serve_map();
    let answer = http(
        server.local_addr(),
        b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n",
    );
    let (head, body) = answer.split_once("\r\n\r\n").expect("head and body");
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(
        head.contains(&format!("Content-Type: {CONTENT_TYPE}")),
        "{head}"
    );
    assert!(
        head.contains(&format!("Content-Length: {}", body.len())),
        "{head}"
    );
    let exposition = parse(body);
    assert_eq!(
        exposition.value("mpio_path_active", &[("path", "memory:m#a")]),
        0.0
    );
    assert_eq!(exposition.check_histograms(), 3);
    server.stop();
}

#[test]
fn other_paths_and_bad_requests_are_refused() {
    let (server, _map, _queue, _transports) = serve_map();
    let address = server.local_addr();
    let answer = http(address, b"GET / HTTP/1.1\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 404 Not Found\r\n"), "{answer}");
    let answer = http(address, b"DELETE /metrics HTTP/1.1\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 405 "), "{answer}");
    let mut huge = b"GET /metrics HTTP/1.1\r\nX-Filler: ".to_vec();
    huge.extend(std::iter::repeat_n(b'x', 9 * 1024));
    let answer = http(address, &huge);
    assert!(
        answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
        "{answer}"
    );
    // Still serving.
    let answer = http(address, b"GET /metrics HTTP/1.0\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
}

/// Whether the server still holds `stream` open (it has neither
/// answered nor closed it).
fn still_open(stream: &TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let open = matches!(
        stream.peek(&mut [0u8]),
        Err(error) if error.kind() == std::io::ErrorKind::WouldBlock
    );
    stream.set_nonblocking(false).unwrap();
    open
}

#[test]
fn silent_clients_cannot_hold_the_server() {
    // Repeated until a run is conclusive: a busy machine may let a silent
    // client's CLIENT_TIMEOUT pass before the test looks; only a server
    // without the property never gives a conclusive run.
    wait_until("a scrape answered while silent clients wait", || {
        let (server, _map, _queue, _transports) = serve_map();
        // A server that answered every client in turn would answer the
        // scrape only after each of the ten silent clients before it had
        // been closed at its timeout.
        let silent: Vec<TcpStream> = (0..10)
            .map(|_| TcpStream::connect(server.local_addr()).unwrap())
            .collect();
        let answer = http(server.local_addr(), b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        silent.iter().any(still_open)
    });
}

#[test]
fn a_flood_of_silent_clients_makes_room_for_the_next() {
    wait_until("the oldest silent client cut before its timeout", || {
        let (server, _map, _queue, _transports) = serve_map();
        // The oldest client's timeout cannot end it before this instant
        // plus CLIENT_TIMEOUT (its clock starts when it is accepted).
        let connected = Instant::now();
        let silent: Vec<TcpStream> = (0..MAX_CLIENTS + 8)
            .map(|_| TcpStream::connect(server.local_addr()).unwrap())
            .collect();
        let answer = http(server.local_addr(), b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        // The longest-connected were cut to make room before the scrape
        // was served: reading gives EOF (or a reset) at once. Looked at
        // once its timeout may have passed, a closed connection proves
        // nothing: the run is repeated.
        let open = still_open(&silent[0]);
        if connected.elapsed() >= CLIENT_TIMEOUT {
            return false;
        }
        assert!(!open, "the oldest silent client was not cut");
        true
    });
}

#[test]
fn a_non_loopback_address_is_refused() {
    for address in ["0.0.0.0:0", "192.0.2.1:9100", "[::]:0"] {
        let error = MetricsServer::start(address.parse().unwrap(), String::new).unwrap_err();
        assert!(matches!(error, MetricsError::NotLoopback(_)), "{error}");
        assert!(error.to_string().contains("not loopback"), "{error}");
    }
    let server = MetricsServer::start("[::1]:0".parse().unwrap(), String::new);
    // ::1 may be missing on a host without IPv6; loopback is allowed.
    if let Err(error) = server {
        assert!(matches!(error, MetricsError::Bind { .. }), "{error}");
    }
}

#[test]
fn stop_joins_the_thread_and_closes_the_port() {
    let server = MetricsServer::start("127.0.0.1:0".parse().unwrap(), String::new).unwrap();
    let address = server.local_addr();
    // A stop that failed to wake the accepting thread would wait
    // forever: only that reaches the bound.
    let (done, stopped) = mpsc::channel();
    std::thread::spawn(move || {
        server.stop();
        let _ = done.send(());
    });
    stopped.recv_timeout(HANG_BOUND).expect("the stop returns");
    assert!(TcpStream::connect(address).is_err(), "still listening");
}
