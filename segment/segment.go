// Package segment writes and reads segment objects (ObjectFormat 2;
// docs/format/segment-object.md): one partition's record batches in offset
// order, copied byte for byte out of the WAL objects they were committed
// in, followed by a sparse index of them and a trailer.
//
//	byte 0                          D          D + 36·n        D + 36·n + 64
//	+-------------------------------+----------------------+--------------+
//	| batches (one partition)       | index: n entries     | trailer      |
//	+-------------------------------+----------------------+--------------+
//
// Each index entry is a run of whole batches — its first offset, last
// offset, byte position and size, the largest max timestamp of its batch
// headers, its log-append time and timestamp type — and the entries tile
// the data: a reader finds the batch holding an offset by a binary search
// of the index and reads one entry's bytes from there. A Writer cuts an
// entry every IndexInterval bytes, and where the timestamp type or, on
// LogAppendTime, the append time changes. The trailer names the partition
// and carries the CRC-32C of the index and of itself (DecodeIndex checks
// both, and the tiling). The batches keep their own CRCs.
//
// The data is not re-encoded: the coordinator's consolidation copies the
// WAL runs' bytes, and fetch serves them as from the WAL object (SPEC §4).
// This is not a segment of the metadata log.
package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"

	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// ObjectFormat is the ObjectFormat of a segment object in coordinator
// records (SPEC §8; 1 is a WAL object).
const ObjectFormat int8 = 2

// Sizes and identifiers of the format.
const (
	// EntrySize is the size of an index entry in bytes.
	EntrySize = 36
	// TrailerSize is the size of the trailer in bytes.
	TrailerSize = 64
	// Version is the format version the trailer carries.
	Version = 1
	// MaxDataBytes bounds the data: positions are uint32, and the
	// coordinator's records int32.
	MaxDataBytes = math.MaxInt32
	// DefaultIndexInterval is the bytes of batches between two index
	// entries when the writer is not told otherwise: 36 bytes of index per
	// 64 KiB of data (0.05 %), and a reader that starts inside an entry
	// reads at most that much before the batch it wants.
	DefaultIndexInterval = 64 << 10
)

// magic is the trailer's magic, "DSSG".
var magic = [4]byte{'D', 'S', 'S', 'G'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors of DecodeIndex and the Writer.
var (
	// ErrCorrupt is wrapped by the errors of an index or trailer that does
	// not check out.
	ErrCorrupt = errors.New("segment: corrupt index or trailer")
	// ErrBatch is wrapped by Writer errors for batches that are not what
	// their caller says.
	ErrBatch = errors.New("segment: batch does not match its run")
)

// Entry is one index entry: a run of whole batches of the data.
type Entry struct {
	// OffsetDelta is the entry's first offset less the segment's
	// BaseOffset; LastOffsetDelta its last offset less its first.
	OffsetDelta, LastOffsetDelta uint32
	// Position and Size locate its batches in the data, bytes.
	Position, Size uint32
	// MaxTimestamp is the largest maxTimestamp of its batch headers, ms.
	MaxTimestamp int64
	// AppendTime is its batches' log-append time (the latest, on
	// CreateTime), ms.
	AppendTime int64
	// TimestampType is batch.TimestampCreateTime or
	// batch.TimestampLogAppendTime.
	TimestampType int8
}

// Trailer is a segment object's trailer.
type Trailer struct {
	TopicID       [16]byte
	Partition     int32
	BaseOffset    int64
	DataSize      int64
	IndexEntries  int
	IndexInterval uint32
}

// ObjectSize is the size of the object the trailer describes.
func (t *Trailer) ObjectSize() int64 {
	return t.DataSize + int64(t.IndexEntries)*EntrySize + TrailerSize
}

// IndexEntries returns how many index entries an object of size bytes
// whose data is dataSize bytes holds, or −1 if no whole number does.
func IndexEntries(size, dataSize int64) int {
	n := size - dataSize - TrailerSize
	if dataSize <= 0 || n < EntrySize || n%EntrySize != 0 {
		return -1
	}
	return int(n / EntrySize)
}

// appendEntry appends e's encoding to dst.
func appendEntry(dst []byte, e *Entry) []byte {
	dst = binary.BigEndian.AppendUint32(dst, e.OffsetDelta)
	dst = binary.BigEndian.AppendUint32(dst, e.LastOffsetDelta)
	dst = binary.BigEndian.AppendUint32(dst, e.Position)
	dst = binary.BigEndian.AppendUint32(dst, e.Size)
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.MaxTimestamp))
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.AppendTime))
	return append(dst, byte(e.TimestampType), 0, 0, 0)
}

