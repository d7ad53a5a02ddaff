// Package e2e drives the real sidecar binary with real Kafka clients over
// TCP: franz-go's kgo and kcat (librdkafka). Each test starts its own
// sidecar process on 127.0.0.1 with a free port and its own data.dir.
//
// The S3 tests (s3_test.go) run the sidecar with diskless.storage.backend=s3
// against versitygw, through a fault-injecting proxy the test programs
// (s3_harness_test.go).
//
// With SIDECAR_REQUIRE_INTEGRATION=1 (set by .ci/run), a missing tool is a
// failure instead of a skip.
//
// Most of their time the tests wait (for sidecars, JVMs, session timeouts,
// failovers), so every test calls t.Parallel — go test runs -parallel of
// them at once, GOMAXPROCS by default — except the three that SIGKILL or
// restart a broker of the shared Kafka (sharedKafka): TestKafkaLogBrokerKill,
// TestClusterFailover and TestClusterCoordinatorFailover. Those run
// first, one at a time, while every parallel test waits (go test starts a
// package's parallel tests after its last sequential one), so no other
// test's sidecars see a broker die under them. Each test has its own
// ports (127.0.0.1:0), data.dir (t.TempDir), versitygw, metadata topic
// and cluster group (diskless-sidecars-<metadata topic>) on the shared
// Kafka, and network namespaces (netHost) named by process and number.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sidecarBin is the binary built once by TestMain.
var sidecarBin string

func TestMain(m *testing.M) {
	if os.Getenv(memberEnv) != "" {
		// This process is a consumer-group member a test started
		// (groups_member_test.go).
		os.Exit(runMember())
	}
	if os.Getenv(eosEnv) != "" {
		// An exactly-once member a test SIGKILLs (txn_eos_test.go).
		os.Exit(runEOSMember())
	}
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "sidecar-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sidecarBin = filepath.Join(dir, "sidecar")
	args := []string{"build", "-o", sidecarBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "../cmd/sidecar")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the sidecar:", err)
		os.Exit(1)
	}
	code := m.Run()
	stopSharedKafka(code != 0)
	os.RemoveAll(dir)
	os.Exit(code)
}

// requireTool returns the path of a command-line tool, skipping the test
// when it is missing unless SIDECAR_REQUIRE_INTEGRATION=1 demands it.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("SIDECAR_REQUIRE_INTEGRATION") == "1" {
			t.Fatalf("%s is required (SIDECAR_REQUIRE_INTEGRATION=1) but not installed: %v", name, err)
		}
		t.Skipf("%s not installed; set SIDECAR_REQUIRE_INTEGRATION=1 to make this a failure", name)
	}
	return p
}

func skipIfShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts sidecar processes; skipped with -short")
	}
}

// Sidecar is one running sidecar process.
type Sidecar struct {
	t       *testing.T
	DataDir string
	Addr    string // host:port of the Kafka listener (the first one)
	// Listeners are the bound host:port of each Kafka listener by name.
	Listeners map[string]string
	HTTP      string // host:port of the HTTP endpoint (/metrics, /healthz, /readyz)
	cmd       *exec.Cmd
	exited    chan struct{}
	exitErr   error

	mu   sync.Mutex
	logs bytes.Buffer
}

// StartSidecar starts the sidecar on data.dir dataDir (a fresh temp dir if
// ""), with extra config overrides, and waits until it listens.
func StartSidecar(t *testing.T, dataDir string, sets ...string) *Sidecar {
	t.Helper()
	return startSidecar(t, dataDir, nil, sets...)
}

// startSidecar is StartSidecar with extra environment variables.
func startSidecar(t *testing.T, dataDir string, env []string, sets ...string) *Sidecar {
	t.Helper()
	return startSidecarCmd(t, exec.Command, dataDir, env, sets...)
}

