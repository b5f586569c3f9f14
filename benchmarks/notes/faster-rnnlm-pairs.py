"""Collect the side-by-side runs of 2026-11-27 (ours and faster-rnnlm's trained at the same time, one on each core)
into faster-rnnlm-pairs-2026-11-27.jsonl, the quality-cpu page's records.

    python benchmarks/notes/faster-rnnlm-pairs.py PAIR_DIR FRNN_LOGS > benchmarks/notes/faster-rnnlm-pairs-2026-11-27.jsonl

PAIR_DIR: where `ours.sh` trained (run directories, `ours.out` with each run's end time) and `theirs.out` (each of
faster-rnnlm's runs' end time); FRNN_LOGS: faster-rnnlm's logs (`run.sh NAME`, `/usr/bin/time -v`).

ours.sh ran, one after another, with `nice -n 19 sampledlm train --train ptb.train.txt --valid ptb.valid.txt -o NAME
--model gru --device cpu --threads 1` and: hs-bf16-a / -b `--objective hsm --word-classes none --arity 2 -d 256
--no-input-weights --precision bf16`; nce-bf16-a / -b `--objective nce -d 256 --no-input-weights --precision bf16`;
nce-default-bf16 `--objective nce --precision bf16`. theirs.sh: `run.sh gru-hs-r4`, then `run.sh gru-nce-r4 -nce 20`,
started at the same moment as ours.sh (04:43:37 UTC).
"""
import json
import os
import re
import sys

pair_dir, logs = sys.argv[1:3]
START = "04:43:37"
ROWS = {"hs-bf16-a": "hs-noinput-bf16", "hs-bf16-b": "hs-noinput-bf16", "nce-bf16-a": "nce-noinput-bf16",
        "nce-bf16-b": "nce-noinput-bf16", "nce-default-bf16": "nce-bf16"}
prev = START
for line in open(os.path.join(pair_dir, "ours.out")):
    name, _, end = line.split()
    m = [json.loads(x) for x in open(os.path.join(pair_dir, name, "metrics.jsonl"))]
    print(json.dumps({"side": "ours", "row": ROWS[name], "run": name, "cpu_s": round(m[-1]["cpu_s"], 1),
                      "epochs": len(m), "valid_ppl": round(min(x["valid_ppl"] for x in m), 2),
                      "window": f"{prev[:5]}-{end[:5]}", "date": "2026-11-27"}))
    prev = end
prev = START
for line, (row, base) in zip(open(os.path.join(pair_dir, "theirs.out")), (("gru-hs", "gru-hs-r4"),
                                                                        ("gru-nce", "gru-nce-r4"))):
    end = line.split()[-1]
    log = open(os.path.join(logs, f"{base}.log"), errors="replace").read()
    cpu = sum(float(re.search(rf"{k} time \(seconds\): ([\d.]+)", log).group(1)) for k in ("User", "System"))
    valid = [2 ** float(x) for x in re.findall(r"entropy \(bits\) valid:\s+([\d.]+)", log)][1:]
    print(json.dumps({"side": "theirs", "row": row, "run": base, "cpu_s": round(cpu, 1), "epochs": len(valid),
                      "valid_ppl": round(min(valid), 2), "window": f"{prev[:5]}-{end[:5]}", "date": "2026-11-27"}))
    prev = end
