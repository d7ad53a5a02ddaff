package peer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/rpcmsg"
)

// The coordinator RPCs as calls on one peer, in the types of diskless:
// each builds the request (docs/format/coordinator-rpcs.md), sends it
// with Client.Request and turns the answer back into what the local call
// of the same name returns. The shard's whole-request error becomes a Go
// error (shardError); per-item errors stay Kafka errors.

// timeoutMs is the TimeoutMs a request carries: what is left of ctx's
// deadline, else fallback.
func timeoutMs(ctx context.Context, fallback time.Duration) int32 {
	d := fallback
	if dl, ok := ctx.Deadline(); ok {
		d = time.Until(dl)
	}
	return int32(min(max(d.Milliseconds(), 1), 1<<31-1))
}

// defaultTimeout is the TimeoutMs of a request whose ctx has no deadline.
const defaultTimeout = 30 * time.Second

// shardError turns a response's top-level ErrorCode into the error of
// the local call (docs/format/coordinator-rpcs.md §Common fields), nil for
// 0: NOT_COORDINATOR → diskless.ErrNotCoordinator,
// COORDINATOR_LOAD_IN_PROGRESS → diskless.ErrShardLoading, INVALID_REQUEST
// → invalid (diskless.ErrInvalidCommit for CommitFile), any other code its
// kerr error; each wrapped with the peer's message.
func shardError(addr string, code int16, msg *string, invalid error) error {
	if code == 0 {
		return nil
	}
	m := ""
	if msg != nil {
		m = ": " + *msg
	}
	var base error
	switch code {
	case kerr.NotCoordinator.Code:
		base = diskless.ErrNotCoordinator
	case kerr.CoordinatorLoadInProgress.Code:
		base = diskless.ErrShardLoading
	case kerr.InvalidRequest.Code:
		if invalid != nil {
			base = invalid
		} else {
			base = kerr.InvalidRequest
		}
	default:
		base = kerr.ErrorForCode(code)
	}
	return fmt.Errorf("peer %s: %w%s", addr, base, m)
}

// kafkaError is the *kerr.Error of a per-item code, nil for 0.
func kafkaError(code int16) *kerr.Error {
	if code == 0 {
		return nil
	}
	var ke *kerr.Error
	if errors.As(kerr.ErrorForCode(code), &ke) {
		return ke
	}
	return kerr.UnknownServerError
}

// errAnswerCount is an answer with another number of items than asked.
var errAnswerCount = errors.New("peer: answer holds a different number of items than the request")

// commitFile sends DisklessCommitFile.
func (c *Client) commitFile(ctx context.Context, addr string, shard int32, req *diskless.CommitFileRequest) ([]diskless.CommitBatchResult, error) {
	w := rpcmsg.NewCommitFileRequest()
	w.TimeoutMs = timeoutMs(ctx, defaultTimeout)
	w.ShardID, w.ObjectKey, w.ObjectFormat, w.FileSize = shard, req.ObjectKey, req.ObjectFormat, req.FileSize
	w.UploaderBrokerID, w.OwnerIDs = req.UploaderBrokerID, req.OwnerIDs
	w.Batches = make([]rpcmsg.CommitFileBatch, len(req.Batches))
	for i := range req.Batches {
		b := &req.Batches[i]
		w.Batches[i] = rpcmsg.CommitFileBatch{TopicID: b.TopicID, Partition: b.Partition, Magic: b.Magic,
			ByteOffset: b.ByteOffset, ByteSize: b.ByteSize, LastOffsetDelta: b.LastOffsetDelta,
			BatchMaxTimestamp: b.BatchMaxTimestamp, TimestampType: b.TimestampType, ProducerID: b.ProducerID,
			ProducerEpoch: b.ProducerEpoch, BaseSequence: b.BaseSequence, LastSequence: b.LastSequence,
			Txn: b.Txn, TxnSeq: b.TxnSeq, CoordinatorEpoch: b.CoordinatorEpoch}
	}
	r, err := c.Request(ctx, addr, w)
	if err != nil {
		return nil, err
	}
	resp := r.(*rpcmsg.CommitFileResponse)
	if err := shardError(addr, resp.ErrorCode, resp.ErrorMessage, diskless.ErrInvalidCommit); err != nil {
		return nil, err
	}
	if len(resp.Batches) != len(req.Batches) {
		return nil, errAnswerCount
	}
	out := make([]diskless.CommitBatchResult, len(resp.Batches))
	for i, b := range resp.Batches {
		out[i] = diskless.CommitBatchResult{Err: kafkaError(b.ErrorCode), BaseOffset: b.BaseOffset,
			LogAppendTime: b.LogAppendTime, LogStartOffset: b.LogStartOffset, Duplicate: b.Duplicate}
	}
	return out, nil
}

