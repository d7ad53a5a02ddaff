package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
)

// txnPoll returns got with the values of the records polled by cl until
// want reports true of them all, or ctx ends (then the test fails, naming
// what came).
func txnPoll(t *testing.T, ctx context.Context, cl *kgo.Client, got []string, want func([]string) bool) []string {
	t.Helper()
	for !want(got) {
		if ctx.Err() != nil {
			t.Fatalf("gave up with %d records: %v", len(got), got)
		}
		got = txnPollFor(t, ctx, cl, got, 2*time.Second)
	}
	return got
}

// txnPollMore polls cl polls more times, a second each (txnPollFor), and
// returns got with the values of the records they bring: after txnPoll,
// what a test expects to be nothing more.
func txnPollMore(t *testing.T, ctx context.Context, cl *kgo.Client, got []string, polls int) []string {
	t.Helper()
	for range polls {
		got = txnPollFor(t, ctx, cl, got, time.Second)
	}
	return got
}

// txnPollFor polls cl once, for at most d, and returns got with the
// values of the records it brought; a fetch error but the poll's
// deadline fails t.
func txnPollFor(t *testing.T, ctx context.Context, cl *kgo.Client, got []string, d time.Duration) []string {
	t.Helper()
	pctx, cancel := context.WithTimeout(ctx, d)
	fs := cl.PollFetches(pctx)
	cancel()
	for _, e := range fs.Errors() {
		if !errors.Is(e.Err, context.DeadlineExceeded) && !errors.Is(e.Err, context.Canceled) {
			t.Fatalf("poll: %s/%d: %v", e.Topic, e.Partition, e.Err)
		}
	}
	fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	return got
}

// countPrefix counts the values starting with prefix.
func countPrefix(vals []string, prefix string) int {
	n := 0
	for _, v := range vals {
		if strings.HasPrefix(v, prefix) {
			n++
		}
	}
	return n
}

// txnEnds returns partition p's latest offset under read_uncommitted (the
// high watermark) and read_committed (the last stable offset), from
// ListOffsets v5.
func txnEnds(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, p int32) (hwm, lso int64) {
	t.Helper()
	for iso := int8(0); iso <= 1; iso++ {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version, req.IsolationLevel, req.ReplicaID = 5, iso, -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		mustNoErr(t, "ListOffsets", err)
		o := resp.Topics[0].Partitions[0]
		if o.ErrorCode != 0 {
			t.Fatalf("ListOffsets isolation %d: error %d", iso, o.ErrorCode)
		}
		if iso == 0 {
			hwm = o.Offset
		} else {
			lso = o.Offset
		}
	}
	return hwm, lso
}

// txnWaitLSO waits until partition p's last stable offset reaches lso
// (the coordinator aborting a timed-out transaction moves it) and returns
// txnEnds then; it fails t when ctx ends first.
func txnWaitLSO(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, p int32, lso int64) (int64, int64) {
	t.Helper()
	hwm, got := txnEnds(t, ctx, cl, topic, p)
	for got < lso {
		if ctx.Err() != nil {
			t.Fatalf("the LSO stayed at %d (high watermark %d): the timed-out transaction was not aborted", got, hwm)
		}
		time.Sleep(200 * time.Millisecond)
		hwm, got = txnEnds(t, ctx, cl, topic, p)
	}
	return hwm, got
}

// produceAll produces one record per value, synchronously, to partition 0.
func produceAll(ctx context.Context, cl *kgo.Client, topic string, vals ...string) error {
	var recs []*kgo.Record
	for _, v := range vals {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(v)})
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}

func vals(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + string(rune('a'+i))
	}
	return out
}

