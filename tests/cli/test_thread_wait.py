"""The command line makes torch's waiting OpenMP threads sleep rather than spin, unless the user chose: a
spinning thread on a core shared with other jobs makes 2 threads train slower than 1."""

from __future__ import annotations

import subprocess
import sys

from sampledlm.cli import passive_thread_wait

PROBE = """
import os, sys
from sampledlm.cli import main
try:
    main(["vocab", "--help"])
except SystemExit:
    pass
import torch  # loads OpenMP after the entry point has run, as every torch command does
print(os.environ.get("OMP_WAIT_POLICY"))
"""


def test_sets_passive_when_the_user_chose_nothing():
    env = {"PATH": "/bin"}
    assert passive_thread_wait(env, {}) is True
    assert env["OMP_WAIT_POLICY"] == "PASSIVE"


def test_leaves_the_users_choice_alone():
    for chosen in ({"OMP_WAIT_POLICY": "ACTIVE"}, {"GOMP_SPINCOUNT": "300000"}):
        env = dict(chosen)
        assert passive_thread_wait(env, {}) is False
        assert env == chosen


def test_too_late_once_torch_is_loaded():
    env: dict[str, str] = {}
    assert passive_thread_wait(env, {"torch": object()}) is False
    assert env == {}


def test_a_command_runs_with_it(tmp_path):
    import os

    for preset, expected in ((None, "PASSIVE"), ("ACTIVE", "ACTIVE")):
        env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
        if preset:
            env["OMP_WAIT_POLICY"] = preset
        p = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        assert p.stdout.strip().splitlines()[-1] == expected
