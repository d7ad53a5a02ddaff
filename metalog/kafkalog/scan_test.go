package kafkalog

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/diskless-sidecar/sidecar/metalog"
)

// entry is one Kafka record of a synthetic partition (its offset is its
// place in the list, plus the list's base).
type entry struct{ key, value []byte }

var (
	writerA = [writerIDSize]byte{'A'}
	writerB = [writerIDSize]byte{'B'}
)

func claimE(prev int64, w [writerIDSize]byte) entry {
	return entry{recordKey{kind: kindClaim, epoch: prev, parts: 1}.appendTo(nil), claimValue{writer: w, description: "test"}.appendTo(nil)}
}

// recE is one Kafka record holding part of record index; end flags the
// group's last.
func recE(epoch, index int64, part, parts uint32, end bool, v string) entry {
	k := recordKey{kind: kindRecord, epoch: epoch, index: index, part: part, parts: parts}
	if end {
		k.flags = flagGroupEnd
	}
	return entry{k.appendTo(nil), []byte(v)}
}

// one is a whole one-part record.
func one(epoch, index int64, end bool) entry {
	return recE(epoch, index, 0, 1, end, fmt.Sprintf("r%d", index))
}

func ptrE(epoch, index int64) entry {
	return entry{recordKey{kind: kindSnapshot, epoch: epoch, index: index, parts: 1}.appendTo(nil),
		pointer{key: fmt.Sprintf("snap-%d", index)}.appendValue(nil)}
}

// scanResult is what a scan of entries delivered.
type scanResult struct {
	groups   []string // "first-last" indexes, with the bodies
	pointers []int64  // indexes of the pointers that counted
	claims   []string // offset:effective
	dropped  int
	st       scanState
	clean    bool
	err      error
}

func runScan(sc *scanner, base int64, es []entry) scanResult {
	var r scanResult
	sc.group = func(recs []pendingRecord, first, last int64) error {
		var b []string
		for _, x := range recs {
			b = append(b, fmt.Sprintf("%d=%s", x.index, x.body))
		}
		r.groups = append(r.groups, fmt.Sprintf("@%d-%d[%s]", first, last, strings.Join(b, " ")))
		return nil
	}
	sc.pointerSeen = func(p pointer) { r.pointers = append(r.pointers, p.index) }
	sc.claimSeen = func(off int64, c claimValue, eff bool) { r.claims = append(r.claims, fmt.Sprintf("%d:%v", off, eff)) }
	sc.dropped = func(int64, string) { r.dropped++ }
	for i, e := range es {
		if err := sc.add(base+int64(i), e.key, e.value); err != nil {
			r.err = err
			break
		}
	}
	r.st, r.clean = sc.st, sc.clean()
	return r
}

