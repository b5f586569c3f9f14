#!/bin/bash
# PTB prefixes, ours on faster-rnnlm's model, NCE 20 per position, 1 epoch: code at 901ae87 vs HEAD, alternated.
P=/work/shared/data/ptb; S=/work/data/wiki-runs/speed
F="--model gru --device cpu --threads 1 --epochs 1 -d 256 --no-input-weights --objective nce --samples 20 --sample-mode each"
cd "${WORK:-/work/data/wiki-runs/vgap}" || exit 1  # run folders and logs go here, never into a checkout
for n in $SIZES; do for side in old new; do
  if [ $side = old ]; then src=/tmp/ab901/src; else src=/work/main/src; fi
  o=ab-$side-$n; rm -rf $o
  PYTHONPATH=$src OMP_NUM_THREADS=1 python -m sampledlm train --train ptb-$n.txt --valid $S/valid-tiny.txt $F -o $o > $o.log 2>&1
  echo "$o $(head -1 $o/metrics.jsonl | grep -o '"step.*')"
done; done
