"""The project as a user meets it: a license, a changelog whose latest version is the package's, the version the
citations give, ``py.typed`` shipped, and ``dir(sampledlm)`` listing what the package serves on first use."""

from __future__ import annotations

import pathlib
import re
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

import sampledlm

ROOT = pathlib.Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
VERSION = PYPROJECT["project"]["version"]


def test_the_license_file_is_the_mit_license_pyproject_names():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert PYPROJECT["project"]["license"] == "MIT"
    assert text.startswith("MIT License") and "the sampledlm authors" in text


def test_the_changelog_opens_with_this_version_and_the_citations_give_it():
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    versions = re.findall(r"^## \[(\d+\.\d+\.\d+)\]", changelog, flags=re.M)
    assert versions and versions[0] == VERSION, f"CHANGELOG.md's latest version {versions[:1]} is not {VERSION}"
    for page in ("README.md", "docs/index.md"):  # the BibTeX entries
        cited = re.findall(r"version\s*=\s*\{([^}]*)\}", (ROOT / page).read_text(encoding="utf-8"))
        assert cited == [VERSION], f"{page} cites version {cited}, pyproject.toml says {VERSION}"


def test_contributing_names_the_test_benchmark_and_docs_commands():
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    test_command = "pip install -e '.[test]' && python -m pytest -q"
    assert test_command in readme and test_command in text
    for command in (".ci/run", ".ci/oldest", "python -m benchmarks --list", "mkdocs build --strict"):
        assert command in text, command


def test_py_typed_is_in_the_package_and_in_its_package_data():
    assert (ROOT / "src" / "sampledlm" / "py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["sampledlm"]


def test_dir_lists_the_names_served_on_first_use():
    names = dir(sampledlm)
    for name in ("load", "Model", "train_ngram", "train_lm", "train_maxent", "train_embeddings", "UserError",
                 "InputWarning", "__version__", "ngram", "neural", "maxent", "embed", "api", "lm"):
        assert name in names, name
        assert getattr(sampledlm, name) is not None
    assert names == sorted(names)
    assert set(sampledlm.__all__) <= set(names)
