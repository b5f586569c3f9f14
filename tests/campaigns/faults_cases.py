"""The cases of ``python -m benchmarks faults``: one or more per numbered defect of the campaign (the ``item``
field), plus what a user would try.

A case is data (:class:`Case`): the command (run now), the old command where the old command line
differed (or :data:`NO_SUCH`), a setup that prepares its directory, a check that classifies what
the command did, and, for a defect fixed since, the regression test that covers it (``test``, a pytest
node id; the page lists each such case with its test). The directory starts with the corpus files
``tr.txt`` (1,500 training sentences), ``va.txt``, ``te.txt`` (200 each), ``tiny.txt`` (300), ``big.txt``
(all 4,447) and copies of the fixtures the case ``needs``: ``k3.arpa`` (KN3 of tr.txt), ``ffnn``, ``gru``,
``binary`` (neural run directories) and ``melm`` (a maxent model), each made by the side's own command line.

References are computed another way than the command under test: the same text read from a plain
file instead of stdin or a compressed or CR-ended file, a sentence scored alone, an independent
ARPA back-off scorer (:func:`arpa_scores`, KenLM's conventions), the untampered model.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import json
import lzma
import math
import os
import random
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from typing import Callable

from .faults_engine import (NO_SUCH, Ctx, Side, _last_line, error_category, fixture_commands, has_config, last_json,
                            mid_epoch_checkpoint, ppl_of, refused, robust, same_number, same_numbers)

LN10 = math.log(10)


# --- the case record -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One fault case. ``command`` runs now; ``old`` is the command line for the older code when it
    differed (None: the same; :data:`NO_SUCH`: the old code has no such command)."""

    id: str
    item: int
    what: str
    command: tuple[str, ...]
    check: Callable[[Ctx], tuple[str, str]]
    old: tuple[str, ...] | str | None = None
    setup: Callable[[Ctx], None] | None = None
    needs: tuple[str, ...] = ()
    stdin: str | None = None  # a file of the case directory fed on standard input
    stdout_to: str | None = None  # e.g. /dev/full
    env: dict = field(default_factory=dict)
    fsize: int | None = None  # the largest file the command may write (prlimit --fsize)
    umask: int | None = None
    mount: str | None = None  # "full" (a 48 KiB tmpfs at ./full) or "readonly" (./ro)
    signal: tuple[int, Callable[[Ctx], bool]] | None = None  # send this signal once the trigger holds
    may_change: tuple[str, ...] = ()  # files a successful command may rewrite (a refused one may not)
    may_leave: tuple[str, ...] = ()  # new files a failed command may leave (a documented state)
    ignore: tuple[str, ...] = ()  # files written by a process the case itself started
    python: bool = False  # command is ``python ARGS`` (a snippet), not the command line
    timeout: float = 120
    quick: bool = False  # one of the few cases of --quick
    label: str = ""  # how the page shows a python snippet's command
    test: str = ""  # the pytest node id of the regression test that covers the same defect

    def argv(self, side: Side) -> list[str] | None:
        cmd = self.old if side.old and self.old is not None else self.command
        if cmd == NO_SUCH:
            return None
        return [a.replace("{root}", os.path.dirname(side.src)) for a in cmd]

    def display(self, side: Side) -> str:
        """The command as the page shows it (the old form after it when the old code took another)."""
        if self.python:
            return f"python -c {self.label or 'SNIPPET'}" + (" REPO" if "{root}" in self.command else "")
        shown = (f"cat {self.stdin} | " if self.stdin else "") + "sampledlm " + " ".join(self.command) + \
            (f" > {self.stdout_to}" if self.stdout_to else "")
        if self.old == NO_SUCH:
            return shown + " (before: no such command)"
        if self.old is not None and tuple(self.old) != tuple(self.command):
            return shown + " (before: sampledlm " + " ".join(self.old) + ")"
        return shown

    def skip_reason(self) -> str:
        from .faults_engine import have_prlimit

        if self.fsize is not None and not have_prlimit():
            return "prlimit is not installed: no file-size limit"
        if self.mount is not None and not can_mount():
            if self.mount == "readonly" and os.geteuid() != 0:
                return ""
            return "needs a tmpfs mount (root); this process may not mount"
        return ""

    @contextlib.contextmanager
    def environment(self, ctx: Ctx):
        """Mounts for the disk-full and read-only cases (unmounted afterwards); extra environment."""
        extra: dict = {"env": {}}
        if self.mount is None:
            yield extra
            return
        target = ctx.path("full" if self.mount == "full" else "ro")
        os.makedirs(target)
        mounted = False
        try:
            if can_mount():
                opts = "size=48k" if self.mount == "full" else "ro,size=1m"
                mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", target],
                                         capture_output=True).returncode == 0
            if not mounted:
                os.chmod(target, 0o555)
            yield extra
        finally:
            if mounted:
                if subprocess.run(["umount", target], capture_output=True).returncode != 0:
                    subprocess.run(["umount", "-l", target], capture_output=True)
            with contextlib.suppress(OSError):
                os.chmod(target, 0o755)

    def watcher(self, ctx: Ctx):
        if self.signal is None:
            return None
        sig, trigger = self.signal
        return lambda: sig if trigger(ctx) else None


_MOUNT_OK: list[bool] = []


def can_mount() -> bool:
    """Whether this process can mount a tmpfs (tried once, on a scratch directory)."""
    if not _MOUNT_OK:
        import tempfile

        ok = False
        if os.geteuid() == 0 and shutil.which("mount") and shutil.which("umount"):
            d = tempfile.mkdtemp(prefix="sampledlm-faults-mount-")
            try:
                ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", d],
                                    capture_output=True).returncode == 0
                if ok:
                    ok = subprocess.run(["umount", d], capture_output=True).returncode == 0
            finally:
                with contextlib.suppress(OSError):
                    os.rmdir(d)
        _MOUNT_OK.append(ok)
    return _MOUNT_OK[0]


# --- helpers: text, files, models ------------------------------------------------------------------
def lines_of(ctx: Ctx, name: str = "te.txt") -> list[str]:
    return ctx.read(name).splitlines()


def derive(name: str, fn: Callable[[bytes], bytes], src: str = "te.txt"):
    """A setup: write ``name`` as ``fn(bytes of src)``."""

    def setup(ctx: Ctx) -> None:
        ctx.write(name, fn(ctx.read(src, "rb")))

    setup.__doc__ = f"{name} = f({src})"
    return setup


def chain(*setups):
    def setup(ctx: Ctx) -> None:
        for s in setups:
            s(ctx)

    return setup


def zlib_damaged(good: bytes) -> bytes:
    """``good`` (gzip) with one bit flipped where zlib itself fails (zlib.error), else halfway truncated."""
    import zlib

    for pos in range(10, min(len(good), 4000)):
        bad = bytearray(good)
        bad[pos] ^= 0x10
        try:
            gzip.decompress(bytes(bad))
        except zlib.error:
            return bytes(bad)
        except (OSError, EOFError):
            continue
    return good[: len(good) // 2]


def json_edit(name: str, fn: Callable[[dict], None]):
    """A setup: load JSON file ``name``, let ``fn`` change it, write it back."""

    def setup(ctx: Ctx) -> None:
        with open(ctx.path(name), encoding="utf-8") as f:
            d = json.load(f)
        fn(d)
        with open(ctx.path(name), "w", encoding="utf-8") as f:
            json.dump(d, f)

    return setup


def set_key(path: tuple, value):
    def fn(d):
        for k in path[:-1]:
            d = d[k]
        d[path[-1]] = value

    return fn


def maxent_weights(ctx: Ctx, model: str = "melm") -> str:
    """The weights file of a maxent model directory (named in config.json, or model.safetensors)."""
    with open(ctx.path(model, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    sec = config.get("maxent")
    name = sec.get("weights") if isinstance(sec, dict) and isinstance(sec.get("weights"), str) else "model.safetensors"
    return ctx.path(model, name)


def rewrite_tensors(path: str, change: Callable[[dict], None]) -> None:
    """Change tensors of a safetensors file; a checksum in its header (sampledlm's) is recomputed, so only
    the loader's own checks can catch the change."""
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import save_file

    with safe_open(path, framework="np") as f:
        meta = dict(f.metadata() or {})
        tensors = {k: np.array(f.get_tensor(k)) for k in f.keys()}
    change(tensors)
    if "sha256" in meta:
        import torch

        from sampledlm import store

        meta.pop("sha256")
        os.remove(path)
        store.save_tensors(path, {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in tensors.items()}, meta)
    else:
        save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, path, metadata=meta or None)


def tamper_maxent(name: str, change):
    def setup(ctx: Ctx) -> None:
        def fn(t):
            change(t[name])

        rewrite_tensors(maxent_weights(ctx), fn)

    return setup


def tamper_neural(run: str, pick: Callable[[list[str]], str], change):
    """Change the tensor ``pick(names)`` of ``run/model.safetensors`` (checksum recomputed)."""

    def setup(ctx: Ctx) -> None:
        def fn(t):
            change(t, pick(sorted(t)))

        rewrite_tensors(ctx.path(run, "model.safetensors"), fn)

    return setup


def set_element(index: int, value):
    def change(a):
        a.reshape(-1)[index] = value

    return change


def flip_byte(rel: str, at: float = 0.6):
    def setup(ctx: Ctx) -> None:
        p = ctx.path(rel) if not callable(rel) else rel(ctx)
        data = bytearray(open(p, "rb").read())
        data[int(len(data) * at)] ^= 0xFF
        open(p, "wb").write(bytes(data))

    return setup


def truncate(rel, keep: float = 0.5):
    def setup(ctx: Ctx) -> None:
        p = ctx.path(rel) if not callable(rel) else rel(ctx)
        data = open(p, "rb").read()
        open(p, "wb").write(data[: int(len(data) * keep)])

    return setup


def remove(rel: str):
    def setup(ctx: Ctx) -> None:
        p = ctx.path(rel)
        shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)

    return setup


def shuffled_vocab(model: str, keep: int = 1):
    """vocab.txt with the lines after the first ``keep`` shuffled (same words, other ids)."""

    def setup(ctx: Ctx) -> None:
        lines = ctx.read(f"{model}/vocab.txt").splitlines(keepends=True)
        rest = lines[keep:]
        random.Random(3).shuffle(rest)
        ctx.write(f"{model}/vocab.txt", "".join(lines[:keep] + rest))

    return setup


def renamed_word(model: str):
    """vocab.txt with one word renamed (same size, same counts)."""

    def setup(ctx: Ctx) -> None:
        lines = ctx.read(f"{model}/vocab.txt").splitlines(keepends=True)
        w, rest = lines[10].split("\t", 1)
        lines[10] = "zzqqzz\t" + rest
        ctx.write(f"{model}/vocab.txt", "".join(lines))

    return setup


def same_size_same_mtime(name: str, change: Callable[[bytes], bytes]):
    """Rewrite ``name`` with other content of the same size and give it back its modification time."""

    def setup(ctx: Ctx) -> None:
        p = ctx.path(name)
        st = os.stat(p)
        data = change(open(p, "rb").read())
        assert len(data) == st.st_size
        open(p, "wb").write(data)
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))

    return setup


def warm_then(argv: list[str], then):
    """A setup: run ``argv`` once (fills the cache), then ``then``."""

    def setup(ctx: Ctx) -> None:
        ctx.run(argv)
        then(ctx)

    return setup


# --- measuring outputs ------------------------------------------------------------------------------
def out_ppl(ctx: Ctx) -> float:
    return ppl_of(last_json(ctx.result.stdout))


def ref_of(fixture: str):
    def ref(ctx: Ctx) -> float:
        return ppl_of(ctx.fx.ref(fixture))

    return ref


def ppl_after(argv_new: list[str], argv_old: list[str] | None = None):
    """Measure: run a second command (an evaluation) and read its perplexity."""

    def measure(ctx: Ctx) -> float:
        r = ctx.run(argv_old if (ctx.side.old and argv_old) else argv_new)
        if r.rc != 0:
            raise ValueError(f"the evaluation after it failed: {_last_line(r.stderr)}")
        return ppl_of(last_json(r.stdout))

    return measure


