"""The suite's fixtures (tests make their own data; PTB-backed tests skip when it is absent).

Layout (tests/README.md): tests/<package>/ holds the tests of src/sampledlm/<package>/; tests of a top-level
module (lm.py, store.py, ...) are tests/test_<module>*.py; tests/shape/ checks the package as a whole.
tests/shape/test_test_layout.py keeps it so. Plain helpers are in tests/helpers.py (``from helpers import ...``).

The test folders are not packages, so test file names are unique across tests/; and there is no conftest.py
in a subfolder: a second one would shadow this module for files that still do ``from conftest import ...``.
"""

from __future__ import annotations

import pathlib
import sys

import pytest

if str(pathlib.Path(__file__).parent) not in sys.path:  # pytest's default import mode puts it there already
    sys.path.insert(0, str(pathlib.Path(__file__).parent))

# REPO, PTB_DIR, synthetic_sentences and write_corpus are re-exported for files that import them from conftest
from helpers import PTB_DIR, REPO, encode_sentences, synthetic_sentences, write_corpus, write_word_corpus  # noqa: E402,F401


# --- devices -------------------------------------------------------------------------------------------------------
# "--device auto" is the CPU throughout the suite ($SAMPLEDLM_DEVICE, sampledlm/neural/device.py), also in the CLI
# processes tests start: tests compare numbers across runs, resumes and commands exactly, which a GPU's
# nondeterministic kernels (cuDNN's recurrent backward, atomic adds) do not reproduce. Tests of the GPU path name
# "cuda" themselves and run where torch sees one. SAMPLEDLM_TEST_DEVICE=cuda runs the rest on the GPU too.
_os_environ = __import__("os").environ
_os_environ["SAMPLEDLM_DEVICE"] = _os_environ.get("SAMPLEDLM_TEST_DEVICE", "cpu")


# --- workers ----------------------------------------------------------------------------------------------------
# The whole suite (no paths given) runs on one worker a core when pytest-xdist is installed (it is in the test
# extra): most of its time is CLI processes and small trainings, one core each. `-n N` chooses, `-n 0` runs it in
# this process; without pytest-xdist (a machine with no registry) it runs in this process as before.
@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    if "PYTEST_XDIST_WORKER" in _os_environ:  # a worker: its options come from the controller, never more workers
        return
    if (config.pluginmanager.hasplugin("xdist") and config.option.numprocesses is None
            and config.args_source == pytest.Config.ArgsSource.TESTPATHS and not config.option.collectonly
            and not config.getoption("usepdb", False)):
        config.option.numprocesses = "auto"


# --- the campaigns --------------------------------------------------------------------------------------------
# The fault campaign's cases and kill points (tests/campaigns/faults_cases.py) are also tests, one per case, run against
# the working tree: `python -m pytest -q --campaigns -m campaign` (about half an hour on 2 cores). Without
# --campaigns they are skipped, so the README's test command stays short.
def pytest_addoption(parser):
    parser.addoption("--campaigns", action="store_true", default=False,
                     help="also run the fault campaign's cases and kill points (tests marked campaign; slow)")


def pytest_configure(config):
    config.addinivalue_line("markers", "campaign: a case of the fault campaign (runs with --campaigns)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--campaigns"):
        return
    skip = pytest.mark.skip(reason="a fault-campaign case: run with --campaigns")
    for item in items:
        if "campaign" in item.keywords:
            item.add_marker(skip)


# --- failures as they happen -------------------------------------------------------------------------------------
# SAMPLEDLM_FAILURE_LOG=FILE appends each failure's report to FILE the moment it happens. pytest prints the reasons
# only in its final summary, which a run cut by a time limit (a lent machine's call) never reaches.
def pytest_runtest_logreport(report):
    path = _os_environ.get("SAMPLEDLM_FAILURE_LOG")
    if path and report.failed and "PYTEST_XDIST_WORKER" not in _os_environ:  # xdist's controller sees every report
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"=== {report.nodeid} ({report.when})\n{report.longreprtext}\n\n")


# --- property-based tests ---------------------------------------------------------------------------------------
# Profiles for hypothesis: ``ci`` (the default: a fixed, small number of examples, so the suite's time is bounded)
# and ``nightly`` (``SAMPLEDLM_HYPOTHESIS=nightly python -m pytest -q -k fuzz``: 50x the examples).
try:
    import os as _os

    from hypothesis import HealthCheck, settings

    _common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                                         HealthCheck.data_too_large])
    settings.register_profile("ci", max_examples=40, derandomize=True, **_common)
    settings.register_profile("nightly", max_examples=2000, **_common)
    settings.load_profile(_os.environ.get("SAMPLEDLM_HYPOTHESIS", "ci"))
