package kafkalog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/metalog"
)

// Follower reads a shard's partition as a read replica
// (metalog.Follower; DESIGN §Read replicas): the same validity rule as a
// writer's replay (scan.go), from the same anchors (where it got to, a
// snapshot pointer, the log start offset), but it appends nothing — no
// claim — so it never fences the writer. It reads to the high watermark:
// what a writer's Append acknowledged is there (acks=all), and the rule
// counts a group from the records before it alone, so every reader
// counts what this one delivers. Wait is a long-poll Fetch at the offset
// after the last record read, which the partition's leader answers as
// soon as a record lands there.
type Follower struct {
	// l holds the reading machinery of a log handle (anchor, scanRange,
	// snapshot pointers); the follower never calls its Replay or Append,
	// which claim.
	l *Log
	// wcl is the follower's own client for Wait's long-poll: a broker
	// answers one connection's requests in turn, so long-polls on the
	// topic's shared client would hold up each other and every other
	// read behind them.
	wcl *kgo.Client

	mu sync.Mutex // the calls are one goroutine's; Close is not
	// pos is the offset to go on scanning from with st (anchored): the
	// start of the group being read when the last scan ended inside one.
	pos      int64
	st       scanState
	anchored bool
	// end is the offset after the last record read (the high watermark
	// of the last scan): where Wait waits.
	end int64
	// waitFailed is set when Wait returned a failure (waitFailAfter):
	// the next Wait returns at its first fetch that succeeds, so that
	// the caller learns the partition is readable again. Wait's alone
	// (one goroutine's).
	waitFailed bool
	closed     chan struct{}
	once       sync.Once
}

var _ metalog.Follower = (*Follower)(nil)

// followWaitMs bounds one Wait fetch at the broker; Wait asks again until
// its ctx ends.
const followWaitMs = 5000

// waitFailAfter is how long Wait retries a leader lookup or fetch that
// fails (every 100 ms, the leader looked up again) before it returns the
// last failure: as long as one long-poll lasts. A leader change shorter
// than that stays inside Wait; a partition unreachable for longer (its
// leader gone, this sidecar cut off from Kafka) is reported to the
// caller — the coordinator's replica counts it towards ShardRetrying
// (DESIGN §Read replicas) and calls Wait again.
const waitFailAfter = followWaitMs * time.Millisecond

// Follow returns a follower of shard's partition. Its signature fits
// coordinator.Config.OpenFollower.
func (t *Topic) Follow(shard int32) (metalog.Follower, error) {
	if shard < 0 || shard >= t.cfg.Partitions {
		return nil, fmt.Errorf("kafkalog: shard %d out of [0, %d)", shard, t.cfg.Partitions)
	}
	l, err := t.openLog(shard)
	if err != nil {
		return nil, err
	}
	wcl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(t.cfg.Brokers...),
		kgo.ClientID(fmt.Sprintf("diskless-sidecar-follower-%d", shard)),
		kgo.WithLogger(kgoLogger{t.logger}),
		kgo.RetryTimeout(t.cfg.RequestTimeout),
	}, t.cfg.ClientOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("kafkalog: follower of shard %d: %w", shard, err)
	}
	return &Follower{l: l, wcl: wcl, closed: make(chan struct{})}, nil
}

func (f *Follower) isClosed() bool {
	select {
	case <-f.closed:
		return true
	default:
		return false
	}
}

// ReadSnapshot implements metalog.Follower, as Log.ReadSnapshot, retrying
// transient failures (transient).
func (f *Follower) ReadSnapshot(ctx context.Context) (idx int64, payload []byte, err error) {
	err = f.retry(ctx, func() (err error) {
		if f.isClosed() {
			return metalog.ErrClosed
		}
		idx, payload, err = f.l.ReadSnapshot(ctx)
		return err
	})
	return idx, payload, err
}

// transient reports whether a follower's read failed in a way that goes
// away by itself: a partition a broker does not know yet (a topic just
// created, its metadata still reaching every broker), no leader, a leader
// change. A writer's Replay retries them too.
func transient(err error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke) && (ke.Retriable || errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.UnknownTopicID))
}

