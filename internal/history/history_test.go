package history

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

var (
	p0 = Partition{"t", 0}
	p1 = Partition{"t", 1}
)

// good builds a history that keeps every rule: two producers on two
// partitions, one failed send that was stored anyway and one that was not,
// consumers that read some of it, and the final reads.
func good() *History {
	h := New()
	h.Send("a", p0, "a0")
	h.Send("a", p0, "a1")
	h.Send("b", p0, "b0")
	h.Send("a", p1, "a2")
	h.Send("b", p0, "b1") // failed, stored anyway
	h.Send("b", p1, "b2") // failed, not stored
	h.Ack("a0", 0)
	h.Ack("b0", 1)
	h.Ack("a1", 2)
	h.Ack("a2", 0)
	h.Fail("b1", errors.New("NOT_COORDINATOR"))
	h.Fail("b2", errors.New("KAFKA_STORAGE_ERROR"))
	h.Observe("c", p0, 0, "a0")
	h.Observe("c", p0, 1, "b0")
	h.Observe("d", p0, 1, "b0")
	h.Observe("c", p1, 0, "a2")
	h.Final(p0, 0, []Entry{{2, "a1"}, {0, "a0"}, {1, "b0"}, {3, "b1"}})
	h.Final(p1, 0, []Entry{{0, "a2"}})
	return h
}

func TestGoodHistory(t *testing.T) {
	if vs := good().Check(); len(vs) != 0 {
		t.Fatalf("violations in a good history: %v", vs)
	}
	c := good().Counts()
	if c != (Counts{Sent: 6, Acked: 4, Failed: 2, Observed: 4}) {
		t.Fatalf("counts %+v", c)
	}
}

// TestViolations: each history breaks one rule, and Check reports that
// rule (and only that one unless another follows from it).
func TestViolations(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func() *History
		want  []Kind
	}{
		{"acknowledged record lost", func() *History {
			h := good()
			h.Final(p0, 0, []Entry{{0, "a0"}, {1, "b0"}, {2, "b1"}}) // a1 gone, b1 in its place
			return h
		}, []Kind{Lost}},
		{"acknowledged record read, then lost", func() *History {
			h := good()
			h.Observe("c", p0, 2, "a1")
			h.Final(p0, 0, []Entry{{0, "a0"}, {1, "b0"}, {2, "b1"}})
			return h
		}, []Kind{Lost, Vanished}},
		{"acknowledged record at another offset", func() *History {
			h := good()
			h.Final(p0, 0, []Entry{{0, "a0"}, {1, "b0"}, {2, "b1"}, {3, "a1"}})
			return h
		}, []Kind{Moved}},
		{"acknowledged record in another partition", func() *History {
			h := good()
			h.Final(p1, 0, []Entry{{0, "a2"}, {1, "a1"}})
			h.Final(p0, 0, []Entry{{0, "a0"}, {1, "b0"}, {2, "b1"}})
			return h
		}, []Kind{Moved}},
		{"duplicated record", func() *History {
			h := good()
			h.Final(p0, 0, []Entry{{0, "a0"}, {1, "b0"}, {2, "a1"}, {3, "b1"}, {4, "a1"}})
			return h
		}, []Kind{Duplicated}},
		{"duplicate of an unacknowledged record", func() *History {
			h := good()
			h.Final(p0, 0, []Entry{{0, "a0"}, {1, "b0"}, {2, "a1"}, {3, "b1"}, {4, "b1"}})
			return h
		}, []Kind{Duplicated}},
		{"offset acknowledged twice", func() *History {
			h := New()
			h.Send("a", p0, "x")
			h.Send("b", p0, "y")
			h.Ack("x", 0)
			h.Ack("y", 0)
			h.Final(p0, 0, []Entry{{0, "x"}})
			return h
		}, []Kind{AssignedTwice, Lost}},
		{"offset read with two values", func() *History {
			h := good()
			h.Observe("d", p0, 0, "b1")
			return h
		}, []Kind{AssignedTwice, Vanished}},
		{"acknowledgements out of send order", func() *History {
			h := New()
			h.Send("a", p0, "x")
			h.Send("a", p0, "y")
			h.Ack("x", 1)
			h.Ack("y", 0)
			h.Final(p0, 0, []Entry{{0, "y"}, {1, "x"}})
			return h
		}, []Kind{Reordered, Reordered}},
		{"final log out of send order (unacknowledged records)", func() *History {
			h := New()
			h.Send("a", p0, "x")
			h.Send("a", p0, "y")
			h.Fail("x", nil)
			h.Fail("y", nil)
			h.Final(p0, 0, []Entry{{0, "y"}, {1, "x"}})
			return h
		}, []Kind{Reordered}},
		{"consumer read a record that vanished", func() *History {
			h := good()
			h.Observe("c", p0, 3, "b1")
			h.Observe("c", p0, 4, "zz") // past the final high watermark
			return h
		}, []Kind{Vanished}},
		{"consumer read a record replaced by another", func() *History {
			h := good()
			h.Observe("c", p1, 1, "b2") // b2 failed; then another record took offset 1
			h.Send("a", p1, "a3")
			h.Ack("a3", 1)
			h.Final(p1, 0, []Entry{{0, "a2"}, {1, "a3"}})
			return h
		}, []Kind{Vanished}},
		{"gap in the final log", func() *History {
			h := good()
			h.Final(p0, 0, []Entry{{0, "a0"}, {1, "b0"}, {2, "a1"}, {4, "b1"}})
			return h
		}, []Kind{Gap}},
		{"offset twice in the final log", func() *History {
			h := good()
			h.Final(p0, 0, []Entry{{0, "a0"}, {1, "b0"}, {2, "a1"}, {2, "b1"}})
			return h
		}, []Kind{Gap}},
		{"final log below its log start", func() *History {
			h := good()
			h.Final(p1, 1, []Entry{{0, "a2"}})
			return h
		}, []Kind{Gap}},
		{"partition without a final read", func() *History {
			h := good()
			h.Send("a", Partition{"u", 0}, "u0")
			return h
		}, []Kind{Lost}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := tc.build().Check()
			var got []Kind
			for _, v := range vs {
				got = append(got, v.Kind)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("violations %v, want kinds %v", vs, tc.want)
			}
			for _, v := range vs {
				if v.Msg == "" || !strings.Contains(v.String(), string(v.Kind)) {
					t.Fatalf("violation without a message: %+v", v)
				}
			}
		})
	}
}

