package batch_test

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/internal/batchtest"
)

const now = int64(1_700_000_000_000)

func TestHeaderFields(t *testing.T) {
	o := batchtest.Options{Codec: batch.CodecLZ4, BaseTimestamp: now, ProducerID: 42, ProducerEpoch: 3, BaseSequence: 7}
	recs := batchtest.Values("v", 5)
	recs[4].TimestampDelta = 9
	b := batchtest.Make(o, recs...)
	h, n, err := batch.Parse(b)
	if err != nil || n != len(b) {
		t.Fatalf("Parse: n=%d err=%v", n, err)
	}
	checks := []struct {
		name      string
		got, want int64
	}{
		{"BaseOffset", h.BaseOffset(), 0},
		{"BatchLength", int64(h.BatchLength()), int64(len(b) - 12)},
		{"Magic", int64(h.Magic()), 2},
		{"Codec", int64(h.Codec()), batch.CodecLZ4},
		{"LastOffsetDelta", int64(h.LastOffsetDelta()), 4},
		{"BaseTimestamp", h.BaseTimestamp(), now},
		{"MaxTimestamp", h.MaxTimestamp(), now + 9},
		{"ProducerID", h.ProducerID(), 42},
		{"ProducerEpoch", int64(h.ProducerEpoch()), 3},
		{"BaseSequence", int64(h.BaseSequence()), 7},
		{"LastSequence", int64(h.LastSequence()), 11},
		{"RecordsCount", int64(h.RecordsCount()), 5},
		{"CRC", int64(h.CRC()), int64(h.ComputeCRC())},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
}

func TestAddSequenceWraps(t *testing.T) {
	for _, c := range []struct{ seq, delta, want int32 }{
		{0, 0, 0},
		{5, 4, 9},
		{math.MaxInt32, 1, 0},
		{math.MaxInt32 - 1, 3, 1},
	} {
		if got := batch.AddSequence(c.seq, c.delta); got != c.want {
			t.Errorf("AddSequence(%d, %d) = %d, want %d", c.seq, c.delta, got, c.want)
		}
	}
}

// TestRewriteLogAppendTime checks that the fetch-side patch yields a batch a
// client accepts: kmsg decodes it, the CRC matches, and only the patched
// fields changed.
func TestRewriteLogAppendTime(t *testing.T) {
	orig := batchtest.Make(batchtest.Options{Codec: batch.CodecGzip, BaseTimestamp: now, ProducerID: -1, BaseSequence: -1}, batchtest.Values("x", 3)...)
	b := append([]byte(nil), orig...)
	h := batch.Header(b)
	h.SetBaseOffset(1000)
	h.SetPartitionLeaderEpoch(7)
	h.SetLogAppendTime(now + 555)
	h.UpdateCRC()

	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	if rb.FirstOffset != 1000 || rb.PartitionLeaderEpoch != 7 || rb.MaxTimestamp != now+555 || rb.Attributes&batch.AttrLogAppendTime == 0 {
		t.Fatalf("patched header = %+v", rb)
	}
	if uint32(rb.CRC) != batch.CRC(b[21:]) {
		t.Fatal("CRC does not cover the patched bytes")
	}
	if string(b[batch.HeaderSize:]) != string(orig[batch.HeaderSize:]) {
		t.Fatal("records changed")
	}
}

func TestValidateProduce(t *testing.T) {
	good := func() []byte {
		return batchtest.Make(batchtest.Options{BaseTimestamp: now, ProducerID: 1, ProducerEpoch: 0, BaseSequence: 0}, batchtest.Values("v", 3)...)
	}
	// patch edits a valid batch and, unless keepCRC, fixes the CRC after.
	patch := func(keepCRC bool, fn func(b []byte)) []byte {
		b := good()
		fn(b)
		if !keepCRC {
			batch.Header(b).UpdateCRC()
		}
		return b
	}
	lim := batch.Limits{MaxBytes: 1 << 20, AllowZstd: true, CheckTimestamps: true, MinTimestamp: now - 1000, MaxTimestamp: now + 1000}
	cases := []struct {
		name    string
		records []byte
		lim     batch.Limits
		want    *kerr.Error
	}{
		{"valid", good(), lim, nil},
		{"valid without limits", good(), batch.Limits{}, nil},
		{"empty", nil, lim, kerr.InvalidRecord},
		{"too large", good(), batch.Limits{MaxBytes: 10}, kerr.MessageTooLarge},
		{"truncated header", good()[:40], lim, kerr.CorruptMessage},
		{"truncated records", good()[:len(good())-1], lim, kerr.CorruptMessage},
		{"bad length", patch(true, func(b []byte) { binary.BigEndian.PutUint32(b[8:], 3) }), lim, kerr.CorruptMessage},
		{"two batches", append(good(), good()...), lim, kerr.InvalidRecord},
		{"bad crc", patch(true, func(b []byte) { b[len(b)-1] ^= 0xff }), lim, kerr.CorruptMessage},
		{"magic 1", patch(true, func(b []byte) { b[16] = 1 }), lim, kerr.InvalidRecord},
		{"base offset not 0", patch(true, func(b []byte) { binary.BigEndian.PutUint64(b[0:], 5) }), lim, kerr.InvalidRecord},
		{"count mismatch", patch(false, func(b []byte) { binary.BigEndian.PutUint32(b[57:], 9) }), lim, kerr.InvalidRecord},
		{"zero records", patch(false, func(b []byte) {
			binary.BigEndian.PutUint32(b[57:], 0)
			binary.BigEndian.PutUint32(b[23:], math.MaxUint32)
		}), lim, kerr.InvalidRecord},
		{"control", patch(false, func(b []byte) { b[22] |= batch.AttrControl }), lim, kerr.InvalidRecord},
		{"transactional", patch(false, func(b []byte) { b[22] |= batch.AttrTransactional }), lim, kerr.InvalidRequest},
		{"producer id without sequence", patch(false, func(b []byte) { binary.BigEndian.PutUint32(b[53:], math.MaxUint32) }), lim, kerr.InvalidRecord},
		{"zstd before v7", batchtest.Make(batchtest.Options{Codec: batch.CodecZstd, BaseTimestamp: now, ProducerID: -1, BaseSequence: -1}, batchtest.Values("z", 2)...),
			batch.Limits{AllowZstd: false}, kerr.UnsupportedCompressionType},
		{"zstd at v7", batchtest.Make(batchtest.Options{Codec: batch.CodecZstd, BaseTimestamp: now, ProducerID: -1, BaseSequence: -1}, batchtest.Values("z", 2)...),
			batch.Limits{AllowZstd: true}, nil},
		{"unknown codec", patch(false, func(b []byte) { b[22] |= 0x07 }), lim, kerr.UnsupportedCompressionType},
		{"client sets LogAppendTime", patch(false, func(b []byte) { b[22] |= batch.AttrLogAppendTime }), lim, kerr.InvalidTimestamp},
		{"timestamp too new", batchtest.Make(batchtest.Plain(now+5000), batchtest.Values("t", 1)...), lim, kerr.InvalidTimestamp},
		{"timestamp too old", batchtest.Make(batchtest.Plain(now-5000), batchtest.Values("t", 1)...), lim, kerr.InvalidTimestamp},
		{"max timestamp too new", batchtest.Make(batchtest.Plain(now), batchtest.Record{Value: []byte("a")}, batchtest.Record{Value: []byte("b"), TimestampDelta: 5000}), lim, kerr.InvalidTimestamp},
		{"no timestamp is legal", batchtest.Make(batchtest.Plain(-1), batchtest.Values("t", 1)...), lim, nil},
		{"old timestamp on LogAppendTime topic", batchtest.Make(batchtest.Plain(now-5000), batchtest.Values("t", 1)...),
			batch.Limits{CheckTimestamps: false}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, err := batch.ValidateProduce(c.records, c.lim)
			if err != c.want {
				t.Fatalf("ValidateProduce = %v, want %v", err, c.want)
			}
			if err == nil && len(h) != len(c.records) {
				t.Fatalf("view is %d bytes, want %d", len(h), len(c.records))
			}
		})
	}
}

