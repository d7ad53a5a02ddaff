package coordinator

import (
	"math"
	"testing"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/metalog"
)

// FuzzApplyRecord: whatever record body decodes, applying it to an empty
// state does not panic (records.FuzzDecodeRecord holds the codec).
func FuzzApplyRecord(f *testing.F) {
	f.Add(records.Append(nil, &records.PartitionCreated{TopicID: diskless.TopicID{1}, TopicName: "t", Partition: 0}))
	f.Add(records.Append(nil, &records.FileCommitted{ObjectKey: "wal/k", ObjectFormat: 1, FileSize: 100, OwnerIDs: []int32{0},
		Topics: []records.FileTopic{{TopicID: diskless.TopicID{1}, Partitions: []records.FilePartition{{
			Batches: []records.CommittedBatch{{Magic: 2, ByteSize: 10, ProducerID: -1}}}}}}}))
	f.Add(records.Append(nil, &records.RecordsDeleted{TopicID: diskless.TopicID{1}, NewLogStartOffset: 5}))
	f.Add(records.Append(nil, &records.TopicDeleted{TopicID: diskless.TopicID{1}}))
	f.Add(records.Append(nil, &records.FileDeleted{ObjectKey: "wal/k"}))
	f.Add(records.Append(nil, &records.ProducerIDBlock{FirstProducerID: 0, BlockSize: 1000}))
	f.Add(records.Append(nil, &records.ACL{ResourceType: 2, ResourceName: "t", PatternType: 3, Principal: "User:a", Host: "*", Operation: 3, PermissionType: 3}))
	f.Fuzz(func(t *testing.T, body []byte) {
		rec, err := records.Decode(body)
		if err != nil {
			return
		}
		newState(0, DefaultProducerIDExpirationMs, discardLogger()).apply(rec)
	})
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
	rec := &records.FileCommitted{ObjectKey: "k", ObjectFormat: 1, OwnerIDs: []int32{0}}
	for i := range n {
		id := diskless.TopicID{byte(i), byte(i >> 8), 1}
		rec.Topics = append(rec.Topics, records.FileTopic{TopicID: id, Partitions: []records.FilePartition{{
			Partition: math.MaxInt32, Batches: []records.CommittedBatch{{ProducerID: math.MaxInt64, AssignedBaseOffset: math.MaxInt64}}}}})
	}
	per := len(records.Append(nil, rec)) / n
	if per > maxEncodedBatchBytes {
		t.Fatalf("%d bytes per batch, bound is %d", per, maxEncodedBatchBytes)
	}
	if diskless.MaxCommitBatches*maxEncodedBatchBytes+diskless.MaxObjectKeyBytes+4*MaxShards+64 > metalog.MaxRecordBytes {
		t.Fatal("MaxCommitBatches does not fit in MaxRecordBytes")
	}
}
