"""Issue 56, deliverable 3: the page's section on the neural rows at V = 485k (:mod:`.large_vocab_neural` trains
them and records them in ``benchmarks/notes/large-vocab.jsonl``): the table against KN5, the softmax's projection,
the learning-rate races, the one-thread target line and the learning curves."""

from __future__ import annotations

from . import large_vocab_race as race
from .large_vocab_neural import (BUDGET_CPU_S, CALIBRATION_TOLERANCE, EPOCHS, PASS_ROWS, ROWS, THREAD_ROWS, revision,
                                 VALID_TOKENS)
from .large_vocab_kn5_text import same_text
from .large_vocab_record import v_full


def _unrecorded(r: dict) -> int:
    """Starts of a recorded row without a record (rows recorded before this was counted: one when the first
    recorded process resumed a run)."""
    if "unrecorded_starts" in r:
        return r["unrecorded_starts"]
    inv = r.get("invocations", [])
    return 1 if inv and inv[0].get("resume") else 0


def _process_cpu(r: dict) -> str:
    n = _unrecorded(r)
    return _f(r.get("process_cpu_s")) if not n else f">= {_f(r.get('process_cpu_s'))} ({n} unrecorded)"


# --- the page ----------------------------------------------------------------------------------------------------
LABELS = {"nce": "GRU, NCE", "is": "GRU, IS", "blackout": "GRU, BlackOut", "css-is": "GRU, CSS-IS",
          "class": "GRU, class", "hsm": "GRU, hsm", "adaptive": "GRU, adaptive", "softmax": "GRU, softmax",
          "nce-2t": "GRU, NCE, 2 threads", "hsm-2t": "GRU, hsm, 2 threads",
          "css-is-1p": f"GRU, CSS-IS, one pass over {EPOCHS}x the text",
          "css-is-1p-bf16": "GRU, CSS-IS, one pass under bf16 autocast",
          "css-is-1p-bf16-b64": "GRU, CSS-IS, one pass under bf16, 64 rows a step",
          "css-is-1p-bf16-d0": "GRU, CSS-IS, one pass under bf16, dropout 0"}
#: what a one-pass row not yet run would train (the page's list of what is missing)
PASS_WHAT = {"css-is-1p": f"its row's budget, steps and rate over {EPOCHS}x the text read once, validated {EPOCHS} "
                          "times within the epoch",
             "css-is-1p-bf16": "the one-pass row under `--precision bf16`, over the text its row's speed times "
                               "bf16's measured speed-up buys, validation and test in float32",
             "css-is-1p-bf16-b64": "the bf16 one-pass row with 64 BPTT rows a step (`--batch-size 64`, against 32), "
                                   "over the text its planned speed times the larger batch's measured speed-up buys, "
                                   "at its rate",
             "css-is-1p-bf16-d0": "the bf16 one-pass row with dropout 0 (`--dropout 0`, against the GRU's default "
                                  "0.25, chosen on PTB's 8 epochs), over the text its planned speed times the "
                                  "setting's measured speed-up buys, at its rate"}


def label(r: dict) -> str:
    """The row's name, with the sampled objectives' draws (the defaults it ran with: they changed over time)."""
    if r.get("row") == "transformer":
        return f"Transformer, {r.get('objective') or '?'}"
    o = r.get("objective_options") or {}
    draws = f" ({o['samples']:,} {'per position' if o.get('sample_mode') == 'each' else 'shared'})" \
        if "samples" in o else ""
    name = LABELS.get(r.get("row"), r.get("row", "?"))
    if ", " not in name:
        return name + draws
    base, comma, variant = name.partition(", ")[2].partition(", ")
    head = name.partition(", ")[0] + ", " + base
    return head + draws + (comma + variant if variant else "")


def _f(x, digits=0) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def kn5_test_ppl(rows: dict) -> float | None:
    k = rows.get("kn5/ours/all")
    if not k or k.get("rc") != 0:
        return None
    return k.get("query", {}).get("ppl") or k.get("eval", {}).get("ppl")  # KenLM's query, else ours (no KenLM)


def neural_rows(rows: dict) -> dict[str, dict]:
    return {r: rows[f"neural/{r}"] for r in (*ROWS, *THREAD_ROWS, *PASS_ROWS) if f"neural/{r}" in rows}


