"""Run directories: everything needed to reload, audit and resume a neural model, and nothing that runs code.

Layout of ``RUN_DIR``::

    config.json              the envelope of :mod:`sampledlm.store` (format, family "neural", version,
                             vocabulary fingerprint) + model, objective, training options, data
    vocab.txt                the vocabulary (word<TAB>count), ids in file order
    model.safetensors        the model to use, with its objective's parameters and buffers in the same
                             file (``model/...``, ``objective/...``), so the two can never disagree:
                             best validation perplexity so far; after training ends, the best
                             weights after ``objective.finalize`` (e.g. log-alpha calibration),
                             marked ``finalized`` in the file's metadata. (Runs written before this
                             layout keep the objective in ``objective.safetensors``; they still load.)
    metrics.jsonl            one JSON object per validation (epoch, step, train loss, valid ppl, lr, tokens/s, wall
                             time; a point within an epoch also its epoch_fraction, its train loss the mean so far
                             in the epoch)
    learning_curve.png       train loss and valid perplexity per validation
    checkpoint.json          {"path": "checkpoints/ckpt-000001234"}: the latest complete training checkpoint
    checkpoints/ckpt-*/      model, objective, optimizer (safetensors + json), rng.safetensors, trainer_state.json
    provenance.json          versions, the device used, the date, each data file's size and SHA-256, the final
    README.md                figures; and the model card generated from them (:mod:`sampledlm.provenance`:
                             informative only, never read when the run loads; runs before 0.2.0 have none)

Every file is written through :func:`sampledlm.data.textio.atomic_write`. A checkpoint is a *new*
directory; only when all its files are on disk does ``checkpoint.json`` (atomically) point to it,
and only then is the previous one removed. An interrupted checkpoint therefore leaves the previous
one intact and in use.

Every safetensors file we write carries a SHA-256 of its tensors in its header metadata; loading
recomputes it, so a damaged file is refused with a clear :class:`UserError` rather than giving
silently wrong numbers. Weights are read with safetensors only: no pickle, nothing executable.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys

import torch

from ..data.vocab import Vocab
from ..errors import UserError
from .. import provenance
from ..store import (load_state_into, load_tensors, load_vocab_checked, read_json, save_tensors,  # noqa: F401
                     write_json)
from .. import store

LEGACY_FORMAT = "sampledlm-run"
CONFIG_KEYS = {"format", "family", "version", "model", "objective", "train", "data", "vocab"}


# --- config ----------------------------------------------------------------------------------
def make_config(model_spec: dict, objective: str, objective_options: dict, train: dict, data: dict, vocab: Vocab) -> dict:
    return {
        **store.envelope("neural", vocab),
        "model": model_spec,
        "objective": {"name": objective, "options": {k: v for k, v in objective_options.items() if v is not None}},
        "train": train,
        "data": data,
    }


def describe(config: dict) -> str:
    """One line saying what a run's model is (the model card's first line)."""
    model, obj = config.get("model", {}), config.get("objective", {})
    options = {k: v for k, v in obj.get("options", {}).items() if k in ("samples", "classes", "arity", "cutoffs")}
    said = f" ({', '.join(f'{k} {v}' for k, v in options.items())})" if options else ""
    return (f"A neural language model: {_sizes(model)}; output objective {obj.get('name')}{said}; vocabulary of "
            f"{config.get('vocab', {}).get('size', 0):,} words")


def write_provenance(run_dir: str, config: dict, device: str, resumed: bool = False) -> None:
    """``provenance.json`` and the model card of a new run (its data files hashed now), or, ``resumed``, a new
    session's entry (a run begun before provenance was recorded gets it now, the data hashed as they are now)."""
    if resumed and provenance.read(run_dir) is not None:
        provenance.resumed(run_dir, device)
        return
    data = config.get("data", {})
    records = provenance.data_records({"train": data.get("train"), "valid": data.get("valid")})
    more = {"recorded": "when the run was resumed (it began before provenance was recorded)"} if resumed else {}
    provenance.write(run_dir, provenance.new("neural", describe(config), records, device, **more))


