"""A Griffe extension (mkdocs.yml: mkdocstrings' ``extensions``) that lets the reference render sampledlm's reST
docstrings: the code writes reST (Sphinx roles, simple tables, ``::`` literal blocks) and mkdocstrings renders a
docstring's text as Markdown, so without this ``:class:`Model``` shows raw and a table as rows of ``=====``.

Before any docstring is parsed, each one is rewritten:

- a role (``:class:``, ``:func:``, ``:meth:``, ``:mod:``, ``:data:``, ``:attr:``, ``:exc:``, ``:obj:``) becomes
  a cross-reference (an *optional* autorefs link: a target that the reference pages do not render shows as code,
  without a warning), its target resolved as Sphinx does (``~`` shows the last part only; a leading ``.`` and
  bare names are looked up from the object's module and package);
- a simple table (``====  ====`` borders) becomes a Markdown table, continuation lines joined to their row;
- ``text::`` before a literal block becomes ``text:`` (the indented block stays a code block); a lone ``::`` goes.

The docstrings themselves are left as they are in ``src/`` (Sphinx reads them too).
"""

from __future__ import annotations

import html
import re

try:
    import griffe
except ImportError:  # rewrite() alone (the tests) needs no griffe
    griffe = None

ROLE = re.compile(r":(?:py:)?(class|func|meth|mod|data|attr|exc|obj|const):`(~?)([^`]+?)`")
BORDER = re.compile(r"^(\s*)(=+)((?: +=+)+)\s*$")


class RestDocstrings(griffe.Extension if griffe else object):
    """Rewrite every docstring of the loaded package from reST to what mkdocstrings renders (module docstring)."""

    def on_package(self, *, pkg, **kwargs) -> None:  # griffe >= 1.14
        self._rewrite_all(pkg)

    def on_package_loaded(self, *, pkg, **kwargs) -> None:  # older griffe
        self._rewrite_all(pkg)

    def _rewrite_all(self, pkg) -> None:
        seen: set[int] = set()
        stack = [pkg]
        while stack:
            obj = stack.pop()
            if id(obj) in seen or getattr(obj, "is_alias", False):
                continue
            seen.add(id(obj))
            if obj.docstring is not None:
                obj.docstring.value = rewrite(obj.docstring.value, lambda name, o=obj: _resolve(pkg, o, name))
            stack.extend(m for m in obj.members.values() if not getattr(m, "is_alias", False))


def _exists(pkg, path: str) -> bool:
    root = pkg.path
    if path == root:
        return True
    if not path.startswith(root + "."):
        return False
    try:
        pkg[path[len(root) + 1:]]
    except (KeyError, ValueError, AttributeError, griffe.AliasResolutionError, griffe.CyclicAliasError):  # not there
        return False
    return True


def _resolve(pkg, obj, target: str) -> str:
    """The full dotted path a role's target names, seen from ``obj`` (as Sphinx's Python domain looks it up)."""
    target = target.strip().removesuffix("()")
    module = obj if obj.is_module else obj.module
    scopes = []
    o = obj
    while o is not None:  # the object itself, its class, its module, and each package above
        scopes.append(o.path)
        o = o.parent
    if target.startswith("."):
        rel = target.lstrip(".")
        for scope in [module.path, *(s for s in scopes if s != module.path)]:
            if _exists(pkg, f"{scope}.{rel}"):
                return f"{scope}.{rel}"
        return f"{module.path.rsplit('.', 1)[0]}.{rel}"
    if _exists(pkg, target):
        return target
    for scope in scopes:
        if _exists(pkg, f"{scope}.{target}"):
            return f"{scope}.{target}"
    return target


