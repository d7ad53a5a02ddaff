package group

import "container/heap"

// timerKind names what a deadline is for; with the group and member it
// keys the deadline, so scheduling it again replaces it (Kafka's keyed
// timer).
type timerKind uint8

const (
	timerClassicHeartbeat  timerKind = iota // a classic member's session (or new-member join) timeout
	timerClassicJoin                        // the join phase's end (rebalance timeout, initial delay)
	timerClassicSync                        // the sync phase's end (rebalance timeout)
	timerConsumerSession                    // a KIP-848 member's session timeout
	timerConsumerRebalance                  // a KIP-848 member's revocation deadline
	timerConsumerAssign                     // a KIP-848 group's next assignor run (AssignmentInterval)
)

type timerKey struct {
	kind   timerKind
	group  string
	member string
}

type timer struct {
	key   timerKey
	at    int64 // ms
	seq   uint64
	index int
	fire  func(now int64)
}

// timers is a min-heap of deadlines keyed by timerKey. Deadlines fire in
// (time, scheduling order), so the same calls at the same times fire the
// same timers in the same order.
type timers struct {
	h     timerHeap
	byKey map[timerKey]*timer
	seq   uint64
}

func newTimers() timers { return timers{byKey: make(map[timerKey]*timer)} }

// schedule sets the deadline of key to at, replacing an earlier one.
func (t *timers) schedule(key timerKey, at int64, fire func(now int64)) {
	t.seq++
	if old := t.byKey[key]; old != nil {
		old.at, old.seq, old.fire = at, t.seq, fire
		heap.Fix(&t.h, old.index)
		return
	}
	tm := &timer{key: key, at: at, seq: t.seq, fire: fire}
	t.byKey[key] = tm
	heap.Push(&t.h, tm)
}

func (t *timers) cancel(key timerKey) {
	if tm := t.byKey[key]; tm != nil {
		heap.Remove(&t.h, tm.index)
		delete(t.byKey, key)
	}
}

// next returns the earliest deadline.
func (t *timers) next() (int64, bool) {
	if len(t.h) == 0 {
		return 0, false
	}
	return t.h[0].at, true
}

// popDue removes and returns the earliest timer due at now, or nil.
func (t *timers) popDue(now int64) *timer {
	if len(t.h) == 0 || t.h[0].at > now {
		return nil
	}
	tm := heap.Pop(&t.h).(*timer)
	delete(t.byKey, tm.key)
	return tm
}

type timerHeap []*timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *timerHeap) Push(x any) {
	tm := x.(*timer)
	tm.index = len(*h)
	*h = append(*h, tm)
}
func (h *timerHeap) Pop() any {
	old := *h
	tm := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return tm
}
