"""``embeddings``: word2vec's skip-gram and CBOW against gensim 4.4, and NNLM projections beside them.

On PTB train + War and Peace (the largest text in ../shared/data; PTB as it is tokenised, the book
with the toolkit's raw-text tokenizer, both lower-cased), with word2vec's settings (dim 100, window
5, negative 5, sample 1e-3, min-count 5, 5 epochs, 2 threads), for skip-gram and CBOW with negative
sampling and skip-gram with hierarchical softmax:

- speed: training words/s (vocabulary words of the corpus x epochs / wall time of the training
  call), ours and gensim's ``Word2Vec.train`` alternating in one run, same sentences;
- quality over 3 seeds each side: Spearman rho on WS-353 and SimLex-999, 3CosAdd / 3CosMul analogy
  accuracy over the 30,000 most frequent words (one evaluator, :mod:`sampledlm.embed.evaluate`, for
  every set of vectors; its 3CosAdd answers agree with gensim's ``most_similar``, a test checks it);
- files: our binary and text files of the page's run read by gensim's ``load_word2vec_format`` with
  identical vectors, and gensim's files read by ours;
- the projections of neural LMs (the feed-forward and GRU runs of the ``neural`` page, or shorter runs
  with the same settings, ``ffnn3-e1`` / ``gru-e1``, whichever is finished in the bench cache; with
  ``$SAMPLEDLM_EMBED_TRAIN_NNLM=1`` the short runs are trained when neither is) evaluated the same way,
  beside word2vec trained on the same PTB text;
- a PCA picture of chosen words.

``--quick``: the built-in corpus, one seed, 1 epoch; gensim only if installed; no NNLM.
"""

from __future__ import annotations

import os
import re
import statistics
import time

import numpy as np

from sampledlm.errors import UserError
from .report import new_figure, shared_data, stamp, table, work_dir, write_page

NAME = "embeddings"
CONFIGS = [("skipgram", "neg"), ("cbow", "neg"), ("skipgram", "hs")]
SEEDS = (1, 2, 3)
EPOCHS = 5
ALPHA = {"skipgram": 0.025, "cbow": 0.05}  # word2vec's defaults, given to both sides
PLOT_WORDS = ("king queen prince princess man woman father mother son daughter france russia england japan "
              "moscow paris london tokyo monday friday january march one two three good bad better worse "
              "buy sell bought sold").split()
#: short NNLM runs when the `neural` page's runs are not in the cache: epochs per run
SHORT_EPOCHS = {"ffnn3": 1, "gru": 1}


def corpus_sources(quick: bool, scratch: str):
    from sampledlm.data.tokenizer import TextOptions

    if quick:
        from sampledlm.data.builtin import write_builtin_corpus

        os.makedirs(scratch, exist_ok=True)
        return [(write_builtin_corpus(scratch)["train"], TextOptions(lowercase=True))], "built-in corpus (pydoc topics)"
    base = shared_data()
    ptb = os.path.join(base, "ptb", "ptb.train.txt")
    book = os.path.join(base, "gutenberg", "war-and-peace.txt")
    for p in (ptb, book):
        if not os.path.isfile(p):
            raise UserError(f"{p}: not found (the embeddings page trains on PTB train + War and Peace; set $SAMPLEDLM_PTB)")
    return [(ptb, TextOptions(lowercase=True)), (book, TextOptions(tokenizer="raw", lowercase=True, gutenberg=True))], \
        "PTB train + War and Peace"


def sentences_of(sources) -> list[list[str]]:
    from sampledlm.data.tokenizer import iter_sentences

    return [s for path, opts in sources for s in iter_sentences(path, opts)]


def eval_data():
    from sampledlm.embed import evaluate as ev

    files = {k: ev.default_eval_file(f) for k, f in
             (("ws353", "wordsim353.tsv"), ("simlex", "simlex999.txt"), ("analogy", "questions-words.txt"))}
    if None in files.values():
        raise UserError("evaluation data not found: set $SAMPLEDLM_EVAL to a folder with wordsim353.tsv, "
                        "simlex999.txt and questions-words.txt")
    return {"ws353": ev.read_pairs(files["ws353"]), "simlex": ev.read_pairs(files["simlex"]),
            "analogy": ev.read_analogies(files["analogy"])}


