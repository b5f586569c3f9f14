"""A trained neural run as an ONNX graph of exact next-word log probabilities, for decoders that load ONNX
(ONNX Runtime in C++ services, k2/icefall and sherpa-onnx).

The graph computes what ``sampledlm eval`` computes, the model and its objective's exact rule
(``objective.log_prob``: the full softmax, the class or tree factorisation, the adaptive softmax, a calibrated
binary model, ...), so its numbers are normalised whatever the training objective:

* recurrent (``gru``, ``lstm``): inputs ``words`` ``int64 [B, T]`` and the state ``h`` ``float32 [L, B, H]`` (and
  ``c`` for an LSTM); outputs ``logprobs`` ``float32 [B, T, V]`` (natural log; row ``t`` is the distribution of the
  word after ``words[:, t]``) and the new state ``h_out`` (``c_out``). A sentence starts from a zero state with the
  id of ``</s>`` (0) as its first input, as the toolkit reads text;
* feed-forward (``ffnn``): input ``history`` ``int64 [B, n-1]`` (the n-1 previous ids, oldest first; before the
  sentence's first word the id ``V``, one past the vocabulary, stands for ``<s>``: metadata ``bos_id``), output
  ``logprobs`` ``float32 [B, V]``;
* Transformer: input ``words`` ``int64 [B, T]`` (``</s>`` first, at most the model's context window), output
  ``logprobs`` ``float32 [B, T, V]``.

The file's metadata (``custom_metadata_map`` in ONNX Runtime) holds ``vocab`` (the words, one per line, line i
= id i), ``unk_id``, ``eos_id``, ``kind``, ``order`` (feed-forward), ``window`` (Transformer) and
``text_options`` (JSON: how the model's training text was read), ``bos_id`` (feed-forward).
"""

from __future__ import annotations

import json
import os

import torch
from torch import nn

from ..data.vocab import EOS_ID, UNK_ID
from ..errors import UserError


class Graph(nn.Module):
    """The exported computation: the model's trunk (``export_forward``: contexts and the new state) and the
    objective's exact ``log_prob`` over all V, reshaped to the contexts' leading dimensions."""

    def __init__(self, model, objective):
        super().__init__()
        self.model, self.objective = model, objective

    def forward(self, *inputs):
        ctx, state = self.model.export_forward(*inputs)
        lp = self.objective.log_prob(self.model, ctx.reshape(-1, ctx.shape[-1]))
        return (lp.reshape(*ctx.shape[:-1], lp.shape[-1]), *state)


def graph_of(model, objective, config: dict):
    """``(module, example inputs, input names, output names, dynamic axes, metadata)`` of a loaded run."""
    if getattr(objective, "uses_history", False):
        raise UserError(f"objective {config['objective']['name']!r} backs off to an n-gram over each prediction's "
                        "own words, which an ONNX graph of the neural model cannot hold; export is for the other "
                        "objectives")
    if not hasattr(model, "export_signature"):
        raise UserError(f"no ONNX export for model type {config['model']['type']!r}")
    sig = model.export_signature()
    lead = {k: v for k, v in sig["axes"][sig["input_names"][0]].items()}
    axes = {**sig["axes"], "logprobs": lead}
    meta = {"kind": config["model"]["type"], **sig["meta"]}
    return (Graph(model, objective), sig["inputs"], sig["input_names"], ["logprobs", *sig["state_names"]], axes, meta)


def clear_branch_shapes(graph) -> None:
    """Drop the shapes declared on the outputs of every ``If`` node's branches (element types kept).

    The exporter writes ``scatter_reduce`` (the class objective's per-class maximum) as ``If(self is 0-d)``, and
    gives the branch that keeps a 2-D tensor the 1-D shape it inferred for the other; ONNX Runtime then warned
    "Expected shape ... does not match actual shape" on every call, though the numbers are right. A branch output
    without a declared shape is checked against nothing; the graph's own outputs keep theirs."""
    for node in graph.node:
        for attr in node.attribute:
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                if node.op_type == "If":
                    for out in sub.output:
                        out.type.tensor_type.ClearField("shape")
                clear_branch_shapes(sub)


def export_onnx(run_dir, output: str, opset: int = 18) -> dict:
    """Write ``run_dir``'s model as the ONNX file ``output`` (atomically); returns its metadata. ``run_dir``: a run
    directory, or a neural model as :func:`sampledlm.load` returns it (or its ``lm``)."""
    try:
        import onnx
    except ImportError:
        raise UserError("export --format onnx needs the onnx package: pip install 'sampledlm[onnx]'") from None
    import tempfile
    import warnings

    from .rundir import load_run

    if isinstance(run_dir, (str, os.PathLike)):
        model, objective, vocab, config = load_run(os.fspath(run_dir))
        source = os.path.abspath(run_dir)
    else:
        from ..lm import language_model

        lm = language_model(run_dir)
        if getattr(lm, "family", None) != "neural":
            raise UserError(f"export --format onnx: a neural model is needed, got {lm.describe()}")
        model, objective, vocab, config = lm.model, lm.objective, lm.vocab, lm.config
        source = "(a model in memory)"
    model, objective = model.cpu().eval(), objective.cpu().eval()
    try:
        module, inputs, names_in, names_out, axes, meta = graph_of(model, objective, config)
    except UserError as e:  # what cannot be exported: named with the run it is about
        raise UserError(f"{source}: {e}") from None
    meta.update({"vocab": "\n".join(vocab.words), "unk_id": str(UNK_ID), "eos_id": str(EOS_ID),
                 "text_options": json.dumps(config.get("data", {}).get("text_options") or {}),
                 "objective": config["objective"]["name"], "source": source})
    from ..data.writing import sweep_dead_temps, temp_prefix

    directory = os.path.dirname(os.path.abspath(output))
    sweep_dead_temps(directory)  # a killed export's scratch folder (the whole graph) goes
    try:  # named as the writers' temporary files are, so that the next write of OUTPUT sweeps a killed one's
        scratch = tempfile.TemporaryDirectory(dir=directory, prefix=f"{temp_prefix(output)}{os.getpid()}.",
                                              suffix=".tmp")
    except OSError as e:
        raise UserError(f"{output}: cannot write ({e.strerror})") from None
    with scratch as tmp:
        raw = os.path.join(tmp, "graph.onnx")
        try:
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the exporter's notes on the legacy path and on RNN batch sizes
                torch.onnx.export(module, inputs, raw, input_names=names_in, output_names=names_out,
                                  dynamic_axes=axes, opset_version=opset, dynamo=False)
        except OSError as e:  # the exporter's own write (a full disk): it names no file
            from ..data.writing import write_error

            raise (write_error(output, e) or UserError(f"{output}: cannot write ({e.strerror or e})")) from None
        graph = onnx.load(raw)
        for out in graph.graph.output:  # the vocabulary axis is V, not a free dimension the tracer named
            if out.name == "logprobs":
                out.type.tensor_type.shape.dim[-1].dim_value = len(vocab)
        clear_branch_shapes(graph.graph)
        for key, value in meta.items():
            graph.metadata_props.append(onnx.StringStringEntryProto(key=key, value=value))
        onnx.checker.check_model(graph)
        from ..data.textio import atomic_write

        with atomic_write(output, "wb") as f:
            f.write(graph.SerializeToString())
    return meta
