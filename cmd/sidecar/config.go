package main

import (
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/magiconair/properties"

	"github.com/diskless-sidecar/sidecar/cache"
	"github.com/diskless-sidecar/sidecar/commit"
	"github.com/diskless-sidecar/sidecar/coordinator"
	"github.com/diskless-sidecar/sidecar/fetch"
	"github.com/diskless-sidecar/sidecar/group"
	"github.com/diskless-sidecar/sidecar/internal/acl"
	"github.com/diskless-sidecar/sidecar/internal/telemetry"
	"github.com/diskless-sidecar/sidecar/membership"
	"github.com/diskless-sidecar/sidecar/metalog/kafkalog"
	"github.com/diskless-sidecar/sidecar/objstore/s3"
	"github.com/diskless-sidecar/sidecar/placement"
	"github.com/diskless-sidecar/sidecar/produce"
	"github.com/diskless-sidecar/sidecar/server"
	"github.com/diskless-sidecar/sidecar/txn"
	"github.com/diskless-sidecar/sidecar/upload"
	"github.com/diskless-sidecar/sidecar/wal"
)

// Config is the sidecar's configuration: Kafka-style dotted keys (SPEC §11,
// DESIGN §Configuration) read from a properties file and overridden by
// --set key=value. Every key has a default that works on one machine.
type Config struct {
	Listeners   []Listener
	Advertised  []Listener
	ProtocolMap map[string]server.SecurityProtocol
	// SSL holds the broker-wide ssl.* keys' values, ListenerOverrides the
	// listener.name.<name>.ssl.* ones by listener name (upper case).
	SSL               map[string]string
	ListenerOverrides map[string]map[string]string
	// SASLMechanisms is sasl.enabled.mechanisms; MaxReauth
	// connections.max.reauth.ms; FailedAuthDelay
	// connection.failed.authentication.delay.ms.
	SASLMechanisms  string
	MaxReauth       time.Duration
	FailedAuthDelay time.Duration
	// InterBrokerListener is inter.broker.listener.name (upper case),
	// InterBrokerProtocol security.inter.broker.protocol (both "" when
	// not set), InterBrokerSASLMechanism
	// sasl.mechanism.inter.broker.protocol: how the sidecars of a
	// cluster reach each other (security.go).
	InterBrokerListener, InterBrokerProtocol, InterBrokerSASLMechanism string
	// KafkaClient is how the sidecar's Kafka clients connect to the
	// metadata topic's cluster (diskless.metadata.kafka.* security keys).
	KafkaClient KafkaClientSecurity
	// Authorizer is whether authorizer.class.name enables the authorizer
	// (acl.StandardAuthorizerClass); SuperUsers is super.users,
	// AllowIfNoACL allow.everyone.if.no.acl.found.
	Authorizer   bool
	SuperUsers   []string
	AllowIfNoACL bool
	NodeID       int32
	DataDir      string

	AutoCreateTopics      bool
	NumPartitions         int32
	SocketRequestMaxBytes int32
	QueuedMaxRequestBytes int64
	ConnectionsMaxIdle    time.Duration

	StorageBackend   string // "file" or "s3"
	S3Bucket         string
	S3Prefix         string
	S3Region         string
	S3Endpoint       string
	S3PathStyle      bool
	S3RequestTimeout time.Duration

	AppendBufferMaxBytes  int
	AppendCommitInterval  time.Duration
	AppendMaxPendingBytes int64
	UploadInflightFiles   int

	ObjectKeyPrefix       string
	UploadPartBytes       int64
	UploadConcurrency     int
	UploadMaxAttempts     int
	UploadBackoff         time.Duration
	UploadBackoffMax      time.Duration
	UploadAttemptTimeout  time.Duration
	UploadHedge           bool
	UploadHedgePercentile int
	UploadHedgeMinDelay   time.Duration
	UploadHedgeMaxDelay   time.Duration
	UploadHedgeMaxPercent int
	CommitMaxAttempts     int

	CacheBlockBytes      int64
	CacheMaxBytes        int64
	CacheCatchUpMaxBytes int64

	FetchMaxWait  time.Duration
	FetchMaxBytes int32

	MetadataShards       int32
	ProducerIDExpiration time.Duration

	MetadataLog           string   // "embedded" or "kafka"
	MetadataKafkaBrokers  []string // host:port each
	MetadataTopic         string
	MetadataTopicReplicas int16

	Cluster                  bool
	ClusterGroupID           string
	ClusterSessionTimeout    time.Duration
	ClusterHeartbeatInterval time.Duration
	ClusterPlacementRefresh  time.Duration
	Rack                     string
	ClientZones              []server.ZoneCIDR

	RetentionCheckInterval time.Duration
	FileDeletionDelay      time.Duration
	OrphanScanInterval     time.Duration
	OrphanScanGracePeriod  time.Duration

	ConsolidationEnable             bool
	ConsolidationMinAge             time.Duration
	ConsolidationInterval           time.Duration
	ConsolidationMaxBytesPerSec     int64
	ConsolidationSegmentBytes       int64
	ConsolidationSegmentRollTime    time.Duration
	ConsolidationIndexIntervalBytes int32

	GroupInitialRebalanceDelay     time.Duration
	GroupMinSessionTimeout         time.Duration
	GroupMaxSessionTimeout         time.Duration
	GroupMaxSize                   int
	GroupConsumerSessionTimeout    time.Duration
	GroupConsumerHeartbeatInterval time.Duration
	// GroupConsumerAssignmentInterval is group.consumer.assignment.interval.ms
	// (0: every group epoch assigned at once).
	GroupConsumerAssignmentInterval time.Duration
	GroupConsumerMaxSize            int
	OffsetsRetentionMinutes         int64
	OffsetsRetentionCheckInterval   time.Duration
	// Transactions (SPEC §15), Kafka's keys.
	TxnMaxTimeoutMs              int32
	TxnIDExpirationMs            int64
	TxnAbortCheckInterval        time.Duration
	TxnIDExpirationCheckInterval time.Duration

	HTTPListener string

	OTLPEndpoint     string  // "": OTEL_EXPORTER_OTLP_*ENDPOINT, else no tracing
	TraceSampleRatio float64 // in [0, 1]; -1: OTEL_TRACES_SAMPLER

	ShutdownTimeout time.Duration
	LogLevel        slog.Level
	LogFormat       string
}

