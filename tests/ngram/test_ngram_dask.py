"""Counting on Dask: shards counted by two workers and merged give exactly the single-process counts and model."""

from __future__ import annotations

import http.server
import socket
import tempfile
import threading

import numpy as np
import pytest
from helpers import encode_sentences, run_cli, synthetic_sentences, write_corpus

from sampledlm.data.vocab import Vocab
from sampledlm.errors import UserError
from sampledlm.ngram import train_ngram
from sampledlm.ngram.build import distributed
from sampledlm.ngram.build.counts import count_ngrams
from sampledlm.ngram.build.distributed import (build_counts, check_scheduler, count_shard, merge_tables,
                                         scheduler_address, shard_bounds)
from sampledlm.ngram.build.estimate import estimate


@pytest.fixture(scope="module")
def corpus():
    sents = synthetic_sentences(1500, vocab_size=80, seed=8)
    vocab = Vocab.from_sentences(sents)
    return vocab, encode_sentences(vocab, sents)


def same_counts(a, b):
    for x, y in zip(a.orders, b.orders):
        for f in ("keys", "ctx", "suffix", "first", "count"):
            assert np.array_equal(getattr(x, f), getattr(y, f)), f


@pytest.mark.parametrize("shards", [1, 3, 7])
def test_map_and_reduce_equal_the_single_process_counts(corpus, shards):
    vocab, ids = corpus
    W = len(vocab) + 1
    bounds = shard_bounds(ids, shards)
    assert len(bounds) == shards and all(ids[b - 1] == 0 for _, b in bounds), "shards end at sentence ends"
    parts = [count_shard(ids[a:b], W, 4, vocab.bos_id) for a, b in bounds]
    merged = build_counts([merge_tables([p[k] for p in parts]) for k in range(4)], W, vocab.bos_id)
    same_counts(count_ngrams(ids, W, 4, vocab.bos_id), merged)


def test_two_worker_local_cluster_gives_the_single_process_model(corpus):
    pytest.importorskip("dask.distributed", reason='Dask is optional: pip install "dask[distributed]"')
    from sampledlm.ngram.build.distributed import count_with_dask

    vocab, ids = corpus
    counts, report = count_with_dask(ids, len(vocab) + 1, 3, vocab.bos_id, workers=2, processes=False)
    assert report["workers"] == 2 and report["shards"] == 4
    a, b = train_ngram(ids, vocab, 3), estimate(counts, vocab)
    for x, y in zip(a.tables, b.tables):
        assert np.array_equal(x.keys, y.keys) and np.array_equal(x.logp, y.logp) and np.array_equal(x.bow, y.bow)


@pytest.mark.parametrize("seed,order,prune", [(1, 3, None), (2, 5, None), (3, 4, [0, 1, 2]), (4, 1, None)])
def test_bounded_counting_on_dask_writes_the_single_process_bytes(tmp_path, tmp_path_factory, monkeypatch, seed,
                                                                 order, prune):
    """--engine dask with --memory: shards counted by two workers, their tables merged into the spill
    (dask_bounded) under a budget that cuts the corpus into many shards: the same ARPA bytes as one process;
    the local cluster's scratch space lay in the temp dir and is gone, none in the system's temporary directory."""
    pytest.importorskip("dask.distributed", reason='Dask is optional: pip install "dask[distributed]"')
    system_tmp = tmp_path_factory.mktemp("system-tmp")
    monkeypatch.setattr(tempfile, "tempdir", str(system_tmp))
    from sampledlm.ngram.build.budget import MIN_WINDOW, parse_memory
    from sampledlm.ngram.build.external import train_bounded
    from sampledlm.ngram.build.id_stream import array_chunks

    sents = synthetic_sentences(900, vocab_size=60, seed=seed)
    vocab = Vocab.from_sentences(sents)
    ids = encode_sentences(vocab, sents)
    if seed % 2:
        ids = ids[:-1]  # a stream that does not end with </s>
    a, b = tmp_path / "one.arpa", tmp_path / "dask.arpa"
    train_bounded(array_chunks(ids, 500), vocab, order, str(a), parse_memory("1K"), str(tmp_path), "mkn", prune,
                  window=MIN_WINDOW)
    info = train_bounded(array_chunks(ids, 500), vocab, order, str(b), parse_memory("1K"), str(tmp_path), "mkn",
                         prune, dask=(None, 2, False), window=MIN_WINDOW)
    assert info["dask"]["workers"] == 2 and info["dask"]["shards"] > 4
    assert a.read_bytes() == b.read_bytes()
    assert sorted(n.name for n in tmp_path.iterdir()) == ["dask.arpa", "one.arpa"]
    assert list(system_tmp.iterdir()) == []