func readEntry(b []byte) Entry {
	return Entry{
		OffsetDelta:     binary.BigEndian.Uint32(b[0:]),
		LastOffsetDelta: binary.BigEndian.Uint32(b[4:]),
		Position:        binary.BigEndian.Uint32(b[8:]),
		Size:            binary.BigEndian.Uint32(b[12:]),
		MaxTimestamp:    int64(binary.BigEndian.Uint64(b[16:])),
		AppendTime:      int64(binary.BigEndian.Uint64(b[24:])),
		TimestampType:   int8(b[32]),
	}
}

// appendTrailer appends t's encoding, given the index's CRC, to dst.
func appendTrailer(dst []byte, t *Trailer, indexCRC uint32) []byte {
	start := len(dst)
	dst = append(dst, t.TopicID[:]...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(t.Partition))
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.BaseOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.DataSize))
	dst = binary.BigEndian.AppendUint32(dst, uint32(t.IndexEntries))
	dst = binary.BigEndian.AppendUint32(dst, t.IndexInterval)
	dst = binary.BigEndian.AppendUint32(dst, indexCRC)
	dst = binary.BigEndian.AppendUint32(dst, Version)
	dst = append(dst, magic[:]...)
	dst = append(dst, 0, 0, 0, 0)
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// DecodeTrailer decodes the last TrailerSize bytes of an object of size
// bytes. Errors wrap ErrCorrupt: short, bad magic, version or CRC, or a
// size other than the one the trailer implies.
func DecodeTrailer(b []byte, size int64) (Trailer, error) {
	var t Trailer
	if len(b) != TrailerSize {
		return t, fmt.Errorf("%w: trailer of %d bytes", ErrCorrupt, len(b))
	}
	switch {
	case [4]byte(b[52:56]) != magic:
		return t, fmt.Errorf("%w: magic %q", ErrCorrupt, b[52:56])
	case crc32.Checksum(b[:60], castagnoli) != binary.BigEndian.Uint32(b[60:]):
		return t, fmt.Errorf("%w: trailer CRC mismatch", ErrCorrupt)
	case binary.BigEndian.Uint32(b[48:]) != Version:
		return t, fmt.Errorf("%w: version %d, this build reads %d", ErrCorrupt, binary.BigEndian.Uint32(b[48:]), Version)
	}
	copy(t.TopicID[:], b[:16])
	t.Partition = int32(binary.BigEndian.Uint32(b[16:]))
	t.BaseOffset = int64(binary.BigEndian.Uint64(b[20:]))
	ds := binary.BigEndian.Uint64(b[28:])
	n := binary.BigEndian.Uint32(b[36:])
	t.IndexInterval = binary.BigEndian.Uint32(b[40:])
	if ds == 0 || ds > MaxDataBytes || n == 0 || uint64(n) > ds/batch.HeaderSize {
		return t, fmt.Errorf("%w: %d bytes of data in %d entries", ErrCorrupt, ds, n)
	}
	t.DataSize, t.IndexEntries = int64(ds), int(n)
	if t.ObjectSize() != size {
		return t, fmt.Errorf("%w: the trailer describes an object of %d bytes, it has %d", ErrCorrupt, t.ObjectSize(), size)
	}
	return t, nil
}

