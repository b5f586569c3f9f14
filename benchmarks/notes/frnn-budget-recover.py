"""One-off (2026-11-29): the record of faster-rnnlm's NCE budget run (1 thread) whose script died with a NameError
after training and testing (fixed in 21fe42e), rebuilt from what the run left: its log (epochs, validation
entropies), its saved weights tested again the same way (`rnnlm -rnnlm MODEL -test SUBSET -nce-accurate-test 1
-threads 1`, timed by /usr/bin/time into test.stderr), and its process CPU estimated, since the script's own count
was lost: `ps` read 3,739 CPU s at 22:53:02 UTC (epoch 3 at 51 %), and the log's remaining 39.7 minutes (the rest of
epoch 3, epoch 4 and two validations) ran at a full core (its scheduler group at nice 0, the other jobs' at 19).

    python benchmarks/notes/frnn-budget-recover.py      (from the checkout; appends to large-vocab.jsonl)
"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from benchmarks import large_vocab_frnn_budget as fb  # noqa: E402
from benchmarks.large_vocab_neural import count_predictions  # noqa: E402
from benchmarks.large_vocab_record import append_row  # noqa: E402

WORK = "/work/data/wiki-runs/faster-rnnlm/budget-nce-1"
TRAIN = "/work/data/wiki-runs/neural/data/train-49108977.txt"
VALID = "/work/data/wiki-runs/neural/data/valid-1000.txt"
TEST = "/work/data/wiki-runs/neural/data/test-20000.txt"
CPU_AT_PS, PS_TIME, MINUTES_AFTER = 3739.0, "22:53:02 UTC", 39.7

log = open(os.path.join(WORK, "train.log"), errors="replace").read()
valid = fb.epochs_done(log)
elapsed = [tuple(map(float, m)) for m in re.findall(r"elapsed:\s+([\d.]+)m\+([\d.]+)m", log)]
err = open(os.path.join(WORK, "test.stderr"), errors="replace").read()
ent = float(re.findall(r"Test entropy\s+(\S+)", err)[-1])
user, system, wall, peak_kb = err.strip().splitlines()[-1].split()
row = {"key": "frnn-budget/nce-1", "tool": "faster-rnnlm", "objective": "nce", "threads": 1, "budget": fb.BUDGET_CPU_S,
       "epochs_planned": fb.EPOCHS, "epoch_tokens": 49108977, "epoch_predictions": count_predictions(TRAIN),
       "train": TRAIN, "valid": VALID, "rc": 0, "stopped_by_budget": False,
       "command": " ".join(["rnnlm", "-rnnlm", os.path.join(WORK, "model"), "-train", TRAIN, "-valid", VALID,
                            "-threads", "1", *fb.FLAGS, "-nce", "20"]),
       "epochs": len(valid), "valid_entropy_bits": valid, "valid_ppl": [round(2 ** h, 2) for h in valid],
       "log_elapsed_minutes": elapsed,
       "process_cpu_s": round(CPU_AT_PS + MINUTES_AFTER * 60, 0),
       "cpu_estimated": f"the script's own count was lost (NameError after the test); ps read {CPU_AT_PS:,.0f} CPU s "
                        f"at {PS_TIME} and the log's last {MINUTES_AFTER} minutes ran at a full core",
       "test": {"ppl": round(2 ** ent, 2), "entropy_bits": ent, "cpu_s": round(float(user) + float(system), 1),
                "wall_s": float(wall), "text": TEST, "tested_again": True},
       "ours_on_subset": fb.ours_on(type("A", (), {"ours_notes": fb.NOTES, "test": TEST})(), "nce", 1),
       "ours_best_on_subset": {"row": "neural/is", "ppl": 162.96, "whole_text_ppl": 144.43, "predictions": 20061,
                               "command": "sampledlm eval /work/data/wiki-runs/neural/is/run-lr0.002 --test "
                                          f"{TEST} --json --threads 1 (2026-11-29 23:40 UTC)"}}
append_row(row)