def scores(wv, data) -> dict:
    from sampledlm.embed import evaluate as ev

    ws, sl = ev.similarity(wv, data["ws353"]), ev.similarity(wv, data["simlex"])
    a = ev.analogy(wv, data["analogy"]).to_dict()
    return {"ws353": ws.rho, "ws353_pairs": ws.pairs, "ws353_skipped": ws.skipped,
            "simlex": sl.rho, "simlex_pairs": sl.pairs, "simlex_skipped": sl.skipped,
            "add": a["all"]["add"], "mul": a["all"]["mul"], "sem_add": a["semantic"]["add"],
            "syn_add": a["syntactic"]["add"], "coverage": a["all"]["coverage"], "answered": a["all"]["answered"],
            "sections": a["sections"]}


def gensim_version() -> str | None:
    try:
        import gensim
    except ImportError:
        return None
    return gensim.__version__


def ours(vocab, corpus, model, objective, seed, epochs, threads=2):
    from sampledlm.embed.train import Word2VecConfig, train
    from sampledlm.embed.vectors import WordVectors

    cfg = Word2VecConfig(model=model, objective=objective, epochs=epochs, seed=seed, threads=threads, alpha=ALPHA[model])
    r = train(vocab, corpus, cfg, desc=f"ours {model}-{objective} seed {seed}")
    return WordVectors(vocab.words, r.w_in, vocab.counts), r.seconds, r.cpu_seconds


def theirs(sents, model, objective, seed, epochs, threads=2):
    from gensim.models import Word2Vec

    from sampledlm.embed.vectors import WordVectors

    g = Word2Vec(vector_size=100, window=5, negative=5 if objective == "neg" else 0, hs=int(objective == "hs"),
                 sample=1e-3, min_count=5, sg=int(model == "skipgram"), workers=threads, epochs=epochs,
                 alpha=ALPHA[model], min_alpha=ALPHA[model] * 1e-4, seed=seed)
    g.build_vocab(sents)
    c0 = time.process_time()
    t0 = time.perf_counter()
    g.train(sents, total_examples=len(sents), epochs=epochs)
    seconds = time.perf_counter() - t0
    cpu = time.process_time() - c0
    return WordVectors(list(g.wv.index_to_key), g.wv.vectors.copy()), seconds, cpu, g


def file_check(wv, work) -> dict:
    """Our files read by gensim, gensim's files read by ours: identical words and vectors?"""
    from gensim.models import KeyedVectors

    from sampledlm.embed.formats import load_vectors, write_binary, write_text

    out = {}
    for binary in (True, False):
        path = os.path.join(work, "ours." + ("bin" if binary else "txt"))
        (write_binary if binary else write_text)(path, wv)
        kv = KeyedVectors.load_word2vec_format(path, binary=binary)
        gpath = os.path.join(work, "gensim." + ("bin" if binary else "txt"))
        kv.save_word2vec_format(gpath, binary=binary)
        back = load_vectors(gpath)
        out["binary" if binary else "text"] = {
            "gensim_reads_ours_identical": bool(list(kv.index_to_key) == wv.words and np.array_equal(kv.vectors, wv.vectors)),
            "we_read_gensims_identical": bool(back.words == wv.words and np.array_equal(back.vectors, wv.vectors)),
            "bytes": os.path.getsize(path)}
    return out


def huffman_check(vocab, sents) -> bool:
    """Our vocabulary order and Huffman tree against gensim's on the page's sentences: every word's code and path."""
    from gensim.models import Word2Vec

    from sampledlm.embed.huffman import huffman_codes

    g = Word2Vec(vector_size=4, min_count=5, hs=1, negative=0, workers=1)
    g.build_vocab(sents)
    if list(g.wv.index_to_key) != vocab.words:
        return False
    codes, points, lens = huffman_codes(vocab.counts)
    return all(codes[i, : lens[i]].tolist() == list(g.wv.get_vecattr(w, "code"))
               and points[i, : lens[i]].tolist() == list(g.wv.get_vecattr(w, "point")) for i, w in enumerate(vocab.words))


