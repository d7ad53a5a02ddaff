package coordinator

import (
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/metalog"
)

var (
	testTopicA = diskless.TopicID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	testTopicB = diskless.TopicID{0xff, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0xee}
)

func sampleRecords() map[string]record {
	b := committedBatch{
		Magic: 2, ByteOffset: 10, ByteSize: 200, AssignedBaseOffset: 5, AssignedLastOffset: 9,
		LogAppendTimestamp: 1_700_000_000_000, BatchMaxTimestamp: 1_699_999_999_000, TimestampType: 1,
		ProducerID: 42, ProducerEpoch: 3, BaseSequence: 7, LastSequence: 11,
	}
	b2 := b
	b2.ByteOffset, b2.AssignedBaseOffset, b2.AssignedLastOffset = 210, 10, 10
	return map[string]record{
		"partition created": &partitionCreatedRecord{TopicID: testTopicA, TopicName: "orders", Partition: 7},
		"topic deleted":     &topicDeletedRecord{TopicID: testTopicB},
		"file committed": &fileCommittedRecord{
			ObjectKey: "wal/abc", ObjectFormat: 1, FileSize: 4096, UploaderBrokerID: 3, OwnerIDs: []int32{0, 2},
			Topics: []fileTopic{
				{TopicID: testTopicA, Partitions: []filePartition{{Partition: 0, Batches: []committedBatch{b, b2}}, {Partition: 3, Batches: []committedBatch{b}}}},
				{TopicID: testTopicB, Partitions: []filePartition{{Partition: 1, Batches: []committedBatch{b2}}}},
			},
		},
		"records deleted": &recordsDeletedRecord{TopicID: testTopicA, Partition: 2, NewLogStartOffset: 1234},
		"topic config": &topicConfigRecord{TopicID: testTopicA, TopicName: "orders", NumPartitions: 12,
			Configs: []topicConfigEntry{{"max.message.bytes", "2000"}, {"retention.ms", "-1"}}},
		"topic config no configs": &topicConfigRecord{TopicID: testTopicB, TopicName: "x", NumPartitions: 1, Configs: []topicConfigEntry{}},
		"producer id block":       &producerIDBlockRecord{NodeID: 4, FirstProducerID: 3000, BlockSize: 1000},
		"file deleted":            &fileDeletedRecord{ObjectKey: "wal/abc", DeleterShard: 2},
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for name, rec := range sampleRecords() {
		t.Run(name, func(t *testing.T) {
			body := appendRecord(nil, rec)
			got, err := decodeRecord(body)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(got, rec) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, rec)
			}
			if got.key() != rec.key() {
				t.Fatalf("key %d, want %d", got.key(), rec.key())
			}
		})
	}
}

// TestRecordBodyLayout pins the start of the encoding: KRaft's frame
// version, key and version, then the fields.
func TestRecordBodyLayout(t *testing.T) {
	body := appendRecord(nil, &producerIDBlockRecord{NodeID: 1, FirstProducerID: 2, BlockSize: 3})
	want := []byte{
		1, 105, 0, // frame version, key, version
		0, 0, 0, 1, // NodeId
		0, 0, 0, 0, 0, 0, 0, 2, // FirstProducerId
		0, 0, 0, 3, // BlockSize
		0, // tagged fields
	}
	if !reflect.DeepEqual(body, want) {
		t.Fatalf("body % x\nwant % x", body, want)
	}
}

// TestFileDeletedLayout pins record 106 (docs/format/metadata-records.md).
func TestFileDeletedLayout(t *testing.T) {
	body := appendRecord(nil, &fileDeletedRecord{ObjectKey: "w/k", DeleterShard: 3})
	want := []byte{
		1, 106, 0, // frame version, key, version
		4, 'w', '/', 'k', // ObjectKey
		0, 0, 0, 3, // DeleterShard
		0, // tagged fields
	}
	if !reflect.DeepEqual(body, want) {
		t.Fatalf("body % x\nwant % x", body, want)
	}
}

func TestRecordSkipsUnknownTaggedFields(t *testing.T) {
	body := appendRecord(nil, &recordsDeletedRecord{TopicID: testTopicA, Partition: 1, NewLogStartOffset: 9})
	// Replace the empty tag section by one holding tag 7 with 3 bytes.
	body = append(body[:len(body)-1], 1, 7, 3, 'a', 'b', 'c')
	got, err := decodeRecord(body)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if r := got.(*recordsDeletedRecord); r.NewLogStartOffset != 9 || r.Partition != 1 {
		t.Fatalf("got %+v", r)
	}
}

