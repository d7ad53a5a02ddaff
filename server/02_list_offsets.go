package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleListOffsets delegates to the Fetcher (SPEC §5).
func (s *Server) handleListOffsets(ctx context.Context, req *kmsg.ListOffsetsRequest) kmsg.Response {
	return orNil(s.fetcher.ListOffsets(ctx, req))
}