def nnlm_runs(train_missing: bool = False) -> list[dict]:
    """The neural LM runs whose projections are evaluated: the `neural` page's finished runs, else short ones
    (trained here when ``train_missing``); a run that is neither is reported missing (``"missing": True``)."""
    from . import lmruns
    from .neural_lms import RUNS
    from .report import native_bf16

    st = lmruns.setting(False, None, with_kn3=False)
    out = []
    for name in ("ffnn3", "gru"):
        title, flags = RUNS[name]
        rd = lmruns.run_dir(st.work, st.files, lmruns.Run(name, tuple(flags.split())))
        if lmruns.finished(rd):
            out.append({"name": name, "title": title, "dir": rd, "short": False})
            continue
        short = re.sub(r"--epochs \d+", f"--epochs {SHORT_EPOCHS[name]}", flags)
        if not native_bf16():
            short = short.replace("--bf16 ", "")
        run = lmruns.Run(f"{name}-e{SHORT_EPOCHS[name]}", tuple(short.split()))
        rd = lmruns.run_dir(st.work, st.files, run)
        if not lmruns.finished(rd):
            if not train_missing:
                out.append({"name": name, "title": title, "missing": True, "dir": rd,
                            "neural_dir": lmruns.run_dir(st.work, st.files, lmruns.Run(name, tuple(flags.split())))})
                continue
            rd = lmruns.train(st.work, st.files, run)
        out.append({"name": name, "title": f"{title}, {SHORT_EPOCHS[name]} epoch(s) only", "dir": rd, "short": True,
                    "flags": short})
    return out


def _mean_spread(xs):
    xs = [x for x in xs if x == x]
    if not xs:
        return float("nan"), float("nan")
    return statistics.fmean(xs), (max(xs) - min(xs))


def run(quick: bool, data_dir: str | None, out_dir: str) -> dict:
    from sampledlm.embed.vocab import read_corpus

    meta = stamp()
    work = work_dir(NAME, quick)
    os.makedirs(work, exist_ok=True)
    sources, label = corpus_sources(quick, os.path.join(work, "data"))
    seeds, epochs = ((1,), 1) if quick else (SEEDS, EPOCHS)
    data = eval_data()
    vocab, corpus = read_corpus(sources, min_count=5)
    sents = sentences_of(sources)
    gv = gensim_version()
    have_gensim = gv is not None
    if not have_gensim and not quick:
        raise UserError("the embeddings page compares with gensim: pip install gensim==4.4.0 (or pip install -e '.[bench]')")
    loads, runs = [], []
    one_thread = []  # skip-gram with negative sampling on one thread each side, beside the two-thread pair
    keep = {}
    for si, seed in enumerate(seeds):
        for ci, (model, objective) in enumerate(CONFIGS):
            sides = ["ours", "gensim"] if (si + ci) % 2 == 0 else ["gensim", "ours"]
            for side in sides:
                if side == "gensim" and not have_gensim:
                    continue
                load = os.getloadavg()[0]
                if side == "ours":
                    wv, secs, cpu = ours(vocab, corpus, model, objective, seed, epochs)
                else:
                    wv, secs, cpu, g = theirs(sents, model, objective, seed, epochs)
                    if seed == seeds[0] and (model, objective) == CONFIGS[0]:
                        keep["gensim_model"] = g
                loads.append(load)
                row = {"side": side, "model": model, "objective": objective, "seed": seed, "seconds": secs,
                       "cpu_seconds": cpu, "words_per_s": corpus.words * epochs / secs, "load": load,
                       "vocab": len(wv), **scores(wv, data)}
                runs.append(row)
                if seed == seeds[0] and (model, objective) == CONFIGS[0]:
                    keep[side] = wv
                print(f"  {side} {model}-{objective} seed {seed}: {row['words_per_s']:,.0f} words/s, "
                      f"ws {row['ws353']:.3f} sl {row['simlex']:.3f} add {row['add']:.3f} (load {load:.1f})", flush=True)
            if (model, objective) == ("skipgram", "neg") and not quick:
                for side in reversed(sides):  # the two-thread pair, then one thread each, in mirrored order
                    if side == "gensim" and not have_gensim:
                        continue
                    load = os.getloadavg()[0]
                    if side == "ours":
                        wv, secs, cpu = ours(vocab, corpus, "skipgram", "neg", seed, epochs, threads=1)
                    else:
                        wv, secs, cpu, _ = theirs(sents, "skipgram", "neg", seed, epochs, threads=1)
                    loads.append(load)
                    sc = scores(wv, data)
                    sc.pop("sections")
                    one_thread.append({"side": side, "seed": seed, "seconds": secs, "cpu_seconds": cpu,
                                       "words_per_s": corpus.words * epochs / secs, "load": load, **sc})
                    print(f"  1 thread {side} skipgram-neg seed {seed}: {one_thread[-1]['words_per_s']:,.0f} words/s, "
                          f"ws {sc['ws353']:.3f} sl {sc['simlex']:.3f} add {sc['add']:.3f} (load {load:.1f})",
                          flush=True)
    summary = []
    for model, objective in CONFIGS:
        rs = {s: [r for r in runs if (r["model"], r["objective"], r["side"]) == (model, objective, s)]
              for s in ("ours", "gensim")}
        ratios = [o["words_per_s"] / g["words_per_s"] for o, g in zip(rs["ours"], rs["gensim"])]
        cpu_ratios = [g["cpu_seconds"] / o["cpu_seconds"] for o, g in zip(rs["ours"], rs["gensim"])]
        entry = {"model": model, "objective": objective, "speed_ratios": ratios,
                 "speed_ratio_median": statistics.median(ratios) if ratios else None,
                 "cpu_ratio_median": statistics.median(cpu_ratios) if cpu_ratios else None}
        for side in ("ours", "gensim"):
            for k in ("words_per_s", "ws353", "simlex", "add", "mul", "coverage"):
                entry[f"{side}_{k}"] = _mean_spread([r[k] for r in rs[side]])
        summary.append(entry)
    files = file_check(keep["ours"], work) if have_gensim else None
    same_tree = huffman_check(vocab, sents) if have_gensim else None
    nnlm = []
    same_text = None
    if not quick:
        nnlm, same_text = nnlm_rows(data, work)
    fig_path = plot(keep, nnlm, out_dir, quick)
    result = {"setup": {"corpus": label, "tokens": corpus.tokens_read, "words": corpus.words, "vocab": len(vocab),
                        "sentences": corpus.sentences, "epochs": epochs, "seeds": list(seeds), "threads": 2,
                        "gensim": gv, "load_min": min(loads), "load_max": max(loads),
                        "load_mean": statistics.fmean(loads), "quick": quick},
              "runs": runs, "summary": summary, "one_thread": one_thread, "files": files, "huffman_same_as_gensim": same_tree,
              "nnlm": nnlm, "ptb_word2vec": same_text}
    body = page(result)
    fig = fig_path
    write_page(out_dir, NAME, "Word embeddings: word2vec (skip-gram, CBOW) against gensim, and NNLM projections",
               meta, result, body, figure=fig)
    return result


