#!/bin/bash
# round 4 (the same code as round 3, a replicate), beside theirs4.sh
D=/work/shared/data/ptb; cd /work/q39/pair
run() { name=$1; shift; nice -n 19 sampledlm train --train $D/ptb.train.txt --valid $D/ptb.valid.txt -o $name \
  --model gru --device cpu --threads 1 "$@" > $name.log 2>&1; echo "$name done $(date -u +%T)"; }
HS="--objective hsm --word-classes none --arity 2 -d 256 --no-input-weights"
NCE="--objective nce -d 256 --no-input-weights"
run hs-f32-c $HS; run hs-f32-d $HS; run nce-default-b --objective nce; run nce-f32-b $NCE
