#!/bin/bash
# round 2 (code of e06e724: Adam's fused update), beside theirs2.sh
D=/work/shared/data/ptb; cd /work/q38/pair
run() { name=$1; shift; nice -n 19 sampledlm train --train $D/ptb.train.txt --valid $D/ptb.valid.txt -o $name \
  --model gru --device cpu --threads 1 "$@" > $name.log 2>&1; echo "$name done $(date -u +%T)"; }
HS="--objective hsm --word-classes none --arity 2 -d 256 --no-input-weights --precision bf16"
NCE="--objective nce -d 256 --no-input-weights --precision bf16"
run hs-bf16-c $HS; run hs-bf16-d $HS; run nce-default-bf16-c --objective nce --precision bf16; run nce-bf16-c $NCE
