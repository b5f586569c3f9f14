#!/usr/bin/env bash
# Is dropout 0 still the better choice at the threshold where a one-pass recurrent run starts getting it
# (ONE_PASS_STEPS = 20,000 planned steps)? The GRU of the large-vocabulary rows (V = 485k, CSS-IS with 1,000 shared
# draws, bf16 autocast, lr 0.002, cosine over the one epoch) on the first 23M tokens of the Wikipedia training text,
# read once, at dropout 0 and at 0.25; validation on the rows' 10,956-token subset, exact test perplexity over the
# whole test text (bf16 products in the normaliser's sum). Resumable: a stopped run resumes from its checkpoint, a
# finished one is not run again. Usage: bash one-pass-dropout-threshold.sh [WORK] (WORK holds the runs).
set -euo pipefail
DATA=/work/data/wiki
ND=/work/data/wiki-runs/neural/data
WORK=${1:-/work/data/wiki-runs/dropout-threshold}
TOKENS=23000000
mkdir -p "$WORK"
TRAIN=$WORK/train-$TOKENS.txt
[ -s "$TRAIN" ] || python -c "from benchmarks.large_vocab_neural import prefix_file; prefix_file('$DATA/train.txt', '$TRAIN', $TOKENS)"
finished() {  # the epoch's end is in the metrics (points within it carry epoch_fraction)
  python -c "import json, sys; r = [json.loads(l) for l in open('$1/metrics.jsonl')]
sys.exit(0 if any(x.get('epoch') == 1 and 'epoch_fraction' not in x for x in r) else 1)" 2>/dev/null
}
for rate in 0 0.25; do
  run=$WORK/d$rate
  if [ ! -s "$run/test.json" ]; then
    if [ -f "$run/checkpoint.json" ]; then  # resumes a stopped run; a finished one says so and is scored
      python -m sampledlm train --resume "$run" || true
    else
      rm -rf "$run"
      python -m sampledlm train --train "$TRAIN" --valid "$ND/valid-10000.txt" --vocab "$ND/vocab-full.txt" \
        --model gru --objective css-is --samples 1000 --precision bf16 --lr 0.002 --epochs 1 --dropout $rate \
        --device cpu --threads 1 --checkpoint-every 2000 --valid-every 5000 -o "$run"
    fi
    finished "$run" || { echo "dropout $rate: not finished; run this again to resume it" >&2; exit 1; }
    python -m sampledlm eval "$run" --test "$DATA/test.txt" --json --threads 1 --sum-precision bf16 > "$run/test.json.tmp"
    mv "$run/test.json.tmp" "$run/test.json"
  fi
  echo "dropout $rate: $(tail -1 "$run/metrics.jsonl" | cut -c1-200) test $(python -c "import json; print(json.load(open('$run/test.json'))['ppl'])")"
done