// startSidecarCmd is startSidecar with the binary run by command (a
// netHost's Command runs it in a network namespace).
func startSidecarCmd(t *testing.T, command func(string, ...string) *exec.Cmd, dataDir string, env []string, sets ...string) *Sidecar {
	t.Helper()
	skipIfShort(t)
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	args := []string{
		"--set", "listeners=PLAINTEXT://127.0.0.1:0",
		"--set", "http.listener=127.0.0.1:0",
		"--set", "data.dir=" + dataDir,
		"--set", "log.format=json",
		"--set", "log.level=debug",
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	s := &Sidecar{t: t, DataDir: dataDir, cmd: command(sidecarBin, args...), exited: make(chan struct{})}
	if env != nil {
		s.cmd.Env = append(os.Environ(), env...)
	}
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addrC := make(chan string, 1)
	listenersC := make(chan string, 1)
	httpC := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			s.mu.Lock()
			s.logs.Write(line)
			s.logs.WriteByte('\n')
			s.mu.Unlock()
			var rec struct {
				Msg       string `json:"msg"`
				Addr      string `json:"addr"`
				Listeners string `json:"listeners"`
			}
			if json.Unmarshal(line, &rec) == nil {
				switch rec.Msg {
				case "kafka listener started":
					select {
					case listenersC <- rec.Listeners:
					default:
					}
					select {
					case addrC <- rec.Addr:
					default:
					}
				case "http endpoint started":
					select {
					case httpC <- rec.Addr:
					default:
					}
				}
			}
		}
	}()
	go func() {
		s.exitErr = s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			s.cmd.Process.Kill()
			<-s.exited
		}
		if t.Failed() {
			t.Logf("sidecar logs (%s):\n%s", dataDir, s.Logs())
		}
	})
	select {
	case s.Addr = <-addrC:
		s.Listeners = map[string]string{}
		for _, l := range strings.Split(<-listenersC, ",") {
			if name, addr, ok := strings.Cut(l, "="); ok {
				s.Listeners[name] = addr
			}
		}
		select {
		case s.HTTP = <-httpC: // logged before the Kafka listener
		default:
		}
	case <-s.exited:
		t.Fatalf("sidecar exited during start-up (%v):\n%s", s.exitErr, s.Logs())
	case <-time.After(startTimeout):
		t.Fatalf("sidecar did not start listening within %v:\n%s", startTimeout, s.Logs())
	}
	return s
}

// startTimeout bounds a sidecar's start-up: generous, since with
// diskless.metadata.log=kafka a start creates its metadata topic and takes
// every shard over on a Kafka cluster that shares the loaded 2-core
// machine.
const startTimeout = 2 * time.Minute

// Alive reports whether the sidecar process is still running.
func (s *Sidecar) Alive() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// Logs returns everything the sidecar wrote to stderr so far.
func (s *Sidecar) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

// Stop sends SIGTERM and requires a clean exit (status 0) within 60 s.
func (s *Sidecar) Stop() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Fatal(err)
	}
	start := time.Now()
	select {
	case <-s.exited:
		s.t.Logf("sidecar stopped %v after SIGTERM", time.Since(start))
	case <-time.After(60 * time.Second):
		s.t.Fatalf("sidecar did not stop within 60s of SIGTERM:\n%s", s.Logs())
	}
	if s.exitErr != nil {
		s.t.Fatalf("sidecar exited with %v after SIGTERM:\n%s", s.exitErr, s.Logs())
	}
}

// Kill sends SIGKILL and waits for the process to be gone.
func (s *Sidecar) Kill() {
	s.t.Helper()
	s.cmd.Process.Kill()
	<-s.exited
}

// Client returns a kgo client bootstrapped to the sidecar, closed at the
// end of the test.
func (s *Sidecar) Client(opts ...kgo.Opt) *kgo.Client {
	s.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.Addr)}, opts...)...)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(cl.Close)
	return cl
}

// RawConn is a bare Kafka-protocol connection for requests a client library
// would not send as they are (duplicates, gaps, garbage).
type RawConn struct {
	t    *testing.T
	conn net.Conn
	corr int32
}

// DialRaw opens a raw connection to the sidecar.
func (s *Sidecar) DialRaw() *RawConn {
	s.t.Helper()
	c, err := net.DialTimeout("tcp", s.Addr, 5*time.Second)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { c.Close() })
	return &RawConn{t: s.t, conn: c}
}

// Request sends req with a v1/v2 request header and decodes the response.
func (r *RawConn) Request(req kmsg.Request) kmsg.Response {
	r.t.Helper()
	resp, err := r.TryRequest(req)
	if err != nil {
		r.t.Fatal(err)
	}
	return resp
}

// TryRequest is Request returning errors instead of failing the test.
func (r *RawConn) TryRequest(req kmsg.Request) (kmsg.Response, error) {
	r.corr++
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("e2e-raw"))
	frame := formatter.AppendRequest(nil, req, r.corr)
	r.conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := r.conn.Write(frame); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(r.conn, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r.conn, body); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != r.corr {
		return nil, fmt.Errorf("correlation id %d, want %d", got, r.corr)
	}
	body = body[4:]
	resp := req.ResponseKind()
	if resp.IsFlexible() && req.Key() != 18 { // ApiVersions answers with header v0
		for body[0] != 0 { // skip response header tagged fields (always none here)
			return nil, fmt.Errorf("unexpected response header tags")
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decoding %T: %w", resp, err)
	}
	return resp, nil
}

// WriteRaw writes bytes as they are.
func (r *RawConn) WriteRaw(b []byte) error {
	_, err := r.conn.Write(b)
	return err
}

// WaitClosed reports whether the peer closed the connection within d.
func (r *RawConn) WaitClosed(d time.Duration) bool {
	r.conn.SetReadDeadline(time.Now().Add(d))
	var b [1]byte
	_, err := r.conn.Read(b[:])
	return err == io.EOF || (err != nil && !isTimeout(err))
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// ctx returns a context bounded by the test's deadline minus a margin, or
// by d if shorter.
func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// mustNoErr fails the test with context on err.
func mustNoErr(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// lines splits text into lines without the trailing empty one.
func lines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