// option is one configuration key: its default, documentation, and how a
// value is checked and stored. The table below is the only place a key is
// defined; the README's table is checked against it by a test. A key that
// sets a package's Config field takes that package's Default constant as
// its default (TestDefaultsArePackageDefaults holds them equal).
type option struct {
	key string
	def string
	doc string
	set func(c *Config, v string) error
}

func intOption[T ~int | ~int16 | ~int32 | ~int64](key, def, doc string, lo, hi int64, field func(*Config) *T) option {
	return option{key: key, def: def, doc: doc, set: func(c *Config, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer")
		}
		if n < lo || n > hi {
			return fmt.Errorf("must be in [%d, %d]", lo, hi)
		}
		*field(c) = T(n)
		return nil
	}}
}

func msOption(key, def, doc string, lo, hi int64, field func(*Config) *time.Duration) option {
	return option{key: key, def: def, doc: doc, set: func(c *Config, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer number of milliseconds")
		}
		if n < lo || n > hi {
			return fmt.Errorf("must be in [%d, %d] ms", lo, hi)
		}
		*field(c) = time.Duration(n) * time.Millisecond
		return nil
	}}
}

// periodOption is msOption for how often a background task runs: -1
// disables the task, otherwise at least 1 ms. 0 is refused: it reads as
// "never" or "always" to an operator, and the coordinator would silently
// take it for its default period instead.
func periodOption(key, def, doc string, hi int64, field func(*Config) *time.Duration) option {
	o := msOption(key, def, doc, -1, hi, field)
	set := o.set
	o.set = func(c *Config, v string) error {
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n == 0 {
			return fmt.Errorf("must be -1 (disabled) or in [1, %d] ms", hi)
		}
		return set(c, v)
	}
	return o
}

func boolOption(key, def, doc string, field func(*Config) *bool) option {
	return option{key: key, def: def, doc: doc, set: func(c *Config, v string) error {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true":
			*field(c) = true
		case "false":
			*field(c) = false
		default:
			return fmt.Errorf("must be true or false")
		}
		return nil
	}}
}

// itoa and ms write a package's default as a key's default: an integer, or
// a duration in whole milliseconds.
func itoa[T ~int | ~int16 | ~int32 | ~int64](v T) string { return strconv.FormatInt(int64(v), 10) }

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

const (
	maxInt32     = math.MaxInt32
	maxBufferCap = 1 << 30 // keeps a WAL object far below its 2 GiB format limit
)

