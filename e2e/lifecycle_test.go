package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
	"github.com/diskless-sidecar/sidecar/internal/s3fault"
)

// tool runs a Kafka 4.4 CLI tool against the sidecar and returns its
// output, failing the test on an error.
func tool(t *testing.T, ctx context.Context, sc *Sidecar, name string, args ...string) string {
	t.Helper()
	out, errOut, err := kafkatest.Tool(ctx, name, append([]string{"--bootstrap-server", sc.Addr}, args...)...)
	if err != nil {
		t.Fatalf("%s %v: %v\nstdout: %s\nstderr: %s", name, args, err, out, errOut)
	}
	return out
}

// topicState is a topic as /v1/topics shows it.
type topicState struct {
	Name       string            `json:"name"`
	ID         string            `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs"`
	State      string            `json:"state"`
	Epoch      int32             `json:"epoch"`
	Policy     string            `json:"policy"`
}

func httpTopic(t *testing.T, sc *Sidecar, name string) (topicState, bool) {
	t.Helper()
	resp, err := http.Get("http://" + sc.HTTP + "/v1/topics")
	mustNoErr(t, "GET /v1/topics", err)
	defer resp.Body.Close()
	var ts []topicState
	mustNoErr(t, "decode /v1/topics", json.NewDecoder(resp.Body).Decode(&ts))
	for _, x := range ts {
		if x.Name == name {
			return x, true
		}
	}
	return topicState{}, false
}

// waitState waits until /v1/topics shows the topic in state.
func waitState(t *testing.T, sc *Sidecar, name, state string, within time.Duration) topicState {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		x, _ := httpTopic(t, sc, name)
		if x.State == state {
			return x
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic %s: state %q after %v, want %s", name, x.State, within, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTopicLifecycleKafkaTools drives the topic lifecycle with Kafka 4.4's
// own tools against the sidecar: kafka-topics creates a topic of 8
// partitions and grows it to 16, which take records; kafka-configs sets
// retention.ms and retention applies; kafka-configs and DescribeConfigs
// show it; kafka-log-dirs lists each partition's diskless size;
// kafka-topics deletes the topic, which leaves Metadata, and kadm creates
// it again under a new id, empty.
func TestTopicLifecycleKafkaTools(t *testing.T) {
	t.Parallel()
	kafkatest.Require(t)
	sc := StartSidecar(t, "", "diskless.retention.check.interval.ms=200")
	ctx := testCtx(t, 4*time.Minute)
	const topic = "life"
	tool(t, ctx, sc, "kafka-topics", "--create", "--topic", topic, "--partitions", "8", "--replication-factor", "3")
	adm := kadm.NewClient(sc.Client())
	prod := sc.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceTo := func(parts int32, each int) {
		t.Helper()
		for p := range parts {
			for i := range each {
				r := &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "p%d-%d", p, i)}
				mustNoErr(t, "produce", prod.ProduceSync(ctx, r).FirstErr())
			}
		}
	}
	produceTo(8, 3)
	details, err := adm.ListTopics(ctx, topic)
	mustNoErr(t, "ListTopics", err)
	oldID := details[topic].ID

	tool(t, ctx, sc, "kafka-topics", "--alter", "--topic", topic, "--partitions", "16")
	out := tool(t, ctx, sc, "kafka-topics", "--describe", "--topic", topic)
	if !strings.Contains(out, "PartitionCount: 16") {
		t.Fatalf("kafka-topics --describe after the alter:\n%s", out)
	}
	prod.ForceMetadataRefresh()
	produceTo(16, 2)
	ends, err := adm.ListEndOffsets(ctx, topic)
	mustNoErr(t, "ListEndOffsets", err)
	for p := range int32(16) {
		want := int64(2)
		if p < 8 {
			want = 5
		}
		if o, _ := ends.Lookup(topic, p); o.Offset != want {
			t.Fatalf("partition %d ends at %d, want %d", p, o.Offset, want)
		}
	}

	out = tool(t, ctx, sc, "kafka-log-dirs", "--describe", "--topic-list", topic)
	if !strings.Contains(out, `"partition":"life-15"`) || !strings.Contains(out, `"partition":"life-0","size":`) {
		t.Fatalf("kafka-log-dirs:\n%s", out)
	}
	if strings.Contains(out, `"partition":"life-0","size":0`) {
		t.Fatalf("kafka-log-dirs reports no bytes for a partition with records:\n%s", out)
	}

	tool(t, ctx, sc, "kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", topic, "--add-config", "retention.ms=1000")
	out = tool(t, ctx, sc, "kafka-configs", "--describe", "--entity-type", "topics", "--entity-name", topic)
	if !strings.Contains(out, "retention.ms=1000") {
		t.Fatalf("kafka-configs --describe:\n%s", out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		starts, err := adm.ListStartOffsets(ctx, topic)
		mustNoErr(t, "ListStartOffsets", err)
		if o, _ := starts.Lookup(topic, 0); o.Offset == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("retention.ms=1000 set by kafka-configs did not apply: %+v", starts)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, errOut, err := kafkatest.Tool(ctx, "kafka-configs", "--bootstrap-server", sc.Addr, "--alter", "--entity-type", "topics",
		"--entity-name", topic, "--add-config", "retention.ms=soon")
	if err == nil || !strings.Contains(errOut, "retention.ms") {
		t.Fatalf("a bad value: err %v, stderr %s", err, errOut)
	}

	tool(t, ctx, sc, "kafka-topics", "--delete", "--topic", topic)
	out = tool(t, ctx, sc, "kafka-topics", "--list")
	if strings.Contains(out, topic) {
		t.Fatalf("kafka-topics --list after the delete:\n%s", out)
	}
	resp, err := adm.CreateTopic(ctx, 2, 1, nil, topic)
	mustNoErr(t, "re-create", err)
	mustNoErr(t, "re-create", resp.Err)
	if resp.ID == oldID {
		t.Fatal("re-created topic has the old id")
	}
	// A new client: adm's may still map the deleted topic's 16
	// partitions, and ask for partitions the new one does not have.
	ends, err = kadm.NewClient(sc.Client()).ListEndOffsets(ctx, topic)
	mustNoErr(t, "ListEndOffsets", err)
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset != 0 {
			t.Fatalf("re-created topic not empty: %+v", o)
		}
	})
}

