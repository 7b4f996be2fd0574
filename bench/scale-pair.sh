#!/usr/bin/env bash
# p99 of the data-type recipes with 10k keys against 1M mixed keys, side by side: two
# sluice-servers on one core (the idle one waits while the other is measured), alternating
# open-loop runs of each recipe, pipeline 16. The machine's noise moves both alike; compare the
# medians.
#
#   SS=/tmp/ss SB=/tmp/sb RATE=60000 PAIRS=8 bench/scale-pair.sh
set -euo pipefail
SS=${SS:?path to sluice-server}; SB=${SB:?path to sluice-bench}
RATE=${RATE:-60000}; PAIRS=${PAIRS:-8}; CORE=${CORE:-0}; GEN_CORE=${GEN_CORE:-1}
dir=$(mktemp -d)
trap 'kill $a $b 2>/dev/null; rm -rf "$dir"' EXIT
taskset -c "$CORE" "$SS" --port 7050 --appendonly no --dir "$dir" >/dev/null 2>&1 & a=$!
taskset -c "$CORE" "$SS" --port 7051 --appendonly no --dir "$dir" >/dev/null 2>&1 & b=$!
sleep 0.5
B="$SB --cpu $GEN_CORE -c 50 -P 16 -q"
for m in hash-bucket list-recent; do # preload: 5k + 5k keys on one, 500k + 500k on the other
  $B --sluice-addr 127.0.0.1:7050 -t $m --keys 5000 -n 16 >/dev/null 2>&1
  $B --sluice-addr 127.0.0.1:7051 -t $m --keys 500000 -n 16 >/dev/null 2>&1
done
echo "# pair keys recipe p50 p99 p99.9"
for r in $(seq "$PAIRS"); do
  for m in hash-bucket list-recent; do
    for s in "7050 5000 10k" "7051 500000 1M"; do
      set -- $s
      $B --sluice-addr 127.0.0.1:$1 -t $m --keys $2 --rate "$RATE" -d 3s 2>/dev/null |
        awk -v k=$3 -v r=$r '$1=="sluice"{print r, k, $2, $10, $12, $13}'
    done
  done
done
