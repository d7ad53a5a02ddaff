package server

import (
	"context"
	"errors"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// initProducerIDVersions: InitProducerId 0–5, all of kmsg's versions; v3+
// carry the producer's current id and epoch (KIP-360), v5 only signals
// transactions v2.
var initProducerIDVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 22, MinVersion: 0, MaxVersion: 5}

// handleInitProducerID answers InitProducerId for idempotent producers
// (SPEC §3).
//
// With a transactional id it is the transaction coordinator's
// (Config.Transactions, SPEC §15). Without one, a request with a
// transactional id gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED: it is what a
// broker answers when no transactional id may be used, and every client
// (Java, librdkafka, franz-go) treats it as fatal and non-retriable, so a
// transactional producer fails at once with a clear error instead of
// retrying forever or failing later with an opaque one. An empty
// transactional id gets INVALID_REQUEST, as Kafka answers.
//
// Otherwise a new producer id is allocated, with epoch 0, whatever id and
// epoch the request carries: as Kafka does for producers without a
// transactional id (also when an idempotent producer re-initialises after
// an error, KIP-360), so that an id is never handed to two producers.
// Allocation failures are answered with the catalog's *kerr.Error, or
// COORDINATOR_LOAD_IN_PROGRESS (retriable) for any other error.
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
		if s.cfg.Transactions != nil {
			return s.initTransactionalProducer(ctx, req)
		}
		s.rl.Log(ctx, slog.LevelInfo, *req.TransactionalID, "refusing transactional producer: transactions are not supported",
			slog.String("transactional_id", *req.TransactionalID))
		return fail(kerr.TransactionalIDAuthorizationFailed.Code)
	}
	id, err := s.catalog.AllocateProducerID(ctx)
	if err != nil {
		var kErr *kerr.Error
		if errors.As(err, &kErr) {
			return fail(kErr.Code)
		}
		s.rl.Log(ctx, slog.LevelWarn, "", "producer id allocation failed", slog.Any("err", err))
		return fail(kerr.CoordinatorLoadInProgress.Code)
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp
}
