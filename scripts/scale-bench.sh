#!/usr/bin/env bash
# The daemon at scale: one `mpio serve` with MAPS maps of PATHS null
# paths each, every map exported on its own unix socket, against the bar
# of at most CPUs + 8 threads, under 1 % of a core idle, and each command
# well under a second.
# Reports the daemon's threads, resident memory (per map and per path,
# against a one-map daemon of the same shape), idle CPU between checker
# rounds, how long it takes to start, and how long `mpio status`,
# `mpio show paths --json` and a reload of one map take.
#
# Settings (environment):
#   MAPS=1000  PATHS=4  EXPORTS=1 (0: no NBD export)  INTERVAL_MS=5000 (checker)
#   IDLE_SECONDS=10  how long idle CPU is measured
set -euo pipefail
cd "$(dirname "$0")/.."

MAPS=${MAPS:-1000}
PATHS=${PATHS:-4}
EXPORTS=${EXPORTS:-1}
INTERVAL_MS=${INTERVAL_MS:-5000}
IDLE_SECONDS=${IDLE_SECONDS:-10}

cargo build --release -p mpio --locked --quiet
mpio=$PWD/target/release/mpio
dir=$(mktemp -d /tmp/mpio-scale.XXXXXX)
chmod 700 "$dir"
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2> /dev/null && wait "$pid" 2> /dev/null
    rm -rf "$dir"
}
trap cleanup EXIT

config() {    # config MAPS: a config of MAPS maps on stdout
    echo "control_socket = \"$dir/control.sock\""
    echo "[defaults]"
    echo "checker_interval_ms = $INTERVAL_MS"
    for ((map = 0; map < $1; map++)); do
        echo "[[map]]"
        echo "name = \"map$map\""
        echo "size = \"1G\""
        for ((path = 0; path < PATHS; path++)); do
            echo "[[map.path]]"
            echo "name = \"p$path\""
            echo "uri = \"null:1G#$path\""
        done
        if [ "$EXPORTS" = 1 ]; then
            echo "[[map.export]]"
            echo "socket = \"$dir/map$map.sock\""
        fi
    done
}

ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

# start MAPS: starts the daemon; sets start_ms, the milliseconds until it
# answers.
start() {
    config "$1" > "$dir/mpio.toml"
    local begin
    begin=$(date +%s%N)
    "$mpio" serve --config "$dir/mpio.toml" --log-level warn > "$dir/serve.out" 2>&1 &
    pid=$!
    until "$mpio" status --control "$dir/control.sock" > /dev/null 2>&1; do
        kill -0 "$pid" 2> /dev/null || { cat "$dir/serve.out" >&2; exit 1; }
        sleep 0.05
    done
    start_ms=$(ms_since "$begin")
}

stop() {
    kill "$pid"
    wait "$pid" 2> /dev/null || true
    pid=
}

status_field() { awk -v key="$1:" '$1 == key { print $2 }' "/proc/$pid/status"; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }

# A baseline daemon of one map, for the memory per map and per path.
start 1
sleep 1
base_rss=$(status_field VmRSS)
base_threads=$(status_field Threads)
stop

start "$MAPS"
sleep 2
threads=$(status_field Threads)
rss=$(status_field VmRSS)
ticks_before=$(cpu_ticks)
sleep "$IDLE_SECONDS"
ticks_after=$(cpu_ticks)
hz=$(getconf CLK_TCK)
idle_cpu=$(awk -v t=$((ticks_after - ticks_before)) -v hz="$hz" -v s="$IDLE_SECONDS" \
    'BEGIN { printf "%.1f", 100 * t / hz / s }')

timed() {    # timed ARGS...: milliseconds `mpio ARGS` takes
    local begin
    begin=$(date +%s%N)
    "$mpio" "$@" --control "$dir/control.sock" > /dev/null
    ms_since "$begin"
}
status_ms=$(timed status)
paths_ms=$(timed show paths --json)
table=$("$mpio" table map0 --control "$dir/control.sock")
reload_ms=$(timed reload map0 "$table")

cpus=$(nproc)
per_map=$(( (rss - base_rss) / (MAPS > 1 ? MAPS - 1 : 1) ))
echo "mpio at scale: $MAPS maps x $PATHS null paths, NBD export per map: $EXPORTS; checker every ${INTERVAL_MS} ms"
echo "host: $cpus CPUs; $(date -u +%Y-%m-%dT%H:%MZ); commit $(git rev-parse --short HEAD)"
printf '%-34s %s\n' \
    "threads" "$threads (one map: $base_threads; bar: CPUs + 8 = $((cpus + 8)))" \
    "resident memory" "$((rss / 1024)) MiB (one map: $((base_rss / 1024)) MiB)" \
    "resident memory per map" "$per_map KiB ($((per_map / (PATHS > 0 ? PATHS : 1))) KiB per path, paths included)" \
    "idle CPU over ${IDLE_SECONDS} s" "$idle_cpu % of a core" \
    "start until control answers" "$start_ms ms" \
    "mpio status" "$status_ms ms" \
    "mpio show paths --json" "$paths_ms ms" \
    "mpio reload of one map" "$reload_ms ms"
