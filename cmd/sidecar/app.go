package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/diskless-sidecar/sidecar/cache"
	"github.com/diskless-sidecar/sidecar/commit"
	"github.com/diskless-sidecar/sidecar/coordinator"
	"github.com/diskless-sidecar/sidecar/fetch"
	"github.com/diskless-sidecar/sidecar/group"
	"github.com/diskless-sidecar/sidecar/internal/acl"
	"github.com/diskless-sidecar/sidecar/internal/telemetry"
	"github.com/diskless-sidecar/sidecar/metalog"
	"github.com/diskless-sidecar/sidecar/metalog/kafkalog"
	"github.com/diskless-sidecar/sidecar/objstore"
	"github.com/diskless-sidecar/sidecar/objstore/s3"
	"github.com/diskless-sidecar/sidecar/peer"
	"github.com/diskless-sidecar/sidecar/produce"
	"github.com/diskless-sidecar/sidecar/segment"
	"github.com/diskless-sidecar/sidecar/server"
	"github.com/diskless-sidecar/sidecar/txn"
	"github.com/diskless-sidecar/sidecar/upload"
	"github.com/diskless-sidecar/sidecar/wal"
)

// app is one running sidecar: every component, wired, and what it takes to
// stop them in order.
type app struct {
	log     *slog.Logger
	dir     *dataDir
	coord   *coordinator.Coordinator
	cache   *cache.Cache
	produce *produce.Handler
	// uploader's losing hedge attempts finish and are deleted in the
	// background; the stop waits for them before the store closes.
	uploader *upload.Uploader
	fetch    *fetch.Handler
	server   *server.Server
	served   chan error    // Serve's result
	http     *httpEndpoint // nil when http.listener is empty
	metrics  *telemetry.Prometheus
	// tracing exports spans over OTLP; nil when tracing is off.
	tracing *telemetry.Tracing
	// closeStore releases the object store (the S3 client's connections).
	closeStore func()
	// metaTopic is the metadata log's topic with diskless.metadata.log=kafka.
	metaTopic *kafkalog.Topic
	// cluster is this sidecar's part of a cluster (diskless.cluster.enable),
	// else nil.
	cluster *clusterPart
}

// start opens data.dir and every component, binds the listener and starts
// serving. On error everything opened so far is closed again.
func start(cfg Config, log *slog.Logger) (*app, error) { return startTraced(cfg, log, nil) }

