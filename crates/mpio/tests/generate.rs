//! `mpio generate`: the manual pages render without a warning from groff,
//! `mpio.8` lists every subcommand and each has its page, `mpio.toml.5`
//! carries every section and key of the config reference; the completion
//! scripts load in bash, zsh and fish, and bash's completes a verb.

mod common;

use common::mpio_binary;
use mpio_test_support::{output_within, HANG_BOUND};
use std::path::Path;
use std::process::{Command, Output};

fn run(program: &str, args: &[&str]) -> Output {
    let output = output_within(Command::new(program).args(args), HANG_BOUND);
    assert!(
        output.status.success(),
        "{program} {args:?}: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// `page` rendered for a terminal; fails on any groff warning but a
/// line it could not justify (a long URL is no fault of the page).
fn render(page: &Path) -> String {
    let page = page.to_str().unwrap();
    let output = run("groff", &["-man", "-Tutf8", "-ww", "-Wbreak", page]);
    let warnings = String::from_utf8_lossy(&output.stderr);
    assert!(warnings.is_empty(), "{page}: {warnings}");
    // Overstrikes (bold, underline) dropped: plain text to search.
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    let mut plain = String::with_capacity(text.len());
    for character in text.chars() {
        if character == '\u{8}' {
            plain.pop();
        } else {
            plain.push(character);
        }
    }
    plain
}

#[test]
fn the_manual_pages_cover_every_subcommand_and_the_config_reference() {
    let dir = tempfile::tempdir().unwrap();
    run(
        &mpio_binary(),
        &["generate", "man", dir.path().to_str().unwrap()],
    );

    let top = render(&dir.path().join("mpio.8"));
    let listed: Vec<String> = top
        .split_whitespace()
        .filter_map(|word| word.strip_suffix("(8)"))
        .filter(|name| name.starts_with("mpio-"))
        .map(str::to_string)
        .collect();
    for verb in [
        "serve", "status", "table", "show", "message", "reload", "discover",
    ] {
        assert!(
            listed.contains(&format!("mpio-{verb}")),
            "mpio.8 does not list {verb}: {listed:?}"
        );
    }
    for name in &listed {
        let page = render(&dir.path().join(format!("{name}.8")));
        assert!(page.contains("SYNOPSIS"), "{name}.8: {page}");
    }
    let serve = render(&dir.path().join("mpio-serve.8"));
    assert!(serve.contains("--config"), "mpio-serve.8 misses --config");

    let reference =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/CONFIG.md"))
            .unwrap();
    let config = render(&dir.path().join("mpio.toml.5"));
    let mut keys = 0;
    for line in reference.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            assert!(config.contains(heading), "mpio.toml.5 misses {heading}");
        }
        // A key's term: "`name` = *type*, ...".
        let term = line.trim_start();
        if let Some((key, _)) = term
            .strip_prefix('`')
            .and_then(|rest| rest.split_once("` = *"))
        {
            assert!(
                config.contains(&format!("{key} = ")),
                "mpio.toml.5 misses the key {key}"
            );
            keys += 1;
        }
    }
    assert!(keys > 30, "only {keys} keys found in the reference");
    assert!(
        !config.contains("makes the manual page"),
        "the reference's preface is in the page"
    );
    for left in ["```", "**", "\\f"] {
        assert!(!config.contains(left), "mpio.toml.5 shows {left:?} as text");
    }
    // A definition's mark left as text starts a line.
    let unread = config
        .lines()
        .find(|line| line.trim_start().starts_with(": "));
    assert_eq!(unread, None, "mpio.toml.5 shows a definition's mark");
}

/// The completion script for `shell`.
fn completion(shell: &str) -> String {
    String::from_utf8(run(&mpio_binary(), &["generate", "completion", shell]).stdout).unwrap()
}

#[test]
fn bash_completes_a_verb_and_zsh_and_fish_load_their_scripts() {
    let dir = tempfile::tempdir().unwrap();
    let bash = dir.path().join("mpio.bash");
    std::fs::write(&bash, completion("bash")).unwrap();
    let completed = run(
        "bash",
        &[
            "-c",
            &format!(
                "source {}; COMP_WORDS=(mpio se); COMP_CWORD=1; \
                 _mpio mpio se mpio; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
                bash.display()
            ),
        ],
    );
    let words = String::from_utf8(completed.stdout).unwrap();
    assert_eq!(
        words.trim(),
        "serve",
        "bash completed `mpio se` as {words:?}"
    );

    let zsh = dir.path().join("_mpio");
    std::fs::write(&zsh, completion("zsh")).unwrap();
    run("zsh", &["-n", zsh.to_str().unwrap()]);
    let fish = dir.path().join("mpio.fish");
    std::fs::write(&fish, completion("fish")).unwrap();
    run("fish", &["--no-execute", fish.to_str().unwrap()]);
    // fish's script names the verbs it offers.
    assert!(completion("fish").contains("-a \"serve\""));
}

#[test]
fn an_unknown_shell_and_an_unwritable_directory_are_refused() {
    let output = output_within(
        Command::new(mpio_binary()).args(["generate", "completion", "tcsh"]),
        HANG_BOUND,
    );
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("tcsh"));

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    let output = output_within(
        Command::new(mpio_binary()).args(["generate", "man", file.join("man").to_str().unwrap()]),
        HANG_BOUND,
    );
    assert!(!output.status.success());
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(error.contains("cannot make"), "{error}");
}
