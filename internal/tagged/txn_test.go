package tagged

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
)

// TestTxn: a committed batch's section — a marker's three fields, a data
// batch's Txn alone — and what ReadTxn reads from it, from a marker
// without tag 2 (−1), a data batch with one (0) and fields of a wrong
// size (errors).
func TestTxn(t *testing.T) {
	for _, tc := range []struct {
		txn   int8
		seq   int64
		epoch int32
		want  []byte
		read  int32 // the epoch read back
	}{
		// tag 0 ABORT, tag 1 seq 6, tag 2 epoch 5.
		{3, 6, 5, []byte{3, 0, 1, 3, 1, 8, 0, 0, 0, 0, 0, 0, 0, 6, 2, 4, 0, 0, 0, 5}, 5},
		// A data batch: no tag 2 whatever its epoch.
		{1, 0, 9, []byte{1, 0, 1, 1}, 0},
		{0, 0, 0, []byte{0}, 0},
	} {
		b := AppendTxn(nil, tc.txn, tc.seq, tc.epoch)
		if !bytes.Equal(b, tc.want) {
			t.Fatalf("AppendTxn(%d, %d, %d): %x, want %x", tc.txn, tc.seq, tc.epoch, b, tc.want)
		}
		r := &kbin.Reader{Src: b}
		txn, seq, epoch, err := ReadTxn(r)
		if err != nil || !r.Ok() || len(r.Src) != 0 || txn != tc.txn || seq != tc.seq || epoch != tc.read {
			t.Fatalf("ReadTxn(%x): %d %d %d, %v, ok %v; want %d %d %d", b, txn, seq, epoch, err, r.Ok(), tc.txn, tc.seq, tc.read)
		}
	}
	for _, tc := range []struct {
		name  string
		b     []byte
		epoch int32
		fails bool
	}{
		{"a marker without tag 2", []byte{1, 0, 1, 2}, -1, false},
		{"a data batch with tag 2", []byte{2, 0, 1, 1, 2, 4, 0, 0, 0, 9}, 0, false},
		{"an unknown tag", []byte{2, 0, 1, 2, 7, 1, 0xff}, -1, false},
		{"Txn of 2 bytes", []byte{1, 0, 2, 0, 2}, 0, true},
		{"TxnSeq of 4 bytes", []byte{1, 1, 4, 0, 0, 0, 1}, 0, true},
		{"CoordinatorEpoch of 8 bytes", []byte{2, 0, 1, 2, 2, 8, 0, 0, 0, 0, 0, 0, 0, 5}, 0, true},
	} {
		_, _, epoch, err := ReadTxn(&kbin.Reader{Src: tc.b})
		if (err != nil) != tc.fails || !tc.fails && epoch != tc.epoch {
			t.Errorf("%s: epoch %d, %v; want %d, failing %v", tc.name, epoch, err, tc.epoch, tc.fails)
		}
	}
}