// TestTransactionsKgo drives the sidecar binary with kgo's transactional
// producer and read_committed consumers (SPEC §15): committed records
// are visible, aborted ones never (a read_uncommitted consumer sees them:
// they were written); the last stable offset (ListOffsets latest under
// read_committed) stays at an open transaction's first record — and a
// read_committed consumer gets nothing past it — until it commits, or
// until the coordinator aborts it once its transaction.timeout.ms has
// passed; a second producer with the same transactional id fences the
// first, whose produce and commit then fail and none of whose records
// become visible.
func TestTransactionsKgo(t *testing.T) {
	t.Parallel()
	sc := StartSidecar(t, "")
	ctx := testCtx(t, 3*time.Minute)
	const topic = "txn"
	createTopic(t, ctx, sc, topic, 1, nil)
	manual := kgo.RecordPartitioner(kgo.ManualPartitioner())

	// Committed, aborted, then one left open.
	p := sc.Client(kgo.TransactionalID("tx-1"), manual, kgo.TransactionTimeout(time.Minute))
	txn := func(prefix string, n int, commit kgo.TransactionEndTry) {
		t.Helper()
		mustNoErr(t, "BeginTransaction", p.BeginTransaction())
		mustNoErr(t, "produce "+prefix, produceAll(ctx, p, topic, vals(prefix, n)...))
		mustNoErr(t, "EndTransaction "+prefix, p.EndTransaction(ctx, commit))
	}
	txn("commit1-", 10, kgo.TryCommit)
	txn("abort-", 7, kgo.TryAbort)
	hwm, lso := txnEnds(t, ctx, p, topic, 0)
	if hwm != 19 || lso != 19 { // 10 + marker + 7 + marker
		t.Fatalf("after commit and abort: high watermark %d, LSO %d; want 19, 19", hwm, lso)
	}
	mustNoErr(t, "BeginTransaction", p.BeginTransaction())
	mustNoErr(t, "produce open", produceAll(ctx, p, topic, vals("open-", 5)...))
	hwm, lso = txnEnds(t, ctx, p, topic, 0)
	if hwm != 24 || lso != 19 {
		t.Fatalf("open transaction: high watermark %d, LSO %d; want 24, 19", hwm, lso)
	}

	committed := sc.Client(kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := txnPoll(t, ctx, committed, nil, func(v []string) bool { return len(v) >= 10 })
	// Nothing past the LSO while the transaction is open: a few more
	// polls bring nothing.
	got = txnPollMore(t, ctx, committed, got, 3)
	if len(got) != 10 || countPrefix(got, "commit1-") != 10 {
		t.Fatalf("read_committed before the open transaction ends: %v", got)
	}
	mustNoErr(t, "EndTransaction open", p.EndTransaction(ctx, kgo.TryCommit))
	got = txnPoll(t, ctx, committed, got, func(v []string) bool { return len(v) >= 15 })
	if hwm, lso = txnEnds(t, ctx, p, topic, 0); hwm != 25 || lso != 25 {
		t.Fatalf("after the commit: high watermark %d, LSO %d; want 25, 25", hwm, lso)
	}

	// A transaction its producer abandons: the coordinator aborts it once
	// its timeout has passed (checked every 10 s).
	short := sc.Client(kgo.TransactionalID("tx-short"), manual, kgo.TransactionTimeout(2*time.Second))
	mustNoErr(t, "BeginTransaction", short.BeginTransaction())
	mustNoErr(t, "produce abandoned", produceAll(ctx, short, topic, vals("abandoned-", 3)...))
	if hwm, lso = txnEnds(t, ctx, p, topic, 0); hwm != 28 || lso != 25 {
		t.Fatalf("abandoned transaction: high watermark %d, LSO %d; want 28, 25", hwm, lso)
	}
	hwm, lso = txnWaitLSO(t, ctx, p, topic, 0, 29)
	if hwm != 29 || lso != 29 {
		t.Fatalf("after the timeout: high watermark %d, LSO %d; want 29, 29 (the abort marker)", hwm, lso)
	}

	// Zombie fencing: a second producer of tx-z fences the first.
	zombie := sc.Client(kgo.TransactionalID("tx-z"), manual, kgo.TransactionTimeout(time.Minute))
	mustNoErr(t, "BeginTransaction", zombie.BeginTransaction())
	mustNoErr(t, "produce zombie", produceAll(ctx, zombie, topic, "zombie-a"))
	zpid, zepoch, err := zombie.ProducerID(ctx)
	mustNoErr(t, "zombie's producer id", err)
	fresh := sc.Client(kgo.TransactionalID("tx-z"), manual, kgo.TransactionTimeout(time.Minute))
	mustNoErr(t, "BeginTransaction", fresh.BeginTransaction())
	mustNoErr(t, "produce fresh", produceAll(ctx, fresh, topic, "fresh-a"))
	zerr := produceAll(ctx, zombie, topic, "zombie-b")
	if !errors.Is(zerr, kerr.InvalidProducerEpoch) && !errors.Is(zerr, kerr.ProducerFenced) {
		t.Fatalf("the fenced producer's produce: %v, want INVALID_PRODUCER_EPOCH or PRODUCER_FENCED", zerr)
	}
	// kgo, told it is fenced, no longer sends EndTxn; the coordinator
	// refuses one with the zombie's producer id and epoch all the same.
	if err := zombie.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the fenced producer's commit succeeded")
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.Version, end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = 3, "tx-z", zpid, zepoch, true
	eresp, err := end.RequestWith(ctx, fresh)
	mustNoErr(t, "EndTxn", err)
	if eresp.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("EndTxn of the fenced producer: %v, want PRODUCER_FENCED", kerr.ErrorForCode(eresp.ErrorCode))
	}
	mustNoErr(t, "EndTransaction fresh", fresh.EndTransaction(ctx, kgo.TryCommit))

	got = txnPoll(t, ctx, committed, got, func(v []string) bool { return slices.Contains(v, "fresh-a") })
	for _, prefix := range []string{"abort-", "abandoned-", "zombie-"} {
		if n := countPrefix(got, prefix); n != 0 {
			t.Errorf("read_committed consumer got %d %s records: %v", n, prefix, got)
		}
	}
	if countPrefix(got, "commit1-") != 10 || countPrefix(got, "open-") != 5 || len(got) != 16 {
		t.Errorf("read_committed consumer got %v", got)
	}

	// They were written all the same: a read_uncommitted consumer sees
	// them (every data record: 10 + 7 + 5 + 3 + zombie-a + fresh-a).
	all := sc.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	raw := txnPoll(t, ctx, all, nil, func(v []string) bool { return slices.Contains(v, "fresh-a") })
	if countPrefix(raw, "abort-") != 7 || countPrefix(raw, "abandoned-") != 3 || countPrefix(raw, "zombie-a") != 1 {
		t.Errorf("read_uncommitted consumer got %v (zombie produce error: %v)", raw, zerr)
	}
}

