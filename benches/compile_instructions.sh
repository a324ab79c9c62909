#!/usr/bin/env bash
# Instructions one fresh compile executes, counted by valgrind's callgrind: unlike compile
# times on a shared host, which swing 10-20 % between runs, the count repeats to about 0.05 %,
# so it can judge a change to the generated code's shape that saves a few per cent. It is
# (instructions of N2 compiles - instructions of N1 compiles) / (N2 - N1), which leaves out the
# process's own start (building the ISA, generating nothing else: `bench --compile-only`).
# System time (the mmap and mprotect of each kernel's memory) is not counted.
#
#   cargo build --release -p gather-jit-cli
#   benches/compile_instructions.sh                  # the cases S1..S9
#   benches/compile_instructions.sh --op gather --axis 0 --data-shape 16x16 --indices-shape 4
#
# GATHER_JIT picks the binary (default target/release/gather-jit).
set -euo pipefail
binary=${GATHER_JIT:-target/release/gather-jit}
n1=100 n2=300
instructions() {
  local out
  out=$(mktemp)
  valgrind --tool=callgrind --callgrind-out-file="$out" "$binary" bench "$@" 2>&1 \
    | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
  rm -f "$out"
}
per_compile() {
  local a b
  a=$(instructions "$@" --compile-only $n1)
  b=$(instructions "$@" --compile-only $n2)
  echo $(((b - a) / (n2 - n1)))
}
if [ $# -gt 0 ]; then
  per_compile "$@"
  exit
fi
# The cases of benches/peers/compare.py.
while read -r name args; do
  # shellcheck disable=SC2086
  echo "$name $(per_compile $args)"
done <<'CASES'
S1 --op gather-nd --batch-dims 0 --data-shape 1000x256x10x15 --indices-shape 25x125x3
S2 --op gather-nd --batch-dims 2 --data-shape 30x2x100x35 --indices-shape 30x2x3x1
S3 --op gather-nd --batch-dims 3 --data-shape 1x64x64x320 --indices-shape 1x64x64x1x1
S4 --op gather --axis 1 --batch-dims 0 --data-shape 6x12x10x24 --indices-shape 15x4x20x28
S5 --op gather --axis 0 --batch-dims 0 --data-shape 30522x768 --indices-shape 8x128
S6 --op gather-elements --axis 1 --data-shape 64x4096 --indices-shape 64x4096
S7 --op gather-elements --axis 0 --data-shape 1024x1024 --indices-shape 1024x1024
S8 --op gather-nd --batch-dims 0 --data-shape 512x512 --indices-shape 262144x2
S9 --op gather --axis 0 --batch-dims 0 --data-shape 16x16 --indices-shape 4
CASES
