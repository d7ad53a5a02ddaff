package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/cache"
	"github.com/diskless-sidecar/sidecar/commit"
	"github.com/diskless-sidecar/sidecar/coordinator"
	"github.com/diskless-sidecar/sidecar/fetch"
	"github.com/diskless-sidecar/sidecar/metalog/kafkalog"
	"github.com/diskless-sidecar/sidecar/objstore/s3"
	"github.com/diskless-sidecar/sidecar/produce"
	"github.com/diskless-sidecar/sidecar/server"
	"github.com/diskless-sidecar/sidecar/txn"
	"github.com/diskless-sidecar/sidecar/upload"
)

func TestLoadConfigDefaults(t *testing.T) {
	c, err := LoadConfig("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Listeners, []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092}}) || c.NodeID != 0 || c.DataDir != "./data" ||
		!c.AutoCreateTopics || c.NumPartitions != 1 || c.AppendBufferMaxBytes != 8388608 ||
		c.AppendCommitInterval != 250*time.Millisecond || c.AppendMaxPendingBytes != 256<<20 ||
		c.StorageBackend != "file" || c.UploadPartBytes != 8<<20 || c.UploadConcurrency != 4 {
		t.Fatalf("defaults: %+v", c)
	}
}

// TestDefaultsArePackageDefaults: the binary's default for every key that
// sets a package's Config field is that package's Default constant, as the
// component gets it (through the same translation start uses), so running
// with no configuration is running with the packages' defaults.
func TestDefaultsArePackageDefaults(t *testing.T) {
	c, err := LoadConfig("", nil)
	if err != nil {
		t.Fatal(err)
	}
	pc, uc, cc, fc, sc, kc := produceConfig(c), uploadConfig(c), cacheConfig(c), fetchConfig(c), s3Config(c), kafkaLogConfig(c)
	for _, tc := range []struct {
		key       string
		got, want any
	}{
		{"num.partitions", c.NumPartitions, server.DefaultNumPartitions},
		{"socket.request.max.bytes", c.SocketRequestMaxBytes, server.DefaultMaxRequestBytes},
		{"queued.max.request.bytes", c.QueuedMaxRequestBytes, server.DefaultMaxQueuedRequestBytes},
		{"connections.max.idle.ms", c.ConnectionsMaxIdle, server.DefaultIdleTimeout},
		{"diskless.storage.s3.request.timeout.ms", sc.RequestTimeout, s3.DefaultRequestTimeout},
		{"diskless.upload.part.bytes", sc.PartSize, int64(s3.DefaultPartSize)},
		{"diskless.upload.concurrency", sc.Concurrency, s3.DefaultConcurrency},
		{"diskless.append.buffer.max.bytes", pc.BufferMaxBytes, produce.DefaultBufferMaxBytes},
		{"diskless.append.commit.interval.ms", pc.CommitInterval, produce.DefaultCommitInterval},
		{"diskless.append.max.pending.bytes", pc.MaxPendingBytes, int64(produce.DefaultMaxPendingBytes)},
		{"diskless.upload.max.inflight.files", pc.UploadConcurrency, produce.DefaultUploadConcurrency},
		{"diskless.object.key.prefix", uc.Prefix, upload.DefaultPrefix},
		{"diskless.upload.max.attempts", uc.MaxAttempts, upload.DefaultMaxAttempts},
		{"diskless.upload.retry.backoff.ms", uc.InitialBackoff, upload.DefaultInitialBackoff},
		{"diskless.upload.retry.backoff.max.ms", uc.MaxBackoff, upload.DefaultMaxBackoff},
		{"diskless.upload.attempt.timeout.ms", uc.AttemptTimeout, upload.DefaultAttemptTimeout},
		{"diskless.upload.hedge.enable", c.UploadHedge, true},
		{"diskless.upload.hedge.percentile", uc.HedgePercentile, upload.DefaultHedgePercentile},
		{"diskless.upload.hedge.min.delay.ms", uc.HedgeMinDelay, upload.DefaultHedgeMinDelay},
		{"diskless.upload.hedge.max.delay.ms", uc.HedgeMaxDelay, upload.DefaultHedgeMaxDelay},
		{"diskless.upload.hedge.max.percent", uc.HedgeMaxPercent, upload.DefaultHedgeMaxPercent},
		{"diskless.commit.max.attempts", c.CommitMaxAttempts, commit.DefaultMaxAttempts},
		{"diskless.cache.block.bytes", cc.BlockBytes, int64(cache.DefaultBlockBytes)},
		{"diskless.cache.max.bytes", cc.MaxBytes, int64(cache.DefaultMaxBytes)},
		{"diskless.cache.catchup.max.bytes", cc.CatchUpMaxBytes, int64(cache.DefaultCatchUpMaxBytes)},
		{"diskless.fetch.max.wait.ms", fc.MaxWait, fetch.DefaultMaxWait},
		{"fetch.max.bytes", fc.MaxBytes, int32(fetch.DefaultMaxBytes)},
		{"diskless.metadata.topic", kc.Topic, kafkalog.DefaultTopic},
		{"diskless.metadata.topic.replication.factor", kc.ReplicationFactor, int16(kafkalog.DefaultReplicationFactor)},
		{"producer.id.expiration.ms", c.ProducerIDExpiration.Milliseconds(), coordinator.DefaultProducerIDExpirationMs},
		{"diskless.retention.check.interval.ms", c.RetentionCheckInterval, coordinator.DefaultRetentionCheckInterval},
		{"diskless.file.deletion.delay.ms", c.FileDeletionDelay, coordinator.DefaultFileDeletionDelay},
		{"diskless.coordinator.orphan.scan.interval.ms", c.OrphanScanInterval, coordinator.DefaultOrphanScanInterval},
		{"diskless.coordinator.orphan.scan.grace.period.ms", c.OrphanScanGracePeriod, coordinator.DefaultOrphanScanGracePeriod},
		{"diskless.consolidation.enable", c.ConsolidationEnable, true},
		{"diskless.consolidation.min.age.ms", c.ConsolidationMinAge, coordinator.DefaultConsolidationMinAge},
		{"diskless.consolidation.interval.ms", c.ConsolidationInterval, coordinator.DefaultConsolidationInterval},
		{"diskless.consolidation.max.bytes.per.sec", c.ConsolidationMaxBytesPerSec, coordinator.DefaultConsolidationMaxBytesPerSec},
		{"diskless.consolidation.segment.bytes", c.ConsolidationSegmentBytes, coordinator.DefaultSegmentBytes},
		{"diskless.consolidation.segment.ms", c.ConsolidationSegmentRollTime, coordinator.DefaultSegmentRollTime},
		{"diskless.consolidation.index.interval.bytes", c.ConsolidationIndexIntervalBytes, coordinator.DefaultConsolidationIndexIntervalBytes},
		{"transaction.max.timeout.ms", c.TxnMaxTimeoutMs, txn.DefaultMaxTimeoutMs},
		{"transactional.id.expiration.ms", c.TxnIDExpirationMs, txn.DefaultIDExpirationMs},
		{"transaction.abort.timed.out.transaction.cleanup.interval.ms", c.TxnAbortCheckInterval, coordinator.DefaultTxnAbortCheckInterval},
		{"transaction.remove.expired.transaction.cleanup.interval.ms", c.TxnIDExpirationCheckInterval, coordinator.DefaultTxnIDExpirationCheckInterval},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: the binary's default gives %v (%T), the package's default is %v (%T)", tc.key, tc.got, tc.got, tc.want, tc.want)
		}
	}
}

