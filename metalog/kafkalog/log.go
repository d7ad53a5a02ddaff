package kafkalog

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-sidecar/sidecar/metalog"
)

// Log is one coordinator shard's metadata log on its partition of the
// metadata topic; it implements metalog.Log
// (docs/format/metadata-records.md §The Kafka backend; DESIGN §Fencing).
//
// A Log writes with one idempotent producer (acks=all, no transactions).
// Its first Replay takes the shard over: it reads the partition to its
// end and appends a claim naming the epoch in force there, which is
// effective — its offset becomes this writer's epoch — unless another
// claim landed first. Every Kafka record it appends carries its epoch and
// record index in its key; what counts is decided by the validity rule
// (scanState), which every reader applies alike: a record counts only when
// its epoch is that of the latest effective claim before it. An Append
// returns nil only once its records are in the partition and the rule
// counts them as its group: when their offsets follow the writer's
// previous ones exactly (no one wrote in between), at once; otherwise
// after reading the records in between. A later Replay claims again,
// naming the epoch it holds; when another writer's claim is in force
// instead, this writer was fenced.
//
// Snapshots are objects in Config.Snapshots, named by a pointer record
// that PrepareSnapshot appends before WriteSnapshot stores the object;
// TruncateBefore deletes the records before a pointer whose object is
// stored (DeleteRecords).
//
// Calls follow metalog.Log: the shard driver's one at a time (mu), and
// WriteSnapshot and TruncateBefore, which append nothing, concurrently
// with them. Every call is bounded in time (Config.AppendTimeout,
// Config.RequestTimeout), and Close ends a call in progress at once.
type Log struct {
	t      *Topic
	shard  int32
	logger *slog.Logger
	where  string
	// id is this handle's writer id, in its claims; description says
	// which process it is.
	id          [writerIDSize]byte
	description string
	// closing is cancelled by Close, ending every call in progress.
	closing   context.Context
	stopCalls context.CancelFunc

	// mu serialises the driver's calls and Close, and guards the fields
	// in it.
	mu struct {
		sync.Mutex
		// cl is the idempotent producer; nil until it is needed, and
		// again after a produce failed (its records' fate unknown, a
		// fresh producer starts a fresh sequence).
		cl     *kgo.Client
		closed bool
	}
	// fenced is set once another writer's claim took the shard over
	// (by the driver's calls, or by Confirm and TruncateBefore beside
	// them); every call then fails with it.
	fenced atomic.Pointer[error]

	// at is a copy of the writer's position and the rule's state there,
	// published whenever pos and st move (under mu) so that Confirm and
	// TruncateBefore read it without waiting for a driver's call in
	// progress. anchored: a Replay succeeded.
	at struct {
		sync.Mutex
		pos      int64
		st       scanState
		anchored bool
	}

	// The writer's position, set by Replay, Append and PrepareSnapshot
	// (under mu). pos is the offset after the last record this writer
	// knows the rule's state at, st that state (its epoch this writer's
	// while it owns the shard). anchored: pos and st are exact (a Replay
	// succeeded); ready: the log may be appended at pos (nothing failed
	// since). owned: one of this handle's claims was effective, so later
	// claims continue its epoch.
	pos                        int64
	st                         scanState
	anchored, ready, owned     bool
	prepared                   *pointer // the latest PrepareSnapshot's pointer
	beforeProduce, beforeCheck func()   // test hooks around an Append's produce
	// produceFault, a test hook, makes an Append produce only the first
	// n of its records and then fail (n = len: all of them landed).
	produceFault func(recs []*kgo.Record) (n int)

	// snap holds the counted snapshot pointers known, in offset order;
	// shared by the driver and the snapshot writer.
	snap struct {
		sync.Mutex
		known []pointer
	}
}

var _ metalog.Log = (*Log)(nil)

func (t *Topic) openLog(shard int32) (*Log, error) {
	l := &Log{t: t, shard: shard, logger: t.logger.With(slog.Int("shard", int(shard))),
		where: fmt.Sprintf("partition %d of %s", shard, t.cfg.Topic)}
	l.closing, l.stopCalls = context.WithCancel(context.Background())
	if _, err := rand.Read(l.id[:]); err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	l.description = fmt.Sprintf("%s pid %d at %s, writer %s", cmp.Or(t.cfg.WriterName, host), os.Getpid(),
		time.Now().UTC().Format(time.RFC3339), hex.EncodeToString(l.id[:4]))
	if len(l.description) > maxDescription {
		l.description = l.description[:maxDescription]
	}
	return l, nil
}

