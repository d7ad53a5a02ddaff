package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleProduce hands a Produce request to the Producer on the reader
// goroutine (so appends keep the connection's order) and returns the wait
// func the writer calls. acks=0 requests get no response (the writer drops
// whatever the func returns).
func (s *Server) handleProduce(ctx context.Context, req *kmsg.ProduceRequest) func() kmsg.Response {
	wait := s.producer.Produce(ctx, req)
	return func() kmsg.Response {
		if wait == nil {
			return nil
		}
		return orNil(wait())
	}
}
