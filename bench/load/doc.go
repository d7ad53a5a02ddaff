// Command load drives a running sidecar with franz-go (kgo) producers and
// consumers and reports what it sustained; with -kfake it then runs the
// identical load, same client settings, against franz-go's in-memory kfake
// in this process and prints both side by side with their ratios.
//
// # Running it
//
//	make run                                   # a sidecar on 127.0.0.1:9092, metrics on 127.0.0.1:9644
//	go run ./bench/load -duration 30s -kfake   # in another terminal
//
//	# latency below saturation, zstd, 16 partitions
//	go run ./bench/load -rate 20000 -codec zstd -partitions 16 -kfake
//
//	# another listener; produce only; JSON for bench/RESULTS.md
//	go run ./bench/load -brokers 127.0.0.1:19092 -consumers 0 -json
//
//	# a consumer 30 s behind the head at 20 MB/s (past the 256 MiB cache):
//	# catch-up reads, GETs per GiB fetched against objects per GiB uploaded
//	go run ./bench/load -rate 20000 -consumer-delay 30s -duration 60s -drain 90s
//
//	# the latency distributions of every target drawn as latency by
//	# percentile (p0 … p99.99 on a log scale), one line per target and kind
//	go run ./bench/load -rate 20000 -kfake -plot latency.svg   # or .png
//
//	# no sidecar needed: the tool against kfake alone
//	go run ./bench/load -only-kfake -duration 10s
//
//	# the identical load against Apache Kafka, side by side, with each
//	# server's CPU time (sidecar pid, broker pid) per GiB and per core
//	go run ./bench/load -sidecar-pids 1234 -kafka-brokers 127.0.0.1:29092 -kafka-pids 5678
//
//	# the tool starts Apache Kafka itself (internal/kafkatest: the pinned
//	# Kafka 4.4 from Maven, KRaft, Kafka's own JVM settings) and runs the
//	# identical load against it after the sidecar; with 3 brokers the
//	# topic is replicated 3 times (min.insync.replicas 2), and the sidecar
//	# it starts keeps its metadata log on those brokers, whose CPU in the
//	# sidecar's window is reported beside the sidecar's own
//	go run ./bench/load -sidecar-pids 1234 -kafka
//	go run ./bench/load -sidecar-bin bin/sidecar -stores local -kafka -kafka-nodes 3 -sidecar-metadata-kafka
//
//	# the tool starts the sidecar itself, a fresh one per store, and runs the
//	# identical load on each: the local store, and versitygw behind the
//	# s3fault proxy holding every answer as S3 Standard would (the S3-like
//	# latency model, DESIGN §Object storage); one column per store
//	go build -o bin/sidecar ./cmd/sidecar
//	go run ./bench/load -sidecar-bin bin/sidecar -stores local,s3-like -rate 50000
//
// go run ./bench/load -help lists every flag with its default.
//
// # What it does
//
// Per target: create the topic (a fresh name unless -topic) with kadm,
// start -consumers clients reading its partitions from their end offsets
// with ConsumePartitions (the sidecar has no consumer groups), start
// -producers clients producing -record-size records (idempotent, acks=all
// by default), run -warmup, then the measured window of -duration, then
// the drain: producers stop and flush, consumers catch up (both bounded by
// -drain). One line of progress is printed per second.
//
// Each record value starts with its send time (nanoseconds on this
// process's monotonic clock) and a run id. Produce latency is the promise's
// time minus the Produce call's time, so at -rate 0 (closed loop) it
// includes the time a record waits in the client's full buffer; use -rate
// below saturation to measure the target rather than the queue. End-to-end
// latency is the consumer's receive time minus the send time. Latencies go
// into HDR histograms (1 µs to 10 min, 3 significant digits); figures are of
// records sent in the window, throughput of records acknowledged or
// received in it. MB is 10^6 bytes of record values.
//
// With -sidecar-bin the tool starts each sidecar it drives: for each store
// of -stores in turn, a fresh process with a temporary data.dir, listeners
// on free ports, and -sidecar-set settings; for the S3 stores also a
// versitygw (posix backend, VERSITYGW_BIN, PATH or $GOPATH/bin) and, in
// this process, an internal/s3fault proxy in front of it, which for
// s3-like holds each answer until a latency drawn from -s3-latency has
// passed since the request arrived (s3fault.S3Like by default: PUT-class
// requests 80% 60–150 ms, 19% 150–300 ms, 1% 300–450 ms, GETs 15–40 ms).
// The proxy shares the machine's cores with the clients. After the run
// the sidecar is stopped with SIGTERM and its directory removed
// (-keep-rig keeps it, with sidecar.log).
//
// For the sidecar the tool also scrapes its Prometheus endpoint
// (-metrics-url) at the window's start and after the drain and reports, from
// the counters' deltas, objects uploaded per GiB uploaded
// (diskless_upload_objects_total / diskless_upload_bytes_total), the mean
// object size, and ranged GETs per GiB fetched
// (diskless_cache_store_reads_total / diskless_fetch_bytes_total), and the
// mean time the files answered in the window spent in each stage of the
// produce pipeline (diskless_produce_file_stage_duration_seconds), and the
// request bill: S3 PUT-class and GET-class requests per GiB (every S3
// request on the S3 backend; uploads, cache reads, consolidation's WAL
// reads and segment PUTs on the file backend) priced for a month, with
// consolidation's share (diskless_consolidation_*) on a line of its own.
// The counters are the sidecar's, so other traffic in the window counts too. If
// the endpoint cannot be read the figures are n/a with the reason.
//
// With -sidecar-pids (and -kafka-pids for -kafka-brokers) the tool reads
// the server processes' CPU time (user plus system, /proc/<pid>/stat,
// Linux) at the window's start and end and reports the CPU seconds, the
// CPU seconds per GiB of record values produced in the window, and the MB
// produced per CPU second ("MB/s per core"). -kafka-brokers runs the
// identical load, after the sidecar's, against a running Apache Kafka (for
// one on this machine, internal/kafkatest's broker: see bench/RESULTS.md).
//
// SIGINT or SIGTERM stops the load, prints the report of the window so far
// and exits 130; a second one kills. A target that cannot be reached or
// whose topic cannot be created exits 1; bad flags exit 2.
//
// # Output
//
// One progress line per second per target, then the report. From
// "-brokers 127.0.0.1:19092 -duration 20s -kfake -rate 50000" against a
// sidecar with its defaults on a 2-core machine (the metrics endpoint was
// not there yet):
//
//	sidecar   18.0s measure | prod   47013 rec/s   48.1 MB/s p99 547ms (window 797ms) | cons   47013 rec/s   48.1 MB/s e2e p99 580ms | errors 0
//	...
//	                                 sidecar         kfake   sidecar/kfake
//	window s                            20.0          20.0
//	produced records/s                 49584         50000            0.99
//	produced MB/s                       50.8          51.2            0.99
//	consumed records/s                 49584         50000            0.99
//	consumed MB/s                       50.8          51.2            0.99
//	produce p50                        254ms        4.11ms           61.86
//	produce p99                        768ms        93.3ms            8.23
//	produce p999                       941ms         117ms            8.06
//	produce max                        995ms         248ms            4.01
//	e2e p50                            271ms        4.29ms           63.12
//	e2e p99                            828ms         122ms            6.77
//	e2e max                           1065ms         252ms            4.22
//	errors                                 0             0
//	unacked at end                         0             0
//	unconsumed at end                      0             0
//	objects per GiB uploaded             n/a           n/a
//	mean object size                     n/a           n/a
//	GETs per GiB fetched                 n/a           n/a
//	n/a (sidecar): scrape http://127.0.0.1:9644/metrics: Get "http://127.0.0.1:9644/metrics": dial tcp 127.0.0.1:9644: connect: connection refused
//	n/a (kfake): kfake has no object store
package main
