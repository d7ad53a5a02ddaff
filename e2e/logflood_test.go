package e2e

import (
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestLogFloodBounded drives the binary with what flooded its log (issue
// 9, defect 2): a kgo consumer, then 1,000 raw fetches, on a partition
// whose object is gone (KAFKA_STORAGE_ERROR at every fetch, after a
// restart so that nothing is cached), and a client reconnecting 200 times
// with an unknown API key. Each writes one line, not one per fetch or
// connection, and a summary with its count at shutdown (else a minute
// later).
func TestLogFloodBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sc := StartSidecar(t, dir)
	ctx := testCtx(t, 2*time.Minute)
	const topic = "flood"
	createTopic(t, ctx, sc, topic, 1, nil)
	prod := sc.Client(kgo.DefaultProduceTopic(topic))
	var recs []*kgo.Record
	for i := range 100 {
		recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "flood-%d", i)})
	}
	mustNoErr(t, "produce", prod.ProduceSync(ctx, recs...).FirstErr())
	prod.Close()
	sc.Stop()
	removed := 0
	mustNoErr(t, "remove objects", filepath.WalkDir(filepath.Join(dir, "objects"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		removed++
		return os.Remove(path)
	}))
	if removed == 0 {
		t.Fatal("no object to remove")
	}

	sc = StartSidecar(t, dir)
	cons := sc.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))
	pollCtx := testCtx(t, 3*time.Second)
	for pollCtx.Err() == nil {
		if n := cons.PollFetches(pollCtx).NumRecords(); n > 0 {
			t.Fatalf("consumed %d records of a partition whose object is gone", n)
		}
	}
	cons.Close()
	rc := sc.DialRaw()
	for i := range 1000 {
		if got := fetchRaw(t, rc, topic, 0, 0, 1<<20, 0); got.ErrorCode != kerr.KafkaStorageError.Code {
			t.Fatalf("fetch %d: error %d, want KAFKA_STORAGE_ERROR", i, got.ErrorCode)
		}
	}

	frame := binary.BigEndian.AppendUint32(nil, 10)
	frame = append(frame, 0x03, 0xe7, 0, 0, 0, 0, 0, 1, 0xff, 0xff) // api key 999 v0, null client id
	for i := range 200 {
		c := sc.DialRaw()
		mustNoErr(t, "write", c.WriteRaw(frame))
		if !c.WaitClosed(5 * time.Second) {
			t.Fatalf("connection %d with an unknown API key not closed", i)
		}
	}

	conditions := []struct{ msg, subject, repeated string }{
		{"fetch: read failed", "flood-0", ""}, // ≥ 999: the kgo consumer's fetches too
		{"closing connection: bad request", "127.0.0.1", `"repeated":199,`},
	}
	matching := func(msg string) []string {
		var got []string
		for _, l := range lines(sc.Logs()) {
			if strings.Contains(l, `"msg":"`+msg+`"`) {
				got = append(got, l)
			}
		}
		return got
	}
	for _, c := range conditions {
		if got := matching(c.msg); len(got) != 1 || !strings.Contains(got[0], `"subject":"`+c.subject+`"`) {
			t.Errorf("%d lines %q, want 1 with subject %s:\n%s", len(got), c.msg, c.subject, strings.Join(got[:min(len(got), 5)], "\n"))
		}
	}
	// At shutdown the counts are written: one summary each.
	sc.Stop()
	for _, c := range conditions {
		got := matching(c.msg)
		if len(got) != 2 || !strings.Contains(got[1], `"repeated":`) || !strings.Contains(got[1], c.repeated) {
			t.Errorf("after the stop, %d lines %q, want the first and a summary with its count (%s):\n%s",
				len(got), c.msg, c.repeated, strings.Join(got[:min(len(got), 5)], "\n"))
		}
	}
}
