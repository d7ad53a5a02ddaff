package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/rpcmsg"
)

// handleDisklessCheckTxn answers DisklessCheckTxn (API key 110, SPEC §9,
// §15): Shards.CheckTxn on the transactional id's shard, hosted here — the
// check of a produce request's transactional batches (one code per
// partition, and the transaction's token) or of a TxnOffsetCommit made on
// another sidecar. A shard not here, or not the id's, answers
// NOT_COORDINATOR.
func (s *Server) handleDisklessCheckTxn(ctx context.Context, req *rpcmsg.CheckTxnRequest) kmsg.Response {
	resp := req.ResponseKind().(*rpcmsg.CheckTxnResponse)
	ctx, cancel := rpcTimeout(ctx, req.TimeoutMs)
	defer cancel()
	if err := s.serving(req.ShardID); err != nil {
		resp.ErrorCode, resp.ErrorMessage = rpcCode(err)
		return resp
	}
	check := diskless.TxnCheck{TransactionalID: req.TransactionalID, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch, Group: req.GroupID}
	if len(req.Partitions) > 0 {
		check.Partitions = make([]diskless.TopicPartition, len(req.Partitions))
		for i, p := range req.Partitions {
			check.Partitions[i] = diskless.TopicPartition{TopicID: p.TopicID, Partition: p.Partition}
		}
	}
	res, err := s.cfg.Shards.CheckTxn(ctx, req.ShardID, check)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = rpcCode(err)
		return resp
	}
	resp.TxnErrorCode, resp.TxnSeq = res.Code, res.Seq
	if len(res.PartitionCodes) > 0 {
		resp.Partitions = make([]rpcmsg.CheckTxnResult, len(res.PartitionCodes))
		for i, code := range res.PartitionCodes {
			resp.Partitions[i].ErrorCode = code
		}
	}
	return resp
}
