package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleOffsetForLeaderEpoch delegates to the Fetcher (SPEC §4).
func (s *Server) handleOffsetForLeaderEpoch(ctx context.Context, req *kmsg.OffsetForLeaderEpochRequest) kmsg.Response {
	return orNil(s.fetcher.OffsetForLeaderEpoch(ctx, req))
}
