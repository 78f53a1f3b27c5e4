//! The control verbs through the CLI against a running `mpio serve`:
//! `status`, `table`, `show topology`, `show paths` (text and `--json`),
//! every `message` verb, `reload` from a table, and the errors each gives
//! for a bad map, message, table or socket.

mod common;
mod daemon;

use common::{mpio, stderr};
use daemon::Daemon;
use mpio_test_support::{output_within, wait_until, HANG_BOUND};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

/// Two groups of memory paths: `a` and `b` (round-robin), then `c`.
const TABLE: &str = "0 8192 multipath 0 0 2 1 round-robin 0 2 1 memory:d#a 1 memory:d#b 1 \
                     round-robin 0 1 1 memory:d#c 1";

#[test]
fn read_verbs_show_status_table_topology_and_paths() {
    let daemon = Daemon::with_table("read", TABLE);
    let mode = std::fs::metadata(&daemon.control)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(
        mode & 0o777,
        0o600,
        "the control socket is the owner's only"
    );

    assert_eq!(
        daemon.ok(&["status"]),
        "mpatha: 0 8192 multipath 2 0 0 0 2 1 A 0 2 0 memory:d#a A 0 memory:d#b A 0 \
         E 0 1 0 memory:d#c A 0\n"
    );
    assert_eq!(
        daemon.ok(&["status", "mpatha"]),
        "0 8192 multipath 2 0 0 0 2 1 A 0 2 0 memory:d#a A 0 memory:d#b A 0 E 0 1 0 memory:d#c A 0\n"
    );
    let status = daemon.json(&["status", "mpatha"]);
    assert_eq!(status["name"], "mpatha");
    assert_eq!(status["current_group"], 1);
    assert_eq!(status["groups"][1]["paths"][0]["name"], "memory:d#c");
    assert!(daemon.json(&["status"]).is_array());

    assert_eq!(
        daemon.ok(&["table", "mpatha"]),
        "0 8192 multipath 0 0 2 1 round-robin 0 2 1 memory:d#a 1 memory:d#b 1 \
         round-robin 0 1 1 memory:d#c 1\n"
    );
    assert!(daemon
        .ok(&["table"])
        .starts_with("mpatha: 0 8192 multipath "));
    assert_eq!(
        daemon.json(&["table", "mpatha"])["table"],
        "0 8192 multipath 0 0 2 1 round-robin 0 2 1 memory:d#a 1 memory:d#b 1 \
         round-robin 0 1 1 memory:d#c 1"
    );

    let topology = daemon.ok(&["show", "topology"]);
    let lines: Vec<&str> = topology.lines().collect();
    assert_eq!(lines.len(), 6, "{topology}");
    assert_eq!(lines[0], "mpatha size=4M features='0' hwhandler='0' wp=rw");
    assert_eq!(
        lines[1],
        "|-+- policy='round-robin 0' group=1 status=active"
    );
    assert!(
        lines[2].starts_with("| |- memory:d#a active "),
        "{topology}"
    );
    assert!(
        lines[3].starts_with("| `- memory:d#b active "),
        "{topology}"
    );
    assert_eq!(
        lines[4],
        "`-+- policy='round-robin 0' group=2 status=enabled"
    );
    assert!(
        lines[5].starts_with("  `- memory:d#c active "),
        "{topology}"
    );
    let topology = daemon.json(&["show", "topology", "mpatha"]);
    assert_eq!(topology[0]["groups"][0]["paths"][1]["name"], "memory:d#b");
    assert_eq!(topology[0]["groups"][0]["state"], "active");
    assert!(topology[0]["exports"][0]
        .as_str()
        .unwrap()
        .starts_with("nbd+unix:///mpio?socket="));

    let paths = daemon.ok(&["show", "paths"]);
    let rows: Vec<Vec<&str>> = paths
        .lines()
        .map(|line| line.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 4, "{paths}");
    assert_eq!(rows[0][..5], ["map", "path", "uri", "group", "dm_st"]);
    assert_eq!(
        rows[3][..5],
        ["mpatha", "memory:d#c", "memory:d#c", "2", "active"]
    );
    let paths = daemon.json(&["show", "paths"]);
    assert_eq!(paths.as_array().unwrap().len(), 3);
    assert_eq!(paths[0]["map"], "mpatha");
    assert_eq!(paths[0]["state"], "active");
}

