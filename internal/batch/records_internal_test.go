package batch

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzRecordScanners: the slice scanner (uncompressed batches) and the
// stream scanner (decompressed ones) agree on every records section — the
// same verdict, and for a well-formed one the same records — and neither
// panics.
func FuzzRecordScanners(f *testing.F) {
	r := kmsg.Record{Key: []byte("k"), Value: []byte("v"), TimestampDelta64: 7, OffsetDelta: 0}
	body := r.AppendTo(nil)
	r.Length = int32(len(body) - 1)
	one := r.AppendTo(nil)
	f.Add(one, int32(1))
	f.Add(append(append([]byte(nil), one...), one...), int32(2))
	f.Add([]byte{0x0c, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0}, int32(1))
	f.Add([]byte{}, int32(1))
	f.Fuzz(func(t *testing.T, b []byte, count int32) {
		if count < 0 || count > 1<<16 {
			return
		}
		l := Limits{CheckTimestamps: true, MinTimestamp: 0, MaxTimestamp: 100}
		plain := recordCheck{l: &l, baseTimestamp: 50, maxTimestamp: NoTimestamp}
		okPlain := scanPlain(b, count, &plain)
		stream := recordCheck{l: &l, baseTimestamp: 50, maxTimestamp: NoTimestamp}
		errc := scanStream(bufio.NewReaderSize(bytes.NewReader(b), 16), count, &stream)
		if okPlain != (errc == nil) {
			t.Fatalf("slice scanner %v, stream scanner %v on %x (count %d)", okPlain, errc, b, count)
		}
		if okPlain && plain != stream {
			t.Fatalf("slice scanner saw %+v, stream scanner %+v", plain, stream)
		}
	})
}
