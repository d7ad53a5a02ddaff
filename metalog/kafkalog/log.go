package kafkalog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/metalog"
)

// Log is one coordinator shard's metadata log on its partition of the
// metadata topic; it implements metalog.Log
// (docs/format/metadata-records.md §The Kafka backend; DESIGN §Fencing).
//
// Each Append is one Kafka transaction of the shard's transactional
// producer: every record goes into one or more Kafka records whose key
// carries its record index, and Append returns nil only once EndTxn
// committed the transaction. The first Replay initialises the producer
// (InitProducerId), which fences the previous writer of the shard and
// completes or aborts its open transaction, and then reads the partition
// to its last stable offset. Records are numbered by their own index, not
// by Kafka offset: transaction markers, aborted transactions and snapshot
// pointers take offsets too, and replay checks that committed indexes are
// dense.
//
// Snapshots are objects in Config.Snapshots, named by a pointer record in
// the partition (written in a transaction of its own); TruncateBefore
// deletes the records before the snapshot's anchor with DeleteRecords.
//
// Calls follow metalog.Log: the shard driver's one at a time, and
// WriteSnapshot and TruncateBefore concurrently with them. The producer is
// used by one transaction at a time (mu).
type Log struct {
	t      *Topic
	shard  int32
	logger *slog.Logger

	// mu serialises the producers' use — one transaction at a time, an
	// Append's or a snapshot pointer's, and the ownership probe — and
	// guards the fields in it.
	mu struct {
		sync.Mutex
		// slots are the shard's Producers transactional producers, used in
		// turn (DESIGN §Fencing: why several).
		slots  []*slot
		turn   int
		closed bool
		// fenced is set once another writer took the shard over; every
		// call then fails with it.
		fenced error
	}

	// Driver-only: set by Replay and Append.
	ready bool
	// next is the index the next appended record gets, and nextOffset a
	// Kafka offset at or before the first record with an index ≥ next,
	// after every record below it.
	next       int64
	nextOffset int64
	// anchored is set once a Replay or Append succeeded: next and
	// nextOffset are then an anchor (even after a later failure).
	anchored bool

	// snap is shared by the driver and the snapshot writer.
	snap struct {
		sync.Mutex
		prepared *pointer // index and anchor of the latest PrepareSnapshot
		known    []pointer
	}

	// beforeCommit, when set (tests), runs between producing a group's
	// records and its EndTxn.
	beforeCommit func()
}

var _ metalog.Log = (*Log)(nil)

// slot is one of a shard's transactional producers; its fields are
// guarded by Log.mu.
type slot struct {
	txnID string
	cl    *kgo.Client
	// inTxn: a transaction was begun whose outcome the producer has not
	// settled (an EndTxn that failed, or an abort that did).
	inTxn bool
	// pid and epoch are the producer id and epoch last known to be this
	// writer's (−1 before the producer was initialised).
	pid   int64
	epoch int16
}

func (t *Topic) openLog(shard int32) (*Log, error) {
	l := &Log{t: t, shard: shard, logger: t.logger.With(slog.Int("shard", int(shard)))}
	for i := range Producers {
		sl := &slot{txnID: t.TransactionalID(shard, i), pid: -1, epoch: -1}
		cl, err := l.newProducer(sl.txnID)
		if err != nil {
			for _, s := range l.mu.slots {
				s.cl.Close()
			}
			return nil, fmt.Errorf("kafkalog: shard %d: %w", shard, err)
		}
		sl.cl = cl
		l.mu.slots = append(l.mu.slots, sl)
	}
	return l, nil
}

// newProducer returns a transactional producer of txnID, not yet
// initialised.
func (l *Log) newProducer(txnID string) (*kgo.Client, error) {
	t := l.t
	return kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(t.cfg.Brokers...),
		kgo.ClientID(fmt.Sprintf("diskless-sidecar-metalog-%d", l.shard)),
		kgo.WithLogger(kgoLogger{l.logger}),
		kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(t.cfg.TransactionTimeout),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic(t.cfg.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
		kgo.ProducerBatchMaxBytes(t.batchMax),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordDeliveryTimeout(t.cfg.AppendTimeout),
		kgo.RetryTimeout(t.cfg.RequestTimeout),
	}, t.cfg.ClientOpts...)...)
}

