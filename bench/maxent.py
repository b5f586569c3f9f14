"""Maximum-entropy LMs on PTB (issue 6): binary vs standard MELM, subsampling, sharded training.

The same runs and page as ``sampledlm bench xu-melm`` (module :mod:`sampledlm.bench.xu_melm`:
seed 000 table 1 and fig. 2, the L2 rows, the 2-rank speed-up and the issue's targets), written
as docs/results/maxent.{md,json,png}. Runs are kept in ``~/.cache/sampledlm/bench/xu-melm`` and
shared with ``sampledlm bench xu-melm``, so either command reuses what the other trained.

    python bench/maxent.py [--quick] [--data DIR] [--out DIR] [--no-train]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _report import RESULTS, stamp  # noqa: E402

from sampledlm.errors import UserError  # noqa: E402
from sampledlm.bench import report, xu_melm  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=None, help="Directory with train/valid/test files (default: PTB in "
                    "$SAMPLEDLM_PTB or ../shared/data/ptb).")
    ap.add_argument("--out", default=RESULTS, help="Where to write maxent.md/.json/.png.")
    ap.add_argument("--quick", action="store_true", help="The built-in corpus, a few epochs (a smoke test).")
    ap.add_argument("--no-train", action="store_true", help="Rebuild the page from finished runs only.")
    args = ap.parse_args()
    stamp()
    try:
        if args.data is not None:
            report.data_files(args.data)  # a clear message before any work
        xu_melm.run(args.quick, args.data, args.out, train=not args.no_train, name="maxent")
    except UserError as e:
        sys.exit(f"maxent: {e}")


if __name__ == "__main__":
    main()
