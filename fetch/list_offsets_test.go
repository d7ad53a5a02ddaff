package fetch

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// listOffsetsEnv holds topic "l":
//
//	partition 0, CreateTime, one file per batch, every codec:
//	  0–2  none    ts 1000 1010 1020
//	  3–5  gzip    ts 1030 1050 1040
//	  6–7  zstd    ts 1060 1070
//	  8–9  lz4     ts 1045 1080
//	  10–11 snappy ts 1080 1000
//	partition 1, LogAppendTime: 0–2 appended at 5000, 3–5 at 6000
//	partition 2, CreateTime, log start 2 (inside the first batch):
//	  0–2  ts 2000 3000 1000
//	  3–4  ts 2500 2600
//	partition 3, LogAppendTime, log start 1: 0–2 at 7000, 3–4 at 8000
func listOffsetsEnv(t *testing.T) *env {
	e := newEnv(t, Config{LeaderEpoch: 2})
	e.coord.createTopic("l", 4)
	for _, b := range []struct {
		codec int8
		tss   []int64
	}{
		{batch.CodecNone, []int64{1000, 1010, 1020}},
		{batch.CodecGzip, []int64{1030, 1050, 1040}},
		{batch.CodecZstd, []int64{1060, 1070}},
		{batch.CodecLZ4, []int64{1045, 1080}},
		{batch.CodecSnappy, []int64{1080, 1000}},
	} {
		e.commit("l", 0, commitOpts{}, makeBatch(t, b.codec, 10, b.tss...))
	}
	e.commit("l", 1, commitOpts{logAppendTime: 5000}, makeBatch(t, batch.CodecGzip, 10, 1, 2, 3))
	e.commit("l", 1, commitOpts{logAppendTime: 6000}, makeBatch(t, batch.CodecGzip, 10, 1, 2, 3))
	e.commit("l", 2, commitOpts{}, makeBatch(t, batch.CodecNone, 10, 2000, 3000, 1000))
	e.commit("l", 2, commitOpts{}, makeBatch(t, batch.CodecNone, 10, 2500, 2600))
	e.coord.setLogStart("l", 2, 2)
	e.commit("l", 3, commitOpts{logAppendTime: 7000}, makeBatch(t, batch.CodecNone, 10, 1, 2, 3))
	e.commit("l", 3, commitOpts{logAppendTime: 8000}, makeBatch(t, batch.CodecNone, 10, 1, 2))
	e.coord.setLogStart("l", 3, 1)
	return e
}

// listReq is a ListOffsets request of version v for timestamp ts in one
// partition of topic.
func listReq(v int16, topic string, partition int32, ts int64) *kmsg.ListOffsetsRequest {
	return listReqParts(v, topic, ts, partition)
}

