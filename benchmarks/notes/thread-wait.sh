#!/bin/bash
# Two torch threads on cores shared with other jobs: spinning (libgomp's default) against sleeping
# (OMP_WAIT_POLICY=PASSIVE). Our GRU-256 with NCE at V = 485k, 300 optimiser steps over the first 1M tokens of the
# Wikipedia corpus's training text. "Busy": one or two `python -c 'while True: pass'` beside the run on the 2-core
# machine. Results: thread-wait-2026-11-29.md. Run with every other job on the machine stopped.
# usage: WORK=/path/with/train1m.txt,valid-tiny.txt VOCAB=vocab-full.txt SRC=/path/to/src bash thread-wait.sh
cd "$WORK" || exit 1
run() {  # name threads extra-env
  rm -rf "r-$1"
  env OMP_NUM_THREADS=$2 $3 PYTHONPATH="$SRC" python -m sampledlm train --train train1m.txt --valid valid-tiny.txt \
    --vocab "$VOCAB" --model gru --objective nce --threads $2 --epochs 1 --max-steps 300 --seed 0 -o "r-$1" \
    > "log-$1" 2>&1
  python - "$1" <<'PY'
import json, sys
m = [json.loads(l) for l in open(f"r-{sys.argv[1]}/metrics.jsonl")][0]
print(sys.argv[1], {k: m.get(k) for k in ("cpu_s", "wall_s", "train_loss")})
PY
}
busy() { python -c 'while True: pass' & BUSY="$BUSY $!"; }
unset OMP_WAIT_POLICY GOMP_SPINCOUNT
run t1 1 "OMP_WAIT_POLICY=ACTIVE"; run t2 2 "OMP_WAIT_POLICY=ACTIVE"; run t2p 2 "OMP_WAIT_POLICY=PASSIVE"
run q-sc10k 2 "GOMP_SPINCOUNT=10000"; run q-new 2 ""
busy
run t1-busy 1 "OMP_WAIT_POLICY=ACTIVE"; run t2-busy 2 "OMP_WAIT_POLICY=ACTIVE"; run t2p-busy 2 "OMP_WAIT_POLICY=PASSIVE"
run b-sc10k 2 "GOMP_SPINCOUNT=10000"; run b-new 2 ""
busy
run bb-t1 1 "OMP_WAIT_POLICY=ACTIVE"; run bb-t2 2 "OMP_WAIT_POLICY=ACTIVE"; run bb-t2p 2 "OMP_WAIT_POLICY=PASSIVE"
run bb-sc10k 2 "GOMP_SPINCOUNT=10000"
kill $BUSY
