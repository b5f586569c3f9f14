"""The training run's state besides tensors: exact re-seeding and signals turned into a flag."""

import os
import random
import signal

import numpy as np
import pytest
import torch

from sampledlm.errors import UserError
from sampledlm.neural.run_state import (TrainState, interrupt_flag, optimizer_from_files, optimizer_to_files,
                                          rng_from_files, rng_to_files, seed_everything)


def draws():
    return torch.rand(3).tolist(), np.random.rand(3).tolist(), [random.random() for _ in range(3)]


def test_the_same_seed_and_epoch_draw_the_same_numbers_and_another_epoch_or_rank_does_not():
    seed_everything(7, 2)
    first = draws()
    seed_everything(7, 2)
    assert draws() == first
    seed_everything(7, 3)
    assert draws() != first
    seed_everything(7, 2, rank=1)
    assert draws() != first


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_sets_the_flag_and_the_old_handler_comes_back(sig):
    before = signal.getsignal(sig)
    with interrupt_flag() as flag:
        assert not flag["set"]
        os.kill(os.getpid(), sig)
        assert flag["set"] and flag["signal"] == sig
    assert signal.getsignal(sig) is before


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="no SIGHUP on this platform")
def test_a_hang_up_stops_training_at_a_checkpoint_unless_nohup_ignores_it():
    """A closed terminal (SIGHUP) killed a training run between checkpoints; under ``nohup`` (SIGHUP ignored) it
    must stay ignored."""
    before = signal.getsignal(signal.SIGHUP)
    try:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)  # as in a terminal (the suite may run under nohup)
        with interrupt_flag() as flag:
            os.kill(os.getpid(), signal.SIGHUP)
            assert flag["set"] and flag["signal"] == signal.SIGHUP
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_DFL
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        with interrupt_flag() as flag:
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)
            assert not flag["set"]
    finally:
        signal.signal(signal.SIGHUP, before)


def test_a_second_ctrl_c_stops_at_once():
    with interrupt_flag():
        os.kill(os.getpid(), signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)


def test_a_new_state_starts_at_the_first_step_with_no_best_yet():
    st = TrainState()
    assert (st.epoch, st.batch, st.step, st.done) == (0, 0, 0, False) and st.best_valid == float("inf")
    assert st.metrics == [] and TrainState().metrics is not st.metrics


def test_the_random_states_written_and_read_back_draw_the_same_numbers():
    seed_everything(3, 0)
    tensors, meta = rng_to_files()
    first = draws()
    rng_from_files(tensors, meta)
    assert draws() == first


def test_an_optimiser_state_comes_back_and_a_different_optimiser_is_refused_naming_the_file():
    w = torch.nn.Parameter(torch.ones(4))
    adam = torch.optim.Adam([w], lr=0.1)
    (w * torch.arange(4.0)).sum().backward()
    adam.step()
    tensors, meta = optimizer_to_files([adam])
    again = torch.optim.Adam([torch.nn.Parameter(torch.ones(4))], lr=0.5)
    optimizer_from_files([again], tensors, meta, "ckpt")
    st = again.state_dict()
    assert torch.equal(st["state"][0]["exp_avg"], adam.state_dict()["state"][0]["exp_avg"])
    assert st["param_groups"][0]["lr"] == 0.1
    with pytest.raises(UserError, match="ckpt: optimizer Adam saved, SGD configured"):
        optimizer_from_files([torch.optim.SGD([w], lr=0.1)], tensors, meta, "ckpt")
    with pytest.raises(UserError, match="ckpt: optimizer state does not match"):
        optimizer_from_files([adam, adam], tensors, meta, "ckpt")
