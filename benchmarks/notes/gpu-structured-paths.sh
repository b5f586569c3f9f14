#!/bin/bash
# One device call (issue 56, deliverable 7): why class and hsm trained at 4,451 and 3,221 tokens a second on the H200
# (gpu-wiki-classes.sh, 2026-12-04), where the other GRU rows ran at ~19,000 sharing the GPU nine ways. On a
# non-CPU device the class layer scores a recurrent batch class by class (`_within_per_class`: ~500 small products
# a step at V = 485k, each with its own launches, forward and backward) and hsm scores its busy parents one block
# each (`_sibling_lse`); the CPU has compiled pair loops instead. Each row trains STEPS steps of the same prefix
# twice: at the defaults, and with the loop's threshold out of reach (class: PER_CLASS_OVERHEAD = 1e12, so one
# product against the union of the batch's classes; hsm: GROUP_MIN = 1e12, so every step gathers its own
# siblings), the same math. Each run's tokens a second and validation perplexity (to agree) go to $OUT/paths.txt.
# Prepare .gpu-data as gpu-wiki-classes.sh says; run(command="bash benchmarks/notes/gpu-structured-paths.sh",
# carry=[".gpu-data"]); DEVICE=cpu STEPS=5 runs it here as a check.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src OMP_NUM_THREADS=1
DEVICE=${DEVICE:-cuda} STEPS=${STEPS:-100} D=/tmp/gp OUT=${OUT:-/tmp/gp-out}
mkdir -p $D $OUT
for f in vocab-full classes; do [ -f $D/$f.txt ] || gunzip -c .gpu-data/$f.txt.gz > $D/$f.txt; done
# the prefix's first 8,000 lines (about 0.5M tokens: more than 100 steps of 1,120), so that each start is short
gunzip -c .gpu-data/train.txt.gz | head -n 8000 > $D/train.txt
head -n 50 .gpu-data/valid-10000.txt > $D/valid.txt
one() {  # objective module constant value tag
  local obj=$1 mod=$2 const=$3 value=$4 tag=$5
  python3 -c "
import sampledlm.objectives.$mod as m; m.$const = $value
from sampledlm.cli import main
main(['train', '--train', '$D/train.txt', '--valid', '$D/valid.txt', '--vocab', '$D/vocab-full.txt', '--model', 'gru',
      '--objective', '$obj', '--word-classes', '$D/classes.txt', '--optimizer', 'adam', '--device', '$DEVICE',
      '--threads', '1', '--epochs', '1', '--max-steps', '$STEPS', '-o', '$D/$obj-$tag'])
" > $D/$obj-$tag.log 2>&1
  echo "$obj $tag rc=$? $(tail -n 1 $D/$obj-$tag/metrics.jsonl 2>/dev/null)" | tee -a $OUT/paths.txt
}
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv 2>/dev/null; } > $OUT/paths.txt
one class classes PER_CLASS_OVERHEAD 5000 default
one class classes PER_CLASS_OVERHEAD 10**12 shared
one hsm hsm GROUP_MIN 16 default
one hsm hsm GROUP_MIN 10**12 gathered
for f in $D/*.log; do echo "== $f"; tail -n 3 $f; done > $OUT/logs.txt
