#!/bin/bash
# issue 56: does the class layer's recurrent default of 4 components a class earn its place at V = 485k? At 1,393
# classes the class layer is 5,572 x 256 multiply-adds a position, about 4x the GRU's own. The class row's run (lr
# 0.002 as raced, 4 epochs cosine over its 4.25M-token text, one thread) trained again with --components 1 and
# nothing else changed, stopped once epoch 2 is validated; compared with the row's run at equal CPU seconds
# (metrics.jsonl of both). Resumable.
d=/work/data/wiki-runs/neural/data out=/work/data/trials/wiki-class-c1/run log=/work/data/trials/wiki-class-c1/train.log
mkdir -p /work/data/trials/wiki-class-c1
cd /work/egrid
[ -f $out/../epoch2.done ] && exit 0
if [ -f $out/checkpoint.json ]; then
  OMP_NUM_THREADS=1 python -m sampledlm train --resume $out >> $log 2>&1 &
else
  OMP_NUM_THREADS=1 python -m sampledlm train --train $d/train-4252249.txt --valid $d/valid-10000.txt \
    --vocab $d/vocab-full.txt --model gru --objective class --components 1 --device cpu --threads 1 --epochs 4 \
    --max-time 7200 --time-clock cpu --checkpoint-every 700 --lr 0.002 -o $out >> $log 2>&1 &
fi
pid=$!
while kill -0 $pid 2>/dev/null; do
  if grep -q "^epoch 2: train loss" $log; then
    sleep 2; kill $pid; wait $pid; touch $out/../epoch2.done
    grep "train loss" $log; exit 0
  fi
  sleep 20
done
