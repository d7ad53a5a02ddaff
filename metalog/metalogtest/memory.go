package metalogtest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/diskless-sidecar/sidecar/metalog"
)

// Memory is the in-memory metadata log backend for tests and benchmarks:
// a set of logs, one per shard, that live as long as the Memory does, so
// that a coordinator closed and opened again over the same Memory replays
// what it wrote. It passes Run (it is a Store), torn tails and fencing
// included. It keeps
// the bodies it is given without copying them (metalog.Log: the caller
// does not modify a body once appended), so an Append costs no copy: the
// benchmarks of the coordinator's decision path use it as a log that
// takes no time.
//
// Like a Kafka topic partition, whose new writer's claim supersedes the
// previous one's, opening a shard's log while a handle on it is open
// fences that handle: its calls
// fail with metalog.ErrFenced. The zero value is ready to use; all methods
// are safe for concurrent use.
type Memory struct {
	// Discard makes the logs keep no record body, only their count, for
	// benchmarks of the decision path over many large records: keeping
	// them grows the heap by every record appended (BenchmarkCommitIntoIndex
	// takes a fifth longer). Replaying a discarded record fails with
	// metalog.ErrCorrupt, so a log that discards is not durable and does
	// not pass Run; set it before the first Open.
	Discard bool

	mu   sync.Mutex
	logs map[int32]*memShard
}

// memShard is one log's durable content.
type memShard struct {
	// first is the index of records[0]: records below it were truncated.
	first   int64
	records [][]byte
	// discarded counts the records after records that Memory.Discard
	// kept no body of (nor group boundary).
	discarded int64
	// groups[i] is the index after group i's last record.
	groups []int64
	snaps  []memSnapshot // ascending by index
	// owner is the handle that may write; older handles are fenced.
	owner *memLog
	// grew is closed, and replaced, by every Append that adds records:
	// followers waiting for more wake up (nil until one waits).
	grew chan struct{}
}

// grown wakes the followers waiting on s; m.mu must be held.
func (s *memShard) grown() {
	if s.grew != nil {
		close(s.grew)
		s.grew = nil
	}
}

type memSnapshot struct {
	index   int64
	payload []byte
}

// Open opens shard's log, creating it empty the first time; a handle
// already open on it is fenced. Its signature fits coordinator.Config's
// OpenLog.
func (m *Memory) Open(shard int32) (metalog.Log, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.shardLocked(shard)
	l := &memLog{m: m, s: s, prepared: -1}
	s.owner = l
	return l, nil
}

// shardLocked returns shard's log, creating it empty; m.mu must be held.
func (m *Memory) shardLocked(shard int32) *memShard {
	if m.logs == nil {
		m.logs = make(map[int32]*memShard)
	}
	s := m.logs[shard]
	if s == nil {
		s = &memShard{}
		m.logs[shard] = s
	}
	return s
}

// Follow returns a follower of shard's log (metalog.Follower), creating
// the log empty the first time: a read replica that sees every group
// once its Append returned, woken by the Append itself. It fences
// nothing. Its signature fits coordinator.Config's OpenFollower.
func (m *Memory) Follow(shard int32) (metalog.Follower, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return &memFollower{m: m, s: m.shardLocked(shard), closed: make(chan struct{})}, nil
}

// memFollower is a follower of one shard's log.
type memFollower struct {
	m         *Memory
	s         *memShard
	closed    chan struct{}
	closeOnce sync.Once
}

func (f *memFollower) isClosed() bool {
	select {
	case <-f.closed:
		return true
	default:
		return false
	}
}

