package kafkalog

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestRetryUnknownTopic: UNKNOWN_TOPIC_OR_PARTITION is asked again until
// another answer comes; any other error, and a context that ends, stop
// at once with the last answer.
func TestRetryUnknownTopic(t *testing.T) {
	calls := 0
	err := retryUnknownTopic(context.Background(), func() error {
		if calls++; calls < 3 {
			return kerr.UnknownTopicOrPartition
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("%v after %d calls; want nil after 3", err, calls)
	}

	calls = 0
	other := errors.New("other")
	if err := retryUnknownTopic(context.Background(), func() error { calls++; return other }); err != other || calls != 1 {
		t.Fatalf("%v after %d calls; want the other error after 1", err, calls)
	}

	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	err = retryUnknownTopic(ctx, func() error { calls++; cancel(); return kerr.UnknownTopicOrPartition })
	if !errors.Is(err, kerr.UnknownTopicOrPartition) || calls != 1 {
		t.Fatalf("%v after %d calls; want UNKNOWN_TOPIC_OR_PARTITION after 1 once ctx ended", err, calls)
	}
}
