package e2e

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/peer"
	"github.com/diskless-sidecar/sidecar/rpcmsg"
)

// TestCoordinatorRPCs sends the coordinator RPCs (SPEC §9, API keys
// 100–109) to the real binary over its Kafka listener, with the peer
// client a sidecar uses, after kgo produced into the topic: the answers
// agree with what kgo sees (offsets, log start), a repeated CommitFile is
// answered as the first commit was, a shard out of range is
// NOT_COORDINATOR.
func TestCoordinatorRPCs(t *testing.T) {
	t.Parallel()
	const shards, partitions, perPartition = 4, 4, 50
	sc := StartSidecar(t, "", "diskless.metadata.topic.num.partitions=4")
	ctx := testCtx(t, 2*time.Minute)
	adm := kadm.NewClient(sc.Client())
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, "rpc")
	mustNoErr(t, "CreateTopic", err)
	mustNoErr(t, "CreateTopic result", resp.Err)
	topicID := diskless.TopicID(resp.ID)
	prod := sc.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	var rs []*kgo.Record
	for i := range partitions * perPartition {
		rs = append(rs, &kgo.Record{Topic: "rpc", Partition: int32(i % partitions), Value: []byte{byte(i)}})
	}
	mustNoErr(t, "produce", prod.ProduceSync(ctx, rs...).FirstErr())

	cl := peer.NewClient(peer.ClientConfig{})
	defer cl.Close()
	call := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := cl.Request(ctx, sc.Addr, req)
		mustNoErr(t, rpcmsg.NameForKey(req.Key()), err)
		return resp
	}
	var firstKey string
	var firstBatch rpcmsg.Coordinate
	var firstShard int32
	for p := range int32(partitions) {
		shard := diskless.ShardFor(topicID, p, shards)
		lo := rpcmsg.NewListOffsetsRequest()
		lo.TimeoutMs, lo.ShardID = 5000, shard
		lo.Partitions = []rpcmsg.ListOffsetsPartition{{TopicID: topicID, Partition: p, Timestamp: diskless.ListOffsetsLatest, From: -1}}
		lr := call(lo).(*rpcmsg.ListOffsetsResponse)
		if lr.ErrorCode != 0 || lr.Partitions[0].ErrorCode != 0 || lr.Partitions[0].Offset != perPartition {
			t.Fatalf("partition %d: DisklessListOffsets latest %+v", p, lr)
		}

		fb := rpcmsg.NewFindBatchesRequest()
		fb.TimeoutMs, fb.ShardID = 5000, shard
		fb.Partitions = []rpcmsg.FindBatchesPartition{{TopicID: topicID, Partition: p, Offset: 0, MaxBytes: 1 << 20}}
		fr := call(fb).(*rpcmsg.FindBatchesResponse)
		if fr.ErrorCode != 0 || fr.Partitions[0].ErrorCode != 0 || fr.Partitions[0].HighWatermark != perPartition {
			t.Fatalf("partition %d: DisklessFindBatches %+v", p, fr)
		}
		next := int64(0)
		for _, b := range fr.Partitions[0].Runs {
			if b.BaseOffset != next || b.LastOffset < b.BaseOffset || fr.Objects[b.ObjectIndex].ObjectKey == "" {
				t.Fatalf("partition %d: batch %+v after offset %d", p, b, next)
			}
			next = b.LastOffset + 1
		}
		if next != perPartition {
			t.Fatalf("partition %d: batches end at %d, want %d", p, next, perPartition)
		}
		if p == 0 {
			firstShard, firstBatch = shard, fr.Partitions[0].Runs[0]
			firstKey = fr.Objects[firstBatch.ObjectIndex].ObjectKey

			df := rpcmsg.NewDescribeFilesRequest()
			df.ShardID, df.ObjectKeys = shard, []string{firstKey, "no/such/object"}
			dr := call(df).(*rpcmsg.DescribeFilesResponse)
			if f := dr.Files; f[0].ErrorCode != 0 || !f[0].HasLiveBatches || f[0].State != int8(diskless.FileLive) ||
				f[1].HasLiveBatches || f[1].State != int8(diskless.FileUnknown) {
				t.Fatalf("DisklessDescribeFiles %+v", f)
			}
		}
	}

	// The first batch committed again under its object key: answered as
	// the first commit was (its offset and log-append time), nothing
	// committed twice.
	fr := call(&rpcmsg.FindBatchesRequest{TimeoutMs: 5000, ShardID: firstShard, Partitions: []rpcmsg.FindBatchesPartition{
		{TopicID: topicID, Partition: 0, Offset: 0, MaxBytes: 1}}}).(*rpcmsg.FindBatchesResponse)
	size := fr.Objects[0].FileSize
	cf := rpcmsg.NewCommitFileRequest()
	cf.TimeoutMs, cf.ShardID, cf.ObjectKey, cf.ObjectFormat, cf.FileSize = 5000, firstShard, firstKey, 1, size
	cf.UploaderBrokerID, cf.OwnerIDs = 0, []int32{firstShard}
	cf.Batches = []rpcmsg.CommitFileBatch{{TopicID: topicID, Partition: 0, Magic: 2, ByteOffset: int32(firstBatch.ByteOffset),
		ByteSize: firstBatch.ByteSize, LastOffsetDelta: int32(firstBatch.LastOffset - firstBatch.BaseOffset),
		BatchMaxTimestamp: firstBatch.BatchMaxTimestamp, TimestampType: firstBatch.TimestampType,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, LastSequence: -1}}
	cr := call(cf).(*rpcmsg.CommitFileResponse)
	if cr.ErrorCode != 0 || len(cr.Batches) != 1 || cr.Batches[0].ErrorCode != 0 || cr.Batches[0].BaseOffset != 0 ||
		cr.Batches[0].LogAppendTime != firstBatch.LogAppendTime {
		t.Fatalf("repeated DisklessCommitFile: %+v", cr)
	}
	offsets, err := adm.ListEndOffsets(ctx, "rpc")
	mustNoErr(t, "ListEndOffsets", err)
	if o, _ := offsets.Lookup("rpc", 0); o.Offset != perPartition {
		t.Fatalf("end offset of partition 0 after the repeat: %d, want %d", o.Offset, perPartition)
	}

	// DisklessDeleteRecords moves the log start kgo then sees.
	dr := call(&rpcmsg.DeleteRecordsRequest{TimeoutMs: 5000, ShardID: firstShard, Partitions: []rpcmsg.DeleteRecordsPartition{
		{TopicID: topicID, Partition: 0, Offset: 10}}}).(*rpcmsg.DeleteRecordsResponse)
	if dr.ErrorCode != 0 || dr.Partitions[0].ErrorCode != 0 || dr.Partitions[0].LogStartOffset != 10 {
		t.Fatalf("DisklessDeleteRecords %+v", dr)
	}
	starts, err := adm.ListStartOffsets(ctx, "rpc")
	mustNoErr(t, "ListStartOffsets", err)
	if o, _ := starts.Lookup("rpc", 0); o.Offset != 10 {
		t.Fatalf("log start after DisklessDeleteRecords: %d, want 10", o.Offset)
	}

	// Producer ids from a block are never handed to a kgo producer.
	ap := call(&rpcmsg.AllocateProducerIDsRequest{TimeoutMs: 5000, ShardID: 0, BrokerID: 9}).(*rpcmsg.AllocateProducerIDsResponse)
	if ap.ErrorCode != 0 || ap.ProducerIDLen < 1 {
		t.Fatalf("DisklessAllocateProducerIds %+v", ap)
	}
	ip := kmsg.NewPtrInitProducerIDRequest()
	ipr := sc.DialRaw().Request(ip).(*kmsg.InitProducerIDResponse)
	if ipr.ProducerID >= ap.ProducerIDStart && ipr.ProducerID < ap.ProducerIDStart+int64(ap.ProducerIDLen) {
		t.Fatalf("InitProducerId handed out %d, of the block [%d, +%d) another sidecar took", ipr.ProducerID, ap.ProducerIDStart, ap.ProducerIDLen)
	}

	// A shard out of range: NOT_COORDINATOR; a partition of another shard:
	// INVALID_REQUEST on its own.
	bad := rpcmsg.NewCommitFileRequest()
	bad.ShardID = shards
	if r := call(bad).(*rpcmsg.CommitFileResponse); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("DisklessCommitFile to shard %d: %d", shards, r.ErrorCode)
	}
	fb := rpcmsg.NewFindBatchesRequest()
	fb.ShardID = (firstShard + 1) % shards
	fb.Partitions = []rpcmsg.FindBatchesPartition{{TopicID: topicID, Partition: 0}}
	if r := call(fb).(*rpcmsg.FindBatchesResponse); r.ErrorCode != 0 || r.Partitions[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("DisklessFindBatches of another shard's partition: %+v", r)
	}

	// DisklessDisableTopic to the sidecar: not confirmed while its catalog
	// does not hold the topic at the request's disablement epoch (SPEC §10;
	// the driver sends again), confirmed once the topic is disabled (it
	// then drains its produce requests).
	disable := rpcmsg.DisableTopicRequest{TimeoutMs: 300, TopicID: topicID, TopicName: "rpc", Epoch: 1}
	if dt := call(&disable).(*rpcmsg.DisableTopicResponse); dt.ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("DisklessDisableTopic of a topic not disabled: %d %v, want REQUEST_TIMED_OUT (not confirmed)", dt.ErrorCode, dt.ErrorMessage)
	}
	res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "diskless.enable", Value: kadm.StringPtr("false")}}, "rpc")
	mustNoErr(t, "AlterTopicConfigs diskless.enable=false", err)
	for _, r := range res {
		mustNoErr(t, "AlterTopicConfigs diskless.enable=false of "+r.Name, r.Err)
	}
	disable.TimeoutMs = 5000
	if dt := call(&disable).(*rpcmsg.DisableTopicResponse); dt.ErrorCode != 0 {
		t.Fatalf("DisklessDisableTopic of a disabled topic: %d %v", dt.ErrorCode, dt.ErrorMessage)
	}
}
