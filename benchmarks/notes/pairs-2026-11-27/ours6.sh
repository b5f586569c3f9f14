#!/bin/bash
# round 6 (round 5 ran beside a third process: not used) (code of 9b09d26: freed heap reused, Adam's row update compiled, one row gradient), beside theirs6.sh
D=/work/shared/data/ptb; cd /work/q40/pair
run() { name=$1; shift; nice -n 19 sampledlm train --train $D/ptb.train.txt --valid $D/ptb.valid.txt -o $name \
  --model gru --device cpu --threads 1 "$@" > $name.log 2>&1; echo "$name done $(date -u +%T)"; }
HS="--objective hsm --word-classes none --arity 2 -d 256 --no-input-weights"
NCE="--objective nce -d 256 --no-input-weights"
run hs-f32-g $HS; run hs-f32-h $HS; run nce-default-d --objective nce; run nce-f32-d $NCE