// TestScanRule pins the validity rule on synthetic partitions
// (docs/format/metadata-records.md §The Kafka backend).
func TestScanRule(t *testing.T) {
	for _, tc := range []struct {
		name     string
		es       []entry
		groups   []string
		pointers []int64
		epoch    int64
		next     int64
		clean    bool
		dropped  int
	}{
		{
			name:  "nothing counts before a claim",
			es:    []entry{one(-0, 0, true), one(5, 0, true)},
			epoch: -1, clean: true,
		},
		{
			name: "groups of one writer",
			es: []entry{claimE(takeover, writerA), one(0, 0, false), one(0, 1, true),
				recE(0, 2, 0, 3, false, "a"), recE(0, 2, 1, 3, false, "b"), recE(0, 2, 2, 3, true, "c")},
			groups: []string{"@1-2[0=r0 1=r1]", "@3-5[2=abc]"},
			epoch:  0, next: 3, clean: true,
		},
		{
			name: "a takeover fences the writer before it; its later records never count",
			es: []entry{claimE(takeover, writerA), one(0, 0, true),
				claimE(takeover, writerB), // offset 2: B's epoch
				one(0, 1, true),           // A, fenced
				one(2, 1, true),           // B
				ptrE(0, 2),                // A's pointer
				ptrE(2, 2)},               // B's
			groups:   []string{"@1-1[0=r0]", "@4-4[1=r1]"},
			pointers: []int64{2},
			epoch:    2, next: 2, clean: true,
		},
		{
			name: "a takeover drops the torn group before it",
			es: []entry{claimE(takeover, writerA), one(0, 0, true), one(0, 1, false), recE(0, 2, 0, 2, false, "x"),
				claimE(takeover, writerB), one(4, 1, true)},
			groups: []string{"@1-1[0=r0]", "@5-5[1=r1]"},
			epoch:  4, next: 2, clean: true, dropped: 1,
		},
		{
			name: "a continuation of the epoch in force is effective",
			es: []entry{claimE(takeover, writerA), one(0, 0, true), one(0, 1, false),
				claimE(0, writerA), one(3, 1, true), one(0, 9, true)},
			groups: []string{"@1-1[0=r0]", "@4-4[1=r1]"},
			epoch:  3, next: 2, clean: true, dropped: 1,
		},
		{
			name: "a continuation of an epoch no longer in force is not",
			es: []entry{claimE(takeover, writerA), one(0, 0, true), claimE(takeover, writerB),
				claimE(0, writerA), one(3, 1, true), one(2, 1, true)},
			groups: []string{"@1-1[0=r0]", "@5-5[1=r1]"},
			epoch:  2, next: 2, clean: true,
		},
		{
			name: "a duplicate breaks the run until the next claim",
			es: []entry{claimE(takeover, writerA), one(0, 0, true), one(0, 0, true), one(0, 1, true),
				claimE(0, writerA), one(4, 1, true)},
			groups: []string{"@1-1[0=r0]", "@5-5[1=r1]"},
			epoch:  4, next: 2, clean: true, dropped: 1,
		},
		{
			name: "a missing part breaks the run",
			es: []entry{claimE(takeover, writerA), recE(0, 0, 0, 3, false, "a"), recE(0, 0, 2, 3, true, "c"),
				one(0, 1, true)},
			epoch: 0, next: 0, dropped: 1,
		},
		{
			name:  "a group end on a middle part breaks the run",
			es:    []entry{claimE(takeover, writerA), recE(0, 0, 0, 2, true, "a"), recE(0, 0, 1, 2, true, "b")},
			epoch: 0, dropped: 1,
		},
		{
			name:  "a record that does not start at the next index breaks the run",
			es:    []entry{claimE(takeover, writerA), one(0, 1, true)},
			epoch: 0, dropped: 1,
		},
		{
			name:     "a pointer counts between groups at the next index",
			es:       []entry{claimE(takeover, writerA), one(0, 0, true), ptrE(0, 1), one(0, 1, true), ptrE(0, 2)},
			groups:   []string{"@1-1[0=r0]", "@3-3[1=r1]"},
			pointers: []int64{1, 2},
			epoch:    0, next: 2, clean: true,
		},
		{
			name:  "a pointer inside a group breaks the run",
			es:    []entry{claimE(takeover, writerA), one(0, 0, false), ptrE(0, 0), one(0, 1, true)},
			epoch: 0, dropped: 1,
		},
		{
			name:   "a pointer at another index breaks the run",
			es:     []entry{claimE(takeover, writerA), one(0, 0, true), ptrE(0, 5), one(0, 1, true)},
			groups: []string{"@1-1[0=r0]"},
			epoch:  0, next: 1, dropped: 1,
		},
		{
			name: "a fenced writer's records between a group's do not break it",
			es: []entry{claimE(takeover, writerA), claimE(takeover, writerB), one(1, 0, false), one(0, 0, true),
				one(1, 1, true)},
			groups: []string{"@2-4[0=r0 1=r1]"},
			epoch:  1, next: 2, clean: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runScan(fromLogStart(0, "test"), 0, tc.es)
			if r.err != nil {
				t.Fatal(r.err)
			}
			if !slices.Equal(r.groups, tc.groups) || !slices.Equal(r.pointers, tc.pointers) || r.st.epoch != tc.epoch ||
				r.st.next != tc.next || r.clean != tc.clean || r.dropped != tc.dropped {
				t.Fatalf("groups %v, pointers %v, epoch %d, next %d, clean %v, dropped %d;\nwant %v, %v, %d, %d, %v, %d",
					r.groups, r.pointers, r.st.epoch, r.st.next, r.clean, r.dropped, tc.groups, tc.pointers, tc.epoch, tc.next, tc.clean, tc.dropped)
			}
		})
	}
}

