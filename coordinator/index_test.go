package coordinator

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// checkIndex compares x with want, a flat copy of what it should hold, and
// the running maxima with ones recomputed from ts (each entry's effective
// max timestamp).
func checkIndex(t *testing.T, step string, x *runIndex, want []runEntry, ts func(*runEntry) int64) {
	t.Helper()
	if x.len() != len(want) {
		t.Fatalf("%s: len %d, want %d", step, x.len(), len(want))
	}
	running := int64(math.MinInt64)
	for i := range want {
		e := *x.at(i)
		running = max(running, ts(&want[i]))
		if got := x.prefixMaxTs(i); got != running {
			t.Fatalf("%s: prefixMaxTs(%d) = %d, want %d", step, i, got, running)
		}
		e.prefixMaxTs, want[i].prefixMaxTs = 0, 0
		if e != want[i] {
			t.Fatalf("%s: entry %d = %+v, want %+v", step, i, e, want[i])
		}
	}
	for i := 0; i < len(want); {
		run := x.slice(i, len(want))
		if len(run) == 0 || &run[0] != x.at(i) {
			t.Fatalf("%s: run(%d) of %d entries does not start at entry %d", step, i, len(run), i)
		}
		i += len(run)
	}
	for k, ch := range x.chunks {
		if k < len(x.chunks)-1 && len(ch.entries) != indexChunkLen || cap(ch.entries) > indexChunkLen {
			t.Fatalf("%s: chunk %d of %d has %d entries, capacity %d", step, k, len(x.chunks), len(ch.entries), cap(ch.entries))
		}
		es := ch.entries
		if k == 0 {
			es = es[x.head:]
		}
		own := int64(math.MinInt64)
		for i := range es {
			own = max(own, ts(&es[i]))
		}
		if ch.maxTs != own {
			t.Fatalf("%s: chunk %d of %d has maxTs %d, its entries' largest is %d", step, k, len(x.chunks), ch.maxTs, own)
		}
	}
	checkView(t, step, x.freeze(), want)
}

func checkView(t *testing.T, step string, v indexView, want []runEntry) {
	t.Helper()
	i := 0
	for es := range v.chunks {
		for _, e := range es {
			if i >= len(want) || e.baseOffset != want[i].baseOffset || e.file != want[i].file || e.maxTimestamp != want[i].maxTimestamp {
				t.Fatalf("%s: frozen entry %d = %+v", step, i, e)
			}
			i++
		}
	}
	if i != len(want) || v.n != len(want) {
		t.Fatalf("%s: frozen view has %d (n %d) entries, want %d", step, i, v.n, len(want))
	}
}

// TestIndexMatchesSlice runs random appends and front drops — within a
// chunk, at chunk boundaries, across several chunks, of everything — on a
// chunked index and on a flat slice, and checks they hold the same
// entries, running maxima, chunk maxima and searches after every step
// (the searches from an entry every 10th), and that views frozen earlier
// keep what they had.
func TestIndexMatchesSlice(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	var (
		x    runIndex
		want []runEntry
		next int64
	)
	ts := func(e *runEntry) int64 { return e.maxTimestamp }
	type frozen struct {
		v    indexView
		want []runEntry
	}
	var views []frozen
	push := func(n int) {
		for range n {
			// Mostly rising timestamps with outliers both ways, so that
			// drops change the running maxima.
			e := runEntry{baseOffset: next, lastOffsetDelta: int32(r.IntN(3)), file: int32(next / 100),
				byteSize: 1, maxTimestamp: next + int64(r.IntN(200)) - 100}
			if r.IntN(500) == 0 {
				e.maxTimestamp += 1_000_000
			}
			next = e.lastOffset() + 1
			x.push(e, ts(&e))
			want = append(want, e)
		}
	}
	drop := func(k int) {
		x.dropFront(k, ts)
		want = append([]runEntry(nil), want[k:]...)
	}
	steps := []struct {
		name string
		do   func()
	}{
		{"push a few", func() { push(1 + r.IntN(10)) }},
		{"push a chunk and more", func() { push(indexChunkLen + r.IntN(indexChunkLen)) }},
		{"drop a few", func() {
			if len(want) > 0 {
				drop(1 + r.IntN(min(len(want), 10)))
			}
		}},
		{"drop to a chunk boundary", func() {
			if k := indexChunkLen - x.head; len(want) > k {
				drop(k)
			}
		}},
		{"drop across chunks", func() {
			if len(want) > 0 {
				drop(1 + r.IntN(len(want)))
			}
		}},
		{"drop everything", func() {
			if len(want) > 0 && r.IntN(4) == 0 {
				drop(len(want))
			}
		}},
		{"freeze", func() { views = append(views, frozen{x.freeze(), append([]runEntry(nil), want...)}) }},
	}
	for i := range 300 {
		s := steps[r.IntN(len(steps))]
		s.do()
		step := s.name
		checkIndex(t, step, &x, append([]runEntry(nil), want...), ts)
		for _, f := range views {
			checkView(t, step+" (earlier view)", f.v, f.want)
		}
		checkSearches(t, fmt.Sprintf("step %d %s", i, step), &x, want, ts, r)
		if i%10 == 0 {
			checkSearchesFrom(t, fmt.Sprintf("step %d %s", i, step), &x, want, ts, r)
		}
	}
}

