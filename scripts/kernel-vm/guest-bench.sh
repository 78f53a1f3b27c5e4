#!/bin/sh
# The kernel test VM's payload for scripts/kernel-bench.sh: the seed
# benchmark (fio libaio 4k random read, queue depth 32, one job per
# vCPU, O_DIRECT, unless bench.conf's RW, BS, IODEPTH and FIO_JOBS say
# other) against raw null_blk
# and each multipath stack over the same null_blk devices, in
# interleaved rounds. Every sample is printed
# as RESULT|<configuration>|<IOPS>|<vCPUs idle, %>; the host makes the
# table. With
# PROFILE=1 a last pass samples each configuration's fio run with perf
# and prints the reports as PROFILE|<configuration>|<line>.
#
# Configurations:
#   raw-nullb0               fio on /dev/nullb0
#   dm-mp-1p-<selector>      request-based dm-multipath (scheduler none), one path
#   dm-mp-2p-<selector>      the same over nullb0 and nullb1
#   dm-mp-bio-1p-<selector>  bio-based dm-multipath (queue_mode bio), one path
#   nvme-loop-1path          NVMe native multipath over nvmet's loop transport
#   nvme-loop-2p-<iopolicy>  two controllers to one namespace (numa, round-robin, queue-depth)
#   mpio-ublk-1p             mpio serve --ublk over file:/dev/nullb0: mpio's own block device
#                            (removed at the end of each run: the next one makes its own)
#   mpio-ublk-2p-<selector>  the same over nullb0 and nullb1
#   mpio-ublk-null           mpio serve --ublk over one null: path, which answers
#                            at once and moves no data: the device's ceiling,
#                            every cost of mpio's but the path's own I/O
#   mpio-nbd-1p              mpio serve over file:/dev/nullb0, attached by the kernel's nbd
#   mpio-nbd-2p-<selector>   the same over nullb0 and nullb1
#   ref-ublk                 another ublk server (kernel-bench.sh's REFERENCE) on
#                            /dev/ublkb9: the device's cost to any server
#   base-*                   each mpio-* configuration again with the binary
#                            kernel-bench.sh was given as MPIO_BASE, in the
#                            same round, after the mpio-* ones of its
#                            frontend
. /kvm/bench.conf
export DM_DISABLE_UDEV=1

result() { echo "RESULT|$1|$2|$3"; }   # result CONFIGURATION IOPS IDLE%
note() { echo "NOTE|$*"; }

# fio_iops DEVICE [SECONDS]: the IOPS of one timed run of RUNTIME
# seconds, or SECONDS (terse field 8: read IOPS).
fio_iops() {
    fio --name=bench --filename="$1" --rw="$RW" --bs="$BS" --ioengine=libaio \
        --iodepth="$IODEPTH" --numjobs="$FIO_JOBS" --direct=1 --time_based --runtime="${2:-$RUNTIME}" \
        --ramp_time=1 --group_reporting --output-format=terse 2>/tmp/fio.err |
        awk -F';' '$1 == "3" {print $8}'
}

