package s3fault_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/diskless-sidecar/sidecar/internal/s3fault"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestKindOf(t *testing.T) {
	tests := []struct {
		method, target string
		want           s3fault.Kind
	}{
		{"PUT", "/b/wal/abc", s3fault.PutObject},
		{"PUT", "/b/wal/abc?partNumber=3&uploadId=u1&x-id=UploadPart", s3fault.UploadPart},
		{"POST", "/b/wal/abc?uploads", s3fault.CreateMultipartUpload},
		{"POST", "/b/wal/abc?uploadId=u1", s3fault.CompleteMultipartUpload},
		{"DELETE", "/b/wal/abc?uploadId=u1", s3fault.AbortMultipartUpload},
		{"DELETE", "/b/wal/abc", s3fault.DeleteObject},
		{"GET", "/b/wal/abc", s3fault.GetObject},
		{"HEAD", "/b/wal/abc", s3fault.HeadObject},
		{"GET", "/b?list-type=2&prefix=wal%2F", s3fault.ListObjects},
		{"GET", "/b/?list-type=2", s3fault.ListObjects},
		{"GET", "/b?uploads&prefix=wal", s3fault.ListMultipartUploads},
		{"GET", "/b/wal/abc?uploadId=u1", s3fault.Other}, // ListParts
		{"PUT", "/b", s3fault.Other},                     // CreateBucket
		{"HEAD", "/b", s3fault.Other},                    // HeadBucket
		{"POST", "/b?delete", s3fault.Other},             // DeleteObjects
	}
	for _, tt := range tests {
		r := httptest.NewRequest(tt.method, tt.target, nil)
		if got := s3fault.KindOf(r); got != tt.want {
			t.Errorf("%s %s: %s, want %s", tt.method, tt.target, got, tt.want)
		}
	}
}

