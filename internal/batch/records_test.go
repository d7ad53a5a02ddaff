package batch_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/internal/batchtest"
)

var codecs = []int8{batch.CodecNone, batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd}

// recordsLimits is a CreateTime topic's window of a minute each side of now
// (message.timestamp.before.max.ms = after.max.ms = 60000).
var recordsLimits = batch.Limits{AllowZstd: true, CheckTimestamps: true, MinTimestamp: now - 60_000, MaxTimestamp: now + 60_000}

func rec(tsDelta int64, off int32) []byte {
	return batchtest.EncodeRecord(tsDelta, off, []byte("key"), []byte("value"), kmsg.Header{Key: "h", Value: []byte("v")})
}

func raw(codec int8, baseTS, maxTS int64, count int32, recs ...[]byte) []byte {
	o := batchtest.Plain(baseTS)
	o.Codec = codec
	return batchtest.Assemble(batchtest.Raw{Options: o, Records: bytes.Join(recs, nil), RecordsCount: count, LastOffsetDelta: count - 1, MaxTimestamp: maxTS})
}

// withBody returns a record of the given body bytes (after the length).
func withBody(body ...byte) []byte { return append([]byte{byte(len(body) << 1)}, body...) }

// TestValidateProduceRecords is the corruption table of the records
// section (SPEC §2), for every codec: what the header hides or misstates
// is found, with the code Kafka 4.4 answers (e2e pins them against a real
// broker), and an accepted batch's header carries the records' true max
// timestamp under a valid CRC.
func TestValidateProduceRecords(t *testing.T) {
	const minute = 60_000
	for _, codec := range codecs {
		cases := []struct {
			name  string
			batch []byte
			want  *kerr.Error
			// maxTimestamp is the stored header's, for accepted batches.
			maxTimestamp int64
		}{
			{"valid", raw(codec, now, now+5, 2, rec(0, 0), rec(5, 1)), nil, now + 5},
			{"record after the window, header max now", raw(codec, now, now, 2, rec(0, 0), rec(10*minute, 1)), kerr.InvalidTimestamp, 0},
			{"record before the window", raw(codec, now, now, 2, rec(0, 0), rec(-10*minute, 1)), kerr.InvalidTimestamp, 0},
			{"header max below the records'", raw(codec, now, now, 2, rec(0, 0), rec(30_000, 1)), nil, now + 30_000},
			{"header max above the records'", raw(codec, now, now+30_000, 2, rec(0, 0), rec(0, 1)), nil, now},
			{"header max out of the window, records in it", raw(codec, now, now+10*minute, 1, rec(0, 0)), nil, now},
			{"base out of the window, records in it", raw(codec, now-10*minute, now, 1, rec(10*minute, 0)), nil, now},
			{"no timestamps", raw(codec, -1, -1, 2, rec(0, 0), rec(0, 1)), nil, -1},
			{"count above the records", raw(codec, now, now, 3, rec(0, 0), rec(0, 1)), kerr.InvalidRecord, 0},
			{"count below the records", raw(codec, now, now, 2, rec(0, 0), rec(0, 1), rec(0, 2)), kerr.InvalidRecord, 0},
			{"offset deltas skip", raw(codec, now, now, 2, rec(0, 0), rec(0, 2)), kerr.InvalidRecord, 0},
			{"offset deltas repeat", raw(codec, now, now, 2, rec(0, 0), rec(0, 0)), kerr.InvalidRecord, 0},
			{"bad timestamp and bad offsets", raw(codec, now, now, 2, rec(0, 0), rec(10*minute, 5)), kerr.InvalidTimestamp, 0},
			{"record length too long", raw(codec, now, now, 2, withBody(0, 0, 0, 2, 'k', 2, 'v', 0, 0), rec(0, 1)), kerr.InvalidRecord, 0},
			{"record length too short", raw(codec, now, now, 1, withBody(0, 0, 0, 2, 'k', 2, 'v')), kerr.InvalidRecord, 0},
			{"negative record length", raw(codec, now, now, 1, []byte{1, 0, 0, 0}), kerr.InvalidRecord, 0},
			{"varint too long", raw(codec, now, now, 1, withBody(0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0)), kerr.InvalidRecord, 0},
			{"varlong too long", raw(codec, now, now, 1, withBody(0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 1, 1, 0)), kerr.InvalidRecord, 0},
			{"truncated varint", raw(codec, now, now, 1, withBody(0, 0, 0, 0xff)), kerr.InvalidRecord, 0},
			{"key past the record", raw(codec, now, now, 1, withBody(0, 0, 0, 40<<1, 'k', 2, 'v', 0)), kerr.InvalidRecord, 0},
			{"key length -2", raw(codec, now, now, 1, withBody(0, 0, 0, 3, 2, 'v', 0)), kerr.InvalidRecord, 0},
			{"null key and value", raw(codec, now, now, 1, withBody(0, 0, 0, 1, 1, 0)), nil, now},
			{"negative header count", raw(codec, now, now, 1, withBody(0, 0, 0, 2, 'k', 2, 'v', 3)), kerr.InvalidRecord, 0},
			{"null header key", raw(codec, now, now, 1, withBody(0, 0, 0, 2, 'k', 2, 'v', 2, 1, 2, 'x')), kerr.InvalidRecord, 0},
			{"null header value", raw(codec, now, now, 1, withBody(0, 0, 0, 2, 'k', 2, 'v', 2, 2, 'x', 1)), nil, now},
			{"trailing bytes", raw(codec, now, now, 1, rec(0, 0), []byte{1, 2, 3}), kerr.InvalidRecord, 0},
			{"empty record", raw(codec, now, now, 1, []byte{0}), kerr.InvalidRecord, 0},
		}
		for _, c := range cases {
			t.Run(codecName(codec)+"/"+c.name, func(t *testing.T) {
				b := append([]byte(nil), c.batch...)
				h, err := batch.ValidateProduce(b, recordsLimits)
				if err != c.want {
					t.Fatalf("ValidateProduce = %v, want %v", err, c.want)
				}
				if err != nil {
					return
				}
				if h.MaxTimestamp() != c.maxTimestamp {
					t.Fatalf("stored max timestamp now%+d, want now%+d", h.MaxTimestamp()-now, c.maxTimestamp-now)
				}
				if h.ComputeCRC() != h.CRC() {
					t.Fatal("CRC not updated after the rewrite")
				}
				var rb kmsg.RecordBatch
				if err := rb.ReadFrom(b); err != nil || rb.MaxTimestamp != c.maxTimestamp {
					t.Fatalf("kmsg reads max timestamp %d (%v)", rb.MaxTimestamp, err)
				}
				// The rewrite is the only change.
				if c.maxTimestamp == batch.Header(c.batch).MaxTimestamp() && !bytes.Equal(b, c.batch) {
					t.Fatal("bytes changed though the header was true")
				}
			})
		}
	}
}

