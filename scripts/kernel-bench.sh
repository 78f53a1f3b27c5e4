#!/usr/bin/env bash
# The seed benchmark in the kernel test VM (docs/TESTING.md): fio libaio
# 4k random read, queue depth 32, one job per vCPU, on raw null_blk,
# request-based and bio-based dm-multipath, NVMe native multipath over
# nvme-loop, and mpio serving the same null_blk devices as its own ublk
# block device and through the kernel's nbd client, in interleaved
# rounds. Prints each configuration's median IOPS, its ratio to raw
# null_blk's median and the median share of fio's runs the vCPUs sat
# idle: the table docs/BENCHMARKS.md records.
#
# Settings (environment), beside scripts/kernel-vm/host.sh's (among
# them MPIO_KERNEL=6.12 | newest, the kernel the guest boots [6.12]):
#   ROUNDS=3        interleaved rounds (one sample per configuration each)
#   RUNTIME=5       seconds per sample (after 1 s of ramp)
#   CONFIGS='*'     configurations to run, as shell patterns
#   MPIO_SELECTORS='round-robin queue-length service-time'  mpio's two-path runs
#   NULLB_COMPLETION_NS=0   null_blk completes at once; N > 0: after N ns
#   RW=randread     fio's --rw (read: sequential)
#   BS=4k           fio's --bs (64k with RW=read: the large-request run)
#   IODEPTH=32      fio's queue depth per job
#   NUMJOBS=<vCPUs> fio jobs (IODEPTH=1 NUMJOBS=1: one request at a time,
#                   so IOPS = 1 / latency)
#   MPIO_BASE=      another mpio binary (e.g. a release build of an older
#                   commit): every mpio-* configuration runs again with it,
#                   as base-*, in the same round, so the two compare in
#                   one run
#   REFERENCE=      another ublk server's binary (e.g. an example server
#                   of a ublk library), run as ref-ublk in each round: what
#                   a ublk device costs whoever serves it. REFERENCE_ADD
#                   are its arguments to make /dev/ublkb9 and serve it in
#                   the foreground until SIGTERM, REFERENCE_DEL those that
#                   remove the device after
#   PROFILE=0       1: after the rounds, one more pass over the same
#                   configurations in which each fio run is sampled with
#                   perf (cpu-clock, every CPU, kernel call chains) and
#                   reported per thread and symbol; the reports go to
#                   $KVM_CACHE/logs/profile-*.txt. The image then carries
#                   perf (an image of its own: the usual one is kept)
#   PROFILE_FREQ=1000  samples per second per CPU
#   PROFILE_TOP=40  symbols listed per table
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/kernel-vm/host.sh

if [ -n "${REFERENCE:-}" ]; then
    if [ -z "${REFERENCE_ADD:-}" ] || [ -z "${REFERENCE_DEL:-}" ]; then
        kvm_log "REFERENCE needs REFERENCE_ADD and REFERENCE_DEL (docs/TESTING.md)"
        exit 2
    fi
    # bench.conf holds them in single quotes.
    case $REFERENCE_ADD$REFERENCE_DEL in
        *"'"*) kvm_log "REFERENCE_ADD and REFERENCE_DEL may not hold a quote"; exit 2 ;;
    esac
fi
profile=${PROFILE:-0}
[ "$profile" = 1 ] && KVM_TOOLS="$KVM_TOOLS perf"
kvm_install_host_packages
cargo build --release -p mpio --locked --quiet
kvm_prepare
overlay=$(mktemp -d)
trap 'rm -rf "$overlay"' EXIT
kvm_add_binary "$overlay" target/release/mpio mpio
programs=mpio
if [ -n "${MPIO_BASE:-}" ]; then
    kvm_add_binary "$overlay" "$MPIO_BASE" mpio-base
    programs="mpio mpio-base"
fi
if [ -n "${REFERENCE:-}" ]; then
    kvm_add_binary "$overlay" "$REFERENCE" ublk-reference