def check_config(config, path: str) -> dict:
    """A neural run's config.json (current or legacy format), its sections' JSON types checked."""
    if not isinstance(config, dict):
        raise UserError(f"{path}: not a sampledlm run config (a JSON object is expected)")
    if config.get("format") == LEGACY_FORMAT and config.get("version") == 1:
        config = {**config, "format": store.FORMAT, "family": "neural", "version": store.VERSION}
    elif config.get("format") != store.FORMAT or config.get("family") != "neural":
        raise UserError(f"{path}: not a neural model (format {config.get('format')!r}, family {config.get('family')!r})")
    elif config.get("version") != store.VERSION:
        raise UserError(f"{path}: config version {config.get('version')!r} is not supported (expected {store.VERSION})")
    unknown = sorted(set(config) - CONFIG_KEYS)
    missing = sorted(CONFIG_KEYS - set(config))
    if unknown or missing:
        said = ([f"unknown key(s) {', '.join(unknown)}"] if unknown else []) + \
            ([f"missing section(s) {', '.join(missing)}"] if missing else [])
        raise UserError(f"{path}: {'; '.join(said)}")
    for key in ("model", "objective", "train", "data", "vocab"):
        store.check_type(config, key, dict, path)
    store.check_type(config["model"], "type", str, f"{path}: model")
    store.check_type(config["objective"], "name", str, f"{path}: objective")
    if not isinstance(config["objective"].get("options", {}), dict):
        raise UserError(f"{path}: objective options should be a JSON object")
    if config["data"].get("text_options") is not None:
        from ..data.tokenizer import TextOptions

        TextOptions.from_dict(config["data"]["text_options"], path)  # types and keys: "yes" is not true
    return config


def build_from_config(config: dict, vocab: Vocab, fresh: bool = False, train_ids=None):
    """``(model, objective)`` for a config (weights freshly initialised).

    ``fresh``: for a new run, whose structure the word-classes file (``--word-classes``) decides, or with
    ``auto`` the training text ``train_ids()`` clustered; a run that loads weights takes its structure (classes,
    tree) from them and does not read the file."""
    from .registry import build_model
    from ..objectives import make_objective

    obj = config["objective"]
    objective = make_objective(obj["name"], counts=vocab.counts, **obj.get("options", {}))
    build = functools.partial(build_model, config["model"], len(vocab),
                              sparse_output=getattr(objective, "sparse_output", False), counts=vocab.counts)
    try:
        _check_fits(build, config, len(vocab))
        model = build()
    except (MemoryError, RuntimeError, TypeError, OverflowError) as e:
        # torch reports a failed allocation as a RuntimeError, a size past int64 as "overflow" (Runtime or TypeError)
        if not isinstance(e, MemoryError) and "allocate" not in str(e) and "verflow" not in str(e):
            raise
        raise UserError(f"the model does not fit in memory ({_allocation(e)}; vocabulary {len(vocab):,}, "
                        f"model {_sizes(config['model'])}): choose smaller sizes (--hidden, -d, --order)") from None
    objective.bind(model)  # output parameters of its own (class layer, tail projections), before any weights load
    from ..ngram.backoff import open_backoff

    objective.attach(vocab, fresh, open_backoff, train_ids)  # what its options name: a back-off n-gram, word classes
    return model, objective


def _check_fits(build, config: dict, vocab_size: int) -> None:
    """A :class:`UserError` when the model's float32 weights alone exceed the memory available now (RAM not in use
    and free swap, within the process's cgroup limit: :func:`sampledlm.memory.available_memory`).

    The model is built on the ``meta`` device (shapes, no storage) to count its parameters first: where
    the kernel overcommits memory, a real allocation of a model that cannot fit succeeds and the process
    is killed later, while initialising it, with no message."""
    try:
        with torch.device("meta"), _NoFillOnMeta():
            n = sum(p.numel() for p in build().parameters())
    except Exception:  # noqa: BLE001 - sizes past what torch can describe: the real build reports them
        return
    from .. import memory

    have = memory.available_memory() + memory.free_swap()
    if 4 * n > have:
        raise UserError(f"the model does not fit in memory ({n:,} parameters take {memory.gigabytes(4 * n)}; "
                        f"{memory.gigabytes(have)} are available (RAM not in use, free swap) of this machine's "
                        f"{memory.gigabytes(memory.physical_memory())}; vocabulary {vocab_size:,}, model "
                        f"{_sizes(config['model'])}): choose smaller sizes (--hidden, -d, --order)")


