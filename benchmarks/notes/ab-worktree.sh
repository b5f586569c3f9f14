# Sourced by the A/B scripts (code-step-ab.sh, epoch-ab.sh): from the repository root, check the commit "$1" out into
# a temporary worktree "$base" (removed on exit) and shift it off the arguments.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
base_rev=$1; shift
base=$(mktemp -d)/base
git worktree add -q --detach "$base" "$base_rev" || exit 1
trap 'git worktree remove --force "$base"' EXIT