func TestWindowMsClamps(t *testing.T) {
	lo, hi := batch.WindowMs(now, math.MaxInt64, math.MaxInt64)
	if lo != now-math.MaxInt64 || hi != math.MaxInt64 {
		t.Fatalf("WindowMs(unlimited) = [%d, %d]", lo, hi)
	}
	lo, hi = batch.WindowMs(now, 10, 20)
	if lo != now-10 || hi != now+20 {
		t.Fatalf("WindowMs = [%d, %d]", lo, hi)
	}
}

func TestWalkFraming(t *testing.T) {
	a := batchtest.Make(batchtest.Plain(now), batchtest.Values("a", 2)...)
	b := batchtest.Make(batchtest.Plain(now), batchtest.Values("b", 3)...)
	both := append(append([]byte(nil), a...), b...)
	var sizes []int
	if err := batch.Walk(both, func(h batch.Header) error { sizes = append(sizes, h.Len()); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(sizes) != 2 || sizes[0] != len(a) || sizes[1] != len(b) {
		t.Fatalf("sizes = %v", sizes)
	}
	if err := batch.Walk(both[:len(both)-3], func(batch.Header) error { return nil }); !errors.Is(err, batch.ErrShort) {
		t.Fatalf("trailing partial batch: err = %v", err)
	}
}

// FuzzValidateProduce feeds arbitrary bytes to the produce validator: it
// must never panic, and whatever it accepts must parse back to itself.
func FuzzValidateProduce(f *testing.F) {
	f.Add(batchtest.Make(batchtest.Plain(now), batchtest.Values("v", 2)...))
	f.Add(batchtest.Make(batchtest.Options{Codec: batch.CodecSnappy, BaseTimestamp: now, ProducerID: 3, BaseSequence: 0}, batchtest.Values("v", 4)...))
	f.Add([]byte{})
	f.Add(make([]byte, 61))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := batch.ValidateProduce(b, batch.Limits{AllowZstd: true})
		if err != nil {
			return
		}
		if h.Len() != len(b) || h.ComputeCRC() != h.CRC() || h.Magic() != 2 {
			t.Fatalf("accepted a batch that does not hold together: %x", b)
		}
	})
}