// startTraced is start with tp, when not nil, receiving the spans instead
// of the OTLP export the configuration describes (the trace tests' in-memory
// exporter); the caller shuts tp down.
func startTraced(cfg Config, log *slog.Logger, tp trace.TracerProvider) (_ *app, err error) {
	a := &app{log: log, served: make(chan error, 1)}
	// closers undo what was opened so far if a later step fails; they
	// refer to a, which stays set whatever start returns.
	var closers []func()
	defer func() {
		if err != nil {
			for i := len(closers) - 1; i >= 0; i-- {
				closers[i]()
			}
		}
	}()

	if err := validateComponents(cfg); err != nil {
		return nil, err
	}
	if a.dir, err = openDataDir(cfg.DataDir, cfg); err != nil {
		return nil, err
	}
	closers = append(closers, a.dir.close)

	metrics, err := telemetry.NewPrometheus()
	if err != nil {
		return nil, err
	}
	a.metrics = metrics
	closers = append(closers, func() { metrics.Shutdown(context.Background()) })
	if cfg.HTTPListener != "" {
		if a.http, err = startHTTP(cfg.HTTPListener, metrics.Handler(), log.With(slog.String("component", "http"))); err != nil {
			return nil, err
		}
		closers = append(closers, func() { a.http.close(context.Background()) })
	}

	// Traces (DESIGN §Observability, Traces): tp stays nil when off, and
	// then nothing is wrapped nor any span started.
	if tp == nil {
		if a.tracing, err = openTracing(cfg, log); err != nil {
			return nil, err
		}
		if a.tracing != nil {
			tp = a.tracing
			closers = append(closers, func() { a.tracing.Shutdown(context.Background()) })
		}
	}

	store, closeStore, err := openStore(cfg, log.With(slog.String("component", "objstore")), metrics, tp)
	if err != nil {
		return nil, err
	}
	a.closeStore = closeStore
	closers = append(closers, closeStore)

	// The coordinator shards' metadata logs: files under data.dir, or the
	// partitions of the metadata topic on a Kafka cluster.
	var openLog func(int32) (metalog.Log, error)
	coordDir := filepath.Join(cfg.DataDir, "coordinator")
	if cfg.MetadataLog == "kafka" {
		if a.metaTopic, err = openKafkaLog(cfg, store, log.With(slog.String("component", "metalog"))); err != nil {
			return nil, err
		}
		closers = append(closers, a.metaTopic.Close)
		if err := a.dir.useClusterID(a.metaTopic.ClusterID(), "diskless.metadata.kafka.bootstrap.servers",
			strings.Join(cfg.MetadataKafkaBrokers, ",")); err != nil {
			return nil, err
		}
		openLog, coordDir = a.metaTopic.OpenLog, ""
	}
	// Objects live under <diskless.object.key.prefix>/<cluster.id>/ (with
	// diskless.metadata.log=kafka, …/<cluster.id>/<diskless.metadata.topic>/):
	// sidecars of other coordinator states that share a bucket (and
	// prefix) by mistake never see, and so never orphan-scan away, each
	// other's objects.
	cfg.ObjectKeyPrefix += "/" + a.dir.clusterID
	if cfg.MetadataLog == "kafka" {
		cfg.ObjectKeyPrefix += "/" + a.metaTopic.Name()
	}
	abortStaleUploads(store, cfg, log.With(slog.String("component", "objstore")))
	// Consolidation puts its segment objects (up to
	// diskless.consolidation.segment.bytes, 128 MiB) as one PUT each, not
	// in diskless.upload.part.bytes parts: they are written in the
	// background, where parts sent in parallel buy nothing, and each part
	// is billed as a request (DESIGN §Consolidation).
	segments := store
	if s, ok := store.(*s3.Store); ok {
		segments = wholePuts{s}
	}
	if tp != nil {
		store = telemetry.TraceStore(tp, store)
		segments = telemetry.TraceStore(tp, segments)
	}

	sidecars := &localSidecar{node: cfg.NodeID}
	var (
		coordSidecars coordinator.Sidecars = sidecars
		openFollower  func(int32) (metalog.Follower, error)
		remote        coordinator.Remote
		files         coordinator.FileDescriber
	)
	if cfg.Cluster {
		if a.cluster, err = newClusterPart(cfg, log.With(slog.String("component", "cluster"))); err != nil {
			return nil, err
		}
		closers = append(closers, a.cluster.close)
		coordSidecars = peer.NewSidecars(cfg.NodeID, a.cluster.placed, sidecars.Self(), a.cluster.peers)
		openFollower, remote, files = a.metaTopic.Follow, a.cluster.remote, a.cluster.remote
	}
	a.coord, err = coordinator.Open(coordinator.Config{
		Sidecars:               coordSidecars,
		OpenFollower:           openFollower,
		Remote:                 remote,
		Files:                  files,
		Dir:                    coordDir,
		OpenLog:                openLog,
		NumShards:              cfg.MetadataShards,
		NodeID:                 cfg.NodeID,
		ProducerIDExpirationMs: cfg.ProducerIDExpiration.Milliseconds(),
		Objects:                store,
		ObjectKeyPrefix:        cfg.ObjectKeyPrefix,
		RetentionCheckInterval: cfg.RetentionCheckInterval,
		FileDeletionDelay:      cfg.FileDeletionDelay,
		OrphanScanInterval:     cfg.OrphanScanInterval,
		OrphanScanGracePeriod:  cfg.OrphanScanGracePeriod,
		Logger:                 log.With(slog.String("component", "coordinator")),

		Segments:                        segments,
		ConsolidationMinAge:             consolidationMinAge(&cfg),
		ConsolidationInterval:           cfg.ConsolidationInterval,
		ConsolidationMaxBytesPerSec:     cfg.ConsolidationMaxBytesPerSec,
		SegmentBytes:                    cfg.ConsolidationSegmentBytes,
		SegmentRollTime:                 cfg.ConsolidationSegmentRollTime,
		ConsolidationIndexIntervalBytes: cfg.ConsolidationIndexIntervalBytes,
		ConsolidationStagingDir:         filepath.Join(cfg.DataDir, "consolidation"),
		Groups: group.Config{
			MinSessionTimeout:         cfg.GroupMinSessionTimeout,
			MaxSessionTimeout:         cfg.GroupMaxSessionTimeout,
			InitialRebalanceDelay:     cfg.GroupInitialRebalanceDelay,
			MaxSize:                   cfg.GroupMaxSize,
			OffsetsRetention:          time.Duration(cfg.OffsetsRetentionMinutes) * time.Minute,
			ConsumerSessionTimeout:    cfg.GroupConsumerSessionTimeout,
			ConsumerHeartbeatInterval: cfg.GroupConsumerHeartbeatInterval,
			AssignmentInterval:        assignmentInterval(cfg.GroupConsumerAssignmentInterval),
			ConsumerMaxSize:           cfg.GroupConsumerMaxSize,
		},
		OffsetsRetentionCheckInterval: cfg.OffsetsRetentionCheckInterval,
		Txns:                          txn.Config{MaxTimeoutMs: cfg.TxnMaxTimeoutMs, IDExpirationMs: cfg.TxnIDExpirationMs},
		TxnAbortCheckInterval:         cfg.TxnAbortCheckInterval,
		TxnIDExpirationCheckInterval:  cfg.TxnIDExpirationCheckInterval,
	})
	if errors.Is(err, coordinator.ErrShardCountChanged) {
		return nil, &ConfigError{Key: "diskless.metadata.topic.num.partitions", Value: fmt.Sprint(cfg.MetadataShards), Err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("opening the coordinator: %w", err)
	}
	closers = append(closers, func() { a.coord.Close() })
	// The coordinator's shards, as the stages reach them: alone, the
	// coordinator itself; in a cluster, through the router.
	var (
		shards     commit.Shards     = a.coord
		fetchCoord fetch.Coordinator = a.coord
		catalog    server.Catalog    = a.coord
	)
	if a.cluster != nil {
		if err := a.cluster.startRouter(cfg, a.coord); err != nil {
			return nil, err
		}
		shards, fetchCoord = a.cluster.router, peer.NewReader(a.coord, a.cluster.router)
		catalog = clusterCatalog{Coordinator: a.coord, router: a.cluster.router}
	}
	// The store answered and the coordinator opened: only now is the
	// directory bound to these values (a failed start binds nothing).
	if err := a.dir.saveMeta(); err != nil {
		return nil, err
	}
	if a.http != nil {
		a.http.setHealth(a.coord)
	}
	if err := telemetry.ObserveCoordinator(metrics, a.coord.Stats()); err != nil {
		return nil, err
	}
	if err := telemetry.ObserveHealth(metrics, func() ([]coordinator.ShardHealth, error) {
		h := a.coord.Health()
		return h.Shards, live(h)
	}); err != nil {
		return nil, err
	}
	if err := telemetry.ObserveLimits(metrics, cfg.AppendMaxPendingBytes); err != nil {
		return nil, err
	}

	if a.cache, err = cache.New(cacheConfig(cfg), store); err != nil {
		return nil, err
	}
	closers = append(closers, func() { a.cache.Close() })
	if err := telemetry.ObserveCache(metrics, a.cache.Stats()); err != nil {
		return nil, err
	}

	uploader, err := upload.New(uploadConfig(cfg), store, upload.WithLogger(log.With(slog.String("component", "upload"))))
	if err != nil {
		return nil, err
	}
	a.uploader = uploader
	closers = append(closers, uploader.Close)
	if err := telemetry.ObserveUpload(metrics, uploader.Stats()); err != nil {
		return nil, err
	}
	var commitShards commit.Shards = telemetry.NewShards(metrics, shards)
	if tp != nil {
		commitShards = telemetry.TraceShards(tp, commitShards)
	}
	committer, err := commit.New(commit.Config{
		NodeID:      cfg.NodeID,
		MaxAttempts: cfg.CommitMaxAttempts,
		Logger:      log.With(slog.String("component", "commit")),
		Objects:     store,
	}, commitShards)
	if err != nil {
		return nil, err
	}
	pcfg := produceConfig(cfg)
	pcfg.Logger = log.With(slog.String("component", "produce"))
	pcfg.MeterProvider = metrics
	pcfg.TracerProvider = tp
	// The transaction coordinator checks transactional batches, at the
	// transactional id's shard wherever it is hosted (DESIGN
	// §Transactions), and writes its markers through this pipeline.
	pcfg.Transactions = a.coord
	a.produce, err = produce.New(pcfg, a.coord, uploader, committer, a.cache)
	if err != nil {
		return nil, err
	}
	a.coord.SetMarkerWriter(a.produce)
	closers = append(closers, func() { a.produce.Close(context.Background()) })

	sidecars.bind(a.produce, a.cache, a.coord)
	if a.http != nil {
		a.http.setTopics(a.coord.Topics)
		a.http.setGroups(func(ctx context.Context) ([]groupJSON, error) { return groupsJSON(ctx, a.coord) })
	}

	fcfg := fetchConfig(cfg)
	fcfg.Logger = log.With(slog.String("component", "fetch"))
	fcfg.TracerProvider = tp
	fetcher, err := fetch.New(fcfg, fetchCoord, a.cache)
	if err != nil {
		return nil, err
	}
	a.fetch = fetcher

	listeners, err := serverListeners(cfg, log.With(slog.String("component", "server")), a.coord.ScramCredential)
	if err != nil {
		return nil, err
	}
	scfg := server.Config{
		Listeners:             listeners,
		MaxReauth:             cfg.MaxReauth,
		FailedAuthDelay:       cfg.FailedAuthDelay,
		NodeID:                cfg.NodeID,
		ClusterID:             a.dir.clusterID,
		AutoCreateTopics:      cfg.AutoCreateTopics,
		NumPartitions:         cfg.NumPartitions,
		MaxRequestBytes:       cfg.SocketRequestMaxBytes,
		MaxQueuedRequestBytes: cfg.QueuedMaxRequestBytes,
		IdleTimeout:           cfg.ConnectionsMaxIdle,
		LogDir:                logDir(cfg),
		Logger:                log.With(slog.String("component", "server")),
		Groups:                a.coord,
		Shards:                a.coord,
		Scram:                 a.coord,
		Disabler:              sidecars.Self(),
		Rack:                  cfg.Rack,
		ClientZones:           cfg.ClientZones,
	}
	if cfg.Authorizer {
		scfg.Authorizer = acl.New(acl.Config{SuperUsers: cfg.SuperUsers, AllowIfNoACL: cfg.AllowIfNoACL}, a.coord.ACLs)
		scfg.ACLs = a.coord
	}
	scfg.Transactions = a.coord
	if a.cluster != nil {
		scfg.Cluster = a.cluster.placed
		scfg.Controller = controller{coord: a.coord, place: a.cluster.placed, peers: a.cluster.peers}
	}
	var (
		producer server.Producer = telemetry.NewProducer(metrics, a.produce)
		fetching server.Fetcher  = telemetry.NewFetcher(metrics, fetcher)
	)
	if tp != nil {
		producer, fetching = telemetry.TraceProducer(tp, producer), telemetry.TraceFetcher(tp, fetching)
	}
	a.server, err = server.New(scfg, producer, fetching, catalog)
	if err != nil {
		return nil, err
	}
	if err := a.server.Listen(); err != nil {
		return nil, &ConfigError{Key: "listeners", Value: listenersString(cfg.Listeners), Err: err}
	}
	if a.cluster != nil {
		// Known only now: the address the other sidecars and clients
		// reach this one at.
		inter, err := cfg.interListener()
		if err != nil {
			return nil, err
		}
		host, port, _ := a.server.AdvertisedListener(inter.Name)
		if err := a.cluster.join(cfg, a.coord, host, port, a.server.AdvertisedListeners()); err != nil {
			return nil, err
		}
	}
	go func() { a.served <- a.server.Serve(context.Background()) }()
	if a.http != nil {
		a.http.ready.Store(true)
	}
	var bound []string
	for _, l := range cfg.Listeners {
		bound = append(bound, l.Name+"="+a.server.ListenerAddr(l.Name).String())
	}
	log.Info("kafka listener started",
		slog.String("addr", a.server.Addr().String()),
		slog.String("listeners", strings.Join(bound, ",")),
		slog.String("data.dir", cfg.DataDir),
		slog.String("cluster.id", a.dir.clusterID),
		slog.Int("node.id", int(cfg.NodeID)))
	return a, nil
}

// shutdown stops in dependency order: the listener stops reading and waits
// for the answers of requests already read while the produce pipeline
// seals its active file and drains (those answers need it); then the cache
// and the coordinator close. Everything must finish within timeout.
func (a *app) shutdown(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var errs []error
	if a.http != nil {
		a.http.ready.Store(false) // out of load balancers first
	}
	if a.cluster != nil {
		// No shard moves from now on; the others take this sidecar's
		// shards once it left the group (after the coordinator closed).
		a.cluster.stopPlacing()
	}
	// The server stops reading and waits for the answers of the requests
	// it read; meanwhile the produce pipeline seals the active file at
	// once (instead of at its age) and drains, which is what those
	// answers wait for. A produce request a reader was still decoding
	// when the pipeline closed gets NOT_LEADER_OR_FOLLOWER, which
	// clients retry elsewhere or after the restart.
	serverDone := make(chan error, 1)
	go func() { serverDone <- a.server.Shutdown(ctx) }()
	if err := a.produce.Close(ctx); err != nil {
		errs = append(errs, fmt.Errorf("produce: %w", err))
	}
	// Losing hedge attempts: each ends within its attempt timeout once
	// cancelled, its delete within 10 s.
	a.uploader.Close()
	if err := <-serverDone; err != nil {
		errs = append(errs, fmt.Errorf("server: %w", err))
	}
	if err := <-a.served; err != nil {
		errs = append(errs, fmt.Errorf("serve: %w", err))
	}
	a.fetch.Close() // the counts of repeated warnings not written yet
	a.cache.Close()
	if err := a.coord.Close(); err != nil {
		errs = append(errs, fmt.Errorf("coordinator: %w", err))
	}
	if a.cluster != nil {
		a.cluster.close()
	}
	if a.http != nil {
		a.http.close(ctx)
	}
	a.metrics.Shutdown(ctx)
	if a.tracing != nil {
		// The spans still queued, within what is left of the timeout.
		if err := a.tracing.Shutdown(ctx); err != nil {
			a.log.Warn("tracing: spans not exported at the stop", slog.Any("err", err))
		}
	}
	if a.metaTopic != nil {
		a.metaTopic.Close()
	}
	a.closeStore()
	a.dir.close()
	return errors.Join(errs...)
}

// openTracing returns the OTLP trace exporter's provider of
// otel.exporter.otlp.endpoint, otel.traces.sampler.ratio and the OTEL_*
// variables, or nil when tracing is off. An OTEL_* setting the sidecar
// cannot honour is a configuration error (exit 2) naming the variable.
// Export failures (a receiver down) are logged, at most one line per
// export attempt (one per batch of spans, every 5 s by default).
func openTracing(cfg Config, log *slog.Logger) (*telemetry.Tracing, error) {
	t, err := telemetry.NewTracing(context.Background(), telemetry.TraceConfig{
		Endpoint:        cfg.OTLPEndpoint,
		SampleRatio:     cfg.TraceSampleRatio,
		ServiceInstance: strconv.Itoa(int(cfg.NodeID)),
	})
	if err != nil {
		if errors.Is(err, telemetry.ErrTraceEnv) {
			return nil, fmt.Errorf("%w: %w", errInvalidConfig, err)
		}
		return nil, &ConfigError{Key: "otel.exporter.otlp.endpoint", Value: cfg.OTLPEndpoint, Err: err}
	}
	if t == nil {
		return nil, nil
	}
	tlog := log.With(slog.String("component", "tracing"))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		tlog.Warn("trace export failed", slog.Any("err", err))
	}))
	endpoint := cfg.OTLPEndpoint
	if endpoint == "" {
		endpoint = "(OTEL_EXPORTER_OTLP_* variables)"
	}
	ratio := "OTEL_TRACES_SAMPLER"
	if cfg.TraceSampleRatio >= 0 {
		ratio = strconv.FormatFloat(cfg.TraceSampleRatio, 'g', -1, 64)
	}
	tlog.Info("exporting traces over OTLP", slog.String("endpoint", endpoint),
		slog.String("protocol", t.Protocol), slog.String("sampler.ratio", ratio))
	return t, nil
}

