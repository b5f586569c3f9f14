"""``sampledlm generate``: sentences sampled from any model or mixture (temperature, top-k, seed)."""

from __future__ import annotations

import click

from ..errors import UserError
from .common import CONTEXT, FiniteFloat, SEED, device_option, mix_options, say_fitted_weights, THREADS


@click.command("generate", context_settings=CONTEXT)
@click.argument("model", metavar="MODEL")
@mix_options
@click.option("--prefix", default="", help="The start of every sentence (read with the model's tokeniser).")
@click.option("-n", "count", type=click.IntRange(min=1), default=5, show_default=True, help="Sentences to sample.")
@click.option("--temperature", type=FiniteFloat(min=0, min_open=True), default=1.0, show_default=True,
              help="Divide the log-probabilities by T: below 1 sharper, above 1 flatter.")
@click.option("--top-k", type=click.IntRange(min=0), default=0, show_default=True,
              help="Draw only among the k most probable words (0: all).")
@click.option("--max-words", type=click.IntRange(min=1), default=50, show_default=True,
              help="Stop a sentence after this many words (prefix included).")
@click.option("--no-unk", is_flag=True, help="Never draw <unk>.")
@click.option("--seed", type=SEED, default=1, show_default=True, help="Random seed: one seed, the same sentences.")
@click.option("--threads", type=THREADS, default=None, help="Torch CPU threads.")
@device_option
def generate(model, others, weights, interp_valid, prefix, count, temperature, top_k, max_words, no_unk, seed, threads, device):
    """Sample sentences from a model (any family) or a mixture, one per line.

    \b
    Each word is drawn from the model's exact next-word distribution after <s> and the words so far,
    raised to the power 1/T and cut to the top-k words; a sentence ends at </s> or --max-words.
    Example:
      sampledlm generate gru -n 3 --seed 7
      sampledlm generate kn3.arpa --prefix "the market" --temperature 0.8 --top-k 50
      sampledlm generate ffnn3 --mix kn3.arpa --weights 0.5 -n 10 --no-unk
    """
    from ..data.tokenizer import TextOptions, tokenize_line
    from ..use.generate import iter_generate as sample
    from ..use.mixing import open_models

    if threads:
        import torch

        torch.set_num_threads(threads)
    lm = open_models([model, *others], weights, interp_valid, device=device)
    say_fitted_weights(lm, [model, *others])
    words = tokenize_line(prefix, TextOptions(**(lm.text_options or {})))
    if len(words) >= max_words:
        raise UserError(f"--max-words {max_words} counts the prefix, which holds {len(words)} words already: give "
                        f"more than {len(words)}")
    unknown = [w for w in words if w not in lm.vocab]
    if unknown:  # conditioned on as <unk>: what the model saw is not what the user wrote
        click.echo(f"sampledlm: note: --prefix: {len(unknown)} word(s) outside the vocabulary ({', '.join(unknown[:5])}"
                   f"{', ...' if len(unknown) > 5 else ''}), read as <unk>", err=True)
    for sentence in sample(lm, words, count, seed, temperature=temperature, top_k=top_k, max_words=max_words,
                           allow_unk=not no_unk):
        click.echo(" ".join(sentence))
