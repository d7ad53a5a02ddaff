package tagged

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
)

// The tagged fields of a committed batch, the one section whose meaning
// lives here: record 102's batches (docs/format/metadata-records.md §102)
// and DisklessCommitFile's (docs/format/coordinator-rpcs.md §101) carry
// the same three, and neither package may import the other.
//
//	tag 0 Txn int8               written when not 0: 1 a transactional
//	                             producer's data, 2 a COMMIT marker, 3 an
//	                             ABORT marker (diskless.TxnData, TxnCommit,
//	                             TxnAbort)
//	tag 1 TxnSeq int64           written when not 0: the transaction
//	                             guard's token (DESIGN §Transactions)
//	tag 2 CoordinatorEpoch int32 written for a marker only: its
//	                             coordinator epoch, any int32
const (
	txnTagKind  = 0
	txnTagSeq   = 1
	txnTagEpoch = 2
)

// txnTags are the fields' names and sizes, by tag.
var txnTags = [...]struct {
	name string
	size int
}{{"Txn", 1}, {"TxnSeq", 8}, {"CoordinatorEpoch", 4}}

// isMarker reports whether txn is a marker's: 2 COMMIT, 3 ABORT.
func isMarker(txn int8) bool { return txn == 2 || txn == 3 }

// AppendTxn appends a committed batch's section (above) to dst: txn and
// seq each only when not 0, coordinatorEpoch only when txn is a marker's
// (2 or 3).
func AppendTxn(dst []byte, txn int8, seq int64, coordinatorEpoch int32) []byte {
	var b [1 + 8 + 4]byte
	var fields [3]Field
	n := 0
	if txn != 0 {
		b[0] = byte(txn)
		fields[n] = Field{txnTagKind, b[0:1]}
		n++
	}
	if seq != 0 {
		binary.BigEndian.PutUint64(b[1:9], uint64(seq))
		fields[n] = Field{txnTagSeq, b[1:9]}
		n++
	}
	if isMarker(txn) {
		binary.BigEndian.PutUint32(b[9:13], uint32(coordinatorEpoch))
		fields[n] = Field{txnTagEpoch, b[9:13]}
		n++
	}
	return Append(dst, fields[:n]...)
}

// ReadTxn reads a section AppendTxn wrote: txn and seq are 0 when absent;
// coordinatorEpoch is tag 2 for a marker (−1 when absent: written before
// it), 0 for any other batch whatever tag 2 holds. A tag 0, 1 or 2 of
// another size than 1, 8 or 4 bytes is an error; other tags are skipped.
// Truncation shows in r.Ok.
func ReadTxn(r *kbin.Reader) (txn int8, seq int64, coordinatorEpoch int32, err error) {
	epoch := int32(-1)
	err = Each(r, func(tag uint32, v []byte) error {
		switch {
		case tag > txnTagEpoch:
		case len(v) != txnTags[tag].size:
			return fmt.Errorf("tagged field %d (%s) of %d bytes, want %d", tag, txnTags[tag].name, len(v), txnTags[tag].size)
		case tag == txnTagKind:
			txn = int8(v[0])
		case tag == txnTagSeq:
			seq = int64(binary.BigEndian.Uint64(v))
		default:
			epoch = int32(binary.BigEndian.Uint32(v))
		}
		return nil
	})
	if isMarker(txn) {
		coordinatorEpoch = epoch
	}
	return txn, seq, coordinatorEpoch, err
}
