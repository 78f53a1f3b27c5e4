#!/bin/sh
# The kernel test VM's payload for scripts/kernel-test.sh: runs the
# kernel test binary with the host's arguments (one per line in
# /kvm/args) and settings (exports in /kvm/env) and exits with its
# status, after the kernel's last words when it failed.
set --
while IFS= read -r argument; do
    [ -n "$argument" ] && set -- "$@" "$argument"
done < /kvm/args
export MPIO_BIN=/usr/local/bin/mpio RUST_BACKTRACE=1
# The host's settings for the tests (SOAK_SECS, SOAK_SEED), if any.
[ -f /kvm/env ] && . /kvm/env
cd /tmp
mpio-kernel-tests --ignored --test-threads=1 "$@"
status=$?
if [ "$status" != 0 ]; then
    echo "--- the kernel's last messages ---"
    dmesg | tail -n 40
fi
exit "$status"