# cpu_times: jiffies the vCPUs spent idle (idle and iowait), and in all.
cpu_times() { awk '$1 == "cpu" { print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat; }

# PROFILE=1's pass: measure profiles instead (profile_run).
PROFILING=
measure() {   # measure CONFIGURATION DEVICE
    if [ -n "$PROFILING" ]; then
        profile_run "$1" "$2"
        return
    fi
    # How much of fio's run (ramp included) the vCPUs sat idle: a stack
    # that waits on wake-ups leaves them so at any queue depth.
    cpu_before=$(cpu_times)
    iops=$(fio_iops "$2")
    idle=$(echo "$cpu_before $(cpu_times)" | awk '{ if ($4 > $2) printf "%.0f", 100 * ($3 - $1) / ($4 - $2) }')
    if [ -n "$iops" ]; then
        result "$1" "$iops" "$idle"
    else
        note "$1: fio failed: $(head -c 300 /tmp/fio.err)"
    fi
}

# profile_run CONFIGURATION DEVICE: while fio runs on DEVICE, perf
# samples every CPU (cpu-clock, a software event: TCG has no PMU) with
# kernel call chains for RUNTIME seconds, from after fio's ramp to
# before its end, so only the steady state is sampled. Then the reports,
# each line printed as PROFILE|<configuration>|<line>, with sample counts
# (a sample is 1/PROFILE_FREQ s of a CPU):
#   - samples per thread name and object, and per CPU and thread name
#     (which threads shared a CPU, and how long each CPU idled);
#   - the top symbols per thread name;
#   - for fio's threads and for mpio's I/O threads (mpio-ublk-N), the top
#     symbols summed over the threads as shares of their samples, with
#     their CPU time per I/O, and the symbols' inclusive shares (with
#     what they call);
#   - for each mpio-ublk-N, the kernel call chains to its symbols over 2 %.
# perf report's --comms is used only with comm among the sort keys: it
# filters merged entries, not samples, so with symbols alone a symbol
# first seen in one thread would count every thread's samples or none.
# User-space chains are not walked (neither fio nor mpio keeps frame
# pointers): a user symbol stands alone. fio's IOPS under perf are noted:
# what sampling costs, and the I/Os the samples are spread over.
profile_run() {
    name=$1
    rm -f /tmp/perf.data
    fio_iops "$2" $((RUNTIME + 3)) > /tmp/profile.iops &
    fio_pid=$!
    sleep 2
    # -N -B: no build-id cache or build-id pass (reading every sample
    # again after the run); the report resolves by path in this guest.
    perf record -a -g -e cpu-clock -F "$PROFILE_FREQ" -N -B -q -o /tmp/perf.data \
        -- sleep "$RUNTIME" 2> /tmp/perf.err
    wait "$fio_pid"
    profile_iops=$(cat /tmp/profile.iops)
    if [ -z "$profile_iops" ]; then
        note "$name: fio failed under perf: $(head -c 300 /tmp/fio.err)"
        return
    fi
    if [ ! -s /tmp/perf.data ]; then
        note "$name: perf recorded nothing: $(head -c 300 /tmp/perf.err)"
        return
    fi
    note "$name: under perf, fio made $profile_iops IOPS"
    profile_report -n --sort comm,sym -g none > /tmp/perf.symbols
    {
        echo "=== $name: ${RUNTIME} s at $PROFILE_FREQ Hz per CPU; fio made $profile_iops IOPS;" \
            "clocksource $(cat $clocksource/current_clocksource)"
        echo "=== $name: samples by thread name and object"
        profile_report -n --sort comm,dso -g none --percent-limit 0.3 | grep -v '^$'
        echo "=== $name: samples by CPU and thread name (swapper: idle)"
        profile_report -n --sort cpu,comm -g none --percent-limit 0.3 | grep -v '^$'
        echo "=== $name: top symbols by thread name ([k] kernel, [.] user)"
        head -n "$PROFILE_TOP" /tmp/perf.symbols
        for group in fio mpio-ublk; do
            profile_group "$group"
            profile_inclusive "$group"
        done
        for comm in $(awk '$3 ~ /^mpio-ublk/ {print $3}' /tmp/perf.symbols | sort -u); do
            echo "=== $name: callers of $comm's symbols over 2 % of its samples" \
                "(callee first; a branch's share is of its parent's, branches over 5 %)"
            profile_report --comms "$comm" --percentage relative --sort comm,sym \
                -g fractal,5,callee --percent-limit 2 --max-stack 12 | grep -v '^$' | head -n 300
        done
    } 2>&1 | sed "s/^/PROFILE|$name|/"
    rm -f /tmp/perf.data /tmp/perf.symbols
}
profile_report() {   # profile_report OPTION...: perf report on /tmp/perf.data, plain text
    perf report -i /tmp/perf.data --stdio --no-children -q "$@" 2>/dev/null
}
# profile_inclusive PREFIX: the same threads' symbols with what they
# call (perf's children): which kernel paths the samples fall under.
profile_inclusive() {
    list=$(awk -v prefix="$1" 'index($3, prefix) == 1 {print $3}' /tmp/perf.symbols | sort -u |
        tr '\n' ',' | sed 's/,$//')
    [ -n "$list" ] || return 0
    echo "=== inclusive shares (with callees) of $list's samples"
    # Lines of inclusive share, own share, own samples, thread name (left
    # out, under a "# comm:" heading, when one thread is filtered), [k]
    # or [.], symbol; shares relative to the filtered threads', so summed
    # over the threads. Bare addresses are left out: frames of a user
    # stack walked without frame pointers, not callers.
    profile_report --children -n --comms "$list" --percentage relative --sort comm,sym -g none |
        awk '/^#/ { next }
            {
                share = $1 + 0
                for (field = 1; field <= NF && $field != "[k]" && $field != "[.]"; field++) $field = ""
                sub(/^ +/, "")
                if ($0 != "" && $2 !~ /^0x/) shares[$0] += share
            }
            END { for (symbol in shares) printf "%8.2f%%  %s\n", shares[symbol], symbol }' |
        sort -rn | head -n "$PROFILE_TOP"
}
# profile_group PREFIX: the symbols of the threads whose names begin
# with PREFIX, their samples summed from /tmp/perf.symbols (lines of
# share, samples, thread name, [k] or [.], symbol, which may hold
# spaces), as shares of those threads' samples; the heading gives their
# CPU time per I/O fio made while perf sampled.
profile_group() {
    awk -v prefix="$1" -v ios="$((profile_iops * RUNTIME))" -v frequency="$PROFILE_FREQ" '
        index($3, prefix) == 1 {
            comms[$3] = 1
            count = $2; $1 = $2 = $3 = ""; sub(/^ +/, "")
            samples[$0] += count; total += count
        }
        END {
            if (!total) exit
            for (comm in comms) list = list (list ? "," : "") comm
            printf "=== top symbols of %s: %d samples (%s us of CPU per I/O), as shares of them\n", list, total,
                ios ? sprintf("%.1f", total * 1000000 / frequency / ios) : "?"
            for (symbol in samples) printf "%8.2f%% %8d  %s\n", 100 * samples[symbol] / total, samples[symbol], symbol
        }' /tmp/perf.symbols | {
        # The heading, then the symbols by share.
        IFS= read -r heading && echo "$heading" && sort -rn | head -n "$PROFILE_TOP"
    }
}