// javaTxn is a running kafkatest TxnProduce: commands in, answers out.
type javaTxn struct {
	t     *testing.T
	stdin io.WriteCloser
	out   *bufio.Scanner
	errs  *lockedBuffer
}

// lockedBuffer is a bytes.Buffer a process writes while the test reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func startJavaTxn(t *testing.T, ctx context.Context, sc *Sidecar, topic, id string, props ...string) *javaTxn {
	t.Helper()
	args := []string{"--bootstrap-server", sc.Addr, "--topic", topic, "--transactional-id", id}
	for _, p := range props {
		args = append(args, "--property", p)
	}
	cmd, err := kafkatest.JavaCommand(ctx, "TxnProduce", args...)
	mustNoErr(t, "java TxnProduce", err)
	j := &javaTxn{t: t, errs: &lockedBuffer{}}
	j.stdin, err = cmd.StdinPipe()
	mustNoErr(t, "stdin", err)
	stdout, err := cmd.StdoutPipe()
	mustNoErr(t, "stdout", err)
	cmd.Stderr = j.errs
	mustNoErr(t, "start TxnProduce", cmd.Start())
	t.Cleanup(func() {
		j.stdin.Close()
		cmd.Wait()
	})
	j.out = bufio.NewScanner(stdout)
	j.answer("init")
	return j
}

// answer reads the program's answer to cmd and fails the test unless it
// is "ok"; it returns the line.
func (j *javaTxn) answer(cmd string) string {
	j.t.Helper()
	for j.out.Scan() {
		line := j.out.Text()
		if strings.HasPrefix(line, "ok "+cmd) {
			return line
		}
		if strings.HasPrefix(line, "error ") {
			return line
		}
	}
	j.t.Fatalf("TxnProduce ended before answering %q\n%s", cmd, j.errs.String())
	return ""
}

