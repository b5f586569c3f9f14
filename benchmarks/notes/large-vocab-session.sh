#!/usr/bin/env bash
# The start of a session on a new machine, for issue 56's rows (the machine of each session has often been new: the
# corpus, the run folders and the worktrees gone). Fetch the three snapshots first with the search tool's fetch
# (github:jason-feng/wikiVisual, github:ZhouYii/PatchedDistro, github:Vibhas-hs-edu/WikiTasks: they land under
# /work/.mirror), then:
#     bash benchmarks/notes/large-vocab-session.sh ROWS_A [ROWS_B]
# e.g. `... hsm,transformer class,adaptive`. It installs the package when it is missing, builds the corpus again
# (about 5 minutes; the recorded corpus row is kept: the statistics were equal to the count on every rebuild), then
# starts one chain per argument, each in a worktree at main's HEAD, one thread, nice 10 for the first chain and 19
# for the second (autogroups: setsid makes a new one, and nice alone does nothing across autogroups), all with the
# same --work. After a row: copy the worktrees' new JSONL lines into main's, `python -m benchmarks large-vocab
# --no-train`, commit. A row needs about 2.6 CPU-hours (2 of budget, the exact test, the start), so one chain a core
# finishes one row in a 3-hour session only if it starts at once and keeps its core.
set -euo pipefail
main=/work/main data=/work/data
cd "$main"
pip show sampledlm > /dev/null 2>&1 || { pip install -q torch==2.13.0 && pip install -q -e '.[test,bench,kenlm]'; }
mkdir -p "$data/logs"
if [ ! -f "$data/wiki/stats.json" ]; then
  nice -n 5 python -c "import json; from benchmarks import wiki_corpus; \
json.dump(wiki_corpus.build('/work/.mirror', '$data/wiki'), open('$data/corpus-rebuild.json', 'w'))" \
    > "$data/logs/corpus.log" 2>&1
fi
git worktree prune
i=0
for rows in "$@"; do
  tree=/work/chain$i nice=$([ $i -eq 0 ] && echo 10 || echo 19)
  [ -d "$tree" ] || git worktree add -q --detach "$tree" HEAD
  # a chain's worktree holds the rows it recorded (and the pages it wrote) as local changes, which would stop the
  # checkout: its new record lines go into main's first, then the worktree is reset
  for f in "$tree"/benchmarks/notes/*.jsonl; do
    dst="$main/benchmarks/notes/$(basename "$f")"
    [ -f "$dst" ] && { grep -vxFf "$dst" "$f" >> "$dst" || true; }
  done
  (cd "$tree" && git checkout -q -- . && git checkout -q --detach main && setsid nohup bash -c "echo $nice > /proc/self/autogroup; exec nice -n $nice \
env OMP_NUM_THREADS=1 python -m benchmarks.large_vocab neural --data $data/wiki --work $data/wiki-runs --rows $rows" \
    > "$data/logs/chain$i.log" 2>&1 &)
  echo "chain $i: $rows (log $data/logs/chain$i.log)"
  i=$((i + 1))
done
