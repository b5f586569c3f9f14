"""Using trained models: sentence and word scores, n-best and lattice rescoring, text generation.

Everything here is written once against :class:`sampledlm.lm.LanguageModel`, so it works for every
family (ARPA n-grams, neural run directories, maxent models) and for mixtures of them:

- :mod:`.mixing`: a model, or an interpolation of models with given or EM-fitted weights;
- :mod:`.score`: per-sentence and per-word scores, bunched (Schwenk 2007);
- :mod:`.generate`: sampling with temperature and top-k, seeded;
- :mod:`.wer`: word error rate (Levenshtein alignment);
- :mod:`.nbest`: n-best list formats (SRILM, Kaldi text, JSONL), rescoring, weight tuning;
- :mod:`.lattice`: HTK SLF lattices, exact n-gram expansion, approximate recurrent rescoring.
"""
