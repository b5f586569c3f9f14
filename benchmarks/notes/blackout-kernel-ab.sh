#!/bin/bash
# Training steps of OBJ (default blackout), the code before a change (OLD, a worktree: git worktree add /tmp/ab-old 27d13cc)
# against the code after it (NEW), alternated; PTB GRU-256, every other flag at its default. THREADS, ROUNDS, STEPS, OBJ.
P=/work/shared/data/ptb; V=/work/data/wiki-runs/faster-rnnlm/valid-tiny.txt  # a one-line validation text
OLD=${OLD:-/tmp/ab-old/src}; NEW=${NEW:-/work/main/src}
cd "${WORK:-/work/data/prof}" || exit 1  # run folders go here, never into a checkout
for round in $(seq "${ROUNDS:-3}"); do for side in old new; do
  src=$NEW; [ $side = old ] && src=$OLD
  rm -rf ab-$side
  PYTHONPATH=$src OMP_NUM_THREADS=${THREADS:-1} python -m sampledlm train --train $P/ptb.train.txt --valid $V \
    --model gru --objective "${OBJ:-blackout}" --threads "${THREADS:-1}" --epochs 1 --max-steps "${STEPS:-300}" -o ab-$side \
    > ab-$side.log 2>&1
  echo "$round $side $(python -c "import json;r=json.loads(open('ab-$side/metrics.jsonl').readline());print(round(r['cpu_s'],2), round(r['train_loss'],5))")"
done; done