// listReqParts is listReq for timestamp ts in each of partitions.
func listReqParts(v int16, topic string, ts int64, partitions ...int32) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = v
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for _, p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, ts
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// epochReq is an OffsetForLeaderEpoch request of version v asking for
// leader epoch epoch, with current leader epoch current, in each of
// partitions of topic.
func epochReq(v int16, topic string, current, epoch int32, partitions ...int32) *kmsg.OffsetForLeaderEpochRequest {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version = v
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	for _, p := range partitions {
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = p, current, epoch
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

func TestListOffsets(t *testing.T) {
	e := listOffsetsEnv(t)
	for _, tc := range []struct {
		name      string
		version   int16 // 0 means 8
		partition int32
		ts        int64
		offset    int64
		timestamp int64
		errc      *kerr.Error
		noReads   bool // answered from the index alone
	}{
		{name: "earliest", ts: -2, offset: 0, timestamp: -1, noReads: true},
		{name: "latest", ts: -1, offset: 12, timestamp: -1, noReads: true},
		{name: "earliest local is earliest (v8)", ts: -4, offset: 0, timestamp: -1, noReads: true},
		{name: "max timestamp: earliest record holding it", version: 7, ts: -3, offset: 9, timestamp: 1080},
		{name: "timestamp 0", ts: 0, offset: 0, timestamp: 1000},
		{name: "exact first timestamp", ts: 1000, offset: 0, timestamp: 1000},
		{name: "inside the first batch", ts: 1005, offset: 1, timestamp: 1010},
		{name: "between batches", ts: 1021, offset: 3, timestamp: 1030},
		{name: "gzip: first record in offset order, not the smallest timestamp", ts: 1045, offset: 4, timestamp: 1050},
		{name: "zstd", ts: 1055, offset: 6, timestamp: 1060},
		{name: "lz4", ts: 1075, offset: 9, timestamp: 1080},
		{name: "after every timestamp", ts: 1081, offset: -1, timestamp: -1},

		{name: "LogAppendTime: the batch's append time, no read", partition: 1, ts: 5500, offset: 3, timestamp: 6000, noReads: true},
		{name: "LogAppendTime from 0", partition: 1, ts: 0, offset: 0, timestamp: 5000, noReads: true},
		{name: "LogAppendTime max timestamp", partition: 1, ts: -3, offset: 3, timestamp: 6000, noReads: true},

		{name: "log start inside the candidate: next batch", partition: 2, ts: 2550, offset: 4, timestamp: 2600},
		{name: "log start inside the candidate: no match", partition: 2, ts: 2900, offset: -1, timestamp: -1},
		{name: "log start inside the candidate: record at log start", partition: 2, ts: 500, offset: 2, timestamp: 1000},
		{name: "max timestamp below log start", partition: 2, ts: -3, offset: 4, timestamp: 2600},
		{name: "earliest is the log start", partition: 2, ts: -2, offset: 2, timestamp: -1, noReads: true},

		{name: "LogAppendTime, log start inside the batch", partition: 3, ts: 0, offset: 1, timestamp: 7000, noReads: true},
		{name: "LogAppendTime, log start inside the batch, max timestamp", partition: 3, ts: -3, offset: 3, timestamp: 8000, noReads: true},

		{name: "max timestamp before v7", version: 6, ts: -3, errc: kerr.UnsupportedVersion},
		{name: "earliest local before v8", version: 7, ts: -4, errc: kerr.UnsupportedVersion},
		{name: "latest tiered is not served", ts: -5, errc: kerr.UnsupportedVersion},
		{name: "other negative", ts: -9, errc: kerr.UnsupportedVersion},
		{name: "v0 is not served", version: -1, ts: -1, errc: kerr.UnsupportedVersion},
		{name: "unknown partition", partition: 4, ts: -1, errc: kerr.UnknownTopicOrPartition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.version
			switch v {
			case 0:
				v = 8
			case -1:
				v = 0
			}
			before := e.store.reads()
			resp := e.h.ListOffsets(t.Context(), listReq(v, "l", tc.partition, tc.ts))
			if resp.Version != v || len(resp.Topics) != 1 || resp.Topics[0].Topic != "l" || len(resp.Topics[0].Partitions) != 1 {
				t.Fatalf("response shape: %+v", resp)
			}
			p := resp.Topics[0].Partitions[0]
			if p.Partition != tc.partition || p.ErrorCode != errCode(tc.errc) {
				t.Fatalf("partition %d error %d, want %d %v", p.Partition, p.ErrorCode, tc.partition, tc.errc)
			}
			if tc.errc != nil {
				return
			}
			if p.Offset != tc.offset || p.Timestamp != tc.timestamp {
				t.Errorf("offset %d timestamp %d, want %d %d", p.Offset, p.Timestamp, tc.offset, tc.timestamp)
			}
			wantEpoch := int32(2)
			if tc.offset < 0 {
				wantEpoch = -1
			}
			if p.LeaderEpoch != wantEpoch {
				t.Errorf("leader epoch %d, want %d", p.LeaderEpoch, wantEpoch)
			}
			if reads := e.store.reads() - before; tc.noReads && reads != 0 {
				t.Errorf("%d object reads, want none", reads)
			}
			// The response encodes and decodes at its version.
			back := kmsg.NewPtrListOffsetsResponse()
			back.Version = v
			if err := back.ReadFrom(resp.AppendTo(nil)); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if bp := back.Topics[0].Partitions[0]; bp.Offset != tc.offset {
				t.Errorf("decoded offset %d", bp.Offset)
			}
		})
	}
}

func TestListOffsetsErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version int16
		topic   string
		epoch   int32
		ts      int64
		break_  func(e *env)
		errc    *kerr.Error
	}{
		{name: "unknown topic", version: 8, topic: "nope", epoch: -1, ts: -1, errc: kerr.UnknownTopicOrPartition},
		{name: "fenced leader epoch", version: 8, topic: "l", epoch: 1, ts: -1, errc: kerr.FencedLeaderEpoch},
		{name: "unknown leader epoch", version: 8, topic: "l", epoch: 3, ts: -1, errc: kerr.UnknownLeaderEpoch},
		{name: "current leader epoch", version: 8, topic: "l", epoch: 2, ts: -1},
		{name: "leader epoch not checked before v4", version: 3, topic: "l", epoch: 1, ts: -1},
		{
			name: "candidate object missing", version: 8, topic: "l", epoch: -1, ts: 1000,
			break_: func(e *env) { e.store.mutate("wal/0001", func([]byte) []byte { return nil }) },
			errc:   kerr.KafkaStorageError,
		},
		{
			name: "candidate read error", version: 8, topic: "l", epoch: -1, ts: 1000,
			break_: func(e *env) { e.store.failKey("wal/0001", errors.New("boom")) },
			errc:   kerr.KafkaStorageError,
		},
		{
			name: "candidate CRC mismatch", version: 8, topic: "l", epoch: -1, ts: 1000,
			break_: func(e *env) { e.store.mutate("wal/0001", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }) },
			errc:   kerr.CorruptMessage,
		},
		{
			name: "candidate does not decompress", version: 8, topic: "l", epoch: -1, ts: 1031,
			break_: func(e *env) {
				e.store.mutate("wal/0002", func(b []byte) []byte {
					b[batch.HeaderSize+10] |= 0x06 // the first deflate block: reserved type 3
					batch.Header(b).UpdateCRC()
					return b
				})
			},
			errc: kerr.CorruptMessage,
		},
		{
			// The scan stops at the answer, as a broker's does, so what
			// lies past it is not checked.
			name: "corrupt gzip trailer past the answer", version: 8, topic: "l", epoch: -1, ts: 1031,
			break_: func(e *env) {
				e.store.mutate("wal/0002", func(b []byte) []byte {
					b[len(b)-3] ^= 0xff // inside the gzip trailer (CRC-32, size)
					batch.Header(b).UpdateCRC()
					return b
				})
			},
		},
		{
			// Log start 5: the candidate 3–5 holds nothing ≥ 1041 at or
			// above it, so it is read to its end, trailer included.
			name: "corrupt gzip trailer in a batch read to its end", version: 8, topic: "l", epoch: -1, ts: 1041,
			break_: func(e *env) {
				e.coord.setLogStart("l", 0, 5)
				e.store.mutate("wal/0002", func(b []byte) []byte {
					b[len(b)-3] ^= 0xff
					batch.Header(b).UpdateCRC()
					return b
				})
			},
			errc: kerr.CorruptMessage,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := listOffsetsEnv(t)
			if tc.break_ != nil {
				tc.break_(e)
			}
			req := listReq(tc.version, tc.topic, 0, tc.ts)
			req.Topics[0].Partitions[0].CurrentLeaderEpoch = tc.epoch
			p := e.h.ListOffsets(t.Context(), req).Topics[0].Partitions[0]
			if p.ErrorCode != errCode(tc.errc) {
				t.Fatalf("error %d, want %v", p.ErrorCode, tc.errc)
			}
			if tc.errc != nil && (p.Offset != -1 || p.Timestamp != -1 || p.LeaderEpoch != -1) {
				t.Errorf("error answer %d/%d/%d, want −1s", p.Offset, p.Timestamp, p.LeaderEpoch)
			}
		})
	}
}