// TestLogStartMoved: records below the final log start offset may be gone
// (retention, DeleteRecords): neither lost nor vanished.
func TestLogStartMoved(t *testing.T) {
	h := good()
	h.Final(p0, 2, []Entry{{2, "a1"}, {3, "b1"}})
	if vs := h.Check(); len(vs) != 0 {
		t.Fatalf("violations after the log start moved: %v", vs)
	}
}

// TestManyViolationsBounded: a run that loses everything reports a bounded
// list, saying how many more there were.
func TestManyViolationsBounded(t *testing.T) {
	h := New()
	for i := range 1000 {
		v := fmt.Sprint(i)
		h.Send("a", p0, v)
		h.Ack(v, int64(i))
	}
	h.Final(p0, 0, nil)
	vs := h.Check()
	if len(vs) != maxPerKind+1 || !strings.Contains(vs[maxPerKind].Msg, "980 more") {
		t.Fatalf("%d violations, last %v", len(vs), vs[len(vs)-1])
	}
}

func TestConcurrentUse(t *testing.T) {
	h := New()
	var wg sync.WaitGroup
	for p := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				v := fmt.Sprintf("%d-%d", p, i)
				h.Send(fmt.Sprint(p), Partition{"t", int32(p)}, v)
				h.Ack(v, int64(i))
				h.Observe("c", Partition{"t", int32(p)}, int64(i), v)
			}
		})
	}
	wg.Wait()
	for p := range 8 {
		var es []Entry
		for i := range 1000 {
			es = append(es, Entry{int64(i), fmt.Sprintf("%d-%d", p, i)})
		}
		h.Final(Partition{"t", int32(p)}, 0, es)
	}
	if vs := h.Check(); len(vs) != 0 {
		t.Fatal(vs)
	}
}

func TestMisuse(t *testing.T) {
	for name, f := range map[string]func(h *History){
		"value sent twice":      func(h *History) { h.Send("a", p0, "x"); h.Send("b", p1, "x") },
		"ack of an unsent":      func(h *History) { h.Ack("nope", 0) },
		"fail of an unsent":     func(h *History) { h.Fail("nope", nil) },
		"acked at two offsets":  func(h *History) { h.Send("a", p0, "x"); h.Ack("x", 0); h.Ack("x", 1) },
		"committed twice":       func(h *History) { h.Send("a", p0, "x"); h.Commit("x"); h.Commit("x") },
		"aborted, committed":    func(h *History) { h.Send("a", p0, "x"); h.Abort("x"); h.Commit("x") },
		"commit of an unsent":   func(h *History) { h.Commit("nope") },
		"acked again, same one": nil,
	} {
		t.Run(name, func(t *testing.T) {
			h := New()
			if f == nil {
				h.Send("a", p0, "x")
				h.Ack("x", 3)
				h.Ack("x", 3) // a repeated callback at the same offset is fine
				return
			}
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			f(h)
		})
	}
}

