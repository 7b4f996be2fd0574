#!/usr/bin/env bash
# ab.sh: server CPU per request of this checkout against another commit,
# measured side by side in one run. Both sluice-server builds take turns on
# CPU 0 (persistence off) under the same sluice-bench load on CPU 1,
# alternating A B, B A, ... so that drift in the machine's speed cancels; the
# figure to quote is the median of the pairwise ratios.
#
#   bench/ab.sh BASE_REV [PAIRS] [-- sluice-bench flags]
#   bench/ab.sh HEAD~3 8 -- -t gcra -c 50 -P 16 -d 4s      (the defaults)
#
# Load goes to 127.0.0.1 only; each run stops by itself after -d.
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?usage: bench/ab.sh BASE_REV [PAIRS] [-- sluice-bench flags]}
shift
pairs=8
if [ $# -gt 0 ] && [ "$1" != "--" ]; then pairs=$1; shift; fi
[ "${1:-}" = "--" ] && shift
load=("$@")
[ ${#load[@]} -gt 0 ] || load=(-t gcra -c 50 -P 16 -d 4s)

work=$(mktemp -d /tmp/sluice-ab.XXXXXX)
trap 'git worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git worktree add -q --detach "$work/base" "$base"
(cd "$work/base" && go build -o "$work/server-base" ./cmd/sluice-server)
go build -o "$work/server-new" ./cmd/sluice-server
go build -o "$work/sluice-bench" ./cmd/sluice-bench
echo "base $(git rev-parse --short "$base"), new $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (with uncommitted changes)'); load: ${load[*]}"

measure() { # measure VARIANT PAIR -> "cpu_us_per_op decisions_per_s"
  "$work/sluice-bench" --start-sluice "$work/server-$1" --sluice-args "--appendonly no" --sluice-cpu 0 --cpu 1 \
    -q --csv "$work/$1-$2.csv" "${load[@]}" >/dev/null 2>&1
  tail -1 "$work/$1-$2.csv" | awk -F, '{print $23, $15}'
}

ratios=()
printf '%-5s %12s %12s %8s\n' pair "base cpu/op" "new cpu/op" new/base
for i in $(seq 1 "$pairs"); do
  if [ $((i % 2)) -eq 1 ]; then
    b=$(measure base "$i"); n=$(measure new "$i")
  else
    n=$(measure new "$i"); b=$(measure base "$i")
  fi
  bc=${b%% *}; nc=${n%% *}
  r=$(awk -v n="$nc" -v b="$bc" 'BEGIN { printf "%.3f", n / b }')
  ratios+=("$r")
  printf '%-5s %10s us %10s us %8s\n' "$i" "$bc" "$nc" "$r"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{ v[NR] = $1 } END {
  m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
  printf "median new/base server CPU per request: %.3f (min %.3f, max %.3f, %d pairs)\n", m, v[1], v[NR], NR }'
