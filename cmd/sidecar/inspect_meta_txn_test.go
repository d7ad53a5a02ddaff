package main

import (
	"testing"

	"github.com/diskless-sidecar/sidecar/group"
	"github.com/diskless-sidecar/sidecar/txn"
)

// TestDecodeMetaRecordKinds: meta dump names the transaction coordinator's
// record 118 and the groups' records, rather than failing on them.
func TestDecodeMetaRecordKinds(t *testing.T) {
	for _, tc := range []struct {
		body []byte
		want string
	}{
		{txn.AppendRecord(nil, &txn.StateRecord{TransactionalID: "tx", LastProducerID: -1, LastProducerEpoch: -1, TimeoutMs: 1, StartTimestamp: -1}), "TxnStateRecord"},
		{group.AppendRecord(nil, &group.GroupDeletedRecord{Group: "g"}), "GroupDeletedRecord"},
	} {
		_, name, err := decodeMetaRecord(tc.body)
		if err != nil || name != tc.want {
			t.Errorf("decodeMetaRecord: %q, %v; want %q", name, err, tc.want)
		}
	}
}