var options = []option{
	{key: "listeners", def: "PLAINTEXT://127.0.0.1:9092",
		doc: "The Kafka listeners, NAME://host:port separated by commas (port 0 picks a free port); each name's security protocol is in listener.security.protocol.map.",
		set: func(c *Config, v string) (err error) { c.Listeners, err = parseListeners(v); return err }},
	{key: "listener.security.protocol.map", def: defaultProtocolMap,
		doc: "Each listener name's security protocol, NAME:PROTOCOL separated by commas; PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.",
		set: func(c *Config, v string) (err error) { c.ProtocolMap, err = parseProtocolMap(v); return err }},
	{key: "advertised.listeners", def: "",
		doc: "The addresses clients of each listener are told to connect to, NAME://host:port separated by commas; a listener not named advertises its own. Required for a listener binding a wildcard host.",
		set: func(c *Config, v string) (err error) {
			if strings.TrimSpace(v) == "" {
				c.Advertised = nil
				return nil
			}
			c.Advertised, err = parseListeners(v)
			return err
		}},
	sslOption("ssl.keystore.type", "PEM", "The keystore's format; only PEM."),
	sslOption("ssl.keystore.location", "", "A PEM file holding the TLS listeners' private key (unencrypted) and certificate chain; re-read when it changes."),
	sslOption("ssl.keystore.certificate.chain", "", "The certificate chain in PEM, inline (instead of ssl.keystore.location)."),
	sslOption("ssl.keystore.key", "", "The private key in PEM, inline, unencrypted (instead of ssl.keystore.location)."),
	sslOption("ssl.key.password", "", "Not supported: encrypted private keys are refused."),
	sslOption("ssl.truststore.type", "PEM", "The truststore's format; only PEM."),
	sslOption("ssl.truststore.location", "", "A PEM file of the CA certificates client certificates are verified against; re-read when it changes. Empty: the system's."),
	sslOption("ssl.truststore.certificates", "", "The truststore's certificates in PEM, inline (instead of ssl.truststore.location)."),
	sslOption("ssl.client.auth", "none", "Client certificates on SSL listeners: none, requested or required (SASL_SSL listeners only by listener.name.<name>.ssl.client.auth)."),
	sslOption("ssl.enabled.protocols", "TLSv1.2,TLSv1.3", "TLS versions accepted, TLSv1.2 and/or TLSv1.3."),
	{key: "sasl.enabled.mechanisms", def: "PLAIN",
		doc: "SASL mechanisms SASL_PLAINTEXT and SASL_SSL listeners offer, separated by commas: PLAIN (users in listener.name.<name>.plain.sasl.jaas.config), SCRAM-SHA-256 and SCRAM-SHA-512 (credentials set with AlterUserScramCredentials, kafka-configs.sh --entity-type users, kept in the metadata log).",
		set: func(c *Config, v string) error { c.SASLMechanisms = v; return nil }},
	msOption("connections.max.reauth.ms", "0", "A SASL session's lifetime: the client must re-authenticate on its connection before it ends, or the connection is closed at its next request; 0: sessions do not expire, ms.", 0, math.MaxInt64/int64(time.Millisecond), func(c *Config) *time.Duration { return &c.MaxReauth }),
	msOption("connection.failed.authentication.delay.ms", ms(server.DefaultFailedAuthDelay), "A connection whose authentication failed is closed this long after the answer, ms (at least 1).", 1, 60000, func(c *Config) *time.Duration { return &c.FailedAuthDelay }),
	sslOption("ssl.principal.mapping.rules", "DEFAULT", "Maps a client certificate's subject name to its principal: DEFAULT or RULE:pattern/replacement/[LU], separated by commas."),
	{key: "authorizer.class.name", def: "",
		doc: "The authorizer: empty (none: every client may do everything, the ACL APIs answer SECURITY_DISABLED) or org.apache.kafka.metadata.authorizer.StandardAuthorizer (ACLs set with kafka-acls.sh, kept in the metadata log).",
		set: func(c *Config, v string) error {
			switch v = strings.TrimSpace(v); v {
			case "":
				c.Authorizer = false
			case acl.StandardAuthorizerClass:
				c.Authorizer = true
			default:
				return fmt.Errorf("must be empty or %s", acl.StandardAuthorizerClass)
			}
			return nil
		}},
	{key: "super.users", def: "",
		doc: "Principals the authorizer allows everything, separated by semicolons (User:admin;User:CN=ops,O=Example).",
		set: func(c *Config, v string) (err error) { c.SuperUsers, err = acl.ParseSuperUsers(v); return err }},
	boolOption("allow.everyone.if.no.acl.found", "false", "With an authorizer: allow every principal what no ACL of the resource (of any principal or operation) decides.", func(c *Config) *bool { return &c.AllowIfNoACL }),
	intOption("node.id", "0", "This sidecar's node id, reported as the broker id in Metadata.", 0, maxInt32, func(c *Config) *int32 { return &c.NodeID }),
	{key: "data.dir", def: "./data", doc: "Directory for the coordinator logs and, with the local store, the objects.",
		set: func(c *Config, v string) error {
			if strings.TrimSpace(v) == "" {
				return fmt.Errorf("must not be empty")
			}
			c.DataDir = v
			return nil
		}},
	boolOption("auto.create.topics.enable", "true", "Create unknown topics named in Metadata requests.", func(c *Config) *bool { return &c.AutoCreateTopics }),
	intOption("num.partitions", itoa(server.DefaultNumPartitions), "Partitions of auto-created topics and of CreateTopics with num_partitions -1.", 1, 100000, func(c *Config) *int32 { return &c.NumPartitions }),
	intOption("socket.request.max.bytes", itoa(server.DefaultMaxRequestBytes), "Largest request frame accepted, bytes; a larger frame closes its connection.", 1024, maxInt32, func(c *Config) *int32 { return &c.SocketRequestMaxBytes }),
	intOption("queued.max.request.bytes", itoa(server.DefaultMaxQueuedRequestBytes), "Request bytes read and not yet answered, over all connections; past it readers wait. At least socket.request.max.bytes.", 1024, math.MaxInt64, func(c *Config) *int64 { return &c.QueuedMaxRequestBytes }),
	msOption("connections.max.idle.ms", ms(server.DefaultIdleTimeout), "Close a connection that sent nothing for this long with nothing in flight, or that has not read a response for this long, ms.", 1000, 86400000, func(c *Config) *time.Duration { return &c.ConnectionsMaxIdle }),
	{key: "diskless.storage.backend", def: "file", doc: "Where objects are stored: file (a directory under data.dir) or s3 (diskless.storage.s3.*).",
		set: func(c *Config, v string) error {
			switch v = strings.TrimSpace(v); v {
			case "file", "s3":
				c.StorageBackend = v
				return nil
			}
			return fmt.Errorf("must be file or s3")
		}},
	{key: "diskless.storage.s3.bucket", def: "", doc: "S3 bucket holding the objects; required with diskless.storage.backend=s3.",
		set: func(c *Config, v string) error { c.S3Bucket = strings.TrimSpace(v); return nil }},
	{key: "diskless.storage.s3.prefix", def: "", doc: "Prepended with a / to every object key in the bucket (e.g. cluster1 gives cluster1/wal/<id>); empty: the bucket's root.",
		set: func(c *Config, v string) error { c.S3Prefix = strings.TrimSpace(v); return nil }},
	{key: "diskless.storage.s3.region", def: "", doc: "The bucket's region; empty: AWS_REGION or the shared config profile, else us-east-1.",
		set: func(c *Config, v string) error { c.S3Region = strings.TrimSpace(v); return nil }},
	{key: "diskless.storage.s3.endpoint", def: "", doc: "Base URL of an S3-compatible store, http(s)://host:port; empty: AWS S3.",
		set: func(c *Config, v string) error { c.S3Endpoint = strings.TrimSpace(v); return nil }},
	boolOption("diskless.storage.s3.path.style", "false", "Address buckets as <endpoint>/<bucket> instead of <bucket>.<endpoint> (most S3-compatible stores need true).", func(c *Config) *bool { return &c.S3PathStyle }),
	msOption("diskless.storage.s3.request.timeout.ms", ms(s3.DefaultRequestTimeout), "Longest wait for an S3 answer's headers, and for a whole ranged GET, before the request is retried, ms.", 1, 3600000, func(c *Config) *time.Duration { return &c.S3RequestTimeout }),
	intOption("diskless.append.buffer.max.bytes", itoa(produce.DefaultBufferMaxBytes), "Seal the active file at this size, bytes.", 1, maxBufferCap, func(c *Config) *int { return &c.AppendBufferMaxBytes }),
	msOption("diskless.append.commit.interval.ms", ms(produce.DefaultCommitInterval), "Seal the active file this long after its first batch, ms.", 1, 60000, func(c *Config) *time.Duration { return &c.AppendCommitInterval }),
	intOption("diskless.append.max.pending.bytes", itoa(produce.DefaultMaxPendingBytes), "Record-batch bytes buffered, uploading or committing at once; past it produce requests wait.", 1, math.MaxInt64, func(c *Config) *int64 { return &c.AppendMaxPendingBytes }),
	intOption("diskless.upload.max.inflight.files", itoa(produce.DefaultUploadConcurrency), "Sealed files uploaded concurrently (a producer's batches of a partition still commit in seal order).", 1, 1024, func(c *Config) *int { return &c.UploadInflightFiles }),
	{key: "diskless.object.key.prefix", def: upload.DefaultPrefix, doc: "Prefix of every WAL object key, <prefix>/<random id>.",
		set: func(c *Config, v string) error { c.ObjectKeyPrefix = v; return nil }},
	intOption("diskless.upload.part.bytes", itoa(s3.DefaultPartSize), "S3 objects larger than this go up as multipart uploads in parts of this size, bytes, smaller ones as one PUT; when it is at least diskless.append.buffer.max.bytes, objects up to the buffer plus this size are one PUT too (a file is sealed with the request that reaches the buffer); at least 5242880.", 5<<20, 5<<30, func(c *Config) *int64 { return &c.UploadPartBytes }),
	intOption("diskless.upload.concurrency", itoa(s3.DefaultConcurrency), "Parts of one S3 multipart upload sent in parallel.", 1, 64, func(c *Config) *int { return &c.UploadConcurrency }),
	intOption("diskless.upload.max.attempts", itoa(upload.DefaultMaxAttempts), "Attempts per object upload before its batches fail with KAFKA_STORAGE_ERROR.", 1, 100, func(c *Config) *int { return &c.UploadMaxAttempts }),
	msOption("diskless.upload.retry.backoff.ms", ms(upload.DefaultInitialBackoff), "Backoff ceiling after the first failed upload attempt, doubled per attempt (full jitter), ms.", 1, 600000, func(c *Config) *time.Duration { return &c.UploadBackoff }),
	msOption("diskless.upload.retry.backoff.max.ms", ms(upload.DefaultMaxBackoff), "Largest backoff ceiling between upload attempts, ms.", 1, 600000, func(c *Config) *time.Duration { return &c.UploadBackoffMax }),
	msOption("diskless.upload.attempt.timeout.ms", ms(upload.DefaultAttemptTimeout), "Timeout of one upload attempt, ms.", 1, 3600000, func(c *Config) *time.Duration { return &c.UploadAttemptTimeout }),
	boolOption("diskless.upload.hedge.enable", "true", "Hedged uploads to S3 (the local store is never hedged): an upload attempt still running after diskless.upload.hedge.percentile of recent attempts' durations gets a second attempt under a new key; the first stored wins, the other's object is deleted.", func(c *Config) *bool { return &c.UploadHedge }),
	intOption("diskless.upload.hedge.percentile", itoa(upload.DefaultHedgePercentile), "Percentile of the last 256 upload attempts' durations after which a running attempt is hedged.", 50, 99, func(c *Config) *int { return &c.UploadHedgePercentile }),
	msOption("diskless.upload.hedge.min.delay.ms", ms(upload.DefaultHedgeMinDelay), "No upload attempt younger than this is hedged, ms.", 1, 3600000, func(c *Config) *time.Duration { return &c.UploadHedgeMinDelay }),
	msOption("diskless.upload.hedge.max.delay.ms", ms(upload.DefaultHedgeMaxDelay), "Every upload attempt older than this is hedged (budget allowing), and until 16 durations are known the delay is this, ms; at least diskless.upload.hedge.min.delay.ms.", 1, 3600000, func(c *Config) *time.Duration { return &c.UploadHedgeMaxDelay }),
	intOption("diskless.upload.hedge.max.percent", itoa(upload.DefaultHedgeMaxPercent), "At most this many hedges per 100 uploads (plus a burst of 3): the extra PUTs hedging may cost.", 1, 100, func(c *Config) *int { return &c.UploadHedgeMaxPercent }),
	intOption("diskless.commit.max.attempts", itoa(commit.DefaultMaxAttempts), "Attempts per coordinator shard commit before the batches fail with KAFKA_STORAGE_ERROR.", 1, 100, func(c *Config) *int { return &c.CommitMaxAttempts }),
	intOption("diskless.cache.block.bytes", itoa(cache.DefaultBlockBytes), "Size of one cache block (aligned range of an object), bytes.", 4096, 1<<30, func(c *Config) *int64 { return &c.CacheBlockBytes }),
	intOption("diskless.cache.max.bytes", itoa(cache.DefaultMaxBytes), "Bytes of object data kept in the block cache.", 0, math.MaxInt64, func(c *Config) *int64 { return &c.CacheMaxBytes }),
	intOption("diskless.cache.catchup.max.bytes", itoa(cache.DefaultCatchUpMaxBytes), "Bytes of whole objects kept for consumers reading data older than the cache's reach (beside diskless.cache.max.bytes); -1 disables it.", -1, math.MaxInt64, func(c *Config) *int64 { return &c.CacheCatchUpMaxBytes }),
	msOption("diskless.fetch.max.wait.ms", ms(fetch.DefaultMaxWait), "Upper bound on a fetch's long-poll, whatever max_wait_ms the client asks, ms.", 0, 3600000, func(c *Config) *time.Duration { return &c.FetchMaxWait }),
	intOption("fetch.max.bytes", itoa(fetch.DefaultMaxBytes), "Upper bound on the bytes one Fetch returns, whatever max_bytes the client asks (the first batch is always returned, KIP-74).", 1024, maxInt32, func(c *Config) *int32 { return &c.FetchMaxBytes }),
	intOption("diskless.metadata.topic.num.partitions", "1", "Number of coordinator shards (with diskless.metadata.log=kafka, the metadata topic's partitions). Fixed for the life of data.dir.", 1, 1024, func(c *Config) *int32 { return &c.MetadataShards }),
	{key: "diskless.metadata.log", def: "embedded",
		doc: "Where the coordinator shards keep their metadata logs: embedded (files under data.dir) or kafka (partitions of diskless.metadata.topic on the Kafka cluster at diskless.metadata.kafka.bootstrap.servers).",
		set: func(c *Config, v string) error {
			switch v = strings.TrimSpace(v); v {
			case "embedded", "kafka":
				c.MetadataLog = v
				return nil
			}
			return fmt.Errorf("must be embedded or kafka")
		}},
	{key: "diskless.metadata.kafka.bootstrap.servers", def: "",
		doc: "Comma-separated host:port of Kafka brokers holding the metadata topic; required with diskless.metadata.log=kafka.",
		set: func(c *Config, v string) error {
			c.MetadataKafkaBrokers = nil
			for _, hp := range strings.Split(v, ",") {
				if hp = strings.TrimSpace(hp); hp == "" {
					continue
				}
				_, port, err := net.SplitHostPort(hp)
				if err != nil {
					return err
				}
				if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
					return fmt.Errorf("bad port %q", port)
				}
				c.MetadataKafkaBrokers = append(c.MetadataKafkaBrokers, hp)
			}
			return nil
		}},
	{key: "diskless.metadata.topic", def: kafkalog.DefaultTopic,
		doc: "The Kafka topic holding the metadata logs with diskless.metadata.log=kafka, partition n for shard n; created if absent.",
		set: func(c *Config, v string) error { c.MetadataTopic = strings.TrimSpace(v); return nil }},
	intOption("diskless.metadata.topic.replication.factor", itoa(kafkalog.DefaultReplicationFactor), "Replication factor of a created metadata topic (min.insync.replicas is one less, at least 1).", 1, math.MaxInt16, func(c *Config) *int16 { return &c.MetadataTopicReplicas }),
	boolOption("diskless.cluster.enable", "false", "Form a cluster with the other sidecars of diskless.metadata.topic (one next to each broker): found through a Kafka group, each coordinator shard hosted by the sidecar of its metadata partition's leader, any sidecar serving any partition. Needs diskless.metadata.log=kafka.", func(c *Config) *bool { return &c.Cluster }),
	{key: "diskless.cluster.group.id", def: "",
		doc: "The Kafka group the sidecars of a cluster meet in (protocol type diskless-sidecar); empty: diskless-sidecars-<diskless.metadata.topic>.",
		set: func(c *Config, v string) error { c.ClusterGroupID = strings.TrimSpace(v); return nil }},
	msOption("diskless.cluster.session.timeout.ms", ms(membership.DefaultSessionTimeout), "How long the other sidecars wait for a silent one before it is out of the cluster, ms (Kafka accepts group.min.session.timeout.ms, 6000 by default, and up).", 1000, 1800000, func(c *Config) *time.Duration { return &c.ClusterSessionTimeout }),
	msOption("diskless.cluster.heartbeat.interval.ms", ms(membership.DefaultHeartbeatInterval), "How often a sidecar heartbeats in the cluster's group, ms; below the session timeout.", 100, 600000, func(c *Config) *time.Duration { return &c.ClusterHeartbeatInterval }),
	msOption("diskless.cluster.placement.refresh.ms", ms(placement.DefaultRefresh), "How often the metadata partitions' leaders are read to place the coordinator shards, ms.", 100, 600000, func(c *Config) *time.Duration { return &c.ClusterPlacementRefresh }),
	{key: "broker.rack", def: "",
		doc: "This sidecar's rack (zone), as its broker's: announced to the cluster; Metadata sends the clients of this zone to it.",
		set: func(c *Config, v string) error { c.Rack = strings.TrimSpace(v); return nil }},
	{key: "diskless.client.zone.cidrs", def: "",
		doc: "The zones of clients by address, zone=CIDR pairs separated by commas (a=10.0.0.0/16,b=10.1.0.0/16); a client's zone is the diskless_az=<zone> in its client.id, else the longest CIDR holding its address.",
		set: func(c *Config, v string) (err error) { c.ClientZones, err = server.ParseZoneCIDRs(v); return err }},
	msOption("producer.id.expiration.ms", itoa(coordinator.DefaultProducerIDExpirationMs), "Idle time after which an idempotent producer's state is forgotten, ms.", 1, math.MaxInt64/int64(time.Millisecond), func(c *Config) *time.Duration { return &c.ProducerIDExpiration }),
	{key: "http.listener", def: "127.0.0.1:9644",
		doc: "host:port of the HTTP endpoint: /metrics (Prometheus), /healthz, /readyz; empty disables it; port 0 picks a free port.",
		set: func(c *Config, v string) error {
			v = strings.TrimSpace(v)
			if v != "" {
				if _, port, err := net.SplitHostPort(v); err != nil {
					return err
				} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
					return fmt.Errorf("bad port %q", port)
				}
			}
			c.HTTPListener = v
			return nil
		}},
	{key: "otel.exporter.otlp.endpoint", def: "",
		doc: "Base URL of an OTLP receiver (http://host:4318 over http/protobuf, http://host:4317 with OTEL_EXPORTER_OTLP_PROTOCOL=grpc; https:// for TLS) to export traces to; empty: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT, and no tracing without them. The other OTEL_* variables apply.",
		set: func(c *Config, v string) error {
			v = strings.TrimSpace(v)
			if err := telemetry.ValidateEndpoint(v); err != nil {
				return err
			}
			c.OTLPEndpoint = v
			return nil
		}},
	{key: "otel.traces.sampler.ratio", def: "",
		doc: "Share of requests traced, in [0, 1] (parent-based ratio sampling: a request's spans, and those of the files carrying its batches, are kept or dropped together); empty: OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG, by default every request.",
		set: func(c *Config, v string) error {
			v = strings.TrimSpace(v)
			if v == "" {
				c.TraceSampleRatio = -1
				return nil
			}
			r, err := strconv.ParseFloat(v, 64)
			if err != nil || math.IsNaN(r) || r < 0 || r > 1 {
				return fmt.Errorf("must be a number in [0, 1], or empty")
			}
			c.TraceSampleRatio = r
			return nil
		}},
	periodOption("diskless.retention.check.interval.ms", ms(coordinator.DefaultRetentionCheckInterval), "How often each coordinator shard applies retention.ms and retention.bytes, ms; -1 disables retention.", 86400000, func(c *Config) *time.Duration { return &c.RetentionCheckInterval }),
	msOption("diskless.file.deletion.delay.ms", ms(coordinator.DefaultFileDeletionDelay), "How long an object whose batches are all gone stays readable before it is deleted, ms (as Kafka's file.delete.delay.ms).", 0, 86400000, func(c *Config) *time.Duration { return &c.FileDeletionDelay }),
	periodOption("diskless.coordinator.orphan.scan.interval.ms", ms(coordinator.DefaultOrphanScanInterval), "How often to look for objects no coordinator shard knows, ms; -1 disables the scan.", 86400000, func(c *Config) *time.Duration { return &c.OrphanScanInterval }),
	boolOption("diskless.consolidation.enable", "true", "Rewrite old WAL runs into per-partition segment objects (consolidation), which keeps a shard's metadata bounded; false stops the passes (segment objects already written are still read, retained and deleted).", func(c *Config) *bool { return &c.ConsolidationEnable }),
	periodOption("diskless.consolidation.min.age.ms", ms(coordinator.DefaultConsolidationMinAge), "Age of a WAL object's commit after which its runs are rewritten into per-partition segment objects, ms; -1 disables consolidation.", 604800000, func(c *Config) *time.Duration { return &c.ConsolidationMinAge }),
	periodOption("diskless.consolidation.interval.ms", ms(coordinator.DefaultConsolidationInterval), "How often a consolidation pass starts, ms; -1 stops the passes.", 86400000, func(c *Config) *time.Duration { return &c.ConsolidationInterval }),
	intOption("diskless.consolidation.max.bytes.per.sec", itoa(coordinator.DefaultConsolidationMaxBytesPerSec), "Bytes of WAL objects consolidation reads (and copies into segments) per second, at most; -1: no limit.", -1, math.MaxInt64, func(c *Config) *int64 { return &c.ConsolidationMaxBytesPerSec }),
	intOption("diskless.consolidation.segment.bytes", itoa(coordinator.DefaultSegmentBytes), "Size a segment object (data, index and trailer) is rolled at, for topics without segment.bytes.", 1<<20, coordinator.MaxSegmentBytes, func(c *Config) *int64 { return &c.ConsolidationSegmentBytes }),
	msOption("diskless.consolidation.segment.ms", ms(coordinator.DefaultSegmentRollTime), "How long past the minimum age a partition's oldest unconsolidated run waits for its segment object to fill, ms, for topics without segment.ms.", 1, 604800000, func(c *Config) *time.Duration { return &c.ConsolidationSegmentRollTime }),
	intOption("diskless.consolidation.index.interval.bytes", itoa(int64(coordinator.DefaultConsolidationIndexIntervalBytes)), "Bytes of batches between two entries of a segment object's index.", 4096, 1<<30, func(c *Config) *int32 { return &c.ConsolidationIndexIntervalBytes }),
	msOption("diskless.coordinator.orphan.scan.grace.period.ms", ms(coordinator.DefaultOrphanScanGracePeriod), "Age below which an unknown object is never deleted (an upload or commit may be in flight), ms; at least 600000.", 600000, 30*86400000, func(c *Config) *time.Duration { return &c.OrphanScanGracePeriod }),
	msOption("group.initial.rebalance.delay.ms", ms(group.DefaultInitialRebalanceDelay), "How long the first rebalance of an empty classic consumer group waits for more members, ms.", 1, 3600000, func(c *Config) *time.Duration { return &c.GroupInitialRebalanceDelay }),
	msOption("group.min.session.timeout.ms", ms(group.DefaultMinSessionTimeout), "Least session timeout a classic group member may ask, ms.", 1, 86400000, func(c *Config) *time.Duration { return &c.GroupMinSessionTimeout }),
	msOption("group.max.session.timeout.ms", ms(group.DefaultMaxSessionTimeout), "Largest session timeout a classic group member may ask, ms.", 1, 86400000, func(c *Config) *time.Duration { return &c.GroupMaxSessionTimeout }),
	intOption("group.max.size", itoa(group.DefaultMaxSize), "Most members of a classic consumer group; past it JoinGroup gets GROUP_MAX_SIZE_REACHED.", 1, maxInt32, func(c *Config) *int { return &c.GroupMaxSize }),
	msOption("group.consumer.session.timeout.ms", ms(group.DefaultConsumerSessionTimeout), "Session timeout of a KIP-848 consumer group member, ms.", 1, 86400000, func(c *Config) *time.Duration { return &c.GroupConsumerSessionTimeout }),
	msOption("group.consumer.heartbeat.interval.ms", ms(group.DefaultConsumerHeartbeat), "Heartbeat interval KIP-848 members are told to use, ms; below group.consumer.session.timeout.ms.", 1, 86400000, func(c *Config) *time.Duration { return &c.GroupConsumerHeartbeatInterval }),
	msOption("group.consumer.assignment.interval.ms", ms(group.DefaultAssignmentInterval), "Least time between two runs of a KIP-848 consumer group's server-side assignor, ms: members joining or leaving within it are assigned together when it has passed (KIP-1263); 0 runs it for every group epoch.", 0, 86400000, func(c *Config) *time.Duration { return &c.GroupConsumerAssignmentInterval }),
	intOption("group.consumer.max.size", itoa(group.DefaultConsumerMaxSize), "Most members of a KIP-848 consumer group; past it the heartbeat gets GROUP_MAX_SIZE_REACHED.", 1, maxInt32, func(c *Config) *int { return &c.GroupConsumerMaxSize }),
	intOption("offsets.retention.minutes", itoa(int64(group.DefaultOffsetsRetention/time.Minute)), "How long committed offsets of an empty consumer group (or of topics a group no longer consumes) are kept, minutes.", 1, math.MaxInt32, func(c *Config) *int64 { return &c.OffsetsRetentionMinutes }),
	periodOption("offsets.retention.check.interval.ms", ms(coordinator.DefaultOffsetsRetentionCheckInterval), "How often each coordinator shard removes expired committed offsets, ms; -1 disables it.", 86400000, func(c *Config) *time.Duration { return &c.OffsetsRetentionCheckInterval }),
	intOption("transaction.max.timeout.ms", itoa(txn.DefaultMaxTimeoutMs), "Largest transaction.timeout.ms a transactional producer may ask for, ms; a larger one gets INVALID_TRANSACTION_TIMEOUT (SPEC §15).", 1, math.MaxInt32, func(c *Config) *int32 { return &c.TxnMaxTimeoutMs }),
	intOption("transactional.id.expiration.ms", itoa(txn.DefaultIDExpirationMs), "Idle time after which a transactional id with no open transaction is removed, ms.", 1, math.MaxInt32, func(c *Config) *int64 { return &c.TxnIDExpirationMs }),
	msOption("transaction.abort.timed.out.transaction.cleanup.interval.ms", ms(coordinator.DefaultTxnAbortCheckInterval), "How often each coordinator shard aborts the transactions whose timeout passed (and finishes those whose markers are not all written), ms.", 1, math.MaxInt32, func(c *Config) *time.Duration { return &c.TxnAbortCheckInterval }),
	msOption("transaction.remove.expired.transaction.cleanup.interval.ms", ms(coordinator.DefaultTxnIDExpirationCheckInterval), "How often each coordinator shard removes the transactional ids idle for transactional.id.expiration.ms, ms.", 1, math.MaxInt32, func(c *Config) *time.Duration { return &c.TxnIDExpirationCheckInterval }),
	msOption("shutdown.timeout.ms", "30000", "How long SIGTERM waits for files in flight to upload and commit, ms.", 0, 3600000, func(c *Config) *time.Duration { return &c.ShutdownTimeout }),
	{key: "log.level", def: "info", doc: "debug, info, warn or error.",
		set: func(c *Config, v string) error { return c.LogLevel.UnmarshalText([]byte(strings.TrimSpace(v))) }},
	{key: "log.format", def: "text", doc: "text or json.",
		set: func(c *Config, v string) error {
			switch v {
			case "text", "json":
				c.LogFormat = v
				return nil
			}
			return fmt.Errorf("must be text or json")
		}},
}

