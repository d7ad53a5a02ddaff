package rpcmsg

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/tagged"
)

var (
	topicA = [16]byte{0xa1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	topicB = [16]byte{0xb1, 0xb2}
)

func str(s string) *string { return &s }

// sample is one populated message of each direction of a key.
type sample struct {
	req  kmsg.Request
	resp kmsg.Response
}

// samples holds a request and a response of every key, with every field
// set to something other than its zero value where the type allows.
func samples() map[int16]sample {
	coord := func(i int32) Coordinate {
		return Coordinate{ObjectIndex: i, ByteOffset: 1 << 33, ByteSize: 4096, BaseOffset: 7, LastOffset: 9,
			TimestampType: 1, LogAppendTime: 1_700_000_000_000, BatchMaxTimestamp: 1_699_999_999_000}
	}
	return map[int16]sample{
		KeyDescribeFiles: {
			&DescribeFilesRequest{TimeoutMs: 60000, ObjectKeys: []string{"wal/c/aa", "wal/c/bb", ""}, ShardID: 3},
			&DescribeFilesResponse{ThrottleTimeMs: 1, Files: []DescribeFilesFile{
				{ObjectKey: "wal/c/aa", HasLiveBatches: true, State: 1},
				{ObjectKey: "wal/c/bb", State: 2},
				{ObjectKey: "", ErrorCode: 16, State: 0},
			}},
		},
		KeyCommitFile: {
			&CommitFileRequest{TimeoutMs: 30000, ShardID: 2, ObjectKey: "wal/c/0123", ObjectFormat: 1, FileSize: 1 << 40,
				UploaderBrokerID: 7, OwnerIDs: []int32{0, 2, 5}, Batches: []CommitFileBatch{
					{TopicID: topicA, Partition: 3, Magic: 2, ByteOffset: 0, ByteSize: 100, LastOffsetDelta: 4,
						BatchMaxTimestamp: 123, TimestampType: 0, ProducerID: 99, ProducerEpoch: 2, BaseSequence: 10, LastSequence: 14},
					{TopicID: topicB, Partition: 0, Magic: 2, ByteOffset: 100, ByteSize: 61, LastOffsetDelta: 0,
						BatchMaxTimestamp: -1, TimestampType: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, LastSequence: -1},
					{TopicID: topicB, Partition: 1, Magic: 2, ByteOffset: 161, ByteSize: 61, LastOffsetDelta: 0,
						BatchMaxTimestamp: 5, ProducerID: 7, ProducerEpoch: 0, BaseSequence: 0, LastSequence: 0, Txn: 1, TxnSeq: 3},
					{TopicID: topicB, Partition: 2, Magic: 2, ByteOffset: 222, ByteSize: 61, LastOffsetDelta: 0,
						BatchMaxTimestamp: 5, ProducerID: 7, ProducerEpoch: 0, BaseSequence: -1, LastSequence: -1, Txn: 3, CoordinatorEpoch: 4},
					{TopicID: topicB, Partition: 3, Magic: 2, ByteOffset: 283, ByteSize: 61, LastOffsetDelta: 0,
						BatchMaxTimestamp: 5, ProducerID: 7, ProducerEpoch: 0, BaseSequence: -1, LastSequence: -1, Txn: 2, TxnSeq: 2, CoordinatorEpoch: -1},
				}},
			&CommitFileResponse{ErrorMessage: str("x"), Batches: []CommitFileResult{
				{BaseOffset: 10, LogAppendTime: 1000, LogStartOffset: 2},
				{ErrorCode: 45, BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1, Duplicate: true},
			}},
		},
		KeyFindBatches: {
			&FindBatchesRequest{TimeoutMs: 5, ShardID: 1, Partitions: []FindBatchesPartition{
				{TopicID: topicA, Partition: 1, Offset: 42, MaxBytes: 1 << 20}, {TopicID: topicB, Partition: 9, Offset: 0, MaxBytes: 1}}},
			&FindBatchesResponse{ErrorCode: 0, Objects: []FindBatchesObject{{"wal/c/1", 8 << 20, 1}, {"wal/c/2", 1, 1}, {"segment/3", 9, 2}},
				Partitions: []FindBatchesResult{
					{LogStartOffset: 0, HighWatermark: 100, Runs: []Coordinate{coord(0), coord(1)}, Next: coord(1)},
					{ErrorCode: 1, LogStartOffset: 5, HighWatermark: 6, Runs: []Coordinate{}, Next: Coordinate{ObjectIndex: -1}},
				}},
		},
		KeyListOffsets: {
			&ListOffsetsRequest{TimeoutMs: 1, ShardID: 4, Partitions: []ListOffsetsPartition{
				{TopicID: topicA, Partition: 0, Timestamp: -1, From: -1}, {TopicID: topicA, Partition: 1, Timestamp: 1000, From: 77}}},
			&ListOffsetsResponse{ErrorMessage: str(""), Partitions: []ListOffsetsResult{
				{LogStartOffset: 1, HighWatermark: 2, Offset: 2, Timestamp: -1, Candidates: []Candidate{}},
				{LogStartOffset: 1, HighWatermark: 20, Offset: -1, Timestamp: -1, Candidates: []Candidate{{
					ObjectKey: "wal/c/9", FileSize: 77, ByteOffset: 5, ByteSize: 61, BaseOffset: 3, LastOffset: 4,
					TimestampType: 0, LogAppendTime: 8, BatchMaxTimestamp: 9, ObjectFormat: 1}}},
				{LogStartOffset: 1, HighWatermark: 20, Offset: -1, Timestamp: -1, Candidates: []Candidate{{
					ObjectKey: "segment/9", FileSize: 77, ByteOffset: 0, ByteSize: 61, BaseOffset: 3, LastOffset: 4,
					TimestampType: 1, LogAppendTime: 8, BatchMaxTimestamp: 9, ObjectFormat: 2}}},
			}},
		},
		KeyDeleteRecords: {
			&DeleteRecordsRequest{TimeoutMs: 9, ShardID: 0, Partitions: []DeleteRecordsPartition{{TopicID: topicB, Partition: 2, Offset: -1}}},
			&DeleteRecordsResponse{Partitions: []DeleteRecordsResult{{ErrorCode: 1, ErrorMessage: str("out of range"), LogStartOffset: -1}, {LogStartOffset: 8}}},
		},
		KeyCreatePartitions: {
			&CreatePartitionsRequest{TimeoutMs: 3, ShardID: 5, Topics: []CreatePartitionsTopic{
				{TopicID: topicA, TopicName: "orders", Partitions: []int32{5, 11}}, {TopicID: topicB, TopicName: "t", Partitions: []int32{}}}},
			&CreatePartitionsResponse{ThrottleTimeMs: 2, ErrorCode: 56, ErrorMessage: str("log write failed")},
		},
		KeyDeleteTopics: {
			&DeleteTopicsRequest{TimeoutMs: 3, ShardID: 5, TopicIDs: [][16]byte{topicA, topicB}},
			&DeleteTopicsResponse{ErrorCode: 16},
		},
		KeyDeleteFiles: {
			&DeleteFilesRequest{TimeoutMs: 3, ShardID: 5, DeleterShardID: 1, ObjectKeys: []string{"a", "b"}},
			&DeleteFilesResponse{},
		},
		KeyAllocateProducerIDs: {
			&AllocateProducerIDsRequest{TimeoutMs: 3, ShardID: 0, BrokerID: 2},
			&AllocateProducerIDsResponse{ProducerIDStart: 1 << 40, ProducerIDLen: 1000},
		},
		KeyDisableTopic: {
			&DisableTopicRequest{TimeoutMs: 30000, TopicID: topicA, TopicName: "orders", Epoch: 3, Policy: 1},
			&DisableTopicResponse{ErrorCode: 7, ErrorMessage: str("timed out"), TxnShards: []DisableTopicShard{{ShardID: 2, TxnsOpen: true}, {ShardID: 5}}},
		},
		KeyCheckTxn: {
			&CheckTxnRequest{TimeoutMs: 5000, ShardID: 3, TransactionalID: "tx-1", ProducerID: 1 << 40, ProducerEpoch: 7,
				Partitions: []CheckTxnPartition{{TopicID: topicA, Partition: 4}, {TopicID: topicB, Partition: 0}}, GroupID: "g"},
			&CheckTxnResponse{TxnErrorCode: 48, TxnSeq: 1 << 33, Partitions: []CheckTxnResult{{ErrorCode: 0}, {ErrorCode: 48}}},
		},
		KeyEndTxnOffsets: {
			&EndTxnOffsetsRequest{TimeoutMs: 5000, ShardID: 2, GroupID: "g", ProducerID: 9, ProducerEpoch: 1, Committed: true, TxnSeq: 1 << 35},
			&EndTxnOffsetsResponse{ErrorCode: 16, ErrorMessage: str("not here")},
		},
	}
}

// decodeLike decodes b into a fresh message of m's kind and version.
func decodeLike(m interface {
	Key() int16
	GetVersion() int16
}, b []byte) (any, error) {
	var fresh interface {
		SetVersion(int16)
		ReadFrom([]byte) error
	}
	switch m.(type) {
	case kmsg.Request:
		fresh = RequestForKey(m.Key())
	default:
		fresh = ResponseForKey(m.Key())
	}
	fresh.SetVersion(m.GetVersion())
	return fresh, fresh.ReadFrom(b)
}

func TestRoundTrip(t *testing.T) {
	for key, s := range samples() {
		for _, m := range []interface {
			Key() int16
			GetVersion() int16
			AppendTo([]byte) []byte
		}{s.req, s.resp} {
			b := m.AppendTo(nil)
			got, err := decodeLike(m, b)
			if err != nil {
				t.Fatalf("%s %T: %v", NameForKey(key), m, err)
			}
			if !reflect.DeepEqual(got, m) {
				t.Fatalf("%s: round trip differs:\n got %#v\nwant %#v", NameForKey(key), got, m)
			}
		}
	}
}

// TestKinds checks the kmsg plumbing: keys, names, the pairing of
// requests and responses and RequestForKey's defaults.
func TestKinds(t *testing.T) {
	if RequestForKey(MinKey-1) != nil || RequestForKey(MaxKey+1) != nil || ResponseForKey(99) != nil || NameForKey(112) != "" {
		t.Fatal("keys outside 100–111 answered")
	}
	for k := MinKey; k <= MaxKey; k++ {
		req := RequestForKey(k)
		if req == nil || req.Key() != k || req.ResponseKind().Key() != k || req.ResponseKind().RequestKind().Key() != k {
			t.Fatalf("key %d: request %T does not pair with its response", k, req)
		}
		if NameForKey(k) == "" || !req.IsFlexible() || req.MaxVersion() != 0 {
			t.Fatalf("key %d: name %q, flexible %v, max version %d", k, NameForKey(k), req.IsFlexible(), req.MaxVersion())
		}
		s, ok := samples()[k]
		if !ok {
			t.Fatalf("no sample of key %d", k)
		}
		// peer.Client bounds its wait for an answer by the request's
		// TimeoutMs (kmsg.TimeoutRequest).
		tr, ok := s.req.(kmsg.TimeoutRequest)
		if !ok || int64(tr.Timeout()) != reflect.ValueOf(s.req).Elem().FieldByName("TimeoutMs").Int() {
			t.Fatalf("key %d: %T is no kmsg.TimeoutRequest answering its TimeoutMs", k, s.req)
		}
	}
	if r := RequestForKey(KeyDescribeFiles).(*DescribeFilesRequest); r.TimeoutMs != 60000 || r.ShardID != -1 {
		t.Fatalf("DescribeFiles defaults %+v", r)
	}
}

// TestLayout pins the bytes of two messages, so that an accidental change
// of field order or width (a wire-format break between releases) fails.
func TestLayout(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    interface{ AppendTo([]byte) []byte }
		want string
	}{
		// TimeoutMs, ObjectKeys ["k"], tags {0: ShardId 3}.
		{"DescribeFiles request", &DescribeFilesRequest{TimeoutMs: 60000, ObjectKeys: []string{"k"}, ShardID: 3},
			"0000ea60" + "02" + "026b" + "01" + "00" + "04" + "00000003"},
		// Without a shard: no tagged field.
		{"DescribeFiles request, no shard", &DescribeFilesRequest{TimeoutMs: 1, ObjectKeys: []string{}, ShardID: -1},
			"00000001" + "01" + "00"},
		// Throttle, Files [{"k", 0, true, tags {0: State 1}}], tags.
		{"DescribeFiles response", &DescribeFilesResponse{Files: []DescribeFilesFile{{ObjectKey: "k", HasLiveBatches: true, State: 1}}},
			"00000000" + "02" + "026b" + "0000" + "01" + "01" + "00" + "01" + "01" + "00"},
		// Throttle, ErrorCode, null message, Objects [{"k", 1, no tags},
		// {"s", 2, tags {0: ObjectFormat 2}}], empty Partitions, tags: a
		// WAL object's format (1) is not sent.
		{"FindBatches response", &FindBatchesResponse{Objects: []FindBatchesObject{{"k", 1, 1}, {"s", 2, 2}}, Partitions: []FindBatchesResult{}},
			"00000000" + "0000" + "00" + "03" + "026b" + "0000000000000001" + "00" + "0273" + "0000000000000002" + "01" + "00" + "01" + "02" +
				"01" + "00"},
		// TimeoutMs, ShardId, "t", ProducerId, ProducerEpoch, Partitions
		// [{zero uuid, 5, tags}], GroupId "", tags.
		{"CheckTxn request", &CheckTxnRequest{TimeoutMs: 1, ShardID: 2, TransactionalID: "t", ProducerID: 3, ProducerEpoch: 4,
			Partitions: []CheckTxnPartition{{Partition: 5}}},
			"00000001" + "00000002" + "0274" + "0000000000000003" + "0004" + "02" + "00000000000000000000000000000000" + "00000005" + "00" +
				"01" + "00"},
		// Throttle, ErrorCode, null message, TxnErrorCode, TxnSeq 9,
		// Partitions [{48, tags}], tags.
		{"CheckTxn response", &CheckTxnResponse{TxnSeq: 9, Partitions: []CheckTxnResult{{ErrorCode: 48}}},
			"00000000" + "0000" + "00" + "0000" + "0000000000000009" + "02" + "0030" + "00" + "00"},
		// TimeoutMs, ShardId, "g", ProducerId, ProducerEpoch, Committed,
		// tags {0: TxnSeq 6}.
		{"EndTxnOffsets request", &EndTxnOffsetsRequest{TimeoutMs: 1, ShardID: 2, GroupID: "g", ProducerID: 3, ProducerEpoch: 4, Committed: true, TxnSeq: 6},
			"00000001" + "00000002" + "0267" + "0000000000000003" + "0004" + "01" + "01" + "00" + "08" + "0000000000000006"},
		// Without a token: no tagged field.
		{"EndTxnOffsets request, no token", &EndTxnOffsetsRequest{TimeoutMs: 1, ShardID: 2, GroupID: "g", ProducerID: 3, ProducerEpoch: 4},
			"00000001" + "00000002" + "0267" + "0000000000000003" + "0004" + "00" + "00"},
		// Throttle, ErrorCode, null message, tags {0: TxnShards [{3,
		// open, tags}]}.
		{"DisableTopic response", &DisableTopicResponse{TxnShards: []DisableTopicShard{{ShardID: 3, TxnsOpen: true}}},
			"00000000" + "0000" + "00" + "01" + "00" + "07" + "02" + "00000003" + "01" + "00"},
		// Without shards: no tagged field.
		{"DisableTopic response, no shards", &DisableTopicResponse{},
			"00000000" + "0000" + "00" + "00"},
		// TimeoutMs, ShardId, "k", ObjectFormat, FileSize,
		// UploaderBrokerId, OwnerIds [], Batches [{zero uuid, partition 1,
		// magic 2, ByteOffset, ByteSize 61, LastOffsetDelta, max
		// timestamp, timestamp type, ProducerId 7, epoch, sequences −1,
		// tags {0: Txn 3 ABORT, 2: CoordinatorEpoch 5}}], tags.
		{"CommitFile request, a marker", &CommitFileRequest{TimeoutMs: 1, ShardID: 2, ObjectKey: "k", ObjectFormat: 1, FileSize: 61, OwnerIDs: []int32{},
			Batches: []CommitFileBatch{{Partition: 1, Magic: 2, ByteSize: 61, ProducerID: 7, BaseSequence: -1, LastSequence: -1, Txn: 3, CoordinatorEpoch: 5}}},
			"00000001" + "00000002" + "026b" + "01" + "000000000000003d" + "00000000" + "01" + "02" +
				"00000000000000000000000000000000" + "00000001" + "02" + "00000000" + "0000003d" + "00000000" + "0000000000000000" + "00" +
				"0000000000000007" + "0000" + "ffffffff" + "ffffffff" + "02" + "000103" + "020400000005" + "00"},
		// Throttle, ErrorCode 16, null message, empty Batches, tags.
		{"CommitFile response", &CommitFileResponse{ErrorCode: 16},
			"00000000" + "0010" + "00" + "01" + "00"},
	} {
		if got := hex.EncodeToString(tc.m.AppendTo(nil)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestDescribeFilesKIPReader: a DescribeFiles answer without the State
// tag (KIP-1164's fields only) reads State from HasLiveBatches.
func TestDescribeFilesKIPReader(t *testing.T) {
	b := kbin.AppendInt32(nil, 0)
	b = kbin.AppendCompactArrayLen(b, 2)
	for _, live := range []bool{true, false} {
		b = kbin.AppendCompactString(b, "k")
		b = kbin.AppendInt16(b, 0)
		b = kbin.AppendBool(b, live)
		b = tagged.AppendNone(b)
	}
	b = tagged.AppendNone(b)
	var r DescribeFilesResponse
	if err := r.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	if r.Files[0].State != 1 || r.Files[1].State != 0 {
		t.Fatalf("states %d %d, want 1 0", r.Files[0].State, r.Files[1].State)
	}
}

// TestUnknownTagsSkipped: tagged fields a reader does not know, in any
// struct, are skipped.
func TestUnknownTagsSkipped(t *testing.T) {
	// A DeleteFiles response with an unknown tag 5 of 3 bytes.
	b := appendTop(nil, 0, 0, nil)
	b = append(b, 1, 5, 3, 0xde, 0xad, 0xbe)
	var r DeleteFilesResponse
	if err := r.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	// A DescribeFiles request whose tag section holds tag 7 and tag 0.
	b = kbin.AppendInt32(nil, 1)
	b = appendStrings(b, []string{"x"})
	b = append(b, 2, 7, 1, 0xff, 0, 4, 0, 0, 0, 9)
	var q DescribeFilesRequest
	if err := q.ReadFrom(b); err != nil || q.ShardID != 9 {
		t.Fatalf("ShardId %d, err %v", q.ShardID, err)
	}
}

// TestCorruption is the corruption table of every decoder: each strict
// prefix of each sample (truncation), a byte after it, an unknown
// version, and the damaged shapes of the table below are refused with
// ErrMalformed — never a panic, never a huge allocation.
func TestCorruption(t *testing.T) {
	for key, s := range samples() {
		for _, m := range []interface {
			Key() int16
			GetVersion() int16
			AppendTo([]byte) []byte
			SetVersion(int16)
		}{s.req, s.resp} {
			b := m.AppendTo(nil)
			for n := range len(b) {
				if _, err := decodeLike(m, b[:n]); !errors.Is(err, ErrMalformed) {
					t.Fatalf("%s %T: prefix %d/%d: %v", NameForKey(key), m, n, len(b), err)
				}
			}
			if _, err := decodeLike(m, append(bytes.Clone(b), 0)); !errors.Is(err, ErrMalformed) {
				t.Fatalf("%s %T: trailing byte: %v", NameForKey(key), m, err)
			}
			m.SetVersion(1)
			_, err := decodeLike(m, b)
			m.SetVersion(0)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("%s %T: version 1: %v", NameForKey(key), m, err)
			}
		}
	}
	huge := kbin.AppendUvarint(nil, 1<<31) // a count no message holds
	for _, tc := range []struct {
		name string
		m    interface{ ReadFrom([]byte) error }
		b    []byte
	}{
		{"DescribeFiles: null ObjectKeys", &DescribeFilesRequest{}, append(kbin.AppendInt32(nil, 1), 0, 0)},
		{"DescribeFiles: huge ObjectKeys", &DescribeFilesRequest{}, append(append(kbin.AppendInt32(nil, 1), huge...), 0)},
		{"DescribeFiles: null key", &DescribeFilesRequest{}, append(kbin.AppendInt32(nil, 1), 2, 0, 0)},
		{"DescribeFiles: ShardId tag of 2 bytes", &DescribeFilesRequest{},
			append(kbin.AppendInt32(nil, 1), 1, 1, 0, 2, 0, 3)},
		{"DescribeFiles: ShardId tag of 5 bytes", &DescribeFilesRequest{},
			append(kbin.AppendInt32(nil, 1), 1, 1, 0, 5, 0, 0, 0, 3, 0)},
		{"DescribeFiles: tag size past the end", &DescribeFilesRequest{},
			append(kbin.AppendInt32(nil, 1), 1, 1, 0, 9, 0)},
		{"DescribeFiles response: State tag of 0 bytes", &DescribeFilesResponse{},
			append(kbin.AppendInt32(nil, 0), 2, 2, 'k', 0, 0, 1, 1, 0, 0, 0)},
		{"CommitFile: huge Batches", &CommitFileRequest{},
			append(NewCommitFileRequest().AppendTo(nil)[:4+4+1+1+8+4+1], huge...)},
		{"CommitFile: Batches past the bytes", &CommitFileRequest{},
			append(NewCommitFileRequest().AppendTo(nil)[:4+4+1+1+8+4+1], 3, 0)},
		{"CommitFile: null ObjectKey", &CommitFileRequest{}, append(make([]byte, 8), 0)},
		{"CommitFile: null OwnerIds", &CommitFileRequest{},
			append(NewCommitFileRequest().AppendTo(nil)[:4+4+1+1+8+4], 0, 1, 0)},
		{"CommitFile response: huge Batches", &CommitFileResponse{}, append(appendTop(nil, 0, 0, nil), huge...)},
		{"FindBatches response: null Objects", &FindBatchesResponse{}, append(appendTop(nil, 0, 0, nil), 0, 1, 0)},
		{"FindBatches response: huge Partitions", &FindBatchesResponse{}, append(appendTop(nil, 0, 0, nil), append([]byte{1}, huge...)...)},
		{"FindBatches response: message length past the end", &FindBatchesResponse{}, append(kbin.AppendInt32(nil, 0), 0, 0, 9, 'x')},
		{"ListOffsets response: huge Candidates", &ListOffsetsResponse{},
			append(append(appendTop(nil, 0, 0, nil), 2), append(make([]byte, 34), huge...)...)},
		{"CreatePartitions: null Partitions", &CreatePartitionsRequest{},
			append(append(make([]byte, 8), 2), append(make([]byte, 16), 2, 't', 0, 0, 0)...)},
		{"DeleteTopics: TopicIds past the bytes", &DeleteTopicsRequest{}, append(make([]byte, 8), 2, 1, 2, 3)},
		{"DeleteFiles: null key", &DeleteFilesRequest{}, append(make([]byte, 12), 2, 0, 0)},
		{"DisableTopic: null name", &DisableTopicRequest{}, append(make([]byte, 20), 0, 0, 0, 0, 0, 0, 0)},
		{"DisableTopic response: null TxnShards", &DisableTopicResponse{}, append(appendTop(nil, 0, 0, nil), 1, 0, 1, 0)},
		{"DisableTopic response: TxnShards past the tag", &DisableTopicResponse{}, append(appendTop(nil, 0, 0, nil), 1, 0, 3, 2, 0, 0)},
		{"DisableTopic response: bytes left in the tag", &DisableTopicResponse{},
			append(appendTop(nil, 0, 0, nil), 1, 0, 8, 2, 0, 0, 0, 3, 1, 0, 9)},
		{"AllocateProducerIds response: tags count past the end", &AllocateProducerIDsResponse{},
			append(appendTop(nil, 0, 0, nil), append(make([]byte, 12), 3, 1)...)},
		{"CommitFile: TxnSeq tag of 4 bytes", &CommitFileRequest{}, commitFileWithTags(1, 1, 4, 0, 0, 0, 1)},
		{"CommitFile: Txn tag past the end", &CommitFileRequest{}, commitFileWithTags(1, 0, 9, 1)},
		{"CheckTxn: null TransactionalId", &CheckTxnRequest{}, append(make([]byte, 8), 0)},
		{"CheckTxn: null Partitions", &CheckTxnRequest{},
			append(append(make([]byte, 8), 2, 'x'), append(make([]byte, 8+2), 0, 2, 'g', 0)...)},
		{"CheckTxn: huge Partitions", &CheckTxnRequest{},
			append(append(make([]byte, 8), 2, 'x'), append(make([]byte, 8+2), append(huge, 2, 'g', 0)...)...)},
		{"CheckTxn: Partitions past the bytes", &CheckTxnRequest{},
			append(append(make([]byte, 8), 2, 'x'), append(make([]byte, 8+2), append([]byte{3}, make([]byte, 16+4+1+3)...)...)...)},
		{"CheckTxn: partition tags past the end", &CheckTxnRequest{},
			append(append(make([]byte, 8), 2, 'x'), append(make([]byte, 8+2), append([]byte{2}, append(make([]byte, 16+4), 1, 0, 9, 0, 2, 'g', 0)...)...)...)},
		{"CheckTxn: null GroupId", &CheckTxnRequest{},
			append(append(make([]byte, 8), 2, 'x'), append(make([]byte, 8+2), 1, 0, 0)...)},
		{"CheckTxn: truncated", &CheckTxnRequest{}, (&CheckTxnRequest{TransactionalID: "t", GroupID: "g"}).AppendTo(nil)[:20]},
		{"CheckTxn: trailing bytes", &CheckTxnRequest{}, append((&CheckTxnRequest{TransactionalID: "t"}).AppendTo(nil), 0)},
		{"CheckTxn response: no TxnSeq", &CheckTxnResponse{}, append(appendTop(nil, 0, 0, nil), 0, 0, 0)},
		{"CheckTxn response: negative TxnSeq", &CheckTxnResponse{}, (&CheckTxnResponse{TxnSeq: -1}).AppendTo(nil)},
		{"CheckTxn response: null Partitions", &CheckTxnResponse{}, append(appendTop(nil, 0, 0, nil), append(make([]byte, 2+8), 0, 0)...)},
		{"CheckTxn response: huge Partitions", &CheckTxnResponse{}, append(appendTop(nil, 0, 0, nil), append(make([]byte, 2+8), append(huge, 0)...)...)},
		{"CheckTxn response: Partitions past the bytes", &CheckTxnResponse{},
			append(appendTop(nil, 0, 0, nil), append(make([]byte, 2+8), 4, 0, 0, 0, 0, 0, 0)...)},
		{"EndTxnOffsets: null GroupId", &EndTxnOffsetsRequest{}, append(make([]byte, 8), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)},
		{"EndTxnOffsets: truncated", &EndTxnOffsetsRequest{}, (&EndTxnOffsetsRequest{GroupID: "g"}).AppendTo(nil)[:12]},
		{"EndTxnOffsets: TxnSeq tag of 4 bytes", &EndTxnOffsetsRequest{},
			append((&EndTxnOffsetsRequest{GroupID: "g"}).AppendTo(nil)[:4+4+2+8+2+1], 1, 0, 4, 0, 0, 0, 1)},
		{"EndTxnOffsets: TxnSeq tag past the end", &EndTxnOffsetsRequest{},
			append((&EndTxnOffsetsRequest{GroupID: "g"}).AppendTo(nil)[:4+4+2+8+2+1], 1, 0, 8, 0, 0, 0, 1)},
		{"EndTxnOffsets: negative TxnSeq", &EndTxnOffsetsRequest{}, (&EndTxnOffsetsRequest{GroupID: "g", TxnSeq: -1}).AppendTo(nil)},
		{"EndTxnOffsets response: trailing bytes", &EndTxnOffsetsResponse{}, append(appendTop(nil, 0, 0, nil), 0, 0)},
	} {
		if err := tc.m.ReadFrom(tc.b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", tc.name, err)
		}
	}
}

// fuzzDecode decodes b as key's request and as its response; whatever
// decodes re-encodes to bytes that decode equal (unknown tags are
// dropped, so the bytes themselves may differ).
func fuzzDecode(t *testing.T, key int16, b []byte) {
	for _, m := range []interface {
		ReadFrom([]byte) error
		AppendTo([]byte) []byte
	}{RequestForKey(key), ResponseForKey(key)} {
		if err := m.ReadFrom(b); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			continue
		}
		again := reflect.New(reflect.TypeOf(m).Elem()).Interface().(interface{ ReadFrom([]byte) error })
		if err := again.ReadFrom(m.AppendTo(nil)); err != nil {
			t.Fatalf("re-decode %T: %v", m, err)
		}
		if !reflect.DeepEqual(m, again) {
			t.Fatalf("re-decode %T differs:\n%#v\n%#v", m, m, again)
		}
	}
}

// fuzzSeeds adds key's samples to f.
func fuzzSeeds(f *testing.F, key int16) {
	s := samples()[key]
	f.Add(s.req.AppendTo(nil))
	f.Add(s.resp.AppendTo(nil))
	f.Add([]byte{})
}

func FuzzDescribeFiles(f *testing.F) {
	fuzzSeeds(f, KeyDescribeFiles)
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, KeyDescribeFiles, b) })
}

