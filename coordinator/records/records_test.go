package records

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"

	"github.com/diskless-sidecar/sidecar/diskless"
)

var (
	testTopicA = diskless.TopicID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	testTopicB = diskless.TopicID{0xff, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0xee}
)

func sampleRecords() map[string]Record {
	b := CommittedBatch{
		Magic: 2, ByteOffset: 10, ByteSize: 200, AssignedBaseOffset: 5, AssignedLastOffset: 9,
		LogAppendTimestamp: 1_700_000_000_000, BatchMaxTimestamp: 1_699_999_999_000, TimestampType: 1,
		ProducerID: 42, ProducerEpoch: 3, BaseSequence: 7, LastSequence: 11,
	}
	b2 := b
	b2.ByteOffset, b2.AssignedBaseOffset, b2.AssignedLastOffset = 210, 10, 10
	b3 := b2
	b3.Txn, b3.TxnSeq = 1, 1<<40 // both tagged fields
	b4 := b2
	b4.Txn, b4.TxnSeq, b4.CoordinatorEpoch = 2, 0, 7 // a marker of unknown token
	b5 := b2
	b5.Txn, b5.TxnSeq, b5.CoordinatorEpoch = 3, 5, -1 // a marker of no coordinator epoch
	return map[string]Record{
		"partition created": &PartitionCreated{TopicID: testTopicA, TopicName: "orders", Partition: 7},
		"topic deleted":     &TopicDeleted{TopicID: testTopicB},
		"file committed": &FileCommitted{
			ObjectKey: "wal/abc", ObjectFormat: 1, FileSize: 4096, UploaderBrokerID: 3, OwnerIDs: []int32{0, 2},
			Topics: []FileTopic{
				{TopicID: testTopicA, Partitions: []FilePartition{{Partition: 0, Batches: []CommittedBatch{b, b2}}, {Partition: 3, Batches: []CommittedBatch{b}}}},
				{TopicID: testTopicB, Partitions: []FilePartition{{Partition: 1, Batches: []CommittedBatch{b2, b3, b4, b5}}}},
			},
		},
		"records deleted": &RecordsDeleted{TopicID: testTopicA, Partition: 2, NewLogStartOffset: 1234},
		"topic config": &TopicConfig{TopicID: testTopicA, TopicName: "orders", NumPartitions: 12,
			Configs: []TopicConfigEntry{{Name: "max.message.bytes", Value: "2000"}, {Name: "retention.ms", Value: "-1"}}},
		"topic config no configs": &TopicConfig{TopicID: testTopicB, TopicName: "x", NumPartitions: 1, Configs: []TopicConfigEntry{}},
		"producer id block":       &ProducerIDBlock{NodeID: 4, FirstProducerID: 3000, BlockSize: 1000},
		"file deleted":            &FileDeleted{ObjectKey: "wal/abc", DeleterShard: 2},
		"topic disablement":       &TopicDisablement{TopicID: testTopicA, State: 1, Epoch: 3, Policy: 1},
		"topic purged":            &TopicPurged{TopicID: testTopicB},
		"segment committed": &SegmentCommitted{ObjectKey: "wal/def", ObjectFormat: 2, FileSize: 5000, TopicID: testTopicA,
			Partition: 3, BaseOffset: 100, LastOffset: 199, DataSize: 4800, IndexEntries: 4, MaxTimestamp: 1_700_000_000_500,
			AppendTime: 1_700_000_001_000, TimestampType: 1, ReplacedRuns: 17, CommitTimestamp: 1_700_000_300_000},
		"scram credential": &ScramCredential{Name: "alice", Mechanism: 2, Iterations: 8192, Salt: []byte("salt-bytes"),
			StoredKey: bytes.Repeat([]byte{1}, 64), ServerKey: bytes.Repeat([]byte{2}, 64)},
		"scram credential removed": &ScramCredential{Name: "bob", Mechanism: 1},
		"acl": &ACL{ResourceType: 2, ResourceName: "orders-", PatternType: 4, Principal: "User:alice", Host: "*",
			Operation: 3, PermissionType: 3},
		"acl removed": &ACL{ResourceType: 4, ResourceName: "kafka-cluster", PatternType: 3, Principal: "User:*",
			Host: "10.0.0.1", Operation: 7, PermissionType: 2, Removed: true},
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for name, rec := range sampleRecords() {
		t.Run(name, func(t *testing.T) {
			body := Append(nil, rec)
			got, err := Decode(body)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(got, rec) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, rec)
			}
			if got.Key() != rec.Key() {
				t.Fatalf("key %d, want %d", got.Key(), rec.Key())
			}
		})
	}
}

