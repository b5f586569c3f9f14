#!/bin/bash
# A/B: steps 20-60 CPU ms with SAMPLEDLM_ONEDNN=0/1, alternated, two rounds
cd "$(dirname "$0")/../.."
for r in 1 2; do
 for args in "--objective softmax" "--objective nce" "--objective hsm" "--objective adaptive" "--objective class" "--objective nce -d 256 --no-input-weights" "--objective hsm --word-classes none --arity 2 -d 256 --no-input-weights" "--objective blackout" "--objective nce --precision bf16"; do
  for e in 0 1; do
   out=$(SAMPLEDLM_ONEDNN=$e python benchmarks/notes/step-cpu.py $args 2>/dev/null | sed 's/.*-o [^ ]* //')
   echo "round=$r onednn=$e $out"
  done
 done
done