// committedView builds a transactional history that keeps every rule, read
// with read_committed: producer a's first transaction (x0, x1) committed
// with its marker at 2, the second (x2) aborted with its marker at 4,
// plain producer b's y0 at 5, and a's third transaction (x3, x4, never
// acknowledged: its producer died before the answers) committed at 6–7
// with its marker at 8.
func committedView() *History {
	h := New()
	for _, v := range []string{"x0", "x1", "x2", "x3", "x4"} {
		h.Send("a", p0, v)
	}
	h.Send("b", p0, "y0")
	h.Ack("x0", 0)
	h.Ack("x1", 1)
	h.Commit("x0", "x1")
	h.Ack("x2", 3)
	h.Abort("x2")
	h.Ack("y0", 5)
	h.Commit("x3", "x4")
	h.Observe("c", p0, 1, "x1")
	h.Observe("c", p0, 6, "x3")
	h.FinalCommitted(p0, 0, []Entry{{0, "x0"}, {1, "x1"}, {5, "y0"}, {6, "x3"}, {7, "x4"}})
	return h
}

// TestCommittedView: a read_committed final read skips the offsets of
// markers and aborted records; each history but the first breaks one rule
// of the committed view, and Check reports it.
func TestCommittedView(t *testing.T) {
	for _, tc := range []struct {
		name     string
		logStart int64
		final    []Entry
		want     []Kind
	}{
		{"good", 0, []Entry{{0, "x0"}, {1, "x1"}, {5, "y0"}, {6, "x3"}, {7, "x4"}}, nil},
		{"committed record lost", 0, []Entry{{0, "x0"}, {1, "x1"}, {5, "y0"}, {7, "x4"}}, []Kind{Lost, Vanished}},
		{"acknowledged committed record lost", 0, []Entry{{1, "x1"}, {5, "y0"}, {6, "x3"}, {7, "x4"}}, []Kind{Lost}},
		{"committed record duplicated", 0, []Entry{{0, "x0"}, {1, "x1"}, {5, "y0"}, {6, "x3"}, {7, "x4"}, {9, "x3"}}, []Kind{Duplicated, Reordered}},
		{"committed records reordered", 0, []Entry{{0, "x0"}, {1, "x1"}, {5, "y0"}, {6, "x4"}, {7, "x3"}}, []Kind{Reordered, Vanished}},
		{"aborted record visible", 0, []Entry{{0, "x0"}, {1, "x1"}, {3, "x2"}, {5, "y0"}, {6, "x3"}, {7, "x4"}}, []Kind{Aborted}},
		{"offset twice", 0, []Entry{{0, "x0"}, {1, "x1"}, {1, "y0"}, {6, "x3"}, {7, "x4"}}, []Kind{Gap, Moved}},
		{"below the log start", 2, []Entry{{0, "x0"}, {1, "x1"}, {5, "y0"}, {6, "x3"}, {7, "x4"}}, []Kind{Gap, Gap}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := committedView()
			h.FinalCommitted(p0, tc.logStart, tc.final)
			var got []Kind
			for _, v := range h.Check() {
				got = append(got, v.Kind)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("violations %v, want kinds %v", h.Check(), tc.want)
			}
		})
	}
}

// TestCommittedViewIsNotDense: the same entries as a read_uncommitted
// final read are gaps (Final keeps the dense rule), and a record of an
// aborted transaction in a read_uncommitted view is not a violation.
func TestCommittedViewIsNotDense(t *testing.T) {
	h := committedView()
	h.Final(p0, 0, []Entry{{0, "x0"}, {1, "x1"}, {5, "y0"}, {6, "x3"}, {7, "x4"}})
	var got []Kind
	for _, v := range h.Check() {
		got = append(got, v.Kind)
	}
	if fmt.Sprint(got) != fmt.Sprint([]Kind{Gap}) {
		t.Fatalf("violations %v, want one gap", h.Check())
	}
	h = committedView()
	h.Final(p0, 0, []Entry{{0, "x0"}, {1, "x1"}, {2, "m"}, {3, "x2"}, {4, "m2"}, {5, "y0"}, {6, "x3"}, {7, "x4"}})
	if vs := h.Check(); len(vs) != 0 {
		t.Fatalf("violations in a read_uncommitted view with an aborted record: %v", vs)
	}
}
