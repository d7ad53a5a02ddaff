package server

import (
	"encoding/binary"
	"strings"
	"testing"
)

// TestUnknownAPIKeyReconnectsLogOnce: a client that sends an unknown API
// key, is disconnected and reconnects, over and over (a probing client),
// gets its connection closed every time but logs one line for its host,
// not one per attempt (issue 9, defect 2; DESIGN §Logging).
func TestUnknownAPIKeyReconnectsLogOnce(t *testing.T) {
	ts := startServer(t, nil)
	frame := func(key, version int16) []byte {
		body := []byte{byte(key >> 8), byte(key), byte(version >> 8), byte(version), 0, 0, 0, 1, 0xff, 0xff}
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	const attempts = 200
	for range attempts {
		c := dialRaw(t, ts.Addr())
		c.write(frame(999, 0))
		c.expectClosed()
	}
	checkServing(t, ts.Addr())

	var bad []string
	for _, l := range strings.Split(ts.logs.String(), "\n") {
		if strings.Contains(l, "closing connection: bad request") {
			bad = append(bad, l)
		}
	}
	if len(bad) != 1 {
		t.Fatalf("%d lines for %d connections with an unknown API key, want 1:\n%s",
			len(bad), attempts, strings.Join(bad[:min(len(bad), 5)], "\n"))
	}
	if !strings.Contains(bad[0], "subject=127.0.0.1 remote=127.0.0.1:") || !strings.Contains(bad[0], "unknown api key 999") {
		t.Errorf("line %q: want the peer's host as subject, the remote address and the cause", bad[0])
	}
}