// storeCheckTimeout bounds the start-up requests to S3 (the bucket check
// and the sweep of stale multipart uploads).
const storeCheckTimeout = 30 * time.Second

// openStore opens the object store diskless.storage.backend names and
// returns it with its release function. An S3 store's requests are
// exported to mp (s3.Config.MeterProvider).
//
// With S3 it checks, before anything else starts, that the bucket answers:
// a bucket that does not exist or refuses the credentials is a
// configuration error naming diskless.storage.s3.bucket (exit 2); a store
// that cannot be reached is a runtime failure (exit 1), so a supervisor
// retries. (abortStaleUploads then sweeps what a dead process left, once
// the WAL prefix is known.)
func openStore(cfg Config, log *slog.Logger, mp metric.MeterProvider, tp trace.TracerProvider) (objstore.Store, func(), error) {
	if cfg.StorageBackend != "s3" {
		d, err := objstore.NewDir(filepath.Join(cfg.DataDir, "objects"))
		if err != nil {
			return nil, nil, fmt.Errorf("opening the object store: %w", err)
		}
		return d, func() {}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeCheckTimeout)
	defer cancel()
	scfg := s3Config(cfg)
	scfg.Logger = log
	scfg.MeterProvider = mp
	scfg.TracerProvider = tp
	s, err := s3.New(ctx, scfg)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errInvalidConfig, err)
	}
	if err := s.Check(ctx); err != nil {
		s.Close()
		if errors.Is(err, objstore.ErrPermanent) {
			return nil, nil, &ConfigError{Key: "diskless.storage.s3.bucket", Value: cfg.S3Bucket, Err: err}
		}
		// Unreachable or failing: maybe transient (exit 1, a supervisor
		// retries), but name where it looked.
		where := cfg.S3Endpoint
		switch {
		case where != "":
		case cfg.S3Region != "":
			where = "AWS S3 in " + cfg.S3Region
		default:
			where = "AWS S3 in the SDK's default region"
		}
		return nil, nil, fmt.Errorf("opening the object store (diskless.storage.s3.endpoint: %s, diskless.storage.s3.bucket: %s): %w", where, cfg.S3Bucket, err)
	}
	log.Info("object store: s3", slog.String("bucket", cfg.S3Bucket), slog.String("prefix", cfg.S3Prefix),
		slog.String("endpoint", cfg.S3Endpoint))
	return s, s.Close, nil
}