// fencedOrLost decides what a PRODUCER_FENCED answer to sl's producer
// means. Under KIP-890 every EndTxn bumps the producer epoch, so when the
// answer to this writer's EndTxn(commit) was lost after the commit went
// through, the coordinator holds epoch+1 while the producer still has
// epoch, and the producer's re-initialisation at its epoch (KIP-360) is
// refused as if another writer had come. The transaction coordinator
// tells the two apart: the same producer id at epoch+1 with the
// transaction in PrepareCommit or CompleteCommit is this writer's own
// commit (another writer's InitProducerId leaves the state Empty or
// Ongoing, or the epoch further on). Then the slot gets a new producer,
// initialised by the next own (Replay) — which reads the log to its end
// before anything is appended again, so the commit's outcome is learned;
// otherwise the log is fenced. l.mu must be held.
func (l *Log) fencedOrLost(ctx context.Context, sl *slot, cause error) error {
	if l.mu.fenced != nil {
		return l.mu.fenced
	}
	ds, err := l.t.describeTransactions(ctx, []string{sl.txnID})
	if err != nil {
		// Cannot tell now: an IO error; the caller's Replay asks again.
		return fmt.Errorf("kafkalog: shard %d: %s refused (%v), and describing it failed: %w", l.shard, sl.txnID, cause, err)
	}
	return l.lostOrFenced(sl, ds[sl.txnID], cause)
}

// lostOrFenced is fencedOrLost once the transaction coordinator described
// sl's transactional id as d.
func (l *Log) lostOrFenced(sl *slot, d kmsg.DescribeTransactionsResponseTransactionState, cause error) error {
	own := d.ErrorCode == 0 && d.ProducerID == sl.pid && d.ProducerEpoch == sl.epoch+1 &&
		(d.State == "PrepareCommit" || d.State == "CompleteCommit")
	if !own {
		return l.fence(fmt.Errorf("%s: %v (the transaction coordinator holds producer id %d epoch %d in state %s; this writer had %d epoch %d)",
			sl.txnID, cause, d.ProducerID, d.ProducerEpoch, d.State, sl.pid, sl.epoch))
	}
	l.logger.Info("kafkalog: a commit whose answer was lost went through; replacing the producer", "transactional.id", sl.txnID,
		"epoch", sl.epoch, "coordinator epoch", d.ProducerEpoch)
	cl, err := l.newProducer(sl.txnID)
	if err != nil {
		return err
	}
	sl.cl.Close()
	sl.cl, sl.inTxn, sl.pid, sl.epoch = cl, false, -1, -1
	return fmt.Errorf("kafkalog: shard %d: %s: the answer to a commit was lost (%v); the producer was replaced", l.shard, sl.txnID, cause)
}

// ErrFenced errors carry the transactional id and what the transaction
// coordinator holds.
func (l *Log) fence(cause error) error {
	if l.mu.fenced == nil {
		l.mu.fenced = fmt.Errorf("%w: shard %d: %v", metalog.ErrFenced, l.shard, cause)
		l.logger.Warn("kafkalog: another writer took the shard over; this one is fenced", "err", cause)
	}
	return l.mu.fenced
}

// usable returns the error every call on a closed or fenced log makes;
// l.mu must be held.
func (l *Log) usable() error {
	switch {
	case l.mu.closed:
		return metalog.ErrClosed
	case l.mu.fenced != nil:
		return l.mu.fenced
	}
	return nil
}

// settle ends a transaction of sl whose outcome the producer does not
// know: an abort that re-initialises the producer id at this writer's id
// and epoch (KIP-360), which the transaction coordinator answers only once
// the transaction is completed (committed or aborted) and its markers are
// written — or refuses with PRODUCER_FENCED if another writer's
// InitProducerId came in between. l.mu must be held.
func (l *Log) settle(ctx context.Context, sl *slot) error {
	if !sl.inTxn {
		return nil
	}
	err := sl.cl.EndTransaction(ctx, kgo.TryAbort)
	if err == nil {
		sl.inTxn = false
		if pid, epoch, err := sl.cl.ProducerID(ctx); err == nil {
			sl.pid, sl.epoch = pid, epoch
		}
		return nil
	}
	if errors.Is(err, kerr.ProducerFenced) {
		return l.fencedOrLost(ctx, sl, err)
	}
	return fmt.Errorf("kafkalog: shard %d: settling a transaction of %s: %w", l.shard, sl.txnID, err)
}