class _NoFillOnMeta(torch.overrides.TorchFunctionMode):
    """Leaves out the initialisers (``torch.nn.init.*``) and in-place fills (``normal_``, ``uniform_``, ...) of
    tensors on the ``meta`` device: they have no values to fill, and torch's meta kernels for the random fills
    import ``torch._dynamo`` (0.8 s of a process that only scores text). Shapes are untouched."""

    SHAPE_CHANGING = frozenset({"resize_", "resize_as_", "set_", "as_strided_", "squeeze_", "unsqueeze_", "t_",
                                "transpose_", "swapdims_", "swapaxes_"})

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        first = args[0] if args else (kwargs or {}).get("tensor")  # torch.nn.init passes it by keyword
        if isinstance(first, torch.Tensor) and first.is_meta and (
                getattr(func, "__module__", None) == "torch.nn.init"
                or (name.endswith("_") and not name.startswith("_") and name not in self.SHAPE_CHANGING)):
            return first
        return func(*args, **(kwargs or {}))


def _allocation(e: BaseException) -> str:
    import re

    m = re.search(r"allocate (\d+) bytes", str(e))
    return f"{int(m.group(1)):,} bytes asked for" if m else "the allocation failed"


def _sizes(spec) -> str:
    if not isinstance(spec, dict):
        return repr(spec)[:80]
    keys = ("type", "order", "context_size", "embed_dim", "hidden", "layers", "proj", "deep_output")
    return ", ".join(f"{k} {spec[k]}" for k in keys if spec.get(k) is not None)


def save_model_files(run_dir: str, model: torch.nn.Module, objective: torch.nn.Module, finalized: bool,
                     meta: dict[str, str] | None = None) -> None:
    """The usable model: weights and objective in ONE file, written atomically; ``meta``: more metadata
    (e.g. ``log_z_shift``, the self-normalisation calibration applied to the output biases)."""
    tensors = {f"model/{k}": v for k, v in model.state_dict().items()}
    tensors.update({f"objective/{k}": v for k, v in objective.state_dict().items()})
    bound = {"vocab_fingerprint": fp} if (fp := _vocab_fingerprint(run_dir)) else {}
    save_tensors(os.path.join(run_dir, "model.safetensors"), tensors,
                 {**(meta or {}), **bound, "finalized": "true" if finalized else "false"})
    legacy = os.path.join(run_dir, "objective.safetensors")
    if os.path.exists(legacy):
        os.remove(legacy)


def _vocab_fingerprint(run_dir: str) -> str | None:
    """The vocabulary fingerprint config.json records (None for a directory without one)."""
    try:
        with open(os.path.join(run_dir, "config.json"), encoding="utf-8") as f:
            fp = json.load(f).get("vocab", {}).get("fingerprint")
    except (OSError, ValueError, AttributeError):
        return None
    return fp if isinstance(fp, str) else None


def read_model_files(path: str) -> tuple[dict, dict | None, dict]:
    """``(model tensors, objective tensors or None when in a separate legacy file, metadata)``."""
    tensors, meta = load_tensors(path)
    if any(k.startswith("model/") for k in tensors):
        model = {k[6:]: v for k, v in tensors.items() if k.startswith("model/")}
        obj = {k[10:]: v for k, v in tensors.items() if k.startswith("objective/")}
        return model, obj, meta
    return tensors, None, meta


def load_model_files(path: str, model: torch.nn.Module, objective: torch.nn.Module) -> dict:
    """Load weights (and the objective's state) from ``path``; returns the file's metadata."""
    model_t, obj_t, meta = read_model_files(path)
    want, got = _vocab_fingerprint(os.path.dirname(path)), meta.get("vocab_fingerprint")
    if want and got and got != want:  # files written before the binding carry none: accepted as they are
        raise UserError(f"{path}: its weights were trained with another vocabulary (fingerprint {got}, the run's "
                        f"{want}): the file was copied in from another run")
    load_state_into(model, model_t, path)
    if obj_t is None:  # a run written before model and objective shared one file
        obj_path = os.path.join(os.path.dirname(path), "objective.safetensors")
        if os.path.exists(obj_path) or objective.state_dict():
            obj_t, _ = load_tensors(obj_path)
            load_state_into(objective, obj_t, obj_path)
    else:
        load_state_into(objective, obj_t, path)
    return meta


