"""Turning lines of text into sentences of tokens.

Two tokenisers:

- ``whitespace`` (default): one sentence per line, tokens separated by any whitespace.
  This is right for pre-tokenised corpora such as the Penn Treebank LM split.
- ``raw``: for running text such as a Project Gutenberg book. Punctuation is split off words
  (``"Well," he said.`` -> ``" Well , " he said .``), apostrophes and hyphens inside a word stay
  (``don't``, ``well-known``), a few abbreviations keep their period (``mr.``), optionally
  everything is lower-cased and every number becomes ``<num>``.

Sentence boundaries (``--sentences``):

- ``lines``: every non-blank line is a sentence (default for ``whitespace``).
- ``split``: blank lines separate paragraphs; a paragraph's lines are joined and cut after
  ``.``, ``!``, ``?`` (closing quotes and brackets stay with their sentence). Default for ``raw``.

Blank lines are never sentences (SRILM and KenLM skip them too), so they add no ``</s>``.
Lines end with LF, CRLF or a lone CR, and a leading UTF-8 byte-order mark is dropped
(:mod:`.textio`).

Literal ``<s>`` and ``</s>`` tokens in the text are dropped, wherever they stand in a line:
the reader adds the sentence markers itself (one ``<s>`` of history, one predicted ``</s>``
per line), so ``<s> a b </s>`` reads as ``a b``, and a ``</s>`` inside a line never ends a
sentence. Checked against KenLM (the ``kenlm`` module's ``full_scores``, which scores a line
as KenLM's ``query`` does): KenLM does *not* skip a leading ``<s>``; it scores both markers
as ordinary words of the line -- a literal ``<s>`` costs ``p(<s>)`` (log10 -99 in every
model lmplz writes), a literal ``</s>`` is predicted and the line then goes on with
``</s>`` as history, without starting a new sentence. Neither can be expressed in an id
stream (there ``</s>`` always ends a sentence and ``<s>`` is never predicted), and the -99
would swamp any perplexity, so we follow KenLM's estimator instead: ``lmplz
--skip_symbols`` treats ``<s>`` and ``</s>`` in its input as whitespace, which is what we
do for training and test text alike. A line ``<s> a b </s>`` thus scores exactly as KenLM
scores ``a b``.

``gutenberg=True`` keeps only the text between the ``*** START OF ...`` and ``*** END OF ...``
marker lines of a Project Gutenberg file (the whole file when the markers are absent).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Iterator

from ..errors import UserError
from .textio import iter_chunks

NUM_TOKEN = "<num>"
_ABBREVIATIONS = {"mr", "mrs", "ms", "dr", "st", "jr", "sr", "prof", "vs", "etc", "no", "vol", "ch"}
_TOKEN_RE = re.compile(r"\d+(?:[.,:]\d+)*|\w+(?:['’\-]\w+)*|[^\w\s]", re.UNICODE)
_NUMBER_RE = re.compile(r"^\d+(?:[.,:]\d+)*$")
_SENT_END = {".", "!", "?"}
_CLOSERS = {'"', "'", ")", "]", "”", "’", "»"}
_GUTENBERG_START = re.compile(r"^\*\*\*\s*START OF (THE|THIS) PROJECT GUTENBERG", re.IGNORECASE)
_GUTENBERG_END = re.compile(r"^\*\*\*\s*END OF (THE|THIS) PROJECT GUTENBERG", re.IGNORECASE)
#: sentence markers in the text itself: dropped (module docstring)
MARKERS = frozenset({"<s>", "</s>"})


def split_line(line: str) -> list[str]:
    """The whitespace tokens of one line, literal ``<s>`` and ``</s>`` dropped (module docstring)."""
    toks = line.split()
    if "s>" in line:  # both markers contain "s>": the common line pays one substring test
        toks = [t for t in toks if t not in MARKERS]
    return toks


@dataclass(frozen=True)
class TextOptions:
    """How to read a text file into sentences; every reading command takes these flags."""

    tokenizer: str = "whitespace"  # "whitespace" | "raw"
    lowercase: bool = False
    numbers: bool = False  # map numbers to <num>
    gutenberg: bool = False  # keep only the text between the Gutenberg markers
    sentences: str | None = None  # "lines" | "split"; None: lines for whitespace, split for raw
    encoding_errors: str = "strict"  # or "replace"

    def __post_init__(self):
        for name in ("lowercase", "numbers", "gutenberg"):  # "yes" from a hand-edited config.json is not true
            if not isinstance(getattr(self, name), bool):
                raise UserError(f"text option {name}: expected true or false, found {getattr(self, name)!r}")
        if self.tokenizer not in ("whitespace", "raw"):
            raise UserError(f"unknown tokenizer {self.tokenizer!r}: use whitespace or raw")
        if self.sentences not in (None, "lines", "split"):
            raise UserError(f"unknown sentence mode {self.sentences!r}: use lines or split")
        if self.encoding_errors not in ("strict", "replace", "ignore"):
            raise UserError(f"unknown --encoding-errors {self.encoding_errors!r}: use strict, replace or ignore")

    @property
    def sentence_mode(self) -> str:
        return self.sentences or ("split" if self.tokenizer == "raw" else "lines")

    @property
    def is_plain(self) -> bool:
        """True when a line's ``split()`` is already its sentence (the fast path)."""
        return (
            self.tokenizer == "whitespace"
            and not self.lowercase
            and not self.numbers
            and not self.gutenberg
            and self.sentence_mode == "lines"
        )

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, d, where: str) -> "TextOptions":
        """The options a model's config.json records (``where`` names the file in errors): an object of known
        keys with values of the right types, or a one-line :class:`UserError`."""
        if d is None:
            return cls()
        if not isinstance(d, dict):
            raise UserError(f"{where}: text_options should be an object, found {type(d).__name__}")
        unknown = sorted(set(d) - set(cls.__dataclass_fields__))
        if unknown:
            raise UserError(f"{where}: unknown text option(s) {', '.join(map(repr, unknown))}")
        try:
            return cls(**d)
        except UserError as e:
            raise UserError(f"{where}: {e}") from None