// abortStaleUploads aborts the S3 multipart uploads under the WAL prefix
// older than the orphan grace period — left by a process that died
// mid-upload — best effort, retried in the background when the store
// throttles (s3.Store.SweepStaleUploads; the local-directory store has
// none).
func abortStaleUploads(store objstore.Store, cfg Config, log *slog.Logger) {
	s, ok := store.(*s3.Store)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeCheckTimeout)
	defer cancel()
	// A failed sweep (the store throttling) is retried in the background
	// until s.Close.
	n, err := s.SweepStaleUploads(ctx, cfg.ObjectKeyPrefix+"/", cfg.OrphanScanGracePeriod)
	if err != nil {
		log.Warn("could not abort stale multipart uploads; retrying in the background", slog.Any("err", err))
	} else if n > 0 {
		log.Info("aborted stale multipart uploads", slog.Int("uploads", n))
	}
}

// metalogOpenTimeout bounds connecting to the Kafka cluster of the
// metadata log and creating or checking its topic at start-up.
const metalogOpenTimeout = time.Minute

// openKafkaLog opens the metadata topic (diskless.metadata.log=kafka),
// snapshots going to store. A topic or cluster that refuses the
// configuration is a *ConfigError naming the key (exit 2); an unreachable
// cluster is a runtime failure (exit 1) naming the servers it tried.
func openKafkaLog(cfg Config, store objstore.Store, log *slog.Logger) (*kafkalog.Topic, error) {
	ctx, cancel := context.WithTimeout(context.Background(), metalogOpenTimeout)
	defer cancel()
	kc := kafkaLogConfig(cfg)
	opts, err := kafkaClientOpts(cfg)
	if err != nil {
		return nil, err
	}
	kc.ClientOpts = append(kc.ClientOpts, opts...)
	kc.Snapshots = store
	kc.Logger = log
	t, err := kafkalog.Open(ctx, kc)
	var ke *kafkalog.ConfigError
	switch {
	case errors.As(err, &ke):
		return nil, &ConfigError{Key: ke.Key, Value: kafkaKeyValue(cfg, ke.Key), Err: ke.Err}
	case err != nil:
		return nil, fmt.Errorf("opening the metadata log (diskless.metadata.kafka.bootstrap.servers: %s, diskless.metadata.topic: %s): %w",
			strings.Join(cfg.MetadataKafkaBrokers, ","), cfg.MetadataTopic, err)
	}
	log.Info("metadata log: kafka", slog.String("topic", t.Name()), slog.String("kafka.cluster.id", t.ClusterID()),
		slog.Int("shards", int(cfg.MetadataShards)))
	return t, nil
}