fi
install -D -m 755 scripts/kernel-vm/guest-bench.sh "$overlay/kvm/run"
cat > "$overlay/kvm/bench.conf" <<CONF
JOBS=$KVM_CPUS
FIO_JOBS=${NUMJOBS:-$KVM_CPUS}
RW=${RW:-randread}
BS=${BS:-4k}
IODEPTH=${IODEPTH:-32}
ROUNDS=${ROUNDS:-3}
RUNTIME=${RUNTIME:-5}
CONFIGS='${CONFIGS:-*}'
MPIO_SELECTORS='${MPIO_SELECTORS:-round-robin queue-length service-time}'
NULLB_COMPLETION_NS=${NULLB_COMPLETION_NS:-0}
PROGRAMS='$programs'
REFERENCE_ADD='${REFERENCE:+$REFERENCE_ADD}'
REFERENCE_DEL='${REFERENCE:+$REFERENCE_DEL}'
PROFILE=$profile
PROFILE_FREQ=${PROFILE_FREQ:-1000}
PROFILE_TOP=${PROFILE_TOP:-40}
CONF
mkdir -p "$KVM_CACHE/logs"
run=$KVM_KVER-$(date +%Y%m%d-%H%M%S)-$$
log=$KVM_CACHE/logs/bench-$run.log
status=0
# The host's own CPU time, and what its hypervisor took from it (steal):
# a machine that is itself a guest may lend the benchmark less than its
# CPUs, unevenly across rounds.
host_times() { awk '$1 == "cpu" { print $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat; }
host_before=$(host_times)
kvm_boot "$overlay" "${MPIO_KVM_TIMEOUT:-5400}" "$log" > /dev/null || status=$?
steal=$(echo "$host_before $(host_times)" | awk '{ if ($4 > $2) printf "%.1f", 100 * ($3 - $1) / ($4 - $2) }')

echo
echo "kernel $KVM_KERNEL_LABEL under $(kvm_accel), $KVM_CPUS vCPUs, $KVM_MEM; host $(nproc) CPUs; $(date -u +%Y-%m-%d)"
[ -n "$steal" ] && echo "host steal: ${steal}% of its CPU time over the run (its hypervisor's share; above a few percent, rounds differ by it)"
echo "fio ${RW:-randread} ${BS:-4k} libaio iodepth=${IODEPTH:-32} numjobs=${NUMJOBS:-$KVM_CPUS} direct=1, ${RUNTIME:-5} s per sample, ${ROUNDS:-3} interleaved rounds"
[ "${NULLB_COMPLETION_NS:-0}" -gt 0 ] && echo "null_blk completes each I/O after ${NULLB_COMPLETION_NS} ns (timer)"
[ "$(kvm_accel)" = tcg ] && echo "TCG emulation: absolute IOPS mean nothing; compare only ratios measured in this run."
echo
grep -a '^RESULT|' "$log" | awk -F'|' '
    { if (!($2 in samples)) order[++n] = $2; samples[$2] = samples[$2] (samples[$2] ? "," : "") $3 }
    $4 != "" { idle[$2] = idle[$2] (idle[$2] ? "," : "") $4 }
    function median(list,   values, count, i, j, swap) {
        count = split(list, values, ",")
        for (i = 1; i <= count; i++) for (j = i + 1; j <= count; j++)
            if (values[j] + 0 < values[i] + 0) { swap = values[i]; values[i] = values[j]; values[j] = swap }
        return count % 2 ? values[(count + 1) / 2] : (values[count / 2] + values[count / 2 + 1]) / 2
    }
    END {
        raw = ("raw-nullb0" in samples) ? median(samples["raw-nullb0"]) : 0
        printf "%-28s %10s %8s %6s  %s\n", "configuration", "IOPS", "vs raw", "idle", "samples"
        for (i = 1; i <= n; i++) {
            m = median(samples[order[i]])
            printf "%-28s %10d %8s %6s  %s\n", order[i], m, raw ? sprintf("%.3f", m / raw) : "-",
                (order[i] in idle) ? median(idle[order[i]]) "%" : "-", samples[order[i]]
        }
    }'
grep -a '^NOTE|' "$log" | grep -v '|round ' | sed 's/^NOTE|/note: /' || true
if [ "$profile" = 1 ]; then
    # The guest prints each report line as PROFILE|<configuration>|<line>.
    report=$KVM_CACHE/logs/profile-$run.txt
    grep -a '^PROFILE|' "$log" | cut -d'|' -f2- > "$report" || true
    echo "profiles: $report"
fi
echo "console log: $log"
exit "$status"