def tokenize_raw(text: str, lowercase: bool = False, numbers: bool = False) -> list[str]:
    """Split running text into word and punctuation tokens (see module docstring)."""
    if lowercase:
        text = text.lower()
    toks = _TOKEN_RE.findall(text)
    out: list[str] = []
    for t in toks:
        if t == "." and out and out[-1].lower() in _ABBREVIATIONS:
            out[-1] += "."
            continue
        if numbers and _NUMBER_RE.match(t):
            t = NUM_TOKEN
        out.append(t)
    return out


def tokenize_line(text: str, opts: TextOptions = TextOptions()) -> list[str]:
    """The tokens of one piece of text under ``opts`` (tokeniser, lower-casing, numbers; no sentence split)."""
    if opts.tokenizer == "raw":
        return tokenize_raw(text, opts.lowercase, opts.numbers)
    toks = split_line(text.lower() if opts.lowercase else text)
    if opts.numbers:
        toks = [NUM_TOKEN if _NUMBER_RE.match(t) else t for t in toks]
    return toks


def token_normaliser(text_options: dict | None):
    """``word -> word`` as a model trained with ``text_options`` reads a token that is already split (an n-best
    hypothesis' words, a lattice link's word): lower-cased with ``lowercase``, a number as ``<num>`` with
    ``numbers``; the identity for plain options. The tokeniser and the sentence split do not apply to one token."""
    opts = TextOptions(**(text_options or {}))
    if not (opts.lowercase or opts.numbers):
        return lambda w: w

    def normalise(w: str) -> str:
        w = w.lower() if opts.lowercase else w
        return NUM_TOKEN if opts.numbers and _NUMBER_RE.match(w) else w

    return normalise


