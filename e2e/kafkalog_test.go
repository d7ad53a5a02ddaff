package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-sidecar/sidecar/internal/batchtest"
	"github.com/diskless-sidecar/sidecar/internal/history"
	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
)

// TestKafkaLog runs sidecars with diskless.metadata.log=kafka on the
// package's shared 3-broker Apache Kafka 4.4 (sharedKafka), each subtest on
// a metadata topic of its own (RF 3, min.insync.replicas 2), and checks
// with internal/history what the clients were promised. (The end-to-end
// runs — kgo, kcat, SIGKILL durability, S3 — run on this backend too:
// forEachBackend.)
//
//   - NewSidecarAfterSIGKILL: a sidecar on S3 SIGKILLed mid-load; a new
//     process with an empty data.dir on another port (same bucket, same
//     Kafka) serves every acknowledged record exactly once.
//   - Zombie: the sidecar frozen (SIGSTOP) mid-load while a new one takes
//     its shards over and serves another producer, then resumed
//     (SIGCONT): its in-flight commit is fenced, its producer's records
//     fail with NOT_LEADER_OR_FOLLOWER (retriable) and it answers that to
//     every produce; nothing acknowledged is lost, duplicated, or
//     assigned an offset twice.
func TestKafkaLog(t *testing.T) {
	t.Parallel()
	c := sharedKafka(t)
	st := StartS3(t)
	t.Run("NewSidecarAfterSIGKILL", func(t *testing.T) {
		testNewSidecarAfterSIGKILL(t, func() *Sidecar { return StartSidecarS3(t, st, "", kafkaLogCommitFast(c, "meta-sigkill")...) })
	})
	t.Run("Zombie", func(t *testing.T) {
		testZombie(t, func() *Sidecar { return StartSidecarS3(t, st, "", kafkaLogCommitFast(c, "meta-zombie")...) })
	})
}

// TestKafkaLogBrokerKill SIGKILLs the broker of the shared Kafka leading
// the metadata partition of a sidecar with diskless.metadata.log=kafka,
// under load: produce pauses, then resumes on the new leader; nothing
// acknowledged is lost or duplicated. Not parallel: the package's other
// tests use that Kafka (harness_test.go).
func TestKafkaLogBrokerKill(t *testing.T) {
	c := sharedKafka(t)
	balanceSharedKafkaAfter(t, c)
	testMetadataLeaderKill(t, c, "meta-broker-kill", StartSidecar(t, "", kafkaLogCommitFast(c, "meta-broker-kill")...))
}

// kafkaLogCommitFast is kafkaLogOn with a 50 ms commit interval.
func kafkaLogCommitFast(c *kafkatest.Cluster, topic string) []string {
	return append(kafkaLogOn(c, topic), "diskless.append.commit.interval.ms=50")
}

// hproducer produces unique values ("<name>-<n>") round-robin over the
// partitions of a topic, recording every send, acknowledgement and
// failure in a history.History.
type hproducer struct {
	name       string
	topic      string
	partitions int32
	h          *history.History
	cl         *kgo.Client
	acked      atomic.Int64
	mu         sync.Mutex
	errs       map[string]int // failures by message
	ackTimes   []time.Time    // when each acknowledgement arrived
	stop       chan struct{}
	done       chan struct{}
}

// startProducer starts producing through sc until stopProducing.
func startProducer(ctx context.Context, sc *Sidecar, h *history.History, name, topic string, partitions int32, opts ...kgo.Opt) *hproducer {
	p := &hproducer{name: name, topic: topic, partitions: partitions, h: h, errs: make(map[string]int),
		stop: make(chan struct{}), done: make(chan struct{})}
	p.cl = sc.Client(append([]kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(2 * time.Millisecond)}, opts...)...)
	pctx, cancel := context.WithCancel(ctx)
	go func() {
		<-p.stop
		cancel()
	}()
	go func() {
		defer close(p.done)
		var wg sync.WaitGroup
		for i := 0; pctx.Err() == nil; i++ {
			r := &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Value: fmt.Appendf(nil, "%s-%08d", name, i)}
			h.Send(name, history.Partition{Topic: topic, Partition: r.Partition}, string(r.Value))
			wg.Add(1)
			p.cl.Produce(pctx, r, func(r *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					h.Fail(string(r.Value), err)
					p.mu.Lock()
					p.errs[err.Error()]++
					p.mu.Unlock()
					return
				}
				h.Ack(string(r.Value), r.Offset)
				p.acked.Add(1)
				p.mu.Lock()
				p.ackTimes = append(p.ackTimes, time.Now())
				p.mu.Unlock()
			})
		}
		p.cl.Close() // fails whatever is still buffered
		wg.Wait()
	}()
	return p
}

