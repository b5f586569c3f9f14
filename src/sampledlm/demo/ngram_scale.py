"""The corpus-scale n-gram step of ``sampledlm demo``: bounded-memory estimation, the binary format, pruning."""

from __future__ import annotations

import os
import time

from .common import DemoData, Result
from ..ngram.build.budget import current_rss
from ..ngram.build.external import train_bounded
from ..ngram.build.id_stream import array_chunks
from ..ngram.build.arpa_convert import convert
from ..ngram.mapped import open_binary
from ..outputs import lock_directory
from ..ngram.build.prune import entropy_prune, entropy_scores, threshold_for_size


def ngram_scale_step(data: DemoData) -> list[Result]:
    """KN3 estimated again with a 4 MB working budget (the corpus spills as several sorted runs): the same ARPA bytes;
    then once more into a memory-mapped binary directory written straight from the spill (``ngram train --memory
    --binary``: nothing parsed), its ARPA file converted to that directory in sorted runs of the same window (``ngram
    build-binary --memory``), and entropy-pruned to a fifth of its n-grams."""
    t0 = time.perf_counter()
    ref = data.extra.get("kn3_arpa")
    path = os.path.join(data.directory, "kn3-bounded.arpa")
    budget, window = current_rss() + (4 << 20), 20_000  # the windows 4 MB would leave
    train_bounded(array_chunks(data.ids["train"], 1 << 16), data.vocab, 3, path, budget, data.directory,
                  window=window)
    same = ref is not None and open(ref, "rb").read() == open(path, "rb").read()
    bin_dir = os.path.join(data.directory, "kn3.bin")
    train_bounded(array_chunks(data.ids["train"], 1 << 16), data.vocab, 3, bin_dir, budget, data.directory,
                  binary=True, window=window)
    mapped = open_binary(bin_dir)
    from ..ngram.arpa import read_arpa

    lm = read_arpa(path, cache=False)
    same_bin = all((a.logp == b.logp).all() and (a.bow == b.bow).all() for a, b in zip(lm.tables, mapped.tables))
    conv_dir = os.path.join(data.directory, "kn3-converted.bin")  # the ARPA file streamed back, in sorted runs
    with lock_directory(conv_dir):
        convert(path, conv_dir, current_rss() + (128 << 20), data.directory, window=window, chunk_bytes=1 << 16)
    same_conv = all((getattr(a, f) == getattr(b, f)).all() for a, b in zip(open_binary(conv_dir).tables, mapped.tables)
                    for f in ("keys", "logp", "bow"))
    ppl = lambda m, s: m.perplexity(data.ids[s], data.vocab)  # noqa: E731
    t1 = time.perf_counter()
    scores = entropy_scores(lm)
    pruned = entropy_prune(lm, threshold_for_size(scores, 0.2), scores)
    share = sum(pruned.counts()[1:]) / sum(lm.counts()[1:])
    return [Result("KN3 bounded memory -> binary dir", ppl(mapped, "valid"), ppl(mapped, "test"), t1 - t0,
                   ("same ARPA bytes as in memory" if same else "ARPA DIFFERS from the in-memory one")
                   + ("; binary dir = ARPA" if same_bin else "; binary dir DIFFERS from the ARPA")
                   + ("; ARPA -> binary in sorted runs = it" if same_conv else "; the bounded ARPA -> binary DIFFERS")),
            Result("KN3 entropy-pruned (Stolcke 1998)", ppl(pruned, "valid"), ppl(pruned, "test"),
                   time.perf_counter() - t1, f"{share:.0%} of the 2-/3-grams kept")]