// TestDisablementWithClients disables diskless on a topic with each policy
// while a producer and a consumer run, then re-enables it: DISABLING, then
// DISABLED, then ENABLED at a new epoch (DescribeConfigs and /v1/topics);
// the producer gets POLICY_VIOLATION naming the reason once DISABLED;
// retain keeps every acknowledged record readable, delete moves every log
// start to the high watermark and, with diskless.file.deletion.delay.ms
// at 1 s, leaves no object in the store (the sidecar has no other topic);
// a repeated disable changes nothing; after
// re-enabling, writes are accepted and continue from the high watermark.
func TestDisablementWithClients(t *testing.T) {
	t.Parallel()
	kafkatest.Require(t)
	for _, policy := range []string{"retain", "delete"} {
		t.Run(policy, func(t *testing.T) {
			sc := StartSidecar(t, "", "diskless.file.deletion.delay.ms=1000")
			ctx := testCtx(t, 4*time.Minute)
			topic := "dis-" + policy
			createTopic(t, ctx, sc, topic, 2, nil)
			adm := kadm.NewClient(sc.Client())

			var (
				mu       sync.Mutex
				acked    = map[string]bool{}
				prodErrs []error
				consumed = map[string]bool{}
			)
			prod := sc.Client(kgo.DefaultProduceTopic(topic), kgo.RecordDeliveryTimeout(20*time.Second))
			pctx, stopProd := context.WithCancel(ctx)
			var wg sync.WaitGroup
			wg.Go(func() {
				for i := 0; pctx.Err() == nil; i++ {
					v := fmt.Sprintf("v%d", i)
					err := prod.ProduceSync(pctx, &kgo.Record{Value: []byte(v)}).FirstErr()
					mu.Lock()
					if err == nil {
						acked[v] = true
					} else if pctx.Err() == nil {
						prodErrs = append(prodErrs, err)
					}
					mu.Unlock()
					if err != nil {
						time.Sleep(50 * time.Millisecond)
					}
				}
			})
			cons := sc.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			cctx, stopCons := context.WithCancel(ctx)
			wg.Go(func() {
				for cctx.Err() == nil {
					fs := cons.PollFetches(cctx)
					mu.Lock()
					fs.EachRecord(func(r *kgo.Record) { consumed[string(r.Value)] = true })
					mu.Unlock()
				}
			})
			waitFor := func(what string, ok func() bool) {
				t.Helper()
				deadline := time.Now().Add(60 * time.Second)
				for !ok() {
					if time.Now().After(deadline) {
						t.Fatalf("timed out waiting for %s", what)
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			waitFor("acknowledged records", func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= 20 })

			tool(t, ctx, sc, "kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", topic,
				"--add-config", "diskless.enable=false,diskless.disable.policy="+policy)
			first, _ := httpTopic(t, sc, topic)
			if first.State != "DISABLING" && first.State != "DISABLED" || first.Epoch != 1 {
				t.Fatalf("right after the alter: %+v", first)
			}
			t.Logf("state right after the alter: %s", first.State)
			st := waitState(t, sc, topic, "DISABLED", 30*time.Second)
			if st.Epoch != 1 || st.Policy != policy {
				t.Fatalf("DISABLED: %+v", st)
			}
			out := tool(t, ctx, sc, "kafka-configs", "--describe", "--entity-type", "topics", "--entity-name", topic)
			if !strings.Contains(out, "diskless.state=DISABLED") || !strings.Contains(out, "diskless.state.epoch=1") {
				t.Fatalf("kafka-configs --describe:\n%s", out)
			}
			// A produce now fails at once with the non-retriable error.
			err := sc.Client(kgo.DefaultProduceTopic(topic)).ProduceSync(ctx, &kgo.Record{Value: []byte("late")}).FirstErr()
			if !errors.Is(err, kerr.PolicyViolation) {
				t.Fatalf("produce to a DISABLED topic: %v", err)
			}
			stopProd()
			mu.Lock()
			for _, e := range prodErrs {
				if !errors.Is(e, kerr.PolicyViolation) && !errors.Is(e, kerr.NotEnoughReplicas) && !errors.Is(e, context.Canceled) {
					t.Errorf("producer error other than the ones specified: %v", e)
				}
			}
			mu.Unlock()

			starts, err := adm.ListStartOffsets(ctx, topic)
			mustNoErr(t, "ListStartOffsets", err)
			ends, err := adm.ListEndOffsets(ctx, topic)
			mustNoErr(t, "ListEndOffsets", err)
			hwm := map[int32]int64{}
			ends.Each(func(o kadm.ListedOffset) { hwm[o.Partition] = o.Offset })
			if policy == "retain" {
				waitFor("every acknowledged record consumed", func() bool {
					mu.Lock()
					defer mu.Unlock()
					for v := range acked {
						if !consumed[v] {
							return false
						}
					}
					return true
				})
			} else {
				starts.Each(func(o kadm.ListedOffset) {
					if o.Offset != hwm[o.Partition] {
						t.Fatalf("delete policy: partition %d starts at %d, high watermark %d", o.Partition, o.Offset, hwm[o.Partition])
					}
				})
				deadline := time.Now().Add(90 * time.Second)
				for left := localObjects(t, sc); len(left) > 0; left = localObjects(t, sc) {
					if time.Now().After(deadline) {
						t.Fatalf("delete policy: %d objects left after 90 s: %v", len(left), left)
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			// A repeated disable of a DISABLED topic changes nothing.
			tool(t, ctx, sc, "kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", topic, "--add-config", "diskless.enable=false")
			if again, _ := httpTopic(t, sc, topic); again.State != "DISABLED" || again.Epoch != 1 {
				t.Fatalf("after a repeated disable: %+v", again)
			}

			tool(t, ctx, sc, "kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", topic, "--add-config", "diskless.enable=true")
			if en, _ := httpTopic(t, sc, topic); en.State != "ENABLED" || en.Epoch != 2 {
				t.Fatalf("after re-enabling: %+v", en)
			}
			fresh := sc.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			r := &kgo.Record{Partition: 0, Value: []byte("after")}
			mustNoErr(t, "produce after re-enabling", fresh.ProduceSync(ctx, r).FirstErr())
			if r.Offset != hwm[0] {
				t.Fatalf("first offset after re-enabling %d, want the high watermark %d", r.Offset, hwm[0])
			}
			waitFor("the record produced after re-enabling consumed", func() bool { mu.Lock(); defer mu.Unlock(); return consumed["after"] })
			stopCons()
			wg.Wait()
		})
	}
}

// TestDisablementSurvivesSIGKILL: a sidecar SIGKILLed while a topic is
// DISABLING finishes the disablement by itself after the restart.
// DISABLING is held open by a real mechanism, not a time window: the
// produce path holds an accepted batch whose object's upload the S3 proxy
// stalls (every PutObject), and the confirmation waits for it.
func TestDisablementSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	kafkatest.Require(t)
	s3 := StartS3(t)
	dir := t.TempDir()
	sc := StartSidecarS3(t, s3, dir)
	ctx := testCtx(t, 3*time.Minute)
	const topic = "killed"
	createTopic(t, ctx, sc, topic, 1, nil)
	s3.Proxy.Add(&s3fault.Rule{Kind: s3fault.PutObject, Fault: s3fault.Stall()})
	puts := s3.Proxy.Count(s3fault.PutObject)
	prod := sc.Client(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	prod.Produce(ctx, &kgo.Record{Value: []byte("pending")}, nil) // its upload stalls
	waitUntil(t, 60*time.Second, "the pending batch's upload", func() bool { return s3.Proxy.Count(s3fault.PutObject) > puts })
	tool(t, ctx, sc, "kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", topic,
		"--add-config", "diskless.enable=false,diskless.disable.policy=delete")
	if st, _ := httpTopic(t, sc, topic); st.State != "DISABLING" {
		t.Fatalf("before the kill: %+v, want DISABLING", st)
	}
	sc.Kill()
	s3.Proxy.Clear()
	sc2 := StartSidecarS3(t, s3, dir)
	if !strings.Contains(sc2.Logs(), "resuming the disablement") {
		t.Fatalf("the restarted sidecar did not resume the disablement:\n%s", sc2.Logs())
	}
	st := waitState(t, sc2, topic, "DISABLED", 30*time.Second)
	if st.Epoch != 1 || st.Policy != "delete" {
		t.Fatalf("after the restart: %+v", st)
	}
	adm := kadm.NewClient(sc2.Client())
	starts, err := adm.ListStartOffsets(ctx, topic)
	mustNoErr(t, "ListStartOffsets", err)
	ends, err := adm.ListEndOffsets(ctx, topic)
	mustNoErr(t, "ListEndOffsets", err)
	s, _ := starts.Lookup(topic, 0)
	e, _ := ends.Lookup(topic, 0)
	if s.Offset != e.Offset {
		t.Fatalf("delete policy after the restart: log start %d, high watermark %d", s.Offset, e.Offset)
	}
}