func (f *memFollower) ReadSnapshot(ctx context.Context) (int64, []byte, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.isClosed() {
		return 0, nil, metalog.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	if n := len(f.s.snaps); n > 0 {
		sn := f.s.snaps[n-1]
		return sn.index, slices.Clip(sn.payload), nil
	}
	return 0, nil, nil
}

func (f *memFollower) Replay(ctx context.Context, from int64, fn func(index int64, body []byte) error) (int64, error) {
	f.m.mu.Lock()
	if f.isClosed() {
		f.m.mu.Unlock()
		return 0, metalog.ErrClosed
	}
	s := f.s
	next := s.first + int64(len(s.records)) + s.discarded
	switch {
	case from < s.first:
		first := s.first // read under the lock: TruncateBefore moves it
		f.m.mu.Unlock()
		return 0, fmt.Errorf("%w: records [%d, %d) are gone", metalog.ErrTruncated, from, first)
	case from > next:
		f.m.mu.Unlock()
		return 0, fmt.Errorf("%w: the log ends at record %d, before %d", metalog.ErrCorrupt, next, from)
	case from < next && s.discarded > 0:
		f.m.mu.Unlock()
		return 0, fmt.Errorf("%w: records were discarded (Memory.Discard)", metalog.ErrCorrupt)
	}
	recs := s.records[from-s.first:]
	f.m.mu.Unlock()
	for i, body := range recs {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if err := fn(from+int64(i), body); err != nil {
			return 0, fmt.Errorf("metalogtest: follow record %d: %w", from+int64(i), err)
		}
	}
	return next, nil
}

func (f *memFollower) Wait(ctx context.Context, next int64) error {
	for {
		f.m.mu.Lock()
		if f.isClosed() {
			f.m.mu.Unlock()
			return metalog.ErrClosed
		}
		if f.s.first+int64(len(f.s.records))+f.s.discarded > next {
			f.m.mu.Unlock()
			return nil
		}
		if f.s.grew == nil {
			f.s.grew = make(chan struct{})
		}
		grew := f.s.grew
		f.m.mu.Unlock()
		select {
		case <-grew:
		case <-f.closed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (f *memFollower) Close() error {
	f.closeOnce.Do(func() { close(f.closed) })
	return nil
}

// Tear implements Store: variant 0 removes the last group appended to
// shard's log, as if the process had stopped before it became durable;
// variant 1 keeps it, as if the process had stopped after it became
// durable, before its Append returned. Those are the only outcomes a
// crash during an Append has here.
func (m *Memory) Tear(t *testing.T, shard int32, variant int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.logs[shard]
	switch {
	case variant == 1:
		return true
	case variant != 0:
		return false
	case s == nil || len(s.groups) == 0:
		t.Fatalf("metalogtest: shard %d has no group to tear", shard)
	}
	start := s.first
	if n := len(s.groups); n > 1 {
		start = s.groups[n-2]
	}
	s.records = s.records[:start-s.first]
	s.groups = s.groups[:len(s.groups)-1]
	return true
}

// memLog is one handle on a shard's log.
type memLog struct {
	m      *Memory
	s      *memShard
	closed bool
	// ready is set by a successful Replay; Append requires it.
	ready bool
	// prepared is the index of the latest PrepareSnapshot (−1: none).
	prepared int64
}

// check returns the error every call makes on a closed or fenced handle;
// m.mu must be held.
func (l *memLog) check() error {
	switch {
	case l.closed:
		return metalog.ErrClosed
	case l.s.owner != l:
		return fmt.Errorf("%w: the log was opened again", metalog.ErrFenced)
	}
	return nil
}

func (l *memLog) next() int64 { return l.s.first + int64(len(l.s.records)) + l.s.discarded }

func (l *memLog) Replay(ctx context.Context, from int64, fn func(index int64, body []byte) error) (int64, error) {
	l.m.mu.Lock()
	if err := l.check(); err != nil {
		l.m.mu.Unlock()
		return 0, err
	}
	l.ready = false
	if first := l.s.first; from < first {
		l.m.mu.Unlock()
		return 0, fmt.Errorf("%w: records [%d, %d) are gone", metalog.ErrTruncated, from, first)
	}
	if next := l.next(); from > next {
		l.m.mu.Unlock()
		return 0, fmt.Errorf("%w: the log ends at record %d, before %d", metalog.ErrCorrupt, next, from)
	}
	if kept, next := l.s.first+int64(len(l.s.records)), l.next(); from < next && l.s.discarded > 0 {
		l.m.mu.Unlock()
		return 0, fmt.Errorf("%w: records [%d, %d) were discarded (Memory.Discard)", metalog.ErrCorrupt, max(from, kept), next)
	}
	// Bodies are never modified once appended, so fn may run unlocked on
	// this slice of them.
	recs, first := l.s.records[min(from-l.s.first, int64(len(l.s.records))):], from
	next := l.next()
	l.m.mu.Unlock()
	for i, body := range recs {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if err := fn(first+int64(i), body); err != nil {
			return 0, fmt.Errorf("metalogtest: replay record %d: %w", first+int64(i), err)
		}
	}
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if err := l.check(); err != nil {
		return 0, err
	}
	l.ready = true
	return next, nil
}

func (l *memLog) Append(ctx context.Context, bodies [][]byte) error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if err := l.check(); err != nil {
		return err
	}
	if !l.ready {
		return fmt.Errorf("metalogtest: appended before replay")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(bodies) == 0 {
		return nil
	}
	for _, b := range bodies {
		if len(b) == 0 || len(b) > metalog.MaxRecordBytes {
			return fmt.Errorf("metalogtest: metadata record of %d bytes (limit %d)", len(b), metalog.MaxRecordBytes)
		}
	}
	defer l.s.grown()
	if l.m.Discard {
		l.s.discarded += int64(len(bodies))
		return nil
	}
	l.s.records = append(l.s.records, bodies...)
	l.s.groups = append(l.s.groups, l.next())
	return nil
}

func (l *memLog) ReadSnapshot(ctx context.Context) (int64, []byte, error) {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if err := l.check(); err != nil {
		return 0, nil, err
	}
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	if n := len(l.s.snaps); n > 0 {
		sn := l.s.snaps[n-1]
		return sn.index, slices.Clip(sn.payload), nil
	}
	return 0, nil, nil
}

func (l *memLog) PrepareSnapshot(ctx context.Context, index int64) error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if err := l.check(); err != nil {
		return err
	}
	if !l.ready || index != l.next() {
		return fmt.Errorf("metalogtest: snapshot at record %d, log is at %d", index, l.next())
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	l.prepared = index
	return nil
}

func (l *memLog) WriteSnapshot(ctx context.Context, index int64, payload []byte) error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if err := l.check(); err != nil {
		return err
	}
	if index != l.prepared {
		return fmt.Errorf("metalogtest: snapshot at record %d, prepared at %d (PrepareSnapshot first)", index, l.prepared)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// A copy: the caller's buffer is its own once WriteSnapshot returns.
	l.s.snaps = append(l.s.snaps, memSnapshot{index, append([]byte{}, payload...)})
	return nil
}

func (l *memLog) TruncateBefore(ctx context.Context, index int64) error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if err := l.check(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	n := len(l.s.snaps)
	if n == 0 || l.s.snaps[n-1].index < index {
		return fmt.Errorf("metalogtest: truncate before record %d: no snapshot at or after it", index)
	}
	if k := index - l.s.first; k > 0 {
		l.s.records = slices.Clone(l.s.records[k:])
		l.s.first = index
		i := 0
		for i < len(l.s.groups) && l.s.groups[i] <= index {
			i++
		}
		l.s.groups = slices.Clone(l.s.groups[i:])
	}
	i := 0
	for i < n && l.s.snaps[i].index < index {
		i++
	}
	l.s.snaps = slices.Clone(l.s.snaps[i:])
	return nil
}

// Confirm implements metalog.Log: ErrFenced once the log was opened
// again (the takeover), at once.
func (l *memLog) Confirm(ctx context.Context) error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	return l.check()
}

func (l *memLog) Close() error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	l.closed = true
	return nil
}
