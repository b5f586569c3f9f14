#!/bin/bash
# A/B of two checkouts on one epoch of `sampledlm train --model gru` on PTB: the whole process's CPU seconds
# (/usr/bin/time: start-up, the epoch, its validation, checkpoint and final save) and the run's own count, at BASE (a
# commit, checked out into a temporary worktree) and in this working tree, alternated, two rounds; each further
# argument one set of flags (default: the rows judged beside faster-rnnlm).
#   benchmarks/notes/epoch-ab.sh 8db8772 > epoch-ab-2026-11-27.log
source "$(dirname "$0")/ab-worktree.sh"  # base_rev=$1 (shifted off), $base, cd to the root
if [ $# -eq 0 ]; then
  set -- "--objective hsm --word-classes none --arity 2 -d 256 --no-input-weights" \
    "--objective nce -d 256 --no-input-weights" "--objective nce"
fi
P=${PTB_DIR:-$(pwd)/../shared/data/ptb}
run=$(mktemp -d)
for r in 1 2; do
  for args in "$@"; do
    for side in base new; do
      src=$([ $side = base ] && echo "$base/src" || echo "$(pwd)/src")
      rm -rf "$run/r"
      /usr/bin/time -f "%U %S" -o "$run/time" env PYTHONPATH="$src" python -m sampledlm train --train "$P/ptb.train.txt" \
        --valid "$P/ptb.valid.txt" --model gru --device cpu --threads 1 --epochs 1 -o "$run/r" $args > "$run/log" 2>&1
      own=$(python -c "import json; m = [json.loads(l) for l in open('$run/r/metrics.jsonl')]; print(round(m[-1]['cpu_s'], 2), round(m[-1]['valid_ppl'], 3))")
      echo "round=$r code=$side args=[$args] process_cpu_s=$(awk '{print $1 + $2}' "$run/time") run_cpu_s,valid=$own"
    done
  done
done
