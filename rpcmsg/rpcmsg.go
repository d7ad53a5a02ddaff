// Package rpcmsg holds the coordinator RPCs' messages (SPEC §9, API keys
// 100 … 111): one request and one response type per key, each encoding
// itself with AppendTo and decoding with ReadFrom, as franz-go's kmsg does
// for Kafka's own keys. The types satisfy kmsg.Request and kmsg.Response,
// so a Kafka listener frames and answers them like any other request.
//
// Format (docs/format/coordinator-rpcs.md): Kafka's request header v2 and
// response header v1 around a flexible-version body (compact strings and
// arrays, tagged fields after every struct); version 0 of every key.
// Decoders are strict: a message that ends early, has bytes left over,
// holds a null where none is allowed or an array longer than its bytes
// could hold is refused with an error wrapping ErrMalformed, so a peer's
// damaged message never allocates more than it sent.
//
// The package knows only the wire: converting to and from the types of
// package diskless is the caller's (server on one side, the RPC client on
// the other).
package rpcmsg

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/tagged"
)

// The API keys (SPEC §9).
const (
	KeyDescribeFiles       int16 = 100
	KeyCommitFile          int16 = 101
	KeyFindBatches         int16 = 102
	KeyListOffsets         int16 = 103
	KeyDeleteRecords       int16 = 104
	KeyCreatePartitions    int16 = 105
	KeyDeleteTopics        int16 = 106
	KeyDeleteFiles         int16 = 107
	KeyAllocateProducerIDs int16 = 108
	KeyDisableTopic        int16 = 109
	KeyCheckTxn            int16 = 110
	KeyEndTxnOffsets       int16 = 111

	// MinKey and MaxKey bound the keys of this package.
	MinKey = KeyDescribeFiles
	MaxKey = KeyEndTxnOffsets
)

// DefaultDescribeFilesTimeoutMs is KIP-1164's default TimeoutMs of
// DisklessDescribeFiles.
const DefaultDescribeFilesTimeoutMs = 60000

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("rpcmsg: malformed message")

// names are the keys' names, index key − MinKey.
var names = [...]string{
	"DisklessDescribeFiles", "DisklessCommitFile", "DisklessFindBatches", "DisklessListOffsets",
	"DisklessDeleteRecords", "DisklessCreatePartitions", "DisklessDeleteTopics", "DisklessDeleteFiles",
	"DisklessAllocateProducerIds", "DisklessDisableTopic", "DisklessCheckTxn", "DisklessEndTxnOffsets",
}

// NameForKey returns the name of an API key of this package, or "" for
// any other key.
func NameForKey(key int16) string {
	if key < MinKey || key > MaxKey {
		return ""
	}
	return names[key-MinKey]
}

// RequestForKey returns a new request of key at its defaults (the
// package's New… functions), or nil for a key outside MinKey … MaxKey.
func RequestForKey(key int16) kmsg.Request {
	switch key {
	case KeyDescribeFiles:
		return NewDescribeFilesRequest()
	case KeyCommitFile:
		return NewCommitFileRequest()
	case KeyFindBatches:
		return NewFindBatchesRequest()
	case KeyListOffsets:
		return NewListOffsetsRequest()
	case KeyDeleteRecords:
		return NewDeleteRecordsRequest()
	case KeyCreatePartitions:
		return NewCreatePartitionsRequest()
	case KeyDeleteTopics:
		return NewDeleteTopicsRequest()
	case KeyDeleteFiles:
		return NewDeleteFilesRequest()
	case KeyAllocateProducerIDs:
		return NewAllocateProducerIDsRequest()
	case KeyDisableTopic:
		return NewDisableTopicRequest()
	case KeyCheckTxn:
		return NewCheckTxnRequest()
	case KeyEndTxnOffsets:
		return NewEndTxnOffsetsRequest()
	}
	return nil
}

// ResponseForKey returns a new, empty response of key, or nil for a key
// outside MinKey … MaxKey.
func ResponseForKey(key int16) kmsg.Response {
	if r := RequestForKey(key); r != nil {
		return r.ResponseKind()
	}
	return nil
}

// Header is the state every message carries: its version. Embedded, it
// gives a message the kmsg methods that do not depend on its key.
type Header struct {
	// Version is the message's version; 0 is the only one today.
	Version int16
}

// SetVersion sets the version to encode and decode.
func (h *Header) SetVersion(v int16) { h.Version = v }

// GetVersion returns the version.
func (h *Header) GetVersion() int16 { return h.Version }

// IsFlexible reports true: every version of every key is flexible.
func (h *Header) IsFlexible() bool { return true }

// maxVersion is the one version of every key.
const maxVersion = 0

// Encoding helpers. Writers write no tagged fields but the ones a message
// declares.

func appendNullableString(dst []byte, s *string) []byte {
	return kbin.AppendCompactNullableString(dst, s)
}

func appendStrings(dst []byte, ss []string) []byte {
	dst = kbin.AppendCompactArrayLen(dst, len(ss))
	for _, s := range ss {
		dst = kbin.AppendCompactString(dst, s)
	}
	return dst
}

func appendInt32s(dst []byte, vs []int32) []byte {
	dst = kbin.AppendCompactArrayLen(dst, len(vs))
	for _, v := range vs {
		dst = kbin.AppendInt32(dst, v)
	}
	return dst
}

// appendTag32 appends a tagged-field section holding one int32 field
// under tag.
func appendTag32(dst []byte, tag uint32, v int32) []byte {
	return kbin.AppendInt32(tagged.AppendOne(dst, tag, 4), v)
}