// callContext returns the context of one call: ctx, ended after timeout
// (0: none) or by Close.
func (l *Log) callContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	var cancel context.CancelFunc
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	stop := context.AfterFunc(l.closing, cancel)
	return ctx, func() { stop(); cancel() }
}

// closedErr returns err, wrapping metalog.ErrClosed too when Close ended
// the call that failed with it.
func (l *Log) closedErr(err error) error {
	if err != nil && l.closing.Err() != nil && !errors.Is(err, metalog.ErrClosed) {
		return fmt.Errorf("%w: %w", metalog.ErrClosed, err)
	}
	return err
}

// producer returns the idempotent producer, creating it when absent;
// l.mu must be held. A produce that does not end by its context's
// deadline fails (kgo.AllowIdempotentProduceCancellation: kgo would
// otherwise wait as long as it takes to learn the fate of a batch it
// sent); the producer is then dropped, and what the batch left in the
// partition — now or later — is settled by the rule: a Replay's claim
// follows before this writer appends again, so a batch landing after it
// has a stale epoch and a claim landing late names an epoch no longer in
// force.
func (l *Log) producer() (*kgo.Client, error) {
	if l.mu.cl != nil {
		return l.mu.cl, nil
	}
	t := l.t
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(t.cfg.Brokers...),
		kgo.ClientID(fmt.Sprintf("diskless-sidecar-metalog-%d", l.shard)),
		kgo.WithLogger(kgoLogger{l.logger}),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic(t.cfg.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
		kgo.ProducerBatchMaxBytes(t.batchMax),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordDeliveryTimeout(t.cfg.AppendTimeout),
		kgo.AllowIdempotentProduceCancellation(),
		kgo.RetryTimeout(t.cfg.RequestTimeout),
	}, t.cfg.ClientOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("kafkalog: shard %d: %w", l.shard, err)
	}
	l.mu.cl = cl
	return cl, nil
}

// dropProducer closes the producer after a produce failed; l.mu must be
// held.
func (l *Log) dropProducer() {
	if l.mu.cl != nil {
		l.mu.cl.Close()
		l.mu.cl = nil
	}
}

// produce appends recs to the partition with the producer and returns
// once every one is acknowledged (acks=all), their offsets set; on error
// the producer is dropped (what it left in the partition the rule
// decides). l.mu must be held.
func (l *Log) produce(ctx context.Context, recs []*kgo.Record) error {
	cl, err := l.producer()
	if err != nil {
		return err
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		l.dropProducer()
		return err
	}
	return nil
}

// fence marks the log fenced by cause, for good; ErrFenced errors say
// who took it. Every call checks it first (usable), so a fenced log is
// never appended to again.
func (l *Log) fence(cause string) error {
	err := fmt.Errorf("%w: shard %d: %s", metalog.ErrFenced, l.shard, cause)
	if l.fenced.CompareAndSwap(nil, &err) {
		l.logger.Warn("kafkalog: another writer took the shard over; this one is fenced", "cause", cause)
	}
	return *l.fenced.Load()
}

// publish makes the writer's position (pos, st) the one Confirm and
// TruncateBefore read; l.mu must be held.
func (l *Log) publish() {
	l.at.Lock()
	l.at.pos, l.at.st, l.at.anchored = l.pos, l.st, l.anchored
	l.at.Unlock()
}

// usable returns the error every call on a closed or fenced log makes;
// l.mu must be held.
func (l *Log) usable() error {
	switch {
	case l.mu.closed:
		return metalog.ErrClosed
	case l.fenced.Load() != nil:
		return *l.fenced.Load()
	}
	return nil
}

// claimRecord is a claim naming epoch in force (noEpoch: none): it is
// effective only if epoch is still in force where it lands.
func (l *Log) claimRecord(epoch int64) *kgo.Record {
	return &kgo.Record{
		Partition: l.shard,
		Key:       recordKey{kind: kindClaim, epoch: epoch, parts: 1}.appendTo(nil),
		Value:     claimValue{writer: l.id, description: l.description}.appendTo(nil),
	}
}

