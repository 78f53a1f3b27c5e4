#!/usr/bin/env bash
# The README's test command: installs what the tests need, then runs every
# check CI runs. Safe to run again; works on a fresh Debian machine as root.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

# CI builds a fresh clone once: incremental state would only take disk.
if [[ "${CI:-}" == true ]]; then
  export CARGO_INCREMENTAL=0
fi

# Debian packages the tests drive as real peers: nbdkit (memory, null,
# pattern, file plugins; error, delay, pause, nozero, rate filters) and
# qemu-nbd (qemu-utils) serve the nbd transport's tests; the NBD server's
# tests point real clients at `mpio serve`: nbdinfo and nbdcopy
# (libnbd-bin), qemu-img (qemu-utils) and fio's nbd engine (fio).
# `mpio generate`'s test renders the manual pages with groff
# (groff-base) and loads the completion scripts in zsh and fish; `mpio
# top`'s test reads its screen in a tmux pane.
packages=(nbdkit libnbd-bin qemu-utils fio groff-base zsh fish tmux)
if ((${#packages[@]})); then
  missing=()
  for package in "${packages[@]}"; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
  done
  if ((${#missing[@]})); then
    step "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  fi
fi

step "rustfmt"
cargo fmt --all -- --check

step "clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "docs"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet

step "tests"
# The ublk ABI test checks every constant against the newest kernel's
# header (the host's is older than the features mpio uses).
MPIO_UBLK_HEADER=$(source scripts/kernel-vm/host.sh && kvm_newest_ublk_header)
export MPIO_UBLK_HEADER
cargo test --workspace --locked

# loom swaps in model-checked atomics and locks under --cfg loom; it needs
# its own target dir so the normal build is not rebuilt each time.
step "loom model checks"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
  cargo test -p mpio-core --test loom --release --locked

# A benchmark is not a test: this run only proves the micro-benchmark
# still builds and runs; its numbers are printed, never asserted.
step "selector micro-benchmark (smoke run)"
cargo bench -p mpio-core --bench selectors --locked

# The simulator's canary: under --cfg mpio_canary the core's failover is
# deliberately broken, and the simulator must catch it (a harness that
# cannot fail proves nothing). Its own target dir, like loom's.
step "simulator canary"
RUSTFLAGS="--cfg mpio_canary" CARGO_TARGET_DIR=target/canary \
  cargo test -p mpio-sim --release --test canary --locked
# The second canary retries a write while its path may still apply it,
# without waiting for the fence: the reference disk must catch the stale
# copy landing.
RUSTFLAGS="--cfg mpio_canary_unfenced" CARGO_TARGET_DIR=target/canary-unfenced \
  cargo test -p mpio-sim --release --test canary_unfenced --locked

# 10,000 seeds of the deterministic simulator, in release (the CI budget
# is 3 minutes on 2 cores; see docs/SIMULATION.md for the measured rate).
# A failing seed prints its replay command and fails the step.
step "simulator: 10,000 seeds"
cargo build --release -p mpio --locked --quiet
target/release/mpio sim --seeds 10000

# The service unit as scripts/install.sh writes it, installed under a
# temporary prefix so that its ExecStart= binary exists: systemd-analyze
# verify fails on an error, and this step also on any warning it prints
# (an unknown key is only a warning to it).
step "systemd unit"
unit_root=$(mktemp -d)
PREFIX="$unit_root/usr" SYSCONFDIR="$unit_root/etc" UNITDIR="$unit_root/unit" \
  MPIO_BIN=target/release/mpio scripts/install.sh >/dev/null
if ! verify_output=$(systemd-analyze verify "$unit_root/unit/mpio.service" 2>&1) ||
  [[ -n "$verify_output" ]]; then
  echo "$verify_output"
  rm -rf "$unit_root"
  exit 1
fi
# The same install put the udev rule beside the unit. `udevadm verify`
# checks it where udev has the verb (systemd 254 and later; Debian
# bookworm's 252 lacks it): the unit test
# links::tests::the_udev_rule_reads_the_records_the_daemon_writes checks
# its form and that it imports the records the daemon writes.
rules="$unit_root/usr/lib/udev/rules.d/99-mpio.rules"
if [[ ! -s "$rules" ]]; then
  echo "install.sh: no udev rule at $rules"
  rm -rf "$unit_root"
  exit 1
fi
if udevadm verify --help >/dev/null 2>&1 &&
  ! udevadm verify --resolve-names=never "$rules"; then
  rm -rf "$unit_root"
  exit 1
fi
# The same install put the manual pages where man finds them.
if ! MANPATH="$unit_root/usr/share/man" man -w mpio.toml >/dev/null ||
  [[ ! -s "$unit_root/usr/share/bash-completion/completions/mpio" ]]; then
  echo "install.sh: no mpio.toml(5) under MANDIR or no bash completion"
  rm -rf "$unit_root"
  exit 1
fi
rm -rf "$unit_root"

# The kernel tests (crates/mpio/tests/kernel/) need root and modules the
# build machines' kernel lacks, so they run in QEMU guests, the whole
# suite once on each kernel the harness boots: Debian's 6.12 and the
# newest Debian kernel (trixie-backports). A kernel's first run
# downloads it and builds its guest image (docs/TESTING.md). The second
# kernel runs even when the first failed, so one run reports both; the
# step fails if either did.
failed_kernels=()
for kernel in 6.12 newest; do
  step "kernel tests on the $kernel kernel (MPIO_KERNEL=$kernel)"
  MPIO_KERNEL=$kernel bash scripts/kernel-test.sh || failed_kernels+=("$kernel")
done
if ((${#failed_kernels[@]})); then
  echo "kernel tests failed on: ${failed_kernels[*]}"
  exit 1
fi

# The fuzz crate lives outside the workspace (cargo-fuzz needs nightly to
# run it); check that it still builds against the parser.
step "fuzz targets build"
cargo check --manifest-path fuzz/Cargo.toml --locked --quiet

echo
echo "all checks passed"
