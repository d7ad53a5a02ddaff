package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/rpcmsg"
)

// TestRPCCode pins the code each local error is answered with over the
// coordinator RPCs (docs/format/coordinator-rpcs.md §Common fields).
func TestRPCCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int16
	}{
		{nil, 0},
		{fmt.Errorf("x: %w", diskless.ErrNotCoordinator), kerr.NotCoordinator.Code},
		{fmt.Errorf("%w (shard 1, %w)", diskless.ErrShardFenced, kerr.NotLeaderForPartition), kerr.NotCoordinator.Code},
		{diskless.ErrClosed, kerr.NotCoordinator.Code},
		{diskless.ErrShardLoading, kerr.CoordinatorLoadInProgress.Code},
		{fmt.Errorf("%w: bad", diskless.ErrInvalidCommit), kerr.InvalidRequest.Code},
		{context.DeadlineExceeded, kerr.RequestTimedOut.Code},
		{fmt.Errorf("%w 1: %w", diskless.ErrShardFailed, kerr.KafkaStorageError), kerr.KafkaStorageError.Code},
		{fmt.Errorf("w: %w", kerr.OffsetOutOfRange), kerr.OffsetOutOfRange.Code},
		{errors.New("disk full"), kerr.KafkaStorageError.Code},
	} {
		code, msg := rpcCode(tc.err)
		if code != tc.want || (tc.err != nil) != (msg != nil) {
			t.Errorf("%v: code %d msg %v, want %d", tc.err, code, msg, tc.want)
		}
	}
}

// TestRPCWithoutShards: a server with no coordinator behind it answers
// every coordinator RPC NOT_COORDINATOR (DisklessDisableTopic, addressed
// to the sidecar, UNSUPPORTED_VERSION), and advertises every key.
func TestRPCWithoutShards(t *testing.T) {
	ts := startServer(t, nil)
	c := dialRaw(t, ts.Addr())
	for k := rpcmsg.MinKey; k <= rpcmsg.MaxKey; k++ {
		if lo, hi, ok := ts.versionRange(k); !ok || lo != 0 || hi != 0 {
			t.Fatalf("%s: advertised %d–%d %v", rpcmsg.NameForKey(k), lo, hi, ok)
		}
		req := rpcmsg.RequestForKey(k)
		if d, ok := req.(*rpcmsg.DescribeFilesRequest); ok {
			d.ShardID, d.ObjectKeys = 0, []string{"a", "b"}
		}
		resp := c.roundTrip(req)
		want := kerr.NotCoordinator.Code
		var got int16
		switch r := resp.(type) {
		case *rpcmsg.DescribeFilesResponse:
			if len(r.Files) != 2 || r.Files[0].ErrorCode != r.Files[1].ErrorCode || r.Files[0].ObjectKey != "a" {
				t.Fatalf("DescribeFiles: %+v", r.Files)
			}
			got = r.Files[0].ErrorCode
		case *rpcmsg.CommitFileResponse:
			got = r.ErrorCode
		case *rpcmsg.FindBatchesResponse:
			got = r.ErrorCode
		case *rpcmsg.ListOffsetsResponse:
			got = r.ErrorCode
		case *rpcmsg.DeleteRecordsResponse:
			got = r.ErrorCode
		case *rpcmsg.CreatePartitionsResponse:
			got = r.ErrorCode
		case *rpcmsg.DeleteTopicsResponse:
			got = r.ErrorCode
		case *rpcmsg.DeleteFilesResponse:
			got = r.ErrorCode
		case *rpcmsg.AllocateProducerIDsResponse:
			got = r.ErrorCode
		case *rpcmsg.DisableTopicResponse:
			got, want = r.ErrorCode, kerr.UnsupportedVersion.Code
		case *rpcmsg.CheckTxnResponse:
			got = r.ErrorCode
		case *rpcmsg.EndTxnOffsetsResponse:
			got = r.ErrorCode
		default:
			t.Fatalf("key %d answered with %T", k, resp)
		}
		if got != want {
			t.Errorf("%s: code %d, want %d", rpcmsg.NameForKey(k), got, want)
		}
	}
	checkServing(t, ts.Addr())
}