// appendTag64 is appendTag32 for an int64 field.
func appendTag64(dst []byte, tag uint32, v int64) []byte {
	return kbin.AppendInt64(tagged.AppendOne(dst, tag, 8), v)
}

// appendTag8 is appendTag32 for an int8 field.
func appendTag8(dst []byte, tag uint32, v int8) []byte {
	return kbin.AppendInt8(tagged.AppendOne(dst, tag, 1), v)
}

// appendFormatTag appends the tagged fields of a struct naming an object:
// its format under tag 0 unless it is 1, the default (or 0, which
// diskless.RunCoordinate takes for 1 too).
func appendFormatTag(dst []byte, format int8) []byte {
	if format == defaultObjectFormat || format == 0 {
		return tagged.AppendNone(dst)
	}
	return appendTag8(dst, 0, format)
}

// defaultObjectFormat is an object's format when its tag is absent:
// WRITE_AHEAD_MULTI_SEGMENT.
const defaultObjectFormat = 1

// reader decodes one message. It wraps kbin.Reader, whose failures are
// sticky, and keeps the first error of its own checks.
type reader struct {
	kbin.Reader
	err error
}

func newReader(b []byte) *reader { return &reader{Reader: kbin.Reader{Src: b}} }

// fail records the first error and empties the input, so every later
// read fails too.
func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
	}
	r.Src = nil
}

// ok reports whether no read failed so far.
func (r *reader) ok() bool { return r.err == nil && r.Reader.Ok() }

// string reads a non-null compact string (copied).
func (r *reader) string(field string) string {
	n := r.Uvarint()
	if !r.ok() {
		return ""
	}
	if n == 0 {
		r.fail("null %s", field)
		return ""
	}
	return string(r.Span(int(n - 1)))
}

// nullableString reads a compact nullable string (copied).
func (r *reader) nullableString() *string {
	n := r.Uvarint()
	if !r.ok() || n == 0 {
		return nil
	}
	s := string(r.Span(int(n - 1)))
	return &s
}

// arrayLen reads a non-null compact array length, refused when its
// elements, at least minElem bytes each, could not fit in the bytes left:
// a count read from a damaged message never makes the caller allocate
// more than the message could hold.
func (r *reader) arrayLen(field string, minElem int) int {
	n := r.Uvarint()
	if !r.ok() {
		return 0
	}
	if n == 0 {
		r.fail("null %s", field)
		return 0
	}
	l := int(n - 1)
	if l > len(r.Src)/minElem {
		r.fail("%s: %d elements in %d bytes", field, l, len(r.Src))
		return 0
	}
	return l
}

// strings reads a non-null array of non-null strings.
func (r *reader) strings(field string) []string {
	n := r.arrayLen(field, 1)
	if !r.ok() {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = r.string(field)
	}
	return out
}

// int32s reads a non-null array of int32.
func (r *reader) int32s(field string) []int32 {
	n := r.arrayLen(field, 4)
	if !r.ok() {
		return nil
	}
	out := make([]int32, n)
	for i := range out {
		out[i] = r.Int32()
	}
	return out
}

// tags reads a tagged-field section, calling known for each tag with a
// reader over exactly the field's bytes; known returns whether it read
// the field (a tag it declares), which must then consume them all.
// Unknown tags are skipped.
func (r *reader) tags(known func(tag uint32, f *reader) bool) {
	err := tagged.Each(&r.Reader, func(tag uint32, b []byte) error {
		if known == nil {
			return nil
		}
		f := newReader(b)
		if !known(tag, f) {
			return nil
		}
		if err := f.done(); err != nil {
			return fmt.Errorf("tagged field %d: %v", tag, errors.Unwrap(err))
		}
		return nil
	})
	if err != nil {
		r.fail("%v", err)
	}
}

// formatTag reads the tagged fields appendFormatTag writes and returns the
// format.
func (r *reader) formatTag() int8 {
	format := int8(defaultObjectFormat)
	r.tags(func(tag uint32, f *reader) bool {
		if tag != 0 {
			return false
		}
		format = f.Int8()
		return true
	})
	return format
}

// noTags reads a tagged-field section of a struct that declares none.
func (r *reader) noTags() { r.tags(nil) }

// done returns the first error, or one for bytes left over.
func (r *reader) done() error {
	switch {
	case r.err != nil:
		return r.err
	case !r.Reader.Ok():
		return fmt.Errorf("%w: ends early", ErrMalformed)
	case len(r.Src) > 0:
		return fmt.Errorf("%w: %d bytes after the message", ErrMalformed, len(r.Src))
	}
	return nil
}

// checkVersion refuses a version the package does not know.
func checkVersion(key, v int16) error {
	if v < 0 || v > maxVersion {
		return fmt.Errorf("%w: %s v%d (v0–v%d known)", ErrMalformed, NameForKey(key), v, maxVersion)
	}
	return nil
}

// appendTop appends the fields every response starts with.
func appendTop(dst []byte, throttle int32, code int16, msg *string) []byte {
	dst = kbin.AppendInt32(dst, throttle)
	dst = kbin.AppendInt16(dst, code)
	return appendNullableString(dst, msg)
}

// top reads the fields every response starts with.
func (r *reader) top() (throttle int32, code int16, msg *string) {
	throttle = r.Int32()
	code = r.Int16()
	return throttle, code, r.nullableString()
}
