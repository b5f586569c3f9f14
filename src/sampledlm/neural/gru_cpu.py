"""One GRU layer over a whole segment with a hand-written backward pass, for training on a CPU.

``torch.nn.GRU`` (Cho et al. 2014, with PyTorch's gate layout) computes, for inputs ``x_t [B, e]``::

    r_t = sigmoid(W_ir x_t + b_ir + W_hr h_{t-1} + b_hr)
    z_t = sigmoid(W_iz x_t + b_iz + W_hz h_{t-1} + b_hz)
    n_t = tanh(W_in x_t + b_in + r_t * (W_hn h_{t-1} + b_hn))
    h_t = (1 - z_t) * n_t + z_t * h_{t-1}

and on a CPU its autograd graph does, per time step, the recurrent product forward and *two*
backward (``dh_{t-1}`` and that step's share of ``dW_h``), each a small ``[B, h] x [h, 3h]`` product.
:class:`SegmentGRU` keeps the one forward product per step and the one for ``dh_{t-1}``, and
computes the weight gradients once per segment as single large products over all ``T B`` rows::

    dW_h = dG_h^T  [3h, T B] @ H_prev [T B, h]      dW_i = dG_i^T [3h, T B] @ X [T B, e]

where ``dG_i`` / ``dG_h`` are the gradients of the input-side and recurrent-side pre-activations
(they differ only in the n gate, where the recurrent side is scaled by ``r_t``). The input projection
of every step is one product too. The numbers are those of ``torch.nn.GRU`` (the sums run in
another order, so they agree to float32 rounding). Shapes: ``x [T, B, e]``, ``h0 [B, h]``; weights as
``torch.nn.GRU`` stores them (``weight_ih [3h, e]``, ``weight_hh [3h, h]``, biases ``[3h]``).

``w_ih = None`` is the GRU without input matrices (faster-rnnlm's ``gru`` layer: the
embedding, of the state's width, added as it is to each gate's pre-activation, ``W_ir = W_iz = W_in = I``): the
input product and its two backward products are not computed, and ``dx`` is the sum of the three gates' ``dG_i``.
"""

from __future__ import annotations

import torch

from ..objectives import cpu_linear


#: up to this many rows, a segment without gradient runs in one compiled loop (:func:`.gru_cpu_kernel.segment_forward`)
SEGMENT_ROWS = 8