def load_run(run_dir: str, weights: str | None = None, note_unfinished: bool = True):
    """Load a run directory: ``(model, objective, vocab, config)``, model in eval mode.

    ``weights``: a weights file to use instead of ``RUN_DIR/model.safetensors``. When training
    never finished an epoch, the latest checkpoint is used. ``note_unfinished``: say so on stderr when the run's
    training has not finished (a caller that refuses such a run says it itself).
    """
    cfg_path = os.path.join(run_dir, "config.json")
    if not os.path.isfile(cfg_path):  # a file, a folder of something else: said so, not "config.json: no such file"
        raise store.no_run_directory(run_dir)
    config = check_config(read_json(cfg_path), cfg_path)
    vocab = load_vocab_checked(run_dir, config)
    try:
        model, objective = build_from_config(config, vocab)
    except UserError as e:  # a field of config.json that the model or objective refuses: name the file
        raise UserError(f"{cfg_path}: {e}") from None
    if weights is None:
        weights = os.path.join(run_dir, "model.safetensors")
        if not os.path.exists(weights):
            ckpt = latest_checkpoint(run_dir)
            if ckpt is None:
                raise UserError(f"{run_dir}: no model.safetensors and no checkpoint: training has not saved a model yet")
            weights = os.path.join(ckpt, "model.safetensors")
            # said, not silent: the scores are those of wherever training stopped, not of a best epoch
            print(f"sampledlm: warning: {run_dir}: no model.safetensors (no epoch finished, or the file was "
                  f"removed): using the latest checkpoint's weights ({os.path.relpath(ckpt, run_dir)})",
                  file=sys.stderr)
    meta = load_model_files(weights, model, objective)
    if note_unfinished and meta.get("finalized") == "false" \
            and os.path.dirname(os.path.abspath(weights)) == os.path.abspath(run_dir):
        # a run stopped early (killed, Ctrl-C, --max-steps then resumed no more): scored as it is, and said so
        print(f"sampledlm: note: {run_dir}: training has not finished ({_epochs_done(run_dir)} of "
              f"{config['train'].get('epochs')} epochs; sampledlm train --resume {run_dir} goes on): scoring the best "
              "weights so far", file=sys.stderr)
    model.eval()
    return model, objective, vocab, config


def _epochs_done(run_dir: str) -> int:
    """Epochs the run's ``metrics.jsonl`` shows finished (a point within an epoch is not one; 0 where it cannot
    be read)."""
    try:
        with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as f:
            return sum(1 for line in f if line.strip() and "epoch_fraction" not in json.loads(line))
    except (OSError, UnicodeDecodeError, ValueError):
        return 0


# --- checkpoints -----------------------------------------------------------------------------
def latest_checkpoint(run_dir: str) -> str | None:
    """The directory ``checkpoint.json`` points to, or None when there is none."""
    ptr = os.path.join(run_dir, "checkpoint.json")
    if not os.path.exists(ptr):
        return None
    pointer = read_json(ptr)
    if not isinstance(pointer, dict):
        raise UserError(f"{ptr}: expected a JSON object {{\"path\": ...}}, found {type(pointer).__name__}")
    rel = pointer.get("path")
    path = os.path.join(run_dir, rel) if isinstance(rel, str) else None
    if path is None or not os.path.isdir(path):
        raise UserError(f"{ptr}: points to {rel!r}, which is not a checkpoint directory")
    return path


def _live_name(run_dir: str) -> str | None:
    """The name of the checkpoint ``checkpoint.json`` points to (None: none, or a pointer that does not point)."""
    try:
        path = latest_checkpoint(run_dir)
    except UserError:
        return None
    return os.path.basename(path) if path else None


def write_checkpoint(run_dir: str, name: str, files: dict[str, object]) -> str:
    """Write a checkpoint directory ``checkpoints/<name>`` and make it the latest.

    ``files`` maps file names to tensors dicts (``.safetensors``) or JSON-able objects (``.json``).
    Order: every file of the new directory, then ``checkpoint.json``, then the old directories go.
    The live checkpoint (the one ``checkpoint.json`` points to) is never touched before the pointer moves:
    a second checkpoint of the same step (the last epoch's, then the finalised model's) gets another name.
    """
    if name == _live_name(run_dir):
        name += "-2"
    rel = os.path.join("checkpoints", name)
    path = os.path.join(run_dir, rel)
    if os.path.isdir(path):
        shutil.rmtree(path)  # a half-written leftover from an earlier interruption (never the live one)
    os.makedirs(path)
    for fname, content in files.items():
        if fname.endswith(".safetensors"):
            save_tensors(os.path.join(path, fname), content)
        else:
            write_json(os.path.join(path, fname), content)
    write_json(os.path.join(run_dir, "checkpoint.json"), {"path": rel})
    root = os.path.join(run_dir, "checkpoints")
    for other in os.listdir(root):
        if other != name:
            shutil.rmtree(os.path.join(root, other), ignore_errors=True)
    return path


def tensor_bytes(module: torch.nn.Module) -> int:
    """Bytes of a module's parameters and buffers as a safetensors file holds them."""
    return sum(t.numel() * t.element_size() for t in (*module.parameters(), *module.buffers()))