// upstream is a stand-in S3 server: it answers every request with 200 and
// a fixed body, and counts what reached it.
func upstream(t *testing.T, body string) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("X-Amz-Checksum-Crc32c", "good")
		w.Header().Set("Content-Length", "10")
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestProxyFaults(t *testing.T) {
	up, reached := upstream(t, "0123456789")
	p := s3fault.Start(t, up.URL)
	// No keep-alive: net/http silently retries a GET whose reused connection
	// was reset, which would hide the fault.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	do := func(method, path string) (*http.Response, string, error) {
		req, _ := http.NewRequest(method, p.URL+path, strings.NewReader("payload"))
		resp, err := client.Do(req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, string(b), err
	}

	// Forwarded as is.
	resp, body, err := do("PUT", "/b/k")
	if err != nil || resp.StatusCode != 200 || body != "0123456789" || resp.Header.Get("X-Amz-Checksum-Crc32c") != "good" {
		t.Fatalf("plain forward: %v %v %q", resp, err, body)
	}

	// The second PutObject gets 503 SlowDown; the server never sees it.
	rule := p.Add(&s3fault.Rule{Kind: s3fault.PutObject, Skip: 1, Times: 1, Fault: s3fault.SlowDown()})
	before := reached.Load()
	for i, want := range []int{200, 503, 200} {
		resp, body, err := do("PUT", "/b/k")
		if err != nil || resp.StatusCode != want {
			t.Fatalf("PUT %d: %v, %v; want %d", i, resp, err, want)
		}
		if want == 503 && !strings.Contains(body, "<Code>SlowDown</Code>") {
			t.Fatalf("503 body %q", body)
		}
	}
	if rule.Fired() != 1 || reached.Load()-before != 2 {
		t.Fatalf("fired %d, reached %d; want 1, 2", rule.Fired(), reached.Load()-before)
	}
	p.Clear()

	// Reset: a connection error, nothing forwarded.
	p.Add(&s3fault.Rule{Kind: s3fault.GetObject, Times: 1, Fault: s3fault.Reset()})
	before = reached.Load()
	if _, _, err := do("GET", "/b/k"); !errors.Is(err, syscall.ECONNRESET) && (err == nil || !strings.Contains(err.Error(), "EOF")) {
		t.Fatalf("GET after reset: %v, want a connection reset", err)
	}
	if reached.Load() != before {
		t.Fatal("a reset request was forwarded")
	}
	p.Clear()

	// LoseAnswer: forwarded, answer replaced by a reset.
	p.Add(&s3fault.Rule{Kind: s3fault.CompleteMultipartUpload, Times: 1, Fault: s3fault.LoseAnswer()})
	before = reached.Load()
	if _, _, err := do("POST", "/b/k?uploadId=u"); err == nil {
		t.Fatal("answer not lost")
	}
	if reached.Load() != before+1 {
		t.Fatal("LoseAnswer did not forward the request")
	}
	p.Clear()

	// A truncated body is an error for the reader; SetHeader rewrites.
	p.Add(&s3fault.Rule{Kind: s3fault.GetObject, Times: 1, Fault: s3fault.TruncateBody(4)})
	if _, body, err := do("GET", "/b/k"); err == nil {
		t.Fatalf("truncated body read without error: %q", body)
	}
	p.Add(&s3fault.Rule{Kind: s3fault.PutObject, Times: 1, Fault: s3fault.SetHeader("X-Amz-Checksum-Crc32c", "bad")})
	if resp, _, err := do("PUT", "/b/k"); err != nil || resp.Header.Get("X-Amz-Checksum-Crc32c") != "bad" {
		t.Fatalf("SetHeader: %v %v", resp, err)
	}
	p.Clear()

	// Slow body: all bytes, later.
	p.Add(&s3fault.Rule{Kind: s3fault.GetObject, Times: 1, Fault: s3fault.SlowBody(50)})
	start := time.Now()
	if _, body, err := do("GET", "/b/k"); err != nil || body != "0123456789" {
		t.Fatalf("slow body: %q, %v", body, err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("slow body took only %v", d)
	}

	// FlipByte: the byte at object offset 3 inverted, in an answer that
	// holds it; RangeCovers picks only GETs that ask for it.
	if !s3fault.RangeCovers(3)(httptest.NewRequest("GET", "/b/k", nil)) {
		t.Fatal("RangeCovers: a whole-object GET does not cover offset 3")
	}
	for _, rg := range []struct {
		h    string
		want bool
	}{{"bytes=0-9", true}, {"bytes=3-3", true}, {"bytes=4-9", false}, {"bytes=0-2", false}, {"bytes=2-", true}, {"junk", false}} {
		r := httptest.NewRequest("GET", "/b/k", nil)
		r.Header.Set("Range", rg.h)
		if got := s3fault.RangeCovers(3)(r); got != rg.want {
			t.Errorf("RangeCovers(3) of Range %q = %v, want %v", rg.h, got, rg.want)
		}
	}
	p.Add(&s3fault.Rule{Kind: s3fault.GetObject, Times: 1, Match: s3fault.RangeCovers(3), Fault: s3fault.FlipByte(3)})
	if _, body, err := do("GET", "/b/k"); err != nil || body != "012\xcc456789" {
		t.Fatalf("flipped byte: %q, %v", body, err)
	}
	if _, body, err := do("GET", "/b/k"); err != nil || body != "0123456789" {
		t.Fatalf("after the flip: %q, %v", body, err)
	}
	p.Clear()

	c := p.Counts()
	if c[s3fault.PutObject] != 5 || c[s3fault.GetObject] != 5 || c[s3fault.CompleteMultipartUpload] != 1 {
		t.Fatalf("counts %v", c)
	}
	p.ResetCounts()
	if p.Count(s3fault.PutObject) != 0 {
		t.Fatal("ResetCounts kept a count")
	}
}

// TestProxyReframedBodies: Chunked and ShortBody drop Content-Length and
// send chunked, keeping the other headers; ShortBody ends the body cleanly
// early; Hangup answers nothing.
func TestProxyReframedBodies(t *testing.T) {
	const body = "0123456789"
	var reached atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.Header().Set("Content-Range", "bytes 0-9/20")
		w.Header().Set("Content-Length", "10")
		w.WriteHeader(http.StatusPartialContent)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(up.Close)
	p := s3fault.Start(t, up.URL)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	tests := []struct {
		name     string
		fault    s3fault.Fault
		wantBody string
	}{
		{"chunked", s3fault.Chunked(), body},
		{"short body", s3fault.ShortBody(4), body[:4]},
		{"short body, none", s3fault.ShortBody(0), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p.Clear()
			p.Add(&s3fault.Rule{Kind: s3fault.GetObject, Fault: tt.fault})
			resp, err := client.Get(p.URL + "/b/k")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil || string(b) != tt.wantBody {
				t.Fatalf("body %q, %v; want %q read to a clean end", b, err, tt.wantBody)
			}
			if resp.StatusCode != http.StatusPartialContent || resp.ContentLength != -1 ||
				resp.Header.Get("Content-Length") != "" || len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
				t.Fatalf("status %d, length %d, Content-Length %q, transfer encoding %q; want 206, chunked without a length",
					resp.StatusCode, resp.ContentLength, resp.Header.Get("Content-Length"), resp.TransferEncoding)
			}
			if got := resp.Header.Get("Content-Range"); got != "bytes 0-9/20" {
				t.Fatalf("Content-Range %q, want it kept", got)
			}
		})
	}

	p.Clear()
	p.Add(&s3fault.Rule{Kind: s3fault.GetObject, Fault: s3fault.Hangup()})
	before := reached.Load()
	if resp, err := client.Get(p.URL + "/b/k"); err == nil {
		resp.Body.Close()
		t.Fatalf("hang up: got an answer (%d)", resp.StatusCode)
	} else if !errors.Is(err, io.EOF) {
		t.Fatalf("hang up: %v, want EOF before the answer", err)
	}
	if reached.Load() != before {
		t.Fatal("a hung-up request was forwarded")
	}
}

// TestProxyCloseEndsStalledRequests: Close returns while a request stalls.
func TestProxyCloseEndsStalledRequests(t *testing.T) {
	up, _ := upstream(t, "0123456789")
	p, err := s3fault.New(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	p.Add(&s3fault.Rule{Fault: s3fault.Stall()})
	errc := make(chan error, 1)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	go func() {
		resp, err := (&http.Client{Transport: tr}).Get(p.URL + "/b/k")
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	for p.Count(s3fault.GetObject) == 0 {
		time.Sleep(time.Millisecond)
	}
	p.Close()
	if err := <-errc; err == nil {
		t.Fatal("the stalled request got an answer")
	}
}
