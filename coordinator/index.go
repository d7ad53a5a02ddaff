package coordinator

import (
	"math"
	"slices"
	"sort"
)

// Partition index layout. A partition's batch entries live in fixed-size
// chunks rather than one growing slice, so that appending never copies
// the index (a doubling slice of 48-byte entries copies all of it at
// every regrowth, under the shard lock: 192 MB at 4M batches) and
// retention frees whole chunks instead of keeping a dropped prefix until
// the next regrowth. BenchmarkCommitIntoIndex shows the append cost not
// growing with the index; TestIndexEntriesNeverMove pins the layout.
const (
	// indexChunkShift makes chunks of 2^8 = 256 entries (12 KiB): a
	// chunk's allocation is a negligible part of a commit, a 1M-run index
	// is 3,907 chunk headers (48 bytes each), cheap to clone on a log
	// start move, and — what decides it since consolidation keeps a
	// partition's WAL runs a sliding window of minutes (DESIGN
	// §Consolidation) — a dropped prefix is held only until its chunk
	// goes: at most a chunk per partition, 12 KiB, where 4096-entry
	// chunks held up to 196 KiB per partition (BenchmarkSoak: 377 MiB
	// of a 1,000-partition shard's heap).
	indexChunkShift = 8
	indexChunkLen   = 1 << indexChunkShift
	indexChunkMask  = indexChunkLen - 1
	// indexFirstChunkCap is the capacity a partition's first chunk starts
	// at; it doubles up to indexChunkLen, so that the many small
	// partitions of a shard do not each take a full chunk.
	indexFirstChunkCap = 8
)

// runIndex is a partition's batches in offset order: entry i (0-based
// from the log start) is at position head+i of the concatenated chunks.
// Every chunk but the last is full (indexChunkLen entries), so a position
// maps to its chunk and slot by shift and mask.
//
// Sharing with frozen copies (snapshots, see freeze): once an entry is in
// a chunk its encoded fields never change; a chunk's entries field is
// written only while it is the last chunk (appends, and the first chunk's
// growth); dropping chunks clones the chunk slice rather than re-slicing
// or clearing it. Otherwise only the prefixMaxTs, maxTs and lastOffset
// fields are written, which the snapshot does not read.
//
// The timestamp summaries are derived, never stored: push and dropFront
// keep them, and a snapshot load rebuilds them by pushing every entry
// again (with head 0, so chunk boundaries may move; the searches do not
// depend on where they fall).
type runIndex struct {
	// chunks holds the chunks by value: a lookup loads the entries'
	// address from this array directly (BenchmarkFindBatches).
	chunks []indexChunk
	// head is the slot in chunks[0] of entry 0; entries before it were
	// dropped by a log start move.
	head int
	// n is the number of entries.
	n int
}

// indexChunk is one chunk of a runIndex.
type indexChunk struct {
	// entries has at most indexChunkLen entries; only the last chunk of
	// an index grows.
	entries []runEntry
	// prefixMaxTs is the largest effective max timestamp of the chunk's
	// entries and of all entries before them in the index.
	prefixMaxTs int64
	// maxTs is the largest effective max timestamp of the chunk's own
	// entries (the first chunk's from head on): its last entry's in-chunk
	// prefixMaxTs, kept here so that the searches from an entry
	// (searchTimestampFrom, searchMaxFrom) read one summary per chunk
	// from this array instead of an entry in each chunk. 8 bytes per
	// chunk of indexChunkLen entries.
	maxTs int64
	// lastOffset is the last offset of the chunk's last entry, so that
	// searches pick a chunk without touching the entries of others.
	lastOffset int64
}

func (x *runIndex) len() int { return x.n }

// at returns entry i, 0 ≤ i < len.
func (x *runIndex) at(i int) *runEntry {
	pos := x.head + i
	return &x.chunks[pos>>indexChunkShift].entries[pos&indexChunkMask]
}

// slice returns the entries from i up to end (exclusive) or the end of i's
// chunk, whichever comes first; 0 ≤ i < end ≤ len. Loops over a range of
// the index take one run at a time.
func (x *runIndex) slice(i, end int) []runEntry {
	pos := x.head + i
	es := x.chunks[pos>>indexChunkShift].entries
	off := pos & indexChunkMask
	return es[off : off+min(len(es)-off, end-i)]
}