def passes_done(r: dict) -> float | None:
    """The passes over its text a trained row made: the last validation point's epoch, less the part of that epoch
    not reached when the point has an ``epoch_fraction`` (``--valid-every``); None without a curve."""
    if not r.get("curve"):
        return None
    last = r["curve"][-1]
    return last["epoch"] - 1 + last.get("epoch_fraction", 1.0)


def budget_stops(got: dict) -> str:
    """Which trained rows the budget's hard stop ended before their planned passes, as a clause of the protocol."""
    cut = []
    for r in got.values():
        done, planned = passes_done(r), (r.get("plan") or {}).get("epochs")
        if r.get("rc") == 0 and done is not None and planned and done < planned - 1e-3:
            step = r["curve"][-1].get("step")
            cut.append(f"{label(r)} at {100 * done / planned:.1f} % of its planned steps"
                       + (f" (step {step:,})" if step else ""))
    if not cut:
        return "no row so far has reached it: each ended after its epochs"
    return "it stopped " + "; ".join(cut) + "; every other row ended after its epochs"


def section(rows: dict) -> tuple[str, list[str]]:
    """The page's section on the neural rows, and the lines of what is not yet run."""
    got = neural_rows(rows)
    kn5 = kn5_test_ppl(rows)
    any_plan = next((r["plan"] for r in got.values() if r.get("plan")), None)
    budget = any_plan["budget"] if any_plan else BUDGET_CPU_S
    epochs = any_plan["epochs"] if any_plan else EPOCHS
    vpred = any_plan.get("valid_predictions") if any_plan else None
    hours = f"{budget / 3600:g} CPU-hours" if budget >= 360 else f"{budget:g} CPU seconds"
    vfull = v_full(rows)
    tpred = next((r["test"]["predictions"] for r in got.values() if r.get("test", {}).get("predictions")), None)
    lines = [f"## Neural rows at V = {vfull}: {hours} each, one thread", "",
             "The protocol of Chen, Grangier & Auli (2016): every output layer gets the same training time (here CPU "
             f"seconds, {budget:,.0f} a row, on one thread: `--threads 1`, `OMP_NUM_THREADS=1`, at nice 19 on the "
             "shared 2-core machine) and is compared by exact test perplexity at the end. Each row is `python -m "
             f"sampledlm train` with the whole count >= 3 vocabulary in the model (`--vocab`, V = {vfull}) and the "
             "objective's defaults, run by `python -m benchmarks.large_vocab neural` "
             "(`benchmarks/large_vocab_neural.py`; its docstring has every decision). One pass over the "
             f"165.5M training tokens takes 3-90 CPU-hours (IS to adaptive), so each row trains {epochs} epochs over "
             "the first N training tokens "
             f"(whole lines), N sized from the row's measured words per CPU second at V = {vfull} so that the "
             "epochs fill the budget; "
             "a faster output layer thus reads more of the corpus. The rate follows the GRU's default cosine decay "
             f"over those {epochs} epochs; `--max-time {budget:g} --time-clock cpu` is the hard stop for a run "
             "slower than planned (at the end of the epoch that passes it before 2026-12-01, at the step that "
             f"passes it since; {budget_stops(got)}). The budget clock is "
             "the trainer's own (training loop and validation); reading the data and the class/hsm word clustering "
             "come before it and are in the "
             "process CPU column." + (
                 " Rows marked *2 threads* (beside faster-rnnlm's two-thread runs) are the same with `--threads 2`: "
                 "the budget counts both threads' CPU seconds, and the rate is the one its one-thread row trained "
                 "at, not raced again (a race would cost two CPU-hours more)."
                 if any(k in THREAD_ROWS for k in got) else ""), "",
             "Validation (the learning curves, the best-epoch choice): a fixed subset of valid.txt, every k-th line "
             f"in order ({f'{vpred:,} predictions' if vpred else f'about {VALID_TOKENS:,} tokens'}), the same for "
             "every row: exact validation over all of valid.txt (281k tokens on the real corpus) at "
             f"V = {vfull} would cost about half an hour an epoch. Test: exact perplexity over the **whole** test "
             f"text ({_f(tpred)} predictions with `</s>`, the predictions KN5's figure counts), once per finished row, "
             "on one thread; its CPU time is in the table (decision: the whole text rather than a prefix, so every "
             "row is compared with KN5 on the same predictions, at about 25 CPU-minutes a row normalised over "
             "all of V).", "",
             "**Learning rates, chosen on validation the same way for every row** (benchmarks/large_vocab_race.py): "
             "the candidates are the row's default rate as PTB's lr grid chose it (the GRU's 0.004 with Adam, NCE's "
             "too; BlackOut, CSS-IS, class and hsm 0.008; the Transformer's 0.001, 0.0005 before 2026-12-01; IS's, "
             "BlackOut's, CSS-IS's and class's races began at their then default, 0.008, and all four now default to "
             "0.002 on a long run (class above 10,000 steps, the others above 20,000) such as these: IS's race with "
             "the vocabulary cut to 10k words gave 0.002 75.98 "
             "against 0.004 81.30, so the run's length decides, not V; benchmarks/notes/large-vocab-findings.md), "
             "then "
             "half of it, and "
             "half again each time the lowest rate tried is the best (or all diverged), down to 1/8 of the default. "
             "Each trains the row's plan through its first epoch (the same text, and the cosine decay over all the "
             "epochs, under which the rate stays within 15 % of its peak through epoch 1); the lowest validation "
             "perplexity after it wins and that run goes on to the budget. A candidate whose running training loss "
             f"climbs {race.DIVERGE_NATS:g} nats above its lowest is stopped as diverged. The losers' CPU is the "
             "row's tuning cost, outside its budget (as PTB's grid cells are outside the rows they choose).", ""]
    trained = {k: r for k, r in got.items() if r.get("rc") == 0 and not r.get("projected")}
    # runs at an objective's earlier defaults, kept under "neural-<what>/<row>" when the row was trained again
    earlier = [r for k, r in rows.items() if k.startswith("neural-") and "/" in k and r.get("rc") == 0
               and r.get("plan") and r.get("test")]
    tr = []
    same = same_text(rows)
    for r in [*trained.values(), *earlier]:
        p = r["plan"]
        t = r.get("test", {})
        vs = f"{100 * (t['ppl'] / kn5 - 1):+.1f} %" if kn5 and t.get("ppl") else "-"
        name = label(r) + (", the earlier default" if r in earlier else "")
        tr.append([name, f"{p['epoch_predictions']:,} x {r['epochs']}", _f(r["train_cpu_s"]),
                   _process_cpu(r), _f(r.get("words_per_cpu_s")), _f(r.get("peak_mb")),
                   _f(r["valid_ppl"], 2), f"**{t['ppl']:.2f}**" if t.get("ppl") else "-", vs,
                   _same_cell(same.get(r["row"]) if r not in earlier else None, t.get("ppl")),
                   f"{_f(t.get('cpu_s'))} ({_f(t.get('wall_s'))})",
                   str(len(r.get("invocations", [])) + _unrecorded(r))])
    if kn5:
        ktok = rows["kn5/ours/all"].get("train_tokens")
        tr.append(["KN5 (ours, whole training text)", f"{_f(ktok)} tokens (counted once)", "-", "-", "-", "-", "-",
                   f"{kn5:.2f}", "0", "-", "-", "-"])
    if trained:
        from .report import table

        lines += [table(["row", "training predictions per epoch x epochs", "budget-clock CPU s",
                         "process CPU s (all starts)", "words/CPU-s", "peak RSS MB", "valid ppl (subset, best epoch)",
                         "test ppl (whole text)", "vs KN5", "KN5 on the row's text (vs it)", "test eval CPU s (wall)",
                         "starts"], tr), "",
                  "Words/CPU-s: training predictions over the budget clock's CPU seconds (validation included). "
                  "Peak RSS: the largest of the row's training processes. Starts: processes the row took (a "
                  "stopped run resumes from its checkpoint with the same numbers); a process stopped with a "
                  "session's end left no record of its CPU, so a row with such starts reads \"at least\" "
                  "(the budget clock, the trainer's own, counts them all).", ""]
        lines += same_text_lines(trained, same, kn5, rows.get("kn5/ours/all", {}).get("train_tokens"))
        cal = [(label(r), r["plan"]["calibration"]) for r in trained.values()
               if r["plan"].get("calibration", {}).get("discarded")]
        if cal:
            lines += ["Calibration: the epochs were first sized from the speed rows (a few hundred steps), which ran "
                      "slower than a long run; a row whose first stretch (to its first checkpoint) ran more than "
                      f"{100 * CALIBRATION_TOLERANCE:.0f} % off its plan was started again, sized from that stretch: "
                      + "; ".join(f"{n}: {c['words_per_cpu_s']:,.0f} words/CPU-s over {c['steps']:,} steps against "
                                  f"{c['planned_words_per_cpu_s']:,.0f} planned ({c['ratio']:.2f}x), the discarded "
                                  f"start {_f(c.get('discarded_process_cpu_s'))} process CPU s"
                                  for n, c in cal) + " (not in the table's figures).", ""]
    else:
        lines += ["No neural row has finished yet.", ""]
    proj = got.get("softmax")
    nce_pred = trained["nce"]["plan"]["epoch_predictions"] * trained["nce"]["epochs"] if "nce" in trained else None
    if proj and proj.get("projected") and proj.get("words_per_cpu_s"):
        pilot = rows.get(proj.get("pilot"), {})
        steps = pilot.get("steps")
        n = proj["projected_predictions_in_budget"]
        lines += [f"**The softmax (projected, not trained):** a pilot run of the same GRU with the full softmax at "
                  f"V = {vfull} ({_f(pilot.get('predictions'))} predictions, {_f(steps)} steps, peak RSS "
                  f"{_f(proj.get('peak_mb'))} MB) trained at {proj['words_per_cpu_s']:,.0f} words per CPU second "
                  f"({_f(proj.get('step_cpu_s'), 2)} CPU s a step of 32 x 35 positions). The budget would buy "
                  f"{n:,.0f} training predictions, {100 * n / 165_471_322:.2f} % of one pass over the corpus"
                  + (f", against the NCE row's {nce_pred:,}" if nce_pred else "")
                  + " (projected from measured steps, labelled so).", ""]
    for r in got.values():
        if r.get("skipped"):
            lines += [f"**{label(r)}: skipped**: {r['skipped']}.", ""]
        elif r.get("failed"):
            lines += [f"**{label(r)}: failed**: {r['failed']} (benchmarks/notes/large-vocab-findings.md).", ""]
    mix = rows.get("neural-interp")
    if mix and mix.get("rc") == 0:
        lines += [f"KN5 + {label(rows['neural/' + mix['row']])} interpolated (weights by EM on the validation "
                  f"subset; the neural model's weight {mix['weight_neural']:.3f}): test perplexity "
                  f"**{mix['ppl']:.2f}** (alone: {mix['neural_ppl']:.2f} and {kn5:.2f}); "
                  + (f"{_f(mix['cpu_s'])} CPU s." if mix.get("cpu_s") else
                     "its CPU time not recorded (an earlier evaluation's cached result)."),
                  ""]
    if trained:
        lines += ["![learning curves](large-vocab.png) (right panel): validation perplexity on the subset "
                  "against the budget clock's CPU seconds, one point per epoch (a row validated within its "
                  "epochs, `--valid-every`, has a point at each validation).", ""]
    missing = []
    todo = [r for r in ROWS if r not in got]
    if todo:
        missing.append("Neural rows not yet finished: " + ", ".join(todo) + " (each about "
                       f"{hours} plus its test evaluation): `nohup nice -n 19 env "
                       "OMP_NUM_THREADS=1 python -m benchmarks.large_vocab neural --data /work/data/wiki --work "
                       "/work/data/wiki-runs &` (it skips the rows recorded and resumes a stopped one)")
    for r in PASS_ROWS:
        if r not in got:
            missing.append(f"{LABELS[r]} ({r}: {PASS_WHAT[r]}): `nice -n 19 env OMP_NUM_THREADS=1 python -m "
                           "benchmarks.large_vocab neural --data /work/data/wiki --work /work/data/wiki-runs --rows "
                           f"{r}`")
    if not (mix and mix.get("rc") == 0):
        missing.append("KN5 + the best neural row interpolated: the neural step mixes the best finished row, and "
                       "mixes again when another row takes the lead "
                       "(it builds our KN5 again with `<unk>` kept as a word, so that its vocabulary is the neural "
                       "models' own word for word; the recorded KN5 renamed it `<unk-word>` for lmplz)")
    # a two-thread or one-pass row takes its row's rate (make_plan): its one candidate is no race
    raced = {k: r for k, r in trained.items() if r.get("lr_race") and k not in (*THREAD_ROWS, *PASS_ROWS)}
    if raced:
        def cell(c):
            return "diverged" if c.get("diverged") else _f(c.get("epoch1_valid"), 2)
        rates = sorted({c["lr"] for r in raced.values() for c in r["lr_race"]}, reverse=True)
        from .report import table

        lines += ["Learning-rate race (validation perplexity on the subset after epoch 1; the chosen rate in bold; "
                  "tuning cost: the losing candidates' process CPU seconds):", "",
                  table(["row", *[f"lr {x:g}" for x in rates], "chosen", "tuning CPU s"],
                        [[label(r), *[next((("**" + cell(c) + "**") if c["lr"] == r["lr"] else cell(c)
                                           for c in r["lr_race"] if c["lr"] == x), "-") for x in rates],
                          f"{r['lr']:g}", _f(r.get("tuning_process_cpu_s"))] for r in raced.values()]), ""]
    going = {}
    # candidates settled for rows that have not finished (races carried across machines), or whose recorded run
    # trained before the race (at its default of the time): that run stays on the page until the winner's replaces it
    for k, r in rows.items():
        if k.startswith("neural-race/") and not (got.get(r["row"]) or {}).get("lr_race") \
                and r.get("revision", 1) == revision(r["row"]):
            going.setdefault(r["row"], []).append(r)
    for row, cands in going.items():
        before = " (its row above trained before the race, at its default rate of the time; the winner's run " \
            "replaces it once recorded)" if row in got else ""
        missing.append(f"Learning-rate race of {row}{before}, so far (validation perplexity on the subset after epoch "
                       "1; the process CPU seconds recorded, without those of a start stopped with a session's end): "
                       + "; ".join(f"lr {c['lr']:g}{' (default)' if c['default'] else ''}: "
                                   + (f"diverged ({c['diverged']})" if c.get("diverged")
                                      else _f(c.get("epoch1_valid"), 2))
                                   + f", {_f(c.get('process_cpu_s'))} CPU s"
                                   for c in sorted(cands, key=lambda c: -c["lr"])))
    unraced = [k for k in trained if k not in raced and k not in going and k not in (*THREAD_ROWS, *PASS_ROWS)]
    if unraced:
        missing.append("Learning rates raced on validation (the protocol above) for: " + ", ".join(unraced)
                       + " (recorded before the race; the neural step races them after the untrained rows)")
    return "\n".join(lines) + "\n", missing