func FuzzCommitFile(f *testing.F) {
	fuzzSeeds(f, KeyCommitFile)
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, KeyCommitFile, b) })
}

func FuzzFindBatches(f *testing.F) {
	fuzzSeeds(f, KeyFindBatches)
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, KeyFindBatches, b) })
}

func FuzzListOffsets(f *testing.F) {
	fuzzSeeds(f, KeyListOffsets)
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, KeyListOffsets, b) })
}

func FuzzDeleteRecords(f *testing.F) {
	fuzzSeeds(f, KeyDeleteRecords)
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, KeyDeleteRecords, b) })
}

func FuzzCreatePartitions(f *testing.F) {
	fuzzSeeds(f, KeyCreatePartitions)
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, KeyCreatePartitions, b) })
}

func FuzzDeleteTopics(f *testing.F) {
	fuzzSeeds(f, KeyDeleteTopics)
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, KeyDeleteTopics, b) })
}

func FuzzDeleteFiles(f *testing.F) {
	fuzzSeeds(f, KeyDeleteFiles)
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, KeyDeleteFiles, b) })
}

func FuzzAllocateProducerIDs(f *testing.F) {
	fuzzSeeds(f, KeyAllocateProducerIDs)
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, KeyAllocateProducerIDs, b) })
}

func FuzzCheckTxn(f *testing.F) {
	fuzzSeeds(f, KeyCheckTxn)
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, KeyCheckTxn, b) })
}

