#!/bin/bash
# One device call (issue 56, deliverable 7): every large-vocabulary row on the GPU, one full epoch each over the same
# 5.9M-token prefix of the Wikipedia corpus's training text, V = 485,176 (count >= 3), all nine at once on the one
# GPU; each then scored exactly (normalised over all V) on the whole test text.
# Prepare here first (ignored by git through .git/info/exclude, carried):
#   mkdir .gpu-data; awk -v N=6000000 '{n+=NF+1; print; if(n>=N) exit}' /work/data/wiki/train.txt | gzip > .gpu-data/train.txt.gz
#   gzip -c /work/data/wiki/test.txt > .gpu-data/test.txt.gz
#   gzip -c /work/data/wiki-runs/neural/data/vocab-full.txt > .gpu-data/vocab-full.txt.gz
#   cp /work/data/wiki-runs/neural/data/valid-10000.txt .gpu-data/   (the CPU rows' validation subset)
# then run(command="bash benchmarks/notes/gpu-wiki.sh", carry=[".gpu-data"], timeout_s=590).
# Every row: `sampledlm train --model gru --objective X --device cuda --threads 1 --epochs 1` and nothing else (its
# defaults, as the CPU rows but for the raced rate); the Transformer takes IS, the best CPU row's output.
set -u
START=$(date +%s); END=$((START + ${TRAIN_S:-470}))
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
{ date -u; git log -1 --format=%H 2>/dev/null; lscpu | head -20; nvidia-smi; python3 -c "import torch,numpy,numba,sys;print(sys.version);print('torch',torch.__version__,'numpy',numpy.__version__,'numba',numba.__version__,'cuda',torch.cuda.is_available())"; } > $OUT/machine.txt 2>&1
python3 -c "import sampledlm, torch; assert torch.cuda.is_available()" > $OUT/smoke.txt 2>&1 || { cat $OUT/smoke.txt; exit 3; }
D=/tmp/gd; Q=/tmp/q; mkdir -p $D $Q
for f in train test vocab-full; do gunzip -c .gpu-data/$f.txt.gz > $D/$f.txt; done
cp .gpu-data/valid-10000.txt $D/valid.txt
wc -w $D/*.txt > $OUT/data.txt
row() {  # name model objective
  local name=$1 model=$2 obj=$3
  OMP_NUM_THREADS=1 timeout -k 10 $((END - $(date +%s))) python3 -m sampledlm train --train $D/train.txt \
    --valid $D/valid.txt --vocab $D/vocab-full.txt --model $model --objective $obj --device cuda --threads 1 \
    --epochs 1 -o $Q/$name > $Q/$name.log 2>&1
  echo "TRAIN_RC=$? wall=$(( $(date +%s) - START ))" >> $Q/$name.log
  OMP_NUM_THREADS=1 timeout 90 python3 -m sampledlm eval $Q/$name --test $D/test.txt --json --device cuda \
    > $Q/$name.eval.json 2>> $Q/$name.log
  echo "EVAL_RC=$? wall=$(( $(date +%s) - START ))" >> $Q/$name.log
}
for o in softmax nce is css-is blackout adaptive class hsm; do row g-$o gru $o & done
row t-is transformer is &
sleep 60; nvidia-smi > $Q/nvidia-smi-60s.txt 2>&1
wait
cd $Q && for d in */; do mkdir -p $OUT/runs/$d; cp $d/config.json $d/metrics.jsonl $OUT/runs/$d 2>/dev/null; done
cp $Q/*.log $Q/*.json $Q/*.txt $OUT/ 2>/dev/null
echo "ALL wall=$(( $(date +%s) - START ))"
for f in $Q/*.log; do echo "== $f"; tail -3 $f; done
