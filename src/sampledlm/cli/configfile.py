"""``--config FILE``: a command's settings from a TOML file, flags on the command line overriding them.

The file holds one ``key = value`` per setting, the key a long option's name without its dashes (``lr = 0.002``,
``model = "gru"``, ``hidden = [256]``, ``lowercase = true``; ``-`` or ``_`` alike), values as TOML types. It fills
click's ``default_map`` before the command's other options are read, so a flag given on the command line wins and
every value passes the flag's own checks; an unknown key, a table or a bad value is an error naming the file and
the key's line. ``sampledlm train`` writes the resolved settings of a new run to ``RUN/config.toml``, so that
``sampledlm train --config RUN/config.toml -o RUN2`` repeats it.
"""

from __future__ import annotations

import json
import math
import os
import re

import click

from ..errors import UserError

CONFIG_NAME = "config.toml"


def config_option(f):
    """Add ``--config FILE`` to a command (eager: read before the other options)."""
    return click.option("--config", "config_file", metavar="FILE", default=None, is_eager=True, expose_value=False,
                        callback=_load, help="Read settings from this TOML file (key = value, keys the long option "
                                             "names); flags given here override it.")(f)


def _keys(command: click.Command) -> dict[str, click.Parameter]:
    """Each setting name a file may use -> its parameter: long option names (``-`` and ``_`` alike) and the
    parameters' own names."""
    out: dict[str, click.Parameter] = {}
    for p in command.params:
        if p.name == "config_file" or getattr(p, "hidden", False):
            continue
        out[p.name] = p
        for opt in getattr(p, "opts", []):
            if opt.startswith("--"):
                out[opt[2:].replace("-", "_")] = p
    return out


def _line_of(text: str, key: str) -> int | None:
    pattern = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=", re.M)
    m = pattern.search(text)
    return text.count("\n", 0, m.start()) + 1 if m else None


def read_settings(path: str, ctx: click.Context) -> dict:
    """``{parameter name: value}`` of the TOML file ``path`` for ``ctx``'s command, each value checked by its
    parameter's type."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise UserError(f"{path}: no such file (--config)") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory; --config takes a TOML file (a run's is RUN/{CONFIG_NAME})") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read: {e.strerror}") from None
    text = raw.decode("utf-8", errors="replace")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"\s*\(at line (\d+), column \d+\)", str(e))
        if m:
            raise UserError(f"{path}: line {m.group(1)}: not TOML: {str(e)[:m.start()]}") from None
        raise UserError(f"{path}: not a TOML file: {e}") from None
    keys = _keys(ctx.command)
    settings = {}
    for key, value in data.items():
        where = f"{path}: line {_line_of(text, key) or '?'}"
        if isinstance(value, dict):
            header = re.search(rf"^[ \t]*\[+[ \t]*[\"']?{re.escape(key)}[\"']?[ \t]*[\].]", text, re.M)
            where = f"{path}: line {text.count(chr(10), 0, header.start()) + 1}" if header else where
            raise UserError(f"{where}: [{key}] is a table; the file holds flat 'key = value' settings")
        p = keys.get(key.replace("-", "_"))
        if p is None:
            name = ctx.command_path or ctx.info_name
            raise UserError(f"{where}: unknown setting {key!r} for `{name}` (keys are its long option names; "
                            "see --help)")
        if p.name in settings:
            raise UserError(f"{where}: {key!r} sets {p.name!r} a second time")
        given = _toml_value(value) or repr(value)  # as the file says it (a scalar is not quoted back as a list)
        if isinstance(p, click.Option) and p.multiple and not isinstance(value, list):
            value = [value]
        wanted = _toml_type(p)
        if wanted and not all(_is(v, wanted) for v in (value if isinstance(value, list) else [value])):
            raise UserError(f"{where}: {key} = {given}: expected {wanted} (a TOML "
                            f"{'list of ' + wanted + 's' if isinstance(value, list) else wanted}, as --{key.replace('_', '-')} takes)")
        try:
            settings[p.name] = p.type_cast_value(ctx, value)
        except click.BadParameter as e:
            raise UserError(f"{where}: {key} = {given}: {e.message}") from None
        if p.name in INPUT_PATHS and isinstance(value, str) and value != "-" and not os.path.exists(value):
            raise UserError(f"{where}: {key} = {given}: no such file or directory (a relative path is read from the "
                            f"current directory, {os.getcwd()}, not from the file's)")
    return settings


#: settings that name an existing input (checked where a file gives them, so the error can name its line)
INPUT_PATHS = frozenset({"train_path", "valid_path", "test_path", "vocab_path", "init_dir", "resume_dir"})


def _toml_type(p: click.Parameter) -> str | None:
    """The TOML type a setting's value must have (None: the parameter's own type decides): click converts
    ``1.5`` to the integer 1 and ``"yes"`` to True, which a file's author did not mean."""
    t = p.type
    if getattr(p, "is_flag", False) or isinstance(t, click.types.BoolParamType):
        return "boolean"
    if isinstance(t, click.types.IntParamType):  # IntRange too
        return "integer"
    if isinstance(t, click.types.FloatParamType):
        return "number"
    if isinstance(t, (click.types.StringParamType, click.Choice, click.Path)):
        return "string"
    return None