func init() { options = append(options, securityOptions...) }

// sslOption is a broker-wide ssl.* key; listener.name.<name>.<key>
// overrides it for one listener.
func sslOption(key, def, doc string) option {
	return option{key: key, def: def, doc: doc, set: func(c *Config, v string) error {
		if c.SSL == nil {
			c.SSL = map[string]string{}
		}
		c.SSL[key] = v
		return nil
	}}
}

// ConfigError names the key whose value was refused.
type ConfigError struct {
	Key, Value string
	Err        error
}

func (e *ConfigError) Error() string {
	if e.Value == "" && e.Err == nil {
		return fmt.Sprintf("unknown config key %q", e.Key)
	}
	return fmt.Sprintf("config key %s: invalid value %q: %v", e.Key, e.Value, e.Err)
}

// EnvPrefix starts the environment variables that set config keys: the
// key upper-cased, each "." written "_" (DISKLESS_SIDECAR_NODE_ID=3 sets
// node.id=3). Keys hold only lower-case letters, digits and dots, so the
// mapping is one to one. Meant for containers (deploy/kubernetes).
const EnvPrefix = "DISKLESS_SIDECAR_"

// EnvSets returns the "key=value" overrides of the DISKLESS_SIDECAR_*
// variables in environ (os.Environ's form), sorted by key. A variable that
// names no key comes out as that unknown key, which LoadConfig refuses.
func EnvSets(environ []string) []string {
	var sets []string
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		name, found := strings.CutPrefix(k, EnvPrefix)
		if !ok || !found || name == "" {
			continue
		}
		sets = append(sets, strings.ToLower(strings.ReplaceAll(name, "_", "."))+"="+v)
	}
	sort.Strings(sets)
	return sets
}

