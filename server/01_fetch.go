package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleFetch delegates to the Fetcher (SPEC §4); it runs on its own
// goroutine because a fetch may long-poll. Shutdown ends long-polls at once
// (the fetch answers with what it has) so that a graceful stop does not wait
// out every consumer's max_wait_ms. With an authorizer the partitions of
// topics the principal may not READ are answered TOPIC_AUTHORIZATION_FAILED
// without the Fetcher (authorizeFetch; SPEC §14, ACLs).
func (s *Server) handleFetch(ctx context.Context, req *kmsg.FetchRequest) kmsg.Response {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.draining, cancel)()
	allowed, refused := s.authorizeFetch(ctx, req)
	if allowed == nil {
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.Topics = refused
		return resp
	}
	resp := s.fetcher.Fetch(ctx, allowed)
	if resp == nil {
		return nil
	}
	resp.Topics = append(resp.Topics, refused...)
	return resp
}
