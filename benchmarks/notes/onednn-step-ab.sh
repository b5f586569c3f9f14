#!/bin/bash
# A/B: CPU ms a step (steps 20-60 of step-cpu.py) with SAMPLEDLM_ONEDNN=0 and 1, alternated, two rounds; each
# argument one set of flags (default: the GRU rows of cpu-step-2026-11-27.md). The words/CPU-s that step-cpu.py
# prints assume the GRU's 32 x 35 batch: for other models compare the CPU ms.
#   benchmarks/notes/onednn-step-ab.sh > onednn-step-ab-2026-11-27.log
#   benchmarks/notes/onednn-step-ab.sh "--model transformer" "--model ffnn" > onednn-step-ab-models-2026-11-27.log
cd "$(dirname "$0")/../.."
if [ $# -eq 0 ]; then
  set -- "--objective softmax" "--objective nce" "--objective hsm" "--objective adaptive" "--objective class" \
    "--objective nce -d 256 --no-input-weights" \
    "--objective hsm --word-classes none --arity 2 -d 256 --no-input-weights" "--objective blackout" \
    "--objective nce --precision bf16"
fi
for r in 1 2; do
  for args in "$@"; do
    for e in 0 1; do
      out=$(SAMPLEDLM_ONEDNN=$e python benchmarks/notes/step-cpu.py $args 2>/dev/null | sed 's/.*-o [^ ]* //')
      echo "round=$r onednn=$e $out"
    done
  done
done
