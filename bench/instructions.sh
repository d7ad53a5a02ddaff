#!/usr/bin/env bash
# bench/instructions.sh BEFORE AFTER LIST — instructions per op of benchmarks
# at two commits, counted by valgrind's callgrind instead of timed, so that
# the figure does not move with the machine's load.
#
# LIST holds one benchmark a line: "package name N", e.g.
#   coordinator BenchmarkFindBatches 24706
#   bench BenchmarkCommit/partitions=100/memory 544
# For each, the package's test binary of each commit runs under callgrind
# with -test.benchtime=Nx and then 2Nx; (Ir(2N) − Ir(N)) / N is the
# instructions of one op, the set-up cancelled out. Choose N so that N ops
# are some 10^8 instructions (the count's noise is ~2·10^6 a run).
#
# The binaries are built with CGO_ENABLED=0 and run with
# GODEBUG=asyncpreemptoff=1 (callgrind cannot follow Go's preemption
# signals) and GOMAXPROCS=1 (idle Ps spinning would add a load-dependent
# count). GOGC=off in the environment takes the collector out as well: a
# test binary that links more packages has more to mark, which shows in an
# allocating benchmark although its code did not change (bench/RESULTS.md,
# the layout entry).
#
# Prints "package name N before after change%" a line.
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 BEFORE AFTER LIST" >&2; exit 2; }
before=$1 after=$2 list=$(realpath "$3")
command -v valgrind >/dev/null || { echo "$0: valgrind is not installed" >&2; exit 1; }
repo=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'git -C "$repo" worktree remove --force "$work/before" >/dev/null 2>&1 || true
      git -C "$repo" worktree remove --force "$work/after" >/dev/null 2>&1 || true
      rm -rf "$work"' EXIT
git -C "$repo" worktree add -q --detach "$work/before" "$before"
git -C "$repo" worktree add -q --detach "$work/after" "$after"

# ir SIDE PKG NAME N: the instructions callgrind counts for one run.
ir() {
	local side=$1 pkg=$2 name=$3 n=$4 bin="$work/$1-${2//\//_}.test"
	[ -x "$bin" ] || (cd "$work/$side" && CGO_ENABLED=0 go test -c -o "$bin" "./$pkg")
	local pattern="^$(sed 's#/#$/^#g' <<<"$name")\$"
	(cd "$work/$side/$pkg" && GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind \
		--callgrind-out-file=/dev/null "$bin" -test.run '^$' -test.bench "$pattern" -test.benchtime "${n}x" 2>&1) |
		sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}

while read -r pkg name n; do
	[ -n "$pkg" ] && [ "${pkg:0:1}" != "#" ] || continue
	b=$(( ($(ir before "$pkg" "$name" $((2 * n))) - $(ir before "$pkg" "$name" "$n")) / n ))
	a=$(( ($(ir after "$pkg" "$name" $((2 * n))) - $(ir after "$pkg" "$name" "$n")) / n ))
	awk -v p="$pkg" -v nm="$name" -v n="$n" -v b="$b" -v a="$a" \
		'BEGIN { printf "%s %s %d %d %d %+.1f%%\n", p, nm, n, b, a, (a - b) * 100 / b }'
done <"$list"
