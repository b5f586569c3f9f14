#!/bin/bash
# Ours on faster-rnnlm's model, NCE 20 per position: PTB, wiki V=10k, wiki V=485k; STEPS steps each.
T=/work/data/wiki-runs/faster-rnnlm/train-1000000.txt; S=/work/data/wiki-runs/speed; P=/work/shared/data/ptb
cd "${WORK:-/work/data/wiki-runs/vgap}" || exit 1  # run folders and logs go here, never into a checkout
F="--model gru --device cpu --threads 1 --epochs 1 -d 256 --no-input-weights --objective nce --samples 20 --sample-mode each"
for st in $STEPS; do for d in ${DS:-ptb 10k full}; do
  o=e-$d-$st; rm -rf $o
  if [ $d = ptb ]; then src="--train $P/ptb.train.txt --valid $S/valid-tiny.txt"; else src="--train $T --valid $S/valid-tiny.txt --vocab $S/vocab-$d.txt"; fi
  OMP_NUM_THREADS=1 python -m sampledlm train $src $F --max-steps $st -o $o > $o.log 2>&1
  echo "$o $(head -1 $o/metrics.jsonl | grep -o '"wall_s.*')"
done; done
