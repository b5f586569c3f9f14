"""Collect the side-by-side runs of 2026-11-27 (ours and faster-rnnlm's trained at the same time, one on each core)
into faster-rnnlm-pairs-2026-11-27.jsonl, the quality-cpu page's records.

    python benchmarks/notes/faster-rnnlm-pairs.py PAIR_DIR FRNN_LOGS > benchmarks/notes/faster-rnnlm-pairs-2026-11-27.jsonl

PAIR_DIR: where `ours.sh` trained (run directories, `ours.out` with each run's end time) and `theirs.out` (each of
faster-rnnlm's runs' end time); FRNN_LOGS: faster-rnnlm's logs (`run.sh NAME`, `/usr/bin/time -v`).

ours.sh ran, one after another, with `nice -n 19 sampledlm train --train ptb.train.txt --valid ptb.valid.txt -o NAME
--model gru --device cpu --threads 1` and: hs-bf16-a / -b `--objective hsm --word-classes none --arity 2 -d 256
--no-input-weights --precision bf16`; nce-bf16-a / -b `--objective nce -d 256 --no-input-weights --precision bf16`;
nce-default-bf16 `--objective nce --precision bf16`. theirs.sh: `run.sh gru-hs-r4`, then `run.sh gru-nce-r4 -nce 20`,
started at the same moment as ours.sh (04:43:37 UTC). Round 2 (ours2.sh: hs-bf16-c, hs-bf16-d, nce-default-bf16-c,
nce-bf16-c; theirs2.sh: gru-hs-r5, gru-nce-r5) at 04:56:14, after Adam's fused update (e06e724).

Round 3 (a later session of the same day, in PAIR_DIR_3; code 0c7f82a, float32 products through oneDNN), float32
rows: ours3.sh ran hs-f32-a / -b `--objective hsm --word-classes none --arity 2 -d 256 --no-input-weights`,
nce-default-a `--objective nce`, nce-f32-a `--objective nce -d 256 --no-input-weights`; theirs3.sh ran gru-hs-r6,
gru-nce-r6, gru-hs-r7, both started at 06:42:54. Round 4 (07:42:08, the same code and rows, a replicate): ours4.sh
and theirs4.sh were ours3.sh and theirs3.sh with the run names hs-f32-c / -d, nce-default-b, nce-f32-b and gru-hs-r8,
gru-nce-r8, gru-hs-r9. Each of ours is set against
faster-rnnlm's comparable run that ran most beside it (the page does that).

Round 5 (a third session, in PAIR_DIR_5; code 9b09d26: freed heap reused, Adam's row update compiled, one row
gradient for NCE's true and noise words), the same rows: `ours6.sh` ran hs-f32-g / -h, nce-default-d, nce-f32-d and
`theirs6.sh` gru-hs-r12, gru-nce-r12, gru-hs-r13, both started at 09:52:04 (a first try, `ours5.sh` / `theirs5.sh` at
09:32:11, ran beside a stray training process, three jobs on two cores: not used; its scripts were these with the
run names hs-f32-e / -f, nce-default-c, nce-f32-c and gru-hs-r10, gru-nce-r10, gru-hs-r11).

Round 6 (a fourth session, in PAIR_DIR_7; code 901ae87: the GRU's input side without input matrices formed in its
step, its backward loop's branch hoisted, dropout in one compiled pass, validation rows scored in one compiled loop):
`ours7.sh` ran hs-f32-i / -j, nce-default-e, nce-f32-e, then the bf16 rows hs-bf16-e, nce-default-bf16-e,
nce-bf16-e; `theirs7.sh` gru-hs-r14, gru-nce-r14, gru-hs-r15, gru-nce-r15, both started at the moment START_7.

    python benchmarks/notes/faster-rnnlm-pairs.py PAIR_DIR FRNN_LOGS PAIR_DIR_3 PAIR_DIR_5 PAIR_DIR_7 START_7 \
        > benchmarks/notes/faster-rnnlm-pairs-2026-11-27.jsonl
"""
import json
import os
import re
import sys