// kafkaKeyValue is the configured value of one of the metadata log's keys.
func kafkaKeyValue(cfg Config, key string) string {
	switch key {
	case "diskless.metadata.topic":
		return cfg.MetadataTopic
	case "diskless.metadata.topic.num.partitions":
		return itoa(cfg.MetadataShards)
	case "diskless.metadata.topic.replication.factor":
		return itoa(cfg.MetadataTopicReplicas)
	}
	return strings.Join(cfg.MetadataKafkaBrokers, ",")
}

func kafkaLogConfig(cfg Config) kafkalog.Config {
	name := cfg.Listeners[0]
	if a, ok := cfg.advertisedFor(name.Name); ok {
		name = a
	}
	return kafkalog.Config{
		Brokers:           cfg.MetadataKafkaBrokers,
		Topic:             cfg.MetadataTopic,
		Partitions:        cfg.MetadataShards,
		ReplicationFactor: cfg.MetadataTopicReplicas,
		// Named in the shards' claims, for people reading the topic.
		WriterName: fmt.Sprintf("sidecar node.id %d %s", cfg.NodeID, name),
	}
}

func s3Config(cfg Config) s3.Config {
	return s3.Config{
		Bucket:            cfg.S3Bucket,
		Prefix:            cfg.S3Prefix,
		Region:            cfg.S3Region,
		Endpoint:          cfg.S3Endpoint,
		PathStyle:         cfg.S3PathStyle,
		PartSize:          cfg.UploadPartBytes,
		SinglePutMaxBytes: singlePutMaxBytes(cfg),
		Concurrency:       cfg.UploadConcurrency,
		RequestTimeout:    cfg.S3RequestTimeout,
	}
}

