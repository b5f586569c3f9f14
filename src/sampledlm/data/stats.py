"""Corpus statistics: what ``sampledlm stats`` reports."""

from __future__ import annotations

from .corpus import count_words
from .tokenizer import TextOptions
from .vocab import UNK, Vocab


def corpus_stats(path: str, opts: TextOptions = TextOptions(), vocab: Vocab | None = None,
                 top_k: tuple[int, ...] = (100, 1000, 10000)) -> dict:
    """Tokens (words, no ``</s>``), types, sentences, top-k coverage and, with ``vocab``, OOV counts.

    OOV tokens are word tokens not in ``vocab``; a literal ``<unk>`` in the text is counted
    separately (it is in every vocabulary, but it stands for an unknown word).
    """
    wc = count_words(path, opts)
    tokens = wc.tokens
    freqs = sorted(wc.counts.values(), reverse=True)
    out = {
        "file": path,
        "tokens": tokens,
        "types": len(wc.counts),
        "sentences": wc.sentences,
        "tokens_per_sentence": round(tokens / wc.sentences, 2) if wc.sentences else 0.0,
        "unk_tokens_in_text": wc.counts.get(UNK, 0),
        "coverage": {str(k): round(sum(freqs[:k]) / tokens, 6) if tokens else None for k in top_k},  # of no token: none
    }
    if vocab is not None:
        oov = sum(c for w, c in wc.counts.items() if w not in vocab.index)
        out["vocab_size"] = len(vocab)
        out["oov_tokens"] = oov
        out["oov_types"] = sum(1 for w in wc.counts if w not in vocab.index)
        out["oov_rate"] = round(oov / tokens, 6) if tokens else None
    return out


def format_stats(s: dict) -> str:
    lines = [
        f"file          {s['file']}",
        f"tokens        {s['tokens']:,}  (words; </s> not counted)",
        f"types         {s['types']:,}",
        f"sentences     {s['sentences']:,}  ({s['tokens_per_sentence']} tokens per sentence)",
        f"<unk> in text {s['unk_tokens_in_text']:,}",
    ]
    for k, c in s["coverage"].items():
        lines.append(f"top-{k:<9} {100 * c:.2f}% of tokens" if c is not None else f"top-{k:<9} n/a (no tokens)")
    if "oov_rate" in s:
        rate = f"{100 * s['oov_rate']:.2f}%" if s["oov_rate"] is not None else "n/a (no tokens)"
        lines.append(f"OOV           {s['oov_tokens']:,} tokens, {s['oov_types']:,} types, "
                     f"{rate} against a vocabulary of {s['vocab_size']:,}")
    return "\n".join(lines)
