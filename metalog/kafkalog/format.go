package kafkalog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// The byte layouts of this file are specified in
// docs/format/metadata-records.md §The Kafka backend.

const (
	// keyMagic starts the key of every Kafka record this backend writes.
	keyMagic = "DM"
	// keyVersion is the key layout's version.
	keyVersion = 1
	// keySize: magic, version, kind, index int64, part uint32, parts uint32.
	keySize = 20

	// kindRecord marks a part of a metadata record: the Kafka record's
	// value is bytes of the record body.
	kindRecord = 1
	// kindSnapshot marks a snapshot pointer: the value names the snapshot
	// object of the state after records [0, index).
	kindSnapshot = 2

	// pointerVersion is the snapshot pointer value's layout version.
	pointerVersion = 1
	// pointerFixed: version uint8, anchor int64, size int64, crc uint32,
	// key length uint16.
	pointerFixed = 1 + 8 + 8 + 4 + 2

	// snapshotMagic and snapshotVersion start a snapshot object.
	snapshotMagic   = "DSKS"
	snapshotVersion = 1
	// snapshotHeaderSize: magic, version uint32, index int64, payload
	// length uint64; a CRC-32C of header and payload follows the payload.
	snapshotHeaderSize = 24
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recordKey is the decoded key of one Kafka record of the log.
type recordKey struct {
	kind  uint8
	index int64
	// part is this Kafka record's place among the parts of a metadata
	// record, 0 … parts−1 (a body larger than the chunk size is split).
	part, parts uint32
}

func (k recordKey) appendTo(b []byte) []byte {
	b = append(b, keyMagic...)
	b = append(b, keyVersion, k.kind)
	b = binary.BigEndian.AppendUint64(b, uint64(k.index))
	b = binary.BigEndian.AppendUint32(b, k.part)
	return binary.BigEndian.AppendUint32(b, k.parts)
}

// errNotOurs marks a Kafka record whose key is not one this backend
// writes.
var errNotOurs = errors.New("not a metadata log record")

func decodeKey(b []byte) (recordKey, error) {
	if len(b) != keySize || string(b[:2]) != keyMagic {
		return recordKey{}, fmt.Errorf("%w: key of %d bytes", errNotOurs, len(b))
	}
	if b[2] != keyVersion {
		return recordKey{}, fmt.Errorf("key version %d, this build reads only version %d", b[2], keyVersion)
	}
	k := recordKey{
		kind:  b[3],
		index: int64(binary.BigEndian.Uint64(b[4:])),
		part:  binary.BigEndian.Uint32(b[12:]),
		parts: binary.BigEndian.Uint32(b[16:]),
	}
	switch {
	case k.kind != kindRecord && k.kind != kindSnapshot:
		return k, fmt.Errorf("record kind %d", k.kind)
	case k.index < 0:
		return k, fmt.Errorf("record index %d", k.index)
	case k.parts == 0 || k.part >= k.parts:
		return k, fmt.Errorf("part %d of %d", k.part, k.parts)
	case k.kind == kindSnapshot && k.parts != 1:
		return k, fmt.Errorf("snapshot pointer in %d parts", k.parts)
	}
	return k, nil
}

// pointer is a snapshot pointer: the snapshot object holding the state
// after records [0, index), and where in the partition records ≥ index
// begin.
type pointer struct {
	index int64
	// anchor is a Kafka offset of the partition at or before the first
	// record with an index ≥ index, and after every record below it:
	// replay from index starts there, and TruncateBefore(index) deletes
	// the records before it.
	anchor int64
	// key, size and crc name and check the snapshot object (its whole
	// bytes).
	key  string
	size int64
	crc  uint32
}

func (p pointer) appendValue(b []byte) []byte {
	b = append(b, pointerVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(p.anchor))
	b = binary.BigEndian.AppendUint64(b, uint64(p.size))
	b = binary.BigEndian.AppendUint32(b, p.crc)
	b = binary.BigEndian.AppendUint16(b, uint16(len(p.key)))
	return append(b, p.key...)
}

func decodePointer(index int64, v []byte) (pointer, error) {
	if len(v) < pointerFixed {
		return pointer{}, fmt.Errorf("snapshot pointer of %d bytes", len(v))
	}
	if v[0] != pointerVersion {
		return pointer{}, fmt.Errorf("snapshot pointer version %d, this build reads only version %d", v[0], pointerVersion)
	}
	p := pointer{
		index:  index,
		anchor: int64(binary.BigEndian.Uint64(v[1:])),
		size:   int64(binary.BigEndian.Uint64(v[9:])),
		crc:    binary.BigEndian.Uint32(v[17:]),
	}
	n := int(binary.BigEndian.Uint16(v[21:]))
	if len(v) != pointerFixed+n || n == 0 {
		return pointer{}, fmt.Errorf("snapshot pointer: key of %d bytes in a %d-byte value", n, len(v))
	}
	p.key = string(v[pointerFixed:])
	if p.anchor < 0 || p.size < snapshotHeaderSize+4 {
		return pointer{}, fmt.Errorf("snapshot pointer: anchor %d, size %d", p.anchor, p.size)
	}
	return p, nil
}

// encodeSnapshot returns the snapshot object for payload, the state after
// records [0, index).
func encodeSnapshot(index int64, payload []byte) []byte {
	b := make([]byte, 0, snapshotHeaderSize+len(payload)+4)
	b = append(b, snapshotMagic...)
	b = binary.BigEndian.AppendUint32(b, snapshotVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(index))
	b = binary.BigEndian.AppendUint64(b, uint64(len(payload)))
	b = append(b, payload...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// errSnapshotVersion marks a whole snapshot object of another format
// version: not damage, a build that cannot read it.
var errSnapshotVersion = errors.New("snapshot object format version")

// decodeSnapshot checks a snapshot object read for p and returns its
// payload (aliasing b). Damage is an error; a whole object of another
// version wraps errSnapshotVersion.
func decodeSnapshot(p pointer, b []byte) ([]byte, error) {
	if int64(len(b)) != p.size {
		return nil, fmt.Errorf("snapshot object %s: %d bytes, its pointer says %d", p.key, len(b), p.size)
	}
	if c := crc32.Checksum(b, castagnoli); c != p.crc {
		return nil, fmt.Errorf("snapshot object %s: CRC-32C %08x, its pointer says %08x", p.key, c, p.crc)
	}
	if string(b[:4]) != snapshotMagic {
		return nil, fmt.Errorf("snapshot object %s: bad magic %q", p.key, b[:4])
	}
	if v := binary.BigEndian.Uint32(b[4:]); v != snapshotVersion {
		return nil, fmt.Errorf("%w %d in %s: this build reads only version %d", errSnapshotVersion, v, p.key, snapshotVersion)
	}
	end := len(b) - 4
	if c := crc32.Checksum(b[:end], castagnoli); c != binary.BigEndian.Uint32(b[end:]) {
		return nil, fmt.Errorf("snapshot object %s: bad CRC", p.key)
	}
	idx := int64(binary.BigEndian.Uint64(b[8:]))
	n := binary.BigEndian.Uint64(b[16:])
	if idx != p.index || n != uint64(end-snapshotHeaderSize) {
		return nil, fmt.Errorf("snapshot object %s: index %d and %d payload bytes, want index %d and %d bytes",
			p.key, idx, n, p.index, end-snapshotHeaderSize)
	}
	return b[snapshotHeaderSize:end], nil
}