// own checks, under l.mu, that this writer still owns the shard: for each
// producer it settles an open transaction and initialises the producer the
// first time (the InitProducerId that fences the previous writer's
// producer of that transactional id), then asks the transaction
// coordinator (probe) whether every transactional id still has this
// writer's producer id and epoch. Errors: ErrClosed, ErrFenced, IO errors.
func (l *Log) own(ctx context.Context) error {
	if err := l.usable(); err != nil {
		return err
	}
	var errs []error
	for _, sl := range l.mu.slots {
		serr := l.settle(ctx, sl)
		if errors.Is(serr, metalog.ErrFenced) {
			return serr
		}
		pid, epoch, perr := sl.cl.ProducerID(ctx)
		switch {
		case perr == nil:
			sl.pid, sl.epoch = pid, epoch
			serr = nil // settled by a replacement producer's initialisation
		case errors.Is(perr, kerr.ProducerFenced):
			if err := l.fencedOrLost(ctx, sl, perr); errors.Is(err, metalog.ErrFenced) {
				return err
			}
			// Replaced: initialise the new producer now.
			if pid, epoch, perr = sl.cl.ProducerID(ctx); perr == nil {
				sl.pid, sl.epoch = pid, epoch
			}
		}
		if sl.pid < 0 {
			return fmt.Errorf("kafkalog: shard %d: initialising the transactional producer %s: %w", l.shard, sl.txnID, perr)
		}
		if err := cmp(serr, perr); err != nil {
			errs = append(errs, fmt.Errorf("kafkalog: shard %d: the transactional producer %s: %w", l.shard, sl.txnID, err))
		}
	}
	if err := l.probe(ctx); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// probe asks the transaction coordinator for the transactional ids'
// producer ids and epochs: another writer's InitProducerId changed them.
// l.mu must be held (none of this writer's transactions is being ended,
// which bumps the epoch under KIP-890).
func (l *Log) probe(ctx context.Context) error {
	var ids []string
	for _, sl := range l.mu.slots {
		if sl.pid < 0 {
			continue
		}
		// The producer's own view first: kgo re-initialises a producer
		// whose transaction it could not confirm (KIP-360, at this
		// writer's epoch, so never fencing another writer), bumping the
		// epoch.
		if pid, epoch, err := sl.cl.ProducerID(ctx); err == nil {
			sl.pid, sl.epoch = pid, epoch
		} else if errors.Is(err, kerr.ProducerFenced) {
			if err := l.fencedOrLost(ctx, sl, err); errors.Is(err, metalog.ErrFenced) {
				return err
			}
			continue // replaced; own initialises it
		}
		ids = append(ids, sl.txnID)
	}
	if len(ids) == 0 {
		return nil
	}
	ds, err := l.t.describeTransactions(ctx, ids)
	if err != nil {
		return fmt.Errorf("kafkalog: shard %d: describing transactional ids %v: %w", l.shard, ids, err)
	}
	for _, sl := range l.mu.slots {
		if sl.pid < 0 {
			continue
		}
		d, ok := ds[sl.txnID]
		if !ok {
			return fmt.Errorf("kafkalog: shard %d: transactional id %s not described", l.shard, sl.txnID)
		}
		if err := kerr.ErrorForCode(d.ErrorCode); err != nil {
			return fmt.Errorf("kafkalog: shard %d: describing transactional id %s: %w", l.shard, sl.txnID, err)
		}
		if d.ProducerID != sl.pid || d.ProducerEpoch != sl.epoch {
			if err := l.lostOrFenced(sl, d, errors.New("producer id or epoch changed")); errors.Is(err, metalog.ErrFenced) {
				return err
			}
			// This writer's own commit, its answer lost: the producer was
			// replaced; own initialises it.
		}
	}
	return nil
}

// classify turns the error of a failed transaction into ErrFenced when
// the transaction coordinator says another writer took over; l.mu must be
// held.
func (l *Log) classify(ctx context.Context, err error) error {
	if errors.Is(err, kerr.ProducerFenced) {
		if l.mu.fenced != nil {
			return l.mu.fenced
		}
		return l.fence(err)
	}
	if l.mu.fenced != nil {
		return l.mu.fenced
	}
	if perr := l.probe(ctx); errors.Is(perr, metalog.ErrFenced) {
		return perr
	}
	return err
}

// next slot returns the producer the next transaction uses: in turn, so
// that the markers of a producer's previous transaction have had the
// time of Producers−1 others to be written (a transaction's first produce
// waits for them). l.mu must be held.
func (l *Log) nextSlot() *slot {
	sl := l.mu.slots[l.mu.turn%len(l.mu.slots)]
	l.mu.turn++
	return sl
}

// Replay implements metalog.Log. It first makes sure this writer owns the
// shard (own: the first call's InitProducerId fences the previous writer),
// then measures the last stable offset and reads the partition up to it,
// read_committed, from the best anchor at or before from (a snapshot
// pointer's, or where the last Replay or Append ended; else the log start
// offset). Transient failures (no leader, a broker down) are retried for
// up to Config.RequestTimeout × 4.
func (l *Log) Replay(ctx context.Context, from int64, fn func(index int64, body []byte) error) (int64, error) {
	l.ready = false
	ctx, cancel := context.WithTimeout(ctx, 4*l.t.cfg.RequestTimeout)
	defer cancel()
	for {
		next, delivered, err := l.replayOnce(ctx, from, fn)
		if err == nil {
			return next, nil
		}
		retry := !delivered && !errors.Is(err, metalog.ErrFenced) && !errors.Is(err, metalog.ErrClosed) &&
			!errors.Is(err, metalog.ErrCorrupt) && !errors.Is(err, errCallback) && ctx.Err() == nil
		if !retry {
			return 0, err
		}
		l.logger.Warn("kafkalog: replay failed; retrying", "err", err)
		select {
		case <-ctx.Done():
			return 0, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// errCallback marks the error of Replay's fn.
var errCallback = errors.New("replay callback")

// replayOnce is one attempt of Replay; delivered reports whether fn was
// called (the attempt must then not be repeated).
func (l *Log) replayOnce(ctx context.Context, from int64, fn func(int64, []byte) error) (next int64, delivered bool, err error) {
	l.mu.Lock()
	err = l.own(ctx)
	l.mu.Unlock()
	if err != nil {
		return 0, false, err
	}
	end, err := l.t.listOffset(ctx, l.shard, -1, 1)
	if err != nil {
		return 0, false, fmt.Errorf("kafkalog: shard %d: last stable offset: %w", l.shard, err)
	}
	if l.anchored {
		// This writer's last committed transaction may not have its
		// marker yet (EndTxn answers once the commit is decided; the
		// markers follow): its records are committed, the last stable
		// offset only lags. Read up to them; the read waits for it.
		end = max(end, l.nextOffset)
	}
	s := newScan(l, from, fn)
	if err := s.run(ctx, end); err != nil {
		return 0, s.delivered, err
	}
	next, err = s.finish(end)
	if err != nil {
		return 0, true, err
	}
	l.next, l.nextOffset, l.ready, l.anchored = next, end, true, true
	return next, s.delivered, nil
}

// corrupt returns an ErrCorrupt error about the shard's partition.
func (l *Log) corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: partition %d of %s: %s", metalog.ErrCorrupt, l.shard, l.t.cfg.Topic, fmt.Sprintf(format, args...))
}

// scan reads the partition for Replay and ReadSnapshot, checking that
// committed record indexes are dense and collecting snapshot pointers.
type scan struct {
	l    *Log
	from int64
	fn   func(int64, []byte) error // nil: only collect pointers
	// start is the offset the scan reads from; expected the index of the
	// next record (known once an anchor or the first record is seen).
	start    int64
	expected int64
	known    bool
	// part holds the parts of a record split over several Kafka records.
	part      []byte
	partIndex int64
	partNext  uint32
	delivered bool
	seen      bool // a record or pointer was read
}

func newScan(l *Log, from int64, fn func(int64, []byte) error) *scan {
	s := &scan{l: l, from: from, fn: fn, start: -1, partIndex: -1}
	// The best anchor at or before from: where the last successful Replay
	// or Append ended, or a snapshot pointer's.
	if l.anchored && l.next <= from {
		s.start, s.expected, s.known = l.nextOffset, l.next, true
	}
	l.snap.Lock()
	for _, p := range l.snap.known {
		if p.index <= from && (!s.known || p.index > s.expected) {
			s.start, s.expected, s.known = p.anchor, p.index, true
		}
	}
	l.snap.Unlock()
	return s
}

// run reads [start, end): from the anchor, or from the log start offset;
// if the log start moves past the anchor under the read before anything
// was delivered, from the new log start.
func (s *scan) run(ctx context.Context, end int64) error {
	l := s.l
	for attempt := 0; ; attempt++ {
		if s.start < 0 || attempt > 0 {
			ls, err := l.t.listOffset(ctx, l.shard, -2, 1)
			if err != nil {
				return fmt.Errorf("kafkalog: shard %d: log start offset: %w", l.shard, err)
			}
			if s.start < ls {
				s.start, s.known = ls, false
			}
		}
		err := l.t.read(ctx, l.shard, s.start, end, s.record)
		if errors.Is(err, errOutOfRange) && !s.delivered && !s.seen && attempt < 5 {
			continue
		}
		return err
	}
}

// record handles one committed Kafka record.
func (s *scan) record(r *kgo.Record) error {
	l := s.l
	k, err := decodeKey(r.Key)
	if err != nil {
		return l.corrupt("offset %d: %v", r.Offset, err)
	}
	s.seen = true
	switch k.kind {
	case kindSnapshot:
		p, err := decodePointer(k.index, r.Value)
		if err != nil {
			return l.corrupt("offset %d: %v", r.Offset, err)
		}
		if p.anchor > r.Offset {
			return l.corrupt("offset %d: snapshot pointer with anchor %d after it", r.Offset, p.anchor)
		}
		if !s.known {
			// The first thing after a truncation: records below the
			// pointer's index were deleted.
			s.expected, s.known = p.index, true
			if p.index > s.from && s.fn != nil {
				return l.corrupt("records [%d, %d) are missing: deleted before the snapshot at %d (the first thing at or after offset %d)",
					s.from, p.index, p.index, s.start)
			}
		} else if p.index > s.expected || (s.partIndex >= 0 && p.index > s.partIndex) {
			return l.corrupt("offset %d: snapshot pointer at record %d before record %d", r.Offset, p.index, s.expected)
		}
		l.addPointer(p)
		return nil
	}
	if !s.known {
		s.expected, s.known = k.index, true
		if k.index > s.from && s.fn != nil {
			return l.corrupt("records [%d, %d) are missing: the first one at or after offset %d is %d (deleted before a snapshot)",
				s.from, k.index, s.start, k.index)
		}
	}
	if k.index != s.expected {
		return l.corrupt("offset %d holds record %d, expected %d: record indexes must be dense", r.Offset, k.index, s.expected)
	}
	body := r.Value
	if k.parts > 1 {
		if k.part == 0 {
			if s.partIndex >= 0 {
				return l.corrupt("offset %d: record %d starts before record %d's %d parts ended", r.Offset, k.index, s.partIndex, s.partNext)
			}
			s.part, s.partIndex, s.partNext = s.part[:0], k.index, 0
		}
		if s.partIndex != k.index || k.part != s.partNext {
			return l.corrupt("offset %d: part %d of record %d, expected part %d of record %d", r.Offset, k.part, k.index, s.partNext, s.partIndex)
		}
		s.part = append(s.part, r.Value...)
		s.partNext++
		if s.partNext < k.parts {
			return nil
		}
		body, s.partIndex = s.part, -1
	} else if s.partIndex >= 0 {
		return l.corrupt("offset %d: record %d inside record %d's parts", r.Offset, k.index, s.partIndex)
	}
	if len(body) == 0 || len(body) > metalog.MaxRecordBytes {
		return l.corrupt("offset %d: record %d of %d bytes", r.Offset, k.index, len(body))
	}
	s.expected++
	if s.fn != nil && k.index >= s.from {
		s.delivered = true
		if err := s.fn(k.index, body); err != nil {
			return fmt.Errorf("%w: kafkalog: shard %d: record %d (offset %d): %w", errCallback, l.shard, k.index, r.Offset, err)
		}
	}
	return nil
}

// finish checks the end of a replay and returns the index the next
// appended record gets.
func (s *scan) finish(end int64) (int64, error) {
	if s.partIndex >= 0 {
		return 0, s.l.corrupt("record %d ends after %d of its parts, at the last stable offset %d", s.partIndex, s.partNext, end)
	}
	if !s.known {
		if s.start > 0 {
			return 0, s.l.corrupt("records before offset %d were deleted and no snapshot pointer follows them", s.start)
		}
		s.expected, s.known = 0, true
	}
	if s.expected < s.from {
		return 0, s.l.corrupt("the log ends at record %d, before %d", s.expected, s.from)
	}
	return s.expected, nil
}

// addPointer remembers p (pointers ascending by index; a later pointer of
// the same index replaces an earlier one).
func (l *Log) addPointer(p pointer) {
	l.snap.Lock()
	defer l.snap.Unlock()
	i, found := slices.BinarySearchFunc(l.snap.known, p.index, func(q pointer, idx int64) int {
		switch {
		case q.index < idx:
			return -1
		case q.index > idx:
			return 1
		}
		return 0
	})
	if found {
		l.snap.known[i] = p
		return
	}
	l.snap.known = slices.Insert(l.snap.known, i, p)
}

// chunks is how many Kafka records a body of n bytes takes.
func (l *Log) chunks(n int) int { return max(1, (n+l.t.chunk-1)/l.t.chunk) }

// Append implements metalog.Log: one transaction holding the group's
// records (a body larger than the topic's batch limit split into parts),
// produced with acks=all and committed with EndTxn; nil only once the
// commit succeeded. A failed produce aborts the transaction (nothing
// durable); a failed EndTxn leaves the outcome to Replay, after the
// producer settled it. ErrFenced when the transaction coordinator or the
// partition refused this writer's producer epoch.
func (l *Log) Append(ctx context.Context, bodies [][]byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, b := range bodies {
		if len(b) == 0 || len(b) > metalog.MaxRecordBytes {
			return fmt.Errorf("kafkalog: shard %d: metadata record of %d bytes (limit %d)", l.shard, len(b), metalog.MaxRecordBytes)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	if !l.ready {
		return fmt.Errorf("kafkalog: shard %d: Append before Replay", l.shard)
	}
	if len(bodies) == 0 {
		return nil
	}
	// Whatever happens below, only a commit makes the log's end known.
	l.ready = false
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.t.cfg.AppendTimeout)
	defer cancel()
	sl := l.nextSlot()
	if err := l.settle(actx, sl); err != nil {
		return err
	}
	var recs []*kgo.Record
	for i, b := range bodies {
		idx := l.next + int64(i)
		n := l.chunks(len(b))
		for part := range n {
			chunk := b[part*l.t.chunk : min(len(b), (part+1)*l.t.chunk)]
			recs = append(recs, &kgo.Record{
				Partition: l.shard,
				Key:       recordKey{kind: kindRecord, index: idx, part: uint32(part), parts: uint32(n)}.appendTo(nil),
				Value:     chunk,
			})
		}
	}
	last, err := l.transact(actx, sl, recs)
	if err != nil {
		return fmt.Errorf("kafkalog: shard %d: appending records [%d, %d): %w", l.shard, l.next, l.next+int64(len(bodies)), err)
	}
	l.next += int64(len(bodies))
	l.nextOffset = last + 1
	l.ready = true
	return nil
}

// transact produces recs in one transaction of sl and commits it,
// returning the offset of the last one; l.mu must be held. On error the
// transaction is aborted or, after a failed EndTxn, settled (its outcome
// unknown here); ErrFenced when another writer took over.
func (l *Log) transact(ctx context.Context, sl *slot, recs []*kgo.Record) (int64, error) {
	if sl.pid < 0 {
		// A replaced producer is initialised by own, in Replay, which
		// reads the log first.
		return 0, fmt.Errorf("kafkalog: shard %d: producer %s not initialised: Replay first", l.shard, sl.txnID)
	}
	cl := sl.cl
	if err := cl.BeginTransaction(); err != nil {
		return 0, l.classify(ctx, err)
	}
	sl.inTxn = true
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		// Not committed: abort (settle), so that nothing of it is ever
		// visible.
		if serr := l.settle(context.WithoutCancel(ctx), sl); errors.Is(serr, metalog.ErrFenced) {
			return 0, serr
		}
		if errors.Is(err, kerr.InvalidProducerEpoch) && sl.pid >= 0 && l.mu.fenced == nil {
			// The partition holds a newer epoch of this producer id:
			// another writer's InitProducerId (a takeover), or this
			// writer's own commit whose answer was lost (KIP-890 bumps
			// the epoch at EndTxn). The transaction coordinator tells
			// which (fencedOrLost). A producer settle already replaced
			// (pid −1) was this writer's own.
			return 0, l.fencedOrLost(context.WithoutCancel(ctx), sl, err)
		}
		return 0, l.classify(ctx, err)
	}
	if l.beforeCommit != nil {
		l.beforeCommit()
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		if errors.Is(err, kerr.ProducerFenced) {
			// A retry of an EndTxn that went through can be answered so
			// too (fencedOrLost).
			return 0, l.fencedOrLost(context.WithoutCancel(ctx), sl, err)
		}
		// Outcome unknown (an answer lost, a coordinator moved): settle it
		// now if possible; Replay learns which it was.
		if serr := l.settle(context.WithoutCancel(ctx), sl); errors.Is(serr, metalog.ErrFenced) {
			return 0, serr
		}
		return 0, l.classify(ctx, fmt.Errorf("committing the transaction: %w", err))
	}
	sl.inTxn = false
	if pid, epoch, err := cl.ProducerID(ctx); err == nil {
		// KIP-890: EndTxn bumps the epoch.
		sl.pid, sl.epoch = pid, epoch
	}
	var last int64 = -1
	for _, r := range res {
		last = max(last, r.Record.Offset)
	}
	return last, nil
}

// ReadSnapshot implements metalog.Log: it reads the partition (from the
// latest pointer it knows, else the log start offset) to its last stable
// offset for snapshot pointers and returns the newest one whose object
// reads back whole; a missing or damaged object is passed over (with a
// warning) for an older one.
func (l *Log) ReadSnapshot(ctx context.Context) (int64, []byte, error) {
	l.mu.Lock()
	err := l.own(ctx)
	l.mu.Unlock()
	if err != nil {
		return 0, nil, err
	}
	end, err := l.t.listOffset(ctx, l.shard, -1, 1)
	if err != nil {
		return 0, nil, fmt.Errorf("kafkalog: shard %d: last stable offset: %w", l.shard, err)
	}
	s := &scan{l: l, start: -1, partIndex: -1}
	l.snap.Lock()
	if n := len(l.snap.known); n > 0 {
		p := l.snap.known[n-1]
		s.start, s.expected, s.known = p.anchor, p.index, true
	}
	l.snap.Unlock()
	s.from = s.expected
	if err := s.run(ctx, end); err != nil {
		return 0, nil, err
	}
	l.snap.Lock()
	known := slices.Clone(l.snap.known)
	l.snap.Unlock()
	for i := len(known) - 1; i >= 0; i-- {
		p := known[i]
		payload, err := l.readSnapshot(ctx, p)
		if errors.Is(err, errSnapshotVersion) {
			return 0, nil, fmt.Errorf("%w: %w", metalog.ErrCorrupt, err)
		}
		if err != nil {
			if ctx.Err() != nil {
				return 0, nil, err
			}
			l.logger.Warn("kafkalog: passing over a snapshot that does not read back", "index", p.index, "object", p.key, "err", err)
			continue
		}
		return p.index, payload, nil
	}
	return 0, nil, nil
}

func (l *Log) readSnapshot(ctx context.Context, p pointer) ([]byte, error) {
	b := make([]byte, p.size)
	n, size, err := l.t.cfg.Snapshots.ReadRange(ctx, p.key, 0, b)
	if err != nil {
		return nil, err
	}
	if size != p.size {
		return nil, fmt.Errorf("snapshot object %s: %d bytes, its pointer says %d", p.key, size, p.size)
	}
	b = b[:n]
	payload, err := decodeSnapshot(p, b)
	if err != nil {
		return nil, err
	}
	return slices.Clip(payload), nil
}

// PrepareSnapshot implements metalog.Log: it records index and where
// records ≥ index begin (the anchor the pointer will carry).
func (l *Log) PrepareSnapshot(ctx context.Context, index int64) error {
	l.mu.Lock()
	err := l.own(ctx)
	l.mu.Unlock()
	if err != nil {
		return err
	}
	if !l.ready || index != l.next {
		return fmt.Errorf("kafkalog: shard %d: snapshot at record %d, the log is at %d", l.shard, index, l.next)
	}
	l.snap.Lock()
	l.snap.prepared = &pointer{index: index, anchor: l.nextOffset}
	l.snap.Unlock()
	return nil
}

// WriteSnapshot implements metalog.Log: it puts the snapshot object
// (docs/format/metadata-records.md §The Kafka backend) under a fresh key,
// then commits a pointer record naming it in a transaction of its own.
func (l *Log) WriteSnapshot(ctx context.Context, index int64, payload []byte) error {
	l.mu.Lock()
	err := l.usable()
	l.mu.Unlock()
	if err != nil {
		return err
	}
	l.snap.Lock()
	prep := l.snap.prepared
	l.snap.Unlock()
	if prep == nil || prep.index != index {
		return fmt.Errorf("kafkalog: shard %d: snapshot at record %d was not prepared (PrepareSnapshot first)", l.shard, index)
	}
	obj := encodeSnapshot(index, payload)
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	p := pointer{
		index:  index,
		anchor: prep.anchor,
		key: fmt.Sprintf("%s/%s/%s/%d/%020d-%s", l.t.cfg.SnapshotPrefix, l.t.clusterID, l.t.cfg.Topic, l.shard,
			index, hex.EncodeToString(rnd[:])),
		size: int64(len(obj)),
		crc:  crc32.Checksum(obj, castagnoli),
	}
	if err := l.t.cfg.Snapshots.Put(ctx, p.key, obj); err != nil {
		return fmt.Errorf("kafkalog: shard %d: storing snapshot %s: %w", l.shard, p.key, err)
	}
	rec := &kgo.Record{
		Partition: l.shard,
		Key:       recordKey{kind: kindSnapshot, index: index, parts: 1}.appendTo(nil),
		Value:     p.appendValue(nil),
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.t.cfg.AppendTimeout)
	defer cancel()
	sl := l.nextSlot()
	if err := l.settle(tctx, sl); err != nil {
		return err
	}
	if _, err := l.transact(tctx, sl, []*kgo.Record{rec}); err != nil {
		return fmt.Errorf("kafkalog: shard %d: writing the pointer of snapshot %s: %w", l.shard, p.key, err)
	}
	l.addPointer(p)
	return nil
}

// TruncateBefore implements metalog.Log: DeleteRecords up to the anchor of
// the latest snapshot pointer at or before index (which must not be above
// the latest snapshot), then deletes the snapshot objects below index.
func (l *Log) TruncateBefore(ctx context.Context, index int64) error {
	l.mu.Lock()
	err := l.usable()
	if err == nil {
		err = l.probe(ctx)
	}
	l.mu.Unlock()
	if err != nil {
		return err
	}
	l.snap.Lock()
	var anchor *pointer
	var older []pointer
	latest := int64(-1)
	for i := range l.snap.known {
		p := &l.snap.known[i]
		latest = max(latest, p.index)
		if p.index <= index {
			anchor = p
		}
		if p.index < index {
			older = append(older, *p)
		}
	}
	l.snap.Unlock()
	if latest < index || anchor == nil {
		return fmt.Errorf("kafkalog: shard %d: truncate before record %d: no snapshot at or after it with an anchor at or before it", l.shard, index)
	}
	if err := l.t.deleteRecords(ctx, l.shard, anchor.anchor); err != nil {
		return err
	}
	for _, p := range older {
		if err := l.t.cfg.Snapshots.Delete(ctx, p.key); err != nil {
			l.logger.Warn("kafkalog: deleting an old snapshot object failed", "object", p.key, "err", err)
			continue
		}
	}
	l.snap.Lock()
	l.snap.known = slices.DeleteFunc(l.snap.known, func(p pointer) bool { return p.index < index })
	l.snap.Unlock()
	return nil
}

// Close implements metalog.Log. A group being appended completes first
// (l.mu); a transaction left open by a failure is aborted by the next
// owner's InitProducerId or by the transaction timeout.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return nil
	}
	l.mu.closed = true
	slots := l.mu.slots
	l.mu.Unlock()
	for _, sl := range slots {
		sl.cl.Close()
	}
	return nil
}
