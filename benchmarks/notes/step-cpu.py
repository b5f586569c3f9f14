"""CPU milliseconds per training step of `sampledlm train --model gru ARGS` on PTB: the process CPU time of steps
20..$STEPS (default 60; one thread), then exit. PTB from $PTB_DIR (default ../shared/data/ptb beside the repository).

    python benchmarks/notes/step-cpu.py --objective nce -d 256 --no-input-weights
"""
import os
import sys
import tempfile
import time

from sampledlm.neural import trainer as T

PTB = os.environ.get("PTB_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "ptb"))
LAST = int(os.environ.get("STEPS", 60))
orig = T.Trainer.step
seen = {"n": 0}


def step(self, batch):
    seen["n"] += 1
    if seen["n"] == 20:
        seen["t0"] = time.process_time()
    out = orig(self, batch)
    if seen["n"] == LAST:
        ms = (time.process_time() - seen["t0"]) / (LAST - 20) * 1000
        print(f"{' '.join(sys.argv[1:])}: {ms:.1f} CPU ms/step, {32 * 35 / ms * 1000:,.0f} words/CPU-s", flush=True)
        os._exit(0)
    return out


T.Trainer.step = step
from sampledlm.cli import main  # noqa: E402

sys.argv = ["sampledlm", "train", "--train", os.path.join(PTB, "ptb.train.txt"), "--valid",
            os.path.join(PTB, "ptb.valid.txt"), "--device", "cpu", "--threads", "1", "--model", "gru",
            "-o", os.path.join(tempfile.mkdtemp(), "run")] + sys.argv[1:]
main()
