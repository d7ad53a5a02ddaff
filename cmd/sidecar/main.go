// Command sidecar serves Kafka diskless topics: a Kafka-protocol endpoint
// whose topics live in object storage (DESIGN.md).
//
//	sidecar [--config FILE] [--set key=value]...
//
// It is the only place that wires concrete implementations together: the
// object store, the coordinator shards, the block cache, the produce and
// fetch paths and the Kafka listener. SIGTERM or SIGINT stops it gracefully:
// it stops accepting, finishes the files in flight (upload, commit, answer)
// and exits 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// stringList collects repeated --set flags.
type stringList []string

func (s *stringList) String() string     { return fmt.Sprint(*s) }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// run is main without os.Exit, so tests can drive it. Exit codes: 0 clean
// stop, 1 runtime failure, 2 bad flags or config.
func run(args []string, stderr *os.File) int {
	if len(args) > 0 && args[0] == "wal" {
		return runWAL(args[1:], os.Stdout, stderr)
	}
	if len(args) > 0 && args[0] == "meta" {
		return runMeta(args[1:], os.Stdout, stderr)
	}
	if len(args) > 0 && args[0] == "object-store" {
		return runObjectStore(args[1:], os.Stdout, stderr)
	}
	fs := flag.NewFlagSet("sidecar", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "Kafka-style properties file")
	var sets stringList
	fs.Var(&sets, "set", "override one config key, key=value (repeatable)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: sidecar [--config FILE] [--set key=value]...\n\n"+
			"Keys come from FILE, then from %s<KEY> environment variables (the key\n"+
			"upper-cased, dots as underscores: %sNODE_ID=3), then from --set.\n\n"+
			"       sidecar wal dump [--json] [--config FILE] [--set key=value]... <object key|file>\n"+
			"walks a WAL object: each batch's byte offset, size, records, producer, CRC check.\n"+
			"       sidecar object-store ls [--json] [--prefix P] [--config FILE] [--set key=value]...\n"+
			"lists the objects of the configured store.\n"+
			"       sidecar object-store orphans [--json] [--delete [--dry-run]] [--config FILE] [--set key=value]...\n"+
			"lists (deletes) this data.dir's objects that no shard holds, older than the orphan grace period.\n"+
			"       sidecar meta dump|verify [--json] [--records=false] <data.dir|shard dir>\n"+
			"replays a copy of each coordinator shard's metadata log: records, snapshot, partitions.\n\nflags:\n", EnvPrefix, EnvPrefix)
		fs.PrintDefaults()
		fmt.Fprintf(stderr, "\nconfig keys:\n")
		printConfigDocs(stderr)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sidecar: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	cfg, err := LoadConfig(*configPath, append(EnvSets(os.Environ()), sets...))
	if err != nil {
		fmt.Fprintf(stderr, "sidecar: %v\n", err)
		return 2
	}
	logger := newLogger(cfg, stderr)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	app, err := start(cfg, logger)
	if err != nil {
		logger.Error("start-up failed", slog.Any("err", err))
		var ce *ConfigError
		if errors.As(err, &ce) || errors.Is(err, errInvalidConfig) {
			return 2
		}
		return 1
	}
	<-ctx.Done()
	stop() // a second signal kills the process the default way
	logger.Info("shutting down: finishing files in flight", slog.String("timeout", cfg.ShutdownTimeout.String()))
	if err := app.shutdown(cfg.ShutdownTimeout); err != nil {
		logger.Error("shutdown was not clean", slog.Any("err", err))
		return 1
	}
	logger.Info("stopped")
	return 0
}

func newLogger(cfg Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