// do sends cmd and returns its answer line ("ok …" or "error …").
func (j *javaTxn) do(cmd string) string {
	j.t.Helper()
	if _, err := io.WriteString(j.stdin, cmd+"\n"); err != nil {
		j.t.Fatalf("TxnProduce %s: %v\n%s", cmd, err, j.errs.String())
	}
	return j.answer(strings.Fields(cmd)[0])
}

// must runs cmds, each of which must answer ok.
func (j *javaTxn) must(cmds ...string) {
	j.t.Helper()
	for _, c := range cmds {
		if a := j.do(c); !strings.HasPrefix(a, "ok ") {
			j.t.Fatalf("TxnProduce %s: %s\n%s", c, a, j.errs.String())
		}
	}
}

// javaReadCommitted reads the whole topic with the Java consumer under
// read_committed and returns the values.
func javaReadCommitted(t *testing.T, ctx context.Context, sc *Sidecar, topic string) []string {
	t.Helper()
	stdout, stderr, err := kafkatest.Java(ctx, "Consume", "--bootstrap-server", sc.Addr, "--topic", topic,
		"--idle-timeout-ms", "5000", "--property", "isolation.level=read_committed")
	if err != nil {
		t.Fatalf("java Consume: %v\n%s", err, stderr)
	}
	recs, err := kafkatest.ParseRecords(stdout)
	mustNoErr(t, "parse records", err)
	var out []string
	for _, r := range recs {
		out = append(out, string(r.Value))
	}
	return out
}

// TestTransactionsJava: the Java client's transactional producer (Maven
// Central jars) commits and aborts against the sidecar binary, and its
// read_committed consumer sees the committed records only; the last
// stable offset stays at an open transaction until it commits, and at
// another until the coordinator aborts it at its transaction.timeout.ms,
// after which its producer's commit fails (SPEC §15).
func TestTransactionsJava(t *testing.T) {
	t.Parallel()
	kafkatest.Require(t)
	sc := StartSidecar(t, "")
	ctx := testCtx(t, 4*time.Minute)
	const topic = "jtxn"
	createTopic(t, ctx, sc, topic, 1, nil)
	cl := sc.Client()

	p := startJavaTxn(t, ctx, sc, topic, "jtx-1")
	p.must("begin", "send c1", "send c2", "commit", "begin", "send a1", "abort", "begin", "send o1")
	if hwm, lso := txnEnds(t, ctx, cl, topic, 0); hwm != 6 || lso != 5 {
		t.Fatalf("open transaction: high watermark %d, LSO %d; want 6, 5", hwm, lso)
	}
	if got := javaReadCommitted(t, ctx, sc, topic); !slices.Equal(got, []string{"c1", "c2"}) {
		t.Fatalf("read_committed with a transaction open: %v, want [c1 c2]", got)
	}
	p.must("commit")
	if hwm, lso := txnEnds(t, ctx, cl, topic, 0); hwm != 7 || lso != 7 {
		t.Fatalf("after the commit: high watermark %d, LSO %d; want 7, 7", hwm, lso)
	}
	if got := javaReadCommitted(t, ctx, sc, topic); !slices.Equal(got, []string{"c1", "c2", "o1"}) {
		t.Fatalf("read_committed: %v, want [c1 c2 o1]", got)
	}

	short := startJavaTxn(t, ctx, sc, topic, "jtx-short", "transaction.timeout.ms=2000")
	short.must("begin", "send t1")
	hwm, lso := txnEnds(t, ctx, cl, topic, 0)
	if hwm != 8 || lso != 7 {
		t.Fatalf("abandoned transaction: high watermark %d, LSO %d; want 8, 7", hwm, lso)
	}
	txnWaitLSO(t, ctx, cl, topic, 0, 9)
	if a := short.do("commit"); !strings.HasPrefix(a, "error ") {
		t.Fatalf("the timed-out producer's commit: %s", a)
	}
	if got := javaReadCommitted(t, ctx, sc, topic); !slices.Equal(got, []string{"c1", "c2", "o1"}) {
		t.Fatalf("read_committed after the timeout: %v, want [c1 c2 o1]", got)
	}
}
