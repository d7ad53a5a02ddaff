package main

import (
	"encoding/binary"
	"math/rand/v2"
)

// A record value produced by the tool is laid out as:
//
//	offset  size  field
//	0       8     send time: nanoseconds since the run's base time, big-endian
//	8       8     run id, big-endian: tells this run's records from others
//	16      n-16  filler
//
// The send time is read back by the producer's promise (produce latency) and
// by the consumers (end-to-end latency); both run in this process, so the
// monotonic clock of one time.Time base serves both.
const headerSize = 16

// hexDigits is the filler's alphabet: random hex text carries 4 bits per
// byte, so gzip and zstd compress it about 2:1 and snappy and lz4, which
// have no entropy coder, hardly at all — closer to real payloads than zeros
// (which every codec removes) or random bytes (which none compress).
const hexDigits = "0123456789abcdef"

// putHeader writes the send time and run id at the head of v.
func putHeader(v []byte, sendNanos int64, runID uint64) {
	binary.BigEndian.PutUint64(v[0:8], uint64(sendNanos))
	binary.BigEndian.PutUint64(v[8:16], runID)
}

// readHeader returns the send time of v and whether v carries runID.
func readHeader(v []byte, runID uint64) (sendNanos int64, ours bool) {
	if len(v) < headerSize || binary.BigEndian.Uint64(v[8:16]) != runID {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(v[0:8])), true
}

// fillHex fills v with random hex digits from rng, 16 digits per draw.
func fillHex(v []byte, rng *rand.PCG) {
	for len(v) > 0 {
		x := rng.Uint64()
		n := min(len(v), 16)
		for i := range n {
			v[i] = hexDigits[x&0xf]
			x >>= 4
		}
		v = v[n:]
	}
}