/// The states of the groups and of the paths of `mpatha`, from
/// `status --json`.
fn states(daemon: &Daemon) -> (Vec<String>, Vec<String>) {
    states_of(daemon, "mpatha")
}

/// The states of the groups and of the paths of `map`.
fn states_of(daemon: &Daemon, map: &str) -> (Vec<String>, Vec<String>) {
    let status = daemon.json(&["status", map]);
    let groups = status["groups"].as_array().unwrap();
    let group_states = groups
        .iter()
        .map(|group| group["state"].as_str().unwrap().to_string())
        .collect();
    let path_states = groups
        .iter()
        .flat_map(|group| group["paths"].as_array().unwrap())
        .map(|path| path["state"].as_str().unwrap().to_string())
        .collect();
    (group_states, path_states)
}

#[test]
fn every_message_verb_changes_what_status_shows() {
    let daemon = Daemon::with_table("message", TABLE);
    daemon.ok(&["message", "mpatha", "fail_path", "memory:d#a"]);
    assert_eq!(states(&daemon).1, ["failed", "active", "active"]);
    assert!(daemon.ok(&["status", "mpatha"]).contains("memory:d#a F 1 "));
    daemon.ok(&["message", "mpatha", "reinstate_path memory:d#a"]);
    assert_eq!(states(&daemon).1, ["active", "active", "active"]);

    daemon.ok(&["message", "mpatha", "switch_group", "2"]);
    assert_eq!(states(&daemon).0, ["enabled", "active"]);
    daemon.ok(&["message", "mpatha", "disable_group", "1"]);
    assert_eq!(states(&daemon).0, ["disabled", "active"]);
    // As in dm, enabling a group drops the current group, and the route is
    // chosen afresh from the first group.
    daemon.ok(&["message", "mpatha", "enable_group", "1"]);
    assert_eq!(states(&daemon).0, ["active", "enabled"]);

    daemon.ok(&["message", "mpatha", "queue_if_no_path"]);
    assert_eq!(daemon.json(&["status", "mpatha"])["queue_if_no_path"], true);
    assert!(daemon
        .ok(&["table", "mpatha"])
        .starts_with("0 8192 multipath 1 queue_if_no_path "));
    daemon.ok(&["message", "mpatha", "fail_if_no_path"]);
    assert_eq!(
        daemon.json(&["status", "mpatha"])["queue_if_no_path"],
        false
    );

    let json = daemon.json(&["message", "mpatha", "fail_path", "memory:d#c"]);
    assert_eq!(json["message"]["verb"], "fail_path");
    let topology = daemon.ok(&["show", "topology", "mpatha"]);
    assert!(topology.contains("memory:d#c failed "), "{topology}");
}