// Replay implements metalog.Log. It reads the partition from the best
// start at or before from (where this writer's last Replay or Append
// ended, a snapshot pointer, or the log start offset) to its high
// watermark, applying the validity rule and calling fn for the groups it
// counts; then it appends a claim naming the epoch in force there and
// reads on up to it. The claim is effective — this writer owns the shard
// under a new epoch, the claim's offset — unless another claim landed
// between the read and it. A writer that owned the shard is fenced when
// the claim in force is not one of its own (ErrFenced, for good); one
// taking the shard over names the newer epoch and claims again. Errors
// also: metalog.ErrTruncated when the records at from were deleted (a
// previous owner truncated after a later snapshot: read it again). A
// claim whose produce failed, a broker down, no leader, records deleted
// under a read that delivered nothing yet: retried for up to
// Config.RequestTimeout × 4.
func (l *Log) Replay(ctx context.Context, from int64, fn func(index int64, body []byte) error) (int64, error) {
	ctx, cancel := l.callContext(ctx, 4*l.t.cfg.RequestTimeout)
	defer cancel()
	for {
		next, delivered, err := l.replayOnce(ctx, from, fn)
		if err == nil {
			return next, nil
		}
		if errors.Is(err, errOutOfRange) && delivered {
			// fn saw records before the ones deleted under the read: the
			// caller starts again from a newer snapshot.
			return 0, fmt.Errorf("%w: %s: %w", metalog.ErrTruncated, l.where, err)
		}
		retry := !delivered && !errors.Is(err, metalog.ErrFenced) && !errors.Is(err, metalog.ErrClosed) &&
			!errors.Is(err, metalog.ErrCorrupt) && !errors.Is(err, metalog.ErrTruncated) && !errors.Is(err, errCallback) &&
			ctx.Err() == nil
		if !retry {
			return 0, l.closedErr(err)
		}
		l.logger.Warn("kafkalog: replay failed; retrying", "err", err)
		select {
		case <-ctx.Done():
			return 0, l.closedErr(err)
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
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return 0, false, err
	}
	l.ready = false
	sc, start, err := l.anchor(ctx, from)
	if err != nil {
		return 0, false, err
	}
	pos := start
	// held is the epoch this writer held (noEpoch: none). A claim of its
	// own in force at another epoch is one it appended since it last
	// held the shard — in this Replay or one that failed — after every
	// Append it made under held: none of a claim made before can be in
	// force, since each named an epoch older than held.
	held := int64(noEpoch)
	if l.owned {
		held = l.st.epoch
	}
	var foreign string // the latest effective claim not this writer's
	sc.claimSeen = func(off int64, c claimValue, effective bool) {
		if effective && c.writer != l.id {
			foreign = fmt.Sprintf("the claim at offset %d by %s", off, c.description)
		}
	}
	sc.group = func(recs []pendingRecord, _, _ int64) error {
		if fn == nil {
			return nil
		}
		for _, r := range recs {
			if r.index < from {
				continue
			}
			delivered = true
			if err := fn(r.index, r.body); err != nil {
				return fmt.Errorf("%w: kafkalog: shard %d: record %d (offset %d): %w", errCallback, l.shard, r.index, r.offset, err)
			}
		}
		return nil
	}
	// scanTo reads on from pos to end.
	scanTo := func(end int64) error {
		if err := l.scanRange(ctx, sc, pos, end); err != nil {
			return err
		}
		pos = max(pos, end)
		return nil
	}
	claims := 0
	for {
		end, err := l.t.listOffset(ctx, l.shard, -1)
		if err != nil {
			return 0, delivered, fmt.Errorf("kafkalog: shard %d: high watermark: %w", l.shard, err)
		}
		if err := scanTo(end); err != nil {
			return 0, delivered, err
		}
		st := sc.st
		own := st.epoch != held && st.ownerKnown && st.owner == l.id
		switch {
		case sc.needPointer:
			return 0, delivered, fmt.Errorf("kafkalog: %s: the log start offset moved; nothing read", l.where)
		case l.owned && st.epoch != held && !own:
			return 0, delivered, l.fence(cmp.Or(foreign, fmt.Sprintf("the claim at offset %d is in force", st.epoch)))
		case sc.began > from:
			return 0, delivered, fmt.Errorf("%w: %s: records [%d, %d) were deleted after a snapshot (the log starts at offset %d)",
				metalog.ErrTruncated, l.where, from, sc.began, start)
		case st.next < from:
			return 0, delivered, fmt.Errorf("%w: %s: the log ends at record %d, before %d", metalog.ErrCorrupt, l.where, st.next, from)
		case own && sc.clean():
			l.pos, l.st = pos, st
			l.anchored, l.ready, l.owned = true, true, true
			l.publish()
			if claims > 1 {
				l.logger.Info("kafkalog: took the shard over after claiming again", "claims", claims, "epoch", st.epoch)
			}
			return st.next, delivered, nil
		}
		claim := l.claimRecord(st.epoch)
		claims++
		pctx, cancel := context.WithTimeout(ctx, l.t.cfg.AppendTimeout)
		err = l.produce(pctx, []*kgo.Record{claim})
		cancel()
		if err != nil {
			// Its fate is unknown; reading on tells: if it landed, and
			// nothing came between, it is in force.
			if ctx.Err() != nil {
				return 0, delivered, fmt.Errorf("kafkalog: shard %d: appending a claim: %w", l.shard, err)
			}
			l.logger.Warn("kafkalog: appending a claim failed; reading on", "err", err)
			select {
			case <-ctx.Done():
				return 0, delivered, fmt.Errorf("kafkalog: shard %d: appending a claim: %w", l.shard, err)
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		// Read on past the claim; the next round decides: in force, or
		// another writer's claim came first.
		if err := scanTo(claim.Offset + 1); err != nil {
			return 0, delivered, err
		}
	}
}

// anchor returns a scanner and the offset to start at for a read that
// must deliver every record from index from: the latest place at or
// before from whose state is known — this writer's position, a counted
// snapshot pointer, or the log start offset. Pointers below the log
// start offset are forgotten. l.mu must be held. Errors: ErrCorrupt when
// records at or after from were deleted; IO errors.
func (l *Log) anchor(ctx context.Context, from int64) (*scanner, int64, error) {
	ls, err := l.t.listOffset(ctx, l.shard, -2)
	if err != nil {
		return nil, 0, fmt.Errorf("kafkalog: shard %d: log start offset: %w", l.shard, err)
	}
	l.snap.Lock()
	l.snap.known = slices.DeleteFunc(l.snap.known, func(p pointer) bool { return p.offset < ls })
	var best *pointer
	for i := range l.snap.known {
		if p := &l.snap.known[i]; p.index <= from {
			best = p
		}
	}
	var bp pointer
	if best != nil {
		bp = *best
	}
	l.snap.Unlock()
	switch {
	case l.anchored && l.pos >= ls && l.st.next <= from && (best == nil || bp.index <= l.st.next):
		return newScanner(l.st, l.where), l.pos, nil
	case best != nil:
		return fromPointer(bp, l.where), bp.offset, nil
	}
	// Truncated (ls > 0): the scan learns where it begins from the pointer
	// there, and Replay finds the records below it gone.
	return fromLogStart(ls, l.where), ls, nil
}

// scanRange feeds the records of [start, end) to sc.
func (l *Log) scanRange(ctx context.Context, sc *scanner, start, end int64) error {
	if sc.dropped == nil {
		sc.dropped = func(off int64, why string) {
			l.logger.Info("kafkalog: records that never counted", "offset", off, "why", why)
		}
	}
	return l.t.read(ctx, l.shard, start, end, func(r *kgo.Record) error { return sc.add(r.Offset, r.Key, r.Value) })
}

// chunks is how many Kafka records a body of n bytes takes.
func (l *Log) chunks(n int) int { return max(1, (n+l.t.chunk-1)/l.t.chunk) }

// Append implements metalog.Log: the group's records (a body larger than
// the topic's batch limit split into parts), produced with acks=all under
// this writer's epoch, the last one flagged as the group's end; nil once
// the validity rule counts them as the group (check). ErrFenced when
// another writer's claim came before them. A produce or check that does
// not end within Config.AppendTimeout (Kafka cannot be reached), or that
// Close ends, fails: the records' fate — durable or not, the same for
// every reader — is then settled by the next Replay, whose claim comes
// first when they land later.
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
	// Whatever happens below, only a counted group keeps the log's end
	// known.
	l.ready = false
	actx, cancel := l.callContext(context.WithoutCancel(ctx), l.t.cfg.AppendTimeout)
	defer cancel()
	var recs []*kgo.Record
	for i, b := range bodies {
		idx := l.st.next + int64(i)
		n := l.chunks(len(b))
		for part := range n {
			recs = append(recs, &kgo.Record{
				Partition: l.shard,
				Key:       recordKey{kind: kindRecord, epoch: l.st.epoch, index: idx, part: uint32(part), parts: uint32(n)}.appendTo(nil),
				Value:     b[part*l.t.chunk : min(len(b), (part+1)*l.t.chunk)],
			})
		}
	}
	recs[len(recs)-1].Key[keySize-1] = flagGroupEnd
	if l.beforeProduce != nil {
		l.beforeProduce()
	}
	span := fmt.Sprintf("records [%d, %d)", l.st.next, l.st.next+int64(len(bodies)))
	if l.produceFault != nil {
		if n := l.produceFault(recs); n > 0 {
			if err := l.produce(actx, recs[:n]); err != nil {
				return err
			}
		}
		return fmt.Errorf("kafkalog: shard %d: appending %s: test: the produce failed", l.shard, span)
	}
	if err := l.produce(actx, recs); err != nil {
		return l.closedErr(fmt.Errorf("kafkalog: shard %d: appending %s: %w", l.shard, span, err))
	}
	if l.beforeCheck != nil {
		l.beforeCheck()
	}
	if err := l.check(actx, recs, len(bodies)); err != nil {
		return l.closedErr(fmt.Errorf("kafkalog: shard %d: appending %s: %w", l.shard, span, err))
	}
	l.ready = true
	return nil
}

// check decides whether recs, just produced under this writer's epoch at
// its position — a group of n records, or (n = 0) one snapshot pointer —
// count, and moves the position past them. When their offsets follow the
// position exactly, nothing else is among them and they count. Otherwise
// the records from the position to the last of them are read and run
// through the rule from the writer's state: they count if the rule
// counts them, and only them, with the writer's epoch still in force.
// ErrFenced when another writer's claim took it over before them. l.mu
// must be held.
func (l *Log) check(ctx context.Context, recs []*kgo.Record, n int) error {
	first, last := recs[0].Offset, recs[len(recs)-1].Offset
	exact := first == l.pos
	for i, r := range recs {
		exact = exact && r.Offset == first+int64(i)
	}
	if exact {
		l.pos = last + 1
		l.st.next += int64(n)
		l.publish()
		return nil
	}
	sc := newScanner(l.st, l.where)
	var foreign string
	sc.claimSeen = func(off int64, c claimValue, effective bool) {
		if effective {
			foreign = fmt.Sprintf("the claim at offset %d by %s", off, c.description)
		}
	}
	counted := 0
	ok := true
	sc.group = func(got []pendingRecord, f, la int64) error {
		counted++
		ok = ok && n > 0 && f == first && la == last && len(got) == n
		return nil
	}
	var ptr *pointer
	sc.pointerSeen = func(p pointer) {
		if p.offset == first && n == 0 {
			ptr = &p
		} else {
			ok = false
		}
	}
	if err := l.scanRange(ctx, sc, l.pos, last+1); err != nil {
		return fmt.Errorf("reading offsets [%d, %d] to check them: %w", l.pos, last, err)
	}
	if sc.st.epoch != l.st.epoch {
		if sc.st.ownerKnown && sc.st.owner == l.id {
			// A claim of this writer's own: none can be in force here,
			// since each named an epoch read before the one the writer
			// holds (a late one is not effective). Were one, it is no
			// takeover: Replay goes on under it.
			return fmt.Errorf("a claim of this writer's own at offset %d is in force; Replay", sc.st.epoch)
		}
		return l.fence(cmp.Or(foreign, fmt.Sprintf("epoch %d in force at offset %d", sc.st.epoch, last)))
	}
	if !ok || !sc.clean() || (n > 0 && counted != 1) || (n == 0 && (ptr == nil || counted != 0)) {
		return fmt.Errorf("offsets %d … %d: the rule does not count them as this writer's (other records of its epoch among them); Replay", first, last)
	}
	l.logger.Debug("kafkalog: appended records follow others' records", "from", l.pos, "first", first, "last", last)
	l.pos, l.st = last+1, sc.st
	l.publish()
	return nil
}

// ReadSnapshot implements metalog.Log: it reads the partition (from the
// latest counted pointer it knows, else the log start offset) to its high
// watermark for snapshot pointers, and returns the newest one whose
// object reads back whole; a missing object (a snapshot prepared but never
// written) or a damaged one is passed over, with a warning, for an older
// one.
func (l *Log) ReadSnapshot(ctx context.Context) (int64, []byte, error) {
	l.mu.Lock()
	err := l.usable()
	l.mu.Unlock()
	if err != nil {
		return 0, nil, err
	}
	ctx, cancel := l.callContext(ctx, 0)
	defer cancel()
	for attempt := 1; ; attempt++ {
		err := l.scanPointers(ctx)
		if err == nil {
			break
		}
		// Deleted under the read (the owner truncated meanwhile): read
		// again from the new log start, a few times.
		if !errors.Is(err, errOutOfRange) || attempt == 5 {
			return 0, nil, l.closedErr(err)
		}
		select {
		case <-ctx.Done():
			return 0, nil, l.closedErr(err)
		case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
		}
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
				return 0, nil, l.closedErr(err)
			}
			l.logger.Warn("kafkalog: passing over a snapshot that does not read back", "index", p.index, "object", p.key, "err", err)
			continue
		}
		l.markWritten(p.index, p.key)
		return p.index, payload, nil
	}
	return 0, nil, nil
}

