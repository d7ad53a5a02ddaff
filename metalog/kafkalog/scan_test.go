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
			es: []entry{claimE(noEpoch, writerA), one(0, 0, false), one(0, 1, true),
				recE(0, 2, 0, 3, false, "a"), recE(0, 2, 1, 3, false, "b"), recE(0, 2, 2, 3, true, "c")},
			groups: []string{"@1-2[0=r0 1=r1]", "@3-5[2=abc]"},
			epoch:  0, next: 3, clean: true,
		},
		{
			name: "a takeover fences the writer before it; its later records never count",
			es: []entry{claimE(noEpoch, writerA), one(0, 0, true),
				claimE(0, writerB), // offset 2: B's epoch
				one(0, 1, true),    // A, fenced
				one(2, 1, true),    // B
				ptrE(0, 2),         // A's pointer
				ptrE(2, 2)},        // B's
			groups:   []string{"@1-1[0=r0]", "@4-4[1=r1]"},
			pointers: []int64{2},
			epoch:    2, next: 2, clean: true,
		},
		{
			name: "a takeover drops the torn group before it",
			es: []entry{claimE(noEpoch, writerA), one(0, 0, true), one(0, 1, false), recE(0, 2, 0, 2, false, "x"),
				claimE(0, writerB), one(4, 1, true)},
			groups: []string{"@1-1[0=r0]", "@5-5[1=r1]"},
			epoch:  4, next: 2, clean: true, dropped: 1,
		},
		{
			name: "a continuation of the epoch in force is effective",
			es: []entry{claimE(noEpoch, writerA), one(0, 0, true), one(0, 1, false),
				claimE(0, writerA), one(3, 1, true), one(0, 9, true)},
			groups: []string{"@1-1[0=r0]", "@4-4[1=r1]"},
			epoch:  3, next: 2, clean: true, dropped: 1,
		},
		{
			name: "a continuation of an epoch no longer in force is not",
			es: []entry{claimE(noEpoch, writerA), one(0, 0, true), claimE(0, writerB),
				claimE(0, writerA), one(3, 1, true), one(2, 1, true)},
			groups: []string{"@1-1[0=r0]", "@5-5[1=r1]"},
			epoch:  2, next: 2, clean: true,
		},
		{
			name: "a duplicate breaks the run until the next claim",
			es: []entry{claimE(noEpoch, writerA), one(0, 0, true), one(0, 0, true), one(0, 1, true),
				claimE(0, writerA), one(4, 1, true)},
			groups: []string{"@1-1[0=r0]", "@5-5[1=r1]"},
			epoch:  4, next: 2, clean: true, dropped: 1,
		},
		{
			name: "a missing part breaks the run",
			es: []entry{claimE(noEpoch, writerA), recE(0, 0, 0, 3, false, "a"), recE(0, 0, 2, 3, true, "c"),
				one(0, 1, true)},
			epoch: 0, next: 0, dropped: 1,
		},
		{
			name:  "a group end on a middle part breaks the run",
			es:    []entry{claimE(noEpoch, writerA), recE(0, 0, 0, 2, true, "a"), recE(0, 0, 1, 2, true, "b")},
			epoch: 0, dropped: 1,
		},
		{
			name:  "a record that does not start at the next index breaks the run",
			es:    []entry{claimE(noEpoch, writerA), one(0, 1, true)},
			epoch: 0, dropped: 1,
		},
		{
			name:     "a pointer counts between groups at the next index",
			es:       []entry{claimE(noEpoch, writerA), one(0, 0, true), ptrE(0, 1), one(0, 1, true), ptrE(0, 2)},
			groups:   []string{"@1-1[0=r0]", "@3-3[1=r1]"},
			pointers: []int64{1, 2},
			epoch:    0, next: 2, clean: true,
		},
		{
			name:  "a pointer inside a group breaks the run",
			es:    []entry{claimE(noEpoch, writerA), one(0, 0, false), ptrE(0, 0), one(0, 1, true)},
			epoch: 0, dropped: 1,
		},
		{
			name:   "a pointer at another index breaks the run",
			es:     []entry{claimE(noEpoch, writerA), one(0, 0, true), ptrE(0, 5), one(0, 1, true)},
			groups: []string{"@1-1[0=r0]"},
			epoch:  0, next: 1, dropped: 1,
		},
		{
			name: "a claim naming an epoch no longer in force is not effective (a late claim, a dead process's)",
			es: []entry{claimE(noEpoch, writerA), one(0, 0, true),
				claimE(noEpoch, writerA), // A's own first claim, landing late
				claimE(noEpoch, writerB), // a dead process's, read an empty partition
				one(0, 1, false), one(0, 2, true)},
			groups: []string{"@1-1[0=r0]", "@4-5[1=r1 2=r2]"},
			epoch:  0, next: 3, clean: true,
		},
		{
			name:  "a first claim naming an epoch is not effective",
			es:    []entry{claimE(0, writerA), one(0, 0, true)},
			epoch: -1, clean: true,
		},
		{
			name: "two claims naming the same epoch: the first to land wins",
			es: []entry{claimE(noEpoch, writerA), one(0, 0, true),
				claimE(0, writerB), claimE(0, writerA), one(3, 1, true), one(2, 1, true)},
			groups: []string{"@1-1[0=r0]", "@5-5[1=r1]"},
			epoch:  2, next: 2, clean: true,
		},
		{
			name: "a pointer of the epoch in force landing late, after a group, breaks the run",
			es: []entry{claimE(noEpoch, writerA), one(0, 0, true), one(0, 1, true), ptrE(0, 1),
				claimE(0, writerA), one(4, 2, true)},
			groups:   []string{"@1-1[0=r0]", "@2-2[1=r1]", "@5-5[2=r2]"},
			pointers: nil,
			epoch:    4, next: 3, clean: true, dropped: 1,
		},
		{
			name: "a fenced writer's records between a group's do not break it",
			es: []entry{claimE(noEpoch, writerA), claimE(0, writerB), one(1, 0, false), one(0, 0, true),
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
	es := []entry{claimE(noEpoch, writerA), one(0, 0, true), one(0, 1, true), ptrE(0, 2), one(0, 2, false), one(0, 3, true),
		claimE(0, writerB), one(0, 4, true), one(6, 4, true)}
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
	good := claimE(noEpoch, writerA)
	for name, e := range map[string]entry{
		"foreign key":        {[]byte("some-key"), []byte("v")},
		"no key":             {nil, []byte("v")},
		"old version":        {append([]byte("DM\x01"), make([]byte, 17)...), nil},
		"short key":          {good.key[:keySize-1], good.value},
		"claim value":        {good.key, []byte{claimVersion, 1, 2}},
		"claim version":      {good.key, append([]byte{9}, good.value[1:]...)},
		"pointer value":      {ptrE(0, 0).key, []byte{pointerVersion, 0, 9, 'x'}},
		"unknown kind":       {recordKey{kind: 7, parts: 1}.appendTo(nil), nil},
		"negative index":     {recordKey{kind: kindRecord, index: -1, parts: 1}.appendTo(nil), []byte("x")},
		"part past parts":    {recordKey{kind: kindRecord, part: 2, parts: 2}.appendTo(nil), []byte("x")},
		"record of no epoch": {recordKey{kind: kindRecord, epoch: noEpoch, parts: 1}.appendTo(nil), []byte("x")},
		"flags on a claim":   {recordKey{kind: kindClaim, epoch: noEpoch, parts: 1, flags: 1}.appendTo(nil), good.value},
		"pointer version 2":  {ptrE(0, 0).key, []byte{2, 0, 1, 'x'}},
		"key version 2":      {append([]byte("DM\x02"), good.key[3:]...), good.value},
		"unknown flag":       {recordKey{kind: kindRecord, parts: 1, flags: 2}.appendTo(nil), []byte("x")},
	} {
		t.Run(name, func(t *testing.T) {
			r := runScan(fromLogStart(0, "test"), 0, []entry{good, e})
			if !errors.Is(r.err, metalog.ErrCorrupt) {
				t.Fatalf("%v, want ErrCorrupt", r.err)
			}
		})
	}
}

// refScan is the validity rule as docs/format/metadata-records.md §The
// Kafka backend states it, written apart from the scanner, as FuzzScan's
// oracle: the partition is cut at the effective claims (each naming the
// epoch in force: the offset of the effective claim before it, −1 before
// the first), and in each part the records and pointers of its epoch are
// parsed as pointers at the next index and whole groups from it, up to
// the first that does not parse; a group the part ends inside is torn.
// Every entry must decode.
func refScan(es []entry) scanResult {
	type item struct {
		off int64
		k   recordKey
		v   []byte
	}
	keys := make([]recordKey, len(es))
	var cuts []int // the effective claims
	epoch := int64(noEpoch)
	for i, e := range es {
		k, err := decodeKey(e.key)
		if err != nil {
			panic(err)
		}
		keys[i] = k
		if k.kind == kindClaim && k.epoch == epoch {
			cuts = append(cuts, i)
			epoch = int64(i)
		}
	}
	var r scanResult
	r.st = scanState{epoch: noEpoch}
	r.clean = true
	for j, c := range cuts {
		end := len(es)
		if j+1 < len(cuts) {
			end = cuts[j+1]
		}
		cl, _ := decodeClaim(es[c].value)
		r.st.epoch, r.st.owner, r.st.ownerKnown, r.st.broken = int64(c), cl.writer, true, false
		var items []item
		for i := c + 1; i < end; i++ {
			if k := keys[i]; k.kind != kindClaim && k.epoch == int64(c) {
				items = append(items, item{int64(i), k, es[i].value})
			}
		}
		torn := false
	parse:
		for i := 0; i < len(items); {
			if items[i].k.kind == kindSnapshot {
				if items[i].k.index != r.st.next {
					r.st.broken = true
					break
				}
				r.pointers = append(r.pointers, r.st.next)
				i++
				continue
			}
			// One group: records next, next+1, …, each parts 0 … n−1, the
			// group-end flag on the last part of its last record only.
			var recs []string
			for g := i; ; {
				if g == len(items) {
					torn = true
					break parse
				}
				idx := r.st.next + int64(len(recs))
				first := items[g].k
				var body []byte
				for part := uint32(0); part < first.parts; part++ {
					if g == len(items) {
						torn = true
						break parse
					}
					k := items[g].k
					if k.kind != kindRecord || k.index != idx || k.part != part || k.parts != first.parts ||
						k.flags&flagGroupEnd != 0 && part != first.parts-1 {
						r.st.broken = true
						break parse
					}
					body = append(body, items[g].v...)
					g++
				}
				recs = append(recs, fmt.Sprintf("%d=%s", idx, body))
				if items[g-1].k.flags&flagGroupEnd != 0 {
					r.groups = append(r.groups, fmt.Sprintf("@%d-%d[%s]", items[i].off, items[g-1].off, strings.Join(recs, " ")))
					r.st.next += int64(len(recs))
					i = g
					break
				}
			}
		}
		r.clean = !r.st.broken && !torn
	}
	return r
}

// FuzzScan: the scanner delivers what refScan, the rule written apart,
// does — the same groups, pointers, epoch, owner, next index, whether it
// stands clean — for partitions of claims naming live and stale epochs by
// two writers, records and pointers of any of those epochs at and around
// the next index, whole and in parts; a scan from any counted pointer, or
// from a log truncated before it, agrees with the scan from offset 0; and
// an undecodable key is ErrCorrupt at its offset, after the same
// deliveries as before it.
func FuzzScan(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0x09, 3, 1, 1, 0x0a, 0, 1, 1, 0x09})
	f.Add([]byte{0, 0, 1, 0x08, 1, 0x09, 3, 0x01, 0, 0x21, 1, 0x29})                // a pointer, a continuation
	f.Add([]byte{0, 0, 2, 0x01, 2, 0x19, 0, 0x02, 2, 0x09, 2, 0x19})                // parts; a takeover by B
	f.Add([]byte{0, 0, 1, 0x08, 0, 0x00, 1, 0x09, 3, 0x01, 1, 0x08, 5, 0xff})       // a late claim naming −1; garbage
	f.Add([]byte{0, 0, 1, 0x09, 3, 0x01, 3, 0x01, 1, 0x09, 0, 0x21, 3, 0x2a, 1, 9}) // a pointer twice at one index
	f.Fuzz(func(t *testing.T, ops []byte) {
		var es []entry
		var claims []int64
		owners := map[int64][16]byte{}
		nx := int64(0) // where the generator guesses the next index is
		garbage := -1
		for i := 0; i+1 < len(ops); i += 2 {
			b := ops[i+1]
			ep := int64(0)
			if len(claims) > 0 {
				ep = claims[len(claims)-1-int(b>>5)%len(claims)] // mostly the latest
			}
			near := max(0, nx+int64(b&3)-1)
			switch ops[i] % 6 {
			case 0:
				named := int64(noEpoch)
				if b&1 != 0 && len(claims) > 0 {
					named = ep
				}
				w := writerA
				if b&2 != 0 {
					w = writerB
				}
				owners[int64(len(es))] = w
				claims = append(claims, int64(len(es)))
				es = append(es, claimE(named, w))
			case 1:
				es = append(es, one(ep, near, b&8 != 0))
				nx = near + 1
			case 2:
				part := uint32(b >> 4 % 2)
				es = append(es, recE(ep, near, part, 2, b&8 != 0, fmt.Sprint("p", part)))
				if part == 1 {
					nx = near + 1
				}
			case 3:
				e := ptrE(ep, near)
				e.value = pointer{writer: owners[ep], key: "k"}.appendValue(nil)
				es = append(es, e)
			case 4:
				es = append(es, one(ep, near, true))
				nx = near + 1
			case 5:
				if garbage < 0 {
					garbage = len(es)
				}
				es = append(es, entry{[]byte{b}, nil})
			}
		}
		valid := es
		if garbage >= 0 {
			valid = es[:garbage]
		}
		want := refScan(valid)
		got := runScan(fromLogStart(0, "fuzz"), 0, es)
		if garbage >= 0 {
			var pe *scanResult
			if !errors.Is(got.err, metalog.ErrCorrupt) || !strings.Contains(got.err.Error(), fmt.Sprintf("offset %d:", garbage)) {
				t.Fatalf("garbage at offset %d: %v, want ErrCorrupt there", garbage, got.err)
			}
			pe = &got
			pe.st, pe.clean = want.st, want.clean // the state where the scan stopped is not compared
		} else if got.err != nil {
			t.Fatal(got.err)
		}
		if !slices.Equal(got.groups, want.groups) || !slices.Equal(got.pointers, want.pointers) || got.st.epoch != want.st.epoch ||
			got.st.next != want.st.next || got.clean != want.clean || got.st.ownerKnown != want.st.ownerKnown ||
			got.st.owner != want.st.owner {
			t.Fatalf("scanner: groups %v pointers %v epoch %d next %d clean %v\noracle:  groups %v pointers %v epoch %d next %d clean %v",
				got.groups, got.pointers, got.st.epoch, got.st.next, got.clean,
				want.groups, want.pointers, want.st.epoch, want.st.next, want.clean)
		}
		// Starts at every counted pointer agree with the scan from 0.
		var ptrs []pointer
		var before []int // groups delivered before each pointer
		sc := fromLogStart(0, "fuzz")
		ng := 0
		sc.group = func([]pendingRecord, int64, int64) error { ng++; return nil }
		sc.pointerSeen = func(p pointer) { ptrs = append(ptrs, p); before = append(before, ng) }
		for i, e := range valid {
			if err := sc.add(int64(i), e.key, e.value); err != nil {
				t.Fatal(err)
			}
		}
		for j, p := range ptrs {
			for name, start := range map[string]*scanner{"pointer": fromPointer(p, "fuzz"), "truncated log": fromLogStart(p.offset, "fuzz")} {
				r := runScan(start, p.offset, valid[p.offset:])
				if r.err != nil || !slices.Equal(r.groups, want.groups[before[j]:]) || r.st.epoch != want.st.epoch ||
					r.st.next != want.st.next || r.clean != want.clean || r.st.owner != want.st.owner {
					t.Fatalf("from the %s at offset %d: %+v\nfrom 0: %+v", name, p.offset, r, want)
				}
			}
		}
	})
}
