package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/diskless-sidecar/sidecar/internal/s3fault"
)

// Exit codes.
const (
	exitOK          = 0
	exitSetup       = 1   // a target could not be driven (unreachable, topic not created)
	exitUsage       = 2   // bad flags
	exitInterrupted = 130 // SIGINT/SIGTERM: the report so far was printed
)

func main() {
	os.Exit(mainCode(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the flags that are not part of Config.
type options struct {
	brokers      string
	sidecarPIDs  []int
	kafkaBrokers string
	kafkaPIDs    []int
	kfake        bool
	onlyKfake    bool
	metricsURL   string
	json         bool
	plot         string
	quiet        bool
	// rig: with rig.bin set, a fresh sidecar per store of rigStores,
	// started by the tool, instead of the one at brokers.
	rig       rigOptions
	rigStores []string
	kafka     kafkaOptions
}

// parseFlags parses args into a Config and the other options.
func parseFlags(args []string, stderr io.Writer) (Config, options, error) {
	cfg := defaultConfig()
	var o options
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: go run ./bench/load [flags]

Drives a running sidecar (and, with -kafka, an Apache Kafka it starts, with
-kafka-brokers a running one, or with -kfake franz-go's in-memory kfake,
with the same client settings)
with kgo producers and consumers, prints progress
every second, then throughput, produce and end-to-end latency, and the
sidecar's objects per GiB uploaded and GETs per GiB fetched.

Flags:
`)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.brokers, "brokers", "127.0.0.1:9092", "the sidecar's seed brokers, comma-separated host:port")
	sidecarPIDs := fs.String("sidecar-pids", "", "the sidecar's process id, for the CPU figures (CPU seconds in the window, per GiB produced, MB/s per core); Linux only")
	fs.StringVar(&o.kafkaBrokers, "kafka-brokers", "", "also run the identical load against a running Apache Kafka at these seed brokers (comma-separated host:port), after the sidecar, and print both side by side with ratios")
	kafkaPIDs := fs.String("kafka-pids", "", "the Kafka brokers' process ids (comma-separated), for their CPU figures")
	addKafkaFlags(fs, &o.kafka)
	fs.BoolVar(&o.kfake, "kfake", false, "also run the identical load against an in-process kfake cluster (1 broker on 127.0.0.1) and print both results side by side with ratios")
	fs.BoolVar(&o.onlyKfake, "only-kfake", false, "run against the in-process kfake only (no sidecar needed)")
	fs.StringVar(&cfg.Topic, "topic", "", "topic to produce to and consume from; empty: a fresh load-<time>-<rand> topic per run; an existing topic is consumed from its end offsets")
	partitions := fs.Int("partitions", int(cfg.Partitions), "partitions of the created topic")
	fs.IntVar(&cfg.Producers, "producers", cfg.Producers, "number of kgo producer clients, each with its own goroutine and connection")
	fs.IntVar(&cfg.Consumers, "consumers", cfg.Consumers, "number of kgo consumer clients (partitions dealt round-robin, ConsumePartitions, no groups); 0 consumes nothing")
	fs.DurationVar(&cfg.ConsumerDelay, "consumer-delay", 0, "consumers start polling this long after the producers, from the run's start offsets: a lagging consumer reading data that far behind the head (catch-up reads, GETs per GiB fetched); set -drain long enough for them to catch up")
	fs.IntVar(&cfg.RecordSize, "record-size", cfg.RecordSize, fmt.Sprintf("record value size in bytes (%d to %d; the first 16 carry the send time and run id); no key", minRecordSize, maxRecordSize))
	fs.StringVar(&cfg.Codec, "codec", cfg.Codec, "producer batch compression: none, gzip, snappy, lz4 or zstd (with a codec, values are random hex text, ~2:1 for gzip/zstd)")
	fs.DurationVar(&cfg.Linger, "linger", cfg.Linger, "kgo.ProducerLinger: how long a partition's batch waits for more records")
	fs.StringVar(&cfg.Acks, "acks", cfg.Acks, "produce acks: all, 1 or 0 (1 and 0 need -idempotent=false)")
	fs.BoolVar(&cfg.Idempotent, "idempotent", cfg.Idempotent, "idempotent produce (kgo's default; up to 5 requests in flight per broker)")
	fs.IntVar(&cfg.MaxInflight, "max-inflight", 0, "produce requests in flight per broker and producer with -idempotent=false; 0: kgo's default (1)")
	fs.IntVar(&cfg.MaxBufferedRecords, "max-buffered-records", 0, "records a producer client buffers before Produce blocks; 0: kgo's default (50000)")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "length of the measured window")
	fs.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "load before the measured window, excluded from the figures")
	fs.DurationVar(&cfg.Drain, "drain", cfg.Drain, "after the window, how long producers may flush and consumers catch up")
	fs.Float64Var(&cfg.Rate, "rate", 0, "cap on records/s over all producers; 0: as fast as possible (closed loop: produce latency then includes waiting in the client's full buffer)")
	fs.StringVar(&o.metricsURL, "metrics-url", "http://127.0.0.1:9644/metrics", "the sidecar's Prometheus endpoint (config key http.listener), scraped before and after the window for the store figures; empty: skip")
	fs.StringVar(&o.rig.bin, "sidecar-bin", "", "start the sidecar from this binary, a fresh one with a temporary data.dir for each of -stores, one after the other, instead of driving -brokers (whose -metrics-url and -sidecar-pids are then the started process's); each store is one column of the report")
	storesFlag := fs.String("stores", storeLocal, "with -sidecar-bin, the stores to run the load on, comma-separated: local (the local-directory store), s3 (versitygw on this machine, through the s3fault proxy, no latency added), s3-like (versitygw behind the s3fault proxy holding each answer as -s3-latency draws: S3 Standard's latency)")
	fs.StringVar(&o.rig.latency, "s3-latency", s3fault.S3Like, "the s3-like store's latency model: kinds=bands pairs separated by ';', kinds put (PutObject, UploadPart, CompleteMultipartUpload), get (GetObject) or an S3 operation's name, bands 'weight:min-max' in ms separated by ',' (or one 'min-max'); each answer is held until its draw has passed since the request arrived (internal/s3fault.LatencyModel)")
	fs.Uint64Var(&o.rig.seed, "s3-latency-seed", 1, "seed of the latency model's draws")
	fs.Func("sidecar-set", "with -sidecar-bin, a key=value setting for every sidecar started (repeatable), as its --set", func(v string) error {
		if !strings.Contains(v, "=") {
			return fmt.Errorf("%q: want key=value", v)
		}
		o.rig.sets = append(o.rig.sets, v)
		return nil
	})
	fs.BoolVar(&o.rig.keep, "keep-rig", false, "with -sidecar-bin, keep each store's directory (data.dir, objects, sidecar.log) instead of removing it")
	fs.BoolVar(&o.json, "json", false, "after the text report, print the settings and results as JSON (for bench/RESULTS.md)")
	fs.StringVar(&o.plot, "plot", "", "after the report, write the measured window's produce and end-to-end latencies of every target as latency-by-percentile lines to this file (.svg or .png)")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress lines")
	tlsCA := fs.String("tls-ca", "", "connect over TLS, trusting the CA certificates of this PEM file (the sidecar alone: not with -kafka, -kafka-brokers, -kfake or -sidecar-bin)")
	saslPlain := fs.String("sasl-plain", "", "authenticate with SASL PLAIN as user:password (the sidecar alone, as -tls-ca)")
	saslScram := fs.String("sasl-scram512", "", "authenticate with SASL SCRAM-SHA-512 as user:password (the sidecar alone, as -tls-ca; not with -sasl-plain)")
	if err := fs.Parse(args); err != nil {
		return cfg, o, err
	}
	if *tlsCA != "" || *saslPlain != "" || *saslScram != "" {
		if o.kafka.start || o.kafkaBrokers != "" || o.kfake || o.onlyKfake || o.rig.bin != "" {
			return cfg, o, errors.New("-tls-ca, -sasl-plain and -sasl-scram512 drive a running sidecar alone")
		}
		if *saslPlain != "" && *saslScram != "" {
			return cfg, o, errors.New("-sasl-plain and -sasl-scram512: one SASL mechanism")
		}
		opts, err := securityFlags(*tlsCA, *saslPlain, *saslScram)
		if err != nil {
			return cfg, o, err
		}
		securityOpts = opts
	}
	if fs.NArg() > 0 {
		return cfg, o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	var err error
	if o.sidecarPIDs, err = parsePIDs(*sidecarPIDs); err != nil {
		return cfg, o, fmt.Errorf("-sidecar-pids: %w", err)
	}
	if o.kafkaPIDs, err = parsePIDs(*kafkaPIDs); err != nil {
		return cfg, o, fmt.Errorf("-kafka-pids: %w", err)
	}
	if o.plot != "" {
		if err := checkPlotPath(o.plot); err != nil {
			return cfg, o, err
		}
	}
	if o.kafkaBrokers != "" && (o.kfake || o.onlyKfake) {
		return cfg, o, errors.New("-kafka-brokers and -kfake: one reference at a time, so that the report has one ratio column")
	}
	if err := o.kafka.check(o.kafkaBrokers, o.rig.bin, o.kfake || o.onlyKfake); err != nil {
		return cfg, o, err
	}
	if o.rig.bin != "" {
		if o.rigStores, err = parseStores(*storesFlag); err != nil {
			return cfg, o, fmt.Errorf("-stores: %w", err)
		}
		if _, err := s3fault.ParseLatency(o.rig.latency, o.rig.seed); err != nil {
			return cfg, o, fmt.Errorf("-s3-latency: %w", err)
		}
		if o.onlyKfake {
			return cfg, o, errors.New("-sidecar-bin and -only-kfake: the started sidecars would not be driven")
		}
	}
	cfg.Partitions = int32(*partitions)
	if int(cfg.Partitions) != *partitions {
		return cfg, o, fmt.Errorf("partitions %d: too many", *partitions)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, o, err
	}
	return cfg, o, nil
}

// mainCode runs the tool with args and returns the exit code.
func mainCode(args []string, stdout, stderr io.Writer) int {
	cfg, o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "load: %v\n", err)
		return exitUsage
	}
	if !o.quiet {
		cfg.Progress = stdout
	}

	// The first SIGINT or SIGTERM stops the load and prints the report so
	// far; restoring the default handling then lets a second one kill.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)

	if cfg.Topic == "" {
		// One name for every target, so that reports line up.
		cfg.Topic = newTopicName()
	}
	var kc *kafkaCluster
	if o.kafka.start {
		// Started first: the sidecars may keep their metadata log on it.
		if kc, err = startKafka(o.kafka, o.rig.keep, stdout); err != nil {
			fmt.Fprintf(stderr, "load: %v\n", err)
			return exitSetup
		}
		defer func() {
			if err := kc.stop(); err != nil {
				fmt.Fprintf(stderr, "load: %v\n", err)
			}
		}()
	}
	var results []Result
	if o.rig.bin != "" {
		// One fresh sidecar per store, driven, then stopped, in turn.
		for _, store := range o.rigStores {
			if ctx.Err() != nil {
				break
			}
			ro := o.rig
			if o.kafka.metadata {
				ms := kc.metadataSets(o.kafka, store, cfg.Topic)
				fmt.Fprintf(stdout, "%s: the sidecar's metadata log on the started Kafka: %s\n", store, strings.Join(ms, " "))
				ro.sets = append(ms, ro.sets...)
			}
			r, t, err := startRig(ctx, ro, store, stdout)
			if err != nil {
				fmt.Fprintf(stderr, "load: %v\n", err)
				return exitSetup
			}
			if o.kafka.metadata {
				t.PeerPIDs, t.PeerName = kafkaPIDs(kc.c), "the Kafka brokers holding its metadata log"
			}
			fmt.Fprintf(stdout, "%s: %s, topic %s\n", t.Name, strings.Join(t.Brokers, ","), cfg.Topic)
			res, err := run(ctx, cfg, t)
			if serr := r.stop(); serr != nil {
				fmt.Fprintf(stderr, "load: %v\n", serr)
			}
			if err != nil {
				fmt.Fprintf(stderr, "load: %v\n", err)
				return exitSetup
			}
			results = append(results, res)
		}
	}
	var targets []Target
	if !o.onlyKfake && o.rig.bin == "" {
		targets = append(targets, Target{Name: "sidecar", Brokers: splitBrokers(o.brokers), MetricsURL: o.metricsURL,
			NoMetrics: "-metrics-url is empty", PIDs: o.sidecarPIDs, NoCPU: "-sidecar-pids is empty"})
	}
	if o.kafkaBrokers != "" {
		targets = append(targets, o.kafka.kafkaTarget(splitBrokers(o.kafkaBrokers), o.kafkaPIDs, "-kafka-pids is empty"))
	}
	if kc != nil {
		targets = append(targets, kc.target(o.kafka))
	}
	for _, t := range targets {
		fmt.Fprintf(stdout, "%s: %s, topic %s\n", t.Name, strings.Join(t.Brokers, ","), cfg.Topic)
		r, err := run(ctx, cfg, t)
		if err != nil {
			fmt.Fprintf(stderr, "load: %v\n", err)
			return exitSetup
		}
		results = append(results, r)
	}
	if (o.kfake || o.onlyKfake) && ctx.Err() == nil {
		c, t, err := startKfake()
		if err != nil {
			fmt.Fprintf(stderr, "load: %v\n", err)
			return exitSetup
		}
		fmt.Fprintf(stdout, "%s: %s (in process), topic %s\n", t.Name, strings.Join(t.Brokers, ","), cfg.Topic)
		r, err := run(ctx, cfg, t)
		c.Close()
		if err != nil {
			fmt.Fprintf(stderr, "load: %v\n", err)
			return exitSetup
		}
		results = append(results, r)
	}

	writeReport(stdout, cfg, results)
	if o.json {
		if err := writeJSON(stdout, cfg, results); err != nil {
			fmt.Fprintf(stderr, "load: %v\n", err)
			return exitSetup
		}
	}
	if o.plot != "" {
		if err := writePlot(o.plot, cfg, results); err != nil {
			fmt.Fprintf(stderr, "load: %v\n", err)
			return exitSetup
		}
		fmt.Fprintf(stdout, "latency plot written to %s\n", o.plot)
	}
	if ctx.Err() != nil {
		return exitInterrupted
	}
	return exitOK
}

// splitBrokers splits a comma-separated broker list, dropping blanks.
func splitBrokers(s string) []string {
	var out []string
	for _, b := range strings.Split(s, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// securityFlags turns -tls-ca, -sasl-plain and -sasl-scram512 into
// client options.
func securityFlags(caFile, userPass, scramUserPass string) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if caFile != "" {
		pemBytes, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("-tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemBytes) {
			return nil, fmt.Errorf("-tls-ca %s: no PEM certificate", caFile)
		}
		opts = append(opts, kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	}
	if userPass != "" {
		user, pass, ok := strings.Cut(userPass, ":")
		if !ok || user == "" {
			return nil, errors.New("-sasl-plain: want user:password")
		}
		opts = append(opts, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
	}
	if scramUserPass != "" {
		user, pass, ok := strings.Cut(scramUserPass, ":")
		if !ok || user == "" {
			return nil, errors.New("-sasl-scram512: want user:password")
		}
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
	}
	return opts, nil
}
