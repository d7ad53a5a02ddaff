package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// minRecordSize is the smallest payload the tool produces: the first 16
// bytes carry the send time and the run id (see payload.go).
const minRecordSize = headerSize

// maxRecordSize keeps one record inside kgo's default batch limit
// (ProducerBatchMaxBytes, 1,000,012 bytes) with room for the record framing.
const maxRecordSize = 1_000_000

// Config is one load run's settings. The same Config drives every target so
// that their results compare like for like. The zero value is not valid:
// start from defaultConfig.
type Config struct {
	// Topic is the topic produced to and consumed from. Empty: a fresh
	// name per run (see newTopicName). It is created with Partitions
	// partitions; an existing topic is used as it is, consumed from its end
	// offsets at the start of the run.
	Topic string
	// Partitions is the partition count of a created topic. Default 8.
	Partitions int32
	// Producers is the number of kgo producer clients, each with its own
	// connection and goroutine. Default 4.
	Producers int
	// Consumers is the number of kgo consumer clients; the partitions are
	// dealt round-robin between them, each read with ConsumePartitions (no
	// consumer groups). 0 consumes nothing. Default 1.
	Consumers int
	// ConsumerDelay is how long after the producers start the consumers
	// begin polling, from the run's start offsets: they then read data
	// that far behind the head (a lagging consumer, beyond the sidecar's
	// cache once the delay's worth of data exceeds
	// diskless.cache.max.bytes) and catch up as fast as they can. Their
	// end-to-end latency includes the delay. Default 0.
	ConsumerDelay time.Duration
	// RecordSize is each record's value size in bytes, at least 16 (the
	// send time and run id); records have no key and no headers. Default
	// 1024.
	RecordSize int
	// Codec is the producers' batch compression: none, gzip, snappy, lz4
	// or zstd. Default none.
	Codec string
	// Linger is kgo.ProducerLinger: how long a partition's batch waits for
	// more records. Default 5ms.
	Linger time.Duration
	// Acks is the produce acks: "all" (-1), "1" (leader) or "0" (none).
	// Default all.
	Acks string
	// Idempotent enables idempotent produce (kgo's default; needs Acks
	// "all"). Default true.
	Idempotent bool
	// MaxInflight is kgo.MaxProduceRequestsInflightPerBroker; kgo applies it
	// only without idempotence (with it, 5). 0 keeps kgo's default.
	MaxInflight int
	// MaxBufferedRecords is kgo.MaxBufferedRecords per producer: past it
	// Produce blocks. 0 keeps kgo's default (50,000).
	MaxBufferedRecords int
	// Warmup is how long the load runs before the measured window; nothing
	// in it is counted in the result. Default 2s.
	Warmup time.Duration
	// Duration is the length of the measured window. Default 30s.
	Duration time.Duration
	// Drain bounds, after the window, the flush of records still buffered
	// by the producers and then the consumers' catching up. Default 10s.
	Drain time.Duration
	// Rate caps the records produced per second over all producers; 0 is as
	// fast as the clients go (closed loop: then produce latency includes
	// the time a record waits in the client's buffer). Default 0.
	Rate float64
	// SetupTimeout bounds connecting, creating the topic and listing its
	// offsets. Default 15s.
	SetupTimeout time.Duration
	// Progress receives one line per ProgressInterval while the load runs;
	// nil prints nothing.
	Progress io.Writer
	// ProgressInterval is the period of the progress lines. Default 1s.
	ProgressInterval time.Duration
}

// defaultConfig returns the settings used when no flag overrides them.
func defaultConfig() Config {
	return Config{
		Partitions:       8,
		Producers:        4,
		Consumers:        1,
		RecordSize:       1024,
		Codec:            "none",
		Linger:           5 * time.Millisecond,
		Acks:             "all",
		Idempotent:       true,
		Warmup:           2 * time.Second,
		Duration:         30 * time.Second,
		Drain:            10 * time.Second,
		SetupTimeout:     15 * time.Second,
		ProgressInterval: time.Second,
	}
}

