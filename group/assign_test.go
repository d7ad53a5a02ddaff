package group

import (
	"fmt"
	"slices"
	"testing"
)

func specOf(members int, topics map[string]int32, subscribe func(i int) []string) *assignSpec {
	spec := &assignSpec{partitions: map[[16]byte]int32{}}
	for n, p := range topics {
		spec.partitions[topicID(n)] = p
	}
	for i := range members {
		var ts [][16]byte
		for _, n := range subscribe(i) {
			ts = append(ts, topicID(n))
		}
		slices.SortFunc(ts, compareID)
		spec.members = append(spec.members, assignMember{id: fmt.Sprintf("m%04d", i), topics: ts})
	}
	return spec
}

// checkAssignment: every subscribed partition assigned exactly once, only
// to a subscriber; returns the per-member counts.
func checkAssignment(t *testing.T, spec *assignSpec, out []assignment) []int {
	t.Helper()
	seen := map[[16]byte]map[int32]bool{}
	counts := make([]int, len(out))
	for i, a := range out {
		for tid, ps := range a {
			if !slices.Contains(spec.members[i].topics, tid) {
				t.Fatalf("member %d got an unsubscribed topic", i)
			}
			if !slices.IsSorted(ps) {
				t.Fatalf("partitions not sorted: %v", ps)
			}
			for _, p := range ps {
				if seen[tid] == nil {
					seen[tid] = map[int32]bool{}
				}
				if seen[tid][p] || p < 0 || p >= spec.partitions[tid] {
					t.Fatalf("partition %d assigned twice or out of range", p)
				}
				seen[tid][p] = true
			}
			counts[i] += len(ps)
		}
	}
	for tid, n := range spec.partitions {
		subscribed := false
		for _, m := range spec.members {
			subscribed = subscribed || slices.Contains(m.topics, tid)
		}
		if subscribed && len(seen[tid]) != int(n) {
			t.Fatalf("topic: %d of %d partitions assigned", len(seen[tid]), n)
		}
	}
	return counts
}

func TestAssignorsBalanceAndCover(t *testing.T) {
	topics := map[string]int32{"a": 10, "b": 7, "c": 1, "empty": 0}
	all := func(int) []string { return []string{"a", "b", "c", "empty"} }
	mixed := func(i int) []string { return [][]string{{"a"}, {"a", "b"}, {"b", "c"}}[i%3] }
	for _, name := range []string{AssignorUniform, AssignorRange} {
		for _, members := range []int{1, 2, 3, 7, 20} {
			for sname, sub := range map[string]func(int) []string{"homogeneous": all, "heterogeneous": mixed} {
				t.Run(fmt.Sprintf("%s/%d/%s", name, members, sname), func(t *testing.T) {
					spec := specOf(members, topics, sub)
					counts := checkAssignment(t, spec, runAssignor(name, spec))
					if name == AssignorUniform && sname == "homogeneous" {
						lo, hi := slices.Min(counts), slices.Max(counts)
						if hi-lo > 1 {
							t.Fatalf("unbalanced: %v", counts)
						}
					}
				})
			}
		}
	}
}

func TestRangeAssignorCoPartitions(t *testing.T) {
	spec := specOf(3, map[string]int32{"a": 8, "b": 8}, func(int) []string { return []string{"a", "b"} })
	out := assignRange(spec)
	for i, a := range out {
		if !slices.Equal(a[topicID("a")], a[topicID("b")]) {
			t.Fatalf("member %d: a %v b %v", i, a[topicID("a")], a[topicID("b")])
		}
	}
	if want := []int32{0, 1, 2}; !slices.Equal(out[0][topicID("a")], want) {
		t.Fatalf("first member: %v", out[0][topicID("a")])
	}
}

// TestUniformIsSticky: a member joining a balanced group takes only its
// share; the others keep all but what they must give up.
func TestUniformIsSticky(t *testing.T) {
	sub := func(int) []string { return []string{"a"} }
	spec := specOf(4, map[string]int32{"a": 100}, sub)
	first := assignUniform(spec)
	spec5 := specOf(5, map[string]int32{"a": 100}, sub)
	for i := range 4 {
		spec5.members[i].current = first[i]
	}
	second := assignUniform(spec5)
	checkAssignment(t, spec5, second)
	moved := 0
	for i := range 4 {
		for _, p := range second[i][topicID("a")] {
			if !first[i].has(topicID("a"), p) {
				moved++
			}
		}
	}
	if moved != 0 || second[4].count() != 20 {
		t.Fatalf("moved %d partitions among incumbents; newcomer got %d", moved, second[4].count())
	}
}

// BenchmarkAssign: the group of the issue, 1,000 members over 10,000
// partitions, assigned from scratch and again after one member joined
// (the sticky path every rebalance takes).
func BenchmarkAssign(b *testing.B) {
	topics := map[string]int32{}
	for i := range 10 {
		topics[fmt.Sprintf("t%d", i)] = 1000
	}
	names := slices.Sorted(mapKeys(topics))
	for _, name := range []string{AssignorUniform, AssignorRange} {
		for _, hetero := range []bool{false, true} {
			sub := func(int) []string { return names }
			if hetero {
				sub = func(i int) []string { return names[i%3 : i%3+7] }
			}
			spec := specOf(1000, topics, sub)
			b.Run(fmt.Sprintf("%s/heterogeneous=%v/fresh", name, hetero), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					runAssignor(name, spec)
				}
			})
			prev := runAssignor(name, spec)
			spec2 := specOf(1001, topics, sub)
			for i := range 1000 {
				spec2.members[i].current = prev[i]
			}
			b.Run(fmt.Sprintf("%s/heterogeneous=%v/sticky", name, hetero), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					runAssignor(name, spec2)
				}
			})
		}
	}
}