def optimizer_state_bytes(optimizers: list[torch.optim.Optimizer]) -> int:
    """Bytes of the optimisers' per-parameter state once every parameter has taken a step: Adam's two moments
    (``betas`` in its defaults), SGD's momentum buffer when its momentum is non-zero, else none. Counted from the
    parameters, since the state itself only appears at the first step."""
    total = 0
    for opt in optimizers:
        for g in opt.param_groups:
            per = 2 if "betas" in g else (1 if g.get("momentum", 0) else 0)
            total += per * sum(p.numel() * p.element_size() for p in g["params"])
    return total


def check_disk_room(run_dir: str, model_bytes: int, optimizer_bytes: int) -> None:
    """Refuse to start training (:class:`UserError`) when the file system of ``run_dir`` cannot take what the run
    will write: while a checkpoint (weights + optimiser state) is written, the previous one stays until the new
    one is complete (:func:`write_checkpoint`), and the model file goes beside them. At V = 485k on a GRU-256
    that is about 9 GB, found out only at the first epoch's end, hours in, without this check."""
    has_live = latest_checkpoint(run_dir) is not None
    ckpt = model_bytes + optimizer_bytes
    need = ckpt * (1 if has_live else 2) + (0 if os.path.exists(os.path.join(run_dir, "model.safetensors"))
                                           else model_bytes)
    try:
        free = shutil.disk_usage(run_dir).free
    except OSError:
        return  # unknown: let the writes speak for themselves
    if free < need:
        from ..memory import gigabytes as size

        raise UserError(f"{run_dir}: not enough free disk space for this run: a checkpoint holds "
                        f"{size(ckpt)} (weights {size(model_bytes)}, optimiser state "
                        f"{size(optimizer_bytes)}), a new one is written beside the last before that one "
                        f"goes, and the model file beside them: {size(need)} more are needed, "
                        f"{size(free)} are free there. Free some space or give -o a folder on a larger disk")


def allocated_optimizer_bytes(optimizers: list[torch.optim.Optimizer]) -> int:
    """Bytes of the optimisers' state tensors that exist now (none before the first step, all of them after a
    resume has loaded a checkpoint)."""
    return sum(t.numel() * t.element_size() for opt in optimizers for state in opt.state.values()
               for t in state.values() if torch.is_tensor(t) and t.dim() > 0)


def check_memory_room(optimizers: list[torch.optim.Optimizer], model_bytes: int, device: torch.device,
                      step_bytes: int = 0) -> None:
    """Refuse to start training (:class:`UserError`) when what the first step allocates cannot fit in the memory
    left: RAM the kernel can give without swapping plus free swap on the CPU, the device's free memory on a GPU.
    Without the check the first step of such a run is killed by the kernel with no message (at V = 2M words,
    d = 512, Adam's moments alone take 16 GB). This counts only what is certain to be allocated: the optimiser's
    state and ``step_bytes``, a lower bound of the step's own arrays (a full softmax's ``[N, V]`` scores:
    :func:`.reporting.step_scores_bytes`); the rest of the activations and the gradients come on top."""
    from .. import memory

    pending = optimizer_state_bytes(optimizers) - allocated_optimizer_bytes(optimizers)
    if pending + step_bytes <= 0:
        return
    if device.type == "cuda":
        available, where = torch.cuda.mem_get_info(device)[0], f"free on {device}"
    elif device.type == "cpu":
        available, where = memory.available_memory() + memory.free_swap(), "available (RAM not in use, free swap)"
    else:
        return
    if pending + step_bytes > available:
        size = memory.gigabytes
        parts, advice = [], []
        if pending > 0:
            parts.append(f"its optimiser's state, {size(pending)} (Adam keeps two moments per weight, SGD with "
                         "momentum one)")
            advice.append("a smaller vocabulary (--min-count, --max-size) or model (-d, --hidden), --optimizer sgd "
                          "(no state without --momentum)")
        if step_bytes > 0:
            parts.append(f"its output scores, at least {size(step_bytes)} (every word scored for each prediction)")
            advice.append("a smaller -b or --bptt, an output that does not score every word (--objective nce, is, "
                          "adaptive, hsm)")
        raise UserError(f"not enough memory for this run: its first step allocates {' and '.join(parts)} beside the "
                        f"model's {size(model_bytes)} of weights, and {size(available)} are {where}. Use "
                        f"{', '.join(advice)} or a machine with more memory")
