package server

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/sasl"
)

// startSASLServer starts a server with a PLAINTEXT and a SASL_PLAINTEXT
// listener offering PLAIN to alice/alice-secret and bob/bob-secret.
func startSASLServer(t testing.TB, mod func(*Config)) *testServer {
	t.Helper()
	plain, err := sasl.NewPlain(map[string]string{"alice": "alice-secret", "bob": "bob-secret"})
	if err != nil {
		t.Fatal(err)
	}
	return startServer(t, func(c *Config, _ *testServer) {
		c.Addr = ""
		c.Listeners = []Listener{
			{Name: "SASL_PLAINTEXT", Protocol: SASLPlaintext, Addr: "127.0.0.1:0", SASL: []SASLMechanism{plain}},
			{Name: "PLAINTEXT", Protocol: Plaintext, Addr: "127.0.0.1:0"},
		}
		c.FailedAuthDelay = time.Millisecond
		if mod != nil {
			mod(c)
		}
	})
}

func handshake(v int16, mech string) *kmsg.SASLHandshakeRequest {
	r := kmsg.NewPtrSASLHandshakeRequest()
	r.Version, r.Mechanism = v, mech
	return r
}

func authenticate(v int16, msg string) *kmsg.SASLAuthenticateRequest {
	r := kmsg.NewPtrSASLAuthenticateRequest()
	r.Version, r.SASLAuthBytes = v, []byte(msg)
	return r
}

// loginPlain runs SaslHandshake v1 and SaslAuthenticate v2 for user and
// password and returns the authenticate answer.
func loginPlain(c *rawConn, user, password string) *kmsg.SASLAuthenticateResponse {
	c.t.Helper()
	hs := c.roundTrip(handshake(1, "PLAIN")).(*kmsg.SASLHandshakeResponse)
	if hs.ErrorCode != 0 {
		c.t.Fatalf("SaslHandshake: error %d", hs.ErrorCode)
	}
	return c.roundTrip(authenticate(2, "\x00"+user+"\x00"+password)).(*kmsg.SASLAuthenticateResponse)
}

func metadataReq() *kmsg.MetadataRequest {
	r := kmsg.NewPtrMetadataRequest()
	r.Version = 12
	return r
}

