package batch_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/internal/batchtest"
	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
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

// TestMarkerMatchesKafka: the ABORT marker Apache Kafka 4.4 writes after a
// transactional produce is aborted is, from its CRC on, the bytes
// AppendMarker builds for the same producer, coordinator epoch and time
// (SPEC §15's "Markers" fact).
func TestMarkerMatchesKafka(t *testing.T) {
	kafkatest.Require(t)
	kc := kafkatest.Start(t, kafkatest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.BootstrapServers()), kgo.TransactionalID("marker"), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ct := kmsg.NewPtrCreateTopicsRequest()
	tt := kmsg.NewCreateTopicsRequestTopic()
	tt.Topic, tt.NumPartitions, tt.ReplicationFactor = "t", 1, 1
	ct.Topics = append(ct.Topics, tt)
	cr, err := ct.RequestWith(ctx, cl)
	if err != nil || cr.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics: %v %+v", err, cr)
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, kgo.StringRecord("v")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}

	// Fetch the partition raw (read_uncommitted) until the marker shows.
	for {
		fr := kmsg.NewPtrFetchRequest()
		fr.MaxWaitMillis, fr.MaxBytes = 500, 1<<20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = "t", cr.Topics[0].TopicID
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 0, 1<<20, -1
		ft.Partitions = append(ft.Partitions, fp)
		fr.Topics = append(fr.Topics, ft)
		resp, err := fr.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("Fetch: error %d", code)
		}
		for b := resp.Topics[0].Partitions[0].RecordBatches; len(b) > 0; {
			h, n, err := batch.Parse(b)
			if err != nil {
				t.Fatal(err)
			}
			kafka := b[:n]
			b = b[n:]
			if h.Attributes()&batch.AttrControl == 0 {
				continue
			}
			var rb kmsg.RecordBatch
			var rec kmsg.Record
			var val kmsg.EndTxnMarker
			if err := rb.ReadFrom(kafka); err != nil {
				t.Fatal(err)
			}
			if err := rec.ReadFrom(rb.Records); err != nil {
				t.Fatal(err)
			}
			if err := val.ReadFrom(rec.Value); err != nil {
				t.Fatal(err)
			}
			ours := batch.AppendMarker(nil, h.ProducerID(), h.ProducerEpoch(), false, val.CoordinatorEpoch, h.BaseTimestamp())
			if !bytes.Equal(kafka[17:], ours[17:]) {
				t.Fatalf("Kafka's marker from its CRC on:\n% x\nAppendMarker's:\n% x", kafka[17:], ours[17:])
			}
			if commit, err := batch.ParseMarker(h); err != nil || commit {
				t.Fatalf("ParseMarker of Kafka's ABORT marker: %v %v", commit, err)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("no marker fetched")
		default:
		}
	}
}
