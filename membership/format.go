package membership

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// The member metadata and the assignment of docs/format/membership.md.

// formatVersion is the one version of both encodings.
const formatVersion = 0

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("membership: malformed bytes")

// Member is one member of a generation: a sidecar and the member id Kafka
// gave it.
type Member struct {
	MemberID string
	diskless.Sidecar
	// StartTimeMs is when the member's process started (ms since the
	// Unix epoch).
	StartTimeMs int64
}

// appendMetadata appends a member's metadata (what it announces).
func appendMetadata(dst []byte, s diskless.Sidecar, startMs int64) []byte {
	dst = kbin.AppendInt16(dst, formatVersion)
	return appendSidecar(dst, s, startMs)
}

func appendSidecar(dst []byte, s diskless.Sidecar, startMs int64) []byte {
	dst = kbin.AppendInt32(dst, s.NodeID)
	dst = kbin.AppendCompactString(dst, s.Host)
	dst = kbin.AppendInt32(dst, s.Port)
	var rack *string
	if s.Rack != "" {
		rack = &s.Rack
	}
	dst = kbin.AppendCompactNullableString(dst, rack)
	dst = kbin.AppendInt64(dst, startMs)
	if s.Listeners == "" {
		return kbin.AppendUvarint(dst, 0) // no tagged fields
	}
	// Tag 0: the listeners (docs/format/membership.md).
	dst = kbin.AppendUvarint(dst, 1)
	dst = kbin.AppendUvarint(dst, tagListeners)
	dst = kbin.AppendUvarint(dst, uint32(len(kbin.AppendCompactString(nil, s.Listeners))))
	return kbin.AppendCompactString(dst, s.Listeners)
}

// tagListeners is the tag of a sidecar's listeners.
const tagListeners = 0

// decodeMetadata reads a member's metadata.
func decodeMetadata(b []byte) (diskless.Sidecar, int64, error) {
	r := &kbin.Reader{Src: b}
	if v := r.Int16(); r.Ok() && v != formatVersion {
		return diskless.Sidecar{}, 0, fmt.Errorf("%w: metadata version %d", ErrMalformed, v)
	}
	s, start, err := readSidecar(r)
	if err != nil {
		return s, start, err
	}
	return s, start, done(r)
}

func readSidecar(r *kbin.Reader) (diskless.Sidecar, int64, error) {
	var s diskless.Sidecar
	s.NodeID = r.Int32()
	host, err := readString(r)
	if err != nil {
		return s, 0, err
	}
	s.Host = host
	s.Port = r.Int32()
	if rack := r.CompactNullableString(); rack != nil {
		s.Rack = *rack
	}
	start := r.Int64()
	for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
		tag, size := r.Uvarint(), r.Uvarint()
		field := &kbin.Reader{Src: r.Span(int(size))}
		if tag == tagListeners && r.Ok() {
			if l, err := readString(field); err == nil && len(field.Src) == 0 {
				s.Listeners = l
			} else {
				return s, 0, fmt.Errorf("%w: listeners tag", ErrMalformed)
			}
		}
	}
	if !r.Ok() {
		return s, 0, fmt.Errorf("%w: ends early", ErrMalformed)
	}
	if s.NodeID < 0 || s.Port < 1 || s.Port > 65535 || s.Host == "" {
		return s, 0, fmt.Errorf("%w: node id %d, listener %q:%d", ErrMalformed, s.NodeID, s.Host, s.Port)
	}
	return s, start, nil
}

// appendAssignment appends the members of a generation, sorted as the
// format requires.
func appendAssignment(dst []byte, members []Member) []byte {
	ms := slices.Clone(members)
	sortMembers(ms)
	dst = kbin.AppendInt16(dst, formatVersion)
	dst = kbin.AppendCompactArrayLen(dst, len(ms))
	for _, m := range ms {
		dst = kbin.AppendCompactString(dst, m.MemberID)
		dst = appendSidecar(dst, m.Sidecar, m.StartTimeMs)
	}
	return kbin.AppendUvarint(dst, 0)
}