func FuzzEndTxnOffsets(f *testing.F) {
	fuzzSeeds(f, KeyEndTxnOffsets)
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, KeyEndTxnOffsets, b) })
}

// TestMarkerCoordinatorEpochStrict is records.TestMarkerCoordinatorEpochStrict
// for DisklessCommitFile, whose batches carry record 102's tags: tag 2 is a
// marker's coordinator epoch only — a data batch carrying one reads it as
// 0 (tag 2 is written for markers only, so the request re-encodes without
// it) — and a tag 2 not of 4 bytes is refused
// (docs/format/coordinator-rpcs.md §101).
func TestMarkerCoordinatorEpochStrict(t *testing.T) {
	// Txn 1, then tag 2 CoordinatorEpoch 9.
	var req CommitFileRequest
	if err := req.ReadFrom(commitFileWithTags(2, 0, 1, 1, 2, 4, 0, 0, 0, 9)); err != nil {
		t.Fatal(err)
	}
	if got := req.Batches[0]; got.Txn != 1 || got.CoordinatorEpoch != 0 {
		t.Fatalf("a data batch with a tag 2: Txn %d, coordinator epoch %d; want 1, 0", got.Txn, got.CoordinatorEpoch)
	}
	var again CommitFileRequest
	if err := again.ReadFrom(req.AppendTo(nil)); err != nil || !reflect.DeepEqual(again, req) {
		t.Fatalf("re-decoded %+v (%v), want %+v", again, err, req)
	}
	for name, tags := range map[string][]byte{
		"of 8 bytes": {2, 0, 1, 2, 2, 8, 0, 0, 0, 0, 0, 0, 0, 5},
		"of 2 bytes": {2, 0, 1, 2, 2, 2, 0, 5},
	} {
		var m CommitFileRequest
		if err := m.ReadFrom(commitFileWithTags(tags...)); !errors.Is(err, ErrMalformed) {
			t.Fatalf("a marker's coordinator epoch %s: decoded %+v, %v; want ErrMalformed", name, m.Batches, err)
		}
	}
}

// commitFileWithTags is a CommitFile request of one batch whose tagged
// fields are tags (count, then fields as the wire has them), then the
// request's empty tags.
func commitFileWithTags(tags ...byte) []byte {
	b := (&CommitFileRequest{ObjectKey: "k", FileSize: 100, OwnerIDs: []int32{}, Batches: []CommitFileBatch{{Magic: 2, ByteSize: 10}}}).AppendTo(nil)
	// The batch's tags (one 0 byte) and the request's (one 0 byte) end it.
	return append(append(b[:len(b)-2:len(b)-2], tags...), 0)
}

func FuzzDisableTopic(f *testing.F) {
	fuzzSeeds(f, KeyDisableTopic)
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, KeyDisableTopic, b) })
}