// checkSearches compares the index's searches over prefixes of x (the
// published part) with linear scans of want.
func checkSearches(t *testing.T, step string, x *runIndex, want []runEntry, ts func(*runEntry) int64, r *rand.Rand) {
	t.Helper()
	if len(want) == 0 {
		if x.searchOffset(0, 5) != 0 || x.searchTimestamp(0, 5) != 0 {
			t.Fatalf("%s: search of an empty index", step)
		}
		return
	}
	for range 20 {
		n := len(want)
		if r.IntN(2) == 0 {
			n = r.IntN(len(want) + 1)
		}
		o := want[0].baseOffset + r.Int64N(want[len(want)-1].lastOffset()-want[0].baseOffset+2) - 1
		wantI := n
		for j, e := range want[:n] {
			if e.lastOffset() >= o {
				wantI = j
				break
			}
		}
		if got := x.searchOffset(n, o); got != wantI {
			t.Fatalf("%s: searchOffset(%d, %d) = %d, want %d", step, n, o, got, wantI)
		}
		if got := x.search(n, func(e *runEntry) bool { return e.lastOffset() >= o }); got != wantI {
			t.Fatalf("%s: search(%d, last offset ≥ %d) = %d, want %d", step, n, o, got, wantI)
		}
		target := ts(&want[r.IntN(len(want))]) + r.Int64N(3) - 1
		wantI, running := n, int64(math.MinInt64)
		for j := range want[:n] {
			running = max(running, ts(&want[j]))
			if running >= target {
				wantI = j
				break
			}
		}
		if got := x.searchTimestamp(n, target); got != wantI {
			t.Fatalf("%s: searchTimestamp(%d, %d) = %d, want %d", step, n, target, got, wantI)
		}
	}
}

