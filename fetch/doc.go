// Package fetch serves Kafka Fetch (API key 1, v4–16) and ListOffsets (API
// key 2, v1–8) for diskless topics (SPEC §4, §5; DESIGN §Fetch step by step).
//
// A Fetch runs in four steps, all inside the call, with no goroutine that
// outlives it:
//
//  1. Resolve: topics by name (v≤12) or id (v13+), partition bounds and the
//     client's CurrentLeaderEpoch are checked once; a partition that fails
//     gets its error and takes no further part.
//  2. Look: one [Coordinator.FindBatches] call for all remaining
//     partitions, each asked from its fetch offset for up to
//     min(partition_max_bytes, max_bytes) bytes of batches. The
//     coordinator answers runs (one partition's batches of one file
//     commit, back to back in the object, DESIGN §Coordinators), not
//     batches; what to read of them is chosen in request order: each
//     partition's first run whole, then the following runs until its
//     limit is reached, the last possibly only a prefix, the first run
//     counting only its estimated part from the fetch offset on
//     (diskless.ServedEstimate).
//  3. Wait: if fewer than min_bytes were found, no partition has an error
//     and the request allows waiting, wait for [Coordinator.Watch] (then look
//     again), max_wait_ms (capped by [Config.MaxWait]; then look a last
//     time) or the context, whichever is first. The Watch channel is taken
//     before each look, so a commit that lands during a look is not missed.
//  4. Read and rewrite: each partition's runs are read with one
//     allocation, sized exactly, straight into the partition's response
//     buffer. Runs that are adjacent in the same object are coalesced
//     into one range. The ranges of all partitions in one object are read
//     with one [ObjectReader.ReadRanges] call (the block cache), given the
//     object's committed size and the oldest commit time among them, so
//     that the cache reads data older than its reach whole, once per
//     object, into its catch-up segment; a partition whose next batch lies
//     in another object has that object read ahead
//     ([ObjectReader.ReadAhead]). The objects of a request are read
//     concurrently, up to [Config.ReadConcurrency]. The reader checks every
//     range it read from the store and had not checked before with
//     verifyRuns (each run against its coordinate, run.go: back-to-back
//     batches of framing, magic 2, stored base offset 0, record count and
//     CRC-32C each, adding up to the run's offsets and largest max
//     timestamp), reading a failing range once more. Each run's batches
//     are then walked by their headers, those from the one holding the
//     fetch offset taken within the budgets (KIP-74, on the batches' own
//     sizes, in request order), and each header rewritten in place (SPEC
//     §1): baseOffset and
//     partitionLeaderEpoch, outside the CRC; on LogAppendTime batches the
//     timestamp-type bit and maxTimestamp, inside it, after which the CRC
//     is recomputed (over bytes whose stored CRC the read verified, so a
//     corrupt batch is never given a valid checksum). Records are never
//     decoded.
//
// A partition whose bytes cannot be served is cut at its first bad batch:
// the good batches before it are returned, and if there are none the
// partition carries the error — KAFKA_STORAGE_ERROR for a failed read
// (a failed read of an object fails every range of it; a store answering
// another size than the commit's is one), CORRUPT_MESSAGE for bytes that
// do not match the coordinate (read twice: never cached), and
// UNSUPPORTED_COMPRESSION_TYPE for a zstd batch before Fetch v10. The client
// then advances through the good data and meets the error when the bad batch
// is first in line. Other partitions are not affected, and the connection
// is never dropped.
//
// Fetch sessions (KIP-227) are not kept: every response has SessionID 0,
// which tells clients to send full fetches from then on. A full fetch
// (SessionEpoch 0 or −1, whatever the SessionID) is served; an incremental
// one (any other epoch) refers to a session that cannot exist here and gets
// the top-level error FETCH_SESSION_ID_NOT_FOUND, as a Kafka broker answers
// for an evicted session. There are no transactions, so read_committed reads
// what read_uncommitted reads and last_stable_offset = high watermark.
//
// ListOffsets answers earliest and latest from the coordinator's index, and
// timestamp lookups from the candidate run the coordinator names. On
// LogAppendTime runs every record has the run's append time, so no read
// is needed. Otherwise the run is read (by ReadRanges with its commit
// time, so that an old run is not cached) and walked, and the records of
// its first batch reaching the target scanned as a stream up to the
// answer: only each record's
// length, timestampDelta and offsetDelta are decoded, keys, values and
// headers are skipped (records.go has the layout). Produce checks headers
// only, so a batch under max.message.bytes may decompress to gigabytes; a
// lookup therefore decompresses with streaming readers whose working set
// does not grow with the output (inflate.go: gzip and lz4 windows, a zstd
// window of at most 8 MiB, snappy blocks checked before they are decoded,
// raw or xerial), so a batch of 41 KB that decompresses to 300 MB is
// answered in a few MiB. It waits for one of [Config.DecompressConcurrency]
// slots and may decompress for [Config.MaxScanTime]: a lookup out of time
// answers its partition REQUEST_TIMED_OUT, a zstd window over 8 MiB
// CORRUPT_MESSAGE, each with a warning naming the batch.
//
// The candidate batch does not answer when the log start lies inside it
// and the records it was chosen for are below it (deleted): the lookup
// then looks at the later batches of its run and asks the coordinator the
// same question about the runs after it (ListOffsetsFrom: the first run
// reaching the timestamp or, for max timestamp, the earliest with the
// largest max timestamp), one call per run passed over whatever the
// partition's size (lookup.go). A batch
// chosen for its max timestamp whose records, all at or above the log
// start, do not hold it has a false header (produce validates headers
// only, where Kafka's broker would rewrite it): a warning names it and the
// lookup passes over it the same way, so the partition still gets an
// answer.
package fetch
