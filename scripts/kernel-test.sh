#!/usr/bin/env bash
# Runs the kernel test suite (crates/mpio/tests/kernel/) against a real
# Linux kernel: natively where the running kernel has the modules the
# tests load, the caller is root and no kernel is asked for, otherwise
# in a QEMU guest booting a Debian kernel (KVM where usable, TCG
# elsewhere): 6.12 by default, or the newest from trixie-backports.
# Exits with the tests' status, after a summary line naming the kernel.
# docs/TESTING.md describes the harness.
#
#   scripts/kernel-test.sh [FILTER...]       arguments go to the test binary
#   MPIO_KERNEL=6.12 | newest                the guest's kernel [6.12]; set,
#                                            it is always a guest
#   MPIO_KVM_SHELL=1 scripts/kernel-test.sh  a shell in the guest instead
#   MPIO_KVM_FORCE=1 scripts/kernel-test.sh  the guest even where native works
#   MPIO_KVM_TIMEOUT=N                       the guest's limit, s [1500]
#   SOAK_SECS=N SOAK_SEED=N                  the soak's length and seed, passed on
# (scripts/kernel-vm/host.sh lists the guest's other settings.)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/kernel-vm/host.sh

# The modules the tests load; native runs need every one.
test_modules="null_blk nbd ublk_drv ext4 configfs"

kvm_install_host_packages
cargo build --release -p mpio --locked --quiet
# The test binary's path, from cargo's JSON build messages.
test_binary=$(cargo test --release -p mpio --test kernel --no-run --locked \
    --message-format=json 2>/dev/null |
    sed -n 's/.*"executable":"\([^"]*\/kernel-[0-9a-f]*\)".*/\1/p' | tail -1)
[ -x "$test_binary" ] || { kvm_log "no kernel test binary"; exit 1; }

native=1
[ "$(id -u)" = 0 ] && [ "${MPIO_KVM_FORCE:-0}" != 1 ] && [ -z "${MPIO_KERNEL:-}" ] || native=0
for module in $test_modules; do
    [ "$native" = 1 ] && modprobe -n -q "$module" 2>/dev/null || native=0
done
if [ "$native" = 1 ]; then
    kvm_log "running the kernel tests natively on $(uname -r)"
    MPIO_BIN=$PWD/target/release/mpio "$test_binary" --ignored --test-threads=1 "$@"
    exit
fi

kvm_prepare
overlay=$(mktemp -d)
trap 'rm -rf "$overlay"' EXIT
kvm_add_binary "$overlay" target/release/mpio mpio
kvm_add_binary "$overlay" "$test_binary" mpio-kernel-tests
install -D -m 755 scripts/kernel-vm/guest-test.sh "$overlay/kvm/run"
printf '%s\n' "$@" > "$overlay/kvm/args"
# The soak's settings reach the guest's tests as exports; only digits pass.
for name in SOAK_SECS SOAK_SEED; do
    value=${!name:-}
    [ -z "$value" ] && continue
    [[ "$value" =~ ^[0-9]+$ ]] || { kvm_log "$name must be a number"; exit 1; }
    echo "export $name=$value" >> "$overlay/kvm/env"
done
mkdir -p "$KVM_CACHE/logs"
log=$KVM_CACHE/logs/test-$KVM_KVER-$(date +%Y%m%d-%H%M%S)-$$.log
status=0
kvm_boot "$overlay" "${MPIO_KVM_TIMEOUT:-1500}" "$log" || status=$?
[ -e "$log" ] && kvm_log "console log: $log"
# The summary names the kernel: a run of both kernels (scripts/test.sh)
# says which one each count belongs to.
result=$(grep -a '^test result:' "$log" 2>/dev/null | tail -1 | sed 's/^test result: //')
kvm_log "kernel tests on $KVM_KERNEL_LABEL: ${result:-no test result} (exit status $status)"
exit "$status"
