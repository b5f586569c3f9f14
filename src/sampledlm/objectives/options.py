"""Help text and valid range of every objective option (the defaults live in each objective's ``__init__``).

The command line generates one flag per option name that some objective accepts
(:func:`sampledlm.objectives.registry.objective_options`); a test checks that every such option
has an entry here.
"""

from __future__ import annotations

#: option name -> click-free description: help, and the range :func:`sampledlm.config.check_value` enforces
OPTION_HELP: dict[str, dict] = {
    "samples": {"help": "candidates drawn per step (S); at most V - 1", "min": 1, "type": int},
    "noise_power": {"help": "noise distribution = unigram^power (0: uniform, 1: unigram)", "min": 0.0, "max": 2.0,
                    "type": float},
    "neg_rate": {"help": "binary: share alpha of the negatives kept, in (0, 1]", "min": 0.0, "min_open": True,
                 "max": 1.0, "type": float},
    "neg_subset": {"help": "binary: fixed or variable negative subsets", "choices": ("fixed", "variable"), "type": str},
    "neg_groups": {"help": "binary, variable subsets: subsets drawn per mini-batch (example i uses subset i mod G)",
                   "min": 1, "type": int},
    "margin": {"help": "ranking: the margin (default log(V-1))", "min": 0.0, "type": float},
    "sample_mode": {"help": "how candidates are drawn and shared: shared (one bag per batch) or each (per example)",
                    "choices": ("shared", "each"), "type": str},
    "sampler": {"help": "how noise words are drawn: alias (Walker's alias method) or multinomial",
                "choices": ("alias", "multinomial"), "type": str},
    "learn_norm": {"help": "NCE: learn the log normaliser instead of fixing it to 0", "type": bool},
    "true_term": {"help": "is: add the true word's own term to the estimate of Z, which bounds the loss below "
                          "(--no-true-term: Botev et al.'s plain estimator, which can diverge)", "type": bool},
    "exclude_true": {"help": "drop the true word from the negatives", "type": bool, "negatable": "include-true"},
    "cutoffs": {"help": "adaptive: rank cutoffs of the head and the tail clusters, increasing (repeat the flag; "
                        "default: 80 % and 95 % unigram coverage)", "min": 1, "type": int, "multiple": True},
    "head_coverage": {"help": "adaptive without --cutoffs: the head holds the words of this share of the training "
                              "tokens (at most --max-head words), the first tail up to 95 % (default 0.8; 0.95 on "
                              "recurrent models)", "min": 0.0, "max": 1.0, "type": float},
    "max_head": {"help": "adaptive without --cutoffs: at most this many words in the head, whatever --head-coverage "
                         "asks (default 4,000; 5,000 on recurrent models)", "min": 1, "type": int},
    "div_value": {"help": "adaptive: each tail cluster's projection is this many times narrower than the last "
                          "(default 4; 2 on recurrent models)",
                  "min": 1.0, "type": float},
    "classes": {"help": "class: number of word classes C, frequency-binned (default 2 sqrt(V); not with --word-classes)", "min": 1, "type": int},
    "binning": {"help": "class: how words are cut into classes by frequency: sqrt (equal mass of sqrt unigram "
                        "probability, the RNNLM toolkit's default) or mass (equal unigram mass, its -old-classes)",
                "choices": ("sqrt", "mass"), "type": str},
    "components": {"help": "class, hsm with --arity 4 or more: each class's (tree node's) score is the log-sum-exp "
                           "of this many linear scores instead of one (M directions per class, as a softmax's class "
                           "marginal sums its members' exponentials; default 1; 4 on recurrent models for class, and for hsm "
                           "unless --arity is given)", "min": 1, "type": int},
    "word_classes": {"help": "class, hsm: word classes from a file (class<TAB>word[<TAB>count]; make one with "
                             "'sampledlm classes'): the class layer's classes, or hsm's tree grouped by class (bit-path "
                             "labels, as Brown clustering writes them, also arrange the classes' tree); 'auto' clusters the training "
                             "text first as 'sampledlm classes' does (2 sqrt(V) classes; a file named auto: ./auto); 'none' "
                             "frequency bins, a Huffman tree [default: auto on recurrent models, none on the others]",
                     "type": str},
    "arity": {"help": "hsm: children per tree node, a power of two: 2 is the binary tree of logistic decisions; "
                      "2^d makes every d levels one softmax over up to 2^d children (its own node layer; default 2; 128 on "
                      "recurrent models)",
              "min": 2, "type": int},
    "selfnorm_alpha": {"help": "selfnorm: weight alpha of the (log Z)^2 penalty (Devlin et al. 2014: 0.1)",
                       "min": 0.0, "type": float},
    "selfnorm_calibrate": {"help": "selfnorm: after training, shift the output biases so the mean log Z on the "
                                   "validation text is 0 (exact probabilities unchanged; default on)", "type": bool},
    "shortlist": {"help": "shortlist: the S most frequent words the network's softmax covers (Schwenk 2007: 2,000; "
                          "the whole vocabulary when V is smaller)", "min": 1, "type": int},
    "backoff": {"help": "shortlist: back-off n-gram (ARPA file, same vocabulary) for the other words and the "
                        "short-list's mass [default: the training unigram]", "type": str},
}
