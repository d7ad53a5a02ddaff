package group

import (
	"bytes"
	"cmp"
	"slices"
)

// assignment is a member's partitions: topic id → partitions, ascending.
type assignment map[[16]byte][]int32

func (a assignment) count() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

func (a assignment) equal(b assignment) bool {
	if len(a) != len(b) {
		return false
	}
	for t, ps := range a {
		if !slices.Equal(ps, b[t]) {
			return false
		}
	}
	return true
}

func (a assignment) has(topic [16]byte, p int32) bool {
	_, ok := slices.BinarySearch(a[topic], p)
	return ok
}

func sortedTopicIDs[V any](m map[[16]byte]V) [][16]byte {
	ids := make([][16]byte, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) })
	return ids
}

// assignMember is one member as an assignor sees it.
type assignMember struct {
	id         string
	instanceID *string
	topics     [][16]byte // subscribed topic ids that exist, ascending
	current    assignment // the member's previous target assignment
}

// assignSpec is the input of an assignor: the members in a deterministic
// order and the partition count of every subscribed topic.
type assignSpec struct {
	members    []assignMember
	partitions map[[16]byte]int32
}

// homogeneous reports whether every member subscribes to the same topics.
func (s *assignSpec) homogeneous() bool {
	for i := 1; i < len(s.members); i++ {
		if !slices.Equal(s.members[i].topics, s.members[0].topics) {
			return false
		}
	}
	return true
}

// runAssignor computes the target assignment with the named assignor.
func runAssignor(name string, spec *assignSpec) []assignment {
	if name == AssignorRange {
		return assignRange(spec)
	}
	return assignUniform(spec)
}

// assignRange is the range assignor (KIP-848's "range"): members ordered
// by instance id (static members first) then member id; each topic's
// partitions split into contiguous ranges over the members subscribed to
// it, the first members taking one more when they do not divide evenly —
// so co-partitioned topics are assigned alike, as with the client-side
// RangeAssignor.
func assignRange(spec *assignSpec) []assignment {
	order := rangeOrder(spec.members)
	out := make([]assignment, len(spec.members))
	for i := range out {
		out[i] = assignment{}
	}
	subscribers := map[[16]byte][]int{}
	for _, i := range order {
		for _, t := range spec.members[i].topics {
			subscribers[t] = append(subscribers[t], i)
		}
	}
	for _, t := range sortedTopicIDs(subscribers) {
		members := subscribers[t]
		n := int(spec.partitions[t])
		quota, extra := n/len(members), n%len(members)
		next := 0
		for k, i := range members {
			size := quota
			if k < extra {
				size++
			}
			if size == 0 {
				continue
			}
			ps := make([]int32, size)
			for j := range ps {
				ps[j] = int32(next + j)
			}
			next += size
			out[i][t] = ps
		}
	}
	return out
}

func rangeOrder(members []assignMember) []int {
	order := make([]int, len(members))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		ma, mb := &members[a], &members[b]
		switch {
		case ma.instanceID != nil && mb.instanceID != nil:
			return cmp.Or(cmp.Compare(*ma.instanceID, *mb.instanceID), cmp.Compare(ma.id, mb.id))
		case ma.instanceID != nil:
			return -1
		case mb.instanceID != nil:
			return 1
		}
		return cmp.Compare(ma.id, mb.id)
	})
	return order
}

// assignUniform is the uniform assignor (KIP-848's default, "uniform"):
// every member gets as close to the same number of partitions as its
// subscription allows, keeping as many of its previous partitions as
// balance permits (sticky), so a rebalance moves few partitions.
//
// Homogeneous groups (one subscription) are exactly balanced: each member
// gets ⌊P/M⌋ or ⌈P/M⌉ partitions. Heterogeneous groups keep their
// previous partitions up to a fair share and give the rest to the least
// loaded subscriber, topic by topic — balanced greedily, not optimally.
// Cost: O(P + M) for a homogeneous group, O(P·S) for a heterogeneous one
// (S subscribers of a topic).
func assignUniform(spec *assignSpec) []assignment {
	out := make([]assignment, len(spec.members))
	for i := range out {
		out[i] = assignment{}
	}
	if len(spec.members) == 0 {
		return out
	}
	if spec.homogeneous() {
		uniformHomogeneous(spec, out)
	} else {
		uniformHeterogeneous(spec, out)
	}
	for _, a := range out {
		for t := range a {
			slices.Sort(a[t])
		}
	}
	return out
}

