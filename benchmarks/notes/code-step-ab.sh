#!/bin/bash
# A/B of two checkouts: CPU ms a step (steps 20-60 of step-cpu.py) at BASE (a commit, checked out into a temporary
# worktree) and in this working tree, alternated, two rounds; each further argument one set of flags (default: the
# GRU rows of cpu-step-2026-11-27.md).
#   benchmarks/notes/code-step-ab.sh 5115e67 > code-step-ab-2026-11-27.log
source "$(dirname "$0")/ab-worktree.sh"  # base_rev=$1 (shifted off), $base, cd to the root
if [ $# -eq 0 ]; then
  set -- "--objective softmax" "--objective nce" "--objective hsm" "--objective adaptive" "--objective class" \
    "--objective nce -d 256 --no-input-weights" \
    "--objective hsm --word-classes none --arity 2 -d 256 --no-input-weights" "--objective blackout" \
    "--objective nce --precision bf16"
fi
export PTB_DIR=${PTB_DIR:-$(pwd)/../shared/data/ptb}
for r in 1 2; do
  for args in "$@"; do
    for side in base new; do
      src=$([ $side = base ] && echo "$base/src" || echo "$(pwd)/src")
      out=$(PYTHONPATH=$src python benchmarks/notes/step-cpu.py $args 2>/dev/null | sed 's/.*-o [^ ]* //')
      echo "round=$r code=$side $out"
    done
  done
done
