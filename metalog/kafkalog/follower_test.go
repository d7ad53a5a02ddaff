package kafkalog

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/metalog"
)

// TestTransient: the failures a follower retries are the ones that pass by
// themselves (a partition not yet known to a broker — the sidecar exited at
// start-up with it, just after the metadata topic was created —, a leader
// moving); the others, and a transient one reported after records were
// delivered, are not.
func TestTransient(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{kerr.UnknownTopicOrPartition, true},
		{fmt.Errorf("follower snapshot: %w", kerr.UnknownTopicOrPartition), true},
		{kerr.UnknownTopicID, true},
		{kerr.NotLeaderForPartition, true},
		{kerr.LeaderNotAvailable, true},
		{kerr.TopicAuthorizationFailed, false},
		{kerr.OffsetOutOfRange, false},
		{metalog.ErrTruncated, false},
		{metalog.ErrClosed, false},
		{errors.New("kafkalog: corrupt"), false},
		{fmt.Errorf("kafkalog: follower of shard 1, after delivering records: %v", kerr.NotLeaderForPartition), false},
	} {
		if got := transient(c.err); got != c.want {
			t.Errorf("transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
