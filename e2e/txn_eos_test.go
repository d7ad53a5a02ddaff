package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-sidecar/sidecar/internal/history"
)

// eosEnv, when set, makes the test binary an exactly-once member process
// (runEOSMember) instead of running tests: a member the test can SIGKILL
// in the middle of a transaction. Its value is "addr;name;in;out".
const eosEnv = "SIDECAR_E2E_EOS_MEMBER"

// newEOSSession returns a kgo GroupTransactSession of group group,
// transactional id name, reading in with read_committed; addrs are the
// seed brokers, comma-separated.
func newEOSSession(addrs, group, name, in string) (*kgo.GroupTransactSession, error) {
	return kgo.NewGroupTransactSession(
		kgo.SeedBrokers(strings.Split(addrs, ",")...),
		kgo.TransactionalID(name),
		kgo.TransactionTimeout(8*time.Second),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(in),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.SessionTimeout(3*time.Second),
		kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
}

// eosLoop runs sess's consume-transform-produce loop (each input record's
// value copied to the same partition of out, with the consumed offsets,
// in one transaction per poll of at most 100 records) until ctx ends or
// the client is closed, or — when hold is set — until it has committed
// once and then produced a transaction's records: it returns with that
// transaction open and its records written (held), for its caller to die
// with it. An End that fails (kgo could not reach the transaction's
// coordinator: its outcome is unconfirmed) ends the loop with its error
// (endErr): the session's consumed offsets may no longer be the group's,
// so its caller starts a new session (eosRun), as an application must.
func eosLoop(ctx context.Context, sess *kgo.GroupTransactSession, name, out string, hold bool, logf func(string, ...any)) (commits, aborts int, held bool, endErr error) {
	for ctx.Err() == nil {
		fs := sess.PollRecords(ctx, 100)
		if fs.IsClientClosed() {
			return
		}
		if fs.Empty() {
			continue
		}
		if err := sess.Begin(); err != nil {
			logf("%s: Begin: %v", name, err)
			continue
		}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Topic: out, Partition: r.Partition, Value: r.Value}, nil)
		})
		if hold && commits > 0 {
			if err := sess.Client().Flush(ctx); err == nil {
				return commits, aborts, true, nil
			}
		}
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			logf("%s: End: %v", name, err)
			return commits, aborts, false, err
		}
		if committed {
			commits++
		} else {
			aborts++
		}
	}
	return commits, aborts, false, nil
}

// eosRun runs eosLoop on a session from open, and on a new one each time
// an End failed, until ctx ends (or a session holds a transaction open:
// hold). A session whose End failed is closed: it leaves the group, and
// the new one's InitProducerId fences (or waits for) the transaction it
// left, its consumer reading the group's committed offsets once that
// transaction ended (OffsetFetch require_stable, KIP-447).
func eosRun(ctx context.Context, open func() (*kgo.GroupTransactSession, error), name, out string, hold bool, logf func(string, ...any)) (commits, aborts int, held bool) {
	for ctx.Err() == nil {
		sess, err := open()
		if err != nil {
			logf("%s: %v", name, err)
			return commits, aborts, false
		}
		c, a, h, endErr := eosLoop(ctx, sess, name, out, hold, logf)
		commits, aborts = commits+c, aborts+a
		if h {
			return commits, aborts, true // open, for the caller to die with it
		}
		sess.Close()
		if endErr == nil || ctx.Err() != nil {
			break
		}
		logf("%s: a new session after the failed End", name)
	}
	return commits, aborts, false
}

// runEOSMember is the member process: eosLoop with hold set; once it holds
// a transaction open it prints "O <commits> <aborts>" and waits to be
// killed, its client neither closed nor leaving the group.
func runEOSMember() int {
	f := strings.Split(os.Getenv(eosEnv), ";")
	if len(f) != 4 {
		fmt.Fprintln(os.Stderr, "eos member: want addr;name;in;out")
		return 2
	}
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	open := func() (*kgo.GroupTransactSession, error) { return newEOSSession(f[0], "eos", f[1], f[2]) }
	commits, aborts, held := eosRun(context.Background(), open, f[1], f[3], true, logf)
	if !held {
		return 1
	}
	fmt.Printf("O %d %d\n", commits, aborts)
	select {} // until SIGKILLed
}

// startEOSMember starts a member process; held is closed (with its
// commits and aborts in the string) once the member holds a transaction
// open, and the process is SIGKILLed at the end of the test.
func startEOSMember(t *testing.T, addr, name, in, out string) (cmd *exec.Cmd, held <-chan string) {
	t.Helper()
	cmd = exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), eosEnv+"="+strings.Join([]string{addr, name, in, out}, ";"))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	mustNoErr(t, "member's stdout", err)
	mustNoErr(t, "member process", cmd.Start())
	h := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "O ") {
				h <- line
			}
		}
		cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	return cmd, h
}

