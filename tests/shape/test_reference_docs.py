"""The API reference renders: the docs site builds with ``mkdocs build --strict``, and the generated reference pages
hold no raw reST (``:class:`` roles, ``=====`` table borders); every public module of ``sampledlm.use`` and
``sampledlm.neural.lm`` is on a reference page. The reST-to-Markdown step itself (docs/_ext/rest_docstrings.py) is
tested without mkdocs."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
REFERENCE_PAGES = ("python-api.md", "reference.md")
RAW_REST = re.compile(r":(class|func|meth|mod|data|attr|exc|obj):`|={5,}")


def _extension():
    spec = importlib.util.spec_from_file_location("rest_docstrings", DOCS / "_ext" / "rest_docstrings.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_public_use_module_and_the_neural_lm_are_on_a_reference_page():
    documented = set()
    for page in REFERENCE_PAGES:
        documented |= set(re.findall(r"^::: ([\w.]+)", (DOCS / page).read_text(encoding="utf-8"), flags=re.M))
    use = ROOT / "src" / "sampledlm" / "use"
    public = {f"sampledlm.use.{p.stem}" for p in use.glob("*.py")
              if not p.stem.startswith("_") and not p.stem.endswith("_kernels")}  # compiled loops: internal
    missing = sorted((public | {"sampledlm.use", "sampledlm.neural.lm"}) - documented)
    assert missing == [], f"modules missing from the reference pages {REFERENCE_PAGES}: {missing}"


def test_roles_become_cross_references_and_code_stays_as_written():
    rewrite = _extension().rewrite
    out = rewrite("See :class:`~sampledlm.lm.LanguageModel` and :func:`tune`; ``:class:`x``` is code.",
                  lambda name: {"tune": "sampledlm.use.nbest.tune"}.get(name, name))
    assert '<autoref identifier="sampledlm.lm.LanguageModel" optional><code>LanguageModel</code></autoref>' in out
    assert '<autoref identifier="sampledlm.use.nbest.tune" optional><code>tune()</code></autoref>' in out
    assert "``:class:`x```" in out


def test_simple_tables_become_markdown_tables():
    text = ("Formats:\n\n"
            "=====  ==========  =====\n"
            "name   layout      unit\n"
            "=====  ==========  =====\n"
            "a      one line    ln\n"
            "       and more\n"
            "b      ``x | y``   log10\n"
            "=====  ==========  =====\n\n"
            "After::\n\n    code\n")
    out = _extension().rewrite(text)
    assert "=====" not in out
    assert "| name | layout | unit |\n|---|---|---|\n| a | one line and more | ln |\n| b | ``x \\| y`` | log10 |" in out
    assert "After:\n\n    code" in out


@pytest.mark.slow
def test_the_site_builds_strict_and_its_reference_holds_no_raw_rest(tmp_path):
    for module in ("mkdocs", "mkdocstrings", "mkdocstrings_handlers.python", "material"):
        if importlib.util.find_spec(module.split(".")[0]) is None or importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (pip install -e '.[docs]' installs the docs site's tools)")
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    raw = {}
    for page in REFERENCE_PAGES:
        html = (site / page.removesuffix(".md") / "index.html").read_text(encoding="utf-8")
        found = sorted({m.group(0) for m in RAW_REST.finditer(html)})
        if found:
            raw[page] = found
    assert raw == {}, f"raw reST in the generated reference: {raw}"
    html = (site / "reference" / "index.html").read_text(encoding="utf-8")
    assert "<table" in html and 'class="autorefs autorefs-internal"' in html  # the n-best table; resolved roles