// wholePuts is an S3 store whose Put is PutWhole: one PutObject per
// object of up to 5 GiB.
type wholePuts struct{ *s3.Store }

// Put implements objstore.Store with s3.Store.PutWhole.
func (w wholePuts) Put(ctx context.Context, key string, data []byte) error {
	return w.PutWhole(ctx, key, data)
}

// singlePutMaxBytes is the largest object sent as one PutObject. A file
// sealed by size holds the buffer plus the request that took it there
// (produce.Handler), so with parts at least as large as the buffer (the
// defaults: 8 MiB each) a file of up to the buffer plus one part is one
// PUT instead of a multipart upload of two parts; with parts smaller than
// the buffer the operator asked for files in parts, and objects above a
// part are multipart uploads as before.
func singlePutMaxBytes(cfg Config) int64 {
	if cfg.UploadPartBytes < int64(cfg.AppendBufferMaxBytes) {
		return cfg.UploadPartBytes
	}
	return min(int64(cfg.AppendBufferMaxBytes)+cfg.UploadPartBytes, s3.MaxPartSize)
}

// The components' configs, from the sidecar's keys. validateComponents
// checks them all before anything is opened, so that a bad value stops
// start-up with exit code 2 and a message naming the key.
func cacheConfig(cfg Config) cache.Config {
	return cache.Config{BlockBytes: cfg.CacheBlockBytes, MaxBytes: cfg.CacheMaxBytes,
		CatchUpMaxBytes: cfg.CacheCatchUpMaxBytes, CheckObject: checkObject}
}