def step_ppl(argv_new: list[str], argv_old: list[str] | None = None):
    """Reference: the perplexity another command of the same side prints."""
    return ppl_after(argv_new, argv_old)


def per_sentence_values(text: str) -> list[float]:
    """The first number of each line (a sentence's log probability), header lines skipped."""
    vals = []
    for ln in text.splitlines():
        m = re.match(r"\s*(-?[0-9.]+(?:e-?\d+)?)\b", ln)
        if m:
            vals.append(float(m.group(1)))
    return vals


def fifth_vs_alone(model_argv: list[str], old_argv: list[str] | None = None, tol: float = 2e-3):
    """Check: the 5th line of five.txt scores as one.txt (that line alone) does."""

    def check(ctx: Ctx) -> tuple[str, str]:
        r = ctx.result
        if r.rc != 0:
            return error_category(r, ("five.txt",))
        five = per_sentence_values(r.stdout)
        argv = [a.replace("five.txt", "one.txt") for a in (old_argv if ctx.side.old and old_argv else model_argv)]
        alone = ctx.run(argv)
        one = per_sentence_values(alone.stdout)
        if len(five) != 5 or len(one) != 1:
            return "wrong result", f"{len(five)} scores for 5 lines, {len(one)} for 1"
        if abs(five[4] - one[0]) > tol:
            return "wrong result", f"5th line {five[4]:.4f}, alone {one[0]:.4f}"
        return "ok", f"5th line {five[4]:.4f} = alone {one[0]:.4f}"

    return check


def five_lines(ctx: Ctx) -> None:
    lines = lines_of(ctx)
    ctx.write("five.txt", "\n".join(lines[:5]) + "\n")
    ctx.write("one.txt", lines[4] + "\n")


def same_file(out: str, ref: str):
    """Check: the command wrote ``out`` byte for byte equal to ``ref`` (made from the plain file)."""

    def check(ctx: Ctx) -> tuple[str, str]:
        r = ctx.result
        if r.rc != 0:
            return error_category(r)
        if not ctx.exists(out):
            return "wrong result", f"exit 0 but no {out}"
        if ctx.read(out, "rb") != ctx.read(ref, "rb"):
            return "wrong result", f"{out} differs from {ref} (the same text from a file)"
        return "ok", f"{out} = {ref}"

    return check


def stats_equal(ref_file: str):
    """Check: ``stats --json`` of the variant equals that of ``ref_file`` (but for the file name)."""

    def check(ctx: Ctx) -> tuple[str, str]:
        r = ctx.result
        if r.rc != 0:
            return error_category(r)
        ref = ctx.run(["stats", ref_file, "--json"])
        a, b = last_json(r.stdout), last_json(ref.stdout)
        a.pop("file", None), b.pop("file", None)
        if a != b:
            diff = {k: (a.get(k), b.get(k)) for k in set(a) | set(b) if a.get(k) != b.get(k)}
            return "wrong result", f"differs from {ref_file}: {json.dumps(diff)[:160]}"
        return "ok", f"sentences {a.get('sentences')}, tokens {a.get('tokens')} = {ref_file}"

    return check


def magic_and_ppl(out: str, magic: bytes, ref_fixture: str):
    """Check: ``out`` starts with the compression's magic bytes, and reads back to the reference numbers."""

    def check(ctx: Ctx) -> tuple[str, str]:
        r = ctx.result
        if r.rc != 0:
            return error_category(r, (out,))
        head = ctx.read(out, "rb")[: len(magic)]
        if head != magic:
            return "wrong result", f"{out} is not {out.rsplit('.', 1)[1]} (starts {head[:6]!r})"
        e = ctx.run(["ngram", "eval", out, "--test", "te.txt", "--json"])
        if e.rc != 0:
            return "wrong result", f"written, but reading it back failed: {_last_line(e.stderr)}"
        got, want = ppl_of(last_json(e.stdout)), ppl_of(ctx.fx.ref(ref_fixture))
        if abs(got - want) > 1e-9 * want:
            return "wrong result", f"perplexity {got:.6g} read back, {want:.6g} from the plain file"
        return "ok", f"{out.rsplit('.', 1)[1]}, perplexity {got:.4f} = plain"

    return check


def modes(expected_file: int = 0o644):
    """Check: every file the command wrote has mode 0644 (umask 022), directories 0755."""

    def check(ctx: Ctx) -> tuple[str, str]:
        r = ctx.result
        if r.rc != 0:
            return error_category(r)
        bad = []
        for dirpath, dirnames, filenames in os.walk(ctx.dir):
            for n in filenames:
                p = os.path.join(dirpath, n)
                rel = os.path.relpath(p, ctx.dir)
                if rel in CORPUS_FILES or n == ".lock":
                    continue
                m = os.stat(p).st_mode & 0o777
                if m != expected_file:
                    bad.append(f"{rel} {m:o}")
        if bad:
            return "other defect", f"modes under umask 022: {', '.join(bad[:3])}"
        return "ok", "written files 0644"

    return check


CORPUS_FILES = {"tr.txt", "va.txt", "te.txt", "tiny.txt", "big.txt"}


# --- the independent ARPA scorer (KenLM's conventions) ----------------------------------------------
def read_arpa_table(path: str) -> tuple[dict, int]:
    """``({ngram tuple: (log10 p, log10 back-off)}, order)`` of an ARPA file (plain, gz, bz2 or xz)."""
    raw = open(path, "rb").read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    elif raw[:3] == b"BZh":
        raw = bz2.decompress(raw)
    elif raw[:6] == b"\xfd7zXZ\x00":
        raw = lzma.decompress(raw)
    table, n, order = {}, 0, 0
    for line in raw.decode("utf-8").splitlines():
        line = line.strip()
        m = re.match(r"\\(\d+)-grams:", line)
        if m:
            n = order = int(m.group(1))
            continue
        if not line or line.startswith("\\") or line.startswith("ngram ") or n == 0:
            continue
        parts = line.split()
        words = tuple(parts[1:1 + n])
        bow = float(parts[1 + n]) if len(parts) > 1 + n else 0.0
        table[words] = (float(parts[0]), bow)
    return table, order


def arpa_scores(path: str, sentences: list[list[str]]) -> list[float]:
    """Per-token log10 probabilities (every word and </s>) by plain back-off, as KenLM's query scores:
    one <s> of context, an unknown word is <unk> (log10 p = -100 when the model has none)."""
    table, order = read_arpa_table(path)
    has_unk = ("<unk>",) in table

    def lp(ctx: tuple, w: str) -> float:
        if ctx + (w,) in table:
            return table[ctx + (w,)][0]
        if not ctx:
            return -100.0
        return (table[ctx][1] if ctx in table else 0.0) + lp(ctx[1:], w)

    out = []
    for words in sentences:
        ctx: tuple = ("<s>",)
        for w in words + ["</s>"]:
            wid = w if (w,) in table and w != "<s>" else ("<unk>" if has_unk else w)
            out.append(lp(ctx[-(order - 1):] if order > 1 else (), wid))
            ctx = (ctx + (wid,))[-(max(order - 1, 1)):]
    return out


def arpa_reference(model: str, text: str):
    """Reference: the perplexity of ``text`` under ``model`` by :func:`arpa_scores`."""

    def ref(ctx: Ctx) -> float:
        sents = [ln.split() for ln in lines_of(ctx, text)]
        sc = arpa_scores(ctx.path(model), [s for s in sents if s])
        return 10 ** (-sum(sc) / len(sc))

    return ref


def mixture_reference(models: list[str], weights: list[float], text: str = "te.txt"):
    """Reference: ``sum_k w_k p_k`` per token, each model seeing the words through its own vocabulary
    (ARPA files by :func:`arpa_scores`; a neural run directory by the current library)."""

    def ref(ctx: Ctx) -> float:
        sents = [s for s in (ln.split() for ln in lines_of(ctx, text)) if s]
        per_model = []
        for m in models:
            if m.endswith(".arpa"):
                per_model.append([10 ** x for x in arpa_scores(ctx.path(m), sents)])
            else:
                per_model.append(_neural_probs(ctx.path(m), ctx.path(text)))
        mixed = [sum(w * p[i] for w, p in zip(weights, per_model)) for i in range(len(per_model[0]))]
        return math.exp(-sum(math.log(x) for x in mixed) / len(mixed))

    return ref


def _neural_probs(run_dir: str, text: str) -> list[float]:
    import numpy as np

    from sampledlm.data.corpus import load_ids
    from sampledlm.loader import load_model

    lm = load_model(run_dir)
    ids = np.asarray(load_ids(text, lm.vocab, cache=False))
    return [math.exp(x) for x in lm.logprobs(ids)]


# --- ARPA files for the cases ---------------------------------------------------------------------------
NO_UNK_ARPA = """
\\data\\
ngram 1=5
ngram 2=5

\\1-grams:
-1.0\t<s>\t-0.3
-0.5\ta\t-0.2
-0.7\tb\t-0.1
-0.6\t</s>
-1.3\tc\t-0.4

\\2-grams:
-0.2\t<s> a
-0.3\ta b
-0.4\tb </s>
-0.25\ta </s>
-0.15\tc a

\\end\\
"""
NO_UNK_TEXT = "a b\na zz b\nzz\nc a\nb c zz zz a\n"

IRSTLM_ARPA = """
\\data\\
ngram 1=5
ngram 2=7
ngram 3=5

\\1-grams:
-1.0\t</s>
-99\t<s>\t-0.5
-1.2\t<unk>\t-0.05
-0.6\ta\t-0.3
-0.7\tb\t-0.2

\\2-grams:
-2.0\t<s> <s>\t-0.4
-0.3\t<s> a\t-0.1
-0.9\t<s> b\t-0.25
-0.5\ta b\t-0.15
-0.8\ta a\t-0.12
-0.4\tb </s>
-0.45\tb a\t-0.11

\\3-grams:
-1.5\t<s> <s> a
-1.7\t<s> <s> b
-0.2\t<s> a b
-0.35\ta b </s>
-0.33\t<s> b a

\\end\\
"""
IRSTLM_TEXT = "a b\nb a b\na\nb\nzz a b\na a a b b\n"


def arpa_setup(name: str, text: str, test: str, test_text: str):
    def setup(ctx: Ctx) -> None:
        ctx.write(name, text)
        ctx.write(test, test_text)

    return setup


# --- commands with an old form --------------------------------------------------------------------------
def me_eval(model: str, test: str, *flags: str) -> dict:
    """``maxent eval``: now ``MODEL --test FILE``; before ``MODEL FILE``."""
    return {"command": ("maxent", "eval", model, "--test", test, *flags),
            "old": ("maxent", "eval", model, test, *flags)}


def me_train(train: str, valid: str, out: str, *flags: str) -> dict:
    """``maxent train``: now ``--train T --valid V -o M``; before ``T V -o M``."""
    return {"command": ("maxent", "train", "--train", train, "--valid", valid, "-o", out, *flags),
            "old": ("maxent", "train", train, valid, "-o", out, *flags)}


TINY = ("train", "--train", "tiny.txt", "--valid", "va.txt", "-o", "run", "-d", "8", "--hidden", "8", "--epochs", "1",
        "--threads", "1", "--optimizer", "adam", "--lr", "0.002")


def tiny_train(*flags: str, out: str = "run") -> tuple[str, ...]:
    cmd = list(TINY)
    cmd[cmd.index("run")] = out
    return tuple(cmd) + flags


# --- checks with more than one step ---------------------------------------------------------------------
def refused_or_same(reference, names=()):
    """Check: a refusal, or exit 0 with the reference number (the damage changed nothing that is used)."""
    same = same_number(reference, out_ppl, "perplexity", 1e-9, names)

    def check(ctx: Ctx) -> tuple[str, str]:
        if ctx.result.rc != 0:
            return error_category(ctx.result, names)
        return same(ctx)

    return check