def _same_cell(k: dict | None, ppl: float | None) -> str:
    if not k:
        return "-"
    return f"{k['ppl']:.2f}" + (f" ({100 * (ppl / k['ppl'] - 1):+.1f} %)" if ppl else "")


def same_text_lines(trained: dict, same: dict, kn5: float | None, kn5_tokens: int | None) -> list[str]:
    """The paragraph on KN5 trained on each row's own text (:mod:`.large_vocab_kn5_text`)."""
    got = [(label(r), r["test"]["ppl"], same[k]) for k, r in trained.items()
           if k in same and r.get("test", {}).get("ppl")]
    if not got:
        return ["*KN5 on the row's text*: not yet measured (the neural step builds our KN5 on each finished row's "
                "training prefix, with the rows' vocabulary, and scores the whole test text with it).", ""]
    wins = sum(p < k["ppl"] for _, p, k in got)
    out = (f"*KN5 on the row's text*: our KN5 (order 5, modified Kneser-Ney, unpruned) counted on the very prefix "
           "the row trained on, with the rows' vocabulary (`<unk>` a word), scored on the same whole test text "
           "(`benchmarks/large_vocab_kn5_text.py`): "
           + "; ".join(f"{n}: {k['tokens'] / 1e6:.1f}M tokens, KN5 {k['ppl']:.2f} against the row's {p:.2f}"
                       for n, p, k in got)
           + f". On the text it read, the neural row beats KN5 in {wins} of {len(got)} rows.")
    if kn5 and kn5_tokens:
        share = sorted(k["tokens"] / kn5_tokens for _, _, k in got)
        out += (f" The whole-corpus KN5 ({kn5:.2f}) counted {kn5_tokens / 1e6:.1f}M tokens: the rows' budget let "
                f"them read {100 * share[0]:.1f}-{100 * share[-1]:.1f} % of it (four times over).")
    return [out, ""]