// TestMarkerCoordinatorEpoch pins a marker's coordinator epoch in record
// 102 (tag 2, an int32, written for every marker) and reads a marker
// written before it (no tag 2) as −1, any other batch as 0
// (docs/format/metadata-records.md §102).
func TestMarkerCoordinatorEpoch(t *testing.T) {
	m := CommittedBatch{Magic: 2, ByteSize: 61, ProducerID: 7, BaseSequence: -1, LastSequence: -1, Txn: 3, CoordinatorEpoch: 5}
	b := m.AppendTo(nil)
	// Two tags: 0 (size 1, ABORT), 2 (size 4, the epoch).
	if tail := b[len(b)-10:]; !bytes.Equal(tail, []byte{2, 0, 1, 3, 2, 4, 0, 0, 0, 5}) {
		t.Fatalf("a marker's tagged fields % x", tail)
	}
	read := func(b []byte) CommittedBatch {
		var got CommittedBatch
		r := kbin.Reader{Src: b}
		err := got.ReadFrom(&r)
		if err != nil || !r.Ok() || len(r.Src) != 0 {
			t.Fatalf("ReadFrom % x: %v, ok %v, %d bytes left", b, err, r.Ok(), len(r.Src))
		}
		return got
	}
	if got := read(b); got != m {
		t.Fatalf("round trip %+v, want %+v", got, m)
	}
	old := append(b[:len(b)-10:len(b)-10], 1, 0, 1, 3)
	if got := read(old); got.CoordinatorEpoch != -1 || got.Txn != 3 {
		t.Fatalf("a marker without tag 2: %+v, want coordinator epoch -1", got)
	}
	data := m
	data.Txn, data.CoordinatorEpoch = 1, 9
	if got := read(data.AppendTo(nil)); got.CoordinatorEpoch != 0 {
		t.Fatalf("a transactional batch's coordinator epoch %d, want 0 (not written)", got.CoordinatorEpoch)
	}
}

// TestMarkerCoordinatorEpochStrict: record 102's tag 2 is a marker's
// coordinator epoch only — a data batch carrying one reads it as 0, as the
// format says (else the record re-encodes to a different one: tag 2 is
// written for markers only) — and the decoder refuses a tag 2 not of 4
// bytes, a tag 0 not of 1, a tag 1 not of 8 (docs/format/metadata-records.md
// §102).
func TestMarkerCoordinatorEpochStrict(t *testing.T) {
	base := CommittedBatch{Magic: 2, ByteSize: 61, ProducerID: 7, BaseSequence: -1, LastSequence: -1}
	// body is record 102 of one batch b whose tagged fields are tags.
	body := func(b CommittedBatch, tags ...byte) []byte {
		enc := b.AppendTo(nil)
		n := 1 + 3 // the tag count, Txn's tag
		if b.Txn == 2 || b.Txn == 3 {
			n += 6 // tag 2
		}
		batch := append(enc[:len(enc)-n:len(enc)-n], tags...)
		rec := &FileCommitted{ObjectKey: "k", FileSize: 100, OwnerIDs: []int32{},
			Topics: []FileTopic{{TopicID: testTopicA, Partitions: []FilePartition{{Partition: 0, Batches: []CommittedBatch{b}}}}}}
		full := Append(nil, rec)
		i := bytes.Index(full, enc)
		if i < 0 {
			t.Fatal("batch not found in its record")
		}
		return append(append(append([]byte(nil), full[:i]...), batch...), full[i+len(enc):]...)
	}
	data := base
	data.Txn = 1
	rec, err := Decode(body(data, 2, 0, 1, 1, 2, 4, 0, 0, 0, 9))
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.(*FileCommitted).Topics[0].Partitions[0].Batches[0]; got.CoordinatorEpoch != 0 {
		t.Fatalf("a data batch with a tag 2: coordinator epoch %d, want 0", got.CoordinatorEpoch)
	}
	again, err := Decode(Append(nil, rec))
	if err != nil || !reflect.DeepEqual(again, rec) {
		t.Fatalf("re-decoded %+v (%v), want %+v", again, err, rec)
	}
	marker := base
	marker.Txn = 2
	for name, tags := range map[string][]byte{
		"of 8 bytes": {2, 0, 1, 2, 2, 8, 0, 0, 0, 0, 0, 0, 0, 5},
		"of 2 bytes": {2, 0, 1, 2, 2, 2, 0, 5},
		// Txn of 2 bytes, TxnSeq of 4: refused as the RPC refuses them
		// (docs/format/coordinator-rpcs.md §101), not read as a data
		// batch without a token.
		"with a Txn of 2 bytes":    {2, 0, 2, 0, 2, 2, 4, 0, 0, 0, 5},
		"with a TxnSeq of 4 bytes": {3, 0, 1, 2, 1, 4, 0, 0, 0, 1, 2, 4, 0, 0, 0, 5},
	} {
		if rec, err := Decode(body(marker, tags...)); !errors.Is(err, ErrBadRecord) {
			t.Fatalf("a marker's coordinator epoch %s: decoded %+v, %v; want ErrBadRecord", name, rec, err)
		}
	}
}