def divergence_restartable(ctx: Ctx) -> tuple[str, str]:
    """Item 12: a run that diverges before its first checkpoint says so truthfully, and the same ``-o``
    trains again with a sane learning rate (no dead-end run directory)."""
    r = ctx.result
    if r.rc == 0:
        return "wrong result", "exit 0: a learning rate of 1e30 trained a model"
    cat, note = error_category(r, ("diverge",))
    if "intact" in r.stderr and not ctx.exists("run/checkpoint.json"):
        return "other defect", "says the last checkpoint is intact, but there is none"
    again = ctx.run(list(tiny_train()))
    if again.rc != 0:
        resume = ctx.run(["train", "--resume", "run"])
        if resume.rc != 0:
            return "other defect", f"dead end: the same -o is refused ({_last_line(again.stderr)[:80]}) and " \
                                   f"--resume too ({_last_line(resume.stderr)[:80]})"
    return cat, note + "; the same -o then trains"


def resume_without_checkpoint(ctx: Ctx) -> tuple[str, str]:
    """Item 12: ``--resume`` of a run with no checkpoint says to start again, and starting again works."""
    r = ctx.result
    if r.rc == 0:
        return "ok", "resumed"
    cat, note = error_category(r, ("run",))
    again = ctx.run(list(tiny_train()))
    if again.rc != 0:
        return "other defect", f"dead end: the same command is refused too ({_last_line(again.stderr)[:100]})"
    return cat, note + "; the same command then trains"


def drop_checkpoints(run: str):
    def setup(ctx: Ctx) -> None:
        ctx.run(list(tiny_train()))
        for n in ("checkpoint.json", "checkpoints", "model.safetensors", "objective.safetensors", "metrics.jsonl"):
            p = ctx.path(run, n)
            if os.path.isdir(p):
                shutil.rmtree(p)
            elif os.path.exists(p):
                os.remove(p)

    return setup


def resume_keeps_numbers(run: str, fixture: str):
    """Item 14: ``--resume`` of a finished binary run is refused, or changes nothing: the model's
    perplexity stays the uninterrupted run's (calibrated once)."""

    def check(ctx: Ctx) -> tuple[str, str]:
        e = ctx.run(["eval", run, "--test", "te.txt", "--json"])
        got, want = ppl_of(last_json(e.stdout)), ppl_of(ctx.fx.ref(fixture))
        if abs(got - want) > 1e-9 * want:
            return "wrong result", f"after --resume: perplexity {got:.4f}, before {want:.4f} (" + \
                ("exit 0)" if ctx.result.rc == 0 else "refused)")
        if ctx.result.rc != 0:
            return error_category(ctx.result, (run, "finished"))
        return "ok", f"exit 0, perplexity unchanged {got:.4f}"

    return check


def one_file_model(run: str, fixture: str):
    """Item 14: the final binary model is one file holding the weights and the calibrated objective
    (``finalized``), so no kill can separate them; and it evaluates to the reference."""

    def check(ctx: Ctx) -> tuple[str, str]:
        from safetensors import safe_open

        r = ctx.result
        if r.rc != 0:
            return error_category(r)
        with safe_open(ctx.path(run, "model.safetensors"), framework="np") as f:
            keys, meta = list(f.keys()), dict(f.metadata() or {})
        if not any(k.startswith("objective/") for k in keys) or meta.get("finalized") != "true" or \
                ctx.exists(f"{run}/objective.safetensors"):
            return "other defect", "weights and calibrated objective in separate files (not written as one unit)"
        return "ok", "one file: weights + calibrated objective, finalized"

    return check


def config_unchanged_refusal(ctx: Ctx) -> tuple[str, str]:
    """Item 15: a refused ``--resume`` leaves config.json as it was (the lost-file check compares bytes)."""
    r = ctx.result
    if r.rc == 0:
        return "ok", "accepted (trained on)"
    return error_category(r, ("--resume", "--epochs", "--lr", "finished", "ffnn"))


def start_writer(argv_for: Callable[[Side], list[str]], ready: Callable[[Ctx], bool], timeout: float = 120):
    """A setup: start a first process (``argv_for(side)``) and wait until ``ready``; the case's command is
    the second process."""

    def setup(ctx: Ctx) -> None:
        import time

        from .faults_engine import start_command

        ctx.bg = start_command(ctx.side, argv_for(ctx.side), ctx.dir, ctx.cache)
        t0 = time.perf_counter()
        while not ready(ctx) and ctx.bg.proc.poll() is None and time.perf_counter() - t0 < timeout:
            time.sleep(0.02)

    return setup


def second_writer_stopped(out: str, fixture: str | None):
    """Item 16: the second process on the same output stops with a clear message, and the first one
    finishes with the numbers of an undisturbed run."""

    def check(ctx: Ctx) -> tuple[str, str]:
        first = ctx.bg.wait(timeout=600)
        ctx.results.append(first)
        r = ctx.result
        if first.rc != 0:
            return ("lost file" if r.rc == 0 else "other defect"), \
                f"the first process failed: {_last_line(first.stderr)[:120]}"
        if r.rc == 0:
            return "lost file", "the second process also wrote into the directory the first was writing"
        cat, note = error_category(r, ("another", "lock", "busy", "already", out))
        if fixture is not None:
            e = ctx.run(["eval", out, "--test", "te.txt", "--json"] if fixture != "maxent"
                        else (["maxent", "eval", out, "te.txt", "--json"]))
            if e.rc != 0:
                return "lost file", f"the first run no longer loads: {_last_line(e.stderr)[:120]}"
            got, want = ppl_of(last_json(e.stdout)), ppl_of(ctx.fx.ref(fixture))
            if abs(got - want) > 1e-9 * want:
                return "wrong result", f"the first run's perplexity {got:.4f}, undisturbed {want:.4f}"
        return cat, note

    return check


def demo_models_load(ctx: Ctx) -> tuple[str, str]:
    """Item 17: every model the demo saved (run directories, ARPA files) opens with ``sampledlm eval``."""
    r = ctx.result
    if r.rc != 0:
        return error_category(r, ("demo",))
    models = sorted(n for n in os.listdir(ctx.path("d")) if n.endswith(".arpa") or os.path.isdir(ctx.path("d", n)))
    bad = []
    for m in models:
        e = ctx.run(["eval", f"d/{m}", "--test", "d/test.txt", "--json"])
        if e.rc != 0:
            bad.append(f"{m}: {_last_line(e.stderr)[:80]}")
    if bad:
        return "other defect", f"{len(bad)} of {len(models)} saved models do not open with eval: {'; '.join(bad[:2])}"
    return "ok", f"all {len(models)} saved models open with eval ({', '.join(models)})"


def user_file_intact(trigger_file: str, original: bytes):
    def trigger(ctx: Ctx) -> bool:
        try:
            return open(ctx.path(trigger_file), "rb").read() != original
        except OSError:
            return True

    return trigger


def new_file_in(directory: str, besides: set[str]):
    def trigger(ctx: Ctx) -> bool:
        try:
            return bool(set(os.listdir(ctx.path(directory))) - besides)
        except OSError:
            return False

    return trigger


def foreign_dir_refused(ctx: Ctx) -> tuple[str, str]:
    """Item 10: the demo refuses a directory holding someone else's files (it does not write into it)."""
    r = ctx.result
    if r.sent is not None:
        return "other defect", "started writing its corpus and models into a directory holding other files"
    if r.rc == 0:
        return "other defect", "wrote into a directory holding other files"
    return error_category(r, ("d", "not empty"))


def interrupted_then_resumed(out: str, fixture: str):
    """Item 22: Ctrl-C during training stops with a message saying how to resume; ``--resume`` then
    reaches the numbers of the uninterrupted run."""

    def check(ctx: Ctx) -> tuple[str, str]:
        r = ctx.result
        if r.sent is None:
            return "skipped", "training ended before the signal could be sent"
        if r.rc == 0:
            return "other defect", "exit 0 after Ctrl-C"
        res = ctx.run(["train", "--resume", out], timeout=600)
        if res.rc != 0:
            return "other defect", f"--resume after Ctrl-C failed: {_last_line(res.stderr)[:120]}"
        e = ctx.run(["eval", out, "--test", "te.txt", "--json"])
        got, want = ppl_of(last_json(e.stdout)), ppl_of(ctx.fx.ref(fixture))
        if abs(got - want) > 1e-9 * want:
            return "wrong result", f"resumed after Ctrl-C: test perplexity {got:.4f}, uninterrupted {want:.4f}"
        if "--resume" not in r.stderr:
            return "other defect", f"the message does not say how to resume ({_last_line(r.stderr)[:80]}); " \
                                   f"--resume then gives the uninterrupted numbers"
        return "ok", f"says how to resume ({_last_line(r.stderr)[:60]}); resumed to the same numbers"

    return check


def interrupted_cleanly(out: str):
    """Ctrl-C during a command without checkpoints: no traceback, and no half-written output."""

    def check(ctx: Ctx) -> tuple[str, str]:
        r = ctx.result
        if r.sent is None:
            return "skipped", "the command ended before the signal could be sent"
        if r.rc == 0:
            return "ok", "finished before it saw the signal"
        p = ctx.path(out)
        if os.path.isdir(p) and not has_config(p) and set(os.listdir(p)) - {".lock"}:
            return "leftover", f"left an incomplete {out}/ ({', '.join(sorted(os.listdir(p))[:3])})"
        return ("clean error" if len(r.lines()) <= 3 else "unclear error"), _last_line(r.stderr) or f"rc {r.rc}"

    return check


def help_has(pattern: str, what: str):
    def check(ctx: Ctx) -> tuple[str, str]:
        r = ctx.result
        if r.rc != 0:
            return error_category(r)
        if not re.search(pattern, r.stdout):
            return "other defect", f"help lacks {what}"
        return "ok", f"help shows {what}"

    return check


def snippet_ok(ctx: Ctx) -> tuple[str, str]:
    """Snippets print one JSON object ``{"ok": bool, "note": str}``."""
    r = ctx.result
    if r.rc != 0:
        return error_category(r)
    d = last_json(r.stdout)
    return ("ok" if d["ok"] else "other defect"), d["note"]


def beats_kn3(ctx: Ctx) -> tuple[str, str]:
    """Item 24: the README's quick-start FFNN (default flags, 2 epochs) is worth having on the built-in corpus: it
    trains (test perplexity within 3x KN3's) and improves on KN3 when the two are combined, as the quick start
    combines them. (Two epochs of a 65k-word corpus do not make it beat KN3 alone; docs/neural.md, Defaults.)"""
    r = ctx.result
    if r.rc != 0:
        return error_category(r)
    ctx.run(["ngram", "train", "--train", "big.txt", "--order", "3", "-o", "kn3.arpa"])
    kn = ctx.run(["ngram", "eval", "kn3.arpa", "--test", "te.txt", "--json"])
    nn = ctx.run(["eval", "ffnn3", "--test", "te.txt", "--json"])
    mix = ctx.run(["eval", "ffnn3", "--test", "te.txt", "--mix", "kn3.arpa", "--weights", "auto", "--json"])
    a, b = ppl_of(last_json(nn.stdout)), ppl_of(last_json(kn.stdout))
    m = ppl_of(last_json(mix.stdout)) if mix.rc == 0 else math.inf
    seen = f"default FFNN {a:.1f}, KN3 {b:.1f}, both (EM weights) {m:.1f}"
    if a >= 3 * b or m >= b:
        return "other defect", seen + ": the FFNN is not within 3x of KN3, or the mixture does not improve on KN3"
    return "ok", seen


# --- python snippets (items 21-23) ----------------------------------------------------------------------
BACKEND_SNIPPET = r"""
import io, json, os, matplotlib
before = matplotlib.get_backend()
try:
    from sampledlm.neural.trainer import plot_learning_curve
except ImportError:
    from sampledlm.train import plot_learning_curve
plot_learning_curve([{"epoch": 1, "train_loss": 5.0, "valid_ppl": 200.0}, {"epoch": 2, "train_loss": 4.0,
                     "valid_ppl": 150.0}], os.path.abspath("curve.png"))
try:
    from benchmarks.report import new_figure
    fig, ax = new_figure(); ax.plot([1, 2]); fig.savefig(io.BytesIO(), format="png")
except ImportError:  # the lab's figures are not importable from a case directory; older code had them inside
    try:
        from sampledlm.experiments.report import pyplot
        plt = pyplot(); fig = plt.figure(); plt.plot([1, 2]); fig.savefig(io.BytesIO(), format="png")
    except ImportError:
        pass
after = matplotlib.get_backend()
print(json.dumps({"ok": before == after, "note": f"backend {before} -> {after}"}))
"""