// scanPointers reads the partition from the latest pointer known (or the
// log start offset) to its high watermark, adding the pointers that
// count.
func (l *Log) scanPointers(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 4*l.t.cfg.RequestTimeout)
	defer cancel()
	ls, err := l.t.listOffset(ctx, l.shard, -2)
	if err != nil {
		return fmt.Errorf("kafkalog: shard %d: log start offset: %w", l.shard, err)
	}
	end, err := l.t.listOffset(ctx, l.shard, -1)
	if err != nil {
		return fmt.Errorf("kafkalog: shard %d: high watermark: %w", l.shard, err)
	}
	l.snap.Lock()
	l.snap.known = slices.DeleteFunc(l.snap.known, func(p pointer) bool { return p.offset < ls })
	sc, start := fromLogStart(ls, l.where), ls
	if n := len(l.snap.known); n > 0 {
		p := l.snap.known[n-1]
		sc, start = fromPointer(p, l.where), p.offset
	}
	l.snap.Unlock()
	sc.pointerSeen = l.addPointer
	return l.scanRange(ctx, sc, start, end)
}

// snapshotReadSize is the first read of a snapshot object: the whole of a
// small one.
const snapshotReadSize = 256 << 10

func (l *Log) readSnapshot(ctx context.Context, p pointer) ([]byte, error) {
	b := make([]byte, snapshotReadSize)
	n, size, err := l.t.cfg.Snapshots.ReadRange(ctx, p.key, 0, b)
	if err != nil {
		return nil, err
	}
	if size > int64(n) {
		if size > int64(metalog.MaxRecordBytes)*64 {
			return nil, fmt.Errorf("snapshot object %s of %d bytes", p.key, size)
		}
		b = append(b[:n], make([]byte, size-int64(n))...)
		m, size2, err := l.t.cfg.Snapshots.ReadRange(ctx, p.key, int64(n), b[n:])
		if err != nil {
			return nil, err
		}
		if size2 != size {
			return nil, fmt.Errorf("snapshot object %s changed size (%d, then %d bytes)", p.key, size, size2)
		}
		n += m
	}
	payload, err := decodeSnapshot(p, b[:n])
	if err != nil {
		return nil, err
	}
	return slices.Clip(payload), nil
}