#[test]
fn reload_swaps_the_selector_and_the_paths() {
    // The checker's rounds are an hour apart: only the probe a reload
    // starts can show the added path ready below.
    let dir = daemon::test_dir("reload");
    let config = dir.join("mpio.toml");
    let text = format!(
        "[[map]]\nname = \"mpatha\"\ntable = \"{TABLE}\"\nchecker_interval_ms = 3600000\n\
         [[map.export]]\nsocket = \"{}\"\n",
        dir.join("nbd.sock").display()
    );
    std::fs::write(&config, text).unwrap();
    let daemon = Daemon::start(dir, &["--config", config.to_str().unwrap()]);
    daemon.ok(&["message", "mpatha", "fail_path memory:d#b"]);
    let new_table = "0 8192 multipath 1 queue_if_no_path 0 1 1 queue-length 0 3 1 \
                     memory:d#b 1 memory:d#c 1 memory:d#e 1";
    daemon.ok(&["reload", "mpatha", new_table]);
    assert_eq!(daemon.ok(&["table", "mpatha"]).trim(), new_table);
    // Path state carries over by name: b keeps its failure (the probe
    // the reload starts may have reinstated it, as multipathd would), e
    // is new.
    let status = daemon.json(&["status", "mpatha"]);
    let paths = &status["groups"][0]["paths"];
    assert_eq!(paths[0]["name"], "memory:d#b");
    assert_eq!(paths[0]["fail_count"], 1, "{status}");
    assert_eq!(paths[2]["fail_count"], 0, "{status}");
    let topology = daemon.ok(&["show", "topology"]);
    assert!(topology.contains("policy='queue-length 0'"), "{topology}");
    // The checker probes the added path at once, not at its next round
    // (an hour away).
    wait_until("the checker probes the added path", || {
        let paths = daemon.json(&["show", "paths"]);
        let e = paths
            .as_array()
            .unwrap()
            .iter()
            .find(|row| row["name"] == "memory:d#e")
            .cloned();
        e.is_some_and(|row| row["checker"] == "ready")
    });
    // The reload is given as words, too.
    let words: Vec<&str> = TABLE.split_whitespace().collect();
    let mut args = vec!["reload", "mpatha"];
    args.extend(&words);
    daemon.ok(&args);
    assert_eq!(
        daemon.ok(&["table", "mpatha"]).trim(),
        TABLE.split_whitespace().collect::<Vec<_>>().join(" ")
    );
}

#[test]
fn bad_requests_get_errors_that_name_what_was_wrong() {
    let daemon = Daemon::with_table("errors", TABLE);
    let error = daemon.error(&["status", "nosuch"]);
    assert!(
        error.contains("no map named \"nosuch\" (maps: mpatha)"),
        "{error}"
    );
    let error = daemon.error(&["message", "mpatha", "frobnicate"]);
    assert!(error.contains("unknown verb \"frobnicate\""), "{error}");
    let error = daemon.error(&["message", "mpatha", "fail_path", "nosuch"]);
    assert!(error.contains("no path named \"nosuch\""), "{error}");
    let error = daemon.error(&["message", "mpatha", "switch_group", "7"]);
    assert!(error.contains("no group 7"), "{error}");
    let error = daemon.error(&[
        "reload",
        "mpatha",
        "0 8192 multipath 0 0 1 1 round-robin 0 2 1 memory:d#a",
    ]);
    assert!(error.contains("table:"), "{error}");
    assert!(
        error.contains("the map keeps its table") || error.contains("table: "),
        "{error}"
    );
    let error = daemon.error(&[
        "reload",
        "mpatha",
        "0 8192 multipath 0 0 1 1 nosuch-selector 0 1 1 memory:d#a 1",
    ]);
    assert!(error.contains("nosuch-selector"), "{error}");
    // NBD clients were told the size at their handshake.
    let error = daemon.error(&[
        "reload",
        "mpatha",
        "0 16384 multipath 0 0 1 1 round-robin 0 1 1 memory:d#a 1",
    ]);
    assert!(
        error.contains("a reload keeps an exported map's size"),
        "{error}"
    );
    assert_eq!(
        daemon.ok(&["table", "mpatha"]).trim(),
        TABLE.split_whitespace().collect::<Vec<_>>().join(" ")
    );
    // A client that sends garbage gets an error, and the daemon goes on.
    let mut stream = std::os::unix::net::UnixStream::connect(&daemon.control).unwrap();
    std::io::Write::write_all(&mut stream, b"{\"verb\":\"explode\"}\n").unwrap();
    let mut answer = String::new();
    BufReader::new(stream).read_line(&mut answer).unwrap();
    assert!(answer.contains("\"outcome\":\"error\""), "{answer}");
    assert!(answer.contains("bad request"), "{answer}");
    daemon.ok(&["status"]);
}