def one_thread_tested(rows: dict) -> dict[str, dict]:
    """The finished one-thread rows with a test perplexity (the target's, and the headline's, candidates)."""
    return {k: r for k, r in neural_rows(rows).items() if r.get("rc") == 0 and r.get("test", {}).get("ppl")
            and k not in THREAD_ROWS}


def headline(rows: dict) -> list[dict]:
    """The README's results rows: KN5 on the whole corpus, the best one-thread neural row and KN5 + it.
    ``relative_cost``: the full softmax's CPU seconds a word (its pilot at V = 485k) over the row's, i.e. the row's
    words per CPU second over the softmax's; the softmax is projected, never trained here."""
    kn5, got = kn5_test_ppl(rows), one_thread_tested(rows)
    if not kn5 or not got:
        return []
    best = min(got.values(), key=lambda r: r["test"]["ppl"])
    soft = rows.get("neural/softmax", {}).get("words_per_cpu_s")
    cost = soft / best["words_per_cpu_s"] if soft and best.get("words_per_cpu_s") else None
    out = [{"method": "KN5, Wikipedia (165M tokens, V = 485k)", "test_ppl": kn5, "relative_cost": None,
            "note": "ours in bounded memory, the whole training text; lmplz agrees to 4 digits"},
           {"method": LABELS.get(best["objective"], "GRU").replace("GRU", "GRU 256", 1) + ", 2 CPU-hours (V = 485k)",
            "test_ppl": best["test"]["ppl"], "relative_cost": cost,
            "note": f"{label(best)}, one thread; " + (
                f"cost: its {best['words_per_cpu_s']:,.0f} words per CPU second against the full softmax's "
                f"{soft:,.0f} (a pilot; the softmax is projected, not trained)" if cost else
                "the full softmax not measured")}]
    mix = rows.get("neural-interp")
    if mix and mix.get("rc") == 0 and mix.get("row") == best["row"]:
        out.append({"method": "KN5 + that GRU, interpolated (V = 485k)", "test_ppl": mix["ppl"], "relative_cost": None,
                    "note": f"weights by EM on validation (the GRU's {mix['weight_neural']:.3f})"})
    return out