// addPointer remembers p, in offset order (so ascending by index too). A
// snapshot prepared again at the same index (no record appended between)
// has a pointer of its own, naming its own object: both are kept, the
// later one tried first.
func (l *Log) addPointer(p pointer) {
	l.snap.Lock()
	defer l.snap.Unlock()
	i, found := slices.BinarySearchFunc(l.snap.known, p.offset, func(q pointer, off int64) int { return cmp.Compare(q.offset, off) })
	if !found {
		l.snap.known = slices.Insert(l.snap.known, i, p)
	}
}

// markWritten records that the object of the pointer at index (key) is
// stored.
func (l *Log) markWritten(index int64, key string) {
	l.snap.Lock()
	defer l.snap.Unlock()
	for i := range l.snap.known {
		if p := &l.snap.known[i]; p.index == index && p.key == key {
			p.written = true
		}
	}
}

// PrepareSnapshot implements metalog.Log: it appends the snapshot's
// pointer — naming the object WriteSnapshot will store — at the log's
// next index, checked like an Append's group. After it failed, as after
// a failed Append, the log must be replayed before the next Append (a
// pointer that lands late has a stale epoch by then).
func (l *Log) PrepareSnapshot(ctx context.Context, index int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	if !l.ready || index != l.st.next {
		return fmt.Errorf("kafkalog: shard %d: snapshot at record %d, the log is at %d", l.shard, index, l.st.next)
	}
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	p := pointer{
		index:  index,
		epoch:  l.st.epoch,
		writer: l.id,
		key: fmt.Sprintf("%s/%s/%s/%d/%020d-%s", l.t.cfg.SnapshotPrefix, l.t.clusterID, l.t.cfg.Topic, l.shard,
			index, hex.EncodeToString(rnd[:])),
	}
	rec := &kgo.Record{
		Partition: l.shard,
		Key:       recordKey{kind: kindSnapshot, epoch: p.epoch, index: index, parts: 1}.appendTo(nil),
		Value:     p.appendValue(nil),
	}
	actx, cancel := l.callContext(context.WithoutCancel(ctx), l.t.cfg.AppendTimeout)
	defer cancel()
	l.ready = false
	if err := l.produce(actx, []*kgo.Record{rec}); err != nil {
		return l.closedErr(fmt.Errorf("kafkalog: shard %d: appending the pointer of the snapshot at %d: %w", l.shard, index, err))
	}
	if err := l.check(actx, []*kgo.Record{rec}, 0); err != nil {
		return l.closedErr(fmt.Errorf("kafkalog: shard %d: appending the pointer of the snapshot at %d: %w", l.shard, index, err))
	}
	l.ready = true
	p.offset = rec.Offset
	l.prepared = &p
	l.addPointer(p)
	return nil
}