def nnlm_rows(data, work) -> tuple[list[dict], dict]:
    """Projections of the neural LMs, and word2vec (skip-gram, negative sampling) on the LMs' own text (PTB train)."""
    from sampledlm.data.tokenizer import TextOptions
    from sampledlm.embed.export import lm_vectors
    from sampledlm.embed.vocab import read_corpus

    rows = []
    for r in nnlm_runs(train_missing=os.environ.get("SAMPLEDLM_EMBED_TRAIN_NNLM", "") == "1"):
        if r.get("missing"):
            rows.append({"name": r["name"], "title": r["title"], "which": "-", "missing": True,
                         "error": "no finished run in the bench cache"})
            continue
        for which in ("input", "output", "sum"):
            try:
                wv = lm_vectors(r["dir"], which)
            except UserError as e:
                rows.append({"name": r["name"], "title": r["title"], "which": which, "error": str(e).split(": ", 1)[-1]})
                continue
            rows.append({"name": r["name"], "title": r["title"], "which": which, "dim": wv.dim, "vocab": len(wv),
                         "short": r["short"], "dir": r["dir"], **scores(wv, data)})
    ptb = os.path.join(shared_data(), "ptb", "ptb.train.txt")
    vocab, corpus = read_corpus([(ptb, TextOptions(lowercase=True))], min_count=5)
    wv, secs, _ = ours(vocab, corpus, "skipgram", "neg", 1, EPOCHS)
    return rows, {"vocab": len(vocab), "words": corpus.words, "seconds": secs, **scores(wv, data)}


def plot(keep, nnlm, out_dir, quick):
    from sampledlm.embed.plot import plot_words

    panels = [("ours: skip-gram, neg", keep.get("ours")), ("gensim: skip-gram, neg", keep.get("gensim"))]
    if nnlm:
        from sampledlm.embed.export import lm_vectors

        for r in nnlm:
            if r["which"] == "input" and "error" not in r:
                panels.append((f"{r['name']} input projections", lm_vectors(r["dir"], "input")))
    panels = [(t, wv) for t, wv in panels if wv is not None]
    fig, axes = new_figure(1, len(panels), figsize=(5.2 * len(panels), 5), squeeze=False)
    for ax, (title, wv) in zip(axes[0], panels):
        try:
            plot_words(ax, wv, list(PLOT_WORDS), title)
        except UserError:
            ax.set_title(f"{title}: too few of the words")
    fig.tight_layout()
    return fig