// findBatches sends DisklessFindBatches for reqs, all of shard.
func (c *Client) findBatches(ctx context.Context, addr string, shard int32, reqs []diskless.FindBatchesRequest) ([]diskless.FindBatchesResult, error) {
	w := rpcmsg.NewFindBatchesRequest()
	w.TimeoutMs, w.ShardID = timeoutMs(ctx, defaultTimeout), shard
	w.Partitions = make([]rpcmsg.FindBatchesPartition, len(reqs))
	for i, q := range reqs {
		w.Partitions[i] = rpcmsg.FindBatchesPartition{TopicID: q.TopicID, Partition: q.Partition, Offset: q.Offset, MaxBytes: q.MaxBytes}
	}
	r, err := c.Request(ctx, addr, w)
	if err != nil {
		return nil, err
	}
	resp := r.(*rpcmsg.FindBatchesResponse)
	if err := shardError(addr, resp.ErrorCode, resp.ErrorMessage, nil); err != nil {
		return nil, err
	}
	if len(resp.Partitions) != len(reqs) {
		return nil, errAnswerCount
	}
	coordinate := func(c *rpcmsg.Coordinate) (diskless.RunCoordinate, bool) {
		if c.ObjectIndex < 0 || int(c.ObjectIndex) >= len(resp.Objects) {
			return diskless.RunCoordinate{}, c.ObjectIndex == -1
		}
		o := &resp.Objects[c.ObjectIndex]
		return diskless.RunCoordinate{ObjectKey: o.ObjectKey, FileSize: o.FileSize, ObjectFormat: o.ObjectFormat, ByteOffset: c.ByteOffset,
			ByteSize: c.ByteSize, BaseOffset: c.BaseOffset, LastOffset: c.LastOffset, TimestampType: c.TimestampType,
			LogAppendTime: c.LogAppendTime, BatchMaxTimestamp: c.BatchMaxTimestamp}, true
	}
	out := make([]diskless.FindBatchesResult, len(reqs))
	for i := range resp.Partitions {
		p := &resp.Partitions[i]
		o := &out[i]
		o.Err, o.LogStartOffset, o.HighWatermark = kafkaError(p.ErrorCode), p.LogStartOffset, p.HighWatermark
		// A cluster serves no transaction (DESIGN §Transactions): the
		// last stable offset is the high watermark.
		o.LastStableOffset = p.HighWatermark
		if len(p.Runs) > 0 {
			o.Runs = make([]diskless.RunCoordinate, len(p.Runs))
		}
		for j := range p.Runs {
			b, ok := coordinate(&p.Runs[j])
			if !ok || b.ObjectKey == "" {
				return nil, fmt.Errorf("peer %s: FindBatches answer names object %d of %d", addr, p.Runs[j].ObjectIndex, len(resp.Objects))
			}
			o.Runs[j] = b
		}
		next, ok := coordinate(&p.Next)
		if !ok {
			return nil, fmt.Errorf("peer %s: FindBatches answer names object %d of %d", addr, p.Next.ObjectIndex, len(resp.Objects))
		}
		o.Next = next
	}
	return out, nil
}

// listOffsets sends DisklessListOffsets for one partition (from −1:
// ListOffsets, else ListOffsetsFrom).
func (c *Client) listOffsets(ctx context.Context, addr string, shard int32, tp diskless.TopicPartition, timestamp, from int64) (diskless.ListOffsetsResult, error) {
	w := rpcmsg.NewListOffsetsRequest()
	w.TimeoutMs, w.ShardID = timeoutMs(ctx, defaultTimeout), shard
	w.Partitions = []rpcmsg.ListOffsetsPartition{{TopicID: tp.TopicID, Partition: tp.Partition, Timestamp: timestamp, From: from}}
	r, err := c.Request(ctx, addr, w)
	if err != nil {
		return diskless.ListOffsetsResult{}, err
	}
	resp := r.(*rpcmsg.ListOffsetsResponse)
	if err := shardError(addr, resp.ErrorCode, resp.ErrorMessage, nil); err != nil {
		return diskless.ListOffsetsResult{}, err
	}
	if len(resp.Partitions) != 1 || len(resp.Partitions[0].Candidates) > 1 {
		return diskless.ListOffsetsResult{}, errAnswerCount
	}
	p := &resp.Partitions[0]
	out := diskless.ListOffsetsResult{Err: kafkaError(p.ErrorCode), LogStartOffset: p.LogStartOffset,
		HighWatermark: p.HighWatermark, LastStableOffset: p.HighWatermark, Offset: p.Offset, Timestamp: p.Timestamp}
	if len(p.Candidates) == 1 {
		c := &p.Candidates[0]
		out.Candidate = &diskless.RunCoordinate{ObjectKey: c.ObjectKey, FileSize: c.FileSize, ObjectFormat: c.ObjectFormat, ByteOffset: c.ByteOffset,
			ByteSize: c.ByteSize, BaseOffset: c.BaseOffset, LastOffset: c.LastOffset, TimestampType: c.TimestampType,
			LogAppendTime: c.LogAppendTime, BatchMaxTimestamp: c.BatchMaxTimestamp}
	}
	return out, nil
}