// prefixMaxTs returns the largest effective max timestamp of entries
// [0, i]: non-decreasing in i, so the first entry reaching a timestamp is
// found by binary search (SPEC §5).
func (x *runIndex) prefixMaxTs(i int) int64 {
	pos := x.head + i
	c := pos >> indexChunkShift
	v := x.chunks[c].entries[pos&indexChunkMask].prefixMaxTs
	if c > 0 {
		v = max(v, x.chunks[c-1].prefixMaxTs)
	}
	return v
}

// search returns the smallest i in [0, n) for which f(entry i) is true,
// or n; f must be false and then true along the index.
func (x *runIndex) search(n int, f func(*runEntry) bool) int {
	return sort.Search(n, func(i int) bool { return f(x.at(i)) })
}

// The searches below run in two steps: a binary search over the chunks'
// summaries (a few cache lines), then one within the chosen chunk. They
// back FindBatches and ListOffsets (BenchmarkFindBatches).

// lastChunk returns, for the first n entries (n > 0), the chunk holding
// entry n−1 and the slots [lo, hi) that chunk holds of them.
func (x *runIndex) lastChunk(n int) (c, lo, hi int) {
	end := x.head + n - 1
	c = end >> indexChunkShift
	if c == 0 {
		lo = x.head
	}
	return c, lo, end&indexChunkMask + 1
}

// pickChunk is the searches' first step, for the first n entries (n > 0):
// the first chunk, among the full ones before entry n−1's, whose summary
// is not below what is sought (below false), else entry n−1's; and the
// slots [lo, hi) of the first n entries that chunk holds.
func (x *runIndex) pickChunk(n int, below func(*indexChunk) bool) (c, lo, hi int) {
	last, lo, hi := x.lastChunk(n)
	c = sort.Search(last, func(i int) bool { return !below(&x.chunks[i]) })
	if c < last {
		lo, hi = 0, indexChunkLen
		if c == 0 {
			lo = x.head
		}
	}
	return c, lo, hi
}

