package kafkalog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch sizes of a replay.
const (
	fetchMaxBytes          = 64 << 20
	fetchPartitionMaxBytes = 32 << 20
	// fetchMaxWaitMs is how long the broker may wait for data; a replay
	// only asks below the high watermark, where data is there, so it
	// matters only while a new leader catches up.
	fetchMaxWaitMs = 200
)

// errOutOfRange is returned (wrapped) by read when its start offset is
// below the partition's log start offset: records were deleted under the
// read.
var errOutOfRange = errors.New("kafkalog: offset below the log start offset")

// outOfRange tells why a broker answered a fetch at off with
// OFFSET_OUT_OF_RANGE. Kafka 4.4 gives no log start offset in such an
// answer (−1), and any replica answers a consumer's fetch (Fetch v11+),
// so off may be deleted, or merely beyond the log of a replica that is
// behind: it asks the leader for the log start offset (ListOffsets −2).
// errOutOfRange (wrapped) when off is below it; nil when it is not (the
// caller asks the leader again after a backoff); the ListOffsets error.
func (t *Topic) outOfRange(ctx context.Context, partition int32, off int64) error {
	ls, err := t.listOffset(ctx, partition, -2)
	if err != nil {
		return fmt.Errorf("kafkalog: partition %d of %s: offset %d out of range, and the log start offset: %w", partition, t.cfg.Topic, off, err)
	}
	if off < ls {
		return fmt.Errorf("%w: partition %d of %s: offset %d (log start offset %d)", errOutOfRange, partition, t.cfg.Topic, off, ls)
	}
	return nil
}

// read fetches partition's records in [start, end) (isolation level
// read_uncommitted: up to the high watermark, which every replica in sync
// holds; control records, which this backend never writes, are skipped)
// and calls fn for each in offset order. The records and their bytes stay
// valid after fn (each fetch's answer is its own; a scan keeps a group's
// records until the group ends). A leader change or a broker
// that does not answer is retried until ctx is done. Errors: fn's;
// errOutOfRange; ctx's; a fetch error that retrying cannot fix.
func (t *Topic) read(ctx context.Context, partition int32, start, end int64, fn func(*kgo.Record) error) error {
	off := start
	refresh := false
	backoff := func(err error) error {
		refresh = true
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafkalog: reading partition %d of %s at offset %d: %w (last error: %v)", partition, t.cfg.Topic, off, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
			return nil
		}
	}
	dec := kgo.DefaultDecompressor()
	for off < end {
		if err := ctx.Err(); err != nil {
			return err
		}
		leader, err := t.leader(ctx, partition, refresh)
		if err != nil {
			if err := backoff(err); err != nil {
				return err
			}
			continue
		}
		refresh = false
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = fetchMaxWaitMs
		req.MinBytes = 1
		req.MaxBytes = fetchMaxBytes
		req.IsolationLevel = 0 // read_uncommitted
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = t.cfg.Topic
		rt.TopicID = t.topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = partition
		rp.CurrentLeaderEpoch = -1
		rp.FetchOffset = off
		rp.LogStartOffset = -1
		rp.PartitionMaxBytes = fetchPartitionMaxBytes
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, t.cl.Broker(int(leader)))
		if err != nil {
			if err := backoff(err); err != nil {
				return err
			}
			continue
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			if err := backoff(err); err != nil {
				return err
			}
			continue
		}
		var p *kmsg.FetchResponseTopicPartition
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if resp.Topics[i].Partitions[j].Partition == partition {
					p = &resp.Topics[i].Partitions[j]
				}
			}
		}
		if p == nil {
			if err := backoff(fmt.Errorf("no partition %d in the fetch answer", partition)); err != nil {
				return err
			}
			continue
		}
		switch err := kerr.ErrorForCode(p.ErrorCode); {
		case err == nil:
		case errors.Is(err, kerr.OffsetOutOfRange):
			why := t.outOfRange(ctx, partition, off)
			if errors.Is(why, errOutOfRange) {
				return why
			}
			// Above the answering broker's log end: it is behind (a new
			// leader catching up, or a replica that no longer leads).
			if err := backoff(cmp.Or(why, err)); err != nil {
				return err
			}
			continue
		case kerr.IsRetriable(err) || errors.Is(err, kerr.UnknownTopicID):
			// NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, LEADER_NOT_AVAILABLE, …
			if err := backoff(err); err != nil {
				return err
			}
			continue
		default:
			return fmt.Errorf("kafkalog: fetching partition %d of %s at offset %d: %w", partition, t.cfg.Topic, off, err)
		}
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
			Offset:         off,
			IsolationLevel: kgo.ReadUncommitted(),
			Topic:          t.cfg.Topic,
			Partition:      partition,
		}, p, dec, nil)
		if fp.Err != nil {
			return fmt.Errorf("kafkalog: decoding partition %d of %s at offset %d: %w", partition, t.cfg.Topic, off, fp.Err)
		}
		for _, r := range fp.Records {
			if r.Offset >= end {
				return nil
			}
			if r.Attrs.IsControl() {
				continue
			}
			if err := fn(r); err != nil {
				return err
			}
		}
		if next > off {
			off = next
			continue
		}
		// Nothing past off yet: the leader's high watermark is behind the
		// records asked for (a new leader catching up). Ask again.
		if err := backoff(fmt.Errorf("no records at offset %d below %d", off, end)); err != nil {
			return err
		}
	}
	return nil
}
