package fetch

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// scanAll scans a records section and returns every record's offset and
// timestamp.
func scanAll(raw []byte, s recordsSpan) (offsets, timestamps []int64, err error) {
	err = scanRecords(bufio.NewReader(bytes.NewReader(raw)), s, func(o, ts int64) bool {
		offsets, timestamps = append(offsets, o), append(timestamps, ts)
		return true
	})
	return offsets, timestamps, err
}

// record encodes one record with kmsg, Length computed.
func record(tsDelta int64, offDelta int32, key, value []byte, headers ...kmsg.Header) []byte {
	r := kmsg.Record{TimestampDelta64: tsDelta, OffsetDelta: offDelta, Key: key, Value: value, Headers: headers}
	r.Length = int32(len(r.AppendTo(nil)) - 1)
	return r.AppendTo(nil)
}

// TestScanRecords: offsets and timestamps of records with null, empty and
// large keys and values and headers, and the early stop.
func TestScanRecords(t *testing.T) {
	big := bytes.Repeat([]byte{'v'}, 100<<10) // past the scanner's buffer
	var raw []byte
	raw = append(raw, record(0, 0, nil, nil)...)
	raw = append(raw, record(-5, 1, []byte{}, []byte{})...)
	raw = append(raw, record(1<<40, 2, big, big, kmsg.Header{Key: "h", Value: nil}, kmsg.Header{Key: "", Value: big})...)
	raw = append(raw, record(7, 3, []byte("k"), nil)...)
	s := recordsSpan{baseOffset: 100, baseTimestamp: 1000, lastOffsetDelta: 3, count: 4}

	offsets, timestamps, err := scanAll(raw, s)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{100, 101, 102, 103}; !slices.Equal(offsets, want) {
		t.Errorf("offsets %v, want %v", offsets, want)
	}
	if want := []int64{1000, 995, 1000 + 1<<40, 1007}; !slices.Equal(timestamps, want) {
		t.Errorf("timestamps %v, want %v", timestamps, want)
	}

	// Stopping at the second record reads nothing of the third.
	r := bytes.NewReader(raw)
	br := bufio.NewReaderSize(r, 16)
	n := 0
	if err := scanRecords(br, s, func(int64, int64) bool { n++; return n < 2 }); err != nil || n != 2 {
		t.Fatalf("stopped after %d records: %v", n, err)
	}
	if read := len(raw) - r.Len() - br.Buffered(); read != len(record(0, 0, nil, nil))+len(record(-5, 1, []byte{}, []byte{})) {
		t.Errorf("read %d bytes to stop at record 2", read)
	}
}

// TestScanRecordsCorrupt is the corruption table of the record parser.
func TestScanRecordsCorrupt(t *testing.T) {
	good := record(0, 0, []byte("k"), []byte("v"))
	varint := func(v int64) []byte { return binary.AppendVarint(nil, v) }
	// withLength returns body prefixed with length as a varint.
	withLength := func(length int64, body ...[]byte) []byte {
		return slices.Concat(append([][]byte{varint(length)}, body...)...)
	}
	// fields are attributes, timestampDelta 0 and offsetDelta 0.
	fields := []byte{0, 0, 0}
	for _, tc := range []struct {
		name  string
		raw   []byte
		count int32
		want  error // errBadRecord or io.ErrUnexpectedEOF
	}{
		{name: "empty", raw: nil, count: 1, want: io.ErrUnexpectedEOF},
		{name: "truncated in the length", raw: []byte{0x80}, count: 1, want: io.ErrUnexpectedEOF},
		{name: "truncated in the value", raw: good[:len(good)-2], count: 1, want: io.ErrUnexpectedEOF},
		{name: "fewer records than the count", raw: good, count: 2, want: io.ErrUnexpectedEOF},
		{name: "bytes after the last record", raw: append(slices.Clone(good), 0), count: 1, want: errBadRecord},
		{name: "negative count", raw: good, count: -1, want: errBadRecord},
		{name: "negative length", raw: withLength(-1), count: 1, want: errBadRecord},
		{name: "length shorter than the fields", raw: withLength(2, fields, varint(-1), varint(-1), varint(0)), count: 1, want: errBadRecord},
		{name: "length longer than the fields", raw: withLength(7, fields, varint(-1), varint(-1), varint(0), []byte{0}), count: 1, want: errBadRecord},
		{name: "value longer than the record", raw: withLength(6, fields, varint(-1), varint(100), varint(0)), count: 1, want: errBadRecord},
		{name: "huge value length", raw: withLength(20, fields, varint(-1), varint(1<<31-1), varint(0)), count: 1, want: errBadRecord},
		{name: "key length below −1", raw: withLength(6, fields, varint(-2), varint(-1), varint(0)), count: 1, want: errBadRecord},
		{name: "negative headers count", raw: withLength(6, fields, varint(-1), varint(-1), varint(-1)), count: 1, want: errBadRecord},
		{name: "null header key", raw: withLength(8, fields, varint(-1), varint(-1), varint(1), varint(-1), varint(-1)), count: 1, want: errBadRecord},
		{name: "headers count past the record", raw: withLength(6, fields, varint(-1), varint(-1), varint(1000)), count: 1, want: errBadRecord},
		{name: "varint of 6 bytes", raw: withLength(10, []byte{0, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0}), count: 1, want: errBadRecord},
		{name: "varint over int32", raw: withLength(10, []byte{0, 0, 0xff, 0xff, 0xff, 0xff, 0x7f}), count: 1, want: errBadRecord},
		{name: "varlong of 11 bytes", raw: withLength(15, []byte{0}, bytes.Repeat([]byte{0x80}, 10), []byte{0}), count: 1, want: errBadRecord},
		{name: "varlong over int64", raw: withLength(15, []byte{0}, bytes.Repeat([]byte{0xff}, 9), []byte{0x02}), count: 1, want: errBadRecord},
		{name: "offset delta past the batch", raw: record(0, 1, nil, nil), count: 1, want: errBadRecord},
		{name: "negative offset delta", raw: record(0, -1, nil, nil), count: 1, want: errBadRecord},
		{name: "offset delta repeated", raw: slices.Concat(record(0, 0, nil, nil), record(0, 0, nil, nil)), count: 2, want: errBadRecord},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := scanAll(tc.raw, recordsSpan{lastOffsetDelta: max(tc.count-1, 0), count: tc.count})
			if !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
		})
	}
}