// DecodeIndex decodes and checks the index and trailer of a segment
// object of size bytes whose data is dataSize bytes: b is the object's
// bytes [dataSize, size). It checks the trailer (DecodeTrailer), the
// index's CRC, and that the entries tile the data in offsets and bytes,
// each of at least one batch header's size and a known timestamp type,
// the offsets below 2^31. Errors wrap ErrCorrupt.
func DecodeIndex(b []byte, dataSize, size int64) (Trailer, []Entry, error) {
	if int64(len(b)) != size-dataSize || len(b) < TrailerSize {
		return Trailer{}, nil, fmt.Errorf("%w: %d bytes of index and trailer after %d of data in %d", ErrCorrupt, len(b), dataSize, size)
	}
	t, err := DecodeTrailer(b[len(b)-TrailerSize:], size)
	if err != nil {
		return t, nil, err
	}
	if t.DataSize != dataSize {
		return t, nil, fmt.Errorf("%w: data of %d bytes, expected %d", ErrCorrupt, t.DataSize, dataSize)
	}
	idx := b[:len(b)-TrailerSize]
	if crc32.Checksum(idx, castagnoli) != binary.BigEndian.Uint32(b[len(b)-TrailerSize+44:]) {
		return t, nil, fmt.Errorf("%w: index CRC mismatch", ErrCorrupt)
	}
	es := make([]Entry, t.IndexEntries)
	var pos, off uint64
	for i := range es {
		e := readEntry(idx[i*EntrySize:])
		switch {
		case uint64(e.Position) != pos || uint64(e.OffsetDelta) != off:
			return t, nil, fmt.Errorf("%w: entry %d at byte %d offset delta %d, expected %d and %d", ErrCorrupt, i, e.Position, e.OffsetDelta, pos, off)
		case e.Size < batch.HeaderSize || uint64(e.Position)+uint64(e.Size) > uint64(dataSize):
			return t, nil, fmt.Errorf("%w: entry %d of %d bytes at %d", ErrCorrupt, i, e.Size, e.Position)
		case e.TimestampType != batch.TimestampCreateTime && e.TimestampType != batch.TimestampLogAppendTime:
			return t, nil, fmt.Errorf("%w: entry %d: timestamp type %d", ErrCorrupt, i, e.TimestampType)
		}
		pos = uint64(e.Position) + uint64(e.Size)
		off = uint64(e.OffsetDelta) + uint64(e.LastOffsetDelta) + 1
		if off > math.MaxInt32+1 || t.BaseOffset > math.MaxInt64-int64(off) {
			return t, nil, fmt.Errorf("%w: entry %d: offsets past the segment's span", ErrCorrupt, i)
		}
		es[i] = e
	}
	if pos != uint64(dataSize) {
		return t, nil, fmt.Errorf("%w: entries end at byte %d, the data at %d", ErrCorrupt, pos, dataSize)
	}
	return t, es, nil
}

// Writer lays out one segment object: Add appends a WAL run's batches to
// the data, written through to w as they come, and keeps the index; Finish
// returns the index and trailer that end the object. It is not safe for
// concurrent use.
type Writer struct {
	w        io.Writer
	trailer  Trailer
	interval uint32
	entries  []Entry
	next     int64 // the offset the next batch must start at
	// maxTs and lastAppend summarise the data so far.
	maxTs      int64
	lastAppend int64
}

// NewWriter starts a segment of the partition (topicID, partition) whose
// first offset is baseOffset, writing its data to w, with an index entry
// every interval bytes (0: DefaultIndexInterval).
func NewWriter(w io.Writer, topicID [16]byte, partition int32, baseOffset int64, interval uint32) *Writer {
	if interval == 0 {
		interval = DefaultIndexInterval
	}
	return &Writer{w: w, interval: interval, next: baseOffset, maxTs: math.MinInt64, lastAppend: math.MinInt64,
		trailer: Trailer{TopicID: topicID, Partition: partition, BaseOffset: baseOffset, IndexInterval: interval}}
}