func TestDecodeRecordCorruption(t *testing.T) {
	good := appendRecord(nil, sampleRecords()["file committed"])
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := []struct {
		name string
		body []byte
	}{
		{"empty", nil},
		{"frame version only", []byte{1}},
		{"bad frame version", mutate(func(b []byte) []byte { b[0] = 2; return b })},
		{"unknown key", mutate(func(b []byte) []byte { b[1] = 99; return b })},
		{"unsupported version", mutate(func(b []byte) []byte { b[2] = 1; return b })},
		{"truncated by one", good[:len(good)-1]},
		{"truncated in header fields", good[:8]},
		{"trailing byte", append(append([]byte(nil), good...), 0)},
		{"null object key", mutate(func(b []byte) []byte { b[3] = 0; return b })},
		{"huge object key length", mutate(func(b []byte) []byte {
			return append(append(b[:3:3], 0xff, 0xff, 0xff, 0xff, 0x0f), b[4:]...)
		})},
		{"overlong uvarint key", []byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0}},
		{"null array", appendRecord(nil, &fileCommittedRecord{ObjectKey: "k"})[:3+2+1+8+4]},
	}
	// The last case needs an explicit null OwnerIds array.
	cases[len(cases)-1].body = append(cases[len(cases)-1].body, 0)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := decodeRecord(tc.body)
			if err == nil {
				t.Fatalf("decoded %#v, want error", rec)
			}
			if !errors.Is(err, errBadRecord) {
				t.Fatalf("error %v does not wrap errBadRecord", err)
			}
		})
	}
	// Every strict prefix of every record fails.
	for name, rec := range sampleRecords() {
		body := appendRecord(nil, rec)
		for n := range len(body) {
			if _, err := decodeRecord(body[:n]); err == nil {
				t.Fatalf("%s: prefix of %d/%d bytes decoded", name, n, len(body))
			}
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	for _, rec := range sampleRecords() {
		f.Add(appendRecord(nil, rec))
	}
	f.Add([]byte{1, 102, 0, 0})
	f.Fuzz(func(t *testing.T, body []byte) {
		rec, err := decodeRecord(body)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to something that decodes equal
		// (tagged fields are dropped, so the bytes may differ).
		again, err := decodeRecord(appendRecord(nil, rec))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(rec, again) {
			t.Fatalf("re-decode differs:\n%#v\n%#v", rec, again)
		}
		// Applying it to an empty state must not panic.
		newState(0, DefaultProducerIDExpirationMs, discardLogger()).apply(rec)
	})
}

// TestReaderArrayBound checks that a huge array count is refused before
// allocating.
func TestReaderArrayBound(t *testing.T) {
	r := &kbin.Reader{Src: kbin.AppendUvarint(nil, 1<<31)}
	if _, err := readArrayLen(r, 1); err == nil {
		t.Fatal("accepted an array longer than its input")
	}
}

// maxEncodedBatchBytes bounds one batch's share of record 102: the batch
// itself, and its partition's and topic's headers if alone, so that
// diskless.MaxCommitBatches of them stay below metalog.MaxRecordBytes.
const maxEncodedBatchBytes = 100

// TestFileRecordSizeBound checks the bound MaxCommitBatches relies on: in
// the worst layout (every batch in its own topic) a batch costs at most
// maxEncodedBatchBytes of record 102.
func TestFileRecordSizeBound(t *testing.T) {
	const n = 20000
	rec := &fileCommittedRecord{ObjectKey: "k", ObjectFormat: 1, OwnerIDs: []int32{0}}
	for i := range n {
		id := diskless.TopicID{byte(i), byte(i >> 8), 1}
		rec.Topics = append(rec.Topics, fileTopic{TopicID: id, Partitions: []filePartition{{
			Partition: math.MaxInt32, Batches: []committedBatch{{ProducerID: math.MaxInt64, AssignedBaseOffset: math.MaxInt64}}}}})
	}
	per := len(appendRecord(nil, rec)) / n
	if per > maxEncodedBatchBytes {
		t.Fatalf("%d bytes per batch, bound is %d", per, maxEncodedBatchBytes)
	}
	if diskless.MaxCommitBatches*maxEncodedBatchBytes+diskless.MaxObjectKeyBytes+4*MaxShards+64 > metalog.MaxRecordBytes {
		t.Fatal("MaxCommitBatches does not fit in MaxRecordBytes")
	}
}