// TestHedgingOnlyOnS3: uploads are hedged with the S3 backend unless
// diskless.upload.hedge.enable=false, never with the local store.
func TestHedgingOnlyOnS3(t *testing.T) {
	for _, tt := range []struct {
		sets         []string
		wantDisabled bool
	}{
		{nil, true},
		{[]string{"diskless.storage.backend=s3", "diskless.storage.s3.bucket=b"}, false},
		{[]string{"diskless.storage.backend=s3", "diskless.storage.s3.bucket=b", "diskless.upload.hedge.enable=false"}, true},
	} {
		c, err := LoadConfig("", tt.sets)
		if err != nil {
			t.Fatal(err)
		}
		if got := uploadConfig(c).HedgeDisabled; got != tt.wantDisabled {
			t.Errorf("%v: HedgeDisabled %t, want %t", tt.sets, got, tt.wantDisabled)
		}
	}
}

func TestLoadConfigFileThenSet(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sidecar.properties")
	body := "# comment\nnode.id = 3\ndiskless.append.commit.interval.ms=100\nlisteners: PLAINTEXT://0.0.0.0:9093\nadvertised.listeners=PLAINTEXT://kafka-1.example:9093\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path, []string{"node.id=4", "auto.create.topics.enable=false"})
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeID != 4 || c.AppendCommitInterval != 100*time.Millisecond || c.AutoCreateTopics ||
		c.Listeners[0].Port != 9093 || c.Advertised[0].Host != "kafka-1.example" {
		t.Fatalf("got %+v", c)
	}
}

