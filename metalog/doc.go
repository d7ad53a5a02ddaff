// Package metalog holds the coordinator shards' metadata logs: the Log
// interface every backend implements (append a group of records durably,
// replay from a record index, write and read the latest snapshot, truncate
// before it), its errors, and the embedded backend, FileLog. It knows
// nothing of shard state: records and snapshot payloads are opaque bytes
// (package coordinator encodes them; docs/format/metadata-records.md
// specifies both). metalogtest holds the conformance suite every backend
// passes and the shared in-memory log for tests.
//
// # The embedded file log
//
// Specified in docs/format/metadata-records.md. A FileLog keeps one log in
// one directory as segment files named by the index of their first record
// (a 16-byte header: "DSML", version 2, base index), holding groups: the
// records of one Append (one write, one fsync), each in a frame, then a
// group end:
//
//	frame:     | length uint32 | crc uint32 | body (length bytes) |
//	group end: | "DSGE" | count uint32 | first int64 | length uint64 | group crc uint32 | crc uint32 |
//
// big-endian; length is 1 … MaxRecordBytes; crc is CRC-32C (Castagnoli)
// over the length bytes and the body. A group end (32 bytes; "DSGE" is
// never a valid frame length) gives the group's record count, the index
// of its first record, the length in bytes of its frames and a CRC-32C
// over them, and a CRC-32C of its own first 28 bytes. Group ends are not
// records: record indexes count frames only.
//
// On Replay, a group's records are passed on only once its group end has
// verified the group. In the last segment, the group holding the first
// bad spot (a short frame, bad length or CRC, a bad or missing group end)
// is a torn group — the last Append, whose fsync never returned — unless
// a later group verifies completely or bytes follow the bad group's own
// group end (both mean a later Append ran, so the bad group's fsync had
// returned): a torn group is truncated whole, from its first frame, with
// a warning naming the bytes dropped; otherwise, and in any other
// segment, it is ErrCorrupt naming the file and byte offset.
//
// Snapshots: PrepareSnapshot(N) starts a new segment at N (always between
// groups); WriteSnapshot(N, payload) writes N.snapshot ("DSMS", version 4,
// N, the payload's length, the payload, a CRC-32C) atomically while
// appends go on; TruncateBefore(N) then deletes the older segments and
// snapshots. ReadSnapshot returns the newest snapshot whose CRC holds.
package metalog
