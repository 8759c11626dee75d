#!/usr/bin/env bash
# Instructions per `tools/call` request in the server process, per system:
# the server runs under callgrind (`peer-bench serve-http <system>`) while
# `peer-bench drive` makes N calls; with N = 2000 and N = 4000,
# (Ir(4000) - Ir(2000)) / 2000 is what one more request costs the server
# (start-up, sessions and shutdown cancel out).
#
# Usage: crates/peer-bench/callgrind.sh [serve-http options, e.g. --toolgraft-router-nodelay]
# Environment: PEER_BENCH_BIN (default: $CARGO_TARGET_DIR or crates/peer-bench/target,
# release/peer-bench), SYSTEMS ("toolgraft rmcp tower-mcp"), CLIENTS (1),
# LOW/HIGH (2000/4000), OUT_DIR (a new temporary directory; the .out files stay there).
set -euo pipefail
shopt -s inherit_errexit

here=$(cd "$(dirname "$0")" && pwd)
bin=${PEER_BENCH_BIN:-${CARGO_TARGET_DIR:-$here/target}/release/peer-bench}
systems=${SYSTEMS:-"toolgraft rmcp tower-mcp"}
clients=${CLIENTS:-1}
low=${LOW:-2000}
high=${HIGH:-4000}
out=${OUT_DIR:-$(mktemp -d -t peer-bench-callgrind.XXXXXX)}
extra=("$@")
mkdir -p "$out"

[ -x "$bin" ] || { echo "no binary at $bin: cargo build --release --manifest-path crates/peer-bench/Cargo.toml" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }

# The total Ir of a callgrind out file (its `totals:` line, else `summary:`).
total_ir() {
    local line
    line=$(grep -E '^totals:' "$1" | tail -1)
    [ -n "$line" ] || line=$(grep -E '^summary:' "$1" | tail -1)
    awk '{print $2}' <<<"$line"
}

# Serves `$1` under callgrind, drives `$2` calls at it; prints the server's Ir.
measure() {
    local system=$1 calls=$2
    local file="$out/$system.$calls.callgrind.out"
    coproc SERVER {
        exec valgrind --tool=callgrind --callgrind-out-file="$file" \
            "$bin" serve-http "$system" "${extra[@]}" 2>"$out/$system.$calls.valgrind.log"
    }
    local pid=$SERVER_PID url
    read -r url <&"${SERVER[0]}" || true
    [ -n "$url" ] || { echo "$system did not start: see $out/$system.$calls.valgrind.log" >&2; exit 1; }
    "$bin" drive "$url" --calls "$calls" --clients "$clients" >&2
    # Closing the server's stdin stops it; callgrind writes its file at exit.
    eval "exec ${SERVER[1]}>&-"
    wait "$pid"
    total_ir "$file"
}

echo "callgrind files in $out" >&2
echo "| system | Ir($low calls) | Ir($high calls) | Ir per request |"
echo "|---|---:|---:|---:|"
for system in $systems; do
    echo "== $system" >&2
    a=$(measure "$system" "$low")
    b=$(measure "$system" "$high")
    per=$(( (b - a) / (high - low) ))
    echo "| $system${extra[*]:+ ${extra[*]}} | $a | $b | $per |"
done
