#!/bin/sh
# The kernel test VM's payload for scripts/kernel-test.sh: runs the
# kernel test binary with the host's arguments (one per line in
# /kvm/args) and settings (exports in /kvm/env) and exits with its
# status, after the kernel's last words when it failed.
#
# A task blocked for HUNG_SECS is a hang the test would only see at the
# guest's limit (its cleanup waiting on a device no server serves): the
# watchdog then prints, once, every mpio thread's kernel stack and the
# state of each io_uring it holds, every task blocked in the kernel, the
# processes, and the end of each daemon's log.
set --
while IFS= read -r argument; do
    [ -n "$argument" ] && set -- "$@" "$argument"
done < /kvm/args
export MPIO_BIN=/usr/local/bin/mpio RUST_BACKTRACE=1
# The host's settings for the tests (SOAK_SECS, SOAK_SEED), if any.
[ -f /kvm/env ] && . /kvm/env
HUNG_SECS=60

# Prints what a hang leaves to look at (see above).
dump_hang() {
    echo "--- a task hung: mpio's threads and rings ---"
    for comm in /proc/[0-9]*/comm; do
        [ "$(cat "$comm" 2>/dev/null)" = mpio ] || continue
        pid=${comm#/proc/}
        pid=${pid%/comm}
        echo "mpio $pid: $(tr '\0' ' ' < "/proc/$pid/cmdline")"
        for task in /proc/"$pid"/task/*; do
            echo "  thread ${task##*/} $(cat "$task/comm") $(cut -d' ' -f3 "$task/stat") wchan=$(cat "$task/wchan")"
            sed 's/^/    /' "$task/stack" 2>/dev/null
        done
        for fd in /proc/"$pid"/fd/*; do
            [ "$(readlink "$fd")" = "anon_inode:[io_uring]" ] || continue
            echo "  io_uring fd ${fd##*/}:"
            grep -v '^ *[0-9]*: \(<none>\|0x0000000000000000\)' \
                "/proc/$pid/fdinfo/${fd##*/}" | sed 's/^/    /' | head -n 80
        done
    done
    echo "--- tasks in uninterruptible sleep ---"
    for task in /proc/[0-9]*/task/[0-9]*; do
        [ "$(cut -d' ' -f3 "$task/stat" 2>/dev/null)" = D ] || continue
        echo "  task ${task##*/} $(cat "$task/comm")"
        sed 's/^/    /' "$task/stack" 2>/dev/null
    done
    echo "--- the processes ---"
    ps -o pid,ppid,stat,comm,args 2>/dev/null || ps
    # A glob, not find: find would stat into a hung file system.
    for log in /tmp/mpio-daemon-*/mpio*.log; do
        [ -f "$log" ] || continue
        echo "--- the end of $log ---"
        tail -n 40 "$log"
    done
    echo "--- the end of what the hang left ---"
}

echo "$HUNG_SECS" > /proc/sys/kernel/hung_task_timeout_secs
(
    until dmesg | grep -q 'blocked for more than'; do sleep 5; done
    dump_hang
) &
watchdog=$!

cd /tmp
mpio-kernel-tests --ignored --test-threads=1 "$@"
status=$?
kill "$watchdog" 2>/dev/null
if [ "$status" != 0 ]; then
    echo "--- the kernel's last messages ---"
    dmesg | tail -n 40
fi
exit "$status"