def _f(x, nd=3):
    return "n/a" if x is None or x != x else f"{x:.{nd}f}"


def _ms(pair, nd=3):
    m, s = pair
    return f"{_f(m, nd)} ± {_f(s / 2, nd)}" if m == m else "n/a"


def page(res: dict) -> str:
    st = res["setup"]
    lines = [
        f"Corpus: {st['corpus']}: {st['tokens']:,} tokens, {st['words']:,} of them in the vocabulary of "
        f"{st['vocab']:,} words (min count 5), {st['sentences']:,} sentences. Settings on both sides: dim 100, "
        f"window 5, negative 5 (or hierarchical softmax), sample 1e-3, min-count 5, {st['epochs']} epoch(s), alpha 0.025 "
        f"(skip-gram) / 0.05 (CBOW) decaying linearly, 2 threads; seeds {', '.join(map(str, st['seeds']))}. "
        f"gensim {st['gensim'] or 'not installed'}. Runs alternate between the two sides in one process. "
        f"Load average during the runs: {st['load_min']:.1f} to {st['load_max']:.1f} (mean {st['load_mean']:.1f}) "
        "on 2 cores shared with other jobs, so single timings move by tens of percent; the ratios below pair "
        "runs made one after the other.",
        "",
        "Threads: ours cuts the corpus into chunks of about 10,000 words of whole sentences and each thread takes the "
        "next chunk in corpus order when it is free, as gensim's workers take its jobs of 10,000 words from one queue; "
        "each thread has its own random stream and work buffers; the learning rate of a chunk falls linearly with "
        "the words of the run before it (gensim: before the job).",
        "",
        "Words/s = vocabulary words of the corpus x epochs / wall time of the training call (gensim: "
        "`Word2Vec.train` on the tokenised sentences after `build_vocab`; ours: the kernel calls after the "
        "vocabulary and id stream are built). CPU ratio = gensim's process CPU seconds / ours for the same work.",
        "",
        "## Speed (acceptance: ours >= gensim's words/s)",
        "",
    ]
    rows = []
    for s in res["summary"]:
        med = s["speed_ratio_median"]
        verdict = "n/a" if med is None else ("met" if med >= 1.0 else "missed")
        rows.append([f"{s['model']}, {s['objective']}", f"{s['ours_words_per_s'][0]:,.0f}",
                     f"{s['gensim_words_per_s'][0]:,.0f}" if s["gensim_words_per_s"][0] == s["gensim_words_per_s"][0] else "n/a",
                     ", ".join(f"{r:.2f}" for r in s["speed_ratios"]) or "n/a", _f(med, 2), _f(s["cpu_ratio_median"], 2),
                     verdict])
    lines.append(table(["model", "ours words/s (mean)", "gensim words/s (mean)", "ratio per seed", "median ratio",
                        "CPU ratio (median)", "ours >= gensim"], rows))
    lines += ["", "## Quality (mean ± half the range over the seeds; acceptance: ours at least gensim's within the "
                  "spread)", ""]
    rows = []
    for s in res["summary"]:
        for side in ("ours", "gensim"):
            if s[f"{side}_ws353"][0] != s[f"{side}_ws353"][0]:
                continue
            rows.append([f"{s['model']}, {s['objective']}", side, _ms(s[f"{side}_ws353"]), _ms(s[f"{side}_simlex"]),
                         _ms(s[f"{side}_add"]), _ms(s[f"{side}_mul"]), _f(s[f"{side}_coverage"][0])])
    lines.append(table(["model", "side", "WS-353 rho", "SimLex-999 rho", "analogy 3CosAdd", "analogy 3CosMul",
                        "analogy coverage"], rows))
    lines += ["", verdicts(res), ""]
    if res.get("one_thread"):
        rows = []
        for side in ("ours", "gensim"):
            rs = [r for r in res["one_thread"] if r["side"] == side]
            if rs:
                rows.append([side, f"{statistics.fmean(r['words_per_s'] for r in rs):,.0f}"]
                            + [_ms(_mean_spread([r[k] for r in rs])) for k in ("ws353", "simlex", "add", "mul")])
        lines += ["### The same, skip-gram with negative sampling on one thread each side", "",
                  "On one thread no two updates of the shared vectors overlap (Hogwild) and the corpus is read "
                  "strictly in order; the difference from the table above is what the second thread costs each "
                  "side.", "",
                  table(["side", "words/s (mean)", "WS-353 rho", "SimLex-999 rho", "3CosAdd", "3CosMul"], rows), "",
                  one_thread_note(res), ""]
    r0 = next((r for r in res["runs"] if r["side"] == "ours"), None)
    if r0:
        lines += [f"Pairs scored: WS-353 {r0['ws353_pairs']} ({r0['ws353_skipped']} skipped: a word out of the "
                  f"vocabulary), SimLex-999 {r0['simlex_pairs']} ({r0['simlex_skipped']} skipped). Analogy: "
                  f"{r0['answered']:,} of {sum(x['questions'] for x in r0['sections']):,} questions have all four words among "
                  f"the 30,000 most frequent{' (here: the whole vocabulary)' if st['vocab'] <= 30_000 else ''}, "
                  "case-insensitive.", ""]
        lines += ["Analogy accuracy by section (ours, skip-gram with negative sampling, first seed; 3CosAdd / 3CosMul):",
                  "", table(["section", "answered", "3CosAdd", "3CosMul"],
                            [[s["name"], f"{s['answered']}/{s['questions']}",
                              _f(s["add"] / s["answered"] if s["answered"] else float("nan")),
                              _f(s["mul"] / s["answered"] if s["answered"] else float("nan"))]
                             for s in r0["sections"]]), ""]
    if res["files"]:
        f = res["files"]
        lines += ["## word2vec files", "",
                  f"The first run's vectors (ours, skip-gram, negative sampling) written in word2vec binary "
                  f"({f['binary']['bytes']:,} bytes) and text ({f['text']['bytes']:,} bytes) format: gensim's "
                  f"`KeyedVectors.load_word2vec_format` reads identical words and vectors: binary "
                  f"{f['binary']['gensim_reads_ours_identical']}, text {f['text']['gensim_reads_ours_identical']}; "
                  f"the files gensim writes back (`save_word2vec_format`) read in ours identically: binary "
                  f"{f['binary']['we_read_gensims_identical']}, text {f['text']['we_read_gensims_identical']}.", ""]
        if res.get("huffman_same_as_gensim") is not None:
            lines += [f"Hierarchical softmax: our vocabulary order and Huffman tree (every word's code and path of inner "
                      f"nodes) equal gensim's built from the same sentences: {res['huffman_same_as_gensim']}. (Words of "
                      "equal count are ordered as gensim orders them, by first occurrence, and paired by the same heap; "
                      "an earlier alphabetical order paired unrelated rare words and cost skip-gram's WS-353 rho.)", ""]
    if res["nnlm"]:
        lines += nnlm_section(res)
    lines += ["![PCA of chosen words](embeddings.png)", "",
              "The picture: the words " + ", ".join(PLOT_WORDS) + " on the first two principal components of their "
              "unit vectors, one panel per set of vectors (words missing from a vocabulary are left out)."]
    return "\n".join(lines)