HELP_SNIPPET = r"""
import json, re, click
from sampledlm.cli import cli
texts = {}
def walk(cmd, path):
    ctx = click.Context(cmd, info_name=" ".join(path))
    texts[" ".join(path)] = cmd.get_help(ctx)
    if isinstance(cmd, click.Group):  # list_commands/get_command: the top level loads its commands lazily
        for name in cmd.list_commands(ctx):
            walk(cmd.get_command(ctx, name), path + [name])
walk(cli, ["sampledlm"])
bad = {k: m.group(0) for k, t in texts.items() for m in [re.search(r"seed 0\d\d|§\s*\d|issue \d+", t)] if m}
found = ", ".join(f"{k}: {v}" for k, v in bad.items()) or "none"
print(json.dumps({"ok": not bad, "note": f"{len(texts)} help texts; internal references: {found}"}))
"""

PNG_SNIPPET = r"""
import hashlib, json, os, sys
d = os.path.join(sys.argv[1], "docs", "results")
seen, dup = {}, []
for n in sorted(os.listdir(d)):
    if n.endswith(".png"):
        h = hashlib.sha1(open(os.path.join(d, n), "rb").read()).hexdigest()
        if h in seen:
            dup.append(f"{n} = {seen[h]}")
        seen.setdefault(h, n)
print(json.dumps({"ok": not dup, "note": f"{len(seen) + len(dup)} pictures; identical: " + (", ".join(dup) or "none")}))
"""


# --- item 34: the defects of the 896-case campaign (setups and checks) ------------------------------------
def fifo(name: str, src: str):
    """A setup: ``name`` is a named pipe that a thread fills once with ``src``'s bytes when the command opens it
    (what a shell's ``<(cat src)`` gives); with no reader within two minutes the thread gives up."""

    def setup(ctx: Ctx) -> None:
        import threading

        os.mkfifo(ctx.path(name))
        threading.Thread(target=_fill_fifo, args=(ctx.path(name), ctx.read(src, "rb")), daemon=True).start()

    setup.__doc__ = f"{name}: a named pipe of {src}"
    return setup


def _fill_fifo(path: str, data: bytes, wait: float = 120.0) -> None:
    import errno
    import time

    deadline = time.monotonic() + wait
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as e:  # ENXIO: no reader yet; anything else (the directory removed): give up
            if e.errno != errno.ENXIO or time.monotonic() > deadline:
                return
            time.sleep(0.01)
    os.set_blocking(fd, True)
    with contextlib.suppress(OSError), os.fdopen(fd, "wb") as f:
        f.write(data)


def nbest_lists(name: str, upper: bool = False, n: int = 10, src: str = "te.txt"):
    """A setup: JSON n-best lists of the first ``n`` lines of ``src``, three hypotheses each (the line, the line
    less its last word, the line with its last word twice), the line as reference; all upper case if asked."""

    def setup(ctx: Ctx) -> None:
        out = []
        for k, line in enumerate(lines_of(ctx, src)[:n]):
            w = (line.upper() if upper else line).split()
            hyps = [{"words": " ".join(v), "am": -1.0 * i, "lm": -2.0} for i, v in enumerate([w, w[:-1] or w,
                                                                                             w + w[-1:]])]
            out.append(json.dumps({"id": f"u{k}", "ref": " ".join(w), "hyps": hyps}) + "\n")
        ctx.write(name, "".join(out))

    return setup


def am_true(ctx: Ctx) -> None:
    """am.jsonl: one utterance whose first hypothesis has ``"am": true`` (a JSON boolean)."""
    w = lines_of(ctx)[0].split()
    ctx.write("am.jsonl", json.dumps({"id": "u0", "hyps": [{"words": " ".join(w), "am": True, "lm": -2.0},
                                                         {"words": " ".join(w[:-1]), "am": -1.0, "lm": -2.0}]}) + "\n")


def kaldi_without_ac_cost(ctx: Ctx) -> None:
    """kd/: a Kaldi n-best directory with text and lm_cost but no ac_cost."""
    lines = lines_of(ctx)[:3]
    ctx.write("kd/text", "".join(f"u-{i + 1} {ln}\n" for i, ln in enumerate(lines)))
    ctx.write("kd/lm_cost", "".join(f"u-{i + 1} {10.0 + i}\n" for i in range(len(lines))))


def lowercase_run(ctx: Ctx) -> None:
    """lower/: a tiny FFNN trained on tr.txt with --lowercase (the vocabulary of k3.arpa); te-up.txt: te.txt in
    upper case."""
    ctx.run(list(tiny_train("--train", "tr.txt", "--lowercase", out="lower")))
    ctx.write("te-up.txt", ctx.read("te.txt").upper())


def weights_of_another_vocabulary(ctx: Ctx) -> None:
    """ffnn/model.safetensors replaced by that of a run with the fixture's settings on tr.txt with one word
    renamed everywhere: another vocabulary of the same size, tensors of the same shapes."""
    ctx.write("tr2.txt", re.sub(r"\bobject\b", "zzqq", ctx.read("tr.txt")))
    argv = list(fixture_commands(ctx.side.old)["ffnn"][0])
    for flag, value in (("--train", "tr2.txt"), ("-o", "other"), ("--epochs", "1")):
        argv[argv.index(flag) + 1] = value
    ctx.run(argv)
    shutil.copy(ctx.path("other", "model.safetensors"), ctx.path("ffnn", "model.safetensors"))


def shifted_binary(ctx: Ctx) -> None:
    """k3.bin: the binary directory of k3.arpa with every bigram's log10 probability 0.1 lower (plausible numbers,
    the same sizes)."""
    import numpy as np

    ctx.run(["ngram", "build-binary", "k3.arpa", "-o", "k3.bin"])
    p = ctx.path("k3.bin", "logp_2.npy")
    np.save(p, np.load(p) - 0.1)


def one_error(names: tuple[str, ...] = ()):
    """Check: a refusal said once (no second error at exit, as Python's 'Exception ignored ...' after a failed
    flush of standard output, exit 120); exit 0 lost the output without a word."""

    def check(ctx: Ctx) -> tuple[str, str]:
        r = ctx.result
        if r.rc == 0:
            return "wrong result", "exit 0: the output was lost without a word"
        if "Exception ignored" in r.stderr or r.rc == 120:
            return "unclear error", f"a second error at exit (rc {r.rc}): {_last_line(r.stderr)}"
        return error_category(r, names)

    return check


def same_lm_scores(out: str, ref_argv: list[str], ref_out: str):
    """Check: the LM scores (``lm_new``) of the lists the command wrote to ``out`` equal those ``ref_argv`` writes
    to ``ref_out`` (the same lists written another way)."""

    def check(ctx: Ctx) -> tuple[str, str]:
        r = ctx.result
        if r.rc != 0:
            return error_category(r)
        ref = ctx.run(ref_argv)
        if ref.rc != 0:
            return "wrong result", f"the reference run failed: {_last_line(ref.stderr)}"
        got, want = (sorted(h["lm_new"] for ln in lines_of(ctx, name) for h in json.loads(ln)["hyps"])
                     for name in (out, ref_out))
        bad = [(a, b) for a, b in zip(got, want) if not math.isclose(a, b, rel_tol=1e-9)]
        if len(got) != len(want) or bad:
            a, b = bad[0] if bad else (len(got), len(want))
            return "wrong result", f"LM scores differ from {ref_out}'s ({len(bad)} of {len(want)}; {a:.4f} vs {b:.4f})"
        return "ok", f"{len(got)} LM scores = {ref_out}'s"

    return check


def oov_share_reported(ctx: Ctx) -> tuple[str, str]:
    """Check: rescore reports the words outside the model's vocabulary (JSON summary) and warns with their share."""
    r = ctx.result
    if r.rc != 0:
        return error_category(r)
    try:
        d = last_json(r.stdout)
    except ValueError as e:
        return "wrong result", f"no JSON summary ({e})"
    share = re.search(r"[0-9.]+% of the hypothesis words", r.stderr)
    if "oov_words" not in d or share is None:
        return "other defect", "exit 0 without the share of hypothesis words outside the model's vocabulary"
    return "ok", f"oov_words {d['oov_words']} of {d.get('hypothesis_words')}; warns: {share.group(0)}"


LEGACY_EVAL_KEYS = ("interpolated_ppl", "component_ppl", "ngram_ppl", "weight")


def mixture_ppl(models: list[str], weights: list[float]):
    """Check: eval --json's ``ppl`` is the mixture's (:func:`mixture_reference`), and no legacy key is left."""
    reference = mixture_reference(models, weights)

    def check(ctx: Ctx) -> tuple[str, str]:
        r = ctx.result
        if r.rc != 0:
            return error_category(r)
        try:
            d = last_json(r.stdout)
        except ValueError as e:
            return "wrong result", f"no JSON summary ({e})"
        if not isinstance(d.get("ppl"), (int, float)):
            return "wrong result", "no ppl in the JSON summary"
        got, want = float(d["ppl"]), reference(ctx)
        if abs(got - want) > 1e-5 * want:
            return "wrong result", f"ppl {got:.6g}, the mixture's {want:.6g}"
        legacy = [k for k in LEGACY_EVAL_KEYS if k in d]
        if legacy:
            return "other defect", f"ppl {got:.6g} = the mixture's, but legacy keys {', '.join(legacy)}"
        return "ok", f"ppl {got:.6g} = the mixture's (reference)"

    return check


SERVE_HEADER_SNIPPET = r"""
import json, re, signal, socket, subprocess, sys
srv = subprocess.Popen([sys.executable, "-m", "sampledlm", "serve", "k3.arpa", "--port", "0"], stderr=subprocess.PIPE,
                       stdout=subprocess.DEVNULL, text=True)
log, where = [], None
while where is None:
    line = srv.stderr.readline()
    if not line:
        break
    log.append(line)
    m = re.search(r"listening on http://([^/\s]+):(\d+)", line)
    where = (m.group(1), int(m.group(2))) if m else None
answer = b""
if where is not None:
    with socket.create_connection(where, timeout=30) as s:
        try:
            s.sendall(b"GET /health HTTP/1.1\r\nX-Big: " + b"a" * 200_000 + b"\r\n\r\n")
        except OSError:
            pass
        try:
            while chunk := s.recv(65536):
                answer += chunk
        except OSError:
            pass
srv.send_signal(signal.SIGTERM)
try:
    log.append(srv.communicate(timeout=60)[1])
except subprocess.TimeoutExpired:
    srv.kill()
    log.append(srv.communicate()[1])
sys.stderr.write("".join(log))
head, _, body = answer.partition(b"\r\n\r\n")
lines = head.decode("latin-1").split("\r\n")
status = lines[0].split()[1] if len(lines[0].split()) > 1 else "no answer"
kind = next((ln.split(":", 1)[1].strip() for ln in lines[1:] if ln.lower().startswith("content-type:")), "no type")
try:
    error = json.loads(body).get("error", "")
except (ValueError, AttributeError):
    error = ""
ok = status == "431" and "json" in kind and bool(error) and "Traceback" not in "".join(log)
print(json.dumps({"ok": ok, "note": f"a 200 KB header: {status}, {kind}, error {error[:60]!r}; server log "
                                    + ("with a traceback" if "Traceback" in "".join(log) else "without a traceback")}))
"""


# --- the cases --------------------------------------------------------------------------------------------
def C(id, item, what, command, check, **kw) -> Case:
    if isinstance(command, dict):
        kw.setdefault("old", command["old"])
        command = command["command"]
    return Case(id, item, what, tuple(command), check, **kw)


K3_EVAL = ("ngram", "eval", "k3.arpa", "--test")
NGRAM_TRAIN = ("ngram", "train", "--train", "tr.txt", "--order", "3")
CRLF = lambda b: b.replace(b"\n", b"\r\n")  # noqa: E731
CR = lambda b: b.replace(b"\n", b"\r")  # noqa: E731
BOM = lambda b: b"\xef\xbb\xbf" + b  # noqa: E731