// DataSize is the bytes of data written so far.
func (w *Writer) DataSize() int64 { return w.trailer.DataSize }

// NextOffset is the offset the next run must start at.
func (w *Writer) NextOffset() int64 { return w.next }

// SizeWith bounds the object's size, data, index and trailer, once a run
// of n more bytes is added: each index entry but the last of a run holds
// at least the interval's bytes, and the run's first batch may open an
// entry, so a run adds at most n/interval + 2 entries. Consolidation rolls
// a segment when this would pass segment.bytes, so that segment.bytes
// bounds the whole object (the catch-up reads of a lagging consumer take
// objects up to a size whole: cache.Config.CatchUpMaxBytes).
func (w *Writer) SizeWith(n int64) int64 {
	return w.trailer.DataSize + n + (int64(len(w.entries))+n/int64(w.interval)+2)*EntrySize + TrailerSize
}

// MaxTimestamp is the largest maxTimestamp of the batches written
// (math.MinInt64 before the first).
func (w *Writer) MaxTimestamp() int64 { return w.maxTs }

// AppendTime is the latest log-append time of the batches written.
func (w *Writer) AppendTime() int64 { return w.lastAppend }

// Add appends the batches of one WAL run — p, its bytes, holding whole
// batches whose first offset is baseOffset, all committed at appendTime
// with timestamp type tsType — to the data. The run must start at
// NextOffset. Each batch's framing (magic 2, base offset 0, length) is
// checked, not its CRC: the caller checked the run it read. Errors wrap
// ErrBatch (nothing of p written) or are w's (the writer is then unusable).
func (w *Writer) Add(p []byte, baseOffset, appendTime int64, tsType int8) error {
	if baseOffset != w.next {
		return fmt.Errorf("%w: run at offset %d, the segment continues at %d", ErrBatch, baseOffset, w.next)
	}
	if tsType != batch.TimestampCreateTime && tsType != batch.TimestampLogAppendTime {
		return fmt.Errorf("%w: timestamp type %d", ErrBatch, tsType)
	}
	// Check the whole run before writing any of it.
	next := baseOffset
	for pos := 0; pos < len(p); {
		h, n, err := batch.Parse(p[pos:])
		if err != nil || h.Magic() != 2 || h.BaseOffset() != 0 || h.LastOffsetDelta() < 0 {
			return fmt.Errorf("%w: batch at offset %d (%v)", ErrBatch, next, err)
		}
		next += int64(h.LastOffsetDelta()) + 1
		pos += n
	}
	if len(p) == 0 || w.trailer.DataSize+int64(len(p)) > MaxDataBytes || next-w.trailer.BaseOffset > math.MaxInt32+1 {
		return fmt.Errorf("%w: a run of %d bytes and %d offsets would take the segment past its limits", ErrBatch, len(p), next-baseOffset)
	}
	if _, err := w.w.Write(p); err != nil {
		return err
	}
	off := baseOffset
	for pos := 0; pos < len(p); {
		h, n, _ := batch.Parse(p[pos:])
		last := off + int64(h.LastOffsetDelta())
		w.addBatch(uint32(n), off, last, h.MaxTimestamp(), appendTime, tsType)
		off = last + 1
		pos += n
	}
	w.next = next
	return nil
}

