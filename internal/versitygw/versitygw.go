// Package versitygw runs a Versity S3 Gateway (versitygw, posix backend) for
// tests: a real S3-compatible server on 127.0.0.1, storing objects in a
// temporary directory, with fixed test credentials.
//
// Start finds the versitygw binary (VERSITYGW_BIN, then PATH, then
// $GOPATH/bin, where `go install
// github.com/versity/versitygw/cmd/versitygw@v1.8.0` puts it). When it is
// missing the test is skipped, unless SIDECAR_REQUIRE_INTEGRATION=1 (set by
// .ci/run), which makes it a failure. The server is stopped (SIGTERM, then
// SIGKILL after 5 s) in the test's cleanup.
package versitygw

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/build"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Test credentials of the gateway's root account, and its region.
const (
	AccessKey = "sidecar-test-access-key"
	SecretKey = "sidecar-test-secret-key"
	Region    = "us-east-1"
)

// Server is one running versitygw process.
type Server struct {
	// Endpoint is the gateway's base URL, http://127.0.0.1:<port>; clients
	// must use path-style addressing.
	Endpoint string
	// Root is the posix backend's directory: one subdirectory per bucket.
	Root string

	cmd    *exec.Cmd
	exited chan struct{}
	mu     sync.Mutex
	out    bytes.Buffer // the gateway's stdout and stderr
}

// Bin returns the path of the versitygw binary, or an error saying where it
// was looked for.
func Bin() (string, error) {
	if p := os.Getenv("VERSITYGW_BIN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("VERSITYGW_BIN: %w", err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	for _, dir := range filepath.SplitList(build.Default.GOPATH) {
		p := filepath.Join(dir, "bin", "versitygw")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", errors.New("versitygw not found in VERSITYGW_BIN, PATH or $GOPATH/bin " +
		"(go install github.com/versity/versitygw/cmd/versitygw@v1.8.0)")
}

// Require returns the binary's path, skipping the test when it is missing
// unless SIDECAR_REQUIRE_INTEGRATION=1 demands it.
func Require(t testing.TB) string {
	t.Helper()
	p, err := Bin()
	if err != nil {
		if os.Getenv("SIDECAR_REQUIRE_INTEGRATION") == "1" {
			t.Fatalf("versitygw is required (SIDECAR_REQUIRE_INTEGRATION=1): %v", err)
		}
		t.Skipf("%v; set SIDECAR_REQUIRE_INTEGRATION=1 to make this a failure", err)
	}
	return p
}

// Start starts a gateway on a free port of 127.0.0.1 with an empty
// temporary root, waits until it answers, and stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Require(t)
	root := t.TempDir()
	var lastErr error
	// Picking a free port and handing it over leaves a small window in
	// which another process may take it: try a few ports.
	for range 3 {
		s, err := start(bin, root)
		if err == nil {
			t.Cleanup(s.stop)
			return s
		}
		lastErr = err
	}
	t.Fatalf("starting versitygw: %v", lastErr)
	return nil
}

func start(bin, root string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s := &Server{Endpoint: "http://" + addr, Root: root, exited: make(chan struct{})}
	s.cmd = exec.Command(bin, "--port", addr, "--region", Region, "--keep-alive", "--quiet", "posix", root)
	s.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+AccessKey, "ROOT_SECRET_ACCESS_KEY="+SecretKey)
	s.cmd.Stdout = (*lockedWriter)(s)
	s.cmd.Stderr = (*lockedWriter)(s)
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		// Any HTTP answer (403 for an anonymous request) means it serves.
		resp, err := http.Get(s.Endpoint + "/")
		if err == nil {
			resp.Body.Close()
			http.DefaultClient.CloseIdleConnections()
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("versitygw exited during start-up: %s", s.Output())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("versitygw did not answer on %s within 20s: %s", addr, s.Output())
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

type lockedWriter Server

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out.Write(p)
}

// Output returns what the gateway printed so far.
func (s *Server) Output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// stop sends SIGTERM and waits up to 5 s, then kills the process.
func (s *Server) stop() {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// Client returns an S3 client for the gateway with the root credentials,
// path-style addressing and the SDK's default retries. Its idle connections
// are closed when the test ends.
func (s *Server) Client(t testing.TB) *s3.Client {
	t.Helper()
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(hc.CloseIdleConnections)
	return s3.New(s3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
		HTTPClient:   hc,
	})
}

// CreateBucket creates a bucket.
func (s *Server) CreateBucket(t testing.TB, bucket string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Client(t).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("creating bucket %s: %v", bucket, err)
	}
}

// OpenUploads returns the multipart uploads in progress (neither completed
// nor aborted) in bucket under key prefix.
func (s *Server) OpenUploads(t testing.TB, bucket, prefix string) []types.MultipartUpload {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := s.Client(t)
	var out []types.MultipartUpload
	in := &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket), Prefix: aws.String(prefix)}
	for {
		resp, err := cl.ListMultipartUploads(ctx, in)
		if err != nil {
			t.Fatalf("listing multipart uploads in %s: %v", bucket, err)
		}
		out = append(out, resp.Uploads...)
		if !aws.ToBool(resp.IsTruncated) {
			return out
		}
		in.KeyMarker, in.UploadIdMarker = resp.NextKeyMarker, resp.NextUploadIdMarker
	}
}