// TestValidateProduceLogAppendTimeTopic: on a LogAppendTime topic record
// timestamps are not checked and the header is not rewritten (the
// coordinator stamps the batch), but the records must still be well formed.
func TestValidateProduceLogAppendTimeTopic(t *testing.T) {
	lim := batch.Limits{AllowZstd: true}
	for _, codec := range codecs {
		b := raw(codec, now, now, 2, rec(0, 0), rec(100*60_000, 1))
		orig := append([]byte(nil), b...)
		if _, err := batch.ValidateProduce(b, lim); err != nil || !bytes.Equal(b, orig) {
			t.Fatalf("%s: ValidateProduce = %v, bytes changed %v", codecName(codec), err, !bytes.Equal(b, orig))
		}
		if _, err := batch.ValidateProduce(raw(codec, now, now, 3, rec(0, 0), rec(0, 1)), lim); err != kerr.InvalidRecord {
			t.Fatalf("%s: short records: %v", codecName(codec), err)
		}
	}
}

// TestValidateProduceUndecompressable: bytes the codec bits name but that
// are not that codec's stream get UNKNOWN_SERVER_ERROR, as Kafka 4.4
// answers; so does a stream cut short (the CRC was computed after the cut).
func TestValidateProduceUndecompressable(t *testing.T) {
	for _, codec := range codecs[1:] {
		g := batchtest.Assemble(batchtest.Raw{Options: batchtest.Plain(now), Records: []byte("not a compressed stream at all"), RecordsCount: 1, MaxTimestamp: now})
		g[22] |= byte(codec)
		batch.Header(g).UpdateCRC()
		if _, err := batch.ValidateProduce(g, recordsLimits); err != kerr.UnknownServerError {
			t.Errorf("%s garbage: %v, want UNKNOWN_SERVER_ERROR", codecName(codec), err)
		}
		full := raw(codec, now, now, 4, rec(0, 0), rec(0, 1), rec(0, 2), rec(0, 3))
		cut := append([]byte(nil), full[:len(full)-4]...)
		binary.BigEndian.PutUint32(cut[8:], uint32(len(cut)-12)) // batchLength
		batch.Header(cut).UpdateCRC()
		if _, err := batch.ValidateProduce(cut, recordsLimits); err != kerr.UnknownServerError && err != kerr.InvalidRecord {
			t.Errorf("%s cut short: %v", codecName(codec), err)
		}
	}
}

func codecName(c int8) string { return [...]string{"none", "gzip", "snappy", "lz4", "zstd"}[c] }