def one_thread_note(res) -> str:
    """What the one-thread rows say about the two-thread ones (numbers from this run)."""
    s0 = next(s for s in res["summary"] if (s["model"], s["objective"]) == ("skipgram", "neg"))
    parts, shares, cpus = [], [], []
    for side in ("ours", "gensim"):
        one = [r for r in res["one_thread"] if r["side"] == side]
        if not one or s0[f"{side}_ws353"][0] != s0[f"{side}_ws353"][0]:
            continue
        quality = []
        for k, name in (("ws353", "WS-353"), ("simlex", "SimLex")):
            m1, sp1 = _mean_spread([r[k] for r in one])
            m2, sp2 = s0[f"{side}_{k}"]
            within = abs(m1 - m2) <= max(sp1, sp2)
            quality.append(f"{name} {m2:.3f} on two threads against {m1:.3f} on one "
                           f"({'within' if within else 'outside'} the seeds' spread, {max(sp1, sp2):.3f})")
        wps1 = statistics.fmean(r["words_per_s"] for r in one)
        wps2 = s0[f"{side}_words_per_s"][0]
        two = [r for r in res["runs"] if (r["side"], r["model"], r["objective"]) == (side, "skipgram", "neg")]
        cpu1, cpu2 = (statistics.fmean(r["cpu_seconds"] for r in rs) for rs in (one, two))
        share1, share2 = (statistics.fmean(r["cpu_seconds"] / r["seconds"] for r in rs) for rs in (one, two))
        shares.append(share2 / share1)
        cpus.append(cpu2 / cpu1)
        parts.append(f"{side}: " + ", ".join(quality) + f"; {wps2:,.0f} words/s on two threads against {wps1:,.0f} on "
                     f"one (x{wps2 / wps1:.2f}): the process got {share2:.2f} CPU seconds per second on two threads "
                     f"against {share1:.2f} on one (x{share2 / share1:.2f}) and spent {cpu2:.1f} CPU seconds a run "
                     f"against {cpu1:.1f} (x{cpu2 / cpu1:.2f}).")
    loads1 = [r["load"] for r in res["one_thread"]]
    text = (f"Each seed's one-thread runs were made right after its two-thread pair (load {min(loads1):.1f} to "
            f"{max(loads1):.1f}). " if loads1 else "") + " ".join(parts)
    if shares and max(shares) < 1.5:
        text += (" Words/s = CPU seconds per second / CPU seconds per word: on this machine a second thread adds little "
                 "or no CPU time per second (the other jobs keep both cores busy), while the two threads' updates of the same "
                 "rows (the frequent words') add CPU time per word, so the second thread buys little or nothing here (on an "
                 "idle 2-core machine it would add close to a core's CPU time per second: expected, not measured here).")
    from sampledlm.embed.train import BATCH_CHUNKS

    text += (" Reading order matters on this corpus of two unlike texts: an earlier version of our kernel let numba "
             f"split each batch of {BATCH_CHUNKS} chunks in two halves, one per thread, so two threads read the corpus "
             f"in two streams {BATCH_CHUNKS // 2} chunks apart; one thread reading the chunks in that interleaved order "
             "scored as two threads did, below the in-order reading, so the loss was the order, not simultaneous "
             "updates. Threads now take the chunks in order.")
    return text