// stopProducing stops producing and waits for every record's answer.
func (p *hproducer) stopProducing() {
	close(p.stop)
	<-p.done
}

// waitAcked waits until n records are acknowledged in all, failing t at
// ctx's deadline.
func (p *hproducer) waitAcked(t *testing.T, ctx context.Context, n int64) {
	t.Helper()
	for p.acked.Load() < n {
		if ctx.Err() != nil {
			t.Fatalf("%s: %d records acknowledged, waiting for %d; failures: %v", p.name, p.acked.Load(), n, p.failures())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// longestGap is the longest time without an acknowledgement since from.
func (p *hproducer) longestGap(from time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var gap time.Duration
	prev := from
	for _, at := range p.ackTimes {
		if at.Before(from) {
			continue
		}
		gap = max(gap, at.Sub(prev))
		prev = at
	}
	return gap
}

func (p *hproducer) failures() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.errs))
	for k, v := range p.errs {
		out[k] = v
	}
	return out
}

// finalRead reads every partition of topic through sc from its log start
// offset to its high watermark into h, then checks h, failing t on any
// violation.
func finalRead(t *testing.T, ctx context.Context, sc *Sidecar, topic string, partitions int32, h *history.History) {
	t.Helper()
	adm := kadm.NewClient(sc.Client())
	starts, err := adm.ListStartOffsets(ctx, topic)
	mustNoErr(t, "ListStartOffsets", err)
	ends, err := adm.ListEndOffsets(ctx, topic)
	mustNoErr(t, "ListEndOffsets", err)
	offsets := make(map[int32]kgo.Offset)
	start, end := make(map[int32]int64), make(map[int32]int64)
	total := int64(0)
	for p := range partitions {
		s, ok1 := starts.Lookup(topic, p)
		e, ok2 := ends.Lookup(topic, p)
		if !ok1 || !ok2 || s.Err != nil || e.Err != nil {
			t.Fatalf("offsets of %s/%d: %+v %+v", topic, p, s, e)
		}
		start[p], end[p] = s.Offset, e.Offset
		offsets[p] = kgo.NewOffset().At(s.Offset)
		total += e.Offset - s.Offset
	}
	entries := make(map[int32][]history.Entry)
	cons := sc.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}), kgo.FetchMaxWait(500*time.Millisecond))
	for seen := int64(0); seen < total; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("final read: %d of %d records before the deadline", seen, total)
		}
		for _, e := range fs.Errors() {
			t.Fatalf("final read: fetch error on %s/%d: %v", e.Topic, e.Partition, e.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < end[r.Partition] {
				entries[r.Partition] = append(entries[r.Partition], history.Entry{Offset: r.Offset, Value: string(r.Value)})
				seen++
			}
		})
	}
	for p := range partitions {
		h.Final(history.Partition{Topic: topic, Partition: p}, start[p], entries[p])
	}
	checkHistory(t, h, fmt.Sprintf("%d records in the final log", total))
}

// checkHistory checks h, failing t on any violation, and logs its counts
// and what.
func checkHistory(t *testing.T, h *history.History, what string) {
	t.Helper()
	vs := h.Check()
	for _, v := range vs {
		t.Error(v)
	}
	t.Logf("history: %+v; %s", h.Counts(), what)
	if len(vs) > 0 {
		t.FailNow()
	}
}