def test_cli_dask_with_memory_on_two_worker_processes(tmp_path, capsys, small_ngram_window):
    """The command line: a local cluster of two worker processes, bounded merge, the local model's bytes; in small
    windows (many shards from a small corpus, the budget unchecked)."""
    pytest.importorskip("dask.distributed", reason='Dask is optional: pip install "dask[distributed]"')
    write_corpus(tmp_path / "train.txt", synthetic_sentences(400, 30, seed=1))
    base = ["ngram", "train", "--train", str(tmp_path / "train.txt"), "--order", "3", "--memory", "2K",
            "--temp-dir", str(tmp_path)]
    assert run_cli(base + ["-o", str(tmp_path / "local.arpa")], capsys)[0] == 0
    code, _, err = run_cli(base + ["-o", str(tmp_path / "dask.arpa"), "--engine", "dask", "--workers", "2"], capsys)
    assert code == 0, err
    assert "counted by 2 workers" in err
    assert (tmp_path / "local.arpa").read_bytes() == (tmp_path / "dask.arpa").read_bytes()


# --- --scheduler and the local cluster's scratch space ---------------------------------------------------------

needs_dask = pytest.mark.skipif(not __import__("importlib").util.find_spec("distributed"),
                                reason='Dask is optional: pip install "dask[distributed]"')


@pytest.mark.parametrize("address,expect", [
    ("127.0.0.1:8786", ("tcp://127.0.0.1:8786", "127.0.0.1", 8786)),
    ("tcp://head:8786", ("tcp://head:8786", "head", 8786)),
    ("TCP://head:1", ("tcp://head:1", "head", 1)),
    (" tls://head:65535 ", ("tls://head:65535", "head", 65535)),
    ("tcp://[::1]:8786", ("tcp://[::1]:8786", "::1", 8786)),
])
def test_scheduler_addresses_are_read(address, expect):
    assert scheduler_address(address) == expect


@pytest.mark.parametrize("address,why", [
    ("notanaddress", "has no port"),
    ("http://127.0.0.1:8786", "unknown address scheme 'http://'"),
    ("inproc://127.0.0.1/1/1", "unknown address scheme 'inproc://'"),
    ("127.0.0.1:99999", "port '99999' is not a number 1 .. 65535"),
    ("127.0.0.1:0", "port '0' is not a number"),
    ("127.0.0.1:port", "port 'port' is not a number"),
    ("tcp://head:8786/", "is not a number"),
    (":8786", "no host"),
    ("::1:8786", "[IPv6]:PORT"),
    ("[::1]8786", "[IPv6]:PORT"),
    ("", "an empty address"),
    ("  ", "an empty address"),
])
def test_malformed_scheduler_addresses_are_refused_at_once(address, why):
    """Refused before any connection, with the address and the form expected (not dask's ValueError)."""
    with pytest.raises(UserError) as e:
        check_scheduler(address)
    msg = str(e.value)
    assert why in msg and "tcp://HOST:PORT or HOST:PORT" in msg and "\n" not in msg
    assert f"--scheduler {address}" in msg or f"--scheduler {address!r}" in msg


def free_port() -> socket.socket:
    """A socket bound to a free port of 127.0.0.1, not listening: connections to it are refused."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    return s


@needs_dask
def test_a_refused_port_is_reported_at_once():
    with free_port() as s:
        port = s.getsockname()[1]
        with pytest.raises(UserError, match=rf"cannot reach the Dask scheduler at tcp://127\.0\.0\.1:{port} "
                                            r"\(Connection refused\)"):
            check_scheduler(f"127.0.0.1:{port}")


class Junk:
    """A server on 127.0.0.1 that answers every connection with ``payload`` (nothing: silent) and holds it open."""

    def __init__(self, payload: bytes):
        self.payload, self.conns = payload, []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
                self.conns.append(c)
                c.sendall(self.payload)
            except OSError:
                return

    def close(self):
        for c in [self.sock, *self.conns]:
            c.close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def http_server():
    """An HTTP server on 127.0.0.1 (a free port), as a dashboard's would be."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), QuietHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


