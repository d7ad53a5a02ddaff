package kafkalog

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// testReadAhead: a fetch above the answering broker's log end is answered
// OFFSET_OUT_OF_RANGE — as a replica behind the leader answers one, and
// Kafka gives no log start offset in it — and read waits for the records
// rather than taking them for deleted; only an offset below the log start
// offset (ListOffsets) fails with errOutOfRange.
func testReadAhead(t *testing.T, e *env) {
	tp, _ := e.topic(t, 1)
	ctx := context.Background()
	l := openShard(t, tp)
	replayAll(t, l, 0)
	mustAppend(t, l, group("a", 2))
	end, err := tp.listOffset(ctx, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	count := func(n *int) func(*kgo.Record) error { return func(*kgo.Record) error { *n++; return nil } }
	var n int
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	err = tp.read(sctx, 0, end+2, end+3, count(&n))
	cancel()
	if errors.Is(err, errOutOfRange) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read beyond the log end: %v, want to wait for the records until ctx ends", err)
	}
	done := make(chan error, 1)
	go func() { done <- tp.read(ctx, 0, end+2, end+3, count(&n)) }()
	mustAppend(t, l, group("b", 3))
	if err := <-done; err != nil || n != 1 {
		t.Fatalf("read of a record appended meanwhile: %v, %d records", err, n)
	}
	if err := tp.deleteRecords(ctx, 0, end); err != nil {
		t.Fatal(err)
	}
	if err := tp.read(ctx, 0, end-1, end, count(&n)); !errors.Is(err, errOutOfRange) {
		t.Fatalf("read below the log start offset: %v, want errOutOfRange", err)
	}
}