// fakeShards serves the shards not in down, answering each call from the
// fields below.
type fakeShards struct {
	down     map[int32]error
	states   []diskless.FileState
	find     []diskless.FindBatchesResult
	commitFn func(shard int32, req *diskless.CommitFileRequest) ([]diskless.CommitBatchResult, error)
}

func (f *fakeShards) Serving(shard int32) error { return f.down[shard] }
func (f *fakeShards) ShardFor(id diskless.TopicID, p int32) int32 {
	return diskless.ShardFor(id, p, 4)
}
func (f *fakeShards) CommitFile(_ context.Context, shard int32, req *diskless.CommitFileRequest) ([]diskless.CommitBatchResult, error) {
	return f.commitFn(shard, req)
}
func (f *fakeShards) FindBatches(context.Context, []diskless.FindBatchesRequest) []diskless.FindBatchesResult {
	return f.find
}
func (f *fakeShards) ListOffsets(context.Context, diskless.TopicPartition, int64) diskless.ListOffsetsResult {
	return diskless.ListOffsetsResult{}
}
func (f *fakeShards) ListOffsetsFrom(context.Context, diskless.TopicPartition, int64, int64) diskless.ListOffsetsResult {
	return diskless.ListOffsetsResult{}
}
func (f *fakeShards) DescribeFiles(context.Context, int32, []string) ([]diskless.FileState, error) {
	return f.states, nil
}
func (f *fakeShards) DeleteRecords(context.Context, diskless.TopicPartition, int64) (int64, error) {
	return 0, nil
}
func (f *fakeShards) CreatePartitionsIn(context.Context, int32, []diskless.TopicPartitions) error {
	return nil
}
func (f *fakeShards) DeleteTopicsIn(context.Context, int32, []diskless.TopicID) error { return nil }
func (f *fakeShards) CloseFiles(context.Context, int32, int32, []string) error        { return nil }
func (f *fakeShards) AllocateProducerIDBlock(context.Context, int32) (int64, int32, error) {
	return 0, 0, nil
}
func (f *fakeShards) CheckTxn(context.Context, int32, diskless.TxnCheck) (diskless.TxnCheckResult, error) {
	return diskless.TxnCheckResult{}, nil
}
func (f *fakeShards) EndTxnOffsets(context.Context, int32, string, int64, int16, int64, bool) error {
	return nil
}
func (f *fakeShards) TopicTxns(context.Context, diskless.DisableTopicRequest) []diskless.ShardTxns {
	return nil
}

