package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleDescribeTransactions answers DescribeTransactions (SPEC §15): each
// transactional id as its coordinator holds it
// (Transactions.DescribeTransaction); an id whose shard could not answer
// gets the shard's code, as a group request.
func (s *Server) handleDescribeTransactions(ctx context.Context, req *kmsg.DescribeTransactionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		st, err := s.cfg.Transactions.DescribeTransaction(ctx, id)
		if err != nil {
			st = kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID, st.ErrorCode = id, txnErrCode(err)
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp
}
