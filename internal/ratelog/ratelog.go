// Package ratelog keeps a condition that a client can cause over and over
// (a bad request, a partition whose bytes do not check out, a storage error
// every fetch runs into) from flooding the log (DESIGN §Logging).
//
// A condition is named by its message, a constant of the code (the cause),
// and a subject: the peer, the partition, the object. The first occurrence
// of a (message, subject) pair is logged at once; later ones within
// Config.Interval are only counted, and one summary line per interval
// carries the count (attribute "repeated") and the attributes of the last
// occurrence. A pair that did not recur within an interval is forgotten, so
// its next occurrence is logged at once again.
//
// Memory is bounded: at most Config.MaxKeys pairs are tracked. When the
// table is full, a new subject of a message is counted under that message
// with no subject (attribute "subject" "(others)"), so a client that makes
// up subjects (ports, topic names) cannot grow the table nor the number of
// lines: per interval, at most MaxKeys first lines and as many summaries,
// plus one each per message for the others.
package ratelog

import (
	"container/list"
	"context"
	"log/slog"
	"sync"
	"time"
)

// Defaults of Config's zero fields.
const (
	// DefaultInterval is one summary line a minute per condition: ~1,440
	// lines a day for a condition that never stops.
	DefaultInterval = time.Minute
	// DefaultMaxKeys bounds the table to ~1024 entries of ~200 B.
	DefaultMaxKeys = 1024
)

// Config tunes a Limiter. A zero field takes its default.
type Config struct {
	// Interval is the time between summary lines of one condition, > 0;
	// default DefaultInterval.
	Interval time.Duration
	// MaxKeys is the number of (message, subject) pairs tracked at once,
	// ≥ 1; default DefaultMaxKeys.
	MaxKeys int
	// Now is the clock; nil means time.Now. With an injected clock no
	// summary is written by a timer: only by Log, Flush and Close.
	Now func() time.Time
}

// othersSubject is the subject of the overflow entry of a message.
const othersSubject = "(others)"

type key struct{ msg, subject string }

// entry is one tracked condition. It sits in Limiter.order by the start of
// its current interval, oldest first.
type entry struct {
	key      key
	level    slog.Level
	start    time.Time   // when the current interval began
	repeated int         // occurrences since the last line
	attrs    []slog.Attr // of the last occurrence counted
	overflow bool        // an entry of othersSubject: not counted in MaxKeys
	elem     *list.Element
}

// Limiter writes rate-limited log lines to one slog.Logger. It is safe for
// concurrent use; the zero value is not usable (New).
type Limiter struct {
	log *slog.Logger
	cfg Config
	// timed is true with the real clock: a timer writes due summaries.
	timed bool

	// mu guards the table, its order, the timer and closed.
	mu struct {
		sync.Mutex
		entries map[key]*entry
		order   list.List // *entry, by interval start
		tracked int       // entries not overflow
		timer   *time.Timer
		closed  bool
	}
}

