package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
)

// TestStartWithKafkaLog: with diskless.metadata.log=kafka the sidecar
// starts on a real Kafka (one broker), takes the Kafka cluster's id as its
// own (so that every sidecar of the metadata topic reports and uses the
// same one) and binds data.dir to the metadata log; a topic whose partition
// count is not diskless.metadata.topic.num.partitions, and a replication
// factor the cluster cannot place, stop start-up naming the key; an
// embedded data.dir is refused with the kafka log, naming
// diskless.metadata.log.
func TestStartWithKafkaLog(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.Options{})
	kafka := func(dir string, sets ...string) Config {
		return testConfig(t, append([]string{"data.dir=" + dir, "diskless.metadata.log=kafka",
			"diskless.metadata.kafka.bootstrap.servers=" + c.BootstrapServers(),
			"diskless.metadata.topic.replication.factor=1", "diskless.metadata.topic.num.partitions=2"}, sets...)...)
	}
	dir := t.TempDir()
	startStop(t, kafka(dir), "first start")
	meta, err := os.ReadFile(filepath.Join(dir, "meta.properties"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cluster.id = " + c.ClusterID(), "metadata.log = kafka:__diskless_metadata", "coordinator.shards = 2"} {
		if !strings.Contains(string(meta), want) {
			t.Fatalf("meta.properties lacks %q:\n%s", want, meta)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "coordinator")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the kafka log left an embedded coordinator directory (stat: %v)", err)
	}
	startStop(t, kafka(dir), "restart on the same data.dir")
	startStop(t, kafka(t.TempDir()), "a new data.dir on the same metadata topic")

	for _, tc := range []struct {
		name string
		cfg  Config
		key  string
	}{
		{"another partition count", kafka(t.TempDir(), "diskless.metadata.topic.num.partitions=3"), "diskless.metadata.topic.num.partitions"},
		{"replication factor above the brokers", kafka(t.TempDir(), "diskless.metadata.topic=other", "diskless.metadata.topic.replication.factor=3"), "diskless.metadata.topic.replication.factor"},
		{"an embedded data.dir", func() Config {
			emb := testConfig(t, "diskless.metadata.topic.num.partitions=2")
			startStop(t, emb, "embedded start")
			return kafka(emb.DataDir)
		}(), "diskless.metadata.log"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := start(tc.cfg, quiet)
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Key != tc.key {
				t.Fatalf("start: %v, want a refusal naming %s", err, tc.key)
			}
		})
	}
}
