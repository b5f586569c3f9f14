#!/bin/bash
# One device call: the suite on that machine's CPU kind (issue 34) beside GPU trainings of issue 35's rows.
# Prepare here first: PTB in .ptb/ (cp ../shared/data/ptb/ptb.*.txt .ptb/), PTB + War and Peace in .ptb/wp/
# (benchmarks/chen_budget.py joined_files), Dask wheels for Python 3.12 in .whl/ (the device README says how), both
# listed in .git/info/exclude; then run(command="bash benchmarks/notes/gpu-run.sh", carry=[".whl", ".ptb"]).
# Learned 2026-11-26: beside six trainings the suite did not finish in 470 s, and -q lost the failures' names when
# cut. For the suite alone: run(command="export PYTHONPATH=$PWD/src; python3 -m pytest -v -n 15 -p no:cacheprovider
# > $OUT/suite.log 2>&1", carry=[".whl", ".ptb"]) after the same pip and PTB lines (about 6 minutes).
# Learned at the third session: the suite alone with -n 14 --dist worksteal (one GPU training beside) needs about
# 520 s there (docs/neural.md's blocks alone over 270 s); set SAMPLEDLM_FAILURE_LOG=$OUT/failures.txt so that a
# run cut by the call's limit keeps the reasons of its failures (pytest prints them only at its end).
# Every training uses its objective's defaults (nothing but --model and --objective) and stops at TRAIN_S seconds.
set -u
START=$(date +%s); END=$((START + ${TRAIN_S:-430}))
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=$PWD/src:/tmp/site
mkdir -p ../shared/data/ptb && cp .ptb/ptb.*.txt ../shared/data/ptb/
Q=/tmp/q; mkdir -p $Q
{ date -u; git log -1 --format=%H 2>/dev/null; lscpu; nvidia-smi; python3 -c "import torch,numpy,numba,sys;print(sys.version);print('torch',torch.__version__,'numpy',numpy.__version__,'numba',numba.__version__,'cuda',torch.cuda.is_available())"; } > $OUT/machine.txt 2>&1
P=.ptb; W=.ptb/wp
train() {  # name train valid test args...
  local name=$1 tr=$2 va=$3 te=$4; shift 4
  OMP_NUM_THREADS=1 nice -n 5 timeout -k 20 $((END - $(date +%s))) python3 -m sampledlm train --train $tr --valid $va -o $Q/$name --device cuda --threads 1 --epochs 8 "$@" > $Q/$name.log 2>&1
  echo "TRAIN_RC=$? wall=$(( $(date +%s) - START ))" >> $Q/$name.log
  OMP_NUM_THREADS=1 timeout 50 python3 -m sampledlm eval $Q/$name --test $te --json --device cuda > $Q/$name.eval.json 2>> $Q/$name.log
}
G="$P/ptb.train.txt $P/ptb.valid.txt $P/ptb.test.txt"; WG="$W/train.txt $W/valid.txt $W/test.txt"
train g-softmax $G --model gru &
train g-nce $G --model gru --objective nce &
train g-adaptive $G --model gru --objective adaptive &
train t-softmax $G --model transformer &
train w-softmax $WG --model gru &
train w-nce $WG --model gru --objective nce &
sleep 20
SAMPLEDLM_FAILURE_LOG=$OUT/failures.txt OMP_NUM_THREADS=1 timeout -k 10 ${SUITE_S:-470} python3 -m pytest -v -n ${NW:-10} -p no:cacheprovider --durations=25 --junitxml=$OUT/junit.xml > $OUT/suite.log 2>&1
echo "SUITE_RC=$? wall=$(( $(date +%s) - START ))" >> $OUT/suite.log
wait
nvidia-smi > $Q/nvidia-smi-end.txt 2>&1
cd $Q && tar czf $OUT/runs.tgz --exclude='*.safetensors' --exclude='checkpoints' --exclude='*.png' . 2>/dev/null
echo "ALL DONE wall=$(( $(date +%s) - START ))"; tail -5 $OUT/suite.log
