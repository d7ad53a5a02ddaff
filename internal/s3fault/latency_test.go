package s3fault_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/internal/s3fault"
)

// TestParseLatency: the S3-like model reads back as written, with the
// quantiles SPEC §13 is compared with; bad models are refused.
func TestParseLatency(t *testing.T) {
	m, err := s3fault.ParseLatency(s3fault.S3Like, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.String(); got != s3fault.S3Like {
		t.Fatalf("String() = %q, want %q", got, s3fault.S3Like)
	}
	put := m.Dist(s3fault.PutObject)
	for _, k := range []s3fault.Kind{s3fault.UploadPart, s3fault.CompleteMultipartUpload} {
		if d := m.Dist(k); d.String() != put.String() {
			t.Errorf("%s: %v, want the PUT distribution %v", k, d, put)
		}
	}
	for _, k := range []s3fault.Kind{s3fault.CreateMultipartUpload, s3fault.HeadObject, s3fault.DeleteObject, s3fault.ListObjects} {
		if d := m.Dist(k); d != nil {
			t.Errorf("%s held: %v", k, d)
		}
	}
	for _, q := range []struct {
		q    float64
		want time.Duration
	}{{0, 60 * time.Millisecond}, {0.5, 116250 * time.Microsecond}, {0.8, 150 * time.Millisecond},
		{0.9, 228947368 * time.Nanosecond}, {0.99, 300 * time.Millisecond}, {1, 450 * time.Millisecond}} {
		if got := put.Quantile(q.q); (got - q.want).Abs() > time.Microsecond {
			t.Errorf("PUT quantile %v = %v, want %v", q.q, got, q.want)
		}
	}
	if got := m.Dist(s3fault.GetObject).Quantile(0.5); got != 27500*time.Microsecond {
		t.Errorf("GET median %v, want 27.5ms", got)
	}

	for _, s := range []string{"", "none", " none "} {
		if m, err := s3fault.ParseLatency(s, 1); err != nil || m.String() != "none" {
			t.Errorf("ParseLatency(%q) = %v, %v; want the empty model", s, m, err)
		}
	}
	if m, err := s3fault.ParseLatency("HeadObject+DeleteObject=1-2.5;put=100-100", 1); err != nil ||
		m.String() != "put=100-100;DeleteObject=1-2.5;HeadObject=1-2.5" {
		t.Errorf("several kinds: %v, %v", m, err)
	}
	for _, bad := range []string{"put", "put=", "put=5", "put=a-b", "put=10-5", "put=0:1-2", "put=-1:1-2",
		"put=1:1-2,x", "Bogus=1-2", "put=-5-10"} {
		if _, err := s3fault.ParseLatency(bad, 1); err == nil {
			t.Errorf("ParseLatency(%q) accepted", bad)
		}
	}
}

// TestLatencyModelDraws: a seeded model's draws follow its bands' weights
// and stay inside them.
func TestLatencyModelDraws(t *testing.T) {
	const n = 100_000
	m, err := s3fault.ParseLatency(s3fault.S3Like, 42)
	if err != nil {
		t.Fatal(err)
	}
	var bands [3]int
	for range n {
		d := s3fault.Draw(m, s3fault.PutObject)
		switch {
		case d >= 60*time.Millisecond && d <= 150*time.Millisecond:
			bands[0]++
		case d > 150*time.Millisecond && d <= 300*time.Millisecond:
			bands[1]++
		case d > 300*time.Millisecond && d <= 450*time.Millisecond:
			bands[2]++
		default:
			t.Fatalf("draw %v outside every band", d)
		}
	}
	// Binomial standard deviations at n = 100,000: 0.13%, 0.12%, 0.03%;
	// the bounds are over 5 of them.
	for i, want := range []float64{0.80, 0.19, 0.01} {
		got := float64(bands[i]) / n
		if got < want-0.007 || got > want+0.007 {
			t.Errorf("band %d: %.4f of draws, want %.2f", i, got, want)
		}
	}
	if d := s3fault.Draw(m, s3fault.HeadObject); d != 0 {
		t.Errorf("HeadObject drew %v, want 0 (not held)", d)
	}
}

// TestProxyLatency: the proxy forwards a held request at once and answers
// it no sooner than its draw; kinds the model does not hold are not
// delayed; a client that gives up gets no answer, though the server acted.
func TestProxyLatency(t *testing.T) {
	up, reached := upstream(t, "0123456789")
	p := s3fault.Start(t, up.URL)
	m, err := s3fault.ParseLatency("PutObject=150-150;GetObject=3600000-3600000", 1)
	if err != nil {
		t.Fatal(err)
	}
	p.SetLatency(m)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
	do := func(ctx context.Context, method, path string) (string, error) {
		req, _ := http.NewRequestWithContext(ctx, method, p.URL+path, strings.NewReader("payload"))
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}

	start := time.Now()
	if body, err := do(context.Background(), "PUT", "/b/k"); err != nil || body != "0123456789" {
		t.Fatalf("held PUT: %q, %v", body, err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("PUT answered after %v, before its 150ms", d)
	}
	// HEAD is not held: it is answered whatever the model says of others
	// (a GET would wait an hour).
	if _, err := do(context.Background(), "HEAD", "/b/k"); err != nil {
		t.Fatalf("HEAD: %v", err)
	}

	// A GET held for an hour: the server has it at once; the client gives
	// up and gets no answer.
	before := reached.Load()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := do(ctx, "GET", "/b/k"); errc <- err }()
	for reached.Load() == before {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the held GET got an answer")
	}

	// nil holds nothing again.
	p.SetLatency(nil)
	if _, err := do(context.Background(), "GET", "/b/k"); err != nil {
		t.Fatalf("GET without a model: %v", err)
	}
}

// TestHoldAnswer: the server acts on the request, the client never gets
// the answer.
func TestHoldAnswer(t *testing.T) {
	up, reached := upstream(t, "0123456789")
	p := s3fault.Start(t, up.URL)
	rule := p.Add(&s3fault.Rule{Kind: s3fault.PutObject, Times: 1, Fault: s3fault.HoldAnswer()})
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "PUT", p.URL+"/b/k", strings.NewReader("payload"))
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	for reached.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the held PUT got an answer")
	}
	if rule.Fired() != 1 {
		t.Fatalf("fired %d", rule.Fired())
	}
}