// checkSearchesFrom compares searchTimestampFrom and searchMaxFrom with
// linear scans of want, from entries at and around chunk boundaries, the
// ends and random places, over the whole index and random prefixes of it.
func checkSearchesFrom(t *testing.T, step string, x *runIndex, want []runEntry, ts func(*runEntry) int64, r *rand.Rand) {
	t.Helper()
	if len(want) == 0 {
		if x.searchTimestampFrom(0, 0, 5, ts) != 0 {
			t.Fatalf("%s: searchTimestampFrom of an empty index", step)
		}
		return
	}
	// Entry i sits at slot (head+i)&indexChunkMask: the entries around
	// a few chunks' first slots, and the first and last few.
	var bounds []int
	for b := indexChunkLen - x.head; b-1 < len(want); b += indexChunkLen {
		bounds = append(bounds, b)
	}
	var froms []int
	for range min(len(bounds), 3) {
		b := bounds[r.IntN(len(bounds))]
		froms = append(froms, b-1, b, b+1)
	}
	froms = append(froms, 0, 1, 2, len(want)-2, len(want)-1, len(want))
	for range 4 {
		froms = append(froms, r.IntN(len(want)+1))
	}
	for _, i := range froms {
		if i < 0 || i > len(want) {
			continue
		}
		for _, n := range []int{len(want), i + r.IntN(len(want)-i+1)} {
			if n < i {
				continue
			}
			if n > i {
				wantJ := i
				for j := i + 1; j < n; j++ {
					if ts(&want[j]) > ts(&want[wantJ]) {
						wantJ = j
					}
				}
				if got := x.searchMaxFrom(i, n, ts); got != wantJ {
					t.Fatalf("%s: searchMaxFrom(%d, %d) = %d, want %d (timestamp %d)", step, i, n, got, wantJ, ts(&want[wantJ]))
				}
			}
			targets := []int64{math.MinInt64, math.MaxInt64}
			for range 3 {
				targets = append(targets, ts(&want[r.IntN(len(want))])+r.Int64N(3)-1)
			}
			if i < len(want) {
				targets = append(targets, ts(&want[i]), ts(&want[i])+1)
			}
			for _, target := range targets {
				wantJ := n
				for j := i; j < n; j++ {
					if ts(&want[j]) >= target {
						wantJ = j
						break
					}
				}
				if got := x.searchTimestampFrom(i, n, target, ts); got != wantJ {
					t.Fatalf("%s: searchTimestampFrom(%d, %d, %d) = %d, want %d", step, i, n, target, got, wantJ)
				}
			}
		}
	}
}

// TestIndexSearchesFrom runs random appends and front drops on indexes of
// several chunks whose timestamps follow different shapes — random within
// a small range (many ties), rising with outliers, falling (every prefix
// before an entry already holds the largest), constant — and compares the
// searches from an entry (searchTimestampFrom, searchMaxFrom) with linear
// scans after every step, also on an index rebuilt by pushing the same
// entries again, as a snapshot load does.
func TestIndexSearchesFrom(t *testing.T) {
	shapes := []struct {
		name string
		ts   func(r *rand.Rand, i int64) int64
	}{
		{"random, many ties", func(r *rand.Rand, _ int64) int64 { return r.Int64N(50) }},
		{"rising with outliers", func(r *rand.Rand, i int64) int64 {
			if r.IntN(300) == 0 {
				return i + 1_000_000
			}
			return i + r.Int64N(200) - 100
		}},
		{"falling", func(r *rand.Rand, i int64) int64 { return 1_000_000 - i - r.Int64N(3) }},
		{"constant", func(*rand.Rand, int64) int64 { return 7 }},
	}
	for si, shape := range shapes {
		t.Run(shape.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(si), 13))
			var (
				x    runIndex
				want []runEntry
				next int64
			)
			ts := func(e *runEntry) int64 { return e.maxTimestamp }
			push := func(n int) {
				for range n {
					e := runEntry{baseOffset: next, lastOffsetDelta: int32(r.IntN(3)), byteSize: 1, maxTimestamp: shape.ts(r, next)}
					next = e.lastOffset() + 1
					x.push(e, ts(&e))
					want = append(want, e)
				}
			}
			drop := func(k int) {
				if k > 0 {
					x.dropFront(k, ts)
					want = append([]runEntry(nil), want[k:]...)
				}
			}
			push(5*indexChunkLen + r.IntN(indexChunkLen))
			for step := range 30 {
				switch r.IntN(5) {
				case 0:
					push(1 + r.IntN(20))
				case 1:
					push(indexChunkLen/2 + r.IntN(indexChunkLen))
				case 2:
					drop(r.IntN(min(len(want), 30)))
				case 3:
					if k := indexChunkLen - x.head; len(want) > k {
						drop(k) // onto a chunk boundary
					}
				case 4:
					if len(want) > 2*indexChunkLen {
						drop(r.IntN(len(want) - indexChunkLen)) // across chunks
					}
				}
				name := fmt.Sprintf("step %d, %d entries from slot %d", step, len(want), x.head)
				checkIndex(t, name, &x, append([]runEntry(nil), want...), ts)
				checkSearchesFrom(t, name, &x, want, ts, r)
				var again runIndex
				for i := range want {
					again.push(want[i], ts(&want[i]))
				}
				checkSearchesFrom(t, name+", rebuilt", &again, want, ts, r)
			}
		})
	}
}

