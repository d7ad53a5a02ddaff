package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleFetch delegates to the Fetcher (SPEC §4); it runs on its own
// goroutine because a fetch may long-poll. Shutdown ends long-polls at once
// (the fetch answers with what it has) so that a graceful stop does not wait
// out every consumer's max_wait_ms.
func (s *Server) handleFetch(ctx context.Context, req *kmsg.FetchRequest) kmsg.Response {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.draining, cancel)()
	return orNil(s.fetcher.Fetch(ctx, req))
}
