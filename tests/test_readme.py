"""The README cannot drift from the tool: its quick-start commands run as written, its test command is CI's."""

import os
import re
import shutil
import subprocess
import sys

from conftest import REPO


def readme_blocks(section: str) -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    m = re.search(rf"^## {re.escape(section)}\n(.*?)(?=^## )", text, re.S | re.M)
    assert m, f"README has no '## {section}' section"
    return re.findall(r"```sh\n(.*?)```", m.group(1), re.S)


def quickstart_commands() -> list[str]:
    block = readme_blocks("Quick start")[0]
    return [ln.strip() for ln in block.splitlines() if ln.strip() and not ln.strip().startswith("#")]


def test_quickstart_commands_run_as_written(tiny_corpus, tmp_path):
    cmds = quickstart_commands()
    assert cmds and all(c.startswith("sampledlm ") for c in cmds)
    exe = shutil.which("sampledlm")
    env = {**os.environ, "SAMPLEDLM_CACHE": str(tmp_path / "cache")}
    for cmd in cmds:
        argv = cmd.split()
        # run through this interpreter so the test does not depend on PATH
        argv = [sys.executable, "-m", "sampledlm", *argv[1:]] if exe is None else [exe, *argv[1:]]
        r = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)  # a hang guard only
        assert r.returncode == 0, f"README command failed: {cmd}\n{r.stderr[-2000:]}"
        assert "Traceback" not in r.stderr


def test_ci_runs_the_readme_test_command():
    install, tests = readme_blocks("Set up")[:2]
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert tests.strip() in ci.splitlines()
    assert "sampledlm demo" in install


def test_headline_table_is_generated_from_the_results():
    from benchmarks import headline

    rows = headline.collect(str(REPO / "docs" / "results"))
    assert rows and all(r["test_ppl"] > 1 for r in rows)
    assert headline.main(["--check", "--readme", str(REPO / "README.md"), "--results", str(REPO / "docs" / "results")]) == 0


def test_the_pytorch_module_example_runs_as_written():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    m = re.search(r"In a PyTorch model of your own.*?```python\n(.*?)```", text, re.S)
    assert m, "README lost its SampledOutput example"
    scope: dict = {}
    exec(compile(m.group(1), "README.md", "exec"), scope)
    import torch

    assert torch.allclose(scope["logp"].exp().sum(1), torch.ones(4), atol=1e-4)
    hidden = scope["trunk"](scope["x"])[0].reshape(-1, 256)
    scope["out"](hidden, scope["target"]).backward()
    scope["opt"].step()  # dense gradients: plain Adam over the model takes them