// finalReadCommitted is finalRead with read_committed (history's committed
// view, SPEC §15): it reads every partition of topic through sc from its
// log start offset until it has read the record at last[p] in partition p
// — a record written after everything else, so that the view is whole —
// into h, then checks h, failing t on any violation.
func finalReadCommitted(t *testing.T, ctx context.Context, sc *Sidecar, topic string, last map[int32]string, h *history.History) {
	t.Helper()
	starts, err := kadm.NewClient(sc.Client()).ListStartOffsets(ctx, topic)
	mustNoErr(t, "ListStartOffsets", err)
	offsets := make(map[int32]kgo.Offset)
	start := make(map[int32]int64)
	for p := range last {
		s, ok := starts.Lookup(topic, p)
		if !ok || s.Err != nil {
			t.Fatalf("log start offset of %s/%d: %+v", topic, p, s)
		}
		start[p], offsets[p] = s.Offset, kgo.NewOffset().At(s.Offset)
	}
	entries := make(map[int32][]history.Entry)
	cons := sc.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(500*time.Millisecond))
	total := 0
	for done := 0; done < len(last); {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("final read_committed read: %d of %d partitions read to their last record before the deadline", done, len(last))
		}
		for _, e := range fs.Errors() {
			t.Fatalf("final read_committed read: fetch error on %s/%d: %v", e.Topic, e.Partition, e.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			entries[r.Partition] = append(entries[r.Partition], history.Entry{Offset: r.Offset, Value: string(r.Value)})
			total++
			if string(r.Value) == last[r.Partition] {
				done++
			}
		})
	}
	for p := range last {
		h.FinalCommitted(history.Partition{Topic: topic, Partition: p}, start[p], entries[p])
	}
	checkHistory(t, h, fmt.Sprintf("%d records in the final read_committed view", total))
}

// testNewSidecarAfterSIGKILL: SIGKILL mid-load, then a new process with an
// empty data.dir (start gives each a fresh one and a free port).
func testNewSidecarAfterSIGKILL(t *testing.T, start func() *Sidecar) {
	const partitions = 4
	ctx := testCtx(t, 8*time.Minute)
	sc := start()
	topic := "kafkalog-sigkill"
	createTopic(t, ctx, sc, topic, partitions, nil)
	h := history.New()
	p := startProducer(ctx, sc, h, "p1", topic, partitions, kgo.RecordDeliveryTimeout(10*time.Second))
	p.waitAcked(t, ctx, 5_000)
	sc.Kill()
	p.stopProducing()

	sc2 := start()
	if sc2.DataDir == sc.DataDir || sc2.Addr == sc.Addr {
		t.Fatalf("the new sidecar reuses the old one's data.dir or address: %s %s", sc2.DataDir, sc2.Addr)
	}
	// The new sidecar serves the topic and takes new records too.
	p2 := startProducer(ctx, sc2, h, "p2", topic, partitions)
	p2.waitAcked(t, ctx, 1_000)
	p2.stopProducing()
	finalRead(t, ctx, sc2, topic, partitions, h)
}

// signal sends sig to the sidecar's process.
func (s *Sidecar) signal(sig syscall.Signal) {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatal(err)
	}
}

