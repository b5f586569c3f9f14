"""A click command whose ``--help`` lists its options in named groups, the ones most runs need first."""

from __future__ import annotations

import click


class GroupedCommand(click.Command):
    """``groups``: ``[(title, parameter names)]`` in the order they are shown; an option in no group is listed last,
    under "Other options". Within a group, options keep the command's own order."""

    def __init__(self, *args, groups: list[tuple[str, tuple[str, ...]]] = (), **kwargs):
        super().__init__(*args, **kwargs)
        self.groups = list(groups)

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        records = [(p.name, p.get_help_record(ctx)) for p in self.get_params(ctx)]
        records = [(name, rec) for name, rec in records if rec]
        placed: set[str] = set()
        for title, names in self.groups:
            rows = [rec for name, rec in records if name in names]
            placed |= set(names)
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)
        rest = [rec for name, rec in records if name not in placed]
        if rest:
            with formatter.section("Other options"):
                formatter.write_dl(rest)