// TestSASLPlain: ApiVersions before the handshake, PLAIN over v1 and v0,
// the principal from the user; refusals answered as Kafka does (SPEC §14,
// SASL) and the connection closed; requests before authentication close
// it unanswered; SASL requests on a PLAINTEXT listener are
// ILLEGAL_SASL_STATE.
func TestSASLPlain(t *testing.T) {
	ts := startSASLServer(t, nil)
	addr := ts.ListenerAddr("SASL_PLAINTEXT")

	t.Run("v1", func(t *testing.T) {
		c := dialRaw(t, addr)
		if av := c.roundTrip(apiVersionsReq()).(*kmsg.ApiVersionsResponse); av.ErrorCode != 0 {
			t.Fatalf("ApiVersions before the handshake: error %d", av.ErrorCode)
		}
		hs := c.roundTrip(handshake(1, "PLAIN")).(*kmsg.SASLHandshakeResponse)
		if hs.ErrorCode != 0 || strings.Join(hs.SupportedMechanisms, ",") != "PLAIN" {
			t.Fatalf("SaslHandshake: %+v", hs)
		}
		a := c.roundTrip(authenticate(2, "\x00alice\x00alice-secret")).(*kmsg.SASLAuthenticateResponse)
		if a.ErrorCode != 0 || a.SessionLifetimeMillis != 0 {
			t.Fatalf("SaslAuthenticate: %+v", a)
		}
		if md := c.roundTrip(metadataReq()).(*kmsg.MetadataResponse); len(md.Brokers) != 1 {
			t.Fatalf("Metadata after authentication: %+v", md)
		}
		if p := ts.onlyConnPrincipal(t); p != "User:alice" {
			t.Fatalf("principal %q", p)
		}
		again := c.roundTrip(authenticate(2, "\x00alice\x00alice-secret")).(*kmsg.SASLAuthenticateResponse)
		if again.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("SaslAuthenticate after authentication: error %d, want ILLEGAL_SASL_STATE", again.ErrorCode)
		}
	})

	t.Run("v0 bare messages", func(t *testing.T) {
		c := dialRaw(t, addr)
		if hs := c.roundTrip(handshake(0, "PLAIN")).(*kmsg.SASLHandshakeResponse); hs.ErrorCode != 0 {
			t.Fatalf("SaslHandshake v0: error %d", hs.ErrorCode)
		}
		msg := []byte("\x00bob\x00bob-secret")
		c.write(appendRaw(nil, msg))
		answer, err := c.readFrame()
		if err != nil || len(answer) != 0 {
			t.Fatalf("bare answer %q, %v; want an empty message", answer, err)
		}
		if md := c.roundTrip(metadataReq()).(*kmsg.MetadataResponse); len(md.Brokers) != 1 {
			t.Fatalf("Metadata after authentication: %+v", md)
		}
	})

	t.Run("v0 wrong password", func(t *testing.T) {
		c := dialRaw(t, addr)
		c.roundTrip(handshake(0, "PLAIN"))
		c.write(appendRaw(nil, []byte("\x00bob\x00nope")))
		c.expectClosed()
	})

	refusals := []struct {
		name, user, password, msg string
	}{
		{"wrong password", "alice", "bob-secret", "Authentication failed: Invalid username or password"},
		{"unknown user", "mallory", "alice-secret", "Authentication failed: Invalid username or password"},
		{"empty password", "alice", "", "Authentication failed: Invalid username or password"},
	}
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			c := dialRaw(t, addr)
			a := loginPlain(c, r.user, r.password)
			if a.ErrorCode != kerr.SaslAuthenticationFailed.Code || a.ErrorMessage == nil || *a.ErrorMessage != r.msg {
				t.Fatalf("SaslAuthenticate: error %d %v, want SASL_AUTHENTICATION_FAILED %q", a.ErrorCode, a.ErrorMessage, r.msg)
			}
			c.expectClosed()
		})
	}
	t.Run("malformed message", func(t *testing.T) {
		c := dialRaw(t, addr)
		c.roundTrip(handshake(1, "PLAIN"))
		a := c.roundTrip(authenticate(1, "alice")).(*kmsg.SASLAuthenticateResponse)
		if want := "Authentication failed during authentication due to invalid credentials with SASL mechanism PLAIN"; a.ErrorCode != kerr.SaslAuthenticationFailed.Code || a.ErrorMessage == nil || *a.ErrorMessage != want {
			t.Fatalf("SaslAuthenticate: %d %v, want %q", a.ErrorCode, a.ErrorMessage, want)
		}
		c.expectClosed()
	})
	t.Run("unsupported mechanism", func(t *testing.T) {
		c := dialRaw(t, addr)
		hs := c.roundTrip(handshake(1, "SCRAM-SHA-512")).(*kmsg.SASLHandshakeResponse)
		if hs.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(hs.SupportedMechanisms, ",") != "PLAIN" {
			t.Fatalf("SaslHandshake: %+v, want UNSUPPORTED_SASL_MECHANISM listing PLAIN", hs)
		}
		c.expectClosed()
	})
	t.Run("request before authentication", func(t *testing.T) {
		c := dialRaw(t, addr)
		c.send(metadataReq())
		c.expectClosed()
		c = dialRaw(t, addr)
		c.roundTrip(handshake(1, "PLAIN"))
		c.send(metadataReq())
		c.expectClosed()
	})
	t.Run("second ApiVersions before the handshake", func(t *testing.T) {
		// As Kafka: one ApiVersions is answered before SaslHandshake
		// (after one of a version it does not know, answered
		// UNSUPPORTED_VERSION, the client may ask again); a second
		// closes the connection unanswered.
		c := dialRaw(t, addr)
		future := apiVersionsReq()
		future.Version = 99
		c.send(future)
		// The answer: correlation id, then UNSUPPORTED_VERSION.
		if frame, err := c.readFrame(); err != nil || len(frame) < 6 || int16(binary.BigEndian.Uint16(frame[4:])) != kerr.UnsupportedVersion.Code {
			t.Fatalf("ApiVersions v99: answer %x, %v; want UNSUPPORTED_VERSION", frame, err)
		}
		if av := c.roundTrip(apiVersionsReq()).(*kmsg.ApiVersionsResponse); av.ErrorCode != 0 {
			t.Fatalf("ApiVersions: error %d", av.ErrorCode)
		}
		c.send(apiVersionsReq())
		c.expectClosed()
	})
	t.Run("large frame before authentication", func(t *testing.T) {
		c := dialRaw(t, addr)
		c.write(binary.BigEndian.AppendUint32(nil, saslMaxReceive+1))
		c.expectClosed()
		c = dialRaw(t, addr)
		c.roundTrip(handshake(0, "PLAIN"))
		c.write(binary.BigEndian.AppendUint32(nil, saslMaxReceive+1))
		c.expectClosed()
	})
	t.Run("SASL on a PLAINTEXT listener", func(t *testing.T) {
		c := dialRaw(t, ts.ListenerAddr("PLAINTEXT"))
		if hs := c.roundTrip(handshake(1, "PLAIN")).(*kmsg.SASLHandshakeResponse); hs.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("SaslHandshake: error %d, want ILLEGAL_SASL_STATE", hs.ErrorCode)
		}
		if a := c.roundTrip(authenticate(2, "x")).(*kmsg.SASLAuthenticateResponse); a.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("SaslAuthenticate: error %d, want ILLEGAL_SASL_STATE", a.ErrorCode)
		}
	})
	checkServing(t, ts.ListenerAddr("PLAINTEXT"))
	if n := strings.Count(ts.logs.String(), "failed authentication: SASL"); n != 1 {
		t.Errorf("%d first lines of failed SASL authentications, want 1 (the rest counted by the limiter)", n)
	}
	// The log, at debug, holds no password: neither of the logins that
	// passed nor of those refused.
	for _, pw := range []string{"alice-secret", "bob-secret", "nope"} {
		if strings.Contains(ts.logs.String(), pw) {
			t.Errorf("the password %q in the log", pw)
		}
	}
}