// checkObject is the cache's whole-object check: a segment object's
// (segment.Check) when the object ends with a segment trailer, else a WAL
// object's (wal.Check).
func checkObject(key string, object []byte) error {
	if segment.Is(object) {
		return segment.Check(key, object)
	}
	return wal.Check(key, object)
}

func uploadConfig(cfg Config) upload.Config {
	return upload.Config{
		Prefix:         cfg.ObjectKeyPrefix,
		MaxAttempts:    cfg.UploadMaxAttempts,
		InitialBackoff: cfg.UploadBackoff,
		MaxBackoff:     cfg.UploadBackoffMax,
		AttemptTimeout: cfg.UploadAttemptTimeout,
		// The local store is never hedged: a second write to the same
		// disk shares whatever stalls the first (DESIGN §Produce step 5).
		HedgeDisabled:   !cfg.UploadHedge || cfg.StorageBackend != "s3",
		HedgePercentile: cfg.UploadHedgePercentile,
		HedgeMinDelay:   cfg.UploadHedgeMinDelay,
		HedgeMaxDelay:   cfg.UploadHedgeMaxDelay,
		HedgeMaxPercent: cfg.UploadHedgeMaxPercent,
	}
}

func produceConfig(cfg Config) produce.Config {
	return produce.Config{
		BufferMaxBytes:    cfg.AppendBufferMaxBytes,
		CommitInterval:    cfg.AppendCommitInterval,
		MaxPendingBytes:   cfg.AppendMaxPendingBytes,
		UploadConcurrency: cfg.UploadInflightFiles,
	}
}