@needs_dask
@pytest.mark.parametrize("payload,why", [
    (b"HTTP/1.0 200 OK\r\n\r\n<html>not dask</html>\n" * 4, "its reply is not Dask's protocol"),
    (b"\x00" * 64, "its reply is not Dask's protocol"),
    (b"", "no answer in 0.5 s"),
])
def test_a_server_that_is_not_dask_is_refused(monkeypatch, payload, why):
    """Garbage read as Dask's protocol (once numpy's "Unable to allocate 3.07 EiB"), zeros, or silence."""
    monkeypatch.setattr(distributed, "CONNECT_TIMEOUT", 0.5)
    srv = Junk(payload)
    try:
        with pytest.raises(UserError) as e:
            check_scheduler(f"tcp://127.0.0.1:{srv.port}")
    finally:
        srv.close()
    assert str(e.value).startswith(f"tcp://127.0.0.1:{srv.port} does not answer as a Dask scheduler (")
    assert why in str(e.value) and "\n" not in str(e.value)


@needs_dask
def test_a_tls_address_without_tls_settings_is_refused_at_once():
    with pytest.raises(UserError, match=r"--scheduler tls://127\.0\.0\.1:8786: a tls:// address needs Dask's TLS "
                                        r"settings"):
        check_scheduler("tls://127.0.0.1:8786")


@needs_dask
def test_an_http_server_is_refused_on_the_command_line(tmp_path, capsys, monkeypatch, http_server):
    """The CLI: one line, exit 1, no traceback (the HTTP server waits for a request line that never comes)."""
    monkeypatch.setattr(distributed, "CONNECT_TIMEOUT", 0.5)
    write_corpus(tmp_path / "train.txt", synthetic_sentences(50, 20, seed=1))
    code, _, err = run_cli(["ngram", "train", "--train", str(tmp_path / "train.txt"), "-o", str(tmp_path / "m.arpa"),
                            "--engine", "dask", "--scheduler", f"tcp://127.0.0.1:{http_server}"], capsys)
    assert code == 1
    assert err == f"sampledlm: error: tcp://127.0.0.1:{http_server} does not answer as a Dask scheduler (no answer " \
                  "in 0.5 s)\n"


@needs_dask
@pytest.mark.parametrize("memory", [[], ["--memory", "8G"]])
@pytest.mark.parametrize("address,why", [("notanaddress", "has no port"), ("http://127.0.0.1:8786", "scheme"),
                                         ("", "an empty address"), ("127.0.0.1:99999", "1 .. 65535")])
def test_bad_scheduler_addresses_on_the_command_line(tmp_path, capsys, memory, address, why):
    """--scheduler "" no longer starts a local cluster; no form of bad address ends in a traceback."""
    write_corpus(tmp_path / "train.txt", synthetic_sentences(50, 20, seed=1))
    code, _, err = run_cli(["ngram", "train", "--train", str(tmp_path / "train.txt"), "-o", str(tmp_path / "m.arpa"),
                            "--engine", "dask", "--scheduler", address, "--temp-dir", str(tmp_path), *memory], capsys)
    assert code == 1 and err.startswith("sampledlm: error: --scheduler ") and err.count("\n") == 1, err
    assert why in err and "tcp://HOST:PORT" in err
    assert not (tmp_path / "m.arpa").exists()


@needs_dask
def test_a_running_scheduler_counts_and_a_worker_is_not_taken_for_it(corpus, tmp_path):
    """A scheduler on 127.0.0.1 given by address (HOST:PORT, no scheme) counts as the local run; the address
    of one of its workers is refused by name."""
    import dask
    from dask.distributed import LocalCluster

    from sampledlm.ngram.build.distributed import count_with_dask

    vocab, ids = corpus
    W = len(vocab) + 1
    with dask.config.set({"temporary-directory": str(tmp_path)}), \
            LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp", host="127.0.0.1",
                         scheduler_port=0, dashboard_address=None) as cluster:
        address = cluster.scheduler_address
        counts, report = count_with_dask(ids, W, 3, vocab.bos_id, scheduler=address.removeprefix("tcp://"))
        worker = next(iter(cluster.scheduler_info["workers"]))
        with pytest.raises(UserError, match=r"not answer as a Dask scheduler \(a Dask Worker, not the scheduler\)"):
            check_scheduler(worker)
    assert report["workers"] == 1 and report["shards"] == 2
    same_counts(count_ngrams(ids, W, 3, vocab.bos_id), counts)