// TestRecordBodyLayout pins the start of the encoding: KRaft's frame
// version, key and version, then the fields.
func TestRecordBodyLayout(t *testing.T) {
	body := Append(nil, &ProducerIDBlock{NodeID: 1, FirstProducerID: 2, BlockSize: 3})
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

// TestFileDeletedLayout pins record 106 (docs/format/metadata-md).
func TestFileDeletedLayout(t *testing.T) {
	body := Append(nil, &FileDeleted{ObjectKey: "w/k", DeleterShard: 3})
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

// TestScramCredentialLayout pins record 116 (docs/format/metadata-records.md).
func TestScramCredentialLayout(t *testing.T) {
	body := Append(nil, &ScramCredential{Name: "al", Mechanism: 1, Iterations: 4096, Salt: []byte{7}, StoredKey: []byte{8, 9}, ServerKey: []byte{10}})
	want := []byte{
		1, 116, 0, // frame version, key, version
		3, 'a', 'l', // Name
		1,             // Mechanism SCRAM-SHA-256
		0, 0, 0x10, 0, // Iterations
		2, 7, // Salt
		3, 8, 9, // StoredKey
		2, 10, // ServerKey
		0, // tagged fields
	}
	if !reflect.DeepEqual(body, want) {
		t.Fatalf("body % x\nwant % x", body, want)
	}
}

// TestACLLayout pins record 117 (docs/format/metadata-records.md).
func TestACLLayout(t *testing.T) {
	body := Append(nil, &ACL{ResourceType: 2, ResourceName: "t", PatternType: 3, Principal: "User:a", Host: "*",
		Operation: 4, PermissionType: 3, Removed: true})
	want := []byte{
		1, 117, 0, // frame version, key, version
		2,      // ResourceType TOPIC
		2, 't', // ResourceName
		3,                               // PatternType LITERAL
		7, 'U', 's', 'e', 'r', ':', 'a', // Principal
		2, '*', // Host
		4, // Operation WRITE
		3, // PermissionType ALLOW
		1, // Removed
		0, // tagged fields
	}
	if !reflect.DeepEqual(body, want) {
		t.Fatalf("body % x\nwant % x", body, want)
	}
}

func TestTopicDisablementLayout(t *testing.T) {
	id := [16]byte{15: 9}
	body := Append(nil, &TopicDisablement{TopicID: id, State: 2, Epoch: 5, Policy: 1})
	want := append([]byte{1, 111, 0}, id[:]...) // frame version, key, version; TopicId
	want = append(want,
		2,          // State DISABLED
		0, 0, 0, 5, // Epoch
		1, // Policy delete
		0, // tagged fields
	)
	if !reflect.DeepEqual(body, want) {
		t.Fatalf("body % x\nwant % x", body, want)
	}
	if got := Append(nil, &TopicPurged{TopicID: id}); !reflect.DeepEqual(got, append(append([]byte{1, 112, 0}, id[:]...), 0)) {
		t.Fatalf("record 112 % x", got)
	}
}

func TestRecordSkipsUnknownTaggedFields(t *testing.T) {
	body := Append(nil, &RecordsDeleted{TopicID: testTopicA, Partition: 1, NewLogStartOffset: 9})
	// Replace the empty tag section by one holding tag 7 with 3 bytes.
	body = append(body[:len(body)-1], 1, 7, 3, 'a', 'b', 'c')
	got, err := Decode(body)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if r := got.(*RecordsDeleted); r.NewLogStartOffset != 9 || r.Partition != 1 {
		t.Fatalf("got %+v", r)
	}
}

func TestDecodeRecordCorruption(t *testing.T) {
	good := Append(nil, sampleRecords()["file committed"])
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
		{"null array", Append(nil, &FileCommitted{ObjectKey: "k"})[:3+2+1+8+4]},
	}
	// The last case needs an explicit null OwnerIds array.
	cases[len(cases)-1].body = append(cases[len(cases)-1].body, 0)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := Decode(tc.body)
			if err == nil {
				t.Fatalf("decoded %#v, want error", rec)
			}
			if !errors.Is(err, ErrBadRecord) {
				t.Fatalf("error %v does not wrap errBadRecord", err)
			}
		})
	}
	// Every strict prefix of every record fails.
	for name, rec := range sampleRecords() {
		body := Append(nil, rec)
		for n := range len(body) {
			if _, err := Decode(body[:n]); err == nil {
				t.Fatalf("%s: prefix of %d/%d bytes decoded", name, n, len(body))
			}
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	for _, rec := range sampleRecords() {
		f.Add(Append(nil, rec))
	}
	f.Add([]byte{1, 102, 0, 0})
	f.Fuzz(func(t *testing.T, body []byte) {
		rec, err := Decode(body)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to something that decodes equal
		// (tagged fields are dropped, so the bytes may differ).
		again, err := Decode(Append(nil, rec))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(rec, again) {
			t.Fatalf("re-decode differs:\n%#v\n%#v", rec, again)
		}
	})
}

// TestReaderArrayBound checks that a huge array count is refused before
// allocating.
func TestReaderArrayBound(t *testing.T) {
	r := &kbin.Reader{Src: kbin.AppendUvarint(nil, 1<<31)}
	if _, err := ReadArrayLen(r, 1); err == nil {
		t.Fatal("accepted an array longer than its input")
	}
}

// TestEncodeSizeBound: Encode sizes its buffer by sizeBound, which is exact
// for record 102 (a body never outgrows it) whatever its layout.
func TestEncodeSizeBound(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		rec := &FileCommitted{ObjectKey: string(make([]byte, 1+r.IntN(1024))), ObjectFormat: 1, FileSize: r.Int64(),
			UploaderBrokerID: r.Int32(), OwnerIDs: make([]int32, r.IntN(5))}
		for range r.IntN(5) {
			ft := FileTopic{TopicID: diskless.TopicID{byte(r.IntN(256))}}
			for range 1 + r.IntN(5) {
				fp := FilePartition{Partition: r.Int32()}
				for range 1 + r.IntN(50) {
					fp.Batches = append(fp.Batches, CommittedBatch{Magic: 2, ByteOffset: r.Int32(), ByteSize: r.Int32(),
						AssignedBaseOffset: r.Int64(), AssignedLastOffset: r.Int64(), LogAppendTimestamp: r.Int64(),
						BatchMaxTimestamp: r.Int64(), TimestampType: 1, ProducerID: r.Int64(), ProducerEpoch: int16(r.Int32()),
						BaseSequence: r.Int32(), LastSequence: r.Int32()})
				}
				ft.Partitions = append(ft.Partitions, fp)
			}
			rec.Topics = append(rec.Topics, ft)
		}
		body := Encode([]Record{rec})[0]
		if len(body) > sizeBound(rec) {
			t.Fatalf("record 102 of %d bytes, bound %d", len(body), sizeBound(rec))
		}
		if string(body) != string(Append(nil, rec)) {
			t.Fatal("Encode and Append differ")
		}
	}
}
