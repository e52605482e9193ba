#!/usr/bin/env bash
# bench-compare.sh runs tripod's regression gate: the benchmarks listed in
# `gate` below, from two trees, alternately, and prints benchstat's
# comparison of the two. `make bench-compare` calls it; docs/bench/README.md
# ("Regression gate") says what each benchmark measures and how to read the
# result.
#
#   BASE=REV       the tree to compare against (required): any revision git
#                  knows (HEAD~1, a commit, a branch)
#   NEW=REV        the tree compared; empty: this working tree, uncommitted
#                  changes included
#   COUNT=N        runs of each benchmark in each tree (default 6, the least
#                  for which benchstat gives a confidence interval)
#   BENCH=REGEXP   only the gate's benchmarks whose package/name matches
#                  (grep -E), e.g. BENCH=AcksAllRound or BENCH=broker/
#   BENCHTIME=T    -benchtime for every benchmark instead of each one's own
#   OUT=DIR        where base.txt, new.txt and the runs' logs go (default: a
#                  new directory under $TMPDIR, printed)
#
# It checks BASE out in a git worktree in a temporary directory (NEW too
# when given), compiles each package's tests into a binary from each tree
# (go test -c), then runs base, new, base, new, ... one binary at a time,
# COUNT rounds of every benchmark, appending their output to base.txt and
# new.txt. A benchmark a tree lacks (BASE older than the gate, or than one
# benchmark of it) is run in neither, and said so; when no benchmark of the
# gate is in both trees it fails.
set -euo pipefail

# gate is the benchmark set: package, top-level benchmark, -benchtime.
# Each takes seconds on a 2-core machine; the broker's start a cluster of
# three in-process brokers twice (Go runs every benchmark once with b.N 1
# before the count asked).
gate=(
  "broker ProduceReplicated 50000x"
  "broker FetchReplicated 50000x"
  "broker ReplicationRoundTrip 2000x"
  "broker ReplicationRoundTripWide 2000x"
  "replication AcksAllRound 1000000x"
  "controller Decisions10000 3x"
)

fail() { echo "bench-compare: $*" >&2; exit 1; }

[[ -n ${BASE:-} ]] || fail "BASE is required: make bench-compare BASE=REV [NEW=REV] [COUNT=N] [BENCH=REGEXP] [BENCHTIME=T] [OUT=DIR]"
count=${COUNT:-6}
[[ $count =~ ^[1-9][0-9]*$ ]] || fail "COUNT=$count: want a positive number of runs"

repo=$(git rev-parse --show-toplevel)
cd "$repo"

selected=()
for entry in "${gate[@]}"; do
  read -r pkg name _ <<<"$entry"
  if [[ -z ${BENCH:-} ]] || grep -Eq -- "$BENCH" <<<"$pkg/$name"; then
    selected+=("$entry")
  fi
done
[[ ${#selected[@]} -gt 0 ]] || fail "BENCH=$BENCH selects none of the gate's benchmarks: ${gate[*]}"

work=$(mktemp -d "${TMPDIR:-/tmp}/tripod-bench-trees.XXXXXX")
worktrees=()
cleanup() {
  for wt in "${worktrees[@]}"; do
    git -C "$repo" worktree remove --force "$wt" >/dev/null 2>&1 || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

# checkout sets side's tree: a worktree of rev, or this working tree when
# rev is empty.
checkout() {
  local side=$1 rev=$2 commit
  if [[ -z $rev ]]; then
    printf -v "${side}_tree" %s "$repo"
    return
  fi
  commit=$(git rev-parse --verify --quiet "$rev^{commit}") || fail "$side: $rev is not a revision of this repository"
  git worktree add --quiet --detach "$work/$side" "$commit" || fail "$side: cannot check $rev out in $work/$side"
  worktrees+=("$work/$side")
  printf -v "${side}_tree" %s "$work/$side"
}

checkout base "$BASE"
checkout new "${NEW:-}"
describe() { git -C "$1" log -1 --format='%h %s' HEAD; }
echo "base: $BASE, $(describe "$base_tree")"
if [[ -z ${NEW:-} ]]; then
  dirty=""
  [[ -z $(git status --porcelain --untracked-files=no) ]] || dirty=" (with uncommitted changes)"
  echo "new:  the working tree at $(describe "$new_tree")$dirty"
else
  echo "new:  $NEW, $(describe "$new_tree")"
fi

# Compile each package's tests once per tree.
packages=()
for entry in "${selected[@]}"; do
  read -r pkg _ <<<"$entry"
  [[ " ${packages[*]} " == *" $pkg "* ]] || packages+=("$pkg")
done
for side in base new; do
  dir=${side}_tree
  for pkg in "${packages[@]}"; do
    echo "compiling ./$pkg's benchmarks ($side)"
    (cd "${!dir}" && go test -c -o "$work/$side-$pkg.test" "./$pkg") ||
      fail "$side: go test -c ./$pkg failed in ${!dir}"
    "$work/$side-$pkg.test" -test.list '^Benchmark' >"$work/$side-$pkg.list"
  done
done

# Keep the benchmarks both trees have.
runs=()
for entry in "${selected[@]}"; do
  read -r pkg name _ <<<"$entry"
  missing=()
  for side in base new; do
    grep -qx "Benchmark$name" "$work/$side-$pkg.list" || missing+=("$side")
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    echo "bench-compare: Benchmark$name (./$pkg) is not in the ${missing[*]} tree: not run" >&2
    continue
  fi
  runs+=("$entry")
done
[[ ${#runs[@]} -gt 0 ]] || fail "no benchmark of the gate is in both trees (BASE $BASE predates the gate?): nothing to compare"

out=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/tripod-bench-compare.XXXXXX")}
mkdir -p "$out"
: >"$out/base.txt"
: >"$out/new.txt"
: >"$out/base.log"
: >"$out/new.log"

# Alternate the trees run by run, so that whatever else loads the machine
# weighs on both alike.
for round in $(seq "$count"); do
  for entry in "${runs[@]}"; do
    read -r pkg name benchtime <<<"$entry"
    for side in base new; do
      dir=${side}_tree
      echo "round $round/$count: Benchmark$name ($side)"
      (cd "${!dir}/$pkg" && "$work/$side-$pkg.test" -test.run '^$' -test.bench "^Benchmark$name\$" \
        -test.benchtime "${BENCHTIME:-$benchtime}" -test.benchmem -test.count 1) \
        >>"$out/$side.txt" 2>>"$out/$side.log" ||
        fail "Benchmark$name failed in the $side tree: see $out/$side.txt and $out/$side.log"
    done
  done
done

echo "results: $out/base.txt $out/new.txt (logs beside them)"
echo
go tool benchstat "base=$out/base.txt" "new=$out/new.txt"
