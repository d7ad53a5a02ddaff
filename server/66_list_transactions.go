package server

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleListTransactions answers ListTransactions (SPEC §15) from the
// transaction coordinators of the shards this sidecar hosts
// (Transactions.ListTransactions); a shard that could not answer makes the
// whole answer its code.
func (s *Server) handleListTransactions(ctx context.Context, req *kmsg.ListTransactionsRequest) kmsg.Response {
	resp, err := s.cfg.Transactions.ListTransactions(ctx, req)
	if err != nil {
		s.rl.Log(ctx, slog.LevelWarn, "txn-list", "ListTransactions: a transaction coordinator could not answer", slog.Any("err", err))
		resp = req.ResponseKind().(*kmsg.ListTransactionsResponse)
		resp.ErrorCode = txnErrCode(err)
	}
	return resp
}
