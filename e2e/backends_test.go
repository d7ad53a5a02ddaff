package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
)

// metaBackend is a coordinator metadata log (diskless.metadata.log) the
// end-to-end scenarios run on.
type metaBackend struct {
	name string
	// sets returns the sidecar's config keys selecting it.
	sets func(t *testing.T) []string
}

// metaBackends are both backends: the embedded file log, and a metadata
// topic of its own per test on the package's shared 3-broker Apache Kafka
// (sharedKafka).
var metaBackends = []metaBackend{
	{"embedded", func(*testing.T) []string { return nil }},
	{"kafka", kafkaLogSets},
}

// forEachBackend runs fn as a subtest per metadata-log backend, with the
// config keys that select it.
func forEachBackend(t *testing.T, fn func(t *testing.T, sets []string)) {
	for _, b := range metaBackends {
		t.Run(b.name, func(t *testing.T) { fn(t, b.sets(t)) })
	}
}

// shared is the package's Apache Kafka cluster: started by the first test
// that needs one, shared by every later one (their metadata topics and
// topics have names of their own), stopped by TestMain after the last.
var shared struct {
	once sync.Once
	c    *kafkatest.Cluster
	err  error
}

// sharedKafka returns the package's 3-broker Apache Kafka 4.4, starting it
// the first time (skipping or failing t as kafkatest.Require does).
func sharedKafka(t *testing.T) *kafkatest.Cluster {
	t.Helper()
	skipIfShort(t)
	kafkatest.Require(t)
	shared.once.Do(func() {
		t0 := time.Now()
		// The cluster logs to t while it starts, to stderr afterwards:
		// it outlives t (a log to t after t ended panics).
		var started atomic.Bool
		logf := func(format string, args ...any) {
			if !started.Load() {
				t.Logf(format, args...)
				return
			}
			fmt.Fprintf(os.Stderr, "e2e: shared Kafka: "+format+"\n", args...)
		}
		// Three JVMs starting on a machine running the rest of the suite
		// may take well over the harness's default 2 minutes.
		shared.c, shared.err = kafkatest.StartShared(kafkatest.Options{Brokers: 3, StartTimeout: 6 * time.Minute,
			// TestClusterCoordinatorFailover runs the sidecars' group
			// with a session timeout shorter than Kafka's 6 s floor.
			BrokerConfig: map[string]string{"group.min.session.timeout.ms": "1000"}}, logf)
		started.Store(true)
		t.Logf("the package's Apache Kafka cluster started in %v", time.Since(t0).Round(time.Millisecond))
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.c
}

// stopSharedKafka stops the shared cluster, if one was started, keeping
// its directory when failed.
func stopSharedKafka(failed bool) {
	if shared.c == nil {
		return
	}
	if failed {
		fmt.Fprintf(os.Stderr, "e2e: keeping the shared Kafka cluster's directory %s\n", shared.c.Dir())
	}
	if err := shared.c.Close(failed); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

// balanceSharedKafkaAfter gives every partition of the shared Kafka back to
// its preferred replica when t ends, as Kafka's automatic rebalance would
// at some moment up to leader.imbalance.check.interval.seconds (300 s)
// later: a test that SIGKILLs or restarts a broker calls it first, so the
// parallel tests that start after it (harness_test.go) do not see
// leaderships — metadata partitions, group coordinators — move under them.
// Best effort: a failed election is logged, not a failure.
func balanceSharedKafkaAfter(t *testing.T, c *kafkatest.Cluster) {
	t.Cleanup(func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.BootstrapServers(), ",")...))
		if err != nil {
			t.Logf("preferred leader election on the shared Kafka: %v", err)
			return
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := kadm.NewClient(cl).ElectLeaders(ctx, kadm.ElectPreferredReplica, nil); err != nil {
			t.Logf("preferred leader election on the shared Kafka: %v", err)
		}
	})
}

// metaTopics numbers the metadata topics of the shared cluster.
var metaTopics atomic.Int64

// kafkaLogSets selects diskless.metadata.log=kafka on the shared cluster,
// with a metadata topic no other test uses.
func kafkaLogSets(t *testing.T) []string {
	c := sharedKafka(t)
	return kafkaLogOn(c, fmt.Sprintf("meta-%d", metaTopics.Add(1)))
}

// kafkaLogOn selects diskless.metadata.log=kafka on c with metadata topic
// topic.
func kafkaLogOn(c *kafkatest.Cluster, topic string) []string {
	return []string{
		"diskless.metadata.log=kafka",
		"diskless.metadata.kafka.bootstrap.servers=" + c.BootstrapServers(),
		"diskless.metadata.topic=" + topic,
	}
}