// WriteSnapshot implements metalog.Log: it stores the snapshot object
// (docs/format/metadata-records.md §The Kafka backend) under the key its
// pointer, appended by PrepareSnapshot, names.
func (l *Log) WriteSnapshot(ctx context.Context, index int64, payload []byte) error {
	l.mu.Lock()
	err := l.usable()
	prep := l.prepared
	l.mu.Unlock()
	if err != nil {
		return err
	}
	if prep == nil || prep.index != index {
		return fmt.Errorf("kafkalog: shard %d: snapshot at record %d was not prepared (PrepareSnapshot first)", l.shard, index)
	}
	ctx, cancel := l.callContext(ctx, 0)
	defer cancel()
	if err := l.t.cfg.Snapshots.Put(ctx, prep.key, encodeSnapshot(index, payload)); err != nil {
		return l.closedErr(fmt.Errorf("kafkalog: shard %d: storing snapshot %s: %w", l.shard, prep.key, err))
	}
	l.markWritten(index, prep.key)
	return nil
}

// TruncateBefore implements metalog.Log: DeleteRecords up to the latest
// counted pointer at or before index whose object is stored (index must
// not be above the latest such), then deletes the snapshot objects before
// that pointer's. First it reads the partition from the writer's position
// to its high watermark: a writer another's claim has fenced deletes
// nothing (what it would delete is counted by everyone, so this only
// keeps a fenced writer from moving the log start under a new owner's
// replay).
func (l *Log) TruncateBefore(ctx context.Context, index int64) error {
	ctx, cancel := l.callContext(ctx, 4*l.t.cfg.RequestTimeout)
	defer cancel()
	if err := l.stillOwner(ctx); err != nil {
		return l.closedErr(err)
	}
	l.snap.Lock()
	var at *pointer
	latest := int64(-1)
	for i := range l.snap.known {
		p := &l.snap.known[i]
		if p.written {
			latest = max(latest, p.index)
			if p.index <= index {
				at = p
			}
		}
	}
	var target pointer
	var older []pointer
	if at != nil {
		target = *at
		for _, p := range l.snap.known {
			if p.offset < target.offset {
				older = append(older, p)
			}
		}
	}
	l.snap.Unlock()
	if latest < index || at == nil {
		return fmt.Errorf("kafkalog: shard %d: truncate before record %d: no stored snapshot at or after it with a pointer at or before it", l.shard, index)
	}
	if err := l.t.deleteRecords(ctx, l.shard, target.offset); err != nil {
		return l.closedErr(err)
	}
	for _, p := range older {
		if err := l.t.cfg.Snapshots.Delete(ctx, p.key); err != nil {
			l.logger.Warn("kafkalog: deleting an old snapshot object failed", "object", p.key, "err", err)
		}
	}
	l.snap.Lock()
	l.snap.known = slices.DeleteFunc(l.snap.known, func(p pointer) bool { return p.offset < target.offset })
	l.snap.Unlock()
	return nil
}