// TestTransactionsExactlyOnce: kgo's GroupTransactSession copies a topic
// to another between two diskless topics, consume-transform-produce with
// the consumed offsets in each transaction, by two members, one of which —
// a process of its own — is SIGKILLed mid-transaction (its records
// written, left to time out), while the sidecar is SIGKILLed once and
// restarted on its data.dir: the output read with read_committed holds
// every input record exactly once, in input order per partition (SPEC
// §15), which eosReader.check checks with the history checker's committed
// view (package internal/history).
func TestTransactionsExactlyOnce(t *testing.T) {
	t.Parallel()
	const (
		partitions = 4
		n          = 3000
		in, out    = "eos-in", "eos-out"
	)
	ctx := testCtx(t, 5*time.Minute)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	mustNoErr(t, "free port", err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := t.TempDir()
	sets := append(append([]string(nil), groupSidecarSets...), fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d", port))
	sc := StartSidecar(t, dir, sets...)
	addr := sc.Addr
	createTopic(t, ctx, sc, in, partitions, nil)
	createTopic(t, ctx, sc, out, partitions, nil)
	want := produceValues(t, ctx, sc, in, partitions, 0, n)

	output := startEOSReader(t, ctx, out, addr)
	mctx, mcancel := context.WithCancel(ctx)
	defer mcancel()
	var members sync.WaitGroup
	var bKilled atomic.Bool
	members.Go(func() {
		open := func() (*kgo.GroupTransactSession, error) { return newEOSSession(addr, "eos", "eos-a", in) }
		c, a, _ := eosRun(mctx, open, "eos-a", out, false, t.Logf)
		t.Logf("eos-a: %d transactions committed, %d aborted", c, a)
	})
	// eos-b, a process of its own, is SIGKILLed with a transaction open
	// (its records written, no EndTxn, no LeaveGroup): the coordinator
	// aborts it at its timeout, the group gives its partitions to eos-a
	// after its session timeout.
	bProc, bHeld := startEOSMember(t, addr, "eos-b", in, out)
	members.Go(func() {
		select {
		case line := <-bHeld:
			if err := bProc.Process.Kill(); err != nil {
				t.Errorf("SIGKILL eos-b: %v", err)
				return
			}
			bKilled.Store(true)
			t.Logf("eos-b SIGKILLed with a transaction open (%s: commits, aborts before it)", line)
		case <-mctx.Done():
		}
	})

	waitFor(t, 2*time.Minute, "a third of the output", func() bool { return output.read.Load() >= n/3 })
	t.Logf("SIGKILL with %d output records read", output.read.Load())
	sc.Kill()
	sc = StartSidecar(t, dir, sets...)
	if sc.Addr != addr {
		t.Fatalf("restarted on %s, not %s", sc.Addr, addr)
	}
	waitFor(t, 3*time.Minute, "every input record in the output", func() bool { return output.distinct() >= n })
	mcancel()
	members.Wait()
	output.check(t, ctx, sc, partitions, want)
	if !bKilled.Load() {
		t.Error("eos-b was never SIGKILLed with a transaction open")
	}
}

// eosReader reads a transactional output topic with read_committed, as it
// comes, counting each value; its reads are the observations of a
// history (check).
type eosReader struct {
	topic  string
	h      *history.History
	mu     sync.Mutex
	seen   map[string]int
	read   atomic.Int64
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startEOSReader starts reading topic from its start through seeds; the
// reader stops at check, or at the end of the test.
func startEOSReader(t *testing.T, ctx context.Context, topic string, seeds ...string) *eosReader {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	mustNoErr(t, "reader", err)
	r := &eosReader{topic: topic, h: history.New(), seen: map[string]int{}}
	rctx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	r.wg.Go(func() {
		for rctx.Err() == nil {
			cl.PollFetches(rctx).EachRecord(func(rec *kgo.Record) {
				r.h.Observe("reader", history.Partition{Topic: topic, Partition: rec.Partition}, rec.Offset, string(rec.Value))
				r.mu.Lock()
				r.seen[string(rec.Value)]++
				r.mu.Unlock()
				r.read.Add(1)
			})
		}
	})
	t.Cleanup(func() {
		cancel()
		r.wg.Wait()
		cl.Close()
	})
	return r
}

// distinct is how many distinct values were read.
func (r *eosReader) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

// check takes a last look for late duplicates — a plain record, through
// sc, after everything in each of the topic's partitions: once the reader
// has them all (past any transaction the stopped members left open,
// aborted at its timeout), it has read everything committed — and then
// requires every value of want once in the output, and nothing else. It
// then checks the history: the pipeline is a producer that sends each
// value of want (want[i] read from partition i % partitions of the input,
// as produceValues writes them) to the same partition of the output, in
// input order, and commits every one; the reader's reads are its
// observations, and a last read_committed read through sc the final log
// (finalReadCommitted): nothing lost, duplicated or reordered.
func (r *eosReader) check(t *testing.T, ctx context.Context, sc *Sidecar, partitions int, want []string) {
	t.Helper()
	outTP := func(p int32) history.Partition { return history.Partition{Topic: r.topic, Partition: p} }
	for i, v := range want {
		r.h.Send("eos", outTP(int32(i%partitions)), v)
	}
	plain := sc.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	sentinels := make([]string, partitions)
	last := make(map[int32]string)
	for p := range sentinels {
		sentinels[p] = fmt.Sprintf("end-%d", p)
		r.h.Send("plain", outTP(int32(p)), sentinels[p])
		rec, err := plain.ProduceSync(ctx, &kgo.Record{Topic: r.topic, Partition: int32(p), Value: []byte(sentinels[p])}).First()
		mustNoErr(t, "sentinel", err)
		r.h.Ack(sentinels[p], rec.Offset)
		last[int32(p)] = sentinels[p]
	}
	waitFor(t, 2*time.Minute, "the sentinels", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, v := range sentinels {
			if r.seen[v] == 0 {
				return false
			}
		}
		return true
	})
	r.cancel()
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range sentinels {
		delete(r.seen, v)
	}
	for _, v := range want {
		if r.seen[v] != 1 {
			t.Errorf("input %q is in the read_committed output %d times", v, r.seen[v])
		}
	}
	if len(r.seen) != len(want) {
		t.Errorf("%d distinct values in the output, want %d", len(r.seen), len(want))
	}
	r.h.Commit(want...)
	finalReadCommitted(t, ctx, sc, r.topic, last, r.h)
}