// TestScanStarts: a scan from a pointer, or from a truncated log's start
// (which must be a pointer), reaches the state a scan from offset 0 does.
func TestScanStarts(t *testing.T) {
	es := []entry{claimE(takeover, writerA), one(0, 0, true), one(0, 1, true), ptrE(0, 2), one(0, 2, false), one(0, 3, true),
		claimE(takeover, writerB), one(0, 4, true), one(6, 4, true)}
	full := runScan(fromLogStart(0, "test"), 0, es)
	fromP := runScan(fromPointer(pointer{index: 2, epoch: 0, offset: 3}, "test"), 3, es[3:])
	trunc := runScan(fromLogStart(3, "test"), 3, es[3:])
	for name, r := range map[string]scanResult{"pointer": fromP, "truncated": trunc} {
		if r.err != nil || r.st.epoch != full.st.epoch || r.st.next != full.st.next || r.clean != full.clean ||
			!slices.Equal(r.groups, full.groups[2:]) {
			t.Errorf("from the %s: %+v, want the end of %+v", name, r, full)
		}
	}
	if trunc.st.next != 5 || full.groups[len(full.groups)-1] != "@8-8[4=r4]" {
		t.Fatalf("full scan %+v", full)
	}
	r := runScan(fromLogStart(1, "test"), 1, es[1:])
	if !errors.Is(r.err, metalog.ErrCorrupt) {
		t.Fatalf("a truncated log starting with a record: %v, want ErrCorrupt", r.err)
	}
}

// TestScanCorrupt: records no writer of this format writes are ErrCorrupt
// wherever they are.
func TestScanCorrupt(t *testing.T) {
	good := claimE(takeover, writerA)
	for name, e := range map[string]entry{
		"foreign key":      {[]byte("some-key"), []byte("v")},
		"no key":           {nil, []byte("v")},
		"old version":      {append([]byte("DM\x01"), make([]byte, 17)...), nil},
		"short key":        {good.key[:keySize-1], good.value},
		"claim value":      {good.key, []byte{claimVersion, 1, 2}},
		"claim version":    {good.key, append([]byte{9}, good.value[1:]...)},
		"pointer value":    {ptrE(0, 0).key, []byte{pointerVersion, 0, 9, 'x'}},
		"unknown kind":     {recordKey{kind: 7, parts: 1}.appendTo(nil), nil},
		"negative index":   {recordKey{kind: kindRecord, index: -1, parts: 1}.appendTo(nil), []byte("x")},
		"part past parts":  {recordKey{kind: kindRecord, part: 2, parts: 2}.appendTo(nil), []byte("x")},
		"takeover record":  {recordKey{kind: kindRecord, epoch: takeover, parts: 1}.appendTo(nil), []byte("x")},
		"flags on a claim": {recordKey{kind: kindClaim, epoch: takeover, parts: 1, flags: 1}.appendTo(nil), good.value},
		"unknown flag":     {recordKey{kind: kindRecord, parts: 1, flags: 2}.appendTo(nil), []byte("x")},
	} {
		t.Run(name, func(t *testing.T) {
			r := runScan(fromLogStart(0, "test"), 0, []entry{good, e})
			if !errors.Is(r.err, metalog.ErrCorrupt) {
				t.Fatalf("%v, want ErrCorrupt", r.err)
			}
		})
	}
}

// FuzzScan: no sequence of records makes the scan panic, deliver a
// record out of index order, or deliver anything that did not count.
func FuzzScan(f *testing.F) {
	f.Add([]byte{0, 1, 1, 2, 3})
	f.Add([]byte{0, 1, 0, 1, 4, 1, 5, 2})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var es []entry
		for i := 0; i+1 < len(ops); i += 2 {
			epoch := int64(ops[i+1]%4) - 1
			switch ops[i] % 5 {
			case 0:
				es = append(es, claimE(epoch, writerA))
			case 1:
				es = append(es, one(max(epoch, 0), int64(ops[i+1]%3), ops[i+1]&8 != 0))
			case 2:
				es = append(es, recE(max(epoch, 0), int64(ops[i+1]%2), uint32(ops[i+1]>>4%2), 2, ops[i+1]&8 != 0, "p"))
			case 3:
				es = append(es, ptrE(max(epoch, 0), int64(ops[i+1]%3)))
			case 4:
				es = append(es, entry{[]byte{ops[i+1]}, nil})
			}
		}
		sc := fromLogStart(0, "fuzz")
		next := int64(0)
		sc.group = func(recs []pendingRecord, _, _ int64) error {
			for _, r := range recs {
				if r.index != next {
					t.Fatalf("delivered record %d, want %d", r.index, next)
				}
				next++
			}
			return nil
		}
		for i, e := range es {
			if err := sc.add(int64(i), e.key, e.value); err != nil {
				if !errors.Is(err, metalog.ErrCorrupt) {
					t.Fatal(err)
				}
				return
			}
		}
		if sc.st.next != next {
			t.Fatalf("state next %d, delivered up to %d", sc.st.next, next)
		}
	})
}
