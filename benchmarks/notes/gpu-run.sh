#!/bin/bash
# The script of the 2026-11-26 device calls (lab notes: gpu-2026-11-26.md), kept for the next session with a device.
# Prepare here first: PTB in .ptb/ (cp ../shared/data/ptb/ptb.*.txt .ptb/), PTB + War and Peace in .ptb/wp/
# (benchmarks/chen_budget.py joined_files), Dask wheels for Python 3.12 in .whl/ (the device README says how), both
# listed in .git/info/exclude; then run(command="bash benchmarks/notes/gpu-run.sh", carry=[".whl", ".ptb"]).
# The GPU trainings stop at TRAIN_S seconds; the suite runs beside them with the GPU visible.
# One device call: the suite on this machine's CPU kind + GPU rows of issue 35 + a GPU smoke of every objective.
set -u
START=$(date +%s); END=$((START + ${TRAIN_S:-440}))
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=$PWD/src:/tmp/site
mkdir -p ../shared/data/ptb && cp .ptb/ptb.*.txt ../shared/data/ptb/
Q=/tmp/q; mkdir -p $Q
{ date -u; lscpu; nvidia-smi; python3 -c "import torch,numpy,numba,sys;print(sys.version);print('torch',torch.__version__,'numpy',numpy.__version__,'numba',numba.__version__,'cuda',torch.cuda.is_available())"; } > $OUT/machine.txt 2>&1
P=.ptb; W=.ptb/wp
train() {  # name data(train valid test) args...
  local name=$1 tr=$2 va=$3 te=$4; shift 4
  local left=$((END - $(date +%s)))
  OMP_NUM_THREADS=1 nice -n 10 timeout -k 30 $left python3 -m sampledlm train --train $tr --valid $va -o $Q/$name --device ${DEV:-cuda} --threads 1 --epochs 12 "$@" > $Q/$name.log 2>&1
  echo "TRAIN_RC=$? wall=$(( $(date +%s) - START ))" >> $Q/$name.log
  OMP_NUM_THREADS=1 timeout 60 python3 -m sampledlm eval $Q/$name --test $te --json --device ${DEV:-cuda} > $Q/$name.eval.json 2>> $Q/$name.log
}
G="$P/ptb.train.txt $P/ptb.valid.txt $P/ptb.test.txt"; WG="$W/train.txt $W/valid.txt $W/test.txt"
train g-softmax $G --model gru &
train g-nce $G --model gru --objective nce --samples 20 --sample-mode each --lr 0.004 &
train g-css $G --model gru --objective css-is --samples 1000 &
train g-blackout $G --model gru --objective blackout --samples 20 --sample-mode each --lr 0.004 &
train g-class $G --model gru --objective class &
train g-hsm $G --model gru --objective hsm &
train g-adaptive $G --model gru --objective adaptive --cutoffs 2712 --cutoffs 4754 &
train t-softmax $G --model transformer &
train t-nce $G --model transformer --objective nce --samples 20 --sample-mode each &
train w-softmax $WG --model gru &
train w-nce $WG --model gru --objective nce --samples 20 --sample-mode each --lr 0.004 &
train w-adaptive $WG --model gru --objective adaptive &
# GPU smoke of the objectives not trained above (one epoch on 3,000 lines)
( head -3000 $P/ptb.train.txt > $Q/s.train; head -300 $P/ptb.valid.txt > $Q/s.valid
  for obj in ${SMOKE_OBJS:-softmax binary neg ranking selfnorm shortlist css-bernoulli}; do for m in ${SMOKE_MODELS:-gru ffnn}; do
    OMP_NUM_THREADS=1 nice -n 10 timeout 120 python3 -m sampledlm train --train $Q/s.train --valid $Q/s.valid -o $Q/smoke-$m-$obj --model $m --objective $obj --device ${DEV:-cuda} --epochs 1 --threads 1 > $Q/smoke-$m-$obj.log 2>&1
    echo "smoke $m $obj rc=$?" >> $Q/smoke.txt
    timeout 60 python3 -m sampledlm eval $Q/smoke-$m-$obj --test $Q/s.valid --json --device ${DEV:-cuda} >> $Q/smoke.txt 2>&1
  done; done ) &
# the suite, on this CPU, GPU visible (as a user of this machine would run it)
OMP_NUM_THREADS=2 timeout -k 10 ${SUITE_S:-470} python3 -m pytest -q -n ${NW:-8} --junitxml=$OUT/junit.xml ${SUITE:-} > $OUT/suite.log 2>&1
echo "SUITE_RC=$? wall=$(( $(date +%s) - START ))" >> $OUT/suite.log
if grep -qE "[0-9]+ (failed|error)" $OUT/suite.log; then
  left=$((START + 530 - $(date +%s))); [ $left -gt 20 ] && CUDA_VISIBLE_DEVICES= timeout -k 5 $left python3 -m pytest -q --lf -p no:xdist > $OUT/rerun.log 2>&1
  echo "RERUN_RC=$?" >> $OUT/rerun.log
fi
wait
nvidia-smi > $Q/nvidia-smi-end.txt 2>&1
cd $Q && tar czf $OUT/runs.tgz --exclude='*.safetensors' --exclude='checkpoints' --exclude='*.png' . 2>/dev/null
echo "ALL DONE wall=$(( $(date +%s) - START ))"
