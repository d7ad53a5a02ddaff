package kafkalog

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-sidecar/sidecar/metalog"
)

// testAppendBounded: produce requests vanish on the way to Kafka (a
// partition, or a broker that hangs): an Append fails once
// Config.AppendTimeout has passed, not when Kafka answers again, and the
// writer's Replay, once it does, settles the group; an Append blocked so
// is ended at once by Close (ErrClosed), so a shutdown does not wait for
// Kafka. The bounds below only catch a hang: without
// kgo.AllowIdempotentProduceCancellation and the Close context, either
// waits as long as the requests vanish.
func testAppendBounded(t *testing.T, e *env) {
	const bound = time.Minute
	wait := func(t *testing.T, what string, ch <-chan error) error {
		t.Helper()
		select {
		case err := <-ch:
			return err
		case <-time.After(bound):
			t.Fatalf("%s has not returned after %v", what, bound)
			return nil
		}
	}
	t.Run("AppendTimeout", func(t *testing.T) {
		d := &dropper{}
		tp, _ := e.topic(t, 1, func(c *Config) {
			c.ClientOpts = []kgo.Opt{kgo.Dialer(d.dial)}
			c.AppendTimeout = 2 * time.Second
		})
		ctx := context.Background()
		l := openShard(t, tp)
		replayAll(t, l, 0)
		g1, g2, g3 := group("g1", 2), group("g2", 2), group("g3", 1)
		mustAppend(t, l, g1)
		d.swallow.Store(true)
		t0 := time.Now()
		ch := make(chan error, 1)
		go func() { ch <- l.Append(ctx, g2) }()
		err := wait(t, "an Append whose produce requests vanish", ch)
		if err == nil || errors.Is(err, metalog.ErrFenced) {
			t.Fatalf("an Append whose produce requests vanish: %v, want an error other than ErrFenced", err)
		}
		t.Logf("the Append failed after %v: %v", time.Since(t0).Round(time.Millisecond), err)
		d.swallow.Store(false)
		if got, next := replayAll(t, l, 0); fmt.Sprint(got) != fmt.Sprint(strs(g1)) || next != 2 {
			t.Fatalf("the writer replays %v (next %d), want %v", got, next, strs(g1))
		}
		mustAppend(t, l, g3)
		cur := openShard(t, tp)
		if got, _ := replayAll(t, cur, 0); fmt.Sprint(got) != fmt.Sprint(strs(g1, g3)) {
			t.Fatalf("a new owner replays %v, want %v", got, strs(g1, g3))
		}
	})
	// Confirm on a writer cut off from Kafka fails once its context
	// ends — it cannot tell whether another writer took over — without
	// fencing the log; reconnected, it confirms again.
	t.Run("Confirm", func(t *testing.T) {
		d := &dropper{}
		tp, _ := e.topic(t, 1, func(c *Config) { c.ClientOpts = []kgo.Opt{kgo.Dialer(d.dial)} })
		l := openShard(t, tp)
		replayAll(t, l, 0)
		mustAppend(t, l, group("g1", 2))
		if err := l.Confirm(context.Background()); err != nil {
			t.Fatalf("Confirm: %v", err)
		}
		d.swallowAll.Store(true)
		ch := make(chan error, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		go func() { ch <- l.Confirm(ctx) }()
		err := wait(t, "a Confirm whose requests vanish", ch)
		if err == nil || errors.Is(err, metalog.ErrFenced) {
			t.Fatalf("a Confirm whose requests vanish: %v, want an error other than ErrFenced", err)
		}
		d.swallowAll.Store(false)
		// The vanished requests' connections are given up by the
		// client (its request timeout); a new Confirm may need a
		// reconnection first.
		for deadline := time.Now().Add(bound); ; {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := l.Confirm(ctx)
			cancel()
			if err == nil {
				break
			}
			if errors.Is(err, metalog.ErrFenced) || time.Now().After(deadline) {
				t.Fatalf("Confirm after the cut healed: %v", err)
			}
		}
		mustAppend(t, l, group("g2", 1))
	})
	t.Run("Close", func(t *testing.T) {
		d := &dropper{}
		tp, _ := e.topic(t, 1, func(c *Config) {
			c.ClientOpts = []kgo.Opt{kgo.Dialer(d.dial)}
			c.AppendTimeout = time.Hour
		})
		ctx := context.Background()
		l, err := tp.openLog(0)
		if err != nil {
			t.Fatal(err)
		}
		replayAll(t, l, 0)
		mustAppend(t, l, group("g1", 2))
		d.swallow.Store(true)
		producing := make(chan struct{})
		l.beforeProduce = func() { close(producing) }
		ch := make(chan error, 1)
		go func() { ch <- l.Append(ctx, group("g2", 1)) }()
		<-producing
		closed := make(chan error, 1)
		go func() { closed <- l.Close() }()
		if err := wait(t, "Close during a blocked Append", closed); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := wait(t, "the Append Close ended", ch); !errors.Is(err, metalog.ErrClosed) {
			t.Fatalf("the Append Close ended: %v, want ErrClosed", err)
		}
	})
}
