package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleProduce hands a Produce request to the Producer on the reader
// goroutine (so appends keep the connection's order) and returns the wait
// func the writer calls. acks=0 requests get no response (the writer drops
// whatever the func returns).
//
// With an authorizer the partitions the principal may not WRITE are
// answered TOPIC_AUTHORIZATION_FAILED and never reach the Producer, a
// transactional request without WRITE on its transactional id
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED (authorizeProduce; SPEC §14, ACLs).
func (s *Server) handleProduce(ctx context.Context, req *kmsg.ProduceRequest) func() kmsg.Response {
	allowed, refused := s.authorizeProduce(ctx, req)
	var wait func() *kmsg.ProduceResponse
	if allowed != nil {
		wait = s.producer.Produce(ctx, allowed)
	}
	return func() kmsg.Response {
		var resp *kmsg.ProduceResponse
		switch {
		case allowed != nil:
			if wait == nil {
				return nil
			}
			if resp = wait(); resp == nil {
				return nil // acks=0
			}
		case req.Acks == 0:
			return nil
		default:
			resp = req.ResponseKind().(*kmsg.ProduceResponse)
		}
		resp.Topics = append(resp.Topics, refused...)
		return resp
	}
}
