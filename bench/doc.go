// Package bench holds the benchmarks of the sidecar's hot paths, each run
// beside its floor in the same `go test -bench` output so that a ratio can
// be read off one run, and (in bench/load) a load tool that drives a
// running sidecar with franz-go clients. Figures, with the command, commit
// and machine that produced them, are recorded in bench/RESULTS.md.
//
//	make bench                                        # every benchmark
//	go test -run '^$' -bench Packing -benchmem ./bench # one family
//
// The families:
//
//   - BenchmarkPacking: validate produced batches (header checks and
//     CRC-32C) and lay them out as a WRITE_AHEAD_MULTI_SEGMENT object, for
//     1, 100 and 1000 partitions per file and 1 KiB, 16 KiB and 1 MiB
//     batches; floors: copying the same bytes, CRC-32C of them, and both.
//   - BenchmarkCommit: a coordinator shard deciding files of 1000 batches
//     over 1, 100 and 1000 partitions (idempotent producers, offsets, index
//     entries), with a no-op log (in memory) and with the embedded durable
//     log; reports batches/s, allocs per batch and fsyncs per commit.
//   - BenchmarkFetch: planning a fetch over an index of 1M batches and
//     rewriting the headers of the batches returned, through the real
//     coordinator, fetch handler and block cache; floor: copying the bytes
//     served. BenchmarkCacheHit: a read served from the block cache.
//   - BenchmarkShardState: what a coordinator shard keeps per committed
//     batch — heap, metadata log bytes, snapshot bytes, replay and
//     snapshot load time — over 1000 partitions; bench/heap measures the
//     heap per batch of the running binary from outside (issue 17).
//   - BenchmarkJoinGroupStorm, BenchmarkLargeGroupRebalance: an in-process
//     sidecar (inproc_test.go: the real server, coordinator, produce
//     pipeline, cache and fetch) under steady kgo produce, with a storm of
//     classic groups joining and leaving in alternate phases of one run, or
//     a 1,000-member group over 10,000 partitions rebalancing (classic and
//     KIP-848) beside a small group; produce, CommitFile and the small
//     group's latencies by phase (issue 10).
package bench