// TestIndexEntriesNeverMove: past the first chunk, appending never moves
// an entry (no copy of the index under the shard lock, whatever its size),
// and dropping chunks releases them.
func TestIndexEntriesNeverMove(t *testing.T) {
	var x runIndex
	push := func(n int) {
		for range n {
			x.push(runEntry{baseOffset: int64(x.len()), byteSize: 1}, 0)
		}
	}
	push(indexChunkLen + 1)
	first, second := x.at(0), x.at(indexChunkLen)
	push(64 * indexChunkLen)
	if x.at(0) != first || x.at(indexChunkLen) != second {
		t.Fatal("appending moved entries")
	}
	x.dropFront(40*indexChunkLen+3, func(*runEntry) int64 { return 0 })
	if len(x.chunks) != 26 || x.head != 3 || cap(x.chunks) > 2*len(x.chunks) {
		t.Fatalf("after the drop: %d chunks (capacity %d), head %d", len(x.chunks), cap(x.chunks), x.head)
	}
}

// TestLargePartitionReads checks FindBatches, ListOffsets by timestamp,
// ListOffsetsFrom and retention's arithmetic against brute force on a partition spanning
// several index chunks, with CreateTime and LogAppendTime batches, after
// log start moves inside a chunk, onto a chunk boundary and across
// chunks, and after a snapshot round trip.
func TestLargePartitionReads(t *testing.T) {
	const files, perFile = 28, 1000 // about 14,000 runs: 3.5 chunks
	r := rand.New(rand.NewPCG(3, 5))
	st := newState(0, DefaultProducerIDExpirationMs, discardLogger())
	tid := diskless.TopicID{1}
	tp := diskless.TopicPartition{TopicID: tid, Partition: 0}
	if err := st.apply(&records.PartitionCreated{TopicID: tid, TopicName: "t"}); err != nil {
		t.Fatal(err)
	}
	// The expected runs: batches of one file, adjacent in it and of one
	// timestamp type, make one (runEntry); half the batches fill their
	// 100 bytes, so runs of several batches are common.
	type ref struct {
		base, last, eff int64
		size            int32
		file, end       int
		tsType          int8
	}
	var all []ref
	prevType := batch.TimestampCreateTime
	for f := range files {
		appendTime := int64(1000 + 10*f)
		var bs []records.CommittedBatch
		hwm := st.partitions[tp].hwm
		for i := range perFile {
			size := int32(100)
			if r.IntN(2) == 0 {
				size = 61 + r.Int32N(39)
			}
			b := records.CommittedBatch{Magic: 2, ByteOffset: int32(i) * 100, ByteSize: size,
				AssignedBaseOffset: hwm, AssignedLastOffset: hwm + r.Int64N(4), LogAppendTimestamp: appendTime,
				BatchMaxTimestamp: appendTime - 500 + r.Int64N(1000), TimestampType: batch.TimestampCreateTime, ProducerID: -1}
			// The timestamp type changes now and then (a topic config
			// change), so that consolidation below finds groups of runs
			// of one type.
			if tsType := prevType; r.IntN(40) == 0 {
				prevType = 1 - tsType
			}
			b.TimestampType = prevType
			if r.IntN(2000) == 0 {
				b.BatchMaxTimestamp = 1 << 40 // one far-future outlier dominates the maxima until it goes
			}
			hwm = b.AssignedLastOffset + 1
			bs = append(bs, b)
			eff := effectiveMaxTs(b.TimestampType, b.BatchMaxTimestamp, appendTime)
			if n := len(all); n > 0 && all[n-1].file == f && all[n-1].end == int(b.ByteOffset) && all[n-1].tsType == b.TimestampType {
				prev := &all[n-1]
				prev.last, prev.eff, prev.size, prev.end = b.AssignedLastOffset, max(prev.eff, eff), prev.size+b.ByteSize, int(b.ByteOffset+b.ByteSize)
				continue
			}
			all = append(all, ref{b.AssignedBaseOffset, b.AssignedLastOffset, eff, b.ByteSize, f, int(b.ByteOffset + b.ByteSize), b.TimestampType})
		}
		rec := &records.FileCommitted{ObjectKey: nextKey(), ObjectFormat: 1, FileSize: 1 << 20, OwnerIDs: []int32{0},
			Topics: []records.FileTopic{{TopicID: tid, Partitions: []records.FilePartition{{Batches: bs}}}}}
		if err := st.apply(rec); err != nil {
			t.Fatal(err)
		}
	}
	check := func(step string, st *state) {
		t.Helper()
		p := st.partitions[tp]
		p.visible, p.visHWM, p.visLogStart = true, p.hwm, p.logStart
		live := all
		for len(live) > 0 && live[0].last < p.logStart {
			live = live[1:]
		}
		var bytes int64
		for _, b := range live {
			bytes += int64(b.size)
		}
		if p.bytes != bytes || len(p.segs)+p.runs.len() != len(live) {
			t.Fatalf("%s: %d bytes in %d segments and %d runs, want %d in %d", step, p.bytes, len(p.segs), p.runs.len(), bytes, len(live))
		}
		if p.hwm == p.logStart {
			return
		}
		for range 200 {
			o := p.logStart + r.Int64N(p.hwm-p.logStart)
			maxBytes := r.Int32N(3000)
			res := st.findBatches(p, o, maxBytes, false)
			i := 0
			for live[i].last < o {
				i++
			}
			// The run holding o, then runs until they and the part of the
			// first from o on add up to maxBytes.
			n, added := 1, diskless.ServedEstimate(live[i].base, live[i].last, live[i].size, o)
			for i+n < len(live) && added < int64(maxBytes) {
				added += int64(live[i+n].size)
				n++
			}
			if res.Err != nil || len(res.Runs) != n || res.Runs[0].BaseOffset != live[i].base {
				t.Fatalf("%s: FindBatches(%d, %d) = %d runs from %+v, want %d from %d", step, o, maxBytes, len(res.Runs), res.Runs[0], n, live[i].base)
			}
			for _, ts := range []int64{r.Int64N(1200), 1000 + r.Int64N(200), diskless.ListOffsetsMaxTimestamp} {
				target := ts
				if ts == diskless.ListOffsetsMaxTimestamp {
					target = math.MinInt64
					for _, b := range live {
						target = max(target, b.eff)
					}
				}
				want := -1
				for j, b := range live {
					if b.eff >= target {
						want = j
						break
					}
				}
				lo := st.listOffsets(p, ts)
				switch {
				case want < 0 && lo.Candidate != nil:
					t.Fatalf("%s: ListOffsets(%d) = %d, want none", step, ts, lo.Candidate.BaseOffset)
				case want >= 0 && (lo.Candidate == nil || lo.Candidate.BaseOffset != live[want].base):
					t.Fatalf("%s: ListOffsets(%d) = %+v, want %d", step, ts, lo.Candidate, live[want].base)
				}
			}
			// ListOffsetsFrom: the same over the batches holding an offset
			// ≥ from, from anywhere in (and just outside) the partition.
			from := p.logStart - 2 + r.Int64N(p.hwm-p.logStart+4)
			if r.IntN(4) == 0 {
				from = live[r.IntN(len(live))].base // a batch boundary, as fetch asks
			}
			after := live
			for len(after) > 0 && after[0].last < from {
				after = after[1:]
			}
			for _, ts := range []int64{r.Int64N(1200), 1000 + r.Int64N(200), diskless.ListOffsetsMaxTimestamp} {
				want := -1
				for j, b := range after {
					if ts == diskless.ListOffsetsMaxTimestamp && (want < 0 || b.eff > after[want].eff) ||
						ts != diskless.ListOffsetsMaxTimestamp && b.eff >= ts {
						want = j
						if ts != diskless.ListOffsetsMaxTimestamp {
							break
						}
					}
				}
				lo := st.listOffsetsFrom(p, ts, from)
				switch {
				case lo.Err != nil || lo.Offset != -1 || lo.LogStartOffset != p.logStart || lo.HighWatermark != p.hwm:
					t.Fatalf("%s: ListOffsetsFrom(%d, %d) = %+v", step, ts, from, lo)
				case want < 0 && lo.Candidate != nil:
					t.Fatalf("%s: ListOffsetsFrom(%d, %d) = %d, want none", step, ts, from, lo.Candidate.BaseOffset)
				case want >= 0 && (lo.Candidate == nil || lo.Candidate.BaseOffset != after[want].base):
					t.Fatalf("%s: ListOffsetsFrom(%d, %d) = %+v, want %d", step, ts, from, lo.Candidate, after[want].base)
				}
			}
		}
	}
	check("full", st)
	p := st.partitions[tp]
	if n := p.runs.len(); n < 3*indexChunkLen || n > 16_000 {
		t.Fatalf("%d runs of 28,000 batches, want about 14,000", n)
	}
	// Consolidation: segments replace the first runs, up to 100 runs of
	// one timestamp type each (record 114 as consolidation builds it), in
	// the index and in the reference.
	for len(p.segs) < 60 {
		x := &p.runs
		first := x.at(0)
		k, size := 0, int32(0)
		maxTs, appendTime := int64(math.MinInt64), int64(math.MinInt64)
		for k < 100 && k < x.len() && x.at(k).tsType == first.tsType {
			e := x.at(k)
			size += e.byteSize
			maxTs, appendTime = max(maxTs, e.maxTimestamp), max(appendTime, st.files[e.file].appendTime)
			k++
		}
		rec := &records.SegmentCommitted{ObjectKey: nextKey(), ObjectFormat: 2, FileSize: int64(size) + 36 + 64, TopicID: tid,
			BaseOffset: first.baseOffset, LastOffset: x.at(k - 1).lastOffset(), DataSize: size, IndexEntries: 1,
			MaxTimestamp: maxTs, AppendTime: appendTime, TimestampType: first.tsType, ReplacedRuns: int32(k),
			CommitTimestamp: st.lastAppendTime}
		if err := st.apply(rec); err != nil {
			t.Fatal(err)
		}
		ns := len(p.segs) - 1
		seg := ref{base: rec.BaseOffset, last: rec.LastOffset, eff: math.MinInt64, size: size, file: -1, tsType: first.tsType}
		for _, r := range all[ns : ns+k] {
			seg.eff = max(seg.eff, r.eff)
		}
		all = slices.Concat(all[:ns], []ref{seg}, all[ns+k:])
	}
	check("segments", st)
	for _, move := range []struct {
		name string
		to   func() int64
	}{
		{"inside the first segment", func() int64 { return p.segs[0].baseOffset + 1 }},
		{"onto a segment boundary", func() int64 { return p.segs[5].baseOffset }},
		{"inside the last segment", func() int64 { return p.segs[len(p.segs)-1].lastOffset }},
		{"inside the first chunk", func() int64 { return p.runs.at(10).baseOffset + 1 }},
		{"onto a chunk boundary", func() int64 { return p.runs.at(indexChunkLen - p.runs.head).baseOffset }},
		{"across chunks", func() int64 { return p.runs.at(indexChunkLen + 77).baseOffset }},
		{"to the high watermark", func() int64 { return p.hwm }},
	} {
		if err := st.apply(&records.RecordsDeleted{TopicID: tid, NewLogStartOffset: move.to()}); err != nil {
			t.Fatal(err)
		}
		check(move.name, st)
		snap := st.appendSnapshot(nil)
		again := newState(0, DefaultProducerIDExpirationMs, discardLogger())
		if err := again.decodeSnapshot(snap); err != nil {
			t.Fatalf("%s: %v", move.name, err)
		}
		if string(again.appendSnapshot(nil)) != string(snap) {
			t.Fatalf("%s: snapshot does not round-trip", move.name)
		}
		if p.hwm > p.logStart {
			check(move.name+", from a snapshot", again)
		}
	}
}