// partitionIndex numbers the subscribed partitions densely so that
// ownership is a slice, not a map.
type partitionIndex struct {
	topics [][16]byte
	base   map[[16]byte]int
	total  int
}

func newPartitionIndex(topics [][16]byte, counts map[[16]byte]int32) partitionIndex {
	px := partitionIndex{topics: topics, base: make(map[[16]byte]int, len(topics))}
	px.topics = nil
	for _, t := range topics {
		px.base[t] = px.total
		if counts[t] > 0 {
			px.topics = append(px.topics, t)
		}
		px.total += int(counts[t])
	}
	return px
}

func uniformHomogeneous(spec *assignSpec, out []assignment) {
	px := newPartitionIndex(spec.members[0].topics, spec.partitions)
	m := len(spec.members)
	quota, extra := px.total/m, px.total%m
	taken := make([]bool, px.total)
	counts := make([]int, m)
	// Members in id order, so the extra partitions go to the same members
	// from one rebalance to the next.
	order := rangeOrder(spec.members)
	// 1. Stickiness: keep previous partitions up to the quota; a member
	// that had more keeps one extra while extras remain.
	limits := make([]int, m)
	for _, i := range order {
		mem := &spec.members[i]
		limit := quota
		if extra > 0 && mem.current.count() > quota {
			limit++
			extra--
		}
		limits[i] = limit
		for _, t := range px.topics {
			base, ok := px.base[t]
			if !ok {
				continue
			}
			for _, p := range mem.current[t] {
				if counts[i] >= limit {
					break
				}
				if p < 0 || p >= spec.partitions[t] || taken[base+int(p)] {
					continue
				}
				taken[base+int(p)] = true
				out[i][t] = append(out[i][t], p)
				counts[i]++
			}
		}
	}
	// 2. The free partitions fill every member to its limit, then one
	// extra each to members without one while extras remain (the limits
	// and the extras left add up to every partition).
	next := 0
	nextFree := func() (int, bool) {
		for next < px.total && taken[next] {
			next++
		}
		if next >= px.total {
			return 0, false
		}
		taken[next] = true
		return next, true
	}
	give := func(i, limit int) {
		for counts[i] < limit {
			k, ok := nextFree()
			if !ok {
				return
			}
			t, p := px.locate(k)
			out[i][t] = append(out[i][t], p)
			counts[i]++
		}
	}
	for _, i := range order {
		give(i, limits[i])
	}
	for _, i := range order {
		if extra == 0 {
			break
		}
		if limits[i] == quota {
			give(i, quota+1)
			extra--
		}
	}
}

// locate maps a dense partition number back to (topic, partition).
func (px *partitionIndex) locate(k int) ([16]byte, int32) {
	i, found := slices.BinarySearchFunc(px.topics, k, func(t [16]byte, k int) int { return cmp.Compare(px.base[t], k) })
	if !found {
		i--
	}
	t := px.topics[i]
	return t, int32(k - px.base[t])
}

func uniformHeterogeneous(spec *assignSpec, out []assignment) {
	subscribers := map[[16]byte][]int{}
	order := rangeOrder(spec.members)
	for _, i := range order {
		for _, t := range spec.members[i].topics {
			subscribers[t] = append(subscribers[t], i)
		}
	}
	counts := make([]int, len(spec.members))
	for _, t := range sortedTopicIDs(subscribers) {
		subs := subscribers[t]
		n := spec.partitions[t]
		fair := (int(n) + len(subs) - 1) / len(subs)
		taken := make([]bool, n)
		for _, i := range subs {
			kept := 0
			for _, p := range spec.members[i].current[t] {
				if kept >= fair {
					break
				}
				if p < 0 || p >= n || taken[p] {
					continue
				}
				taken[p] = true
				out[i][t] = append(out[i][t], p)
				counts[i]++
				kept++
			}
		}
		for p := range n {
			if taken[p] {
				continue
			}
			best := subs[0]
			for _, i := range subs[1:] {
				if counts[i] < counts[best] {
					best = i
				}
			}
			out[best][t] = append(out[best][t], p)
			counts[best]++
		}
	}
}