// LoadConfig builds a Config from the defaults, then the properties file at
// path (if not ""), then each "key=value" in sets, in order. Unknown keys
// and bad values are errors naming the key (*ConfigError).
func LoadConfig(path string, sets []string) (Config, error) {
	byKey := make(map[string]*option, len(options))
	for i := range options {
		byKey[options[i].key] = &options[i]
	}
	var c Config
	for _, o := range options {
		if err := o.set(&c, o.def); err != nil {
			panic(fmt.Sprintf("default of %s does not parse: %v", o.key, err))
		}
	}
	apply := func(k, v string) error {
		o, ok := byKey[k]
		if name, key, prefixed := listenerPrefixed(k); !ok && prefixed {
			if c.ListenerOverrides == nil {
				c.ListenerOverrides = map[string]map[string]string{}
			}
			if c.ListenerOverrides[name] == nil {
				c.ListenerOverrides[name] = map[string]string{}
			}
			c.ListenerOverrides[name][key] = v
			return nil
		}
		if !ok {
			return &ConfigError{Key: k}
		}
		if err := o.set(&c, v); err != nil {
			return &ConfigError{Key: k, Value: v, Err: err}
		}
		return nil
	}
	if path != "" {
		l := properties.Loader{Encoding: properties.UTF8, DisableExpansion: true}
		p, err := l.LoadFile(path)
		if err != nil {
			return Config{}, fmt.Errorf("reading config file: %w", err)
		}
		keys := p.Keys()
		sort.Strings(keys)
		for _, k := range keys {
			v, _ := p.Get(k)
			if err := apply(k, v); err != nil {
				return Config{}, err
			}
		}
	}
	for _, s := range sets {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return Config{}, fmt.Errorf("--set %q: want key=value", s)
		}
		if err := apply(strings.TrimSpace(k), v); err != nil {
			return Config{}, err
		}
	}
	return c, c.check()
}