// clusterSets make a cluster on Kafka, its one listener PLAINTEXT.
var clusterSets = []string{"diskless.cluster.enable=true", "diskless.metadata.log=kafka", "diskless.metadata.kafka.bootstrap.servers=127.0.0.1:1"}

func TestLoadConfigRefusesNamingTheKey(t *testing.T) {
	cases := []struct {
		name string
		sets []string
		key  string
	}{
		{"unknown key", []string{"no.such.key=1"}, "no.such.key"},
		{"not a number", []string{"node.id=abc"}, "node.id"},
		{"negative", []string{"num.partitions=0"}, "num.partitions"},
		{"bad bool", []string{"auto.create.topics.enable=yes"}, "auto.create.topics.enable"},
		{"bad listener", []string{"listeners=PLAINTEXT:/127.0.0.1:9093"}, "listeners"},
		{"two listeners of one name", []string{"listeners=PLAINTEXT://a:1,PLAINTEXT://b:2"}, "listeners"},
		{"listener without protocol", []string{"listeners=CLIENT://127.0.0.1:9093"}, "listener.security.protocol.map"},
		{"unknown protocol", []string{"listener.security.protocol.map=CLIENT:TLS"}, "listener.security.protocol.map"},
		{"advertised listener not bound", []string{"advertised.listeners=SSL://a:1"}, "advertised.listeners"},
		{"override of no listener", []string{"listener.name.ssl.ssl.client.auth=required"}, "listener.name.ssl.ssl.client.auth"},
		{"cluster without its inter-sidecar listener", slices.Concat(clusterSets, []string{"listeners=SSL://127.0.0.1:9093,SASL_SSL://127.0.0.1:9094"}), "security.inter.broker.protocol"},
		{"inter.broker.listener.name of no listener", slices.Concat(clusterSets, []string{"inter.broker.listener.name=internal"}), "inter.broker.listener.name"},
		{"both inter-broker keys", slices.Concat(clusterSets, []string{"inter.broker.listener.name=PLAINTEXT", "security.inter.broker.protocol=PLAINTEXT"}), "security.inter.broker.protocol"},
		{"inter-broker mechanism not offered", slices.Concat(clusterSets, []string{"listeners=SASL_PLAINTEXT://127.0.0.1:9093", "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512"}), "sasl.mechanism.inter.broker.protocol"},
		{"inter-broker mechanism GSSAPI", slices.Concat(clusterSets, []string{"listeners=SASL_PLAINTEXT://127.0.0.1:9093", "sasl.mechanism.inter.broker.protocol=GSSAPI"}), "sasl.mechanism.inter.broker.protocol"},
		{"inter-broker SCRAM without a login", slices.Concat(clusterSets, []string{"listeners=SASL_PLAINTEXT://127.0.0.1:9093",
			"sasl.enabled.mechanisms=SCRAM-SHA-512", "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512"}), "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"},
		{"inter-broker PLAIN without username", slices.Concat(clusterSets, []string{"listeners=SASL_PLAINTEXT://127.0.0.1:9093",
			`listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required password="pw-not-shown" user_a="pw-not-shown";`}), "listener.name.sasl_plaintext.plain.sasl.jaas.config"},
		{"unknown Kafka client protocol", slices.Concat(clusterSets, []string{"diskless.metadata.kafka.security.protocol=TLS"}), "diskless.metadata.kafka.security.protocol"},
		{"Kafka client SASL without a login", slices.Concat(clusterSets, []string{"diskless.metadata.kafka.security.protocol=SASL_SSL"}), "diskless.metadata.kafka.sasl.jaas.config"},
		{"Kafka client mechanism", slices.Concat(clusterSets, []string{"diskless.metadata.kafka.security.protocol=SASL_PLAINTEXT", "diskless.metadata.kafka.sasl.mechanism=OAUTHBEARER"}), "diskless.metadata.kafka.sasl.mechanism"},
		{"Kafka client truststore missing", slices.Concat(clusterSets, []string{"diskless.metadata.kafka.security.protocol=SSL", "diskless.metadata.kafka.ssl.truststore.location=/no/such/file.pem"}), "diskless.metadata.kafka.ssl.truststore.location"},
		{"Kafka client host check", []string{"diskless.metadata.kafka.ssl.endpoint.identification.algorithm=none"}, "diskless.metadata.kafka.ssl.endpoint.identification.algorithm"},
		{"wildcard without advertised", []string{"listeners=PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners"},
		{"pending below buffer", []string{"diskless.append.max.pending.bytes=10"}, "diskless.append.max.pending.bytes"},
		{"bad log level", []string{"log.level=loud"}, "log.level"},
		{"huge buffer", []string{"diskless.append.buffer.max.bytes=4294967296"}, "diskless.append.buffer.max.bytes"},
		{"unknown backend", []string{"diskless.storage.backend=gcs"}, "diskless.storage.backend"},
		{"s3 without a bucket", []string{"diskless.storage.backend=s3"}, "diskless.storage.s3.bucket"},
		{"part below S3's minimum", []string{"diskless.upload.part.bytes=1048576"}, "diskless.upload.part.bytes"},
		{"no upload concurrency", []string{"diskless.upload.concurrency=0"}, "diskless.upload.concurrency"},
		{"bad hedge switch", []string{"diskless.upload.hedge.enable=maybe"}, "diskless.upload.hedge.enable"},
		{"hedge percentile 100", []string{"diskless.upload.hedge.percentile=100"}, "diskless.upload.hedge.percentile"},
		{"hedge floor of 0", []string{"diskless.upload.hedge.min.delay.ms=0"}, "diskless.upload.hedge.min.delay.ms"},
		{"hedge cap below the floor", []string{"diskless.upload.hedge.min.delay.ms=500", "diskless.upload.hedge.max.delay.ms=200"}, "diskless.upload.hedge.max.delay.ms"},
		{"hedge budget of 0", []string{"diskless.upload.hedge.max.percent=0"}, "diskless.upload.hedge.max.percent"},
		{"retention check period of 0", []string{"diskless.retention.check.interval.ms=0"}, "diskless.retention.check.interval.ms"},
		{"orphan scan period of 0", []string{"diskless.coordinator.orphan.scan.interval.ms=0"}, "diskless.coordinator.orphan.scan.interval.ms"},
		{"bad path style", []string{"diskless.storage.s3.path.style=yes"}, "diskless.storage.s3.path.style"},
		{"unknown metadata log", []string{"diskless.metadata.log=zookeeper"}, "diskless.metadata.log"},
		{"kafka log without servers", []string{"diskless.metadata.log=kafka"}, "diskless.metadata.kafka.bootstrap.servers"},
		{"bootstrap server without a port", []string{"diskless.metadata.kafka.bootstrap.servers=kafka-1"}, "diskless.metadata.kafka.bootstrap.servers"},
		{"replication factor of 0", []string{"diskless.metadata.topic.replication.factor=0"}, "diskless.metadata.topic.replication.factor"},
		{"OTLP endpoint without a scheme", []string{"otel.exporter.otlp.endpoint=collector:4318"}, "otel.exporter.otlp.endpoint"},
		{"OTLP endpoint of another scheme", []string{"otel.exporter.otlp.endpoint=grpc://collector:4317"}, "otel.exporter.otlp.endpoint"},
		{"sampler ratio above 1", []string{"otel.traces.sampler.ratio=1.5"}, "otel.traces.sampler.ratio"},
		{"sampler ratio not a number", []string{"otel.traces.sampler.ratio=half"}, "otel.traces.sampler.ratio"},
		{"transaction timeout bound of 0", []string{"transaction.max.timeout.ms=0"}, "transaction.max.timeout.ms"},
		{"transaction timeout bound past an int", []string{"transaction.max.timeout.ms=2147483648"}, "transaction.max.timeout.ms"},
		{"transactional id expiry not a number", []string{"transactional.id.expiration.ms=7d"}, "transactional.id.expiration.ms"},
		{"transaction abort check of 0", []string{"transaction.abort.timed.out.transaction.cleanup.interval.ms=0"}, "transaction.abort.timed.out.transaction.cleanup.interval.ms"},
		{"transactional id expiry check negative", []string{"transaction.remove.expired.transaction.cleanup.interval.ms=-1"}, "transaction.remove.expired.transaction.cleanup.interval.ms"},
		{"wal prefix on the snapshots", []string{"diskless.metadata.log=kafka", "diskless.metadata.kafka.bootstrap.servers=127.0.0.1:9092", "diskless.object.key.prefix=snapshots"}, "diskless.object.key.prefix"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadConfig("", c.sets)
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Key != c.key || !strings.Contains(err.Error(), c.key) {
				t.Fatalf("error %v, want one naming %s", err, c.key)
			}
			if strings.Contains(err.Error(), "pw-not-shown") {
				t.Fatalf("error %v shows a password", err)
			}
		})
	}
	if _, err := LoadConfig("", []string{"node.id"}); err == nil {
		t.Fatal("--set without = accepted")
	}
	if _, err := LoadConfig(filepath.Join(t.TempDir(), "missing.properties"), nil); err == nil {
		t.Fatal("missing config file accepted")
	}
}

