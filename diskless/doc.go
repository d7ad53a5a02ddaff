// Package diskless is the vocabulary the stages of the sidecar share with
// the coordinator shards of KIP-1164: topic ids and partitions, the topic
// catalog entry, the CommitFile, FindBatches and ListOffsets requests and
// answers, batch coordinates, file states, the partition-to-shard
// assignment (ShardFor) and the errors a shard answers with. It holds data
// types and pure functions only, so that `server`, `produce`, `commit`,
// `fetch` and `internal/telemetry` name no implementation: each declares
// the small interface it needs in these terms, and only `cmd/sidecar`
// wires the `coordinator` package behind them.
//
// It imports nothing of the project's but the leaf packages
// `internal/batch` (timestamp types) and `internal/topicconfig` (parsed
// topic configs).
package diskless