// retry calls fn until it succeeds, fails for good, ctx ends or 4 ×
// Config.RequestTimeout passed (as a writer's Replay), with 200 ms
// between attempts.
func (f *Follower) retry(ctx context.Context, fn func() error) error {
	ctx, cancel := context.WithTimeout(ctx, 4*f.l.t.cfg.RequestTimeout)
	defer cancel()
	for {
		err := fn()
		if err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-f.closed:
			return metalog.ErrClosed
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Replay implements metalog.Follower: it reads the partition from the
// best anchor at or before from to the high watermark and delivers the
// groups the rule counts with indexes ≥ from. Records below from that
// were deleted (the writer truncated after a snapshot, or meanwhile):
// metalog.ErrTruncated.
func (f *Follower) Replay(ctx context.Context, from int64, fn func(index int64, body []byte) error) (next int64, err error) {
	err = f.retry(ctx, func() (err error) {
		delivered := false
		next, err = f.replay(ctx, from, func(i int64, b []byte) error {
			delivered = true
			return fn(i, b)
		})
		if err != nil && delivered && transient(err) {
			// Records went to fn already: not retried here (it would
			// deliver them again); the caller replays again.
			return fmt.Errorf("kafkalog: follower of shard %d, after delivering records: %v", f.l.shard, err)
		}
		return err
	})
	return next, err
}

// replay is one attempt of Replay.
func (f *Follower) replay(ctx context.Context, from int64, fn func(index int64, body []byte) error) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.isClosed() {
		return 0, metalog.ErrClosed
	}
	l := f.l
	end, err := l.t.listOffset(ctx, l.shard, -1)
	if err != nil {
		return 0, fmt.Errorf("kafkalog: shard %d: high watermark: %w", l.shard, err)
	}
	var (
		sc    *scanner
		start int64
	)
	if f.anchored && f.st.next <= from {
		sc, start = newScanner(f.st, l.where), f.pos
	} else {
		l.mu.Lock()
		sc, start, err = l.anchor(ctx, from)
		l.mu.Unlock()
		if err != nil {
			return 0, err
		}
	}
	sc.pointerSeen = l.addPointer
	sc.group = func(recs []pendingRecord, _, _ int64) error {
		for _, r := range recs {
			if r.index < from {
				continue
			}
			if err := fn(r.index, r.body); err != nil {
				return fmt.Errorf("%w: kafkalog: follower of shard %d: record %d (offset %d): %w", errCallback, l.shard, r.index, r.offset, err)
			}
		}
		return nil
	}
	sc.dropped = func(int64, string) {} // the writer's business; a follower only skips them
	if err := l.t.read(ctx, l.shard, start, end, func(r *kgo.Record) error { return sc.add(r.Offset, r.Key, r.Value) }); err != nil {
		f.anchored = false
		if errors.Is(err, errOutOfRange) {
			return 0, fmt.Errorf("%w: %s: %w", metalog.ErrTruncated, l.where, err)
		}
		return 0, err
	}
	if sc.needPointer {
		// Nothing read (a truncated log, its pointer not there yet):
		// nothing to deliver, no anchor learnt.
		f.anchored = false
		return from, nil
	}
	if sc.began > from {
		f.anchored = false
		return 0, fmt.Errorf("%w: %s: records from %d were deleted (the log starts at record %d)", metalog.ErrTruncated, l.where, from, sc.began)
	}
	f.end = max(end, start)
	f.st, f.pos = sc.st, f.end
	if sc.hasPending() {
		// A group whose last record is not there yet: read it again
		// whole next time.
		f.pos = sc.firstOffset
	}
	f.anchored = true
	return sc.st.next, nil
}

// Wait implements metalog.Follower with a long-poll Fetch at the offset
// after the last record read: it returns once the partition holds a
// record there — which may be no new metadata record (a claim, a
// pointer, a part of a group), so the caller replays and may wait again —
// or ctx ends. A deleted offset returns at once (Replay then reports the
// truncation). A leader lookup or fetch that keeps failing for
// waitFailAfter returns its error; the Wait after that returns nil at
// its first fetch that succeeds (the caller replays, and learns the
// partition answers again).
func (f *Follower) Wait(ctx context.Context, next int64) error {
	f.mu.Lock()
	at, known := f.end, f.anchored && next < f.st.next
	f.mu.Unlock()
	if known {
		return nil // read already: Replay from next delivers it
	}
	l := f.l
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // Close ends a Wait
		select {
		case <-f.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	refresh := f.waitFailed
	var failingSince time.Time
	for {
		if f.isClosed() {
			return metalog.ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		leader, err := l.t.leader(ctx, l.shard, refresh)
		if err == nil {
			refresh = false
			var hwm int64
			hwm, err = l.t.fetchHighWatermark(ctx, f.wcl, leader, l.shard, at, followWaitMs)
			switch {
			case err == nil && (hwm > at || f.waitFailed):
				f.waitFailed = false
				return nil
			case err == nil:
				failingSince = time.Time{}
				continue // the long-poll expired with nothing new
			case errors.Is(err, errOutOfRange):
				f.waitFailed = false
				return nil
			}
		}
		if f.isClosed() {
			return metalog.ErrClosed
		}
		if ctx.Err() == nil {
			if failingSince.IsZero() {
				failingSince = time.Now()
			} else if time.Since(failingSince) >= waitFailAfter {
				f.waitFailed = true
				return fmt.Errorf("kafkalog: follower of shard %d: waiting for records: %w", l.shard, err)
			}
		}
		refresh = true
		// The follower's client learns the brokers from a Metadata
		// request of its own (the leader may be one it does not know).
		mreq := kmsg.NewPtrMetadataRequest()
		mreq.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(l.t.cfg.Topic)}}
		_, _ = mreq.RequestWith(ctx, f.wcl)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Close implements metalog.Follower.
func (f *Follower) Close() error {
	f.once.Do(func() {
		close(f.closed)
		f.wcl.Close()
	})
	return f.l.Close()
}

// fetchHighWatermark long-polls leader for partition at offset: MinBytes
// 1, up to maxWaitMs. It returns the partition's high watermark in the
// answer, which is above offset once a record is there. Errors:
// errOutOfRange for an offset below the log start offset; the fetch's.
func (t *Topic) fetchHighWatermark(ctx context.Context, cl *kgo.Client, leader, partition int32, offset int64, maxWaitMs int32) (int64, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = maxWaitMs
	req.MinBytes = 1
	req.MaxBytes = 1 // the answer's records are not read: Replay reads them
	req.IsolationLevel = 0
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = t.cfg.Topic
	rt.TopicID = t.topicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.CurrentLeaderEpoch = -1
	rp.FetchOffset = offset
	rp.LogStartOffset = -1
	rp.PartitionMaxBytes = 1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(leader)))
	if err != nil {
		return -1, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return -1, err
	}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if p.Partition != partition {
				continue
			}
			switch err := kerr.ErrorForCode(p.ErrorCode); {
			case err == nil:
				return p.HighWatermark, nil
			case errors.Is(err, kerr.OffsetOutOfRange):
				if err := t.outOfRange(ctx, partition, offset); err != nil {
					return -1, err
				}
				return -1, kerr.OffsetOutOfRange // behind: the caller asks the leader again
			default:
				return -1, err
			}
		}
	}
	return -1, fmt.Errorf("kafkalog: Fetch answered without partition %d", partition)
}