# NULLB_COMPLETION_NS: a completion latency (timer interrupt) instead of
# the softirq completion at once.
if [ "${NULLB_COMPLETION_NS:-0}" -gt 0 ]; then
    completion="irqmode=2 completion_nsec=$NULLB_COMPLETION_NS"
else
    completion="irqmode=1 completion_nsec=1"
fi
# shellcheck disable=SC2086 # $completion is two parameters
modprobe null_blk nr_devices=2 gb=4 bs=512 hw_queue_depth=4096 queue_mode=2 \
    $completion submit_queues="$JOBS"
sectors=$(cat /sys/block/nullb0/size)
modprobe dm-multipath
for selector in round-robin queue-length service-time; do modprobe "dm-$selector"; done
modprobe nvmet && modprobe nvme-loop
modprobe nbd nbds_max=4
modprobe ublk_drv
# mpio's sockets: a directory only root may write (mpio refuses a control
# socket where others could plant their own).
mkdir -p -m 0700 /tmp/mpio
# perf, for PROFILE=1: kernel addresses resolved (/proc/kallsyms shows
# them only with kptr_restrict 0) and every event open to it. The note
# names the string-copy features the kernel picks its copies by (rep
# movsb inline with fsrm, rep_movs_alternative without): the TCG of
# QEMU 7.2, the harness's, emulates a rep movsb a byte at a time, so the
# choice weighs in a profile as it would not on hardware.
# The clocksource weighs too: on the HPET every clock_gettime is a
# system call and an emulated device read. The guest boots with
# tsc=reliable to stay on the TSC (host.sh); each profile's heading
# names the one in use, and the kernel's messages on the clocksources
# and the TSC end the pass.
clocksource=/sys/devices/system/clocksource/clocksource0
if [ "${PROFILE:-0}" = 1 ]; then
    echo 0 > /proc/sys/kernel/kptr_restrict
    echo -1 > /proc/sys/kernel/perf_event_paranoid
    note "guest CPU $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1);" \
        "copy features: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(erms|fsrm|fzrm|fsrs|fsrc)$' | tr '\n' ' ')"
