#!/usr/bin/env bash
# The nbd transport's benchmarks, recorded in docs/BENCHMARKS.md ("NBD
# paths over nbdkit"):
#  1. bandwidth: two paths to `nbdkit memory`, each server limited by
#     --filter=rate, against one such path, with round-robin, queue-length
#     and service-time;
#  2. one slow path (--filter=delay) and one fast path: each selector
#     against round-robin.
# Every run gets freshly started servers (so each rate filter starts with
# the same full bucket: its 2 s burst inflates one path and two paths
# alike), listening on unix sockets in a temporary directory, stopped
# after the run. Knobs (environment): RUNTIME seconds per run (20), RATE
# per server in bits/s (200M), DELAY of the slow path's reads (2ms).
set -euo pipefail
cd "$(dirname "$0")/.."

runtime=${RUNTIME:-20}
rate=${RATE:-200M}
delay=${DELAY:-2ms}
size_mib=256
sectors=$((size_mib * 2048))

cargo build --release -p mpio --locked --quiet
mpio=$PWD/target/release/mpio
dir=$(mktemp -d)
pids=()
stop_servers() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
  rm -f "$dir"/*.sock
}
trap 'stop_servers; rm -rf "$dir"' EXIT

# serve NAME NBDKIT-ARGS...: starts nbdkit on $dir/NAME.sock, waits (10 s
# at most) for its socket.
serve() {
  local name=$1
  shift
  nbdkit --foreground --unix "$dir/$name.sock" "$@" &
  pids+=($!)
  for _ in $(seq 100); do
    [[ -S $dir/$name.sock ]] && return
    sleep 0.1
  done
  echo "nbdkit $name did not start" >&2
  exit 1
}

word() { echo "nbd+unix:///?socket=$dir/$1.sock"; }

# table SELECTOR NAME...: a one-group map over the named servers.
table() {
  local selector=$1
  shift
  local text="0 $sectors multipath 0 0 1 1 $selector 0 $# 0"
  for name in "$@"; do text+=" $(word "$name")"; done
  echo "$text"
}

# field NAME JSON: the first number named NAME in JSON (the run's own
# fields come before its per-path list).
field() { grep -o "\"$1\":[0-9.e+-]*" <<<"$2" | head -1 | cut -d: -f2; }

# run LABEL TABLE BENCH-ARGS...: one run; prints IOPS, bandwidth, p50,
# p99 and each path's share of the I/O.
run() {
  local label=$1 table=$2
  shift 2
  local json
  json=$("$mpio" bench --table "$table" --json --quiet --runtime "$runtime" "$@")
  local ios shares
  ios=$(field ios "$json")
  shares=$(grep -o '"ios":[0-9]*,"path"' <<<"$json" | sed 's/[^0-9]//g' |
    awk -v total="$ios" '{ printf "%s%.1f%%", (NR > 1 ? " / " : ""), 100 * $1 / total }')
  printf '%-36s %10.0f %10.2f %10.1f %10.1f   %s\n' "$label" \
    "$(field iops "$json")" \
    "$(awk -v bw="$(field bandwidth_bytes_per_s "$json")" 'BEGIN { print bw / 1048576 }')" \
    "$(awk -v ns="$(field p50 "$json")" 'BEGIN { print ns / 1000 }')" \
    "$(awk -v ns="$(field p99 "$json")" 'BEGIN { print ns / 1000 }')" \
    "$shares"
}

header() {
  printf '\n%s\n' "$1"
  printf '%-36s %10s %10s %10s %10s   %s\n' run IOPS MiB/s "p50 µs" "p99 µs" "I/O per path"
}

echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  cpus: $(nproc)  commit: $(git rev-parse --short HEAD)"
echo "runtime ${runtime}s per run; rate $rate bit/s per server; slow path delay $delay"

rated() {
  for name in "$@"; do serve "$name" --filter=rate memory "${size_mib}M" "rate=$rate"; done
}

header "1. bandwidth, randread bs=256K iodepth=32, each server limited to $rate bit/s"
rated rate1
run "1 path, round-robin" "$(table round-robin rate1)" --rw randread --bs 256K --iodepth 32
stop_servers
for selector in round-robin queue-length service-time; do
  rated rate1 rate2
  run "2 paths, $selector" "$(table "$selector" rate1 rate2)" --rw randread --bs 256K --iodepth 32
  stop_servers
done

header "2. slow ($delay reads) + fast path, randread bs=4K iodepth=32"
for selector in round-robin queue-length service-time historical-service-time; do
  serve slow --filter=delay memory "${size_mib}M" "rdelay=$delay"
  serve fast memory "${size_mib}M"
  run "slow + fast, $selector" "$(table "$selector" slow fast)" --rw randread --bs 4K --iodepth 32
  stop_servers
done
