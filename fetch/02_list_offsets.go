package fetch

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// listOffsetsEarliestLocal is ListOffsets' −4 (v8+, KIP-405): the first
// offset on the broker's local disk. A diskless log has no local/remote
// split, so it is the log start offset, as on a Kafka broker without tiered
// storage.
const listOffsetsEarliestLocal int64 = -4

// listOffsetsVersions: ListOffsets 1–8 (SPEC §6). v0 (old-style offset
// arrays) is not served; v1 is the first with (timestamp, offset) answers;
// v7 adds max timestamp (−3, SPEC §5); v8 adds −4, earliest local offset
// (KIP-405), answered with the log start offset (listOffsetsEarliestLocal).
// v9+ add tiered-storage lookups (−5) and a timeout, not implemented.
var listOffsetsVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 2, MinVersion: 1, MaxVersion: 8}

// ListOffsets answers req, a ListOffsets v1–8 request, with exactly one
// response of the same version (SPEC §5). Topics and partitions mirror the
// request's, in order. Per partition, by Timestamp:
//
//   - −2 earliest (and −4 earliest local, v8+): the log start offset;
//   - −1 latest: the high watermark;
//   - −3 max timestamp (v7+): the earliest record holding the largest
//     timestamp, with that timestamp;
//   - ≥ 0: the first record at or above the log start offset whose
//     timestamp is ≥ Timestamp, with its timestamp (on LogAppendTime
//     batches, the batch's append time); −1/−1 if there is none.
//
// LeaderEpoch (v4+) is [Config.LeaderEpoch] when an offset is found, else
// −1. read_committed answers as read_uncommitted (no transactions).
// Errors, per partition: INVALID_REQUEST (the partition is named more than
// once, at every occurrence), UNKNOWN_TOPIC_OR_PARTITION,
// FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH (v4+, as in Fetch),
// UNSUPPORTED_VERSION (another negative Timestamp, or one the version does
// not have), KAFKA_STORAGE_ERROR (the batch holding the answer cannot be
// read, or ctx ends while waiting for a decompression slot),
// CORRUPT_MESSAGE (that batch fails its checks, does not decompress or
// parse) or REQUEST_TIMED_OUT (decompressing to the answer took longer
// than Config.MaxScanTime). A batch whose header claims a max timestamp none of its
// records has is passed over with a warning, not an error (lookup.go).
func (h *Handler) ListOffsets(ctx context.Context, req *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse {
	resp := kmsg.NewPtrListOffsetsResponse()
	resp.Version = req.Version
	supported := req.Version >= listOffsetsVersions.MinVersion && req.Version <= listOffsetsVersions.MaxVersion
	dups := duplicates(req)
	resp.Topics = make([]kmsg.ListOffsetsResponseTopic, len(req.Topics))
	topics := make([]diskless.Topic, len(req.Topics))
	// The partitions left to look up, by shard: each shard's in turn, the
	// shards concurrently (byShard).
	var lookups map[int32][]func()
	for i := range req.Topics {
		rt := &req.Topics[i]
		out := &resp.Topics[i]
		out.Default()
		out.Topic = rt.Topic
		t, ok := h.coord.Topic(rt.Topic)
		topics[i] = t
		out.Partitions = make([]kmsg.ListOffsetsResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			o := &out.Partitions[j]
			o.Default()
			o.Partition = rp.Partition
			var errc *kerr.Error
			switch {
			case !supported:
				errc = kerr.UnsupportedVersion
			case dups[topicPartitionName{rt.Topic, rp.Partition}]:
				errc = kerr.InvalidRequest
			case !ok || !partitionExists(&t, rp.Partition):
				errc = kerr.UnknownTopicOrPartition
			case req.Version >= 4:
				errc = h.checkLeaderEpoch(rp.CurrentLeaderEpoch)
			}
			if errc != nil {
				setListOffsetsError(o, errc)
				continue
			}
			if lookups == nil {
				lookups = map[int32][]func(){}
			}
			shard := h.coord.ShardFor(t.ID, rp.Partition)
			lookups[shard] = append(lookups[shard], func() {
				if errc := h.listOffset(ctx, &topics[i], req.Version, req.IsolationLevel == 1, rp, o); errc != nil {
					setListOffsetsError(o, errc)
				}
			})
		}
	}
	byShard(lookups)
	return resp
}

// setListOffsetsError answers a partition of ListOffsets with errc.
func setListOffsetsError(o *kmsg.ListOffsetsResponseTopicPartition, errc *kerr.Error) {
	o.ErrorCode = errc.Code
	o.Offset, o.Timestamp, o.LeaderEpoch = -1, -1, -1
}

// byShard runs each shard's calls one after the other, the shards
// concurrently (one goroutine per shard beyond the first, waited for),
// and returns once all have returned. An answer read from a hosted shard
// waits for its metadata log's confirmation (DESIGN §Fencing, the
// read-index rule) — up to the coordinator's ConfirmTimeout on a sidecar
// cut off from Kafka — and one of a remote shard for its owner: a request
// spanning k shards waits for the slowest of them, not for the sum of k
// waits. A shard's own calls share its confirmation (a failed one answers
// the calls right after it at once), so they gain nothing from running
// concurrently.
func byShard(calls map[int32][]func()) {
	var wg sync.WaitGroup
	var here func() // the first shard's, on this goroutine
	for _, fs := range calls {
		run := func() {
			for _, f := range fs {
				f()
			}
		}
		if here == nil {
			here = run
			continue
		}
		wg.Go(run)
	}
	if here != nil {
		here()
	}
	wg.Wait()
}

// topicPartitionName names a partition as ListOffsets does, by topic name.
type topicPartitionName struct {
	topic     string
	partition int32
}

// duplicates returns the partitions req names more than once, which Kafka
// answers with INVALID_REQUEST at every occurrence; nil if there are none.
func duplicates(req *kmsg.ListOffsetsRequest) map[topicPartitionName]bool {
	n := 0
	for i := range req.Topics {
		n += len(req.Topics[i].Partitions)
	}
	if n < 2 {
		return nil
	}
	seen := make(map[topicPartitionName]bool, n)
	var dups map[topicPartitionName]bool
	for i := range req.Topics {
		for _, p := range req.Topics[i].Partitions {
			k := topicPartitionName{req.Topics[i].Topic, p.Partition}
			if seen[k] {
				if dups == nil {
					dups = map[topicPartitionName]bool{}
				}
				dups[k] = true
			}
			seen[k] = true
		}
	}
	return dups
}

// listOffset answers one partition into o, or returns its error. Under
// read_committed (SPEC §15) latest is the last stable offset, and a
// timestamp lookup finding an offset at or past it finds nothing.
func (h *Handler) listOffset(ctx context.Context, t *diskless.Topic, version int16, readCommitted bool,
	rp *kmsg.ListOffsetsRequestTopicPartition, o *kmsg.ListOffsetsResponseTopicPartition,
) *kerr.Error {
	ts := rp.Timestamp
	switch {
	case ts >= 0, ts == diskless.ListOffsetsLatest, ts == diskless.ListOffsetsEarliest:
	case ts == diskless.ListOffsetsMaxTimestamp && version >= 7:
	case ts == listOffsetsEarliestLocal && version >= 8:
		ts = diskless.ListOffsetsEarliest
	default:
		return kerr.UnsupportedVersion
	}
	tp := diskless.TopicPartition{TopicID: t.ID, Partition: rp.Partition}
	res := h.coord.ListOffsets(ctx, tp, ts)
	if res.Err != nil {
		return res.Err
	}
	at := hit{res.Offset, res.Timestamp}
	if readCommitted && ts == diskless.ListOffsetsLatest {
		at.offset = res.LastStableOffset
	}
	if res.Candidate != nil {
		l := lookup{h: h, topic: t.Name, tp: tp, logStart: res.LogStartOffset}
		var errc *kerr.Error
		if ts == diskless.ListOffsetsMaxTimestamp {
			at, errc = l.maxTimestamp(ctx, *res.Candidate)
		} else {
			at, errc = l.atOrAfter(ctx, *res.Candidate, ts)
		}
		if errc != nil {
			return errc
		}
		if readCommitted && at.offset >= res.LastStableOffset {
			at = hit{-1, -1}
		}
	}
	o.Offset, o.Timestamp = at.offset, at.timestamp
	if at.offset >= 0 {
		o.LeaderEpoch = h.cfg.LeaderEpoch
	}
	return nil
}
