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
	"bytes"
	"cmp"
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
type Packer struct {
	order []int32
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
	p.order = p.order[:0]
	for i := range entries {
		p.order = append(p.order, int32(i))
	}
	// A stable sort keeps arrival order within a partition.
	slices.SortStableFunc(p.order, func(a, b int32) int {
		ea, eb := &entries[a], &entries[b]
		if c := bytes.Compare(ea.TopicID[:], eb.TopicID[:]); c != 0 {
			return c
		}
		return cmp.Compare(ea.Partition, eb.Partition)
	})
	dst = slices.Grow(dst, size)
	start := len(dst)
	for _, i := range p.order {
		b := entries[i].Batch
		locs[i] = Location{ByteOffset: int32(len(dst) - start), ByteSize: int32(len(b))}
		dst = append(dst, b...)
	}
	return dst
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