def _is(value, wanted: str) -> bool:
    if isinstance(value, bool):
        return wanted == "boolean"
    return {"integer": isinstance(value, int), "number": isinstance(value, (int, float)),
            "string": isinstance(value, str)}.get(wanted, False)


def _load(ctx: click.Context, param: click.Parameter, value: str | None):
    if value is not None:
        ctx.default_map = {**(ctx.default_map or {}), **read_settings(value, ctx)}
    return value


def _toml_value(v) -> str | None:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else None
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # a JSON string is a TOML basic string
    if isinstance(v, (list, tuple)):
        items = [_toml_value(x) for x in v]
        return None if any(i is None for i in items) else "[" + ", ".join(items) + "]"
    return None


def settings_toml(ctx: click.Context, skip: set[str] = frozenset(), header: str = "", resolved: dict | None = None,
                  sources: dict | None = None) -> str:
    """The resolved settings of the running command as a TOML file ``--config`` reads: every option with a value
    (defaults included), keyed by its long option name, except the parameters named in ``skip``. ``resolved``
    gives the values the library chose for options left unset (``None``: "the default"), and absolute paths;
    ``sources`` where a setting's value came from (a comment after it: ``lr = 0.004  # --objective nce on a gru``)."""
    lines = [f"# {line}" for line in header.splitlines()] if header else []
    for p in ctx.command.params:
        if p.name in skip or p.name == "config_file" or getattr(p, "hidden", False) or p.name not in ctx.params:
            continue
        value = ctx.params[p.name]
        if resolved and resolved.get(p.name) is not None:
            value = resolved[p.name]
        if value is None or (isinstance(value, tuple) and not value):
            continue
        longs = [o for o in getattr(p, "opts", []) if o.startswith("--")]
        key = longs[0][2:] if longs else p.name
        text = _toml_value(list(value) if isinstance(value, tuple) else value)
        if text is not None:
            source = (sources or {}).get(p.name)
            lines.append(f"{key} = {text}" + (f"  # {source}" if source else ""))
    return "\n".join(lines) + "\n"


def recorded_setting(directory: str, key: str):
    """The value ``key`` has in ``directory/config.toml`` (what :func:`write_settings` wrote for a run); None where the
    file is missing, unreadable or not TOML, or has no such key."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    try:
        with open(os.path.join(directory, CONFIG_NAME), "rb") as f:
            return tomllib.load(f).get(key)
    except (OSError, ValueError):  # TOMLDecodeError is a ValueError
        return None


def amend_setting(directory: str, key: str, value, why: str) -> None:
    """Put ``key = value  # why`` in place of ``key``'s line of ``directory/config.toml`` (a run extended by
    ``--resume --epochs``), atomically; nothing where the file or the line is missing."""
    from ..data.textio import atomic_write

    path = os.path.join(directory, CONFIG_NAME)
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return
    hits = [i for i, line in enumerate(lines) if line.split("=", 1)[0].strip() == key]
    if not hits:
        return
    lines[hits[0]] = f"{key} = {value!r}  # {why}"
    with atomic_write(path) as f:
        f.write("\n".join(lines) + "\n")


def write_settings(directory: str, ctx: click.Context, skip: set[str] = frozenset(), header: str = "",
                   resolved: dict | None = None, sources: dict | None = None) -> str:
    """Write :func:`settings_toml` to ``directory/config.toml`` (atomically); returns its path."""
    from ..data.textio import atomic_write

    path = os.path.join(directory, CONFIG_NAME)
    with atomic_write(path) as f:
        f.write(settings_toml(ctx, skip, header, resolved, sources))
    return path