// Validate reports the first setting that is out of range or inconsistent.
func (c Config) Validate() error {
	switch {
	case c.Partitions < 1:
		return fmt.Errorf("partitions %d: need at least 1", c.Partitions)
	case c.Producers < 1:
		return fmt.Errorf("producers %d: need at least 1", c.Producers)
	case c.Consumers < 0:
		return fmt.Errorf("consumers %d: need 0 or more", c.Consumers)
	case c.ConsumerDelay < 0:
		return fmt.Errorf("consumer-delay %v: need 0 or more", c.ConsumerDelay)
	case c.RecordSize < minRecordSize || c.RecordSize > maxRecordSize:
		return fmt.Errorf("record-size %d: need %d to %d bytes", c.RecordSize, minRecordSize, maxRecordSize)
	case c.Linger < 0:
		return fmt.Errorf("linger %v: need 0 or more", c.Linger)
	case c.Warmup < 0:
		return fmt.Errorf("warmup %v: need 0 or more", c.Warmup)
	case c.Duration <= 0:
		return fmt.Errorf("duration %v: need more than 0", c.Duration)
	case c.Drain < 0:
		return fmt.Errorf("drain %v: need 0 or more", c.Drain)
	case c.Rate < 0:
		return fmt.Errorf("rate %v: need 0 (unlimited) or more", c.Rate)
	case c.MaxInflight < 0:
		return fmt.Errorf("max-inflight %d: need 0 (kgo default) or more", c.MaxInflight)
	case c.MaxBufferedRecords < 0:
		return fmt.Errorf("max-buffered-records %d: need 0 (kgo default) or more", c.MaxBufferedRecords)
	case c.SetupTimeout <= 0:
		return fmt.Errorf("setup timeout %v: need more than 0", c.SetupTimeout)
	case c.ProgressInterval <= 0:
		return fmt.Errorf("progress interval %v: need more than 0", c.ProgressInterval)
	}
	if _, err := c.codec(); err != nil {
		return err
	}
	acks, err := c.acks()
	if err != nil {
		return err
	}
	if c.Idempotent && acks != kgo.AllISRAcks() {
		return errors.New("idempotent produce needs -acks all (or -idempotent=false)")
	}
	if c.Idempotent && c.MaxInflight > 0 {
		return errors.New("max-inflight applies only with -idempotent=false (kgo allows 5 idempotent requests in flight per broker)")
	}
	return nil
}

// codec maps Codec to kgo's compression codec.
func (c Config) codec() (kgo.CompressionCodec, error) {
	switch c.Codec {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("codec %q: want none, gzip, snappy, lz4 or zstd", c.Codec)
}

// acks maps Acks to kgo's acks.
func (c Config) acks() (kgo.Acks, error) {
	switch c.Acks {
	case "all", "-1":
		return kgo.AllISRAcks(), nil
	case "1", "leader":
		return kgo.LeaderAck(), nil
	case "0", "none":
		return kgo.NoAck(), nil
	}
	return kgo.Acks{}, fmt.Errorf("acks %q: want all, 1 or 0", c.Acks)
}

// securityOpts are the TLS and SASL options of -tls-ca and -sasl-plain,
// set by main before any client exists (only with the sidecar as the one
// target).
var securityOpts []kgo.Opt

// clientOpts are the options every client of a run shares: the seed
// brokers, a client id that shows up in broker logs, and TLS and SASL.
func clientOpts(brokers []string) []kgo.Opt {
	return append([]kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ClientID("diskless-sidecar-load"),
	}, securityOpts...)
}

// producerOpts are a producer client's options; c must be valid.
func (c Config) producerOpts(brokers []string, topic string) []kgo.Opt {
	codec, _ := c.codec()
	acks, _ := c.acks()
	opts := append(clientOpts(brokers),
		kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(c.Linger),
		kgo.ProducerBatchCompression(codec),
		kgo.RequiredAcks(acks),
	)
	if !c.Idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	if c.MaxInflight > 0 {
		opts = append(opts, kgo.MaxProduceRequestsInflightPerBroker(c.MaxInflight))
	}
	if c.MaxBufferedRecords > 0 {
		opts = append(opts, kgo.MaxBufferedRecords(c.MaxBufferedRecords))
	}
	return opts
}

// consumerOpts are a consumer client's options: explicit partitions from
// explicit offsets, as the sidecar has no consumer groups.
func consumerOpts(brokers []string, start map[string]map[int32]kgo.Offset) []kgo.Opt {
	return append(clientOpts(brokers), kgo.ConsumePartitions(start))
}