class SegmentGRU(torch.autograd.Function):
    """``SegmentGRU.apply(x [T, B, e], h0 [B, h], w_ih, w_hh, b_ih, b_hh, low) -> (out [T, B, h], h_T [B, h])``;
    ``w_ih`` None: identity input matrices (``e == h``). ``low`` (``torch.bfloat16`` under bf16 autocast, else
    None): the matrix products' inputs are rounded to it, as autocast rounds a linear layer's, and their results
    come back in float32; the gates, the states and every elementwise step stay float32."""

    @staticmethod
    def forward(fctx, x, h0, w_ih, w_hh, b_ih, b_hh, low=None):
        from .gru_cpu_kernel import segment_forward

        with torch.autocast("cpu", enabled=False):
            x, h0 = x.float().contiguous(), h0.float()
            steps, batch, _ = x.shape
            hid = w_hh.shape[1]
            if w_ih is None:
                pre_x = x  # the step adds it to each gate with b_ih (step_forward_identity)
            else:
                flat_x = x.reshape(steps * batch, -1)
                pre_x = (cpu_linear.linear(flat_x, w_ih.detach(), b_ih.detach()) if low is None
                         else _product(flat_x, w_ih.t(), low).add_(b_ih)).view(steps, batch, 3 * hid)
            hs = x.new_empty(steps + 1, batch, hid)  # h_0 .. h_T
            hs[0] = h0
            gates = x.new_empty(steps, batch, 3 * hid)  # r, z, n per step
            hn = x.new_empty(steps, batch, hid)  # W_hn h_{t-1} + b_hn, which the backward pass needs
            arrays = [a.detach().contiguous().numpy() for a in (pre_x, b_hh, hs, gates, hn)]
            b_ih_np = None if w_ih is not None else b_ih.detach().float().contiguous().numpy()
            if batch <= SEGMENT_ROWS and low is None:  # a few rows (scoring): the whole segment in one compiled loop
                segment_forward(arrays[0], b_ih_np if b_ih_np is not None else arrays[1], b_ih_np is not None,
                                w_hh.detach().contiguous().numpy(), *arrays[1:])
            else:
                _steps_forward(arrays, b_ih_np, hs, w_hh, low)
        fctx.save_for_backward(x, hs, gates, hn, w_ih, w_hh)
        fctx.low = low
        return hs[1:], hs[-1].clone()

    @staticmethod
    def backward(fctx, d_out, d_last):
        from .gru_cpu_kernel import step_backward

        x, hs, gates, hn, w_ih, w_hh = fctx.saved_tensors
        low = fctx.low
        with torch.autocast("cpu", enabled=False):
            steps, batch, _ = x.shape
            hid = w_hh.shape[1]
            identity = w_ih is None
            d_pre_h = x.new_empty(steps, batch, 3 * hid)
            # the input side's gradients: [d_r, d_z, d_n] per step, or (identity) d_x and d_n
            d_in = [x.new_empty(steps, batch, hid), x.new_empty(steps, batch, hid)] if identity \
                else [x.new_empty(steps, batch, 3 * hid), x.new_empty(0, 0, 0)]
            dh = d_last.float().clone() if d_last is not None else x.new_zeros(batch, hid)
            dh_z = x.new_empty(batch, hid)
            arrays = [a.detach().numpy() for a in (gates, hn, hs, *d_in, d_pre_h)]
            d_out_np = (d_out.float().contiguous() if d_out is not None else x.new_empty(0, 0, 0)).numpy()
            w_back = w_hh.detach().t() if low is None else w_hh.to(low)
            for t in range(steps - 1, -1, -1):
                step_backward(dh.numpy(), d_out_np, t, *arrays, dh_z.numpy(), identity)
                if low is None:  # d_pre_h[t] W_hh + dh_z
                    dh = cpu_linear.linear(d_pre_h[t], w_back).add_(dh_z)
                else:
                    dh = torch.mm(d_pre_h[t].to(low), w_back).float().add_(dh_z)
            flat_dh = d_pre_h.view(steps * batch, 3 * hid)
            need = fctx.needs_input_grad
            d_x = d_w_ih = d_b_ih = None
            d_b_hh = flat_dh.sum(0) if need[5] or (identity and need[4]) else None
            if identity:
                d_x = d_in[0] if need[0] else None
                if need[4]:  # d_pre_x and d_pre_h share the r and z columns
                    d_b_ih = torch.cat([d_b_hh[:2 * hid], d_in[1].view(steps * batch, hid).sum(0)])
            else:
                flat_x = x.reshape(steps * batch, -1)
                flat_dx = d_in[0].view(steps * batch, 3 * hid)
                d_x = _product(flat_dx, w_ih, low).view(steps, batch, -1) if need[0] else None
                d_w_ih = _product(flat_dx.t(), flat_x, low) if need[2] else None
                d_b_ih = flat_dx.sum(0) if need[4] else None
            d_w_hh = _product(flat_dh.t(), hs[:-1].reshape(steps * batch, hid), low) if need[3] else None
        return d_x, (dh if need[1] else None), d_w_ih, d_w_hh, d_b_ih, (d_b_hh if need[5] else None), None


def _steps_forward(arrays: list, b_ih_np, hs: torch.Tensor, w_hh: torch.Tensor, low: torch.dtype | None) -> None:
    """:meth:`SegmentGRU.forward`'s steps for a batch: each step's recurrent product (through oneDNN, or in
    ``low`` precision) then its compiled elementwise work (:func:`.gru_cpu_kernel.step_forward`), filling
    ``arrays = [pre_x, b_hh, hs, gates, hn]`` (numpy views)."""
    from .gru_cpu_kernel import step_forward, step_forward_identity

    onednn = low is None and cpu_linear.goes_to_onednn(hs[0], w_hh)
    w_step = w_hh.detach() if onednn else w_hh.t() if low is None else w_hh.t().to(low)
    pre_h = hs.new_empty(hs.shape[1], w_hh.shape[0])  # h_{t-1} W_hh^T; the step adds b_hh
    for t in range(hs.shape[0] - 1):
        if onednn:
            pre_h = cpu_linear.linear(hs[t], w_step)
        elif low is None:
            torch.mm(hs[t], w_step, out=pre_h)
        else:
            pre_h = torch.mm(hs[t].to(low), w_step).float()
        if b_ih_np is None:
            step_forward(pre_h.numpy(), arrays[0], t, *arrays[1:])
        else:
            step_forward_identity(pre_h.numpy(), arrays[0], b_ih_np, t, *arrays[1:])


