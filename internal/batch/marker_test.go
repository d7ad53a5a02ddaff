package batch_test

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/internal/batchtest"
)

// TestMarkerDecodesAsKafkaControlBatch: a marker built by AppendMarker
// decodes with franz-go's kmsg — the batch, its one record, the
// ControlRecordKey and EndTxnMarker of KIP-98 — and its CRC checks.
func TestMarkerDecodesAsKafkaControlBatch(t *testing.T) {
	for _, commit := range []bool{true, false} {
		b := batch.AppendMarker([]byte("prefix"), 7, 3, commit, 5, 1_700_000_000_123)[len("prefix"):]
		h, n, err := batch.Parse(b)
		if err != nil || n != len(b) {
			t.Fatalf("Parse: %v (%d of %d bytes)", err, n, len(b))
		}
		if h.CRC() != batch.CRC(b[21:]) {
			t.Fatal("bad CRC")
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		if rb.Magic != 2 || rb.Attributes != 0x30 || rb.ProducerID != 7 || rb.ProducerEpoch != 3 || rb.FirstSequence != -1 ||
			rb.NumRecords != 1 || rb.LastOffsetDelta != 0 || rb.FirstTimestamp != 1_700_000_000_123 || rb.MaxTimestamp != rb.FirstTimestamp ||
			int(rb.Length)+12 != len(b) {
			t.Fatalf("batch fields: %+v", rb)
		}
		var rec kmsg.Record
		if err := rec.ReadFrom(rb.Records); err != nil {
			t.Fatal(err)
		}
		var key kmsg.ControlRecordKey
		if err := key.ReadFrom(rec.Key); err != nil {
			t.Fatal(err)
		}
		wantType := kmsg.ControlRecordKeyTypeAbort
		if commit {
			wantType = kmsg.ControlRecordKeyTypeCommit
		}
		if key.Version != 0 || key.Type != wantType {
			t.Fatalf("key %+v, want version 0 type %v", key, wantType)
		}
		var val kmsg.EndTxnMarker
		if err := val.ReadFrom(rec.Value); err != nil {
			t.Fatal(err)
		}
		if val.Version != 0 || val.CoordinatorEpoch != 5 {
			t.Fatalf("value %+v", val)
		}
		got, err := batch.ParseMarker(h)
		if err != nil || got != commit {
			t.Fatalf("ParseMarker = %v, %v; want %v", got, err, commit)
		}
	}
}

func TestParseMarkerRefuses(t *testing.T) {
	marker := batch.AppendMarker(nil, 7, 3, true, 0, 1)
	patched := func(f func(b []byte)) batch.Header {
		b := append([]byte(nil), marker...)
		f(b)
		h, _, err := batch.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	for name, h := range map[string]batch.Header{
		"data batch":        mustParse(t, batchtest.Make(batchtest.Plain(0), batchtest.Values("v", 1)...)),
		"not transactional": patched(func(b []byte) { b[22] &^= batch.AttrTransactional }),
		"compressed":        patched(func(b []byte) { b[22] |= batch.CodecGzip }),
		"two records":       patched(func(b []byte) { b[60] = 2 }),
		"unknown type":      patched(func(b []byte) { b[len(b)-9] = 5 }),
	} {
		if _, err := batch.ParseMarker(h); !errors.Is(err, batch.ErrNotMarker) {
			t.Errorf("%s: %v, want ErrNotMarker", name, err)
		}
	}
}

func mustParse(t *testing.T, b []byte) batch.Header {
	t.Helper()
	h, _, err := batch.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