// searchOffset returns the first i < n whose entry's last offset is ≥ o,
// or n: the entry holding offset o, the index being dense.
func (x *runIndex) searchOffset(n int, o int64) int {
	if n == 0 {
		return 0
	}
	c, lo, hi := x.pickChunk(n, func(ch *indexChunk) bool { return ch.lastOffset < o })
	es := x.chunks[c].entries[:hi]
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if es[m].lastOffset() < o {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return c<<indexChunkShift + lo - x.head
}

// searchTimestamp returns the first i < n whose prefix maximum
// (prefixMaxTs) is ≥ ts, or n: the first entry whose own effective max
// timestamp reaches ts.
func (x *runIndex) searchTimestamp(n int, ts int64) int {
	if n == 0 {
		return 0
	}
	// Every chunk before c stays below ts, so within c the in-chunk
	// prefix decides.
	c, lo, hi := x.pickChunk(n, func(ch *indexChunk) bool { return ch.prefixMaxTs < ts })
	return c<<indexChunkShift + x.firstReaching(c, lo, hi, ts) - x.head
}

// firstReaching returns the first slot in [lo, hi) of chunk c whose
// in-chunk prefixMaxTs is ≥ ts, or hi. That slot's entry is the first of
// [lo, hi) whose own effective max timestamp reaches ts when lo is where
// the chunk's prefix starts (0, or head in chunk 0) or the prefix at
// lo−1 is below ts.
func (x *runIndex) firstReaching(c, lo, hi int, ts int64) int {
	es := x.chunks[c].entries[:hi]
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if es[m].prefixMaxTs < ts {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// restOfChunk returns, for entry i < n, its chunk c, its slot, the slot
// where the chunk's in-chunk prefix starts (start: 0, or head in chunk
// 0), the end of the first n entries within c (end), and the chunk
// holding entry n−1 and its end slot (last, lastEnd).
func (x *runIndex) restOfChunk(i, n int) (c, slot, start, end, last, lastEnd int) {
	pos := x.head + i
	c, slot = pos>>indexChunkShift, pos&indexChunkMask
	last, _, lastEnd = x.lastChunk(n)
	if c == 0 {
		start = x.head
	}
	end = len(x.chunks[c].entries)
	if c == last {
		end = lastEnd
	}
	return c, slot, start, end, last, lastEnd
}

// searchTimestampFrom returns the first j in [i, n) whose entry's own
// effective max timestamp (effTs) is ≥ ts, or n; 0 ≤ i ≤ n ≤ len. This
// is the timestamp lookup of SPEC §5 restricted to the entries from i on.
//
// When no entry before i reaches ts, the running maxima answer it as
// searchTimestamp does, in O(log n). Otherwise they cannot (every prefix
// from i on already reaches ts), and it reads: the rest of i's chunk —
// by binary search when the in-chunk prefix before i is below ts, else
// entry by entry up to the first reaching ts, at most indexChunkLen
// calls of effTs — then one maxTs per following chunk, then a binary
// search in the first chunk whose maximum reaches ts: O(indexChunkLen +
// len/indexChunkLen) (BenchmarkListOffsetsFrom).
func (x *runIndex) searchTimestampFrom(i, n int, ts int64, effTs func(*runEntry) int64) int {
	if i >= n {
		return n
	}
	if i == 0 || x.prefixMaxTs(i-1) < ts {
		return x.searchTimestamp(n, ts)
	}
	c, slot, start, end, last, lastEnd := x.restOfChunk(i, n)
	base := -x.head
	if es := x.chunks[c].entries; es[end-1].prefixMaxTs >= ts {
		if slot == start || es[slot-1].prefixMaxTs < ts {
			return base + c<<indexChunkShift + x.firstReaching(c, slot, end, ts)
		}
		for k := slot; k < end; k++ {
			if effTs(&es[k]) >= ts {
				return base + c<<indexChunkShift + k
			}
		}
	}
	for c++; c < last; c++ {
		if x.chunks[c].maxTs >= ts {
			return base + c<<indexChunkShift + x.firstReaching(c, 0, indexChunkLen, ts)
		}
	}
	// Entry n−1's chunk, after i's: its in-chunk prefix covers [0, lastEnd)
	// only, where its maxTs may cover entries not yet published.
	if c == last && x.chunks[last].entries[lastEnd-1].prefixMaxTs >= ts {
		return base + last<<indexChunkShift + x.firstReaching(last, 0, lastEnd, ts)
	}
	return n
}

// searchMaxFrom returns the earliest j in [i, n) whose entry's effective
// max timestamp (effTs) is the largest of [i, n); 0 ≤ i < n ≤ len. This
// is the max-timestamp lookup of SPEC §5 restricted to the entries from
// i on.
//
// When the largest of [0, n) is not reached before i, the running maxima
// answer it in O(log n). Otherwise it reads: the rest of i's chunk — by
// binary search when the in-chunk prefix before i is below the chunk's
// largest, else entry by entry, at most indexChunkLen calls of effTs —
// then one maxTs per following chunk, keeping the first of the largest,
// then a binary search in the winning chunk for its first entry reaching
// that maximum: O(indexChunkLen + len/indexChunkLen)
// (BenchmarkListOffsetsFrom).
func (x *runIndex) searchMaxFrom(i, n int, effTs func(*runEntry) int64) int {
	if top := x.prefixMaxTs(n - 1); i == 0 || x.prefixMaxTs(i-1) < top {
		return x.searchTimestamp(n, top)
	}
	c, slot, start, end, last, lastEnd := x.restOfChunk(i, n)
	base := -x.head
	var best int64
	j := -1
	if es := x.chunks[c].entries; slot == start || es[slot-1].prefixMaxTs < es[end-1].prefixMaxTs {
		best = es[end-1].prefixMaxTs
		j = base + c<<indexChunkShift + x.firstReaching(c, slot, end, best)
	} else {
		for k := slot; k < end; k++ {
			if v := effTs(&es[k]); j < 0 || v > best {
				best, j = v, base+c<<indexChunkShift+k
			}
		}
	}
	// Strictly larger only: the earliest chunk holding the largest wins.
	win, winEnd := -1, 0
	for c++; c < last; c++ {
		if v := x.chunks[c].maxTs; v > best {
			best, win, winEnd = v, c, indexChunkLen
		}
	}
	if c == last {
		if v := x.chunks[last].entries[lastEnd-1].prefixMaxTs; v > best {
			best, win, winEnd = v, last, lastEnd
		}
	}
	if win >= 0 {
		j = base + win<<indexChunkShift + x.firstReaching(win, 0, winEnd, best)
	}
	return j
}

// push appends e; ts is its effective max timestamp. It writes only past
// the last entry: no entry moves, except that the first chunk of an index
// reallocates while it grows to indexChunkLen.
func (x *runIndex) push(e runEntry, ts int64) {
	pos := x.head + x.n
	c := pos >> indexChunkShift
	if c == len(x.chunks) {
		capacity, prev := indexChunkLen, int64(math.MinInt64)
		if c == 0 {
			capacity = indexFirstChunkCap
		} else {
			prev = x.chunks[c-1].prefixMaxTs
		}
		x.chunks = append(x.chunks, indexChunk{entries: make([]runEntry, 0, capacity), prefixMaxTs: prev,
			maxTs: math.MinInt64})
	}
	ch := &x.chunks[c]
	if x.n > 0 && pos&indexChunkMask > 0 {
		ts = max(ts, ch.entries[len(ch.entries)-1].prefixMaxTs)
	}
	e.prefixMaxTs = ts
	if len(ch.entries) == cap(ch.entries) {
		grown := make([]runEntry, len(ch.entries), min(2*cap(ch.entries), indexChunkLen))
		copy(grown, ch.entries)
		ch.entries = grown
	}
	ch.entries = append(ch.entries, e)
	ch.prefixMaxTs = max(ch.prefixMaxTs, ts)
	ch.maxTs = ts // the in-chunk prefix maximum, at the chunk's last entry
	ch.lastOffset = e.lastOffset()
	x.n++
}

// extendLast grows the last entry (len > 0) to lastOffsetDelta, byteSize
// and maxTimestamp — a run taking in the next batch of its file — where
// ts is the added batch's effective max timestamp; the running maxima
// take it in. Only the last entry changes, in place: it must not be one
// a frozen view holds (a run is extended only while its file's commit is
// being decided, between snapshots).
func (x *runIndex) extendLast(lastOffsetDelta, byteSize int32, maxTimestamp, ts int64) {
	pos := x.head + x.n - 1
	ch := &x.chunks[pos>>indexChunkShift]
	e := &ch.entries[pos&indexChunkMask]
	e.lastOffsetDelta, e.byteSize, e.maxTimestamp = lastOffsetDelta, byteSize, maxTimestamp
	e.prefixMaxTs = max(e.prefixMaxTs, ts)
	ch.prefixMaxTs = max(ch.prefixMaxTs, e.prefixMaxTs)
	ch.maxTs = e.prefixMaxTs
	ch.lastOffset = e.lastOffset()
}

// dropFront removes the first k entries (0 < k ≤ len). Whole chunks are
// released; the running maxima are recomputed for what changed only: the
// new first chunk's entries up to the first unchanged one (and so its
// maxTs), and the chunks' maxima up to the first unchanged one — at most
// indexChunkLen entries plus one step per chunk. effTs returns an entry's
// effective max timestamp.
func (x *runIndex) dropFront(k int, effTs func(*runEntry) int64) {
	if k >= x.n {
		*x = runIndex{}
		return
	}
	pos := x.head + k
	if c := pos >> indexChunkShift; c > 0 {
		// A fresh chunk slice: re-slicing would keep the dropped chunks'
		// entries reachable, and clearing them would write where a
		// frozen copy may read.
		x.chunks = slices.Clone(x.chunks[c:])
		pos &= indexChunkMask
	}
	x.head, x.n = pos, x.n-k
	// Once a recomputed value equals the stored one, every later one does
	// too (same recurrence from equal values), so both loops usually stop
	// at their first step.
	live := x.chunks[0].entries[x.head:]
	v := int64(math.MinInt64)
	for i := range live {
		e := &live[i]
		v = max(v, effTs(e))
		if v == e.prefixMaxTs {
			break
		}
		e.prefixMaxTs = v
	}
	first := &x.chunks[0]
	first.maxTs = first.entries[len(first.entries)-1].prefixMaxTs
	v = math.MinInt64
	for i := range x.chunks {
		ch := &x.chunks[i]
		v = max(v, ch.entries[len(ch.entries)-1].prefixMaxTs)
		if v == ch.prefixMaxTs {
			break
		}
		ch.prefixMaxTs = v
	}
}

// freeze returns a read-only view of the index as it is now, which stays
// valid while the index changes (see runIndex).
func (x *runIndex) freeze() indexView {
	if x.n == 0 {
		return indexView{}
	}
	k := len(x.chunks)
	return indexView{full: x.chunks[: k-1 : k-1], last: x.chunks[k-1].entries, head: x.head, n: x.n}
}

// indexView is a frozen runIndex: the snapshot encoder's copy.
type indexView struct {
	full []indexChunk // every chunk but the last
	last []runEntry   // the last chunk's entries when frozen
	head int
	n    int
}

// chunks calls yield with the view's entries, one chunk at a time, in
// order.
func (v *indexView) chunks(yield func([]runEntry) bool) {
	if v.n == 0 {
		return
	}
	for c := 0; c <= len(v.full); c++ {
		es := v.last
		if c < len(v.full) {
			es = v.full[c].entries
		}
		if c == 0 {
			es = es[v.head:]
		}
		if !yield(es) {
			return
		}
	}
}