#[test]
fn no_daemon_is_an_error_naming_the_socket() {
    let socket = Path::new("/nonexistent/mpio-control.sock");
    let output = mpio(&["status", "--control", socket.to_str().unwrap()]);
    assert!(!output.status.success());
    let error = stderr(&output);
    assert!(error.contains("/nonexistent/mpio-control.sock"), "{error}");
    assert!(error.contains("is `mpio serve` running?"), "{error}");
}

#[test]
fn a_second_daemon_on_the_same_control_socket_is_refused() {
    let daemon = Daemon::with_table("twice", TABLE);
    let output = output_within(
        Command::new(env!("CARGO_BIN_EXE_mpio"))
            .args([
                "serve",
                "--control",
                &daemon.control,
                "--table",
                TABLE,
                "--socket",
            ])
            .arg(daemon.dir.join("other.sock")),
        HANG_BOUND,
    );
    assert!(!output.status.success());
    let error = stderr(&output);
    assert!(
        error.contains("another mpio daemon is listening there"),
        "{error}"
    );
    daemon.ok(&["status"]);
}

/// A config of one map `m`, one group of `paths` (memory ports with those
/// names) under `selector`.
fn config(dir: &Path, paths: &[&str], selector: &str) -> String {
    let mut text = format!(
        "[[map]]\nname = \"m\"\nsize = \"4M\"\nselector = \"{selector}\"\n\
         path_grouping_policy = \"multibus\"\nno_path_retry = \"queue\"\n"
    );
    for path in paths {
        text.push_str(&format!(
            "[[map.path]]\nname = \"{path}\"\nuri = \"memory:cfg#{path}\"\n"
        ));
    }
    text.push_str(&format!(
        "[[map.export]]\nsocket = \"{}\"\n",
        dir.join("nbd.sock").display()
    ));
    text
}

#[test]
fn a_config_names_the_paths_and_reloads_from_a_config_add_them() {
    let dir = daemon::test_dir("config");
    let first = dir.join("first.toml");
    std::fs::write(&first, config(&dir, &["a", "b"], "round-robin")).unwrap();
    let daemon = Daemon::start(dir.clone(), &["--config", first.to_str().unwrap()]);
    assert_eq!(
        daemon.ok(&["table", "m"]).trim(),
        "0 8192 multipath 1 queue_if_no_path 0 1 1 round-robin 0 2 1 a 1 b 1"
    );
    let paths = daemon.ok(&["show", "paths", "m"]);
    let row: Vec<&str> = paths.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(row[..3], ["m", "a", "memory:cfg#a"], "{paths}");
    daemon.ok(&["message", "m", "fail_path", "b"]);

    let second = dir.join("second.toml");
    std::fs::write(&second, config(&dir, &["a", "b", "c"], "queue-length")).unwrap();
    let answer = daemon.ok(&["reload", "m", second.to_str().unwrap()]);
    assert_eq!(
        answer, "",
        "nothing to note: the exports and checker are the same"
    );
    assert_eq!(
        daemon.ok(&["table", "m"]).trim(),
        "0 8192 multipath 1 queue_if_no_path 0 1 1 queue-length 0 3 1 a 1 b 1 c 1"
    );
    let topology = daemon.ok(&["show", "topology", "m"]);
    // b keeps its failure count (the checker may have reinstated it).
    let b = topology
        .lines()
        .find(|line| line.contains(" b memory:cfg#b "))
        .unwrap();
    assert!(b.ends_with(" fails=1"), "{topology}");
    assert!(topology.contains("`- c memory:cfg#c active "), "{topology}");

    // A reload from a config that is wrong names the file, line and key,
    // and changes nothing.
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, config(&dir, &["a"], "no-such-selector")).unwrap();
    let error = daemon.error(&["reload", "m", bad.to_str().unwrap()]);
    assert!(
        error.contains("bad.toml") && error.contains("line 4"),
        "{error}"
    );
    assert!(error.contains("no-such-selector"), "{error}");
    // A path name keeps its endpoint across a reload.
    let moved = dir.join("moved.toml");
    let text =
        config(&dir, &["a", "b", "c"], "queue-length").replace("memory:cfg#b", "memory:other#b");
    std::fs::write(&moved, text).unwrap();
    let error = daemon.error(&["reload", "m", moved.to_str().unwrap()]);
    assert!(
        error.contains("path \"b\" leads to \"memory:cfg#b\""),
        "{error}"
    );
    // A table naming the config's paths works too.
    daemon.ok(&[
        "reload",
        "m",
        "0 8192 multipath 0 0 1 1 service-time 0 1 2 c 1 1",
    ]);
    assert_eq!(states_of(&daemon, "m").1, ["active"]);
}