def _product(a: torch.Tensor, b: torch.Tensor, low: torch.dtype | None) -> torch.Tensor:
    """``a @ b`` in float32 (through :mod:`.cpu_linear`), its inputs rounded to ``low`` first when given."""
    return cpu_linear.mm(a, b) if low is None else (a.to(low) @ b.to(low)).float()


def usable(rnn: torch.nn.Module, x: torch.Tensor) -> bool:
    """Whether :func:`gru_forward` can stand in for ``rnn(x, state)``: a float32 ``torch.nn.GRU`` (batch
    first, with biases, one direction, no projection) on the CPU, either training, outside autocast or under bf16
    autocast (``--precision bf16``), or scoring a few rows with no gradient and no autocast (``batch <=``
    :data:`SEGMENT_ROWS`: one row of running text in evaluation, where ``torch.nn.GRU``'s per-step calls on a
    ``[1, h]`` state cost 3.4x the one compiled loop, 12.0 against 3.6 ms for 512 tokens at h = 256), and not while a
    graph is traced for export."""
    if not (isinstance(rnn, torch.nn.GRU) and x.device.type == "cpu" and x.dtype in (torch.float32, torch.bfloat16)
            and rnn.weight_hh_l0.dtype == torch.float32 and rnn.bias and rnn.batch_first and not rnn.bidirectional
            and getattr(rnn, "proj_size", 0) == 0 and not torch.jit.is_tracing()
            and not torch.onnx.is_in_onnx_export()):
        return False
    autocast = torch.is_autocast_enabled("cpu")
    if rnn.training and torch.is_grad_enabled():
        return not autocast or torch.get_autocast_dtype("cpu") == torch.bfloat16
    return not torch.is_grad_enabled() and not autocast and x.dtype == torch.float32 and x.shape[0] <= SEGMENT_ROWS


def gru_forward(rnn: torch.nn.GRU, x: torch.Tensor, state: torch.Tensor | None):
    """``rnn(x [B, T, e], state [L, B, h] or None) -> (out [B, T, h], state [L, B, h])`` through
    :class:`SegmentGRU`, layer by layer, with ``rnn``'s own weights (and its dropout between layers); a GRU
    marked by :func:`identity_input` skips its (identity) input products."""
    batch = x.shape[0]
    low = torch.bfloat16 if torch.is_autocast_enabled("cpu") else None
    if state is None:
        state = x.new_zeros(rnn.num_layers, batch, rnn.hidden_size)
    layer_in = x.transpose(0, 1).contiguous()  # [T, B, e]
    finals = []
    for k in range(rnn.num_layers):
        if k > 0 and rnn.dropout > 0:
            layer_in = torch.nn.functional.dropout(layer_in, rnn.dropout, rnn.training)
        w_ih = None if getattr(rnn, "identity_input", False) else getattr(rnn, f"weight_ih_l{k}")
        layer_in, last = SegmentGRU.apply(layer_in, state[k], w_ih,
                                          getattr(rnn, f"weight_hh_l{k}"), getattr(rnn, f"bias_ih_l{k}"),
                                          getattr(rnn, f"bias_hh_l{k}"), low)
        finals.append(last)
    return layer_in.transpose(0, 1), torch.stack(finals)


def identity_input(rnn: torch.nn.GRU) -> None:
    """Make ``rnn`` a GRU without input matrices: every layer's ``weight_ih`` the stacked identity ``[I; I; I]``,
    frozen (no gradient, so no optimiser touches it; the input biases still train), and ``rnn`` marked so that
    :func:`gru_forward` skips the products. ``torch.nn.GRU`` itself (the GPU, evaluation, export) multiplies by the
    identity: the same numbers."""
    if rnn.input_size != rnn.hidden_size:
        raise ValueError(f"a GRU without input matrices needs embed_dim ({rnn.input_size}) == hidden "
                         f"({rnn.hidden_size})")
    for k in range(rnn.num_layers):
        w = getattr(rnn, f"weight_ih_l{k}")
        if not w.is_meta:  # a model built on the meta device only to count its parameters has no values to set
            with torch.no_grad():
                w.copy_(torch.eye(rnn.hidden_size, device=w.device).repeat(3, 1))
        w.requires_grad_(False)
    rnn.identity_input = True