@needs_dask
def test_a_scheduler_without_workers_is_an_error_not_a_hang(corpus, tmp_path, monkeypatch):
    import dask
    from dask.distributed import LocalCluster

    from sampledlm.ngram.build import distributed
    from sampledlm.ngram.build.distributed import count_with_dask

    monkeypatch.setattr(distributed, "WORKER_WAIT", 0.5)
    vocab, ids = corpus
    with dask.config.set({"temporary-directory": str(tmp_path)}), \
            LocalCluster(n_workers=0, processes=False, protocol="tcp", host="127.0.0.1", scheduler_port=0,
                         dashboard_address=None) as cluster:
        with pytest.raises(UserError, match="has no workers .*dask worker tcp://127.0.0.1:"):
            count_with_dask(ids, len(vocab) + 1, 3, vocab.bos_id, scheduler=cluster.scheduler_address)


@needs_dask
def test_the_local_clusters_scratch_space_lies_in_the_given_directory_and_goes(tmp_path, monkeypatch):
    """The scheduler's and the workers' directories (once dask-scratch-space/ in $TMPDIR, left behind) are made
    in the directory given (the spill's, under --temp-dir) and removed on exit."""
    from sampledlm.ngram.build.distributed import dask_client

    system_tmp, run_dir = tmp_path / "system", tmp_path / "run"
    system_tmp.mkdir()
    run_dir.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(system_tmp))
    with dask_client(None, 2, processes=False, local_directory=str(run_dir)) as (client, n):
        dirs = [client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.local_directory),
                *client.run(lambda dask_worker: dask_worker.local_directory).values()]
    assert n == 2 and len(dirs) == 3
    assert all(d.startswith(str(run_dir) + "/") for d in dirs), dirs
    assert list(run_dir.iterdir()) == [] and list(system_tmp.iterdir()) == []


@needs_dask
def test_a_cluster_stopped_while_it_starts_is_closed_and_not_left_to_dasks_exit_hook():
    """Ctrl-C inside ``LocalCluster(...)``: Dask's exit hook closed the half-built cluster and failed with a
    traceback (``AssertionError: Status.init``); it is closed at once and taken off the hook's list."""
    from distributed.deploy.spec import SpecCluster

    from sampledlm.ngram.build.distributed import _local_cluster

    closed = []

    class HalfBuilt:
        def close(self, timeout=None):
            closed.append(timeout)
            raise AssertionError("Status.init")  # what closing a cluster that never started may do

    half = HalfBuilt()

    def interrupted_start(**options):
        SpecCluster._instances.add(half)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _local_cluster(interrupted_start, n_workers=2)
    assert closed == [5] and half not in SpecCluster._instances


@needs_dask
def test_in_memory_dask_counting_leaves_nothing_in_the_temp_dir(corpus, tmp_path, monkeypatch):
    from sampledlm.ngram.build.distributed import count_with_dask

    vocab, ids = corpus
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    count_with_dask(ids, len(vocab) + 1, 2, vocab.bos_id, workers=1, processes=False)
    (tmp_path / "given").mkdir()
    count_with_dask(ids, len(vocab) + 1, 2, vocab.bos_id, workers=1, processes=False, temp_dir=str(tmp_path / "given"))
    assert [p.name for p in tmp_path.iterdir()] == ["given"] and list((tmp_path / "given").iterdir()) == []
    with pytest.raises(UserError, match="--temp-dir .*nowhere: no such directory"):
        count_with_dask(ids, len(vocab) + 1, 2, vocab.bos_id, workers=1, processes=False,
                        temp_dir=str(tmp_path / "nowhere"))


@needs_dask
@pytest.mark.parametrize("smoothing,counted", [("mkn", "1 shard counted by 1 worker and merged in "),
                                               ("wb", "2 shards counted by 1 worker in ")])
def test_cli_dask_on_one_worker_says_worker_and_leaves_no_scratch_space(tmp_path, capsys, monkeypatch, smoothing,
                                                                         counted):
    """One worker process: "1 worker", not "1 workers"; nothing left in $TMPDIR (once dask-scratch-space/), by the
    pipeline (mkn) or the in-memory estimator (wb)."""
    system_tmp = tmp_path / "system"
    system_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(system_tmp))
    monkeypatch.setenv("TMPDIR", str(system_tmp))
    write_corpus(tmp_path / "train.txt", synthetic_sentences(200, 30, seed=2))
    code, _, err = run_cli(["ngram", "train", "--train", str(tmp_path / "train.txt"), "--order", "3",
                            "-o", str(tmp_path / "m.arpa"), "--engine", "dask", "--workers", "1",
                            "--smoothing", smoothing], capsys)
    assert code == 0, err
    assert f"dask: {counted}" in err
    assert list(system_tmp.iterdir()) == []
