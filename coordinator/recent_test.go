package coordinator

import (
	"fmt"
	"testing"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// TestRecentCommitsBounds: the answers kept for repeated keys are bounded
// by files and by batches, oldest forgotten first.
func TestRecentCommitsBounds(t *testing.T) {
	var rc recentCommits
	file := func(i, batches int) (*diskless.CommitFileRequest, []diskless.CommitBatchResult) {
		req := &diskless.CommitFileRequest{ObjectKey: fmt.Sprintf("wal/%d", i), Batches: make([]diskless.CommitBatch, batches)}
		return req, make([]diskless.CommitBatchResult, batches)
	}
	// By batches: files of 1000 batches; at most recentCommitsMaxBatches kept.
	n := recentCommitsMaxBatches/1000 + 10
	for i := range n {
		rc.add(file(i, 1000))
	}
	if rc.batches > recentCommitsMaxBatches || len(rc.byKey)*1000 != rc.batches {
		t.Fatalf("%d batches in %d files kept", rc.batches, len(rc.byKey))
	}
	if req, _ := file(0, 1000); func() bool { _, ok := rc.get(req); return ok }() {
		t.Fatal("the oldest file is still remembered")
	}
	if req, _ := file(n-1, 1000); func() bool { _, ok := rc.get(req); return !ok }() {
		t.Fatal("the newest file was forgotten")
	}
	// By files: small files; at most recentCommitsPerShard kept.
	rc = recentCommits{}
	for i := range recentCommitsPerShard + 500 {
		rc.add(file(i, 1))
	}
	if len(rc.byKey) != recentCommitsPerShard || rc.batches != recentCommitsPerShard {
		t.Fatalf("%d files, %d batches kept", len(rc.byKey), rc.batches)
	}
	// A file larger than the whole bound is not kept (its repeat is
	// answered from the file table), and nothing breaks.
	rc.add(file(-1, recentCommitsMaxBatches+1))
	if rc.batches > recentCommitsMaxBatches {
		t.Fatalf("%d batches kept", rc.batches)
	}
}
