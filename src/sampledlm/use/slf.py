"""Word lattices in HTK's Standard Lattice Format (SLF): the :class:`Lattice` they are read into, and the reader
and writer.

A lattice is a directed acyclic graph from a start node to an end node; each link carries a word (or
none: ``!NULL``, ``<s>``, ``</s>``, ``!SENT_START``, ``!SENT_END`` are epsilon) and first-pass natural-log
scores ``am`` (acoustic) and ``lm``.

SLF (the HTK book, "Standard Lattice Format"): a header (``VERSION=``, ``UTTERANCE=``, ``base=``,
``start=``, ``end=``, ``lmscale=``, ``wdpenalty=``), ``N= L=``, then node lines ``I= [t=] [W=]`` and link
lines ``J= S= E= [W=] [a=] [l=]``. Words given on nodes are moved to the links entering them; scores in
``base=B`` are converted to natural logs. A file holds one lattice; a set is a directory of them.

Searching and rescoring lattices: :mod:`sampledlm.use.lattice`.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from ..data.textio import atomic_write, iter_lines
from ..errors import UserError

EPSILON = frozenset({"!NULL", "<s>", "</s>", "!SENT_START", "!SENT_END", "<eps>"})


@dataclass
class Link:
    start: int
    end: int
    word: str | None
    am: float = 0.0
    lm: float = 0.0


@dataclass
class Lattice:
    id: str
    num_nodes: int
    links: list[Link]
    start: int = 0
    end: int = -1
    times: dict[int, float] = field(default_factory=dict)
    header: dict[str, str] = field(default_factory=dict)
    ref: list[str] | None = None  # the reference words, when known

    def __post_init__(self):
        if self.end < 0:
            self.end = self.num_nodes - 1

    def out_links(self) -> list[list[Link]]:
        out = [[] for _ in range(self.num_nodes)]
        for link in self.links:
            out[link.start].append(link)
        return out

    def topological_order(self) -> list[int]:
        """Nodes in an order where every link goes forward; a cycle is an error."""
        indeg = [0] * self.num_nodes
        for link in self.links:
            indeg[link.end] += 1
        out = self.out_links()
        ready = [n for n in range(self.num_nodes) if indeg[n] == 0]
        order = []
        while ready:
            n = ready.pop()
            order.append(n)
            for link in out[n]:
                indeg[link.end] -= 1
                if indeg[link.end] == 0:
                    ready.append(link.end)
        if len(order) != self.num_nodes:
            raise UserError(f"lattice {self.id!r}: the links form a cycle (a lattice is acyclic)")
        return order


# --- reading and writing -------------------------------------------------------------------------------------------------
def _fields(path: str, n: int, line: str) -> dict[str, str]:
    out = {}
    for tok in line.split():
        key, eq, value = tok.partition("=")
        if not eq:
            raise UserError(f"{path}:{n}: {tok!r} is not NAME=VALUE")
        out[key] = value
    return out


def _num(path: str, n: int, d: dict, key: str, kind=float, default=None):
    if key not in d:
        if default is None:
            raise UserError(f"{path}:{n}: missing {key}=")
        return default
    try:
        v = kind(d[key])
    except ValueError:
        raise UserError(f"{path}:{n}: {key}={d[key]!r} is not {'an integer' if kind is int else 'a number'}") from None
    if kind is float and not math.isfinite(v):
        raise UserError(f"{path}:{n}: {key}={d[key]!r} is not a finite number")
    return v


def _node(path: str, n: int, d: dict, key: str, num_nodes: int) -> int:
    v = _num(path, n, d, key, int)
    if not 0 <= v < num_nodes:
        raise UserError(f"{path}:{n}: {key}={v} is outside 0..{num_nodes - 1}")
    return v


ALIASES = {"START": "S", "END": "E", "WORD": "W", "acoustic": "a", "language": "l", "time": "t", "NODES": "N",
           "LINKS": "L"}


def read_slf(path: str) -> Lattice:
    """One HTK SLF lattice (module docstring); errors name the file and line."""
    header: dict[str, str] = {}
    header_line: dict[str, int] = {}  # the line each header field came from, for errors
    nodes: dict[int, dict] = {}
    links: list[tuple[int, dict]] = []
    counts = None
    for n, line in enumerate(iter_lines(path), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        d = {ALIASES.get(k, k): v for k, v in _fields(path, n, line).items()}
        if "I" in d:
            i = _num(path, n, d, "I", int)
            if i in nodes:  # the later line would replace the earlier node's word in silence
                raise UserError(f"{path}:{n}: node I={i} appears twice (first on line {nodes[i]['_line']})")
            nodes[i] = {**d, "_line": n}
        elif "J" in d:
            links.append((n, d))
        elif "N" in d or "L" in d:
            counts = (_num(path, n, d, "N", int), _num(path, n, d, "L", int), n)
        else:
            header.update(d)
            header_line.update(dict.fromkeys(d, n))
    if counts is None:
        raise UserError(f"{path}: no 'N=... L=...' line (not an HTK SLF lattice)")
    num_nodes, num_links, cline = counts
    if len(links) != num_links:
        raise UserError(f"{path}:{cline}: L={num_links} but the file has {len(links)} link lines")
    # every node is listed on an I= line or touched by a link, so a larger N is a damaged count (and would
    # make the reader allocate N entries)
    if not 0 < num_nodes <= len(nodes) + 2 * len(links):
        raise UserError(f"{path}:{cline}: N={num_nodes} does not match the file's {len(nodes)} node and "
                        f"{len(links)} link lines")
    base = _num(path, header_line.get("base", cline), header, "base", float, math.e)
    if base <= 0 or base == 1:
        raise UserError(f"{path}:{header_line.get('base', cline)}: base={header['base']} is not a logarithm base "
                        "(> 0 and not 1; base=0 is not supported)")
    scale = 1.0 if base == math.e else math.log(base)
    node_word = {}
    for i, d in nodes.items():
        if not 0 <= i < num_nodes:
            raise UserError(f"{path}:{d['_line']}: node I={i} is outside 0..{num_nodes - 1}")
        if "W" in d:
            node_word[i] = d["W"]
    out = []
    for n, d in links:
        s, e = _num(path, n, d, "S", int), _num(path, n, d, "E", int)
        for v in (s, e):
            if not 0 <= v < num_nodes:
                raise UserError(f"{path}:{n}: node {v} is outside 0..{num_nodes - 1}")
        word = d.get("W", node_word.get(e))
        out.append(Link(s, e, None if word is None or word in EPSILON else word,
                        _num(path, n, d, "a", float, 0.0) * scale, _num(path, n, d, "l", float, 0.0) * scale))
    name = header.get("UTTERANCE") or _lattice_id(path)
    start = (_node(path, header_line.get("start"), header, "start", num_nodes) if "start" in header
             else _one_end(path, name, out, "start"))
    end = (_node(path, header_line.get("end"), header, "end", num_nodes) if "end" in header
           else _one_end(path, name, out, "end", num_nodes - 1))
    times = {i: _num(path, d["_line"], d, "t", float) for i, d in nodes.items() if "t" in d}
    lat = Lattice(name, num_nodes, out, start, end, times, {k: v for k, v in header.items() if k in ("lmscale", "wdpenalty")})
    try:
        lat.topological_order()
    except UserError as e:
        raise UserError(f"{path}: {e}") from None
    reached, todo = {start}, [start]
    after: dict[int, list[int]] = {}
    for link in out:
        after.setdefault(link.start, []).append(link.end)
    while todo:
        for e in after.get(todo.pop(), ()):
            if e not in reached:
                reached.add(e)
                todo.append(e)
    if end not in reached:  # found here, the file is named (rescoring would find it with the lattice's id only)
        raise UserError(f"{path}: lattice {name!r}: the end node {end} is not reachable from the start node {start}")
    return lat


def _one_end(path: str, name: str, links: list, which: str, default: int = 0) -> int:
    """The start (no link into it) or end (no link out of it) node of a lattice without ``start=`` / ``end=``: an
    SLF lattice has one; with several, taking one in silence dropped the paths through the others."""
    has_in, has_out = {link.end for link in links}, {link.start for link in links}
    free = sorted((has_in | has_out) - (has_in if which == "start" else has_out))
    if len(free) > 1:
        shown = ", ".join(map(str, free[:5])) + (", ..." if len(free) > 5 else "")
        raise UserError(f"{path}: lattice {name!r}: {len(free)} nodes have no link {'into' if which == 'start' else 'out of'} "
                        f"them ({shown}); an SLF lattice has one {which} node: give {which}=N in its header")
    return free[0] if free else default


def _lattice_id(path: str) -> str:
    name = os.path.basename(path)
    for suffix in (".gz", ".bz2", ".xz", ".slf", ".lat"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name


def write_slf(path: str, lat: Lattice) -> None:
    """``lat`` as SLF: words on links, natural-log ``a=`` and ``l=``."""
    with atomic_write(path) as f:
        f.write(f"VERSION=1.0\nUTTERANCE={lat.id}\n")
        for k, v in lat.header.items():
            f.write(f"{k}={v}\n")
        f.write(f"start={lat.start}\nend={lat.end}\nN={lat.num_nodes}\tL={len(lat.links)}\n")
        for i in range(lat.num_nodes):
            f.write(f"I={i}" + (f"\tt={lat.times[i]:.2f}" if i in lat.times else "") + "\n")
        for j, link in enumerate(lat.links):
            f.write(f"J={j}\tS={link.start}\tE={link.end}\tW={link.word or '!NULL'}\ta={link.am:.10g}\tl={link.lm:.10g}\n")


def is_slf(path: str) -> bool:
    """Whether ``path`` names SLF lattices: ``*.slf``/``*.lat`` (compressed too), or a directory of them."""
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if not n.startswith("."))
        return bool(names) and is_slf(names[0])
    name = os.path.basename(path)
    for suffix in (".gz", ".bz2", ".xz"):
        name = name[: -len(suffix)] if name.endswith(suffix) else name
    return name.endswith((".slf", ".lat"))


def read_lattices(path: str) -> list[Lattice]:
    """One SLF file, or every file of a directory (sorted by name)."""
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if not n.startswith("."))
        if not names:
            raise UserError(f"{path}: no lattice files in the directory")
        return [read_slf(os.path.join(path, n)) for n in names]
    if not os.path.exists(path):
        raise UserError(f"{path}: no such file or directory")
    return [read_slf(path)]