// check enforces rules between keys.
func (c *Config) check() error {
	if err := c.checkListeners(); err != nil {
		return err
	}
	if c.StorageBackend == "s3" && c.S3Bucket == "" {
		return &ConfigError{Key: "diskless.storage.s3.bucket", Value: "",
			Err: fmt.Errorf("required with diskless.storage.backend=s3")}
	}
	if c.Cluster && c.MetadataLog != "kafka" {
		return &ConfigError{Key: "diskless.cluster.enable", Value: "true",
			Err: fmt.Errorf("needs diskless.metadata.log=kafka: the sidecars share the metadata topic's shards")}
	}
	if c.Cluster && c.ClusterHeartbeatInterval >= c.ClusterSessionTimeout {
		return &ConfigError{Key: "diskless.cluster.heartbeat.interval.ms", Value: ms(c.ClusterHeartbeatInterval),
			Err: fmt.Errorf("must be below diskless.cluster.session.timeout.ms (%d)", c.ClusterSessionTimeout.Milliseconds())}
	}
	if c.MetadataLog == "kafka" && len(c.MetadataKafkaBrokers) == 0 {
		return &ConfigError{Key: "diskless.metadata.kafka.bootstrap.servers", Value: "",
			Err: fmt.Errorf("required with diskless.metadata.log=kafka")}
	}
	if c.MetadataLog == "kafka" {
		if _, err := kafkaClientOpts(*c); err != nil {
			return err
		}
	}
	if c.MetadataLog == "kafka" && strings.Trim(c.ObjectKeyPrefix, "/") == kafkalog.DefaultSnapshotPrefix {
		// The orphan scan would take the snapshots for orphans.
		return &ConfigError{Key: "diskless.object.key.prefix", Value: c.ObjectKeyPrefix,
			Err: fmt.Errorf("must not be %s, the metadata log's snapshot prefix, with diskless.metadata.log=kafka", kafkalog.DefaultSnapshotPrefix)}
	}
	if c.QueuedMaxRequestBytes < int64(c.SocketRequestMaxBytes) {
		return &ConfigError{Key: "queued.max.request.bytes", Value: strconv.FormatInt(c.QueuedMaxRequestBytes, 10),
			Err: fmt.Errorf("must be ≥ socket.request.max.bytes (%d)", c.SocketRequestMaxBytes)}
	}
	if int64(c.AppendBufferMaxBytes)+int64(c.SocketRequestMaxBytes) > wal.MaxObjectBytes {
		// A file holds up to the buffer size plus one whole request, and
		// a WAL object must stay addressable by int32 byte offsets.
		return &ConfigError{Key: "diskless.append.buffer.max.bytes", Value: strconv.Itoa(c.AppendBufferMaxBytes),
			Err: fmt.Errorf("plus socket.request.max.bytes (%d) must not exceed %d, the largest WAL object", c.SocketRequestMaxBytes, wal.MaxObjectBytes)}
	}
	if c.UploadHedgeMaxDelay < c.UploadHedgeMinDelay {
		return &ConfigError{Key: "diskless.upload.hedge.max.delay.ms", Value: strconv.FormatInt(c.UploadHedgeMaxDelay.Milliseconds(), 10),
			Err: fmt.Errorf("must be ≥ diskless.upload.hedge.min.delay.ms (%d)", c.UploadHedgeMinDelay.Milliseconds())}
	}
	if c.AppendMaxPendingBytes < int64(c.AppendBufferMaxBytes) {
		return &ConfigError{Key: "diskless.append.max.pending.bytes", Value: strconv.FormatInt(c.AppendMaxPendingBytes, 10),
			Err: fmt.Errorf("must be ≥ diskless.append.buffer.max.bytes (%d)", c.AppendBufferMaxBytes)}
	}
	return nil
}

// printConfigDocs writes every key with its default and meaning.
func printConfigDocs(w *os.File) {
	for _, o := range options {
		fmt.Fprintf(w, "  %s (default %q)\n      %s\n", o.key, o.def, o.doc)
	}
}
