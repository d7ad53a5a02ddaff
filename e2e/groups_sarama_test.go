package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
)

// saramaHandler counts the values it consumes and marks each message.
type saramaHandler struct {
	mu   sync.Mutex
	seen map[string]int
}

func (*saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (*saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		h.mu.Lock()
		h.seen[string(m.Value)]++
		h.mu.Unlock()
		sess.MarkMessage(m, "")
	}
	return nil
}

func (h *saramaHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.seen)
}

// TestGroupsSarama: a Sarama ConsumerGroup (its default protocol version)
// consumes a topic to the end, every record once, and its commits on
// Close are the end offsets.
func TestGroupsSarama(t *testing.T) {
	t.Parallel()
	const partitions, n = 4, 1000
	ctx := testCtx(t, 3*time.Minute)
	sc := StartSidecar(t, "", groupSidecarSets...)
	topic, group := "sarama", "g-sarama"
	createTopic(t, ctx, sc, topic, partitions, nil)
	want := produceValues(t, ctx, sc, topic, partitions, 0, n)

	cfg := sarama.NewConfig()
	cfg.ClientID = "e2e-sarama"
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Interval = 200 * time.Millisecond
	cg, err := sarama.NewConsumerGroup([]string{sc.Addr}, group, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &saramaHandler{seen: map[string]int{}}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		for cctx.Err() == nil {
			if err := cg.Consume(cctx, []string{topic}, h); err != nil && cctx.Err() == nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	go func() {
		for err := range cg.Errors() {
			t.Logf("sarama: %v", err)
		}
	}()
	waitFor(t, 90*time.Second, "Sarama consuming every record", func() bool { return h.count() >= n })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Consume: %v", err)
	}
	if err := cg.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, v := range want {
		if h.seen[v] != 1 {
			t.Fatalf("record %q consumed %d times", v, h.seen[v])
		}
	}
	adm := kadm.NewClient(sc.Client())
	if ok, why := committedAtEnd(ctx, adm, group, topic, partitions); !ok {
		t.Fatalf("Sarama's commits are not at the end: %s", why)
	}
}