// TestRPCHandlers: the handlers' own rules — a DescribeFiles without a
// shard, a partition of another shard, a shard that is loading or gone,
// a local answer of the wrong length, objects sent once in FindBatches.
func TestRPCHandlers(t *testing.T) {
	fs := &fakeShards{down: map[int32]error{2: diskless.ErrShardLoading, 3: fmt.Errorf("%w 3: %w", diskless.ErrShardFailed, kerr.KafkaStorageError)}}
	ts := startServer(t, func(c *Config, _ *testServer) { c.Shards = fs })
	c := dialRaw(t, ts.Addr())

	// DescribeFiles: KIP-1164's request alone (no shard) is refused per
	// file; a live file says HasLiveBatches; the state travels.
	df := rpcmsg.NewDescribeFilesRequest()
	df.ObjectKeys = []string{"x"}
	if r := c.roundTrip(df).(*rpcmsg.DescribeFilesResponse); r.Files[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("DescribeFiles without a shard: %+v", r.Files)
	}
	fs.states = []diskless.FileState{diskless.FileLive, diskless.FileReleased}
	df.ShardID, df.ObjectKeys = 0, []string{"x", "y"}
	r := c.roundTrip(df).(*rpcmsg.DescribeFilesResponse)
	if f := r.Files; !f[0].HasLiveBatches || f[0].State != 1 || f[1].HasLiveBatches || f[1].State != 2 {
		t.Fatalf("DescribeFiles: %+v", f)
	}
	// Fewer answers than keys: a broken local answer, refused.
	fs.states = fs.states[:1]
	if r := c.roundTrip(df).(*rpcmsg.DescribeFilesResponse); r.Files[1].ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("DescribeFiles with a short answer: %+v", r.Files)
	}

	// Shards loading and failed.
	for shard, want := range map[int32]int16{2: kerr.CoordinatorLoadInProgress.Code, 3: kerr.KafkaStorageError.Code} {
		cf := rpcmsg.NewCommitFileRequest()
		cf.ShardID = shard
		if r := c.roundTrip(cf).(*rpcmsg.CommitFileResponse); r.ErrorCode != want || r.ErrorMessage == nil {
			t.Fatalf("CommitFile to shard %d: %d %v, want %d", shard, r.ErrorCode, r.ErrorMessage, want)
		}
	}

	// FindBatches: a partition of another shard is refused on its own;
	// the others' coordinates name each object once.
	id := diskless.TopicID{1}
	var mine, other int32 = -1, -1
	for p := int32(0); mine < 0 || other < 0; p++ {
		if diskless.ShardFor(id, p, 4) == 0 {
			mine = p
		} else {
			other = p
		}
	}
	coord := func(key string, off int64) diskless.RunCoordinate {
		return diskless.RunCoordinate{ObjectKey: key, FileSize: 1000, ByteOffset: off, ByteSize: 10, BaseOffset: off, LastOffset: off}
	}
	fs.find = []diskless.FindBatchesResult{{LogStartOffset: 0, HighWatermark: 3,
		Runs: []diskless.RunCoordinate{coord("o1", 0), coord("o2", 1), coord("o1", 2)}, Next: coord("o3", 3)}}
	fs.find[0].Next.ObjectFormat = diskless.ObjectFormatSegment // a segment object's format travels with it
	fb := rpcmsg.NewFindBatchesRequest()
	fb.Partitions = []rpcmsg.FindBatchesPartition{{TopicID: id, Partition: other}, {TopicID: id, Partition: mine}}
	fr := c.roundTrip(fb).(*rpcmsg.FindBatchesResponse)
	if fr.ErrorCode != 0 || fr.Partitions[0].ErrorCode != kerr.InvalidRequest.Code || fr.Partitions[1].ErrorCode != 0 {
		t.Fatalf("FindBatches: %+v", fr)
	}
	if len(fr.Objects) != 3 || fr.Objects[0].ObjectKey != "o1" || fr.Partitions[1].Runs[2].ObjectIndex != 0 ||
		fr.Partitions[1].Next.ObjectIndex != 2 || fr.Partitions[0].Next.ObjectIndex != -1 ||
		fr.Objects[2].ObjectFormat != diskless.ObjectFormatSegment || fr.Objects[0].ObjectFormat != 1 {
		t.Fatalf("FindBatches objects: %+v %+v", fr.Objects, fr.Partitions)
	}

	// AllocateProducerIds is shard 0's only.
	ap := rpcmsg.NewAllocateProducerIDsRequest()
	ap.ShardID = 1
	if r := c.roundTrip(ap).(*rpcmsg.AllocateProducerIDsResponse); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("AllocateProducerIds to shard 1: %d", r.ErrorCode)
	}

	// A malformed body closes the connection, as any other.
	bad := dialRaw(t, ts.Addr())
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw-test"))
	frame := f.AppendRequest(nil, &rpcmsg.DeleteTopicsRequest{TopicIDs: [][16]byte{{1}}}, 1)
	frame = frame[:len(frame)-3]
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	bad.write(frame)
	bad.expectClosed()
	checkServing(t, ts.Addr())
}
