// Package wal builds and walks WRITE_AHEAD_MULTI_SEGMENT objects
// (ObjectFormat 1, SPEC §7; docs/format/wal-object.md).
//
// An object is the plain concatenation of the producers' record batches, no
// header or footer:
//
//	+--------------------+--------------------+-----+--------------------+
//	| batch (tp A, 1st)  | batch (tp A, 2nd)  | ... | batch (tp Z, last) |
//	+--------------------+--------------------+-----+--------------------+
//	0                                                          object size
//
// Batches are grouped by (topic id, partition), groups in ascending
// (topic id, partition) order, and arrival order is kept within a group.
// Each batch is self-delimiting (batchLength at +8), so a tool can walk an
// object without the coordinator; the coordinator records each batch's byte
// offset and size. The bytes are the producer's, untouched: base offsets are
// 0 and CRCs are the producer's.
package wal

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// Entry is one record batch handed to the packer, in arrival order.
type Entry struct {
	TopicID   [16]byte
	Partition int32
	// Batch is the whole record batch, header included. It is copied into
	// the object, never modified.
	Batch []byte
}

// Location is where an entry's batch landed in the object, in bytes.
type Location struct {
	ByteOffset int32
	ByteSize   int32
}

// MaxObjectBytes is the largest object the format can address: byte offsets
// in coordinator records are int32 (SPEC §8).
const MaxObjectBytes = 1<<31 - 1

// Packer lays out WAL objects. It keeps scratch space between calls so that
// packing allocates nothing per batch in steady state; it is not safe for
// concurrent use.
//
// Grouping is linear in the number of batches (a counting sort): each
// batch's partition is found in a small open-addressing table, only the
// distinct partitions are sorted, the batches are listed per partition in
// arrival order, and then copied once, in object order, so that the
// object is written sequentially. A stable sort of the batches themselves
// cost several times more at 1 KiB batches (BenchmarkPacking,
// bench/RESULTS.md).
type Packer struct {
	groups  []packGroup
	groupOf []int32 // per entry: its group
	order   []int32 // groups sorted by key
	slots   []int32 // entry indexes in object order
	table   []int32 // open addressing: 0 = empty, else group index + 1
}

// packGroup is one (topic id, partition) of the file being packed.
type packGroup struct {
	hi, lo    uint64 // the topic id as two big-endian words
	partition int32
	count     int32 // batches in the group
	next      int32 // index in slots where its next batch goes
}

func (g *packGroup) compare(o *packGroup) int {
	if c := cmp.Compare(g.hi, o.hi); c != 0 {
		return c
	}
	if c := cmp.Compare(g.lo, o.lo); c != 0 {
		return c
	}
	return cmp.Compare(g.partition, o.partition)
}

// Size returns the object size in bytes that Pack will produce for entries.
func Size(entries []Entry) int {
	n := 0
	for i := range entries {
		n += len(entries[i].Batch)
	}
	return n
}

// Pack appends the object holding entries to dst and returns it, and fills
// locs[i] with the location of entries[i] relative to the start of the
// object (len(dst) on entry). locs must have len(entries) elements. It
// panics if the object would exceed MaxObjectBytes, which callers prevent by
// sealing files well below it.
func (p *Packer) Pack(dst []byte, entries []Entry, locs []Location) []byte {
	if len(locs) != len(entries) {
		panic(fmt.Sprintf("wal: %d locations for %d entries", len(locs), len(entries)))
	}
	size := Size(entries)
	if size > MaxObjectBytes {
		panic(fmt.Sprintf("wal: object of %d bytes exceeds the format's %d", size, MaxObjectBytes))
	}
	p.group(entries)

	// Groups in key order; each gets a run of slots sized by its count.
	p.order = p.order[:0]
	for g := range p.groups {
		p.order = append(p.order, int32(g))
	}
	slices.SortFunc(p.order, func(a, b int32) int { return p.groups[a].compare(&p.groups[b]) })
	var run int32
	for _, g := range p.order {
		p.groups[g].next = run
		run += p.groups[g].count
	}
	// Arrival order within each group: a stable placement.
	p.slots = slices.Grow(p.slots[:0], len(entries))[:len(entries)]
	for i := range entries {
		g := &p.groups[p.groupOf[i]]
		p.slots[g.next] = int32(i)
		g.next++
	}

	dst = slices.Grow(dst, size)
	start := len(dst)
	for _, i := range p.slots {
		b := entries[i].Batch
		locs[i] = Location{ByteOffset: int32(len(dst) - start), ByteSize: int32(len(b))}
		dst = append(dst, b...)
	}
	return dst
}

// group fills p.groups (with their counts) and p.groupOf.
func (p *Packer) group(entries []Entry) {
	p.groups = p.groups[:0]
	p.groupOf = slices.Grow(p.groupOf[:0], len(entries))[:len(entries)]
	// A table at least twice the number of batches keeps probes short
	// even if every batch is its own partition.
	tsize := 16
	for tsize < 2*len(entries) {
		tsize *= 2
	}
	if cap(p.table) < tsize {
		p.table = make([]int32, tsize)
	}
	p.table = p.table[:tsize]
	clear(p.table)
	mask := uint64(tsize - 1)
	for i := range entries {
		e := &entries[i]
		hi := binary.BigEndian.Uint64(e.TopicID[:8])
		lo := binary.BigEndian.Uint64(e.TopicID[8:])
		h := (hi ^ lo*0x9E3779B97F4A7C15 ^ uint64(uint32(e.Partition))*0xC2B2AE3D27D4EB4F)
		h ^= h >> 29
		slot := h & mask
		for {
			g := p.table[slot]
			if g == 0 {
				p.groups = append(p.groups, packGroup{hi: hi, lo: lo, partition: e.Partition})
				g = int32(len(p.groups))
				p.table[slot] = g
			} else if k := &p.groups[g-1]; k.hi != hi || k.lo != lo || k.partition != e.Partition {
				slot = (slot + 1) & mask
				continue
			}
			p.groupOf[i] = g - 1
			p.groups[g-1].count++
			break
		}
	}
}

// Walk calls fn with the byte offset and view of each batch in object, in
// object order. It stops at fn's first error, or at a framing error
// (batch.ErrShort, batch.ErrBadLength) wrapped with the offset it was found
// at.
func Walk(object []byte, fn func(offset int, h batch.Header) error) error {
	off := 0
	for off < len(object) {
		h, n, err := batch.Parse(object[off:])
		if err != nil {
			return fmt.Errorf("wal: batch at byte %d: %w", off, err)
		}
		if err := fn(off, h); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// Check verifies a whole object as read back from the store: every batch
// well framed (Walk) with a CRC-32C that matches (SPEC §1, §7; produce
// accepted only such batches, rejected ones included). It is the block
// cache's Config.CheckObject; key names the object in the error. Errors:
// Walk's framing errors, or a CRC mismatch, each naming the byte offset.
func Check(key string, object []byte) error {
	return Walk(object, func(off int, h batch.Header) error {
		if h.ComputeCRC() != h.CRC() {
			return fmt.Errorf("wal: %s: batch at byte %d: CRC-32C mismatch", key, off)
		}
		return nil
	})
}
