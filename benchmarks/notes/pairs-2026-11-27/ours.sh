#!/bin/bash
# our comparable rows back to back, beside faster-rnnlm's (theirs.sh), so both sides share the two cores
D=/work/shared/data/ptb; cd /work/q38/pair
run() { name=$1; shift; nice -n 19 sampledlm train --train $D/ptb.train.txt --valid $D/ptb.valid.txt -o $name \
  --model gru --device cpu --threads 1 "$@" > $name.log 2>&1; echo "$name done $(date -u +%T)"; }
HS="--objective hsm --word-classes none --arity 2 -d 256 --no-input-weights --precision bf16"
NCE="--objective nce -d 256 --no-input-weights --precision bf16"
run hs-bf16-a $HS; run nce-bf16-a $NCE; run hs-bf16-b $HS; run nce-bf16-b $NCE; run nce-default-bf16 --objective nce --precision bf16