// sortMembers sorts by node id, then member id.
func sortMembers(ms []Member) {
	slices.SortFunc(ms, func(a, b Member) int {
		if c := cmp.Compare(a.NodeID, b.NodeID); c != 0 {
			return c
		}
		return cmp.Compare(a.MemberID, b.MemberID)
	})
}

// minMemberSize is the smallest encoded Member: empty member id, a
// one-byte host, null rack, no tags.
const minMemberSize = 1 + 4 + 2 + 4 + 1 + 8 + 1

// decodeAssignment reads the members of a generation.
func decodeAssignment(b []byte) ([]Member, error) {
	r := &kbin.Reader{Src: b}
	if v := r.Int16(); r.Ok() && v != formatVersion {
		return nil, fmt.Errorf("%w: assignment version %d", ErrMalformed, v)
	}
	n := r.Uvarint()
	if !r.Ok() || n == 0 {
		return nil, fmt.Errorf("%w: no member array", ErrMalformed)
	}
	if int(n-1) > len(r.Src)/minMemberSize {
		return nil, fmt.Errorf("%w: %d members in %d bytes", ErrMalformed, n-1, len(r.Src))
	}
	out := make([]Member, n-1)
	for i := range out {
		id, err := readString(r)
		if err != nil {
			return nil, err
		}
		s, start, err := readSidecar(r)
		if err != nil {
			return nil, err
		}
		out[i] = Member{MemberID: id, Sidecar: s, StartTimeMs: start}
	}
	skipTags(r)
	if err := done(r); err != nil {
		return nil, err
	}
	if !slices.IsSortedFunc(out, func(a, b Member) int {
		if c := cmp.Compare(a.NodeID, b.NodeID); c != 0 {
			return c
		}
		return cmp.Compare(a.MemberID, b.MemberID)
	}) {
		return nil, fmt.Errorf("%w: members not sorted by node id and member id", ErrMalformed)
	}
	return out, nil
}

func readString(r *kbin.Reader) (string, error) {
	n := r.Uvarint()
	if !r.Ok() {
		return "", fmt.Errorf("%w: ends early", ErrMalformed)
	}
	if n == 0 {
		return "", fmt.Errorf("%w: null string", ErrMalformed)
	}
	s := r.Span(int(n - 1))
	if !r.Ok() {
		return "", fmt.Errorf("%w: ends early", ErrMalformed)
	}
	return string(s), nil
}

func skipTags(r *kbin.Reader) { kmsg.SkipTags(r) }

// done refuses a reader that ran out or has bytes left.
func done(r *kbin.Reader) error {
	if !r.Ok() {
		return fmt.Errorf("%w: ends early", ErrMalformed)
	}
	if len(r.Src) > 0 {
		return fmt.Errorf("%w: %d bytes after the end", ErrMalformed, len(r.Src))
	}
	return nil
}

// sidecars is the view a member list gives (docs/format/membership.md:
// one sidecar per node id, the one started last): the sidecars sorted by
// node id, and the members left out.
func sidecars(ms []Member) (view []diskless.Sidecar, left []Member) {
	byNode := make(map[int32]int) // node id → index into ms of the winner
	for i, m := range ms {
		j, ok := byNode[m.NodeID]
		if !ok {
			byNode[m.NodeID] = i
			continue
		}
		w := ms[j]
		if m.StartTimeMs > w.StartTimeMs || (m.StartTimeMs == w.StartTimeMs && m.MemberID < w.MemberID) {
			byNode[m.NodeID] = i
		}
	}
	for i, m := range ms {
		if byNode[m.NodeID] == i {
			view = append(view, m.Sidecar)
		} else {
			left = append(left, m)
		}
	}
	slices.SortFunc(view, func(a, b diskless.Sidecar) int { return cmp.Compare(a.NodeID, b.NodeID) })
	return view, left
}
