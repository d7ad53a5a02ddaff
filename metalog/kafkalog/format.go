package kafkalog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"unicode/utf8"
)

// The byte layouts of this file are specified in
// docs/format/metadata-records.md §The Kafka backend.

const (
	// keyMagic starts the key of every Kafka record this backend writes.
	keyMagic = "DM"
	// keyVersion is the key layout's version. 1 was the transactional
	// layout, 2 had unconditional takeovers (a claim with epoch field −1
	// was effective anywhere); neither was released, and this build
	// refuses both.
	keyVersion = 3
	// keySize: magic, version, kind, epoch int64, index int64, part
	// uint32, parts uint32, flags uint8.
	keySize = 29

	// kindRecord marks a part of a metadata record: the Kafka record's
	// value is bytes of the record body.
	kindRecord = 1
	// kindSnapshot marks a snapshot pointer: the value names the snapshot
	// object of the state after records [0, index).
	kindSnapshot = 2
	// kindClaim marks a claim: a writer taking the shard, or continuing
	// its ownership, under a new epoch, the claim's own offset. Its epoch
	// field names the epoch the writer read in force (noEpoch: none), and
	// the claim is effective only if that epoch is still in force where
	// it lands.
	kindClaim = 3

	// flagGroupEnd, in the key's flags, marks the last Kafka record of an
	// Append's group.
	flagGroupEnd = 1

	// noEpoch is the epoch in force before a partition's first effective
	// claim, and the epoch field of a claim that read none.
	noEpoch = -1

	// pointerVersion is the snapshot pointer value's layout version (2,
	// without the writer id, was never released).
	pointerVersion = 3
	// claimVersion is the claim value's layout version.
	claimVersion = 1
	// writerIDSize is the length of a writer's random id.
	writerIDSize = 16
	// maxDescription bounds a claim's description of its writer.
	maxDescription = 1024

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
	kind uint8
	// epoch is the writer's epoch (records, pointers) or the epoch a
	// claim names, which must be in force for it to be effective
	// (noEpoch: none yet).
	epoch int64
	index int64
	// part is this Kafka record's place among the parts of a metadata
	// record, 0 … parts−1 (a body larger than the chunk size is split).
	part, parts uint32
	flags       uint8
}

func (k recordKey) appendTo(b []byte) []byte {
	b = append(b, keyMagic...)
	b = append(b, keyVersion, k.kind)
	b = binary.BigEndian.AppendUint64(b, uint64(k.epoch))
	b = binary.BigEndian.AppendUint64(b, uint64(k.index))
	b = binary.BigEndian.AppendUint32(b, k.part)
	b = binary.BigEndian.AppendUint32(b, k.parts)
	return append(b, k.flags)
}

// errNotOurs marks a Kafka record whose key is not one this backend
// writes.
var errNotOurs = errors.New("not a metadata log record")

func decodeKey(b []byte) (recordKey, error) {
	if len(b) < 3 || string(b[:2]) != keyMagic {
		return recordKey{}, fmt.Errorf("%w: key of %d bytes", errNotOurs, len(b))
	}
	if b[2] != keyVersion {
		return recordKey{}, fmt.Errorf("key version %d, this build reads only version %d", b[2], keyVersion)
	}
	if len(b) != keySize {
		return recordKey{}, fmt.Errorf("key of %d bytes, want %d", len(b), keySize)
	}
	k := recordKey{
		kind:  b[3],
		epoch: int64(binary.BigEndian.Uint64(b[4:])),
		index: int64(binary.BigEndian.Uint64(b[12:])),
		part:  binary.BigEndian.Uint32(b[20:]),
		parts: binary.BigEndian.Uint32(b[24:]),
		flags: b[28],
	}
	switch {
	case k.kind != kindRecord && k.kind != kindSnapshot && k.kind != kindClaim:
		return k, fmt.Errorf("record kind %d", k.kind)
	case k.index < 0:
		return k, fmt.Errorf("record index %d", k.index)
	case k.epoch < noEpoch || k.epoch == noEpoch && k.kind != kindClaim:
		return k, fmt.Errorf("epoch %d", k.epoch)
	case k.parts == 0 || k.part >= k.parts:
		return k, fmt.Errorf("part %d of %d", k.part, k.parts)
	case k.kind != kindRecord && (k.parts != 1 || k.flags != 0 || k.index != 0 && k.kind == kindClaim):
		return k, fmt.Errorf("kind %d with index %d, %d parts, flags %#x", k.kind, k.index, k.parts, k.flags)
	case k.flags&^flagGroupEnd != 0:
		return k, fmt.Errorf("flags %#x", k.flags)
	}
	return k, nil
}

