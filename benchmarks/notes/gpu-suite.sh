#!/bin/bash
# The suite on a lent machine (another CPU kind: issue 34), one GPU Transformer beside it on the spare core.
# Prepare as gpu-run.sh says (.ptb/, .whl/); run(command="bash benchmarks/notes/gpu-suite.sh", carry=[".whl", ".ptb"], timeout_s=580).
set -u
START=$(date +%s)
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=$PWD/src:/tmp/site
mkdir -p ../shared/data/ptb && cp .ptb/ptb.*.txt ../shared/data/ptb/
{ date -u; git log -1 --format=%H 2>/dev/null; lscpu | head -20; nvidia-smi -L; python3 -c "import torch,numpy,numba,sys,aiohttp,hypothesis;print(sys.version);print('torch',torch.__version__,'numpy',numpy.__version__,'numba',numba.__version__,'aiohttp',aiohttp.__version__,'hypothesis',hypothesis.__version__,'cuda',torch.cuda.is_available())"; } > $OUT/machine.txt 2>&1
Q=/tmp/q; mkdir -p $Q; P=.ptb
( OMP_NUM_THREADS=1 nice -n 10 timeout -k 10 470 python3 -m sampledlm train --train $P/ptb.train.txt --valid $P/ptb.valid.txt -o $Q/t-softmax --device cuda --threads 1 --epochs 40 --model transformer > $Q/t.log 2>&1
  echo "TRAIN_RC=$? wall=$(( $(date +%s) - START ))" >> $Q/t.log
  OMP_NUM_THREADS=1 timeout 40 python3 -m sampledlm eval $Q/t-softmax --test $P/ptb.test.txt --json --device cuda > $Q/t.eval.json 2>> $Q/t.log
  cp $Q/t-softmax/metrics.jsonl $Q/t-softmax/config.json $Q/ 2>/dev/null ) &
SAMPLEDLM_FAILURE_LOG=$OUT/failures.txt OMP_NUM_THREADS=1 timeout -k 10 ${SUITE_S:-500} python3 -m pytest -v -n ${NW:-14} --dist worksteal -p no:cacheprovider --durations=40 --junitxml=$OUT/junit.xml > $OUT/suite.log 2>&1
echo "SUITE_RC=$? wall=$(( $(date +%s) - START ))" >> $OUT/suite.log
wait
cd $Q && tar czf $OUT/t.tgz t.log t.eval.json metrics.jsonl config.json 2>/dev/null
echo "ALL DONE wall=$(( $(date +%s) - START ))"; tail -8 $OUT/suite.log