def verdicts(res) -> str:
    out = []
    for s in res["summary"]:
        if s["gensim_ws353"][0] != s["gensim_ws353"][0]:
            continue
        parts = []
        for k, name in (("ws353", "WS-353"), ("simlex", "SimLex"), ("add", "3CosAdd"), ("mul", "3CosMul")):
            (om, osp), (gm, gsp) = s[f"ours_{k}"], s[f"gensim_{k}"]
            if om >= gm:
                v = "at least gensim's"
            elif om >= gm - max(osp, gsp):
                v = f"below by {gm - om:.3f}, within the seeds' spread ({max(osp, gsp):.3f})"
            else:
                v = f"below by {gm - om:.3f}, outside the spread ({max(osp, gsp):.3f}): missed"
            parts.append(f"{name} {v}")
        out.append(f"- {s['model']}, {s['objective']}: " + "; ".join(parts) + ".")
    return "\n".join(out)


def nnlm_section(res) -> list[str]:
    rows = []
    for r in res["nnlm"]:
        if "error" in r:
            rows.append([r["title"], r["which"], "-", "-", "-", "-", "-", "-", r["error"]])
            continue
        rows.append([r["title"], r["which"], r["dim"], f"{r['vocab']:,}", _f(r["ws353"]), _f(r["simlex"]), _f(r["add"]),
                     _f(r["mul"]), f"{r['answered']:,} answered; WS pairs {r['ws353_pairs']}, SimLex {r['simlex_pairs']}"])
    p = res["ptb_word2vec"]
    rows.append(["word2vec skip-gram, neg (ours) on PTB train only, seed 1", "input", 100, f"{p['vocab']:,}",
                 _f(p["ws353"]), _f(p["simlex"]), _f(p["add"]), _f(p["mul"]),
                 f"{p['answered']:,} answered; WS pairs {p['ws353_pairs']}, SimLex {p['simlex_pairs']}"])
    s0 = res["summary"][0]
    rows.append(["word2vec skip-gram, neg (ours) on PTB + War and Peace, mean of seeds", "input", 100,
                 f"{res['setup']['vocab']:,}", _f(s0["ours_ws353"][0]), _f(s0["ours_simlex"][0]), _f(s0["ours_add"][0]),
                 _f(s0["ours_mul"][0]), ""])
    short = any(r.get("short") for r in res["nnlm"] if "error" not in r)
    missing = [r["name"] for r in res["nnlm"] if r.get("missing")]
    lines = ["## Are an NNLM's projections embeddings?", "",
             "The neural LMs are trained on PTB train (vocabulary of 10,000 words), so their rows are beside word2vec "
             "trained on the same PTB text (and the page's larger corpus). input = the projection table C, output = "
             "the output layer's word vectors, sum = C + W' where both are of one size (the GRU's are tied: one "
             "table).", ""]
    if short:
        lines += ["The `neural` page's finished runs were not in the cache of the machine this page ran on; the runs "
                  "below use the same settings but stop after fewer epochs (named in the table), so they are weaker "
                  "LMs than that page's. Run `python -m benchmarks neural` first and this page picks its runs up.", ""]
    if missing:
        lines += [f"Not evaluated: {', '.join(missing)}: no finished run in the bench cache of the machine this page ran "
                  "on, and this run does not train them (an epoch of either takes minutes on a quiet 2-core machine, "
                  "far longer on a loaded one). To fill these rows: "
                  "`python -m benchmarks neural` (trains the `neural` page's runs), or "
                  "`SAMPLEDLM_EMBED_TRAIN_NNLM=1 python -m benchmarks embeddings` (trains one-epoch runs with the same "
                  "settings), then this page again.", ""]
    lines += [table(["vectors", "which", "dim", "words", "WS-353 rho", "SimLex rho", "3CosAdd", "3CosMul", "notes"], rows),
              "", conclusion(res), ""]
    return lines