pair_dir, logs, pair_dir_3, pair_dir_5, pair_dir_7, start_7 = sys.argv[1:7]
ROWS = {"hs-bf16": "hs-noinput-bf16", "nce-bf16": "nce-noinput-bf16", "nce-default-bf16": "nce-bf16",
        "hs-f32": "hs-noinput", "nce-f32": "nce-noinput", "nce-default": "nce"}
#: (directory, ours' end times, theirs' end times, start, the code ours ran, faster-rnnlm's runs and their rows)
HS_NCE = ("gru-hs", "gru-nce")
ROUNDS = [(pair_dir, "ours.out", "theirs.out", "04:43:37", "89dbc88", ("gru-hs-r4", "gru-nce-r4"), HS_NCE),
          (pair_dir, "ours2.out", "theirs2.out", "04:56:14", "e06e724 (Adam's fused update)",
           ("gru-hs-r5", "gru-nce-r5"), HS_NCE),
          (pair_dir_3, "ours3.out", "theirs3.out", "06:42:54", "0c7f82a (float32 products through oneDNN)",
           ("gru-hs-r6", "gru-nce-r6", "gru-hs-r7"), ("gru-hs", "gru-nce", "gru-hs")),
          (pair_dir_3, "ours4.out", "theirs4.out", "07:42:08", "07df8ab (the same products; a replicate)",
           ("gru-hs-r8", "gru-nce-r8", "gru-hs-r9"), ("gru-hs", "gru-nce", "gru-hs")),
          (pair_dir_5, "ours6.out", "theirs6.out", "09:52:04", "9b09d26 (freed heap reused, compiled row update)",
           ("gru-hs-r12", "gru-nce-r12", "gru-hs-r13"), ("gru-hs", "gru-nce", "gru-hs")),
          (pair_dir_7, "ours7.out", "theirs7.out", start_7, "901ae87 (GRU input side in its step, one-pass dropout)",
           ("gru-hs-r14", "gru-nce-r14", "gru-hs-r15", "gru-nce-r15"), HS_NCE + HS_NCE)]
for number, (where, ours_out, theirs_out, start, code, bases, rows) in enumerate(ROUNDS, start=1):
    prev = start
    for line in open(os.path.join(where, ours_out)):
        name, _, end = line.split()
        m = [json.loads(x) for x in open(os.path.join(where, name, "metrics.jsonl"))]
        timed = os.path.join(where, f"{name}.time")  # from round 6: the whole process's user + system seconds
        cpu = sum(map(float, open(timed).read().split()[-2:])) if os.path.exists(timed) else m[-1]["cpu_s"]
        print(json.dumps({"side": "ours", "round": number, "row": ROWS[name.rsplit("-", 1)[0]], "run": name, "code": code,
                          "cpu_s": round(cpu, 1), "run_cpu_s": round(m[-1]["cpu_s"], 1), "whole_process": os.path.exists(timed),
                          "epochs": len(m),
                          "valid_ppl": round(min(x["valid_ppl"] for x in m), 2),
                          "window": f"{prev[:5]}-{end[:5]}", "date": "2026-11-27"}))
        prev = end
    prev = start
    for line, row, base in zip(open(os.path.join(where, theirs_out)), rows, bases):
        end = line.split()[-1]
        log = open(os.path.join(logs, f"{base}.log"), errors="replace").read()
        cpu = sum(float(re.search(rf"{k} time \(seconds\): ([\d.]+)", log).group(1)) for k in ("User", "System"))
        valid = [2 ** float(x) for x in re.findall(r"entropy \(bits\) valid:\s+([\d.]+)", log)][1:]
        print(json.dumps({"side": "theirs", "round": number, "row": row, "run": base, "cpu_s": round(cpu, 1), "epochs": len(valid),
                          "valid_ppl": round(min(valid), 2), "window": f"{prev[:5]}-{end[:5]}",
                          "date": "2026-11-27"}))
        prev = end
