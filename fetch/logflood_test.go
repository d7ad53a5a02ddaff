package fetch

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// TestFetchLogFloodBounded: a consumer fetching a partition whose object
// cannot be read (KAFKA_STORAGE_ERROR) and one whose batch is corrupt
// (CORRUPT_MESSAGE) 10,000 times, and looking up timestamps in the first
// 10,000 times, gets its errors every time but logs one line per
// partition and cause, naming it, not one per request (issue 9, defect 2;
// DESIGN §Logging). The summaries with the counts are due a minute later,
// or at Close.
func TestFetchLogFloodBounded(t *testing.T) {
	logs := &logBuffer{}
	e := newEnv(t, Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	e.coord.createTopic("t", 3)
	for p := range int32(3) {
		e.commit("t", p, commitOpts{}, makeBatch(t, batch.CodecNone, 10, 1, 2, 3))
	}
	// Objects wal/0001–0003 hold partitions 0–2.
	e.store.failKey("wal/0002", errors.New("connection reset"))
	e.store.mutate("wal/0003", func(b []byte) []byte { b[16] = 1; return b }) // bad magic

	const n = 10_000
	req := e.fetchReq(16, 0, fp{topic: "t", partition: 0}, fp{topic: "t", partition: 1}, fp{topic: "t", partition: 2})
	for i := range n {
		ps := flat(e.h.Fetch(t.Context(), req))
		if ps[0].ErrorCode != 0 || ps[1].ErrorCode != kerr.KafkaStorageError.Code || ps[2].ErrorCode != kerr.CorruptMessage.Code {
			t.Fatalf("fetch %d: errors %d %d %d, want 0, KAFKA_STORAGE_ERROR, CORRUPT_MESSAGE",
				i, ps[0].ErrorCode, ps[1].ErrorCode, ps[2].ErrorCode)
		}
		if p := e.h.ListOffsets(t.Context(), listReq(8, "t", 1, 2)).Topics[0].Partitions[0]; p.ErrorCode != kerr.KafkaStorageError.Code {
			t.Fatalf("list offsets %d: error %d, want KAFKA_STORAGE_ERROR", i, p.ErrorCode)
		}
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d log lines for %d failing fetches and lookups, want 3 (one per partition and cause):\n%s",
			len(lines), 3*n, strings.Join(lines[:min(len(lines), 10)], "\n"))
	}
	e.h.Close()
	summaries := strings.Count(logs.String(), "repeated=9999 interval=1m0s")
	if got := strings.Count(logs.String(), "\n"); got != 6 || summaries != 3 {
		t.Errorf("after Close: %d lines, %d summaries of 9,999 repeats; want 6, 3:\n%s", got, summaries, logs)
	}
	for _, want := range []string{
		`msg="fetch: read failed" subject=t-1 topic=t partition=1`,
		`msg="fetch: read failed" subject=t-2 topic=t partition=2 offset=0 object=wal/0003 code=CORRUPT_MESSAGE`,
		`msg="list offsets: read failed" subject=t-1 topic=t partition=1`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no line with %s:\n%s", want, logs)
		}
	}
}