// FuzzScanRecords runs the record parser over arbitrary bytes: it must not
// panic, must allocate nothing that depends on the input, and must agree
// with franz-go's consumer whenever it accepts a whole section.
func FuzzScanRecords(f *testing.F) {
	f.Add(slices.Concat(record(0, 0, []byte("k"), []byte("v")), record(3, 1, nil, nil)), int32(2))
	f.Add(record(-9, 0, nil, nil, kmsg.Header{Key: "h", Value: []byte("x")}), int32(1))
	f.Add([]byte{0x0c, 0, 0, 0, 1, 0x80, 0x80, 0x80, 0x80, 0x08}, int32(1))
	f.Add([]byte{}, int32(0))
	f.Fuzz(func(t *testing.T, raw []byte, count int32) {
		s := recordsSpan{baseOffset: 1000, baseTimestamp: 50, lastOffsetDelta: max(count-1, 0), count: count}
		rd := bytes.NewReader(raw)
		br := bufio.NewReaderSize(rd, 16)
		allocs := testing.AllocsPerRun(1, func() {
			rd.Reset(raw)
			br.Reset(rd)
			_ = scanRecords(br, s, func(int64, int64) bool { return true })
		})
		if allocs > 16 { // formatting the error, at most
			t.Fatalf("%v allocations", allocs)
		}
		var offsets, timestamps []int64
		err := scanRecords(bufio.NewReader(bytes.NewReader(raw)), s, func(o, ts int64) bool {
			if o < s.baseOffset || o > s.baseOffset+int64(s.lastOffsetDelta) {
				t.Fatalf("offset %d outside the batch", o)
			}
			offsets, timestamps = append(offsets, o), append(timestamps, ts)
			return true
		})
		if len(offsets)*7 > len(raw) { // a record takes at least 7 bytes
			t.Fatalf("%d records from %d bytes", len(offsets), len(raw))
		}
		if err != nil {
			if !errors.Is(err, errBadRecord) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if count < 1 || slices.ContainsFunc(timestamps, func(ts int64) bool { return ts < -1<<50 || ts > 1<<50 }) {
			return // nothing to compare, or past what time.Time round-trips
		}
		// Accepted: franz-go's consumer reads the same records.
		b := wrapBatch(batch.CodecNone, raw, make([]int64, count)...)
		batch.Header(b).SetBaseOffset(s.baseOffset)
		setTimestamps(b, s.baseTimestamp)
		got, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{},
			&kmsg.FetchResponseTopicPartition{RecordBatches: b}, kgo.DefaultDecompressor(), nil)
		if got.Err != nil {
			t.Fatalf("franz-go refuses what the scanner accepts: %v", got.Err)
		}
		var kOffsets, kTimestamps []int64
		for _, r := range got.Records {
			kOffsets, kTimestamps = append(kOffsets, r.Offset), append(kTimestamps, r.Timestamp.UnixMilli())
		}
		if !slices.Equal(kOffsets, offsets) || !slices.Equal(kTimestamps, timestamps) {
			t.Fatalf("scanner %v %v, franz-go %v %v", offsets, timestamps, kOffsets, kTimestamps)
		}
	})
}

// setTimestamps sets a batch's baseTimestamp and maxTimestamp to ts and
// recomputes the CRC.
func setTimestamps(b []byte, ts int64) {
	binary.BigEndian.PutUint64(b[27:], uint64(ts))
	binary.BigEndian.PutUint64(b[35:], uint64(ts))
	batch.Header(b).UpdateCRC()
}