// New returns a Limiter writing to log (nil: slog.Default()). Close it to
// write the summaries still due and stop its timer.
func New(log *slog.Logger, cfg Config) *Limiter {
	if log == nil {
		log = slog.Default()
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.MaxKeys < 1 {
		cfg.MaxKeys = DefaultMaxKeys
	}
	l := &Limiter{log: log, cfg: cfg, timed: cfg.Now == nil}
	if l.cfg.Now == nil {
		l.cfg.Now = time.Now
	}
	l.mu.entries = make(map[key]*entry)
	return l
}

// line is one log line decided under the lock and written after it.
type line struct {
	level    slog.Level
	msg      string
	subject  string
	repeated int
	attrs    []slog.Attr
}

// Log writes msg at level with attrs if (msg, subject) has not occurred in
// the current interval, and otherwise counts it for the interval's summary.
// msg must be a constant of the code (it names the cause); subject names
// what it happened to — a peer's host (not its port, so reconnects count
// as one), a partition, an object — and is added as attribute "subject"
// when not empty. ctx is passed to the handler.
func (l *Limiter) Log(ctx context.Context, level slog.Level, subject, msg string, attrs ...slog.Attr) {
	if !l.log.Enabled(ctx, level) {
		return
	}
	now := l.cfg.Now()
	var out [4]line
	lines := out[:0]

	l.mu.Lock()
	lines = l.sweepLocked(now, lines)
	k := key{msg, subject}
	e, ok := l.mu.entries[k]
	if !ok && l.mu.tracked >= l.cfg.MaxKeys {
		// Full, with no entry old enough to go: count under the others.
		k = key{msg, othersSubject}
		e, ok = l.mu.entries[k]
		if !ok {
			e = l.addLocked(k, level, now, true)
			lines = append(lines, line{level: level, msg: msg, subject: othersSubject, attrs: attrs})
		}
	} else if !ok {
		e = l.addLocked(k, level, now, false)
		lines = append(lines, line{level: level, msg: msg, subject: subject, attrs: attrs})
	}
	if ok {
		e.repeated++
		e.attrs, e.level = attrs, max(e.level, level)
		l.armLocked()
	}
	l.mu.Unlock()

	l.write(ctx, lines)
}

// addLocked tracks a new condition whose first line is being written.
func (l *Limiter) addLocked(k key, level slog.Level, now time.Time, overflow bool) *entry {
	e := &entry{key: k, level: level, start: now, overflow: overflow}
	e.elem = l.mu.order.PushBack(e)
	l.mu.entries[k] = e
	if !overflow {
		l.mu.tracked++
	}
	return e
}

// sweepLocked ends every interval that is over at now, appending the
// summaries due to lines: an entry that recurred starts a new interval
// with a summary; one that did not is forgotten.
func (l *Limiter) sweepLocked(now time.Time, lines []line) []line {
	for el := l.mu.order.Front(); el != nil; el = l.mu.order.Front() {
		e := el.Value.(*entry)
		if now.Sub(e.start) < l.cfg.Interval {
			break
		}
		l.mu.order.Remove(el)
		if e.repeated == 0 {
			delete(l.mu.entries, e.key)
			if !e.overflow {
				l.mu.tracked--
			}
			continue
		}
		lines = append(lines, line{level: e.level, msg: e.key.msg, subject: e.key.subject, repeated: e.repeated, attrs: e.attrs})
		e.repeated, e.attrs, e.start = 0, nil, now
		e.elem = l.mu.order.PushBack(e)
	}
	return lines
}

// armLocked starts the timer that writes the next summary due, with the
// real clock, if it is not running.
func (l *Limiter) armLocked() {
	if !l.timed || l.mu.timer != nil || l.mu.closed {
		return
	}
	front := l.mu.order.Front()
	if front == nil {
		return
	}
	wait := l.cfg.Interval - l.cfg.Now().Sub(front.Value.(*entry).start)
	l.mu.timer = time.AfterFunc(max(wait, 0), l.tick)
}

// tick is the timer's function: it writes the summaries due and re-arms
// while some condition is still counting.
func (l *Limiter) tick() {
	l.mu.Lock()
	l.mu.timer = nil
	if l.mu.closed {
		l.mu.Unlock()
		return
	}
	lines := l.sweepLocked(l.cfg.Now(), nil)
	for el := l.mu.order.Front(); el != nil; el = el.Next() {
		if el.Value.(*entry).repeated > 0 {
			l.armLocked()
			break
		}
	}
	l.mu.Unlock()
	l.write(context.Background(), lines)
}

// Flush writes the summaries whose interval is over (Log does it too, on
// its way).
func (l *Limiter) Flush() {
	l.mu.Lock()
	lines := l.sweepLocked(l.cfg.Now(), nil)
	l.mu.Unlock()
	l.write(context.Background(), lines)
}

// Close writes a summary of every condition counted since its last line,
// whether or not its interval is over, stops the timer and forgets every
// condition. Log still works after Close (without a timer), so a late
// caller cannot fail; Close may be called more than once.
func (l *Limiter) Close() {
	l.mu.Lock()
	l.mu.closed = true
	if l.mu.timer != nil {
		l.mu.timer.Stop()
		l.mu.timer = nil
	}
	var lines []line
	for el := l.mu.order.Front(); el != nil; el = el.Next() {
		if e := el.Value.(*entry); e.repeated > 0 {
			lines = append(lines, line{level: e.level, msg: e.key.msg, subject: e.key.subject, repeated: e.repeated, attrs: e.attrs})
		}
	}
	l.mu.order.Init()
	clear(l.mu.entries)
	l.mu.tracked = 0
	l.mu.Unlock()
	l.write(context.Background(), lines)
}

// write writes the lines decided, in order, outside the lock.
func (l *Limiter) write(ctx context.Context, lines []line) {
	for _, ln := range lines {
		attrs := ln.attrs
		if ln.subject != "" || ln.repeated > 0 {
			attrs = make([]slog.Attr, 0, len(ln.attrs)+3)
			if ln.subject != "" {
				attrs = append(attrs, slog.String("subject", ln.subject))
			}
			attrs = append(attrs, ln.attrs...)
			if ln.repeated > 0 {
				attrs = append(attrs, slog.Int("repeated", ln.repeated), slog.Duration("interval", l.cfg.Interval))
			}
		}
		l.log.LogAttrs(ctx, ln.level, ln.msg, attrs...)
	}
}