func TestListOffsetsManyPartitions(t *testing.T) {
	e := listOffsetsEnv(t)
	req := listReq(8, "l", 0, -1)
	for _, p := range []int32{1, 0, 2} {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, -2
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	}
	other := kmsg.NewListOffsetsRequestTopic()
	other.Topic = "nope"
	other.Partitions = []kmsg.ListOffsetsRequestTopicPartition{kmsg.NewListOffsetsRequestTopicPartition()}
	req.Topics = append(req.Topics, other)

	resp := e.h.ListOffsets(t.Context(), req)
	type answer struct {
		partition int32
		errc      int16
		offset    int64
	}
	var got []answer
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			got = append(got, answer{p.Partition, p.ErrorCode, p.Offset})
		}
	}
	want := []answer{
		{0, kerr.InvalidRequest.Code, -1}, // named twice: both refused, as Kafka does
		{1, 0, 0},
		{0, kerr.InvalidRequest.Code, -1},
		{2, 0, 2},
		{0, kerr.UnknownTopicOrPartition.Code, -1},
	}
	if !slices.Equal(got, want) {
		t.Errorf("answers %v, want %v", got, want)
	}
}

// TestListOffsetsLogStartMovesDuringLookup: retention moves the log start
// past the batch after the candidate while the lookup looks past the
// candidate; the answer follows it and never falls below it.
func TestListOffsetsLogStartMovesDuringLookup(t *testing.T) {
	e := listOffsetsEnv(t)
	e.coord.onFind = func() {
		e.coord.onFind = nil
		e.coord.setLogStart("l", 2, 4) // inside 3–4
	}
	// Candidate 0–2 (max 3000) has nothing ≥ 2400 at or above log start 2;
	// 3–4 holds 2500 at offset 3, now below the log start, and 2600 at 4.
	p := e.h.ListOffsets(t.Context(), listReq(8, "l", 2, 2400)).Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.Offset != 4 || p.Timestamp != 2600 {
		t.Errorf("error %d offset %d timestamp %d, want 0 4 2600", p.ErrorCode, p.Offset, p.Timestamp)
	}
}

