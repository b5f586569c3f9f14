#!/bin/bash
# One device call (issue 56, deliverable 7, the two rows gpu-wiki.sh could not finish) and the suite on the device's
# CPU beside them. class and hsm at their defaults cluster the training text (`--word-classes auto`) before the
# first step, on the CPU, which took the whole of the first call; here the clustering is done beforehand on this
# machine by `sampledlm classes` with the same defaults (the same text, vocabulary and 2 sqrt(V) = 1,393 classes: the
# classes `auto` would make) and given as `--word-classes FILE`. Prepare as gpu-wiki.sh says, and also:
#   gunzip -c .gpu-data/train.txt.gz > /tmp/t.txt; gunzip -c .gpu-data/vocab-full.txt.gz > /tmp/v.txt
#   python -m sampledlm classes /tmp/t.txt --vocab /tmp/v.txt -o /tmp/c.txt && gzip -c /tmp/c.txt > .gpu-data/classes.txt.gz
# (done 2026-11-30 on the AMD EPYC: 15 passes, 979 CPU s, 534 MB; the device would have spent the call on it)
# then run(command="bash benchmarks/notes/gpu-wiki-classes.sh", carry=[".gpu-data"], timeout_s=590): everything it
# leaves is in $OUT/all.tar.gz (a call brings back only a few files); ingest the rows with
# `python -m benchmarks.large_vocab_gpu ingest DIR ...` as for gpu-wiki.sh.
# `--optimizer adam` (added 2026-12-04, when the call first ran): since that day a GRU run of under 20,000 planned
# steps (this one: about 5,300) takes AdamW at 0.008 where no optimiser is given; the seven rows of 2026-11-29 it is
# compared with trained with Adam at their objectives' rates, which `--optimizer adam` restores exactly.
set -u
START=$(date +%s); END=$((START + ${TRAIN_S:-480}))
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
R=/tmp/res; mkdir -p $R
{ date -u; git log -1 --format=%H 2>/dev/null; lscpu | head -20; nvidia-smi; python3 -c "import torch,numpy,numba,sys;print(sys.version);print('torch',torch.__version__,'numpy',numpy.__version__,'numba',numba.__version__,'cuda',torch.cuda.is_available())"; } > $R/machine.txt 2>&1
python3 -c "import sampledlm, torch; assert torch.cuda.is_available()" > $R/smoke.txt 2>&1 || { cat $R/smoke.txt; exit 3; }
D=/tmp/gd; Q=$R/q; mkdir -p $D $Q
for f in train test vocab-full classes; do gunzip -c .gpu-data/$f.txt.gz > $D/$f.txt; done
cp .gpu-data/valid-10000.txt $D/valid.txt
wc -w $D/*.txt > $R/data.txt
row() {  # name objective
  local name=$1 obj=$2
  OMP_NUM_THREADS=1 timeout -k 10 $((END - $(date +%s))) python3 -m sampledlm train --train $D/train.txt \
    --valid $D/valid.txt --vocab $D/vocab-full.txt --model gru --objective $obj --word-classes $D/classes.txt \
    --optimizer adam --device cuda --threads 1 --epochs 1 -o $Q/$name > $Q/$name.log 2>&1
  echo "TRAIN_RC=$? wall=$(( $(date +%s) - START ))" >> $Q/$name.log
  OMP_NUM_THREADS=1 timeout 90 python3 -m sampledlm eval $Q/$name --test $D/test.txt --json --device cuda \
    > $Q/$name.eval.json 2>> $Q/$name.log
  echo "EVAL_RC=$? wall=$(( $(date +%s) - START ))" >> $Q/$name.log
}
row g-class class &
row g-hsm hsm &
# the suite on the device's CPU (another kind than ours), two cores left to the rows
SAMPLEDLM_FAILURE_LOG=$R/failures.txt timeout $((END - $(date +%s) + 60)) python3 -m pytest -q -n 12 \
  --dist worksteal -p no:cacheprovider > $R/suite.txt 2>&1
echo "SUITE_RC=$? wall=$(( $(date +%s) - START ))" >> $R/suite.txt
wait
cd $Q && for d in */; do mkdir -p $R/runs/$d; cp $d/config.json $d/metrics.jsonl $R/runs/$d 2>/dev/null; done
cp $Q/*.log $Q/*.json $R/runs/ 2>/dev/null
tar czf $OUT/all.tar.gz -C $R machine.txt smoke.txt data.txt suite.txt runs $(cd $R && ls failures.txt 2>/dev/null)
echo "ALL wall=$(( $(date +%s) - START ))"; tail -3 $R/suite.txt
for f in $Q/*.log; do echo "== $f"; tail -3 $f; done