// describeFiles sends DisklessDescribeFiles. A per-file error (every
// file's alike: the shard's answer) is returned as the call's error.
func (c *Client) describeFiles(ctx context.Context, addr string, shard int32, keys []string) ([]diskless.FileState, error) {
	w := rpcmsg.NewDescribeFilesRequest()
	w.TimeoutMs, w.ShardID, w.ObjectKeys = timeoutMs(ctx, rpcmsg.DefaultDescribeFilesTimeoutMs*time.Millisecond), shard, keys
	r, err := c.Request(ctx, addr, w)
	if err != nil {
		return nil, err
	}
	resp := r.(*rpcmsg.DescribeFilesResponse)
	if len(resp.Files) != len(keys) {
		return nil, errAnswerCount
	}
	out := make([]diskless.FileState, len(keys))
	for i, f := range resp.Files {
		if err := shardError(addr, f.ErrorCode, nil, nil); err != nil {
			return nil, err
		}
		out[i] = diskless.FileState(f.State)
	}
	return out, nil
}

// deleteRecords sends DisklessDeleteRecords for one partition.
func (c *Client) deleteRecords(ctx context.Context, addr string, shard int32, tp diskless.TopicPartition, offset int64) (int64, error) {
	w := rpcmsg.NewDeleteRecordsRequest()
	w.TimeoutMs, w.ShardID = timeoutMs(ctx, defaultTimeout), shard
	w.Partitions = []rpcmsg.DeleteRecordsPartition{{TopicID: tp.TopicID, Partition: tp.Partition, Offset: offset}}
	r, err := c.Request(ctx, addr, w)
	if err != nil {
		return -1, err
	}
	resp := r.(*rpcmsg.DeleteRecordsResponse)
	if err := shardError(addr, resp.ErrorCode, resp.ErrorMessage, nil); err != nil {
		return -1, err
	}
	if len(resp.Partitions) != 1 {
		return -1, errAnswerCount
	}
	p := &resp.Partitions[0]
	if p.ErrorCode != 0 {
		// The partition's own error, as the local call returns it: a
		// Kafka error with the peer's message.
		if p.ErrorMessage != nil {
			return -1, fmt.Errorf("%w: %s", kafkaError(p.ErrorCode), *p.ErrorMessage)
		}
		return -1, kafkaError(p.ErrorCode)
	}
	return p.LogStartOffset, nil
}

// createPartitionsIn sends DisklessCreatePartitions.
func (c *Client) createPartitionsIn(ctx context.Context, addr string, shard int32, topics []diskless.TopicPartitions) error {
	w := rpcmsg.NewCreatePartitionsRequest()
	w.TimeoutMs, w.ShardID = timeoutMs(ctx, defaultTimeout), shard
	w.Topics = make([]rpcmsg.CreatePartitionsTopic, len(topics))
	for i, t := range topics {
		w.Topics[i] = rpcmsg.CreatePartitionsTopic{TopicID: t.ID, TopicName: t.Name, Partitions: t.Partitions}
	}
	r, err := c.Request(ctx, addr, w)
	if err != nil {
		return err
	}
	resp := r.(*rpcmsg.CreatePartitionsResponse)
	return shardError(addr, resp.ErrorCode, resp.ErrorMessage, nil)
}

// deleteTopicsIn sends DisklessDeleteTopics.
func (c *Client) deleteTopicsIn(ctx context.Context, addr string, shard int32, ids []diskless.TopicID) error {
	w := rpcmsg.NewDeleteTopicsRequest()
	w.TimeoutMs, w.ShardID = timeoutMs(ctx, defaultTimeout), shard
	w.TopicIDs = make([][16]byte, len(ids))
	for i, id := range ids {
		w.TopicIDs[i] = id
	}
	r, err := c.Request(ctx, addr, w)
	if err != nil {
		return err
	}
	resp := r.(*rpcmsg.DeleteTopicsResponse)
	return shardError(addr, resp.ErrorCode, resp.ErrorMessage, nil)
}

// closeFiles sends DisklessDeleteFiles.
func (c *Client) closeFiles(ctx context.Context, addr string, shard, deleter int32, keys []string) error {
	w := rpcmsg.NewDeleteFilesRequest()
	w.TimeoutMs, w.ShardID, w.DeleterShardID, w.ObjectKeys = timeoutMs(ctx, defaultTimeout), shard, deleter, keys
	r, err := c.Request(ctx, addr, w)
	if err != nil {
		return err
	}
	resp := r.(*rpcmsg.DeleteFilesResponse)
	return shardError(addr, resp.ErrorCode, resp.ErrorMessage, nil)
}