def _versus(x, ref) -> str:
    """``x`` against ``ref`` in words: on par (within 10 %), or the fraction of it."""
    if ref > 0 and abs(x - ref) <= 0.1 * ref:
        return "on par"
    return f"{x / ref:.0%} of it" if ref > 0 else ("above" if x > ref else "below")


def conclusion(res) -> str:
    """What the NNLM rows show against word2vec on the same PTB text (all figures from this run)."""
    ok = [r for r in res["nnlm"] if "error" not in r]
    if not ok:
        return ("What it shows: nothing yet about the NNLM projections (no run evaluated); the word2vec rows are the "
                "reference they will be read against.")
    p = res["ptb_word2vec"]
    out = [f"What it shows, against word2vec (skip-gram, negative sampling) trained on the same PTB text (WS-353 "
           f"{p['ws353']:.3f}, SimLex {p['simlex']:.3f}, 3CosAdd {p['add']:.3f}):"]
    close = lambda x, ref: x >= 0.9 * ref  # noqa: E731
    both, related, neither, analogies = [], [], [], []
    for name in dict.fromkeys(r["name"] for r in ok):
        rows = [r for r in ok if r["name"] == name]
        best = max(rows, key=lambda r: r["ws353"] + r["simlex"])
        tied = len(rows) > 1 and len({(round(r["ws353"], 6), round(r["simlex"], 6)) for r in rows}) == 1
        which = "its one tied table (input = output)" if tied else \
            f"its {best['which']} vectors (the best of {', '.join(r['which'] for r in rows)})"
        out.append(f"{name}, {which}: WS-353 {best['ws353']:.3f} ({_versus(best['ws353'], p['ws353'])}), SimLex "
                   f"{best['simlex']:.3f} ({_versus(best['simlex'], p['simlex'])}), 3CosAdd {best['add']:.3f} "
                   f"({_versus(best['add'], p['add'])}).")
        if close(best["ws353"], p["ws353"]) and close(best["simlex"], p["simlex"]):
            both.append(name)
        elif close(max(r["ws353"] for r in rows), p["ws353"]):
            related.append(name)
        else:
            neither.append(name)
        if close(max(r["add"] for r in rows), p["add"]):
            analogies.append(name)
    said = []
    if both:
        said.append(f"{' and '.join(both)}: the projections are embeddings as far as similarity goes, ranking WS-353 "
                    "and SimLex pairs as word2vec does on the same text")
    if related:
        said.append(f"{' and '.join(related)}: related words (WS-353) end up as close as word2vec puts them, but "
                    "similar words (SimLex, which scores synonyms above mere associates) less so")
    if neither:
        said.append(f"{' and '.join(neither)}: less of the similarity structure than word2vec finds")
    out.append("So, " + "; ".join(said) + ". "
               + (f"Analogies by vector offsets come out as often as with word2vec for {' and '.join(analogies)} only."
                  if analogies else "Fewer analogies come out by vector offsets than with word2vec, whose objective is "
                  "built for that linear structure."))
    if any(r.get("short") for r in ok):
        out.append("These LMs had one epoch of training; the word2vec rows five.")
    out.append(f"word2vec on the page's larger corpus (PTB + War and Peace) reaches WS-353 "
               f"{res['summary'][0]['ours_ws353'][0]:.3f}, against {p['ws353']:.3f} on PTB alone.")
    return " ".join(out)
