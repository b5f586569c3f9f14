"""The command line asks torch's CPU allocator for transparent huge pages on large tensors, unless the user chose:
at V = 485k a fresh training process spends much of its time faulting in its tables' 4 KB pages."""

from __future__ import annotations

import os
import subprocess
import sys

from sampledlm.cli import huge_page_tensors

PROBE = """
import os
from sampledlm.cli import main
try:
    main(["vocab", "--help"])
except SystemExit:
    pass
import torch  # its allocator reads the variable at its first allocation, after the entry point has run
print(os.environ.get("THP_MEM_ALLOC_ENABLE"))
"""


def test_sets_it_when_the_user_chose_nothing():
    env = {"PATH": "/bin"}
    assert huge_page_tensors(env, {}) is True and env["THP_MEM_ALLOC_ENABLE"] == "1"


def test_leaves_the_users_choice_alone_and_is_too_late_once_torch_is_loaded():
    env = {"THP_MEM_ALLOC_ENABLE": "0"}
    assert huge_page_tensors(env, {}) is False and env == {"THP_MEM_ALLOC_ENABLE": "0"}
    env = {}
    assert huge_page_tensors(env, {"torch": object()}) is False and env == {}


def test_a_command_runs_with_it(tmp_path):
    for preset, expected in ((None, "1"), ("0", "0")):
        env = {k: v for k, v in os.environ.items() if k != "THP_MEM_ALLOC_ENABLE"}
        if preset:
            env["THP_MEM_ALLOC_ENABLE"] = preset
        p = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        assert p.stdout.strip().splitlines()[-1] == expected