// allocateProducerIDBlock sends DisklessAllocateProducerIds to shard 0's
// host.
func (c *Client) allocateProducerIDBlock(ctx context.Context, addr string, node int32) (int64, int32, error) {
	w := rpcmsg.NewAllocateProducerIDsRequest()
	w.TimeoutMs, w.ShardID, w.BrokerID = timeoutMs(ctx, defaultTimeout), 0, node
	r, err := c.Request(ctx, addr, w)
	if err != nil {
		return -1, 0, err
	}
	resp := r.(*rpcmsg.AllocateProducerIDsResponse)
	if err := shardError(addr, resp.ErrorCode, resp.ErrorMessage, nil); err != nil {
		return -1, 0, err
	}
	if resp.ProducerIDStart < 0 || resp.ProducerIDLen < 1 {
		return -1, 0, fmt.Errorf("peer %s: producer id block [%d, +%d) is not one", addr, resp.ProducerIDStart, resp.ProducerIDLen)
	}
	return resp.ProducerIDStart, resp.ProducerIDLen, nil
}

// checkTxn sends DisklessCheckTxn: one request for all of req's
// partitions. An answer allowing the producer must hold one code per
// partition (errAnswerCount).
func (c *Client) checkTxn(ctx context.Context, addr string, shard int32, req diskless.TxnCheck) (diskless.TxnCheckResult, error) {
	w := rpcmsg.NewCheckTxnRequest()
	w.TimeoutMs, w.ShardID = timeoutMs(ctx, defaultTimeout), shard
	w.TransactionalID, w.ProducerID, w.ProducerEpoch, w.GroupID = req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group
	w.Partitions = make([]rpcmsg.CheckTxnPartition, len(req.Partitions))
	for i, tp := range req.Partitions {
		w.Partitions[i] = rpcmsg.CheckTxnPartition{TopicID: tp.TopicID, Partition: tp.Partition}
	}
	r, err := c.Request(ctx, addr, w)
	if err != nil {
		return diskless.TxnCheckResult{}, err
	}
	resp := r.(*rpcmsg.CheckTxnResponse)
	if err := shardError(addr, resp.ErrorCode, resp.ErrorMessage, nil); err != nil {
		return diskless.TxnCheckResult{}, err
	}
	res := diskless.TxnCheckResult{Code: resp.TxnErrorCode, Seq: resp.TxnSeq}
	if res.Code != 0 || req.Group != "" {
		return res, nil
	}
	if len(resp.Partitions) != len(req.Partitions) {
		return diskless.TxnCheckResult{}, errAnswerCount
	}
	res.PartitionCodes = make([]int16, len(resp.Partitions))
	for i, p := range resp.Partitions {
		res.PartitionCodes[i] = p.ErrorCode
	}
	return res, nil
}

// endTxnOffsets sends DisklessEndTxnOffsets.
func (c *Client) endTxnOffsets(ctx context.Context, addr string, shard int32, group string, pid int64, epoch int16, seq int64, committed bool) error {
	w := rpcmsg.NewEndTxnOffsetsRequest()
	w.TimeoutMs, w.ShardID, w.GroupID = timeoutMs(ctx, defaultTimeout), shard, group
	w.ProducerID, w.ProducerEpoch, w.TxnSeq, w.Committed = pid, epoch, seq, committed
	r, err := c.Request(ctx, addr, w)
	if err != nil {
		return err
	}
	resp := r.(*rpcmsg.EndTxnOffsetsResponse)
	return shardError(addr, resp.ErrorCode, resp.ErrorMessage, nil)
}

// disableTopic sends DisklessDisableTopic.
func (c *Client) disableTopic(ctx context.Context, addr string, req diskless.DisableTopicRequest) (diskless.DisableTopicResult, error) {
	w := rpcmsg.NewDisableTopicRequest()
	w.TimeoutMs, w.TopicID, w.TopicName = timeoutMs(ctx, defaultTimeout), req.TopicID, req.Topic
	w.Epoch, w.Policy = req.Epoch, int8(req.Policy)
	r, err := c.Request(ctx, addr, w)
	if err != nil {
		return diskless.DisableTopicResult{}, err
	}
	resp := r.(*rpcmsg.DisableTopicResponse)
	if err := shardError(addr, resp.ErrorCode, resp.ErrorMessage, nil); err != nil {
		return diskless.DisableTopicResult{}, err
	}
	var res diskless.DisableTopicResult
	for _, st := range resp.TxnShards {
		res.TxnShards = append(res.TxnShards, diskless.ShardTxns{Shard: st.ShardID, Open: st.TxnsOpen})
	}
	return res, nil
}
