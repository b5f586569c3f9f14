"""The large-vocabulary campaign's record and process timing, shared by its steps (:mod:`benchmarks.large_vocab` and
its ``large_vocab_*`` step modules): one JSON row a line in ``benchmarks/notes/large-vocab.jsonl``, the latest row of
a key winning; a command's wall time, CPU time and peak memory measured by ``wait4``; the corpus prefixes and
vocabulary files the training steps read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from . import lmruns
from .report import REPO_DIR, stamp

NOTES = os.path.join(REPO_DIR, "benchmarks", "notes", "large-vocab.jsonl")


# --- the record ----------------------------------------------------------------------------------------------
def read_rows(path: str = NOTES) -> dict[str, dict]:
    """The latest recorded row of each key."""
    rows = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line:
                    r = json.loads(line)
                    rows[r["key"]] = r
    return rows


def append_row(row: dict, path: str = NOTES) -> dict:
    meta = stamp()
    row = {**row, "date": meta["date"], "commit": meta["commit"], "machine": meta["machine"],
           "load_average": [round(x, 2) for x in os.getloadavg()], "nice": os.nice(0)}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
        f.flush()
        os.fsync(f.fileno())
    print(json.dumps({k: v for k, v in row.items() if k not in ("stderr",)})[:600], file=sys.stderr, flush=True)
    return row


# --- timing a process ----------------------------------------------------------------------------------------
# A small parent (its own peak ~10 MB, which a child inherits at fork) that waits for the command with wait4:
# the command's wall time, CPU time (user + system, its threads and reaped children included) and peak RSS.
_WAIT4 = r"""
import json, os, sys, time
spec = json.loads(sys.argv[1])
t = time.perf_counter()
pid = os.fork()
if pid == 0:
    if spec.get("stdin"):
        fd = os.open(spec["stdin"], os.O_RDONLY); os.dup2(fd, 0)
    if spec.get("stdout"):
        fd = os.open(spec["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644); os.dup2(fd, 1)
    fd = os.open(spec["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644); os.dup2(fd, 2)
    os.execvp(spec["argv"][0], spec["argv"])
_, status, ru = os.wait4(pid, 0)
print(json.dumps({"rc": os.waitstatus_to_exitcode(status), "wall_s": round(time.perf_counter() - t, 2),
                  "cpu_s": round(ru.ru_utime + ru.ru_stime, 2), "peak_mb": round(ru.ru_maxrss / 1024, 1)}))
"""


def timed(argv: list[str], stdin: str | None = None, stdout: str | None = None) -> dict:
    """Run ``argv`` (stdin/stdout from/to files, stdout captured otherwise); rc, wall_s, cpu_s, peak_mb,
    stdout (when captured, last 4,000 characters) and stderr (last 2,000)."""
    with tempfile.TemporaryDirectory() as d:
        spec = {"argv": argv, "stdin": stdin, "stdout": stdout or os.path.join(d, "out"),
                "stderr": os.path.join(d, "err")}
        p = subprocess.run([sys.executable, "-S", "-c", _WAIT4, json.dumps(spec)], capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"timing wrapper failed: {p.stderr[-2000:]}")
        res = json.loads(p.stdout)
        res["stderr"] = open(spec["stderr"], encoding="utf-8", errors="replace").read()[-2000:]
        if stdout is None:
            res["stdout"] = open(spec["stdout"], encoding="utf-8", errors="replace").read()[-4000:]
    return res


def sampledlm(*args: str) -> list[str]:
    return lmruns.command(*args)


def prefix_file(src: str, dst: str, tokens: int) -> int:
    """The first lines of ``src`` holding ``tokens`` tokens, into ``dst``; tokens + </s> written."""
    n = lines = 0
    if not os.path.exists(dst):
        with open(src, encoding="utf-8") as f, open(dst + f".tmp{os.getpid()}", "w", encoding="utf-8") as g:
            for line in f:
                if n >= tokens:
                    break
                n += len(line.split())
                g.write(line)
        os.replace(dst + f".tmp{os.getpid()}", dst)
    n = 0
    with open(dst, encoding="utf-8") as f:
        for line in f:
            n += len(line.split())
            lines += 1
    return n + lines


def vocab_file(data: str, sub: str, dst: str, unk_count: int) -> str:
    """The corpus vocabulary as ``sampledlm train --vocab`` reads it: ``</s>`` with the training text's line count
    (each line is a sentence of the id stream) and ``<unk>`` with its training count, then the words. Written again
    when an older copy lacks ``</s>`` (its count 0 kept NCE from ever drawing ``</s>`` as a noise word:
    benchmarks/notes/large-vocab-findings.md)."""
    if os.path.exists(dst):
        with open(dst, encoding="utf-8") as f:
            if f.readline().startswith("</s>\t"):
                return dst
    with open(os.path.join(data, sub, "train.txt"), "rb") as f:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 24), b""))
    with open(os.path.join(data, sub, "vocab.txt"), encoding="utf-8") as f, \
            open(dst + f".tmp{os.getpid()}", "w", encoding="utf-8") as g:
        g.write(f"</s>\t{lines}\n<unk>\t{unk_count}\n")
        g.writelines(f)
    os.replace(dst + f".tmp{os.getpid()}", dst)
    return dst


def v_full(rows: dict) -> str:
    """The count >= 3 vocabulary's size, as '485k'."""
    st = rows.get("corpus", {}).get("stats", {}).get("settings", {})
    v = next((x["V"] for k, x in st.items() if k.startswith("count")), None)
    return f"{round(v / 1000)}k" if v else "600k"
