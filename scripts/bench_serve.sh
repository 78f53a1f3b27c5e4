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
# ROUNDS rounds repeat it. Knobs (environment): RUNTIME seconds per run
# (10), ROUNDS (3), JOBS job counts ("1 <cores>").
set -euo pipefail
cd "$(dirname "$0")/.."

runtime=${RUNTIME:-10}
rounds=${ROUNDS:-3}
cores=$(nproc)
jobs=${JOBS:-"1 $cores"}
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
    mpio)
      "$mpio" serve --socket "$socket" \
        --table "0 $sectors multipath 0 0 1 1 round-robin 0 2 1 null:$size 1 null:$size 1" >/dev/null &
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

printf '%-6s %-9s %-5s %12s\n' round server jobs IOPS
for round in $(seq "$rounds"); do
  for numjobs in $jobs; do
    for server in mpio nbdkit qemu-nbd; do
      start "$server"
      # fio prints a line of its own to stdout: the JSON goes to a file.
      fio --name=serve --ioengine=nbd --uri="nbd+unix:///mpio?socket=$dir/s.sock" \
        --rw=randread --bs=4k --iodepth=32 --numjobs="$numjobs" --group_reporting \
        --time_based --runtime="$runtime" --size="$size" \
        --output-format=json --output="$dir/fio.json" >/dev/null
      iops=$(python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["jobs"][0]["read"]["iops"]))' "$dir/fio.json")
      stop_server
      printf '%-6s %-9s %-5s %12s\n' "$round" "$server" "$numjobs" "$iops"
    done
  done
done