#[test]
fn remove_drains_a_map_s_export_and_takes_the_map_out() {
    let dir = daemon::test_dir("remove");
    let file = dir.join("two.toml");
    let second = config(&dir, &["c"], "round-robin")
        .replace("name = \"m\"", "name = \"n\"")
        .replace("nbd.sock", "second.sock");
    std::fs::write(&file, config(&dir, &["a", "b"], "round-robin") + &second).unwrap();
    let daemon = Daemon::start(dir.clone(), &["--config", file.to_str().unwrap()]);
    assert!(dir.join("second.sock").exists());
    let answer = daemon.ok(&["remove", "n"]);
    assert!(answer.starts_with("removed n\n  export n: "), "{answer}");
    assert!(
        !dir.join("second.sock").exists(),
        "the export's socket stays"
    );
    let json = daemon.json(&["remove", "m"]);
    assert_eq!(json["removed"], "m", "{json}");
    let error = daemon.error(&["remove", "m"]);
    assert!(error.contains("no map named \"m\" (maps: )"), "{error}");
    let error = daemon.error(&["status", "n"]);
    assert!(error.contains("no map named \"n\""), "{error}");
}

#[test]
fn a_bad_config_stops_the_daemon_with_the_line_and_key() {
    let dir = daemon::test_dir("bad-config");
    let file = dir.join("mpio.toml");
    std::fs::write(
        &file,
        "[[map]]\nname = \"m\"\nsize = \"4M\"\nsurprise = 1\n",
    )
    .unwrap();
    let output = mpio(&[
        "serve",
        "--config",
        file.to_str().unwrap(),
        "--control",
        "/nonexistent/c.sock",
    ]);
    assert!(!output.status.success());
    let error = stderr(&output);
    assert!(
        error.contains("mpio.toml") && error.contains("line 4"),
        "{error}"
    );
    assert!(error.contains("surprise"), "{error}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `GET url` (http://host:port/path) with a plain TCP client; returns the
/// status line and the body.
fn http_get(url: &str) -> (String, String) {
    let rest = url.strip_prefix("http://").unwrap();
    let (address, path) = rest.split_at(rest.find('/').unwrap());
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    std::io::Write::write_all(&mut stream, request.as_bytes()).unwrap();
    let mut response = String::new();
    std::io::Read::read_to_string(&mut stream, &mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

/// The value of the sample `name{labels}` in Prometheus text.
fn sample(body: &str, series: &str) -> f64 {
    body.lines()
        .find_map(|line| {
            line.strip_prefix(series)
                .and_then(|rest| rest.strip_prefix(' '))
        })
        .unwrap_or_else(|| panic!("no sample {series} in:\n{body}"))
        .parse()
        .unwrap()
}

#[test]
fn metrics_follow_io_and_failures() {
    let dir = daemon::test_dir("metrics");
    let socket = dir.join("nbd.sock").display().to_string();
    let daemon = Daemon::start(
        dir,
        &[
            "--table",
            TABLE,
            "--socket",
            &socket,
            "--metrics",
            "127.0.0.1:0",
        ],
    );
    let url = daemon
        .metrics
        .clone()
        .expect("the daemon prints its metrics URL");
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/metrics"),
        "{url}"
    );
    // Read the whole export once, through group 1's two paths.
    let copy = output_within(
        Command::new("nbdcopy").args([daemon.uris[0].as_str(), "null:"]),
        HANG_BOUND,
    );
    assert!(
        copy.status.success(),
        "{}",
        String::from_utf8_lossy(&copy.stderr)
    );
    daemon.ok(&["message", "mpatha", "fail_path", "memory:d#a"]);

    let (status, body) = http_get(&url);
    assert_eq!(status, "HTTP/1.1 200 OK");
    let a = r#"{map="mpatha",path="memory:d#a",group="1"}"#;
    let b = r#"{map="mpatha",path="memory:d#b",group="1"}"#;
    let c = r#"{map="mpatha",path="memory:d#c",group="2"}"#;
    let bytes = sample(&body, &format!("mpio_path_dispatched_bytes_total{a}"))
        + sample(&body, &format!("mpio_path_dispatched_bytes_total{b}"));
    assert!(
        bytes >= 4.0 * 1024.0 * 1024.0,
        "the 4 MiB read went through a and b: {bytes}"
    );
    assert_eq!(
        sample(&body, &format!("mpio_path_dispatched_total{c}")),
        0.0
    );
    assert_eq!(sample(&body, &format!("mpio_path_active{a}")), 0.0);
    assert_eq!(sample(&body, &format!("mpio_path_active{b}")), 1.0);
    assert_eq!(sample(&body, &format!("mpio_path_failures_total{a}")), 1.0);
    let count = sample(&body, &format!("mpio_path_latency_seconds_count{b}"));
    assert!(count > 0.0, "{body}");
    let inf =
        r#"mpio_path_latency_seconds_bucket{map="mpatha",path="memory:d#b",group="1",le="+Inf"}"#;
    assert_eq!(sample(&body, inf), count);
    assert_eq!(
        sample(&body, r#"mpio_map_path_failures_total{map="mpatha"}"#),
        1.0
    );
    assert_eq!(
        sample(&body, r#"mpio_map_waiting_for_path{map="mpatha"}"#),
        0.0
    );
    let (status, _) = http_get(&url.replace("/metrics", "/other"));
    assert_eq!(status, "HTTP/1.1 404 Not Found");
}

/// The config refused a path named twice, but a `--table`, a `reload`
/// and `table check` took it: one rule everywhere now, with one text.
#[test]
fn a_path_named_twice_is_refused_everywhere() {
    const TWICE: &str = "0 8192 multipath 0 0 2 1 round-robin 0 2 1 memory:d#a 1 memory:d#b 1 \
                         round-robin 0 1 1 memory:d#a 1";
    const RULE: &str = "(word 12 names it): a path is in a table once";
    let daemon = Daemon::with_table("twice", TABLE);
    let error = daemon.error(&["reload", "mpatha", TWICE]);
    assert!(error.contains(RULE), "{error}");
    let output = mpio(&["table", "check", TWICE]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains(RULE), "{}", stderr(&output));
    let dir = daemon::test_dir("twice-serve");
    let output = output_within(
        Command::new(env!("CARGO_BIN_EXE_mpio"))
            .args(["serve", "--table", TWICE, "--socket"])
            .arg(dir.join("nbd.sock"))
            .arg("--control")
            .arg(dir.join("control.sock")),
        HANG_BOUND,
    );
    assert!(!output.status.success());
    assert!(stderr(&output).contains(RULE), "{}", stderr(&output));
}
