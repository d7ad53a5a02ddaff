package server

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestInitProducerID(t *testing.T) {
	const allocated = 1001 // the fake catalog's first id
	for _, tc := range []struct {
		name      string
		version   int16
		txnID     *string
		id        int64
		epoch     int16
		allocErr  error
		wantCode  *kerr.Error
		wantID    int64
		wantEpoch int16
	}{
		{name: "new idempotent producer", version: 4, id: -1, epoch: -1, wantID: allocated},
		{name: "v0", version: 0, id: -1, epoch: -1, wantID: allocated},
		{name: "transactional", version: 4, txnID: kmsg.StringPtr("txn"), id: -1, epoch: -1,
			wantCode: kerr.TransactionalIDAuthorizationFailed, wantID: -1, wantEpoch: -1},
		{name: "empty transactional id", version: 4, txnID: kmsg.StringPtr(""), id: -1, epoch: -1,
			wantCode: kerr.InvalidRequest, wantID: -1, wantEpoch: -1},
		// Kafka gives a producer without a transactional id a new id
		// whatever it sends (KIP-360 re-initialisation included).
		{name: "re-init with an id and epoch", version: 3, id: 42, epoch: 3, wantID: allocated},
		{name: "re-init at the last epoch", version: 5, id: 42, epoch: 32766, wantID: allocated},
		{name: "only an id", version: 4, id: 42, epoch: -1, wantID: allocated},
		{name: "allocation refused", version: 4, id: -1, epoch: -1, allocErr: kerr.CoordinatorNotAvailable,
			wantCode: kerr.CoordinatorNotAvailable, wantID: -1, wantEpoch: -1},
		{name: "allocation failed", version: 4, id: -1, epoch: -1, allocErr: errors.New("log down"),
			wantCode: kerr.CoordinatorLoadInProgress, wantID: -1, wantEpoch: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, func(_ *Config, ts *testServer) {
				if tc.allocErr != nil {
					ts.cat.allocHook = func() (int64, error) { return 0, tc.allocErr }
				}
			})
			// Over the wire, so that fields absent from a version stay at
			// their defaults.
			req := kmsg.NewPtrInitProducerIDRequest()
			req.Version = tc.version
			req.TransactionalID = tc.txnID
			req.ProducerID, req.ProducerEpoch = tc.id, tc.epoch
			c := dialRaw(t, ts.Addr())
			resp := c.roundTrip(req).(*kmsg.InitProducerIDResponse)
			wantCode := int16(0)
			if tc.wantCode != nil {
				wantCode = tc.wantCode.Code
			}
			if resp.ErrorCode != wantCode || resp.ProducerID != tc.wantID || resp.ProducerEpoch != tc.wantEpoch {
				t.Fatalf("got (%v, id %d, epoch %d), want (%v, id %d, epoch %d)", kerr.ErrorForCode(resp.ErrorCode),
					resp.ProducerID, resp.ProducerEpoch, tc.wantCode, tc.wantID, tc.wantEpoch)
			}
		})
	}
}

// TestInitProducerIDIgnoresV3FieldsBeforeV3 checks that a handler given a
// v2 request with id and epoch set (as kmsg leaves them at −1 on the wire)
// allocates a fresh id.
func TestInitProducerIDIgnoresV3FieldsBeforeV3(t *testing.T) {
	ts := startServer(t, nil)
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 2
	req.ProducerID, req.ProducerEpoch = 42, 3
	resp := ts.handleInitProducerID(context.Background(), req).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != 0 || resp.ProducerID == 42 || resp.ProducerEpoch != 0 {
		t.Fatalf("v2: %+v", resp)
	}
}