// TestSASLReauthentication: with connections.max.reauth.ms the session
// lifetime is announced (v1+), a re-authentication of the same user
// renews it, one as another user or mechanism is refused, and a request
// after the session ended closes the connection (KIP-368).
func TestSASLReauthentication(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Unix(1000, 0).UnixNano())
	ts := startSASLServer(t, func(c *Config) {
		c.MaxReauth = time.Minute
		c.Now = func() time.Time { return time.Unix(0, now.Load()) }
	})
	addr := ts.ListenerAddr("SASL_PLAINTEXT")
	advance := func(d time.Duration) { now.Add(int64(d)) }

	c := dialRaw(t, addr)
	if a := loginPlain(c, "alice", "alice-secret"); a.ErrorCode != 0 || a.SessionLifetimeMillis != 60000 {
		t.Fatalf("login: %+v, want a 60 s session", a)
	}
	advance(50 * time.Second)
	if a := loginPlain(c, "alice", "alice-secret"); a.ErrorCode != 0 || a.SessionLifetimeMillis != 60000 {
		t.Fatalf("re-authentication: %+v", a)
	}
	advance(50 * time.Second) // 100 s after the first login, 50 s after the second
	c.roundTrip(metadataReq())
	advance(11 * time.Second)
	c.send(metadataReq())
	c.expectClosed()

	c = dialRaw(t, addr)
	c.send(authenticate(0, ""))
	c.expectClosed() // SaslAuthenticate before a handshake

	c = dialRaw(t, addr)
	loginPlain(c, "alice", "alice-secret")
	a := loginPlain(c, "bob", "bob-secret")
	if a.ErrorCode != kerr.SaslAuthenticationFailed.Code || a.ErrorMessage == nil || !strings.Contains(*a.ErrorMessage, "Cannot change principals") {
		t.Fatalf("re-authentication as another user: %d %v", a.ErrorCode, a.ErrorMessage)
	}
	c.expectClosed()
	if a := loginPlain(dialRaw(t, addr), "bob", "bob-secret"); a.ErrorCode != 0 {
		t.Fatalf("login after the refusals: %+v", a)
	}
	// The client is told the principals (Kafka's message); the log's
	// failed-authentication line names no user (DESIGN §Security).
	failed := 0
	for _, line := range strings.Split(ts.logs.String(), "\n") {
		if strings.Contains(line, "failed authentication") {
			failed++
			if strings.Contains(line, "alice") || strings.Contains(line, "bob") {
				t.Errorf("a failed-authentication line names a user: %s", line)
			}
		}
	}
	if failed == 0 {
		t.Error("no failed-authentication line for the re-authentication as another user")
	}
}

// TestSASLFailedLoginsBounded: 10,000 failed logins cost one log line
// (the rest counted), no connection left open, and bounded memory.
func TestSASLFailedLoginsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 connections")
	}
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-512"} {
		t.Run(mech, func(t *testing.T) { testFailedLoginsBounded(t, mech) })
	}
}