// testZombie: the old sidecar frozen while a new one takes over.
func testZombie(t *testing.T, start func() *Sidecar) {
	const partitions = 4
	ctx := testCtx(t, 8*time.Minute)
	old := start()
	topic := "kafkalog-zombie"
	createTopic(t, ctx, old, topic, partitions, nil)
	h := history.New()
	// p1 gives a record up after 3 retries, so that a record answered
	// NOT_LEADER_OR_FOLLOWER again and again fails with that error (kgo
	// reports only a timeout for a record that outlives its delivery
	// timeout).
	p1 := startProducer(ctx, old, h, "p1", topic, partitions, kgo.RecordDeliveryTimeout(time.Minute), kgo.RecordRetries(3))
	p1.waitAcked(t, ctx, 3_000)
	old.signal(syscall.SIGSTOP)
	frozenAt := p1.acked.Load()

	// The new sidecar takes every shard over while the old one is frozen
	// with produce requests (and so a commit) in flight.
	sc2 := start()
	p2 := startProducer(ctx, sc2, h, "p2", topic, partitions)
	p2.waitAcked(t, ctx, 1_000)

	old.signal(syscall.SIGCONT)
	// The old sidecar finds out at its next commit: it must not acknowledge
	// anything after that, and its producer's records fail with the
	// retriable error.
	deadline := time.Now().Add(3 * time.Minute)
	for !strings.Contains(old.Logs(), "shard fenced") {
		if time.Now().After(deadline) {
			t.Fatalf("the resumed sidecar never found out it was fenced; p1 acknowledged %d (%d when frozen)", p1.acked.Load(), frozenAt)
		}
		time.Sleep(50 * time.Millisecond)
	}
	p2.waitAcked(t, ctx, p2.acked.Load()+1_000) // the new owner goes on serving meanwhile
	// Every produce the old sidecar answers now is NOT_LEADER_OR_FOLLOWER.
	probes := make([][]byte, partitions)
	for i := range probes {
		probes[i] = batchtest.Make(batchtest.Plain(time.Now().UnixMilli()), batchtest.Values(fmt.Sprint("probe-", i), 1)...)
	}
	for part, r := range produceRaw(t, old.DialRaw(), topic, probes...) {
		if r.ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("produce to the fenced sidecar, partition %d: %v, want NOT_LEADER_OR_FOLLOWER", part, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	if code, body := healthz(t, old); code != http.StatusServiceUnavailable || !strings.Contains(body, "shard 0 fenced") {
		t.Fatalf("/healthz of the fenced sidecar: %d %q, want 503 naming the fencing", code, body)
	}
	// p1's records, retried on NOT_LEADER_OR_FOLLOWER (kgo refreshes its
	// metadata, which names the same sidecar), fail with it.
	notLeader := func() int {
		n := 0
		for msg, k := range p1.failures() {
			if strings.Contains(msg, kerr.NotLeaderForPartition.Message) {
				n += k
			}
		}
		return n
	}
	for notLeader() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no record of the fenced sidecar's producer failed with NOT_LEADER_OR_FOLLOWER: %v", p1.failures())
		}
		time.Sleep(100 * time.Millisecond)
	}
	p1.stopProducing()
	p2.stopProducing()
	t.Logf("p1 (old sidecar): %d acknowledged (%d when it was frozen), failures %v", p1.acked.Load(), frozenAt, p1.failures())
	finalRead(t, ctx, sc2, topic, partitions, h)
}

// healthz returns the sidecar's /healthz status and body.
func healthz(t *testing.T, sc *Sidecar) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + sc.HTTP + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// testMetadataLeaderKill: the leader of the metadata partition SIGKILLed
// under load, then started again.
func testMetadataLeaderKill(t *testing.T, c *kafkatest.Cluster, metaTopic string, sc *Sidecar) {
	const partitions = 4
	ctx := testCtx(t, 8*time.Minute)
	topic := "kafkalog-broker-kill"
	createTopic(t, ctx, sc, topic, partitions, nil)
	h := history.New()
	p := startProducer(ctx, sc, h, "p1", topic, partitions, kgo.RecordDeliveryTimeout(2*time.Minute))
	p.waitAcked(t, ctx, 3_000)

	kcl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.BootstrapServers(), ",")...))
	mustNoErr(t, "kafka client", err)
	defer kcl.Close()
	md, err := kadm.NewClient(kcl).Metadata(ctx, metaTopic)
	mustNoErr(t, "Metadata", err)
	leader := md.Topics[metaTopic].Partitions[0].Leader
	if leader < 0 {
		t.Fatalf("metadata partition without a leader: %+v", md.Topics[metaTopic])
	}
	atKill := p.acked.Load()
	killedAt := time.Now()
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	// Kafka elects a new leader once the controller notices (the
	// harness's broker session timeout, 4 s) ...
	for {
		md, err := kadm.NewClient(kcl).Metadata(ctx, metaTopic)
		mustNoErr(t, "Metadata", err)
		if l := md.Topics[metaTopic].Partitions[0].Leader; l >= 0 && l != leader {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("no new leader of the metadata partition")
		}
		time.Sleep(100 * time.Millisecond)
	}
	elected, atElection := time.Since(killedAt), p.acked.Load()
	// ... and produce resumes: the metadata log's producers write to it.
	p.waitAcked(t, ctx, atElection+3_000)
	t.Logf("broker %d (metadata leader) SIGKILLed at %d acknowledged; new leader after %v (%d acknowledged); 3000 more %v after the kill; longest gap between acknowledgements %v",
		leader, atKill, elected.Round(time.Millisecond), atElection, time.Since(killedAt).Round(time.Millisecond),
		p.longestGap(killedAt).Round(time.Millisecond))
	p.stopProducing()
	if errs := p.failures(); len(errs) > 0 {
		t.Logf("records not acknowledged: %v", errs)
	}
	finalRead(t, ctx, sc, topic, partitions, h)
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	if !sc.Alive() {
		t.Fatal("the sidecar exited")
	}
}