fi

# dm-multipath: each selector's per-path arguments, counted (repeat_count,
# and service-time's relative_throughput).
dm_path_args() { case $1 in service-time) echo "2 1 1" ;; *) echo "1 1" ;; esac; }
dm_table() {   # dm_table FEATURES SELECTOR DEVICE...
    features=$1 selector=$2; shift 2
    args=$(dm_path_args "$selector")
    paths=""
    for device in "$@"; do paths="$paths $device ${args#* }"; done
    echo "0 $sectors multipath $features 0 1 1 $selector 0 $# ${args%% *}$paths"
}
dm_run() {     # dm_run CONFIGURATION FEATURES SELECTOR DEVICE...
    name=$1; shift
    dmsetup create bench --table "$(dm_table "$@")" || { note "$name: dmsetup failed"; return; }
    dm=$(basename "$(readlink -f /dev/mapper/bench)")
    # Request-based dm gets mq-deadline by default; the seed ran without.
    [ -w "/sys/block/$dm/queue/scheduler" ] && echo none > "/sys/block/$dm/queue/scheduler" 2>/dev/null
    measure "$name" /dev/mapper/bench
    dmsetup remove bench
}

nvmet=/sys/kernel/config/nvmet
nvme_setup() {   # nvme_setup PORTS: one subsystem over nullb0, PORTS loop ports, connected
    mkdir -p $nvmet/subsystems/bench/namespaces/1
    echo 1 > $nvmet/subsystems/bench/attr_allow_any_host
    echo -n /dev/nullb0 > $nvmet/subsystems/bench/namespaces/1/device_path
    echo 1 > $nvmet/subsystems/bench/namespaces/1/enable
    port=1
    while [ $port -le "$1" ]; do
        mkdir -p $nvmet/ports/$port
        echo loop > $nvmet/ports/$port/addr_trtype
        echo $port > $nvmet/ports/$port/addr_traddr
        ln -s $nvmet/subsystems/bench $nvmet/ports/$port/subsystems/bench
        echo "transport=loop,traddr=$port,nqn=bench" > /dev/nvme-fabrics
        port=$((port + 1))
    done
    for _ in $(seq 50); do [ -b /dev/nvme0n1 ] && break; sleep 0.1; done
}
nvme_teardown() {
    for controller in /sys/class/nvme/nvme*; do echo 1 > "$controller/delete_controller"; done
    for link in $nvmet/ports/*/subsystems/bench; do rm "$link"; done
    rmdir $nvmet/ports/* 2>/dev/null
    echo 0 > $nvmet/subsystems/bench/namespaces/1/enable
    rmdir $nvmet/subsystems/bench/namespaces/1 $nvmet/subsystems/bench
}
nvme_run() {     # nvme_run CONFIGURATION PORTS [IOPOLICY]
    nvme_setup "$2"
    [ -n "${3:-}" ] && echo "$3" > /sys/class/nvme-subsystem/nvme-subsys0/iopolicy
    measure "$1" /dev/nvme0n1
    nvme_teardown
}

# mpio: `mpio serve` over file: paths on the null_blk devices.
mpio_table() {   # mpio_table SELECTOR DEVICE...: a device /dev/X is file:/dev/X
    selector=$1; shift
    paths=""
    for device in "$@"; do
        case $device in /*) paths="$paths file:$device 1" ;; *) paths="$paths $device 1" ;; esac
    done
    echo "0 $sectors multipath 0 0 1 1 $selector 0 $# 1$paths"
}
# server_counters PID DEVICE: reads DEVICE (ublkbN) completed, then the
# context switches and CPU time (clock ticks of 10 ms) of all of PID's
# threads.
server_counters() {
    ios=$(awk '{print $1}' "/sys/block/$2/stat")
    switches=0 user=0 system=0
    for task in /proc/"$1"/task/*; do
        switches=$((switches + $(awk '/ctxt_switches/ {sum += $2} END {print sum}' "$task/status")))
        user=$((user + $(awk '{print $14}' "$task/stat")))
        system=$((system + $(awk '{print $15}' "$task/stat")))
    done
    echo "$ios $switches $user $system"
}
# measure_server CONFIGURATION PID DEVICE: measure, and note what the
# server PID's threads took per I/O of DEVICE (ublkbN). Sets $ios.
measure_server() {
    before=$(server_counters "$2" "$3")
    measure "$1" "/dev/$3"
    after=$(server_counters "$2" "$3")
    ios=$(echo "$before $after" | awk '{print $5 - $1}')
    echo "$before $after" | awk -v name="$1${PROFILING:+ under perf}" -v ios="$ios" '{
        if (ios > 0) printf "NOTE|%s: per I/O, the server took %.2f context switches and %.1f us of CPU (%.1f user, %.1f kernel)\n",
            name, ($6 - $2) / ios, ($7 + $8 - $3 - $4) * 10000 / ios, ($7 - $3) * 10000 / ios, ($8 - $4) * 10000 / ios }'
}
# stop_server PID: SIGTERM, and SIGKILL if it has not ended 30 s on, so
# a server that ignores the first cannot hold the guest.
stop_server() {
    kill "$1" 2>/dev/null
    for _ in $(seq 300); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$1" 2>/dev/null; then
        note "server $1 still ran 30 s after SIGTERM: killed"
        kill -9 "$1" 2>/dev/null
    fi
    wait "$1" 2>/dev/null
}
# Its own block device: a ublk queue per vCPU, fio on /dev/ublkbN.
mpio_ublk_run() {   # mpio_ublk_run PROGRAM CONFIGURATION SELECTOR DEVICE...
    program=$1 name=$2; shift 2
    "$program" serve --table "$(mpio_table "$@")" --ublk 0 --ublk-on-stop remove \
        --control /tmp/mpio/control.sock --log-level info > /tmp/mpio.out 2>&1 &
    pid=$!
    for _ in $(seq 100); do [ -b /dev/ublkb0 ] && break; sleep 0.1; done
    ios=
    if [ -b /dev/ublkb0 ]; then
        measure_server "$name" "$pid" ublkb0
    else
        note "$name: no /dev/ublkb0: $(cat /tmp/mpio.out)"
    fi
    stop_server "$pid"
    # Each I/O thread logs its turns as it ends (the whole run, ramp
    # included): wake-ups per I/O, and how many they served at once.
    grep -a 'ublk thread ended' /tmp/mpio.out | awk -v name="$name${PROFILING:+ under perf}" -v ios="${ios:-0}" '
        { for (i = 1; i <= NF; i++) { split($i, pair, "="); if (pair[2] != "") sum[pair[1]] += pair[2] } }
        END {
            turns = sum["idle"] + sum["rests"] + sum["ready"] + sum["spins"] + sum["busy_waits"]
            if (ios > 0 && turns > 0)
                printf "NOTE|%s: per measured I/O, the threads took %.2f turns (%.2f spinning, %.2f waiting 100 us, %.2f resting on the ring, %.2f at once with work waiting, %.2f idle), %.1f commands per turn\n",
                    name, turns / ios, sum["spins"] / ios, sum["busy_waits"] / ios, sum["rests"] / ios, sum["ready"] / ios, sum["idle"] / ios, sum["commands"] / turns }'
}
# Over NBD: the map on a unix socket, attached as /dev/nbd0 with a
# connection per job (the server spreads connections over its event
# loops, one per vCPU).
mpio_nbd_run() {    # mpio_nbd_run PROGRAM CONFIGURATION SELECTOR DEVICE...
    program=$1 name=$2; shift 2
    "$program" serve --table "$(mpio_table "$@")" --socket /tmp/mpio/bench.sock --control /tmp/mpio/control.sock \
        --log-level warn > /tmp/mpio.out 2>&1 &
    pid=$!
    for _ in $(seq 100); do [ -S /tmp/mpio/bench.sock ] && break; sleep 0.1; done
    if nbd-client -N mpio -C "$JOBS" -u /tmp/mpio/bench.sock /dev/nbd0 > /tmp/nbd.out 2>&1; then
        echo none > /sys/block/nbd0/queue/scheduler 2>/dev/null
        measure "$name" /dev/nbd0
        nbd-client -d /dev/nbd0 > /dev/null 2>&1
    else
        note "$name: nbd-client failed: $(cat /tmp/nbd.out)"
    fi
    stop_server "$pid"
}

# ref_ublk_run: the reference server's device, /dev/ublkb9.
ref_ublk_run() {
    # Its arguments as kernel-bench.sh was given them: split, not globbed.
    set -f
    # A device an earlier run left would pass for the new server's.
    # shellcheck disable=SC2086
    [ -b /dev/ublkb9 ] && ublk-reference $REFERENCE_DEL > /dev/null 2>&1
    # shellcheck disable=SC2086
    ublk-reference $REFERENCE_ADD > /tmp/reference.out 2>&1 &
    pid=$!
    set +f
    for _ in $(seq 100); do [ -b /dev/ublkb9 ] && break; sleep 0.1; done
    if [ -b /dev/ublkb9 ] && kill -0 "$pid" 2>/dev/null; then
        measure_server ref-ublk "$pid" ublkb9
    else
        note "ref-ublk: no /dev/ublkb9 served: $(head -c 300 /tmp/reference.out)"
    fi
    stop_server "$pid"
    set -f
    # shellcheck disable=SC2086
    if [ -b /dev/ublkb9 ] && ! ublk-reference $REFERENCE_DEL > /dev/null 2>&1; then
        note "ref-ublk: could not remove /dev/ublkb9"
    fi
    set +f
}

wanted() {       # wanted CONFIGURATION: does it match a pattern of $CONFIGS?
    set -f           # the patterns are for configurations, not files
    for pattern in $CONFIGS; do
        case $1 in $pattern) set +f; return 0 ;; esac
    done
    set +f
    return 1
}

# Unrecorded warm-up: TCG translates each new code path on first use.
fio_iops /dev/nullb0 > /dev/null

# Every wanted configuration once, in a round's order.
run_configurations() {
    wanted raw-nullb0 && measure raw-nullb0 /dev/nullb0
    for selector in service-time queue-length round-robin; do
        wanted "dm-mp-1p-$selector" && dm_run "dm-mp-1p-$selector" 0 "$selector" /dev/nullb0
        wanted "dm-mp-2p-$selector" && dm_run "dm-mp-2p-$selector" 0 "$selector" /dev/nullb0 /dev/nullb1
        wanted "dm-mp-bio-1p-$selector" && dm_run "dm-mp-bio-1p-$selector" "2 queue_mode bio" "$selector" /dev/nullb0
    done
    wanted nvme-loop-1path && nvme_run nvme-loop-1path 1
    for policy in numa round-robin queue-depth; do
        wanted "nvme-loop-2p-$policy" && nvme_run "nvme-loop-2p-$policy" 2 "$policy"
    done
    [ -n "$REFERENCE_ADD" ] && wanted ref-ublk && ref_ublk_run
    for frontend in ublk nbd; do
        for program in $PROGRAMS; do
            case $program in mpio) prefix=mpio ;; *) prefix=base ;; esac
            wanted "$prefix-$frontend-1p" &&
                "mpio_${frontend}_run" "$program" "$prefix-$frontend-1p" round-robin /dev/nullb0
            wanted "$prefix-$frontend-null" &&
                "mpio_${frontend}_run" "$program" "$prefix-$frontend-null" round-robin "null:$((sectors * 512))"
            for selector in $MPIO_SELECTORS; do
                wanted "$prefix-$frontend-2p-$selector" &&
                    "mpio_${frontend}_run" "$program" "$prefix-$frontend-2p-$selector" "$selector" /dev/nullb0 /dev/nullb1
            done
        done
    done
}

round=1
while [ $round -le "$ROUNDS" ]; do
    note "round $round of $ROUNDS"
    run_configurations
    round=$((round + 1))
done
if [ "${PROFILE:-0}" = 1 ]; then
    note "round profile: each configuration once more, under perf"
    PROFILING=1
    run_configurations
    dmesg | grep -i -E 'clocksource|tsc' | while IFS= read -r line; do note "kernel: $line"; done
fi
# A configuration that failed said so in a NOTE; the run itself succeeded.
exit 0