func testFailedLoginsBounded(t *testing.T, mech string) {
	sink := &logSink{}
	cred := sasl.NewScramCredential(diskless.ScramSHA512, "alice-secret", []byte("salt"), 4096)
	scram512, err := sasl.NewScram(diskless.ScramSHA512, func(user string, _ diskless.ScramMechanism) (diskless.ScramCredential, bool) {
		return cred, user == "alice"
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := startSASLServer(t, func(c *Config) {
		// INFO and above: the sink keeps every line, and the debug lines
		// of 10,000 connections would be the heap growth measured.
		c.Logger = slog.New(slog.NewTextHandler(lockedWriter{sink}, &slog.HandlerOptions{Level: slog.LevelInfo}))
		c.Listeners[0].SASL = append(c.Listeners[0].SASL, scram512)
	})
	addr := ts.ListenerAddr("SASL_PLAINTEXT")
	fail := func(n int) {
		var wg sync.WaitGroup
		next := atomic.Int64{}
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(n) {
					if err := failedLogin(addr, mech); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	heap := func() uint64 {
		waitFor(t, func() bool { return ts.connCount() == 0 })
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	fail(500) // warm up: buffers, the limiter's entry
	before := heap()
	fail(10000)
	after := heap()
	t.Logf("heap %d → %d bytes after 10,000 failed logins", before, after)
	if after > before+1<<20 {
		t.Errorf("heap grew by %d bytes over 10,000 failed logins", after-before)
	}
	logs := sink.String()
	if n := strings.Count(logs, "\n"); n > 5 {
		t.Errorf("%d log lines after 10,500 failed logins:\n%.2000s", n, logs)
	}
	if n := strings.Count(logs, "failed authentication: SASL"); n != 1 {
		t.Errorf("%d lines of failed authentications, want the first one", n)
	}
	checkServing(t, ts.ListenerAddr("PLAINTEXT"))
}

// failedLogin logs in with a wrong password, PLAIN, or SCRAM-SHA-512 as
// alice with a client-final message whose nonce and proof are wrong, and
// waits for the connection to close.
func failedLogin(addr net.Addr, mech string) error {
	nc, err := net.DialTimeout("tcp", addr.String(), testTimeout)
	if err != nil {
		return err
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(testTimeout))
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("brute"))
	// AppendRequest sizes the whole buffer: one call per frame.
	msg := append(f.AppendRequest(nil, handshake(1, "PLAIN"), 1), f.AppendRequest(nil, authenticate(2, "\x00alice\x00guess"), 2)...)
	if mech != "PLAIN" {
		msg = append(f.AppendRequest(nil, handshake(1, mech), 1), f.AppendRequest(nil, authenticate(2, "n,,n=alice,r=abcdef"), 2)...)
		msg = append(msg, f.AppendRequest(nil, authenticate(2, "c=biws,r=abcdefXYZ,p=AAAA"), 3)...)
	}
	if _, err := nc.Write(msg); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	for {
		if _, err := nc.Read(buf); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return fmt.Errorf("connection not closed after a failed login")
			}
			return nil
		}
	}
}

func (ts *testServer) connCount() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.mu.conns)
}

// TestSASLLongMechanismLogBounded: a SaslHandshake naming a mechanism of
// 30,000 bytes (SaslHandshake's string holds up to 32,767) is refused with
// UNSUPPORTED_SASL_MECHANISM, and its failed-authentication line carries
// at most the mechanism's first 64 bytes, not the whole name: a client
// cannot make one line (nor the limiter's entry holding its attributes)
// as large as its frame.
func TestSASLLongMechanismLogBounded(t *testing.T) {
	ts := startSASLServer(t, nil)
	c := dialRaw(t, ts.ListenerAddr("SASL_PLAINTEXT"))
	hs := c.roundTrip(handshake(1, strings.Repeat("M", 30000))).(*kmsg.SASLHandshakeResponse)
	if hs.ErrorCode != kerr.UnsupportedSaslMechanism.Code {
		t.Fatalf("SaslHandshake: error %d, want UNSUPPORTED_SASL_MECHANISM", hs.ErrorCode)
	}
	c.expectClosed()
	logs := ts.logs.String()
	if !strings.Contains(logs, "failed authentication: SASL") {
		t.Fatalf("no failed-authentication line:\n%.2000s", logs)
	}
	if strings.Contains(logs, strings.Repeat("M", 65)) || len(logs) > 16<<10 {
		t.Fatalf("%d bytes of log, the mechanism's name past its first 64 bytes in it", len(logs))
	}
}