def split_sentences(tokens: list[str]) -> list[list[str]]:
    """Cut a paragraph's tokens after sentence-final punctuation (closing quotes stay attached)."""
    sents: list[list[str]] = []
    start = 0
    i = 0
    n = len(tokens)
    while i < n:
        if tokens[i] in _SENT_END:
            j = i + 1
            while j < n and (tokens[j] in _SENT_END or tokens[j] in _CLOSERS):
                j += 1
            sents.append(tokens[start:j])
            start = i = j
            continue
        i += 1
    if start < n:
        sents.append(tokens[start:])
    return sents


class _SentenceAssembler:
    """Stateful line -> sentence conversion for everything but the fast path.

    State crosses chunk boundaries: whether we are inside the Gutenberg body, and the lines
    of the current paragraph in ``split`` mode.
    """

    def __init__(self, opts: TextOptions, path: str = "the text"):
        self.opts, self.path = opts, path
        self.inside = not opts.gutenberg
        self.saw_start = False
        self.paragraph: list[str] = []
        self.held: list[str] = []  # lines read before a START marker, in case none appears

    def _tok(self, text: str) -> list[str]:
        return tokenize_line(text, self.opts)

    def _flush_paragraph(self, out: list[list[str]]) -> None:
        if self.paragraph:
            toks = self._tok(" ".join(self.paragraph))
            self.paragraph = []
            out.extend(s for s in split_sentences(toks) if s)

    def _body_line(self, line: str, out: list[list[str]]) -> None:
        if self.opts.sentence_mode == "lines":
            toks = self._tok(line)
            if toks:
                out.append(toks)
        elif line.strip():
            self.paragraph.append(line)
        else:
            self._flush_paragraph(out)

    def feed(self, lines: Iterable[str]) -> list[list[str]]:
        out: list[list[str]] = []
        for line in lines:
            if self.opts.gutenberg:
                if not self.saw_start:
                    if _GUTENBERG_START.match(line):
                        self.saw_start = self.inside = True
                        self.held = []
                    else:
                        self.held.append(line)
                    continue
                if self.inside and _GUTENBERG_END.match(line):
                    self.inside = False
                    self._flush_paragraph(out)
                    continue
                if not self.inside:
                    continue
            self._body_line(line, out)
        return out

    def finish(self) -> list[list[str]]:
        out: list[list[str]] = []
        if self.opts.gutenberg and not self.saw_start and self.held:
            # No START marker: not a Gutenberg file after all; keep everything, and say so.
            import warnings

            from ..errors import InputWarning

            warnings.warn(InputWarning(f"{self.path}: --gutenberg found no '*** START OF THE PROJECT GUTENBERG' line, "
                                       "so the whole file is read as text"), stacklevel=2)
            lines, self.held = self.held, []
            self.opts = TextOptions(**{**self.opts.to_dict(), "gutenberg": False})
            out.extend(self.feed(lines))
        self._flush_paragraph(out)
        return out


# most commands reading text have --encoding-errors; the rest (score, eval) take the model's tokenisation as it is
ENCODING_HINT = ("fix the file, or pass --encoding-errors replace where the command has it (in Python: "
                 "text_options={'encoding_errors': 'replace'})")


def iter_sentence_chunks(path: str, opts: TextOptions = TextOptions(),
                         chunk_bytes: int | None = None) -> Iterator[tuple[list[list[str]], int]]:
    """Yield ``(sentences, nbytes)``: lists of token lists, and the raw bytes (about ``chunk_bytes``)
    they came from."""
    if opts.is_plain:
        for lines, nbytes in iter_chunks(path, opts.encoding_errors, chunk_bytes, ENCODING_HINT):
            split = split_line if "s>" in "\n".join(lines) else str.split  # one C-speed test per chunk
            yield [t for t in map(split, lines) if t], nbytes
        return
    asm = _SentenceAssembler(opts, path)
    for lines, nbytes in iter_chunks(path, opts.encoding_errors, chunk_bytes, ENCODING_HINT):
        yield asm.feed(lines), nbytes
    yield asm.finish(), 0


def iter_sentences(path: str, opts: TextOptions = TextOptions()) -> Iterator[list[str]]:
    """Yield the sentences of ``path`` as lists of tokens."""
    for sents, _ in iter_sentence_chunks(path, opts):
        yield from sents