def _role(match: re.Match, resolve) -> str:
    kind, short, text = match.group(1), match.group(2), match.group(3)
    explicit = re.fullmatch(r"(.*?)\s*<([^<>]+)>", text)  # :func:`title <target>`
    title, target = (explicit.group(1), explicit.group(2)) if explicit else (None, text)
    target = target.strip()
    if title is None:
        title = target.lstrip(".").split(".")[-1] if short else target.lstrip(".")
        if kind in ("func", "meth") and not title.endswith(")"):
            title += "()"
    identifier = resolve(target.lstrip("~"))
    return f'<autoref identifier="{html.escape(identifier)}" optional><code>{html.escape(title)}</code></autoref>'


def rewrite(text: str, resolve=lambda name: name) -> str:
    """A reST docstring as the Markdown mkdocstrings renders (module docstring); ``resolve(target)`` gives a
    role target's full path."""
    lines = _tables(text.splitlines())
    out = []
    for line in lines:
        stripped = line.rstrip()
        if stripped.strip() == "::":
            out.append("")
            continue
        if stripped.endswith("::") and not stripped.lstrip().startswith(("|", ">>>", "```")):
            line = stripped[:-1]
        out.append(line)
    text = "\n".join(out)
    return _outside_code(text, lambda part: ROLE.sub(lambda m: _role(m, resolve), part))


def _outside_code(text: str, fn) -> str:
    """``fn`` applied to the text outside ``double-backtick`` literals (a role inside one stays as written)."""
    parts = re.split(r"(``.+?``)", text, flags=re.DOTALL)
    return "".join(p if i % 2 else fn(p) for i, p in enumerate(parts))


def _columns(border: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in re.finditer(r"=+", border)]


def _tables(lines: list[str]) -> list[str]:
    """Every reST simple table in ``lines`` as a Markdown table."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        m = BORDER.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        indent, cols = m.group(1), _columns(lines[i])
        borders = [i]
        j = i + 1
        while j < len(lines):  # a table ends at its last border: one followed by a blank line or the end
            if BORDER.match(lines[j]) and _columns(lines[j]) == cols:
                borders.append(j)
                if j + 1 >= len(lines) or not lines[j + 1].strip():
                    break
            elif not lines[j].strip() and len(borders) >= 2 and borders[-1] != j - 1:
                break
            j += 1
        if len(borders) < 2:
            out.append(lines[i])
            i += 1
            continue
        def rows_between(a: int, b: int) -> list[list[str]]:
            rows: list[list[str]] = []
            for k in range(a + 1, b):
                if k in borders:
                    continue
                cells = _cells(lines[k], cols)
                if not any(cells):
                    continue
                if rows and not cells[0]:  # a continuation line (first column blank): joined to its row
                    rows[-1] = [f"{x} {y}".strip() for x, y in zip(rows[-1], cells)]
                else:
                    rows.append(cells)
            return rows

        if len(borders) >= 3:  # header rows, then the body
            head = rows_between(borders[0], borders[1])
            header = [" ".join(r[c] for r in head).strip() for c in range(len(cols))]
            rows = rows_between(borders[1], borders[-1])
        else:
            rows = rows_between(borders[0], borders[-1])
            header, rows = (rows[0], rows[1:]) if rows else ([""] * len(cols), [])
        table = ["| " + " | ".join(header) + " |", "|" + "---|" * len(cols)]
        table += ["| " + " | ".join(r) + " |" for r in rows]
        if out and out[-1].strip():
            out.append("")
        out += [indent + t for t in table]
        if borders[-1] + 1 < len(lines) and lines[borders[-1] + 1].strip():
            out.append("")
        i = borders[-1] + 1
    return out


def _cells(line: str, cols: list[tuple[int, int]]) -> list[str]:
    """A row's cells; a cell whose text runs past its column's border (into the gap and beyond) keeps it whole."""
    starts = [c[0] for c in cols] + [max(len(line), cols[-1][1])]
    for n in range(1, len(cols)):
        while starts[n] < starts[n + 1] and starts[n] < len(line) and line[starts[n] - 1] != " " \
                and line[starts[n]] != " ":
            starts[n] += 1  # the previous cell's word goes on: the cut moves past it
    return [line[starts[n]:starts[n + 1]].strip().replace("|", "\\|") for n in range(len(cols))]