except ImportError:  # hypothesis is in the test extra; without it the fuzz tests are skipped by their importorskip
    pass


# --- caches ------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="session", autouse=True)
def _session_cache(tmp_path_factory):
    """No test reads or writes the user's cache (``~/.cache/sampledlm``): id streams, word classes, parsed ARPA files
    and bench runs go to one folder of the test session (a test that needs its own asks for ``private_cache``)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SAMPLEDLM_CACHE", str(tmp_path_factory.mktemp("session-cache")))
        yield


@pytest.fixture
def private_cache(tmp_path, monkeypatch) -> pathlib.Path:
    """Parsed-ARPA, corpus and bench caches go to tmp_path/cache, not the user's (``SAMPLEDLM_CACHE``)."""
    monkeypatch.setenv("SAMPLEDLM_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def module_cache(tmp_path_factory):
    """One cache for a whole test module, so runs cached by one test are reused by the next."""
    path = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SAMPLEDLM_CACHE", str(path))
        yield path


# --- corpora -------------------------------------------------------------------------------------------------------

@pytest.fixture
def tiny_corpus(tmp_path) -> dict[str, pathlib.Path]:
    """train.txt (400 sentences), valid.txt and test.txt (60 each) in tmp_path."""
    sents = synthetic_sentences(520, seed=0)
    return {
        "train": write_corpus(tmp_path / "train.txt", sents[:400]),
        "valid": write_corpus(tmp_path / "valid.txt", sents[400:460]),
        "test": write_corpus(tmp_path / "test.txt", sents[460:]),
    }


@pytest.fixture
def words_corpus(tmp_path) -> pathlib.Path:
    """tmp_path, holding train.txt (80 sentences) and valid.txt (20) over helpers.WORDS."""
    write_word_corpus(tmp_path / "train.txt", 80, 1)
    write_word_corpus(tmp_path / "valid.txt", 20, 2)
    return tmp_path


@pytest.fixture
def abc_corpus(tmp_path, private_cache):
    """(path, vocabulary) of tmp_path/c.txt: "a b c", "d", an empty line, "b a"; a private corpus cache."""
    from sampledlm.data.corpus import build_vocab

    p = tmp_path / "c.txt"
    p.write_text("a b c\nd\n\nb a\n", encoding="utf-8")
    v = build_vocab(str(p))
    return p, v


@pytest.fixture(scope="module")
def ngram_corpus():
    """(vocabulary, train ids, held-out ids): a synthetic corpus (vocabulary 40, plus one word never seen
    in training, "never-seen") of 200 training and 60 held-out sentences."""
    from sampledlm.data.vocab import Vocab

    sents = synthetic_sentences(260, vocab_size=40, seed=3)
    vocab = Vocab.from_sentences(sents[:200])
    vocab = Vocab(vocab.words + ["never-seen"], list(vocab.counts) + [0])
    return vocab, encode_sentences(vocab, sents[:200]), encode_sentences(vocab, sents[200:])


@pytest.fixture(scope="module")
def arpa_corpus():
    """(vocabulary, train ids, held-out ids): a synthetic corpus (vocabulary 30) of 120 training and 40
    held-out sentences."""
    from sampledlm.data.vocab import Vocab

    sents = synthetic_sentences(160, vocab_size=30, seed=5)
    vocab = Vocab.from_sentences(sents[:120])
    return vocab, encode_sentences(vocab, sents[:120]), encode_sentences(vocab, sents[120:])


@pytest.fixture
def small_ngram_window(monkeypatch) -> int:
    """Bounded n-gram estimation in windows of MIN_WINDOW elements, also through the command line: many sorted
    runs (or Dask shards) from a small corpus, the budget then unchecked. Sets the ``window`` argument of
    :func:`sampledlm.ngram.build.build`, which ``ngram train`` looks up when it runs; returns the window."""
    import functools

    import sampledlm.ngram.build as ngram_build
    from sampledlm.ngram.build.budget import MIN_WINDOW

    monkeypatch.setattr(ngram_build, "build", functools.partial(ngram_build.build, window=MIN_WINDOW))
    return MIN_WINDOW


@pytest.fixture
def ptb_dir() -> pathlib.Path:
    if not (PTB_DIR / "ptb.train.txt").exists():
        pytest.skip(f"PTB not found at {PTB_DIR} (it lives in ../shared/data/ptb beside the repository)")
    return PTB_DIR


# --- models --------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def trained_ffnn(tmp_path_factory) -> pathlib.Path:
    """A directory with train.txt, valid.txt, test.txt (helpers.WORDS) and run/, a tiny FFNN trained on them
    through the CLI; shared by one test module's tests."""
    from sampledlm.cli import main

    d = tmp_path_factory.mktemp("ev")
    for name, n, seed in (("train", 80, 1), ("valid", 20, 2), ("test", 20, 3)):
        write_word_corpus(d / f"{name}.txt", n, seed)
    try:
        main(["train", "--train", str(d / "train.txt"), "--valid", str(d / "valid.txt"), "-o", str(d / "run"),
              "--order", "3", "-d", "6", "--hidden", "8", "--epochs", "2", "--batch-size", "16", "--lr", "0.5"])
    except SystemExit as e:
        assert e.code == 0
    return d


def _train_tiny_models(d: pathlib.Path, maxent: bool) -> pathlib.Path:
    """train.txt, valid.txt, test.txt (a synthetic corpus, vocabulary 50) in ``d`` and kn3.arpa, ffnn3/, gru/ (and
    melm/ when ``maxent``) trained on them through the CLI."""
    from sampledlm.cli import main

    sents = synthetic_sentences(330, seed=0)
    write_corpus(d / "train.txt", sents[:250])
    write_corpus(d / "valid.txt", sents[250:290])
    write_corpus(d / "test.txt", sents[290:])
    common = ["--train", str(d / "train.txt"), "--valid", str(d / "valid.txt"), "--epochs", "1", "--threads", "1"]
    runs = [["ngram", "train", "--train", str(d / "train.txt"), "--order", "3", "-o", str(d / "kn3.arpa")],
            ["train", *common, "--model", "ffnn", "--order", "3", "-d", "8", "--hidden", "16", "-o", str(d / "ffnn3")],
            ["train", *common, "--model", "gru", "-d", "8", "--hidden", "16", "-o", str(d / "gru")]]
    if maxent:
        runs.append(["maxent", "train", "--train", str(d / "train.txt"), "--valid", str(d / "valid.txt"),
                     "-o", str(d / "melm")])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SAMPLEDLM_CACHE", str(d / "cache"))
        for args in runs:
            try:
                main(args)
            except SystemExit as e:
                assert e.code == 0, args
    return d


@pytest.fixture(scope="session")
def serve_models(tmp_path_factory) -> pathlib.Path:
    """A directory with train.txt, valid.txt, test.txt (a synthetic corpus, vocabulary 50) and kn3.arpa, ffnn3/ and
    gru/ trained on them through the CLI (tiny; shared by the session's tests): the models a server test serves."""
    return _train_tiny_models(tmp_path_factory.mktemp("served"), maxent=False)


# --- the command line ----------------------------------------------------------------------------------------------

@pytest.fixture
def run_in_process(capsys):
    """Run ``sampledlm ARGS`` in-process in ``cwd`` (the console entry point, so errors print as for a user);
    returns (returncode, stdout, stderr) as a namespace."""
    import os
    from types import SimpleNamespace

    from sampledlm.cli import main

    def _run(*args, cwd):
        old = os.getcwd()
        os.chdir(cwd)
        try:
            with pytest.raises(SystemExit) as e:
                main(list(args))
        finally:
            os.chdir(old)
        out = capsys.readouterr()
        return SimpleNamespace(returncode=e.value.code, stdout=out.out, stderr=out.err)

    return _run


@pytest.fixture(scope="module")
def four_models(tmp_path_factory) -> pathlib.Path:
    """A directory with train.txt, valid.txt, test.txt (a synthetic corpus, vocabulary 50) and one tiny model of
    each family trained on them through the CLI: kn3.arpa, ffnn3/, gru/, melm/ (one test module's)."""
    return _train_tiny_models(tmp_path_factory.mktemp("models"), maxent=True)


@pytest.fixture(scope="module")
def samples_kn3(tmp_path_factory):
    """``sampledlm samples``'s files and kn3.arpa trained on their train.txt."""
    from sampledlm.cli import main

    d = tmp_path_factory.mktemp("samples")
    for args in (["samples", str(d)], ["ngram", "train", "--train", str(d / "train.txt"), "-o", str(d / "kn3.arpa")]):
        with pytest.raises(SystemExit) as e:
            main(args)
        assert e.value.code == 0
    return d
