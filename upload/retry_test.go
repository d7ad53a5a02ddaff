package upload

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/diskless-sidecar/sidecar/objstore"
)

func TestRetryable(t *testing.T) {
	live := context.Background()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"caller cancelled", done, context.Canceled, false},
		{"caller cancelled, other error", done, errors.New("reset"), false},
		{"attempt timed out", live, fmt.Errorf("put: %w", context.DeadlineExceeded), true},
		{"invalid key", live, fmt.Errorf("put: %w", objstore.ErrInvalidKey), false},
		{"permanent (access denied, no such bucket)", live, fmt.Errorf("put: %w: 403", objstore.ErrPermanent), false},
		{"other error", live, errors.New("connection reset"), true},
		{"cancelled by the store itself", live, context.Canceled, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retryable(tt.ctx, tt.err); got != tt.want {
				t.Fatalf("retryable = %v, want %v", got, tt.want)
			}
		})
	}
}