// claimValue is a claim's value: who wrote it, for the writer to know its
// own claims and for people reading the log.
type claimValue struct {
	// writer is the random id of the Log handle that wrote the claim.
	writer [writerIDSize]byte
	// description says which process wrote it (host, pid, start time).
	description string
}

func (c claimValue) appendTo(b []byte) []byte {
	b = append(b, claimVersion)
	b = append(b, c.writer[:]...)
	return append(b, c.description...)
}

func decodeClaim(v []byte) (claimValue, error) {
	if len(v) < 1+writerIDSize {
		return claimValue{}, fmt.Errorf("claim of %d bytes", len(v))
	}
	if v[0] != claimVersion {
		return claimValue{}, fmt.Errorf("claim version %d, this build reads only version %d", v[0], claimVersion)
	}
	var c claimValue
	copy(c.writer[:], v[1:])
	d := v[1+writerIDSize:]
	if len(d) > maxDescription || !utf8.Valid(d) {
		return claimValue{}, fmt.Errorf("claim description of %d bytes, not UTF-8 or above %d", len(d), maxDescription)
	}
	c.description = string(d)
	return c, nil
}

// pointer is a snapshot pointer: the snapshot object holding the state
// after records [0, index), written (by PrepareSnapshot) where the log's
// next record index was index, before the object itself (WriteSnapshot).
type pointer struct {
	index int64
	// epoch is the writer's epoch, writer its id (the owner of that
	// epoch), and offset the pointer's own Kafka offset: a scan may start
	// there knowing its state (fromPointer).
	epoch  int64
	writer [writerIDSize]byte
	offset int64
	// key names the snapshot object.
	key string
	// written: the object is known to be stored (this handle wrote it,
	// or read it back whole), so the log before the pointer may go.
	written bool
}

func (p pointer) appendValue(b []byte) []byte {
	b = append(b, pointerVersion)
	b = append(b, p.writer[:]...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(p.key)))
	return append(b, p.key...)
}

// decodePointer decodes the value of the pointer whose key is k.
func decodePointer(k recordKey, offset int64, v []byte) (pointer, error) {
	const head = 1 + writerIDSize + 2
	if len(v) < head {
		return pointer{}, fmt.Errorf("snapshot pointer of %d bytes", len(v))
	}
	if v[0] != pointerVersion {
		return pointer{}, fmt.Errorf("snapshot pointer version %d, this build reads only version %d", v[0], pointerVersion)
	}
	n := int(binary.BigEndian.Uint16(v[1+writerIDSize:]))
	if len(v) != head+n || n == 0 {
		return pointer{}, fmt.Errorf("snapshot pointer: key of %d bytes in a %d-byte value", n, len(v))
	}
	p := pointer{index: k.index, epoch: k.epoch, offset: offset, key: string(v[head:])}
	copy(p.writer[:], v[1:])
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

// decodeSnapshot checks the snapshot object b read for p and returns its
// payload (aliasing b). Damage is an error; a whole object of another
// version wraps errSnapshotVersion.
func decodeSnapshot(p pointer, b []byte) ([]byte, error) {
	if len(b) < snapshotHeaderSize+4 {
		return nil, fmt.Errorf("snapshot object %s: %d bytes", p.key, len(b))
	}
	if string(b[:4]) != snapshotMagic {
		return nil, fmt.Errorf("snapshot object %s: bad magic %q", p.key, b[:4])
	}
	end := len(b) - 4
	if c := crc32.Checksum(b[:end], castagnoli); c != binary.BigEndian.Uint32(b[end:]) {
		return nil, fmt.Errorf("snapshot object %s: bad CRC", p.key)
	}
	if v := binary.BigEndian.Uint32(b[4:]); v != snapshotVersion {
		return nil, fmt.Errorf("%w %d in %s: this build reads only version %d", errSnapshotVersion, v, p.key, snapshotVersion)
	}
	idx := int64(binary.BigEndian.Uint64(b[8:]))
	n := binary.BigEndian.Uint64(b[16:])
	if idx != p.index || n != uint64(end-snapshotHeaderSize) {
		return nil, fmt.Errorf("snapshot object %s: index %d and %d payload bytes, want index %d and %d bytes",
			p.key, idx, n, p.index, end-snapshotHeaderSize)
	}
	return b[snapshotHeaderSize:end], nil
}