def target_line(rows: dict) -> str:
    kn5 = kn5_test_ppl(rows)
    got = one_thread_tested(rows)  # the target is on one thread
    if not got or not kn5:
        return ("- The best neural row beats KN5 by >= 25 % within the budget; KN5 + it interpolated beats both: not "
                "yet run (no neural row has finished).")
    best = min(got.values(), key=lambda r: r["test"]["ppl"])
    gain = 1 - best["test"]["ppl"] / kn5
    done = len(got)
    out = (f"- The best neural row beats KN5 by >= 25 % within the budget: {label(best)} {best['test']['ppl']:.2f} "
           f"against KN5's {kn5:.2f}, {100 * abs(gain):.1f} % {'lower' if gain >= 0 else 'higher'}: "
           f"{'met' if gain >= 0.25 else '**missed**'} ({done} one-thread rows finished"
           f", {sum(1 for r in got.values() if r.get('lr_race'))} with their rates raced on validation).")
    k = same_text(rows).get(best["row"])
    if k and gain < 0.25:
        out += (f" Reason found: the budget let it read the first {k['tokens'] / 1e6:.1f}M of KN5's "
                f"{rows['kn5/ours/all'].get('train_tokens', 0) / 1e6:.1f}M tokens; KN5 counted on that same text "
                f"scores {k['ppl']:.2f}, and the row is {100 * (1 - best['test']['ppl'] / k['ppl']):.1f} % below it.")
    mix = rows.get("neural-interp")
    if mix and mix.get("rc") == 0:
        both = mix["ppl"] < min(kn5, mix["neural_ppl"])
        who = ("it" if mix["row"] == best["row"] else
               f"{label(rows.get('neural/' + mix['row'], mix))} (the best row when mixed; the best now is not yet)")
        out += (f" KN5 + {who} interpolated: {mix['ppl']:.2f}: {'met' if both else '**missed**'} (beats both: "
                f"{'yes' if both else 'no'}).")
    else:
        out += " KN5 + it interpolated: not yet run."
    return out


def curves(ax, rows: dict) -> None:
    """Validation perplexity (subset) against the budget clock's CPU seconds, one line per finished row."""
    got = {k: r for k, r in neural_rows(rows).items() if r.get("rc") == 0 and r.get("curve")}
    for i, (k, r) in enumerate(got.items()):
        xs = [c["cpu_s"] for c in r["curve"]]
        ys = [c["valid_ppl"] for c in r["curve"]]
        ax.plot(xs, ys, marker="o", ms=3, color=f"C{i % 10}", label=label(r))
    ax.set_xlabel("training CPU seconds (a 2-thread row: both threads')")
    ax.set_ylabel("valid ppl (subset)")
    ax.set_title(f"Neural rows at V = {v_full(rows)}", fontsize=9)
    if got:
        ax.set_yscale("log")
        ax.legend(fontsize=6)
    else:
        ax.text(0.5, 0.5, "no neural row finished yet", ha="center", va="center", transform=ax.transAxes,
                fontsize=8)