func fetchConfig(cfg Config) fetch.Config {
	return fetch.Config{MaxWait: cfg.FetchMaxWait, MaxBytes: cfg.FetchMaxBytes}
}

// errInvalidConfig marks a configuration a component refused; run exits 2.
var errInvalidConfig = errors.New("invalid configuration")

func validateComponents(cfg Config) error {
	fc := fetchConfig(cfg)
	if cfg.StorageBackend == "s3" {
		if err := s3Config(cfg).Validate(); err != nil {
			return fmt.Errorf("%w: %w", errInvalidConfig, err)
		}
	}
	if cfg.MetadataLog == "kafka" {
		if err := kafkaLogConfig(cfg).Validate(); err != nil {
			return fmt.Errorf("%w: %w", errInvalidConfig, err)
		}
	}
	for _, err := range []error{
		cacheConfig(cfg).Validate(),
		uploadConfig(cfg).Validate(),
		produceConfig(cfg).Validate(),
		fc.Validate(),
	} {
		if err != nil {
			return fmt.Errorf("%w: %w", errInvalidConfig, err)
		}
	}
	return nil
}

// logDir is the log dir DescribeLogDirs reports: where the objects are.
func logDir(cfg Config) string {
	if cfg.StorageBackend == "s3" {
		return "s3://" + cfg.S3Bucket + "/" + cfg.S3Prefix
	}
	return filepath.Join(cfg.DataDir, "objects")
}

// assignmentInterval is group.consumer.assignment.interval.ms as
// group.Config takes it: the key's 0 (no batching) is negative there,
// where zero means the default.
func assignmentInterval(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// consolidationMinAge is diskless.consolidation.min.age.ms, or −1 (no
// consolidation) unless diskless.consolidation.enable. Segment objects
// already written are read, retained and deleted either way.
func consolidationMinAge(cfg *Config) time.Duration {
	if !cfg.ConsolidationEnable {
		return -1
	}
	return cfg.ConsolidationMinAge
}
