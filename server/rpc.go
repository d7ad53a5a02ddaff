package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/rpcmsg"
)

// The coordinator RPCs (SPEC §9, API keys 100–111; DESIGN §Coordinator
// RPCs): the requests another sidecar sends to reach a coordinator shard
// this one hosts, answered from Config.Shards, one file per key
// (100_diskless_describe_files.go, …). Like a Kafka broker's
// broker-to-broker APIs they are served on the listener clients use and
// advertised in ApiVersions; the sidecar has no authorization, so the
// listener must be on a network only the cluster's clients reach (KIP-1164
// asks for CLUSTER_ACTION once there is an authorizer).

// Shards is what the coordinator RPCs need of the coordinator shards this
// sidecar hosts (the coordinator implements it), in the types of diskless.
// Each method is the local call the RPC of the same name stands for.
type Shards interface {
	// Serving returns nil when shard is hosted here and takes requests,
	// else why not: diskless.ErrNotCoordinator (not hosted, or out of
	// range), diskless.ErrShardLoading, diskless.ErrClosed,
	// diskless.ErrShardFenced, diskless.ErrShardFailed (wrapped).
	Serving(shard int32) error
	// ShardFor returns the shard owning a partition.
	ShardFor(id diskless.TopicID, partition int32) int32
	CommitFile(ctx context.Context, shard int32, req *diskless.CommitFileRequest) ([]diskless.CommitBatchResult, error)
	FindBatches(ctx context.Context, reqs []diskless.FindBatchesRequest) []diskless.FindBatchesResult
	ListOffsets(ctx context.Context, tp diskless.TopicPartition, timestamp int64) diskless.ListOffsetsResult
	ListOffsetsFrom(ctx context.Context, tp diskless.TopicPartition, timestamp, from int64) diskless.ListOffsetsResult
	DescribeFiles(ctx context.Context, shard int32, keys []string) ([]diskless.FileState, error)
	DeleteRecords(ctx context.Context, tp diskless.TopicPartition, offset int64) (int64, error)
	CreatePartitionsIn(ctx context.Context, shard int32, topics []diskless.TopicPartitions) error
	DeleteTopicsIn(ctx context.Context, shard int32, ids []diskless.TopicID) error
	CloseFiles(ctx context.Context, shard, deleter int32, keys []string) error
	AllocateProducerIDBlock(ctx context.Context, node int32) (first int64, size int32, err error)
	CheckTxn(ctx context.Context, shard int32, req diskless.TxnCheck) (diskless.TxnCheckResult, error)
	EndTxnOffsets(ctx context.Context, shard int32, group string, pid int64, epoch int16, seq int64, committed bool) error
	// TopicTxns is DisklessDisableTopic's answer once this sidecar
	// confirmed: whether a transaction is open in the topic's partitions
	// on each of its shards hosted here (diskless.DisableTopicResult).
	TopicTxns(ctx context.Context, req diskless.DisableTopicRequest) []diskless.ShardTxns
}

// TopicDisabler is this sidecar's part of a topic's disablement
// (DisklessDisableTopic, SPEC §10): stop taking produce for the topic,
// end its long-polls and drop its cached data; nil once done (the produce
// requests accepted before have their answers). It must be safe to repeat.
type TopicDisabler interface {
	DisableTopic(ctx context.Context, req diskless.DisableTopicRequest) error
}

// rpcVersions: every coordinator RPC at version 0, the only one
// (docs/format/coordinator-rpcs.md).
var rpcVersions = func() []kmsg.ApiVersionsResponseApiKey {
	var out []kmsg.ApiVersionsResponseApiKey
	for k := rpcmsg.MinKey; k <= rpcmsg.MaxKey; k++ {
		out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: 0, MaxVersion: rpcmsg.RequestForKey(k).MaxVersion()})
	}
	return out
}()

// requestForKey returns a new request of key: Kafka's (kmsg) or a
// coordinator RPC (rpcmsg); nil for a key neither knows.
func requestForKey(key int16) kmsg.Request {
	if r := rpcmsg.RequestForKey(key); r != nil {
		return r
	}
	return kmsg.RequestForKey(key)
}

// nameForKey is kmsg.NameForKey, knowing the coordinator RPCs too.
func nameForKey(key int16) string {
	if n := rpcmsg.NameForKey(key); n != "" {
		return n
	}
	return kmsg.NameForKey(key)
}

// rpcCode is the code and message a coordinator RPC answers for err, the
// error of a local call (docs/format/coordinator-rpcs.md §Common fields):
// NOT_COORDINATOR when the shard is not (or no longer) here, so the sender
// looks its owner up again; COORDINATOR_LOAD_IN_PROGRESS while it loads;
// INVALID_REQUEST for a commit the shard refuses as malformed;
// REQUEST_TIMED_OUT when the request's time ran out; a Kafka error's own
// code; KAFKA_STORAGE_ERROR for anything else (a failed shard, a failed
// log write).
func rpcCode(err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	msg := err.Error()
	var ke *kerr.Error
	switch {
	case errors.Is(err, diskless.ErrNotCoordinator), errors.Is(err, diskless.ErrShardFenced), errors.Is(err, diskless.ErrClosed),
		errors.Is(err, diskless.ErrNotConfirmed):
		// Not here, moved, stopping, or the owner's log could not
		// confirm its state (cut off from Kafka: nothing was decided).
		return kerr.NotCoordinator.Code, &msg
	case errors.Is(err, diskless.ErrShardLoading):
		return kerr.CoordinatorLoadInProgress.Code, &msg
	case errors.Is(err, diskless.ErrInvalidCommit):
		return kerr.InvalidRequest.Code, &msg
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut.Code, &msg
	case errors.As(err, &ke):
		return ke.Code, &msg
	}
	return kerr.KafkaStorageError.Code, &msg
}

// serving is Shards.Serving, NOT_COORDINATOR for every shard when no
// Shards is configured.
func (s *Server) serving(shard int32) error {
	if s.cfg.Shards == nil {
		return diskless.ErrNotCoordinator
	}
	return s.cfg.Shards.Serving(shard)
}

// rpcTimeout bounds ctx by a request's TimeoutMs.
func rpcTimeout(ctx context.Context, ms int32) (context.Context, context.CancelFunc) {
	return withRequestTimeout(ctx, ms)
}

// codeOf is the Kafka code of a per-item error (nil: 0).
func codeOf(e *kerr.Error) int16 {
	if e == nil {
		return 0
	}
	return e.Code
}

var (
	// errWrongAnswerCount: a local call answered another number of items
	// than it was asked (a bug).
	errWrongAnswerCount = errors.New("server: the coordinator answered a different number of items than asked")
	// errNotShardZero: producer ids are allocated by shard 0 only.
	errNotShardZero = fmt.Errorf("%w: producer ids are allocated by shard 0", diskless.ErrNotCoordinator)
)