def _markers(b: bytes) -> bytes:
    out = []
    for ln in b.decode().splitlines():
        w = ln.split()
        mid = len(w) // 2
        out.append(" ".join(["<s>", *w[:mid], "</s>", *w[mid:], "</s>"]))
    return ("\n".join(out) + "\n").encode()


def _vowels(b: bytes) -> bytes:
    return b.replace(b"e", b"a")


def _arpa_digit(b: bytes) -> bytes:
    """Change log probabilities of the same length (another number, the same size)."""
    return re.sub(rb"^-0\.(\d)", lambda m: b"-0." + str((int(m.group(1)) + 3) % 10).encode(), b, count=200, flags=re.M)


def _huge_line(b: bytes) -> bytes:
    words = b.split()
    return b" ".join(words * (600_000 // max(len(words), 1) + 1)) + b"\n"


def _bad_utf8(b: bytes) -> bytes:
    lines = b.split(b"\n")
    lines[7] = lines[7] + b" \xff\xfe broken"
    return b"\n".join(lines)


def _binary(_: bytes) -> bytes:
    return random.Random(5).randbytes(65536)


def _header_overflow(b: bytes) -> bytes:
    return re.sub(rb"ngram 2=\d+", b"ngram 2=99999999999999999999999", b, count=1)


def _header_wrong(b: bytes) -> bytes:
    return re.sub(rb"ngram 2=(\d+)", lambda m: b"ngram 2=" + str(int(m.group(1)) + 7).encode(), b, count=1)


def _nan_prob(b: bytes) -> bytes:
    return re.sub(rb"\n-[0-9.]+(\t[^\t\n<]+\t)", rb"\nnan\1", b, count=1)


def _gptr_swap(a) -> None:
    import numpy as np

    i = int(np.flatnonzero(np.diff(a) > 0)[5])
    a[i], a[i + 1] = a[i + 1], a[i]


def _nan_first(a) -> None:
    a.reshape(-1)[0] = float("nan")


def _output_bias(names: list[str]) -> str:
    return next(n for n in names if n.endswith("output.bias"))


def _maxent_section(config: dict, path: tuple) -> dict:
    """The maxent settings of a config.json (the ``maxent`` section now, the top level before), then ``path``."""
    d = config["maxent"] if isinstance(config.get("maxent"), dict) else config
    for k in path:
        d = d[k]
    return d


def cache_written(ctx: Ctx) -> bool:
    """The command has read its text: the corpus cache (its ``$SAMPLEDLM_CACHE``) holds a file. A signal
    sent then reaches the command's own work, not Python's start-up imports."""
    for dirpath, _, files in os.walk(ctx.cache):
        if files and "/log-" not in dirpath + "/" and not os.path.basename(dirpath).startswith("log-"):
            return True
    return False


def _same_output_as(ctx: Ctx, ref_argv: list[str], out: str, ref_out: str) -> tuple[str, str]:
    r = ctx.result
    if r.rc != 0:
        return error_category(r)
    ctx.run(ref_argv)
    if ctx.read(out, "rb") != ctx.read(ref_out, "rb"):
        return "wrong result", f"{out} differs from {ref_out}"
    return "ok", f"{out} = {ref_out}"


BIG_NGRAM = ("ngram", "train", "--train", "big.txt", "--order", "5", "-o", "k5.arpa")

CASES: list[Case] = [
    # ---- 1: per-sentence scores from a fresh state ----
    C("01a", 1, "GRU --per-sentence: the 5th line of a file vs that line alone",
      ("eval", "gru", "--test", "five.txt", "--per-sentence"), fifth_vs_alone(["eval", "gru", "--test", "five.txt",
                                                                                 "--per-sentence"]),
      setup=five_lines, needs=("gru",)),
    C("01c", 1, "maxent through eval --per-sentence: the 5th line vs alone",
      ("eval", "melm", "--test", "five.txt", "--per-sentence"),
      fifth_vs_alone(["eval", "melm", "--test", "five.txt", "--per-sentence"]), setup=five_lines, needs=("maxent",)),
    C("01d", 1, "n-gram --per-sentence: the 5th line vs alone", (*K3_EVAL, "five.txt", "--per-sentence"),
      fifth_vs_alone([*K3_EVAL, "five.txt", "--per-sentence"], tol=2e-6), setup=five_lines, needs=("k3",)),

    # ---- 2: vocabulary fingerprints, sizes and checksums ----
    C("02a", 2, "maxent vocab.txt with the lines after the first shuffled", me_eval("melm", "te.txt"),
      refused(("vocab",)), setup=shuffled_vocab("melm"), needs=("maxent",)),
    C("02b", 2, "FFNN vocab.txt with the lines after the second shuffled", ("eval", "ffnn", "--test", "te.txt"),
      refused(("vocab",)), setup=shuffled_vocab("ffnn", 2), needs=("ffnn",)),
    C("02d", 2, "maxent vocab.txt with one word renamed (same size)", me_eval("melm", "te.txt"),
      refused(("vocab",)), setup=renamed_word("melm"), needs=("maxent",)),
    C("02f", 2, "maxent config.json num_words one less", me_eval("melm", "te.txt"),
      refused(("num_words", "config.json", "vocab")),
      setup=json_edit("melm/config.json", lambda d: d["maxent"].__setitem__("num_words", d["maxent"]["num_words"] - 1)
                      if isinstance(d.get("maxent"), dict) else d.__setitem__("num_words", d["num_words"] - 1)),
      needs=("maxent",)),
    C("02h", 2, "FFNN model.safetensors cut in half", ("eval", "ffnn", "--test", "te.txt"),
      refused(("model.safetensors",)), setup=truncate("ffnn/model.safetensors"), needs=("ffnn",)),
    C("02i", 2, "maxent weights cut in half", me_eval("melm", "te.txt"), refused(("safetensors",)),
      setup=truncate(maxent_weights), needs=("maxent",)),
    C("02j", 2, "FFNN model.safetensors with one byte flipped", ("eval", "ffnn", "--test", "te.txt", "--json"),
      refused_or_same(ref_of("ffnn"), ("model.safetensors", "checksum")), setup=flip_byte("ffnn/model.safetensors"),
      needs=("ffnn",)),
    C("02k", 2, "maxent weights with one byte flipped", me_eval("melm", "te.txt", "--json"),
      refused_or_same(ref_of("maxent"), ("safetensors", "checksum")), setup=flip_byte(maxent_weights),
      needs=("maxent",)),
    C("02l", 2, "FFNN output bias holding a NaN (checksum recomputed)", ("eval", "ffnn", "--test", "te.txt", "--json"),
      robust(("model.safetensors", "nan", "NaN", "finite")),
      setup=tamper_neural("ffnn", _output_bias, lambda t, n: set_element(3, float("nan"))(t[n])), needs=("ffnn",)),
    C("02m", 2, "maxent theta holding a NaN (checksum recomputed)", me_eval("melm", "te.txt", "--json"),
      robust(("safetensors", "nan", "NaN", "finite")), setup=tamper_maxent("theta", _nan_first), needs=("maxent",)),

    # ---- 3: standard input is read once ----
    C("03a", 3, "n-gram eval --test - (stdin) vs the file", (*K3_EVAL, "-", "--json"),
      same_numbers("k3"), stdin="te.txt", needs=("k3",), quick=True),
    C("03b", 3, "FFNN eval --test - (stdin) vs the file", ("eval", "ffnn", "--test", "-", "--json"),
      same_numbers("ffnn"), stdin="te.txt", needs=("ffnn",)),
    C("03c", 3, "maxent eval of stdin vs the file", me_eval("melm", "-", "--json"),
      same_numbers("maxent"), stdin="te.txt", needs=("maxent",)),
    C("03d", 3, "ngram train --train - (stdin) vs the file", ("ngram", "train", "--train", "-", "--order", "3", "-o",
                                                            "stdin.arpa"),
      same_file("stdin.arpa", "k3.arpa"), stdin="tr.txt", needs=("k3",)),
    C("03e", 3, "stats of stdin vs the file", ("stats", "-", "--json"), stats_equal("te.txt"), stdin="te.txt"),

    # ---- 4: compressed files ----
    C("04a", 4, "ngram train -o k3.arpa.gz, then read it back", (*NGRAM_TRAIN, "-o", "k3.arpa.gz"),
      magic_and_ppl("k3.arpa.gz", b"\x1f\x8b", "k3")),
    C("04b", 4, "ngram train -o k3.arpa.bz2, then read it back", (*NGRAM_TRAIN, "-o", "k3.arpa.bz2"),
      magic_and_ppl("k3.arpa.bz2", b"BZh", "k3")),
    C("04c", 4, "ngram train -o k3.arpa.xz, then read it back", (*NGRAM_TRAIN, "-o", "k3.arpa.xz"),
      magic_and_ppl("k3.arpa.xz", b"\xfd7zXZ\x00", "k3")),
    C("04d", 4, "n-gram eval of te.txt.gz vs te.txt", (*K3_EVAL, "te.txt.gz", "--json"),
      same_numbers("k3"), setup=derive("te.txt.gz", gzip.compress), needs=("k3",)),
    C("04f", 4, "FFNN eval of te.txt.bz2 vs te.txt", ("eval", "ffnn", "--test", "te.txt.bz2", "--json"),
      same_numbers("ffnn"), setup=derive("te.txt.bz2", bz2.compress), needs=("ffnn",)),
    C("04g", 4, "maxent eval of te.txt.gz vs te.txt", me_eval("melm", "te.txt.gz", "--json"),
      same_numbers("maxent"), setup=derive("te.txt.gz", gzip.compress),
      needs=("maxent",)),
    C("04i", 4, "truncated te.txt.gz", (*K3_EVAL, "te.txt.gz"), refused(("te.txt.gz",)),
      setup=derive("te.txt.gz", lambda b: gzip.compress(b)[:-200]), needs=("k3",), quick=True),
    C("04j", 4, "te.txt.gz with a damaged deflate stream (zlib.error)", (*K3_EVAL, "te.txt.gz"),
      refused(("te.txt.gz",)), setup=derive("te.txt.gz", lambda b: zlib_damaged(gzip.compress(b * 20, mtime=0))),
      needs=("k3",)),
    C("04l", 4, "k3.arpa.gz cut to 300 bytes", ("ngram", "eval", "short.arpa.gz", "--test", "te.txt"),
      refused(("short.arpa.gz",)), setup=derive("short.arpa.gz", lambda b: gzip.compress(b)[:300], "k3.arpa"),
      needs=("k3",)),
    C("04m", 4, "vocab of tr.txt.gz vs tr.txt", ("vocab", "tr.txt.gz", "-o", "v-gz.txt"),
      lambda ctx: _same_output_as(ctx, ["vocab", "tr.txt", "-o", "v-plain.txt"], "v-gz.txt", "v-plain.txt"),
      setup=derive("tr.txt.gz", gzip.compress, "tr.txt")),

    # ---- 5: an ARPA file without <unk>; interpolating different vocabularies ----
    C("05a", 5, "ARPA without <unk>, test text with unknown words (vs KenLM's rule: log10 p = -100)",
      ("ngram", "eval", "nounk.arpa", "--test", "t.txt", "--json"),
      same_number(arpa_reference("nounk.arpa", "t.txt"), out_ppl, "perplexity", 1e-5, ("<unk>",)),
      setup=arpa_setup("nounk.arpa", NO_UNK_ARPA, "t.txt", NO_UNK_TEXT)),
    C("05b", 5, "eval k3.arpa --interpolate an ARPA of another vocabulary, weights 0.5,0.5",
      ("eval", "k3.arpa", "--test", "te.txt", "--interpolate", "kv.arpa", "--weights", "0.5,0.5", "--json"),
      same_number(mixture_reference(["k3.arpa", "kv.arpa"], [0.5, 0.5]), out_ppl, "perplexity", 1e-6,
                  ("vocabular",)),
      setup=lambda ctx: ctx.run(["ngram", "train", "--train", "va.txt", "--order", "3", "-o", "kv.arpa"]),
      needs=("k3",)),
    C("05c", 5, "FFNN --interpolate an ARPA of another vocabulary, weight 0.5",
      ("eval", "ffnn", "--test", "te.txt", "--interpolate", "kv.arpa", "--weights", "0.5,0.5", "--json"),
      same_number(mixture_reference(["ffnn", "kv.arpa"], [0.5, 0.5]), out_ppl, "perplexity", 1e-5, ("vocabular",)),
      old=("eval", "ffnn", "--test", "te.txt", "--interpolate", "kv.arpa", "--weight", "0.5", "--json"),
      setup=lambda ctx: ctx.run(["ngram", "train", "--train", "va.txt", "--order", "3", "-o", "kv.arpa"]),
      needs=("ffnn",)),

    # ---- 6: line ends, BOM, sentence markers; odd input files ----
    C("06a", 6, "stats of a file with lone CR line ends (vs LF)", ("stats", "te-cr.txt", "--json"),
      stats_equal("te.txt"), setup=derive("te-cr.txt", CR), quick=True),
    C("06b", 6, "n-gram eval of CR-ended te.txt", (*K3_EVAL, "te-cr.txt", "--json"),
      same_numbers("k3"), setup=derive("te-cr.txt", CR), needs=("k3",)),
    C("06d", 6, "n-gram eval of te.txt with a UTF-8 BOM", (*K3_EVAL, "te-bom.txt", "--json"),
      same_numbers("k3"), setup=derive("te-bom.txt", BOM), needs=("k3",)),
    C("06e", 6, "vocab of a training file with a BOM (vs without)", ("vocab", "tr-bom.txt", "-o", "v-bom.txt"),
      lambda ctx: _same_output_as(ctx, ["vocab", "tr.txt", "-o", "v.txt"], "v-bom.txt", "v.txt"),
      setup=derive("tr-bom.txt", BOM, "tr.txt")),
    C("06f", 6, "literal <s> and </s> inside lines (documented: dropped)", (*K3_EVAL, "te-markers.txt", "--json"),
      same_numbers("k3"), setup=derive("te-markers.txt", _markers), needs=("k3",)),
    C("06g", 6, "FFNN eval of BOM + CRLF te.txt", ("eval", "ffnn", "--test", "te-bc.txt", "--json"),
      same_numbers("ffnn"), setup=derive("te-bc.txt", lambda b: BOM(CRLF(b))),
      needs=("ffnn",)),
    C("06i", 6, "invalid UTF-8 on line 8", (*K3_EVAL, "te-bad.txt"), refused(("te-bad.txt",)),
      setup=derive("te-bad.txt", _bad_utf8), needs=("k3",)),
    C("06j", 6, "64 KiB of random bytes as test text", ("eval", "ffnn", "--test", "noise.bin"),
      refused(("noise.bin",)), setup=derive("noise.bin", _binary), needs=("ffnn",)),
    C("06l", 6, "one line of 600,000 words", (*K3_EVAL, "huge.txt", "--json"), robust(("huge.txt",)),
      setup=derive("huge.txt", _huge_line), needs=("k3",), timeout=180),
    C("06m", 6, "an empty test file", (*K3_EVAL, "empty.txt"), robust(("empty.txt",)),
      setup=derive("empty.txt", lambda b: b""), needs=("k3",)),
    C("06n", 6, "a test file of blank lines (neural)", ("eval", "ffnn", "--test", "blank.txt"), robust(("blank.txt",)),
      setup=derive("blank.txt", lambda b: b"\n\n  \n\n"), needs=("ffnn",)),
    C("06o", 6, "--test names a directory", (*K3_EVAL, "adir"), refused(("adir",)),
      setup=lambda ctx: os.makedirs(ctx.path("adir")), needs=("k3",)),
    C("06q", 6, "train on an empty training file", tiny_train("--train", "empty.txt"), refused(("empty.txt",)),
      setup=derive("empty.txt", lambda b: b"")),
    C("06r", 6, "eval of a text file as the model", ("eval", "te.txt", "--test", "te.txt"), refused(("te.txt",))),
    C("06s", 6, "maxent eval of a neural run directory", me_eval("ffnn", "te.txt"), refused(("ffnn",)),
      needs=("ffnn",)),

    # ---- 7: third-party ARPA files ----
    C("07a", 7, "IRSTLM-style ARPA (<s> <s> padding n-grams) vs KenLM's back-off",
      ("ngram", "eval", "irst.arpa", "--test", "t.txt", "--json"),
      same_number(arpa_reference("irst.arpa", "t.txt"), out_ppl, "perplexity", 1e-5),
      setup=arpa_setup("irst.arpa", IRSTLM_ARPA, "t.txt", IRSTLM_TEXT)),
    C("07b", 7, "ARPA whose header counts disagree with its body", ("ngram", "eval", "bad.arpa", "--test", "te.txt"),
      refused(("bad.arpa",)), setup=derive("bad.arpa", _header_wrong, "k3.arpa"), needs=("k3",)),
    C("07c", 7, "ARPA cut off before \\end\\", ("ngram", "eval", "cut.arpa", "--test", "te.txt", "--json"),
      refused(("cut.arpa",)), setup=derive("cut.arpa", lambda b: b[: int(len(b) * 0.7)], "k3.arpa"), needs=("k3",)),
    C("07d", 7, "our own 4-gram Witten-Bell ARPA vs the back-off reference",
      ("ngram", "eval", "wb4.arpa", "--test", "te.txt", "--json"),
      same_number(arpa_reference("wb4.arpa", "te.txt"), out_ppl, "perplexity", 1e-5),
      setup=lambda ctx: ctx.run(["ngram", "train", "--train", "tr.txt", "--order", "4", "--smoothing", "wb", "-o",
                                 "wb4.arpa"])),

    # ---- 8: caches keyed on content ----
    C("08a", 8, "te.txt rewritten with the same size and mtime after a cached run",
      (*K3_EVAL, "te.txt", "--json"),
      same_number(step_ppl([*K3_EVAL, "fresh.txt", "--json"]), out_ppl, "perplexity"),
      setup=warm_then([*K3_EVAL, "te.txt", "--json"], chain(same_size_same_mtime("te.txt", _vowels),
                                                             derive("fresh.txt", lambda b: b))),
      needs=("k3",)),
    C("08b", 8, "ARPA rewritten with the same size and mtime after a cached run", (*K3_EVAL, "te.txt", "--json"),
      same_number(step_ppl(["ngram", "eval", "fresh.arpa", "--test", "te.txt", "--json"]), out_ppl, "perplexity"),
      setup=warm_then([*K3_EVAL, "te.txt", "--json"], chain(same_size_same_mtime("k3.arpa", _arpa_digit),
                                                             derive("fresh.arpa", lambda b: b, "k3.arpa"))),
      needs=("k3",)),
    C("08c", 8, "FFNN: te.txt rewritten with the same size and mtime", ("eval", "ffnn", "--test", "te.txt", "--json"),
      same_number(step_ppl(["eval", "ffnn", "--test", "fresh.txt", "--json"]), out_ppl, "perplexity"),
      setup=warm_then(["eval", "ffnn", "--test", "te.txt", "--json"],
                      chain(same_size_same_mtime("te.txt", _vowels), derive("fresh.txt", lambda b: b))),
      needs=("ffnn",)),

    # ---- 9: nonsense numeric flags ----
    *[C(cid, 9, f"train {' '.join(flags)}", tiny_train(*flags), refused((flags[-2],)))
      for cid, flags in [("09a", ("--objective", "is", "--samples", "100000")), ("09b", ("--clip", "-1")),
                         ("09c", ("--min-improvement", "nan")), ("09d", ("--lr", "nan")), ("09e", ("--lr", "inf")),
                         ("09g", ("--dropout", "1.5")), ("09i", ("--order", "1")),
                         ("09j", ("--objective", "binary", "--neg-rate", "0"))]],
    C("09l", 9, "ngram train --smoothing addk --k inf", (*NGRAM_TRAIN, "--smoothing", "addk", "--k", "inf", "-o",
                                                        "m.arpa"), refused(("--k",))),
    C("09m", 9, "ngram train --smoothing addk --k nan", (*NGRAM_TRAIN, "--smoothing", "addk", "--k", "nan", "-o",
                                                        "m.arpa"), refused(("--k",))),
    C("09n", 9, "ngram train --smoothing addk --k -1", (*NGRAM_TRAIN, "--smoothing", "addk", "--k", "-1", "-o",
                                                       "m.arpa"), refused(("--k",))),
    C("09p", 9, "maxent train --neg-rate nan", me_train("tiny.txt", "va.txt", "m", "--neg-rate", "nan"),
      refused(("--neg-rate",))),
    C("09r", 9, "maxent train --min-improvement nan", me_train("tiny.txt", "va.txt", "m", "--min-improvement", "nan"),
      refused(("--min-improvement", "--min-gain")),
      old=("maxent", "train", "tiny.txt", "va.txt", "-o", "m", "--min-gain", "nan")),
    C("09s", 9, "eval --weights 2,-1", ("eval", "ffnn", "--test", "te.txt", "--interpolate", "k3.arpa", "--weights",
                                        "2,-1"),
      refused(("--weight", "weights")),
      old=("eval", "ffnn", "--test", "te.txt", "--interpolate", "k3.arpa", "--weight", "2"),
      needs=("ffnn", "k3")),
    C("09t", 9, "eval --weights nan,nan", ("eval", "ffnn", "--test", "te.txt", "--interpolate", "k3.arpa",
                                           "--weights", "nan,nan"),
      refused(("--weight", "weights")),
      old=("eval", "ffnn", "--test", "te.txt", "--interpolate", "k3.arpa", "--weight", "nan"),
      needs=("ffnn", "k3")),
    C("09u", 9, "stats --top-k 0", ("stats", "te.txt", "--top-k", "0"), refused(("--top-k",))),
    C("09v", 9, "vocab --min-count 0", ("vocab", "te.txt", "--min-count", "0"), refused(("--min-count",))),

    # ---- 10: the demo and a user's directory ----
    C("10a", 10, "demo -o DIR where DIR holds the user's train.txt", ("demo", "-o", "d"),
      refused(("d",), accepted="other defect"), setup=lambda ctx: ctx.write("d/train.txt", "my own data\n"),
      signal=(signal.SIGKILL, user_file_intact("d/train.txt", b"my own data\n")), timeout=240, quick=True),
    C("10b", 10, "demo -o DIR where DIR holds other files", ("demo", "-o", "d"), foreign_dir_refused,
      setup=lambda ctx: ctx.write("d/notes.txt", "keep\n"),
      signal=(signal.SIGKILL, new_file_in("d", {"notes.txt"})), timeout=240, may_leave=("d/",)),
    C("10c", 10, "demo -o an existing file", ("demo", "-o", "notes.txt"), refused(("notes.txt",)),
      setup=lambda ctx: ctx.write("notes.txt", "keep\n"), signal=(signal.SIGKILL, user_file_intact("notes.txt",
                                                                                                  b"keep\n"))),

    # ---- 11: every writer refuses to overwrite ----
    C("11a", 11, "maxent train -o an existing model", me_train("tiny.txt", "va.txt", "melm", "--epochs", "1"),
      refused(("melm",), accepted="ok"), needs=("maxent",)),
    C("11b", 11, "train -o a finished run", tiny_train(out="ffnn"), refused(("ffnn",), accepted="ok"),
      needs=("ffnn",)),
    C("11c", 11, "ngram train -o an existing ARPA file", (*NGRAM_TRAIN, "--smoothing", "wb", "-o", "k3.arpa"),
      refused(("k3.arpa",), accepted="ok"), needs=("k3",)),
    C("11d", 11, "vocab -o an existing file", ("vocab", "te.txt", "-o", "notes.txt"),
      refused(("notes.txt",), accepted="ok"), setup=lambda ctx: ctx.write("notes.txt", "keep\n")),
    C("11e", 11, "maxent train --force -o a directory of other files", me_train("tiny.txt", "va.txt", "d", "--force"),
      refused(("d",), accepted="ok"), setup=lambda ctx: ctx.write("d/todo.txt", "keep\n"),
      old=("maxent", "train", "tiny.txt", "va.txt", "-o", "d")),
    C("11f", 11, "train -o a directory of other files", tiny_train(out="d"), refused(("d",), accepted="ok"),
      setup=lambda ctx: ctx.write("d/todo.txt", "keep\n"), may_change=("d/",)),

    # ---- 12: divergence and dead-end run directories ----
    C("12a", 12, "train --optimizer sgd --lr 1e30 (diverges in epoch 1), then the same -o with a sane lr",
      tiny_train("--optimizer", "sgd", "--lr", "1e30"), divergence_restartable, may_leave=("run/",)),
    C("12b", 12, "--resume of a run that has no checkpoint, then the same command",
      ("train", "--resume", "run"), resume_without_checkpoint, setup=drop_checkpoints("run")),

    # ---- 13: maxent never saves an untrained model ----
    C("13a", 13, "maxent train with an empty validation file", me_train("tiny.txt", "empty.txt", "m"),
      refused(("empty.txt",)), setup=derive("empty.txt", lambda b: b"")),
    C("13b", 13, "maxent train --lr inf", me_train("tiny.txt", "va.txt", "m", "--lr", "inf"), refused(("--lr",))),
    C("13c", 13, "maxent train --optimizer sgd --lr 1e300 (diverges)",
      me_train("tiny.txt", "va.txt", "m", "--optimizer", "sgd", "--lr", "1e300"), refused(("diverge",))),
    C("13d", 13, "maxent train with a validation file of blank lines", me_train("tiny.txt", "blank.txt", "m"),
      refused(("blank.txt",)), setup=derive("blank.txt", lambda b: b"\n\n\n")),

    # ---- 14: the final binary model as one unit ----
    C("14a", 14, "train --resume of a finished binary-objective run (calibrate once)", ("train", "--resume", "binary"),
      resume_keeps_numbers("binary", "binary"), needs=("binary",), may_change=("binary/",)),
    C("14b", 14, "the final binary model: weights and calibrated objective in one file",
      ("eval", "binary", "--test", "te.txt", "--json"), one_file_model("binary", "binary"), needs=("binary",)),

    # ---- 15: a refused --resume changes nothing ----
    C("15a", 15, "train --resume a finished run --epochs 9", ("train", "--resume", "ffnn", "--epochs", "9"),
      config_unchanged_refusal, needs=("ffnn",), may_change=("ffnn/",)),
    C("15b", 15, "train --resume --lr 0.5 (a flag --resume does not take)", ("train", "--resume", "ffnn", "--lr",
                                                                           "0.5", "--epochs", "4"),
      config_unchanged_refusal, needs=("ffnn",), may_change=("ffnn/",)),

    # ---- 16: two writers, one directory ----
    C("16a", 16, "a second train -o while the first is writing there",
      ("train", "--train", "tr.txt", "--valid", "va.txt", "-o", "ffnn", "--model", "ffnn", "-d", "8", "--hidden", "8",
       "--epochs", "1", "--seed", "7", "--threads", "1"),
      second_writer_stopped("ffnn", "ffnn"), ignore=("ffnn/",), may_leave=("ffnn/",),
      setup=start_writer(lambda side: fixture_commands(side.old)["ffnn"][0], lambda ctx: has_config(ctx.path("ffnn"))),
      timeout=300),

    # ---- 17: every saved model loads with the same command ----
    C("17a", 17, "sampledlm demo -o d, then eval every model it saved", ("demo", "-o", "d"), demo_models_load,
      timeout=420),
    C("17b", 17, "eval (the generic command) of a maxent model vs maxent eval",
      ("eval", "melm", "--test", "te.txt", "--json"), same_numbers("maxent"),
      needs=("maxent",)),
    C("17c", 17, "eval (the generic command) of an ARPA file vs ngram eval", ("eval", "k3.arpa", "--test", "te.txt",
                                                                             "--json"),
      same_numbers("k3"), needs=("k3",)),

    # ---- 18: maxent index tensors out of range ----
    *[C(cid, 18, f"maxent {what}", me_eval("melm", "te.txt"), refused((name,)),
        setup=tamper_maxent(name, change), needs=("maxent",), quick=(cid == "18a"))
      for cid, name, what, change in [
          ("18a", "gptr", "gptr[5] = 10^9", set_element(5, 10 ** 9)),
          ("18b", "ctx_keys.1", "ctx_keys.1[0] = 10^9", set_element(0, 10 ** 9)),
          ("18c", "gword", "gword[3] = 10^9", set_element(3, 10 ** 9)),
          ("18d", "ctx_keys.0", "ctx_keys.0[-1] = 10^9", set_element(-1, 10 ** 9)),
          ("18f", "gptr", "gptr not monotone (two entries swapped)", _gptr_swap)]],

    # ---- 19: disk full, read-only, absurd sizes, mistyped config: one-line errors ----
    C("19a", 19, "vocab to stdout, stdout on /dev/full (ENOSPC)", ("vocab", "tr.txt", "-o", "-"),
      refused(("No space", "space", "write")), stdout_to="/dev/full"),
    C("19b", 19, "ngram train -o -, stdout on /dev/full", (*NGRAM_TRAIN, "-o", "-"),
      refused(("No space", "space", "write")), stdout_to="/dev/full"),
    C("19c", 19, "ngram eval --per-sentence, stdout on /dev/full", (*K3_EVAL, "te.txt", "--per-sentence"),
      refused(("No space", "space", "write")), stdout_to="/dev/full", needs=("k3",)),
    C("19d", 19, "ngram train -o k.arpa with a 64 KiB file-size limit (EFBIG)", (*NGRAM_TRAIN, "-o", "k.arpa"),
      refused(("k.arpa",)), fsize=64 << 10, quick=True),
    C("19e", 19, "train -o run with a 16 KiB file-size limit", tiny_train(), refused(("run", "safetensors")),
      fsize=16 << 10, may_leave=("run/",)),
    C("19g", 19, "ngram train -o into a full 48 KiB tmpfs (ENOSPC)", (*NGRAM_TRAIN, "-o", "full/k3.arpa"),
      refused(("k3.arpa",)), mount="full"),
    C("19h", 19, "train -o into a full tmpfs", tiny_train(out="full/run"), refused(("full/run", "space")),
      mount="full", may_leave=("full/run/",)),
    C("19j", 19, "ngram train -o into a read-only directory", (*NGRAM_TRAIN, "-o", "ro/k3.arpa"),
      refused(("ro/k3.arpa", "read-only", "Read-only")), mount="readonly"),
    C("19k", 19, "train -o into a read-only directory", tiny_train(out="ro/run"), refused(("ro/run",)),
      mount="readonly"),
    C("19l", 19, "maxent train -o into a read-only directory", me_train("tiny.txt", "va.txt", "ro/m"),
      refused(("ro/m",)), mount="readonly"),
    C("19m", 19, "ARPA header 'ngram 2=99999999999999999999999' (past int64)",
      ("ngram", "eval", "big.arpa", "--test", "te.txt"), refused(("big.arpa",)),
      setup=derive("big.arpa", _header_overflow, "k3.arpa"), needs=("k3",), quick=True),
    C("19n", 19, "train --hidden 10^12 (allocation fails)", tiny_train("--hidden", str(10 ** 12)),
      refused(("--hidden", "memory", "allocate"))),
    C("19o", 19, "train --order 10^9", tiny_train("--order", str(10 ** 9)), refused(("--order", "memory", "allocate"))),
    C("19p", 19, "train --optimizer sgd --lr 1e308 (overflow)", tiny_train("--optimizer", "sgd", "--lr", "1e308"),
      refused(("diverge", "--lr")), may_leave=("run/",)),
    C("19q", 19, "ARPA with a log probability 'nan'", ("ngram", "eval", "nan.arpa", "--test", "te.txt"),
      refused(("nan.arpa",)), setup=derive("nan.arpa", _nan_prob, "k3.arpa"), needs=("k3",)),
    *[C(cid, 19, f"FFNN config.json {what}", ("eval", "ffnn", "--test", "te.txt"),
        refused(("config.json",)), setup=json_edit("ffnn/config.json", edit), needs=("ffnn",))
      for cid, what, edit in [("19r", 'model.hidden = "32" (a string)', set_key(("model", "hidden"), "32")),
                              ("19s", "train = [] (a list)", set_key(("train",), []))]],
    C("19u", 19, "FFNN config.json cut in half (not JSON)", ("eval", "ffnn", "--test", "te.txt"),
      refused(("config.json",)), setup=truncate("ffnn/config.json"), needs=("ffnn",)),
    *[C(cid, 19, f"maxent config.json {what}", me_eval("melm", "te.txt"), refused(("config.json",)),
        setup=json_edit("melm/config.json", lambda d, k=key, v=value: _maxent_section(d, k[:-1]).__setitem__(k[-1], v)),
        needs=("maxent",))
      for cid, what, key, value in [("19v", 'alpha = "0.5" (a string)', ("alpha",), "0.5"),
                                    ("19w", 'features.names = "bigram"', ("features", "names"), "bigram"),
                                    ("19x", "hash_size = 'x'", ("hash_size",), "x")]],
    C("19y", 19, "checkpoint.json pointing to a missing checkpoint, then --resume", ("train", "--resume", "ffnn",
                                                                                   "--epochs", "4"),
      refused(("checkpoint",)), setup=json_edit("ffnn/checkpoint.json", set_key(("path",), "checkpoints/nowhere")),
      needs=("ffnn",), may_change=("ffnn/",)),
    C("19z", 19, "ngram train --vocab of a malformed file", (*NGRAM_TRAIN, "--vocab", "bad.tsv", "-o", "m.arpa"),
      refused(("bad.tsv",)), setup=lambda ctx: ctx.write("bad.tsv", "a\tb\tc\nword\tmany\n\tempty\n")),

    # ---- 20: files honour the umask ----
    C("20a", 20, "ngram train under umask 022: file mode", (*NGRAM_TRAIN, "-o", "m.arpa"), modes(), umask=0o022),
    C("20b", 20, "train under umask 022: run directory file modes", tiny_train(), modes(), umask=0o022),

    # ---- 21-23: plots and help ----
    C("21a", 21, "matplotlib's backend (MPLBACKEND=svg) unchanged by the learning-curve plot and new_figure",
      ("-c", BACKEND_SNIPPET), snippet_ok, python=True, env={"MPLBACKEND": "svg"}, label="BACKEND_SNIPPET"),
    C("22a", 22, "train --help lists the --objective choices", ("train", "--help"),
      help_has(r"\[softmax\|binary\|", "the objective choices")),
    C("22b", 22, "no help text cites internal documents (seed 00N, §, issue N)", ("-c", HELP_SNIPPET), snippet_ok,
      python=True, label="HELP_SNIPPET"),
    C("22c", 22, "Ctrl-C (SIGINT) during epoch 1 after a checkpoint, then --resume",
      tuple(fixture_commands(False)["ffnn"][0]),
      interrupted_then_resumed("ffnn", "ffnn"),
      signal=(signal.SIGINT, lambda ctx: mid_epoch_checkpoint(ctx.path("ffnn"))),
      may_leave=("ffnn/",), timeout=300),
    C("22d", 22, "Ctrl-C during maxent train (once its text is read)",
      me_train("big.txt", "va.txt", "m", "--epochs", "3"),
      interrupted_cleanly("m"), signal=(signal.SIGINT, cache_written), timeout=300),
    C("22e", 22, "Ctrl-C during ngram train, order 5 (once its text is read)", BIG_NGRAM,
      interrupted_cleanly("k5.arpa"),
      signal=(signal.SIGINT, cache_written)),
    C("23a", 23, "no two result pictures in docs/results are the same file", ("-c", PNG_SNIPPET, "{root}"),
      snippet_ok, python=True, label="PNG_SNIPPET"),

    # ---- 24: default settings train ----
    C("24a", 24, "train --help: the default optimizer is Adam", ("train", "--help"),
      help_has(r"--optimizer[^\n]*\n?[^\n]*default:\s*adam", "Adam as the default optimizer")),
    C("24b", 24, "the README's quick-start FFNN (default flags, 2 epochs): within 3x of KN3, and better with it",
      ("train", "--train", "big.txt", "--valid", "va.txt", "--model", "ffnn", "--order", "3", "--epochs", "2", "-o",
       "ffnn3", "--threads", "1"), beats_kn3, timeout=600),

    # ---- 34: the defects of the 896-case campaign, each with its regression test ----
    C("34a", 34, "a pipe read whole: vocab /dev/stdin (the compression sniff lost its first 8 KiB) vs the file",
      ("vocab", "/dev/stdin", "-o", "v-pipe.txt"),
      lambda ctx: _same_output_as(ctx, ["vocab", "tr.txt", "-o", "v.txt"], "v-pipe.txt", "v.txt"), stdin="tr.txt",
      test="tests/data/test_pipes.py::test_process_substitution_as_a_user_types_it"),
    C("34b", 34, "a named pipe as eval's test text (<(cat te.txt)) vs the file",
      ("eval", "k3.arpa", "--test", "te.pipe", "--json"),
      same_numbers("k3"), setup=fifo("te.pipe", "te.txt"), needs=("k3",), timeout=60,
      test="tests/data/test_pipes.py::test_every_reading_command_gives_the_same_result_from_a_pipe[args5]"),
    C("34c", 34, "a named pipe as ngram train's text (was refused as empty) vs the file",
      ("ngram", "train", "--train", "tr.pipe", "--order", "3", "-o", "pipe.arpa"),
      same_file("pipe.arpa", "k3.arpa"), setup=fifo("tr.pipe", "tr.txt"), needs=("k3",), timeout=60,
      test="tests/data/test_pipes.py::test_every_reading_command_gives_the_same_result_from_a_pipe[args2]"),
    C("34d", 34, "rescore --lm-weight nan (its --json held NaN)",
      ("rescore", "k3.arpa", "nb.jsonl", "--lm-weight", "nan"),
      refused(("--lm-weight",)), setup=nbest_lists("nb.jsonl"), needs=("k3",),
      test="tests/cli/test_numeric_flags.py::test_every_float_flag_refuses_nan_and_infinity[rescore-lm_weight]"),
    C("34e", 34, "serve --batch-wait-ms nan", ("serve", "k3.arpa", "--port", "0", "--batch-wait-ms", "nan"),
      refused(("--batch-wait-ms",)), needs=("k3",), timeout=60,
      test="tests/cli/test_numeric_flags.py::test_every_float_flag_refuses_nan_and_infinity[serve-batch_wait_ms]"),
    C("34f", 34, "generate --temperature nan (a traceback)", ("generate", "k3.arpa", "--temperature", "nan"),
      refused(("--temperature",)), needs=("k3",),
      test="tests/cli/test_numeric_flags.py::test_every_float_flag_refuses_nan_and_infinity[generate-temperature]"),
    C("34g", 34, "eval --mix M --interp-valid EMPTY (printed ppl inf with weights nan)",
      ("eval", "k3.arpa", "--test", "te.txt", "--mix", "k2.arpa", "--interp-valid", "empty.txt"),
      refused(("empty.txt",)), needs=("k3",),
      old=("eval", "k3.arpa", "--test", "te.txt", "--interpolate", "k2.arpa", "--interp-valid", "empty.txt"),
      setup=chain(lambda ctx: ctx.run(["ngram", "train", "--train", "tr.txt", "--order", "2", "-o", "k2.arpa"]),
                  derive("empty.txt", lambda b: b"")),
      test="tests/use/test_mixing_empty.py::test_em_weights_on_an_empty_held_out_text_are_refused"),
    C("34h", 34, "calibrate a self-normalised run on an empty text (destroyed the run)",
      ("calibrate", "sn", "--text", "/dev/null"), refused(("/dev/null", "no sentences")),
      setup=lambda ctx: ctx.run(list(tiny_train("--objective", "selfnorm", out="sn"))),
      test="tests/objectives/test_structured.py::test_calibrate_command_centres_log_z_on_other_text"),
    C("34i", 34, "rescore --tune-first-pass without --tune-on (silently ignored)",
      ("rescore", "k3.arpa", "nb.jsonl", "--tune-first-pass"), refused(("--tune-on",)),
      setup=nbest_lists("nb.jsonl"), needs=("k3",),
      test="tests/use/test_text_options_in_use.py::test_rescore_refuses_meaningless_combinations"
           "[args0---tune-first-pass tunes on development data]"),
    C("34j", 34, 'n-best JSONL with "am": true (read as 1)', ("rescore", "k3.arpa", "am.jsonl"),
      refused(("am must be", "am.jsonl")), setup=am_true, needs=("k3",),
      test='tests/use/test_text_options_in_use.py::test_json_nbest_fields_of_the_wrong_type_are_refused'
           '[{"id": "a", "hyps": [{"words": "x y", "am": true, "lm": 1}]}-am must be a number]'),
    C("34k", 34, 'neural config.json text_options.lowercase = "yes" (scored 133.8 against 141.7)',
      ("eval", "ffnn", "--test", "te.txt"), refused(("config.json",)),
      setup=json_edit("ffnn/config.json", set_key(("data", "text_options", "lowercase"), "yes")), needs=("ffnn",),
      test="tests/neural/test_neural_defects.py::test_a_damaged_text_options_field_is_refused_naming_the_file"
           "[edit0-lowercase: expected true or false]"),
    C("34l", 34, "neural weights copied in from a run with another vocabulary of the same size",
      ("eval", "ffnn", "--test", "te.txt", "--json"), refused(("model.safetensors", "vocabulary")),
      setup=weights_of_another_vocabulary, needs=("ffnn",), timeout=180,
      test="tests/neural/test_neural_defects.py"
           "::test_weights_copied_in_from_a_run_with_another_vocabulary_are_refused"),
    C("34m", 34, "binary n-gram directory with shifted bigram log probabilities (a plausible perplexity)",
      ("eval", "k3.bin", "--test", "te.txt", "--json"), refused(("logp_2.npy", "checksum")), setup=shifted_binary,
      needs=("k3",),
      test="tests/ngram/test_ngram_binary_faults.py::test_eval_checks_a_binary_directory_by_default"),
    C("34n", 34, "checkpoint.json holding a list, then --resume (a traceback)",
      ("train", "--resume", "ffnn", "--epochs", "4"),
      refused(("checkpoint.json",)), setup=lambda ctx: ctx.write("ffnn/checkpoint.json", "[]\n"), needs=("ffnn",),
      may_change=("ffnn/",),
      test="tests/neural/test_neural_defects.py::test_a_checkpoint_pointer_that_is_not_an_object_is_a_one_line_error"),
    C("34o", 34, "a mixture of an ARPA file and a --lowercase run, either order (the first model's options were used)",
      ("eval", "k3.arpa", "--test", "te-up.txt", "--mix", "lower", "--weights", "0.5,0.5", "--json"),
      same_number(step_ppl(["eval", "lower", "--test", "te-up.txt", "--mix", "k3.arpa", "--weights", "0.5,0.5",
                            "--json"],
                           ["eval", "lower", "--test", "te-up.txt", "--interpolate", "k3.arpa", "--weight", "0.5",
                            "--json"]), out_ppl, "perplexity", 1e-9, ("text", "lowercase")),
      old=("eval", "k3.arpa", "--test", "te-up.txt", "--interpolate", "lower", "--weight", "0.5", "--json"),
      setup=lowercase_run, needs=("k3",), timeout=180,
      test="tests/use/test_text_options_in_use.py::test_a_mixture_reads_text_the_same_way_in_either_order"),
    C("34p", 34, "rescore upper-case lists with a --lowercase run vs the lower-case lists (options were ignored)",
      ("rescore", "lower", "up.jsonl", "-o", "r-up.jsonl"),
      same_lm_scores("r-up.jsonl", ["rescore", "lower", "nb.jsonl", "-o", "r-nb.jsonl"], "r-nb.jsonl"),
      setup=chain(lowercase_run, nbest_lists("up.jsonl", upper=True), nbest_lists("nb.jsonl")), timeout=180,
      test="tests/use/test_text_options_in_use.py::test_rescore_reads_hypotheses_with_the_models_text_options"),
    C("34q", 34, "embed export RUN -o RUN/model.safetensors --force (destroyed the run)",
      ("embed", "export", "ffnn", "-o", "ffnn/model.safetensors", "--force"), refused(("ffnn",), accepted="lost file"),
      needs=("ffnn",), test="tests/cli/test_writers_refuse.py::test_no_writer_writes_over_its_own_input"),
    C("34r", 34, "train -o a maxent model directory (replaced its config and vocabulary)", tiny_train(out="melm"),
      refused(("melm",), accepted="lost file"), needs=("maxent",),
      test="tests/cli/test_writers_refuse.py"
           "::test_train_never_takes_another_familys_model_directory_for_a_stopped_run"),
    C("34s", 34, "rescore --one-best X -o X (kept one of the two silently)",
      ("rescore", "k3.arpa", "nb.jsonl", "--one-best", "best.txt", "-o", "best.txt"),
      refused(("best.txt", "same file")), setup=nbest_lists("nb.jsonl"), needs=("k3",),
      test="tests/use/test_text_options_in_use.py::test_rescore_refuses_meaningless_combinations"
           "[args1-name the same file]"),
    C("34t", 34, "train under a 16 KiB file-size limit: no run directory left", tiny_train(),
      refused(("run", "safetensors")), fsize=16 << 10,
      test="tests/neural/test_neural_defects.py::test_a_training_stopped_by_a_file_size_limit_leaves_nothing"),
    C("34u", 34, "GRU eval --batch-size 1000 vs --batch-size 1 (346.0 against 84.5)",
      ("eval", "gru", "--test", "te.txt", "--batch-size", "1000", "--json"),
      same_number(step_ppl(["eval", "gru", "--test", "te.txt", "--batch-size", "1", "--json"]), out_ppl, "perplexity",
                  1e-6), needs=("gru",),
      test="tests/neural/test_neural_eval.py::test_running_text_perplexity_does_not_depend_on_the_batch_size[gru]"),
    C("34v", 34, "serve: a 200 KB request header is answered 431 in JSON, no traceback in the log",
      ("-c", SERVE_HEADER_SNIPPET), snippet_ok, python=True, label="SERVE_HEADER_SNIPPET", needs=("k3",),
      test="tests/serve/test_serve_bad_requests.py::test_what_the_http_parser_refuses_is_answered_in_json"
           "[long-header]"),
    C("34w", 34, "score --per-word, stdout on /dev/full (a second error at exit, rc 120)",
      ("score", "k3.arpa", "te.txt", "--per-word"), one_error(("No space", "standard output")),
      stdout_to="/dev/full", needs=("k3",),
      test="tests/cli/test_stdout_full.py::test_no_second_error_at_exit_whatever_is_still_buffered[args0]"),
    C("34x", 34, "a Kaldi n-best directory without ac_cost (taken for SRILM)", ("rescore", "k3.arpa", "kd"),
      refused(("ac_cost",)), setup=kaldi_without_ac_cost, needs=("k3",),
      test="tests/use/test_text_options_in_use.py::test_a_kaldi_directory_missing_ac_cost_is_named_as_kaldi"),
    C("34y", 34, "rescore upper-case lists with a lower-case model: the share of words outside its vocabulary",
      ("rescore", "k3.arpa", "up.jsonl", "--json"), oov_share_reported, setup=nbest_lists("up.jsonl", upper=True),
      needs=("k3",),
      test="tests/use/test_text_options_in_use.py"
           "::test_rescore_warns_about_out_of_vocabulary_words_and_folds_case_on_request"),
    C("34z", 34, "eval --interpolate --json: ppl is the mixture's (was the first model's)",
      ("eval", "k3.arpa", "--test", "te.txt", "--interpolate", "ffnn", "--weights", "0.5,0.5", "--json"),
      mixture_ppl(["k3.arpa", "ffnn"], [0.5, 0.5]), needs=("k3", "ffnn"),
      test="tests/cli/test_eval_json_names.py::test_eval_json_keys_name_what_they_hold"),
]


def _renumber(cases: list[Case]) -> list[Case]:
    """Ids ``NNx``: the item, then a letter per case of that item in table order."""
    import dataclasses

    seen: dict[int, int] = {}
    out = []
    for c in cases:
        k = seen[c.item] = seen.get(c.item, -1) + 1
        out.append(dataclasses.replace(c, id=f"{c.item:02d}{chr(97 + k)}"))
    return out


CASES = _renumber(CASES)