// TestReadmeListsEveryKey keeps the README's configuration table true: one
// row per key, with its default.
func TestReadmeListsEveryKey(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range options {
		row := "| `" + o.key + "` | `" + o.def + "` |"
		if !strings.Contains(string(readme), row) {
			t.Errorf("README.md has no row starting %s", row)
		}
	}
}

// TestDeployExampleLoads: the commented example in deploy/ is a valid
// configuration.
func TestDeployExampleLoads(t *testing.T) {
	cfg, err := LoadConfig("../../deploy/sidecar.properties", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listeners[0].Port == 9092 {
		t.Error("the example takes port 9092, the broker's next to it")
	}
}

// TestEnvSets: DISKLESS_SIDECAR_* variables become keys, override the file
// and are overridden by --set (as run applies them); others are ignored;
// an unknown one is refused naming its key.
func TestEnvSets(t *testing.T) {
	env := []string{
		"PATH=/bin",
		"SIDECAR_REQUIRE_INTEGRATION=1",
		"DISKLESS_SIDECAR_NODE_ID=7",
		"DISKLESS_SIDECAR_DISKLESS_APPEND_COMMIT_INTERVAL_MS=120",
		"DISKLESS_SIDECAR_ADVERTISED_LISTENERS=PLAINTEXT://kafka-2.kafka:9192",
		"DISKLESS_SIDECAR_=x",
	}
	sets := EnvSets(env)
	want := []string{
		"advertised.listeners=PLAINTEXT://kafka-2.kafka:9192",
		"diskless.append.commit.interval.ms=120",
		"node.id=7",
	}
	if !slices.Equal(sets, want) {
		t.Fatalf("EnvSets = %q, want %q", sets, want)
	}
	path := filepath.Join(t.TempDir(), "sidecar.properties")
	if err := os.WriteFile(path, []byte("node.id=3\nnum.partitions=5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path, append(sets, "diskless.append.commit.interval.ms=90"))
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeID != 7 || c.NumPartitions != 5 || c.AppendCommitInterval != 90*time.Millisecond || c.Advertised[0].Host != "kafka-2.kafka" {
		t.Fatalf("got node.id %d, num.partitions %d, commit interval %v, advertised %v", c.NodeID, c.NumPartitions, c.AppendCommitInterval, c.Advertised)
	}
	_, err = LoadConfig("", EnvSets([]string{"DISKLESS_SIDECAR_NODE_IDD=1"}))
	if ce := (*ConfigError)(nil); !errors.As(err, &ce) || ce.Key != "node.idd" {
		t.Fatalf("unknown variable: %v, want a ConfigError for node.idd", err)
	}
}

// TestSinglePutMaxBytes: with parts at least the buffer (the defaults), a
// file of the buffer plus one request of up to a part is one S3 PUT; with
// parts smaller than the buffer, objects above a part are multipart.
func TestSinglePutMaxBytes(t *testing.T) {
	for _, c := range []struct {
		buffer     int
		part, want int64
	}{
		{8 << 20, 8 << 20, 16 << 20},
		{6 << 20, 5 << 20, 5 << 20},
		{1 << 20, 64 << 20, 65 << 20},
		{1 << 30, 5 << 30, 5 << 30},
	} {
		if got := singlePutMaxBytes(Config{AppendBufferMaxBytes: c.buffer, UploadPartBytes: c.part}); got != c.want {
			t.Errorf("buffer %d, part %d: %d, want %d", c.buffer, c.part, got, c.want)
		}
	}
}

// TestClusterTakesAnyListeners: a cluster with an SSL listener for
// clients and a SASL_PLAINTEXT one between the sidecars loads, the
// inter-sidecar listener and its login read from Kafka's keys.
func TestClusterTakesAnyListeners(t *testing.T) {
	c, err := LoadConfig("", slices.Concat(clusterSets, []string{
		"listeners=CLIENT://127.0.0.1:9093,INTERNAL://127.0.0.1:9094",
		"listener.security.protocol.map=CLIENT:SSL,INTERNAL:SASL_PLAINTEXT",
		"inter.broker.listener.name=internal",
		`listener.name.internal.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="sc" password="pw" user_sc="pw";`,
	}))
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.interListener()
	mech, login, lerr := c.interSASLLogin(l.Name)
	if err != nil || lerr != nil || l.Name != "INTERNAL" || mech != "PLAIN" || login != [2]string{"sc", "pw"} {
		t.Fatalf("inter-sidecar listener %v %v, login %s %v %v", l, err, mech, login, lerr)
	}
}