// stillOwner reads the partition from the writer's published position
// to its high watermark and fences the log if another writer's
// effective claim is there. It runs beside the driver without waiting for
// its call in progress: it reads from the published copy of the position
// (at), which only moves forward, so the records of an Append in
// progress are read as this writer's own. Before the first Replay it
// does nothing (nothing is owned yet). Errors: the log's ErrFenced or
// ErrClosed; IO errors, retriable ones asked again until ctx ends.
func (l *Log) stillOwner(ctx context.Context) error {
	if err := l.fencedOrClosed(); err != nil {
		return err
	}
	l.at.Lock()
	pos, st, anchored := l.at.pos, l.at.st, l.at.anchored
	l.at.Unlock()
	if !anchored {
		return nil
	}
	var end int64
	for {
		var err error
		if end, err = l.t.listOffset(ctx, l.shard, -1); err == nil {
			break
		}
		// A leader moving (NOT_LEADER_OR_FOLLOWER), or a new leader whose
		// high watermark is not established yet (OFFSET_NOT_AVAILABLE,
		// KIP-207): ask again.
		if !kerr.IsRetriable(err) || ctx.Err() != nil {
			return fmt.Errorf("kafkalog: shard %d: high watermark: %w", l.shard, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafkalog: shard %d: high watermark: %w (%w)", l.shard, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if end <= pos {
		return nil
	}
	sc := newScanner(st, l.where)
	var foreign string
	sc.claimSeen = func(off int64, c claimValue, effective bool) {
		if effective && c.writer != l.id && foreign == "" {
			foreign = fmt.Sprintf("the claim at offset %d by %s", off, c.description)
		}
	}
	sc.dropped = func(int64, string) {}
	err := l.t.read(ctx, l.shard, pos, end, func(r *kgo.Record) error {
		if err := sc.add(r.Offset, r.Key, r.Value); err != nil {
			return err
		}
		if foreign != "" {
			return errTakeoverFound // no need to read on
		}
		return nil
	})
	if err != nil && !errors.Is(err, errTakeoverFound) {
		return fmt.Errorf("kafkalog: shard %d: reading offsets [%d, %d) for claims: %w", l.shard, pos, end, err)
	}
	if foreign == "" {
		return nil
	}
	return l.fence(foreign)
}

// errTakeoverFound ends stillOwner's read at the first effective claim of
// another writer.
var errTakeoverFound = errors.New("kafkalog: another writer's claim found")

// fencedOrClosed returns the error of a fenced or closed log without
// taking mu (Close cancels closing before it takes mu).
func (l *Log) fencedOrClosed() error {
	switch {
	case l.fenced.Load() != nil:
		return *l.fenced.Load()
	case l.closing.Err() != nil:
		return metalog.ErrClosed
	}
	return nil
}

// Confirm implements metalog.Log: nil when no other writer's effective
// claim lies between this writer's position and the partition's high
// watermark as read by a ListOffsets sent after the call began — so no
// takeover was acknowledged to anyone before then (acks=all: an
// acknowledged claim is below the high watermark; a new leader answers
// OFFSET_NOT_AVAILABLE until its high watermark is established, KIP-207).
// The cost: one ListOffsets to the partition's leader when the high
// watermark is this writer's position (nothing appended since its last
// acknowledged group); otherwise also a read of the records in between —
// an Append of its own in progress (they count as its own, and do not
// fail it), or a takeover, read up to its claim only. ErrFenced when
// another writer took the shard over (the log is fenced for good, as
// when an Append finds it); Kafka not answering: ctx's error, after ctx
// ends; ErrClosed. It does not wait for a call of the driver's in
// progress (it reads a published copy of the position).
func (l *Log) Confirm(ctx context.Context) error {
	ctx, cancel := l.callContext(ctx, 0)
	defer cancel()
	l.at.Lock()
	anchored := l.at.anchored
	l.at.Unlock()
	if err := l.fencedOrClosed(); err != nil {
		return err
	}
	if !anchored {
		return fmt.Errorf("kafkalog: shard %d: Confirm before Replay", l.shard)
	}
	return l.closedErr(l.stillOwner(ctx))
}

// Close implements metalog.Log. A call in progress ends first, at once:
// Close cancels it (an Append's group is then durable or not, as after
// any failed Append, for the next owner's replay to settle).
func (l *Log) Close() error {
	l.stopCalls()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return nil
	}
	l.mu.closed = true
	l.dropProducer()
	return nil
}
