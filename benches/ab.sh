#!/usr/bin/env bash
# Alternating A/B of two builds of the CLI on one `gather-jit bench` case, for differences
# smaller than this kind of machine's drift (which moves one binary's median by 30 % within
# minutes). Each pair runs both binaries back to back on core 1, in alternating order; prints
# both medians, how often NEW was faster, and the quartiles of NEW/OLD per pair. FIELD picks
# the JSON field compared (default `median_ns`, the call; `compile_ns` for compile times).
#
#   cargo build --release -p gather-jit-cli && cp target/release/gather-jit /tmp/gj-old
#   (change something) cargo build --release -p gather-jit-cli
#   benches/ab.sh /tmp/gj-old target/release/gather-jit 30 \
#       --op gather --axis 0 --data-shape 30522x768 --indices-shape 8x128 --time-ms 150
set -euo pipefail
if [ $# -lt 4 ]; then
  echo "usage: $0 OLD NEW PAIRS BENCH-ARGS..." >&2
  exit 2
fi
old=$1 new=$2 pairs=$3
shift 3
median="import json, sys; print(json.load(sys.stdin)['${FIELD:-median_ns}'] / 1e3)"
for pair in $(seq 1 "$pairs"); do
  if [ $((pair % 2)) = 0 ]; then
    o=$(taskset -c 1 "$old" bench "$@" --json | python3 -c "$median")
    n=$(taskset -c 1 "$new" bench "$@" --json | python3 -c "$median")
  else
    n=$(taskset -c 1 "$new" bench "$@" --json | python3 -c "$median")
    o=$(taskset -c 1 "$old" bench "$@" --json | python3 -c "$median")
  fi
  echo "$o $n"
done | python3 -c '
import statistics as st, sys
pairs = [tuple(map(float, line.split())) for line in sys.stdin]
old = [o for o, _ in pairs]
new = [n for _, n in pairs]
ratios = sorted(n / o for o, n in pairs)
q = st.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
wins = sum(n < o for o, n in pairs)
print(f"old median {st.median(old):.3f} us, new median {st.median(new):.3f} us, "
      f"new faster in {wins} of {len(pairs)} pairs, new/old median {st.median(ratios):.3f} "
      f"(quartiles {q[0]:.3f}-{q[2]:.3f})")
'
