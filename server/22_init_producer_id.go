package server

import (
	"context"
	"errors"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleInitProducerID answers InitProducerId for idempotent producers
// (SPEC §3).
//
// Transactions are not supported (SPEC §2 Decision). A request with a
// transactional id gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED: it is what a
// broker answers when no transactional id may be used, and every client
// (Java, librdkafka, franz-go) treats it as fatal and non-retriable, so a
// transactional producer fails at once with a clear error instead of
// retrying forever or failing later with an opaque one. An empty
// transactional id gets INVALID_REQUEST, as Kafka answers.
//
// Otherwise, from v3 a producer that already has an id and epoch (KIP-360:
// recovering after an error) gets the same id with the epoch bumped, or a
// new id with epoch 0 when the bump would reach 32767; a request setting
// only one of the two gets INVALID_REQUEST. Without an id, a new one is
// allocated with epoch 0. Allocation failures are answered with the
// catalog's *kerr.Error, or COORDINATOR_LOAD_IN_PROGRESS (retriable) for any
// other error.
func (s *Server) handleInitProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	fail := func(code int16) kmsg.Response {
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
		return resp
	}
	if req.TransactionalID != nil {
		if *req.TransactionalID == "" {
			return fail(kerr.InvalidRequest.Code)
		}
		s.log.Info("refusing transactional producer: transactions are not supported",
			"transactional_id", *req.TransactionalID)
		return fail(kerr.TransactionalIDAuthorizationFailed.Code)
	}
	if req.Version >= 3 && (req.ProducerID != -1 || req.ProducerEpoch != -1) {
		if req.ProducerID < 0 || req.ProducerEpoch < 0 {
			return fail(kerr.InvalidRequest.Code)
		}
		if req.ProducerEpoch < math.MaxInt16-1 {
			resp.ProducerID, resp.ProducerEpoch = req.ProducerID, req.ProducerEpoch+1
			return resp
		}
	}
	id, err := s.catalog.AllocateProducerID(ctx)
	if err != nil {
		var kErr *kerr.Error
		if errors.As(err, &kErr) {
			return fail(kErr.Code)
		}
		s.log.Warn("producer id allocation failed", "err", err)
		return fail(kerr.CoordinatorLoadInProgress.Code)
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp
}
