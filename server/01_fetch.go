package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleFetch delegates to the Fetcher (SPEC §4); it runs on its own
// goroutine because a fetch may long-poll.
func (s *Server) handleFetch(ctx context.Context, req *kmsg.FetchRequest) kmsg.Response {
	if resp := s.fetcher.Fetch(ctx, req); resp != nil {
		return resp
	}
	return nil
}
