// Package tagged reads and writes the tagged-field sections of Kafka's
// flexible versions (KIP-482) in the project's own formats — the metadata
// records and snapshots (docs/format/metadata-records.md) and the
// coordinator RPCs (docs/format/coordinator-rpcs.md): a uvarint count, then
// for each field a uvarint tag, a uvarint size and that many bytes, tags
// ascending. It is the one implementation the packages of those formats
// (coordinator/records, coordinator, group, txn, rpcmsg) share; the
// fields' meanings stay with them, but for a committed batch's transaction
// fields (AppendTxn, ReadTxn), which record 102 and DisklessCommitFile
// both carry and which the import rules (DESIGN §The pieces) let neither
// package take from the other.
package tagged

import "github.com/twmb/franz-go/pkg/kbin"

// Each reads a section from r, calling field (when not nil) with each
// field's tag and bytes (a sub-slice of r's, not copied), and stops at
// field's first error, which it returns. Truncation shows in r.Ok; field
// is not called for a truncated field.
func Each(r *kbin.Reader, field func(tag uint32, v []byte) error) error {
	for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
		tag, size := r.Uvarint(), r.Uvarint()
		v := r.Span(int(size))
		if !r.Ok() || field == nil {
			continue
		}
		if err := field(tag, v); err != nil {
			return err
		}
	}
	return nil
}

// AppendNone appends an empty section (a uvarint 0) to dst.
func AppendNone(dst []byte) []byte { return kbin.AppendUvarint(dst, 0) }

// Field is one field of a section: its tag and its bytes.
type Field struct {
	Tag   uint32
	Value []byte
}

// Append appends a section holding fields, in the order given (tags
// ascending: the caller's order), to dst; no fields is an empty section.
func Append(dst []byte, fields ...Field) []byte {
	dst = kbin.AppendUvarint(dst, uint32(len(fields)))
	for _, f := range fields {
		dst = kbin.AppendUvarint(dst, f.Tag)
		dst = kbin.AppendUvarint(dst, uint32(len(f.Value)))
		dst = append(dst, f.Value...)
	}
	return dst
}

// AppendOne appends the head of a section holding one field to dst: the
// count 1, tag and the field's size in bytes. The caller appends the
// field's size bytes next.
func AppendOne(dst []byte, tag uint32, size int) []byte {
	dst = kbin.AppendUvarint(dst, 1)
	dst = kbin.AppendUvarint(dst, tag)
	return kbin.AppendUvarint(dst, uint32(size))
}
