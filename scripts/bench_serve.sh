#!/usr/bin/env bash
# `mpio serve` against nbdkit and qemu-nbd, recorded in docs/BENCHMARKS.md
# ("NBD server"): fio's nbd engine, 4k random reads at iodepth 32, with
# numjobs=1 and numjobs=<cores>, against
#   - mpio serve over a map of two null paths (round-robin),
#   - nbdkit null,
#   - qemu-nbd --image-opts driver=null-co (--persistent: fio connects
#     more than once),
# all on unix sockets in a temporary directory, servers started before
# and killed after each run. One round runs every server at every job
# count in turn (interleaved, so a noisy neighbour hits all alike);
# ROUNDS rounds repeat it. Besides IOPS, each run reports the server's
# CPU time per I/O (user + system, from /proc/PID/stat over the run):
# unlike IOPS it hardly moves when other work shares the machine. Knobs
# (environment): RUNTIME seconds per run (10), ROUNDS (3), JOBS job
# counts ("1 <cores>"), SERVERS ("mpio nbdkit qemu-nbd"; `mpio-nospin` is
# mpio serve with --idle-spin-us 0).
set -euo pipefail
cd "$(dirname "$0")/.."

runtime=${RUNTIME:-10}
rounds=${ROUNDS:-3}
cores=$(nproc)
jobs=${JOBS:-"1 $cores"}
servers=${SERVERS:-"mpio nbdkit qemu-nbd"}
size=1G
sectors=$((1024 * 2048))

cargo build --release -p mpio --locked --quiet
mpio=$PWD/target/release/mpio
dir=$(mktemp -d)
pid=
stop_server() {
  if [[ -n $pid ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  pid=
  rm -f "$dir"/*.sock
}
trap 'stop_server; rm -rf "$dir"' EXIT

# start NAME: starts server NAME on $dir/s.sock; waits (10 s at most).
start() {
  local socket=$dir/s.sock
  case $1 in
    mpio | mpio-nospin)
      local spin=25
      [[ $1 == mpio-nospin ]] && spin=0
      "$mpio" serve --socket "$socket" --idle-spin-us "$spin" \
        --table "0 $sectors multipath 0 0 1 1 round-robin 0 2 1 null:$size#1 1 null:$size#2 1" >/dev/null &
      ;;
    nbdkit) nbdkit --foreground --unix "$socket" --exportname mpio null "$size" & ;;
    qemu-nbd)
      qemu-nbd --socket "$socket" --export-name mpio --shared=16 --persistent \
        --image-opts "driver=null-co,size=$size" &
      ;;
  esac
  pid=$!
  for _ in $(seq 100); do
    [[ -S $socket ]] && return 0
    sleep 0.1
  done
  echo "$1 did not start" >&2
  exit 1
}

# cpu_ticks PID: user + system clock ticks the process used so far.
cpu_ticks() {
  awk '{ print $14 + $15 }' "/proc/$1/stat"
}
ticks_per_second=$(getconf CLK_TCK)

printf '%-6s %-9s %-5s %12s %14s\n' round server jobs IOPS 'server-ns/IO'
for round in $(seq "$rounds"); do
  for numjobs in $jobs; do
    for server in $servers; do
      start "$server"
      ticks_before=$(cpu_ticks "$pid")
      # fio prints a line of its own to stdout: the JSON goes to a file.
      fio --name=serve --ioengine=nbd --uri="nbd+unix:///mpio?socket=$dir/s.sock" \
        --rw=randread --bs=4k --iodepth=32 --numjobs="$numjobs" --group_reporting \
        --time_based --runtime="$runtime" --size="$size" \
        --output-format=json --output="$dir/fio.json" >/dev/null
      ticks=$(($(cpu_ticks "$pid") - ticks_before))
      read -r iops ios < <(python3 -c 'import json,sys; r = json.load(open(sys.argv[1]))["jobs"][0]["read"]; print(int(r["iops"]), r["total_ios"])' "$dir/fio.json")
      stop_server
      ns_per_io=$((ticks * 1000000000 / ticks_per_second / ios))
      printf '%-6s %-9s %-5s %12s %14s\n' "$round" "$server" "$numjobs" "$iops" "$ns_per_io"
    done
  done
done