// cutCoord is a Coordinator on a sidecar cut off from Kafka: a shard's
// answers wait for its metadata log's confirmation, which fails after
// confirmTimeout (the coordinator's ConfirmTimeout, DESIGN §Fencing); a
// failed one answers the calls after it at once (coordinator's
// confirmer). It records when each shard's confirmation started and
// ended.
type cutCoord struct {
	Coordinator
	mu struct {
		sync.Mutex
		started, ended map[int32]time.Time
	}
}

const confirmTimeout = 5 * time.Second

func (c *cutCoord) ListOffsets(ctx context.Context, tp diskless.TopicPartition, ts int64) diskless.ListOffsetsResult {
	shard := c.ShardFor(tp.TopicID, tp.Partition)
	c.mu.Lock()
	_, failed := c.mu.ended[shard]
	if !failed {
		c.mu.started[shard] = time.Now()
	}
	c.mu.Unlock()
	if !failed {
		time.Sleep(confirmTimeout)
		c.mu.Lock()
		c.mu.ended[shard] = time.Now()
		c.mu.Unlock()
	}
	return diskless.ListOffsetsResult{Err: kerr.NotLeaderForPartition, LogStartOffset: -1, HighWatermark: -1, LastStableOffset: -1, Offset: -1, Timestamp: -1}
}

// TestListOffsetsShardsConcurrently: a ListOffsets or an
// OffsetForLeaderEpoch request spanning three shards of a sidecar that
// cannot confirm them waits for the three confirmations at once — each
// started before the first ended, one confirmation timeout in all
// (synctest's clock) — not for one after the other (three timeouts), and
// every partition is answered NOT_LEADER_OR_FOLLOWER.
func TestListOffsetsShardsConcurrently(t *testing.T) {
	const partitions = 6
	var all []int32 // the partitions asked for
	for p := range int32(partitions) {
		all = append(all, p)
	}
	for _, tc := range []struct {
		name string
		ask  func(h *Handler) []int16 // the partitions' error codes
	}{
		{"ListOffsets", func(h *Handler) (codes []int16) {
			req := listReqParts(8, "l", -1, all...)
			for _, p := range h.ListOffsets(context.Background(), req).Topics[0].Partitions {
				codes = append(codes, p.ErrorCode)
			}
			return codes
		}},
		{"OffsetForLeaderEpoch", func(h *Handler) (codes []int16) {
			req := epochReq(4, "l", -1, h.cfg.LeaderEpoch, all...)
			for _, p := range h.OffsetForLeaderEpoch(context.Background(), req).Topics[0].Partitions {
				codes = append(codes, p.ErrorCode)
			}
			return codes
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, Config{})
				e.coord.shards = 3
				e.coord.createTopic("l", partitions)
				cc := &cutCoord{Coordinator: e.coord}
				cc.mu.started, cc.mu.ended = map[int32]time.Time{}, map[int32]time.Time{}
				h := e.newHandler(Config{}, e.store)
				h.coord = cc
				start := time.Now()
				codes := tc.ask(h)
				took := time.Since(start)
				if len(codes) != partitions || slices.ContainsFunc(codes, func(c int16) bool { return c != kerr.NotLeaderForPartition.Code }) {
					t.Errorf("error codes %v, want NOT_LEADER_OR_FOLLOWER (%d) for each of %d partitions", codes, kerr.NotLeaderForPartition.Code, partitions)
				}
				if len(cc.mu.started) != 3 {
					t.Fatalf("confirmations of shards %v, want 3", slices.Collect(maps.Keys(cc.mu.started)))
				}
				firstEnd := slices.MinFunc(slices.Collect(maps.Values(cc.mu.ended)), time.Time.Compare)
				for shard, at := range cc.mu.started {
					if at.After(firstEnd) {
						t.Errorf("shard %d's confirmation started %v after the first ended", shard, at.Sub(firstEnd))
					}
				}
				if took != confirmTimeout {
					t.Errorf("answered after %v (synctest's clock), want one confirmation timeout (%v)", took, confirmTimeout)
				}
			})
		})
	}
}