// addBatch indexes one batch of size bytes and offsets [first, last].
func (w *Writer) addBatch(size uint32, first, last, maxTs, appendTime int64, tsType int8) {
	pos := uint32(w.trailer.DataSize)
	if n := len(w.entries); n > 0 {
		e := &w.entries[n-1]
		if e.Size < w.interval && e.TimestampType == tsType &&
			(tsType != batch.TimestampLogAppendTime || e.AppendTime == appendTime) {
			e.Size += size
			e.LastOffsetDelta = uint32(last - (w.trailer.BaseOffset + int64(e.OffsetDelta)))
			e.MaxTimestamp = max(e.MaxTimestamp, maxTs)
			e.AppendTime = max(e.AppendTime, appendTime)
			w.account(size, maxTs, appendTime)
			return
		}
	}
	w.entries = append(w.entries, Entry{
		OffsetDelta:     uint32(first - w.trailer.BaseOffset),
		LastOffsetDelta: uint32(last - first),
		Position:        pos,
		Size:            size,
		MaxTimestamp:    maxTs,
		AppendTime:      appendTime,
		TimestampType:   tsType,
	})
	w.account(size, maxTs, appendTime)
}

func (w *Writer) account(size uint32, maxTs, appendTime int64) {
	w.trailer.DataSize += int64(size)
	w.maxTs = max(w.maxTs, maxTs)
	w.lastAppend = max(w.lastAppend, appendTime)
}

// Finish returns the index and trailer that end the object: the bytes to
// write after the data. The segment must hold at least one batch.
func (w *Writer) Finish() ([]byte, Trailer) {
	t := w.trailer
	t.IndexEntries = len(w.entries)
	out := make([]byte, 0, len(w.entries)*EntrySize+TrailerSize)
	for i := range w.entries {
		out = appendEntry(out, &w.entries[i])
	}
	out = appendTrailer(out, &t, crc32.Checksum(out, castagnoli))
	return out, t
}

// Find returns the index of the entry holding offset o of a segment whose
// first offset is base, or len(es) if none does.
func Find(es []Entry, base, o int64) int {
	lo, hi := 0, len(es)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		e := &es[m]
		if base+int64(e.OffsetDelta)+int64(e.LastOffsetDelta) < o {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(es) && base+int64(es[lo].OffsetDelta) > o {
		return len(es)
	}
	return lo
}

// Is reports whether object ends with a segment object's trailer: its
// magic, version and CRC, and the size it says. A WAL object (ObjectFormat
// 1) has no trailer; that its last 64 bytes pass by chance takes a
// matching CRC-32C.
func Is(object []byte) bool {
	if len(object) < TrailerSize {
		return false
	}
	_, err := DecodeTrailer(object[len(object)-TrailerSize:], int64(len(object)))
	return err == nil
}

// Check verifies a whole segment object as read back from the store: its
// trailer and index (DecodeIndex) and every batch of its data well framed,
// magic 2 and stored base offset 0, with a CRC-32C that matches, back to
// back to the end of the data. It is
// the block cache's whole-object check for segment objects (cmd/sidecar
// picks it, or wal.Check, by Is); key names the object in the error.
func Check(key string, object []byte) error {
	if len(object) < TrailerSize {
		return fmt.Errorf("segment: %s: %w: %d bytes", key, ErrCorrupt, len(object))
	}
	tr, err := DecodeTrailer(object[len(object)-TrailerSize:], int64(len(object)))
	if err != nil {
		return fmt.Errorf("segment: %s: %w", key, err)
	}
	if _, _, err := DecodeIndex(object[tr.DataSize:], tr.DataSize, int64(len(object))); err != nil {
		return fmt.Errorf("segment: %s: %w", key, err)
	}
	data := object[:tr.DataSize]
	for pos := 0; pos < len(data); {
		h, n, err := batch.Parse(data[pos:])
		if err != nil {
			return fmt.Errorf("segment: %s: batch at byte %d: %w", key, pos, err)
		}
		switch {
		case h.Magic() != 2 || h.BaseOffset() != 0:
			return fmt.Errorf("segment: %s: batch at byte %d: magic %d, stored base offset %d", key, pos, h.Magic(), h.BaseOffset())
		case h.ComputeCRC() != h.CRC():
			return fmt.Errorf("segment: %s: batch at byte %d: CRC-32C mismatch", key, pos)
		}
		pos += n
	}
	return nil
}
