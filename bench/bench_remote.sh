#!/usr/bin/env bash
# The cluster tier's costs on a CPU machine (no GPU): cold start of 16 processes prewarming the same
# kernels with no shared cache, a shared local cache and Redis (2 nodes x 8); the latency of a compile, a
# disk hit and a remote hit; and what a Redis outage costs a running job. Prints markdown for
# bench/RESULTS.md. Starts its own redis-server on a free loopback port (no persistence) and stops it.
#   bench/bench_remote.sh [build dir]      (default build/)
# KERNELS picks the prewarm set (default: wtconvnext-t's forward f32 kernels for sm_90, 17 of them; the
# whole preset, 84 kernels x 16 processes, takes too long on 2 cores).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
B=${1:-build}
L="$PWD/$B/lkjit"
SET=${KERNELS:---preset wtconvnext-t --arch sm_90 --dtypes f32 --passes fwd}
work=$(mktemp -d "${TMPDIR:-/tmp}/lkjit-bench-remote-XXXXXX")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no --dir "$work" --logfile "$work/redis.log" &
rpid=$!
trap 'kill -CONT $rpid 2>/dev/null; kill $rpid 2>/dev/null; wait $rpid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
URL="redis://127.0.0.1:$port/0"
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.1f}')"; }

# 16 processes at once; $1 names the scenario, $2 makes each process's environment from its index.
run16() {
  local t0 t1 i pids=()
  t0=$(now)
  for i in $(seq 0 15); do
    (env $($2 "$i") "$L" prewarm $SET --progress never -j 1 $3 >"$work/$1.$i.out" 2>&1) &
    pids+=($!)
  done
  wait "${pids[@]}"  # not the redis-server
  t1=$(now)
  local compiles
  compiles=$(cat "$work/$1".*.out | grep -c "lkjit: compiling " || true)
  echo "| $1 | $(secs "$t0" "$t1") | $compiles |"
}
none_env() { echo "LKJIT_LOG=1 LKJIT_CACHE_DIR=$work/none/$1"; }
local_env() { echo "LKJIT_LOG=1 LKJIT_CACHE_DIR=$work/local"; }
redis_env() { echo "LKJIT_LOG=1 LKJIT_CACHE_DIR=$work/node$(($1 % 2)) LKJIT_REMOTE_CACHE=$URL LKJIT_REMOTE_CACHE_TIMEOUT_MS=5000"; }

kernels=$("$L" prewarm $SET --list 2>/dev/null | tail -1)
echo "### Cold start: 16 processes, $kernels ($SET), -j 1 each"
echo
echo "| cache | wall s | compiles |"
echo "|---|---|---|"
[ -n "${SKIP_NO_CACHE:-}" ] || run16 "no shared cache" none_env ""  # the slow one: 16x the compiles
run16 "local (one folder, flock)" local_env ""
run16 "Redis (2 folders x 8, --remote)" redis_env "--remote"
echo

# Latency of one lookup as compile_kernel reports it (lkjit compile prints origin and seconds).
lat() {  # $1 dir, $2 extra env, $3 kernel args
  env LKJIT_CACHE_DIR="$1" $2 "$L" compile $3 --arch sm_90 2>/dev/null | awk '{print $5, $6}'
}
echo "### Latency of one lookup (median of 5; compile_kernel's own time, no process start)"
echo
echo "| kernel | compile | disk hit | remote hit |"
echo "|---|---|---|---|"
for k in "--kernel wtconv_fold --k 5 --L 3" "--kernel wtconv_fwd_plane --k 5 --L 3"; do
  c=(); d=(); r=()
  for i in 1 2 3 4 5; do
    redis-cli -p "$port" flushdb >/dev/null
    dir="$work/lat$i"; rm -rf "$dir" "$dir.b"
    c+=("$(lat "$dir" "LKJIT_REMOTE_CACHE=$URL" "$k" | awk '{print $2}')")
    d+=("$(lat "$dir" "" "$k" | awk '{print $2}')")
    r+=("$(lat "$dir.b" "LKJIT_REMOTE_CACHE=$URL" "$k" | awk '{print $2}')")
  done
  med() { printf '%s\n' "$@" | sort -g | sed -n 3p; }
  echo "| ${k#--kernel } | $(med "${c[@]}") s | $(med "${d[@]}") s | $(med "${r[@]}") s |"
done
echo

# An outage during a job whose kernels are not on its disk yet: compiles as without the tier.
echo "### Cost of a Redis outage to a running job ($kernels, cold local cache, -j 2)"
echo
echo "| remote tier | wall s |"
echo "|---|---|"
job() {  # $1 label, $2 env
  rm -rf "$work/job"
  local t0 t1
  t0=$(now)
  env LKJIT_CACHE_DIR="$work/job" $2 "$L" prewarm $SET --progress never -j 2 >"$work/job.out" 2>&1
  t1=$(now)
  echo "| $1 | $(secs "$t0" "$t1") |"
}
job "none (unset)" ""
job "server down (connection refused)" "LKJIT_REMOTE_CACHE=redis://127.0.0.1:1/0"
redis-cli -p "$port" flushdb >/dev/null
kill -STOP $rpid
job "server hung (SIGSTOP, 500 ms timeout)" "LKJIT_REMOTE_CACHE=$URL"
kill -CONT $rpid
echo
echo "machine: $(nproc) CPUs, $(uname -sr); $(redis-server --version | awk '{print $3}'); commit $(git rev-parse --short HEAD)$(git diff --quiet || echo '-dirty'); $(date -u +%Y-%m-%d)"
