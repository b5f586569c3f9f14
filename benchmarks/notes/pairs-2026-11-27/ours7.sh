#!/bin/bash
# the sixth round of the page (ours5.sh's was not used); code of 901ae87: the GRU's identity input side and backward
# loop, dropout in one pass, scoring rows in one compiled loop, the plot at most once a minute; beside theirs7.sh;
# float32 then bf16 rows. The Transformer's re-training was paused (SIGSTOP) while both ran.
D=/work/shared/data/ptb; cd /work/q41/pair
# the whole process timed, start-up and the final model's save included, as run.sh times faster-rnnlm's
run() { name=$1; shift; /usr/bin/time -f "%U %S" -o $name.time nice -n 19 sampledlm train --train $D/ptb.train.txt \
  --valid $D/ptb.valid.txt -o $name --model gru --device cpu --threads 1 "$@" > $name.log 2>&1
  echo "$name done $(date -u +%T)"; }
HS="--objective hsm --word-classes none --arity 2 -d 256 --no-input-weights"
NCE="--objective nce -d 256 --no-input-weights"
run hs-f32-i $HS; run hs-f32-j $HS; run nce-default-e --objective nce; run nce-f32-e $NCE
run hs-bf16-e $HS --precision bf16; run nce-default-bf16-e --objective nce --precision bf16; run nce-bf16-e $NCE --precision bf16
