// Package s3fault is a fault-injecting HTTP proxy for S3 (path-style
// requests), for tests: put it between a client and an S3-compatible server
// and it forwards every request, except those that a Rule picks, which get
// a Fault instead — a 503 SlowDown or another error, a reset or hung-up
// connection, a delay, a slow, truncated or chunked response body, a body
// shorter than its Content-Range, a body with a byte flipped, an answer
// lost or held after the server acted.
// It also counts the requests by Kind (PutObject, UploadPart, ...), so
// that tests can pin what a scenario costs, and can give the answers the
// latency of a real object store (LatencyModel; S3Like is S3 Standard's),
// so that benchmarks on a local server see S3's timing.
//
// The proxy keeps the Host header of each request, so SigV4 signatures made
// for the proxy's address stay valid at the server.
package s3fault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Kind is the S3 operation a request performs, as told by its method, path
// and query.
type Kind string

// The kinds of request told apart.
const (
	PutObject               Kind = "PutObject"
	CreateMultipartUpload   Kind = "CreateMultipartUpload"
	UploadPart              Kind = "UploadPart"
	CompleteMultipartUpload Kind = "CompleteMultipartUpload"
	AbortMultipartUpload    Kind = "AbortMultipartUpload"
	GetObject               Kind = "GetObject"
	HeadObject              Kind = "HeadObject"
	DeleteObject            Kind = "DeleteObject"
	ListObjects             Kind = "ListObjects"
	ListMultipartUploads    Kind = "ListMultipartUploads"
	Other                   Kind = "Other" // bucket operations, ListParts, DeleteObjects, ...
)

// KindOf classifies a path-style S3 request (/bucket/key?query).
func KindOf(r *http.Request) Kind {
	q := r.URL.Query()
	_, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	hasKey := key != ""
	switch r.Method {
	case http.MethodPut:
		switch {
		case hasKey && q.Has("partNumber") && q.Has("uploadId"):
			return UploadPart
		case hasKey && r.Header.Get("X-Amz-Copy-Source") == "":
			return PutObject
		}
	case http.MethodPost:
		switch {
		case hasKey && q.Has("uploads"):
			return CreateMultipartUpload
		case hasKey && q.Has("uploadId"):
			return CompleteMultipartUpload
		}
	case http.MethodDelete:
		switch {
		case hasKey && q.Has("uploadId"):
			return AbortMultipartUpload
		case hasKey:
			return DeleteObject
		}
	case http.MethodGet:
		switch {
		case !hasKey && q.Has("uploads"):
			return ListMultipartUploads
		case !hasKey && !q.Has("location") && !q.Has("versioning"):
			return ListObjects
		case hasKey && !q.Has("uploadId"):
			return GetObject
		}
	case http.MethodHead:
		if hasKey {
			return HeadObject
		}
	}
	return Other
}

// PartNumber returns the partNumber of an UploadPart request, or 0.
func PartNumber(r *http.Request) int {
	n, _ := strconv.Atoi(r.URL.Query().Get("partNumber"))
	return n
}

// Fault is what the proxy does to a request a Rule picked.
type Fault struct {
	name string
	// before runs instead of forwarding; it returns true if it answered
	// (or broke the connection) and the request must not be forwarded.
	before func(w http.ResponseWriter, r *http.Request) bool
	// after runs on the server's answer instead of passing it on.
	after func(w http.ResponseWriter, r *http.Request, resp *http.Response)
}

func (f Fault) String() string { return f.name }

// Error answers status with an S3 error document carrying code, without
// forwarding the request (the server never sees it).
func Error(status int, code string) Fault {
	return Fault{name: fmt.Sprintf("%d %s", status, code), before: func(w http.ResponseWriter, r *http.Request) bool {
		body := fmt.Sprintf("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>injected by s3fault</Message><RequestId>s3fault</RequestId></Error>", code)
		// Read the request body first, so that the client sees the answer
		// rather than a connection closed while it was still sending.
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/xml")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
		return true
	}}
}

// SlowDown answers 503 SlowDown, S3's throttling answer.
func SlowDown() Fault { return Error(http.StatusServiceUnavailable, "SlowDown") }

// InternalError answers 500 InternalError.
func InternalError() Fault { return Error(http.StatusInternalServerError, "InternalError") }

// Reset resets the connection (TCP RST) without forwarding the request.
func Reset() Fault {
	return Fault{name: "reset", before: func(w http.ResponseWriter, r *http.Request) bool {
		reset(w)
		return true
	}}
}

// LoseAnswer forwards the request — the server acts on it — and then
// resets the connection instead of passing the answer on.
func LoseAnswer() Fault {
	return Fault{name: "lose answer", after: func(w http.ResponseWriter, r *http.Request, resp *http.Response) {
		_, _ = io.Copy(io.Discard, resp.Body)
		reset(w)
	}}
}

// HoldAnswer forwards the request — the server acts on it, a PUT's
// object is stored — and then holds the answer until the client gives up
// (or the proxy closes): a request whose answer is slow to come back from
// a store that did the work.
func HoldAnswer() Fault {
	return Fault{name: "hold answer", after: func(w http.ResponseWriter, r *http.Request, resp *http.Response) {
		<-r.Context().Done()
		panic(http.ErrAbortHandler) // no answer at all
	}}
}

// Delay waits d before forwarding the request; if the client gives up
// first (a timeout), the request is never forwarded.
func Delay(d time.Duration) Fault {
	return Fault{name: "delay " + d.String(), before: func(w http.ResponseWriter, r *http.Request) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return false
		case <-r.Context().Done():
			panic(http.ErrAbortHandler) // no answer at all, not an empty 200
		}
	}}
}

// Stall holds the request without forwarding or answering it until the
// client gives up (or the proxy closes).
func Stall() Fault {
	return Fault{name: "stall", before: func(w http.ResponseWriter, r *http.Request) bool {
		<-r.Context().Done()
		panic(http.ErrAbortHandler) // no answer at all, not an empty 200
	}}
}

// SlowBody forwards the request and passes the answer on at about
// bytesPerSecond, in chunks of at most 16 KiB.
func SlowBody(bytesPerSecond int) Fault {
	return Fault{name: fmt.Sprintf("slow body %d B/s", bytesPerSecond), after: func(w http.ResponseWriter, r *http.Request, resp *http.Response) {
		writeHeader(w, resp)
		chunk := min(16<<10, max(1, bytesPerSecond/10))
		pause := time.Duration(float64(time.Second) * float64(chunk) / float64(bytesPerSecond))
		buf := make([]byte, chunk)
		rc := http.NewResponseController(w)
		for {
			n, err := io.ReadFull(resp.Body, buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return
				}
				_ = rc.Flush()
			}
			if err != nil {
				return
			}
			select {
			case <-time.After(pause):
			case <-r.Context().Done():
				return
			}
		}
	}}
}

// TruncateBody forwards the request, passes on the answer's headers and
// its first n body bytes, then resets the connection.
func TruncateBody(n int64) Fault {
	return Fault{name: fmt.Sprintf("truncate body at %d", n), after: func(w http.ResponseWriter, r *http.Request, resp *http.Response) {
		writeHeader(w, resp)
		_, _ = io.CopyN(w, resp.Body, n)
		_ = http.NewResponseController(w).Flush()
		reset(w)
	}}
}

// EndBodyEarly forwards the request, passes on the answer's headers and
// its first n body bytes, then closes the connection the ordinary way
// (FIN): the client sees the body end before its Content-Length.
func EndBodyEarly(n int64) Fault {
	return Fault{name: fmt.Sprintf("end body at %d", n), after: func(w http.ResponseWriter, r *http.Request, resp *http.Response) {
		writeHeader(w, resp)
		_, _ = io.CopyN(w, resp.Body, n)
		_ = http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	}}
}

// Chunked forwards the request and passes the answer on in chunked
// transfer coding, without Content-Length, as a server streaming a body of
// unknown length does (over HTTP/2 an answer may equally lack the header).
// The status and the other headers, Content-Range among them, are kept.
func Chunked() Fault {
	return Fault{name: "chunked", after: func(w http.ResponseWriter, r *http.Request, resp *http.Response) {
		resp.Header.Del("Content-Length")
		writeHeader(w, resp)
		// Headers sent before the body's length is known: net/http
		// switches to chunked coding.
		_ = http.NewResponseController(w).Flush()
		_, _ = io.Copy(w, resp.Body)
	}}
}

// ShortBody forwards the request and passes the answer on chunked, without
// Content-Length, with only its first n body bytes and a proper end of the
// body (the last chunk), keeping the status and Content-Range: a
// well-formed answer that holds fewer bytes than the range it announces.
// Unlike TruncateBody and EndBodyEarly, nothing at the HTTP level is
// broken; only Content-Range tells that bytes are missing.
func ShortBody(n int64) Fault {
	return Fault{name: fmt.Sprintf("short body of %d bytes", n), after: func(w http.ResponseWriter, r *http.Request, resp *http.Response) {
		resp.Header.Del("Content-Length")
		writeHeader(w, resp)
		_ = http.NewResponseController(w).Flush()
		_, _ = io.CopyN(w, resp.Body, n)
	}}
}

// FlipByte forwards the request and passes the answer on whole, with the
// bits of one byte inverted: the byte at object offset off, located in the
// body by the answer's Content-Range (a whole-object answer starts at 0).
// Headers and length are kept, so nothing at the HTTP level is wrong; an
// answer that does not hold that byte passes unchanged. It stands for a
// corrupt read: a flipped bit on the wire or a bad sector at the store.
func FlipByte(off int64) Fault {
	return Fault{name: fmt.Sprintf("flip byte %d", off), after: func(w http.ResponseWriter, r *http.Request, resp *http.Response) {
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			reset(w)
			return
		}
		start := int64(0)
		if cr := resp.Header.Get("Content-Range"); cr != "" {
			if lo, _, ok := parseRange(strings.TrimPrefix(cr, "bytes "), "-"); ok {
				start = lo
			}
		}
		if i := off - start; i >= 0 && i < int64(len(body)) {
			body[i] ^= 0xff
		}
		writeHeader(w, resp)
		_, _ = w.Write(body)
	}}
}

// RangeCovers returns a Rule.Match that picks GETs whose Range header
// (bytes=lo-hi, or bytes=lo-) asks for object offset off, or that ask for
// the whole object.
func RangeCovers(off int64) func(*http.Request) bool {
	return func(r *http.Request) bool {
		h := r.Header.Get("Range")
		if h == "" {
			return true
		}
		lo, hi, ok := parseRange(strings.TrimPrefix(h, "bytes="), "-")
		return ok && lo <= off && off <= hi
	}
}

// parseRange parses "lo<sep>hi[/…]" (hi may be empty: open-ended, and
// then a large value).
func parseRange(s, sep string) (lo, hi int64, ok bool) {
	a, b, found := strings.Cut(s, sep)
	if !found {
		return 0, 0, false
	}
	b, _, _ = strings.Cut(b, "/")
	lo, err := strconv.ParseInt(a, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	if b == "" {
		return lo, 1<<63 - 1, true
	}
	hi, err = strconv.ParseInt(b, 10, 64)
	return lo, hi, err == nil
}

// Hangup closes the connection the ordinary way (FIN) without forwarding
// the request or answering it: the client reads EOF where the status line
// should be.
func Hangup() Fault {
	return Fault{name: "hang up", before: func(w http.ResponseWriter, r *http.Request) bool {
		panic(http.ErrAbortHandler)
	}}
}

// SetHeader forwards the request and passes the answer on with header
// name set to value (e.g. a wrong x-amz-checksum-crc32c); value "" deletes
// the header.
func SetHeader(name, value string) Fault {
	return Fault{name: "set header " + name, after: func(w http.ResponseWriter, r *http.Request, resp *http.Response) {
		if value == "" {
			resp.Header.Del(name)
		} else {
			resp.Header.Set(name, value)
		}
		writeHeader(w, resp)
		_, _ = io.Copy(w, resp.Body)
	}}
}

// Rule picks requests for a Fault: those of Kind (any if ""), of part
// PartNumber (UploadPart; any if 0), for which Match (if set) is true;
// among them it lets the first Skip through and applies the Fault to the
// next Times (every later one if Times is 0). The first rule, in the order
// added, that applies to a request wins; every rule counts every request it
// matches.
type Rule struct {
	Kind       Kind
	PartNumber int
	Match      func(r *http.Request) bool
	Skip       int
	Times      int
	Fault      Fault

	matched atomic.Int64 // requests matched
	fired   atomic.Int64 // faults applied
}

// Fired returns how many requests the rule's Fault was applied to.
func (r *Rule) Fired() int64 { return r.fired.Load() }

func (r *Rule) matches(req *http.Request, kind Kind) bool {
	return (r.Kind == "" || r.Kind == kind) &&
		(r.PartNumber == 0 || r.PartNumber == PartNumber(req)) &&
		(r.Match == nil || r.Match(req))
}

// Proxy is a running fault-injecting proxy on 127.0.0.1.
type Proxy struct {
	// URL is the proxy's base URL, http://127.0.0.1:<port>: the endpoint
	// to give S3 clients.
	URL string

	target    *url.URL
	transport *http.Transport
	srv       *http.Server
	ln        net.Listener
	handlers  sync.WaitGroup
	done      chan struct{} // closed by Close

	latency atomic.Pointer[LatencyModel]

	mu     sync.Mutex
	rules  []*Rule
	counts map[Kind]int64
	closed bool // guarded by mu; handlers.Add only while false
}

// New starts a proxy in front of target, an http:// base URL.
func New(target string) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("s3fault: target %q: want http://host:port", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		URL:    "http://" + ln.Addr().String(),
		target: u,
		transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 64,
		},
		ln:     ln,
		done:   make(chan struct{}),
		counts: make(map[Kind]int64),
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// Start is New for a test: it fails the test on error and closes the
// proxy when the test ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// Close stops the proxy, breaks the connections in progress and waits for
// their handlers to return.
func (p *Proxy) Close() {
	select {
	case <-p.done:
		return
	default:
	}
	close(p.done)
	p.mu.Lock()
	p.closed = true // no handler starts after this
	p.mu.Unlock()
	_ = p.srv.Close()
	p.handlers.Wait()
	p.transport.CloseIdleConnections()
}

// Add adds a rule after the existing ones and returns it (for Fired).
func (p *Proxy) Add(r *Rule) *Rule {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append(p.rules, r)
	return r
}

// SetLatency holds the answers of the kinds m covers as m draws (see
// LatencyModel), from the next request on; nil holds nothing. Faults
// apply as well: a fault that answers without forwarding is not held, a
// fault on the answer acts once the answer's latency has passed.
func (p *Proxy) SetLatency(m *LatencyModel) { p.latency.Store(m) }

// Clear removes every rule: from now on every request is forwarded.
func (p *Proxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = nil
}

// Count returns how many requests of kind the proxy received (faulted
// ones included) since it started or since ResetCounts.
func (p *Proxy) Count(kind Kind) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[kind]
}

// Counts returns a copy of every count.
func (p *Proxy) Counts() map[Kind]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[Kind]int64, len(p.counts))
	for k, v := range p.counts {
		out[k] = v
	}
	return out
}

// ResetCounts sets every count to zero.
func (p *Proxy) ResetCounts() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.counts)
}

// pick counts the request and returns the fault to apply, if any.
func (p *Proxy) pick(r *http.Request, kind Kind) *Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts[kind]++
	var picked *Fault
	for _, rule := range p.rules {
		if !rule.matches(r, kind) {
			continue
		}
		n := rule.matched.Add(1)
		if picked == nil && n > int64(rule.Skip) && (rule.Times == 0 || n <= int64(rule.Skip+rule.Times)) {
			rule.fired.Add(1)
			picked = &rule.Fault
		}
	}
	return picked
}

// hopHeaders are the hop-by-hop headers a proxy does not forward (RFC 9110
// §7.6.1), and Expect, which the proxy's own server has dealt with.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Expect"}

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		panic(http.ErrAbortHandler)
	}
	p.handlers.Add(1)
	p.mu.Unlock()
	defer p.handlers.Done()
	// Stop with the proxy too: a stalled request must not keep Close waiting.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	r = r.WithContext(ctx)

	kind := KindOf(r)
	// The answer's earliest time, from the headers' arrival.
	var answerAt time.Time
	if d := p.latency.Load().draw(kind); d > 0 {
		answerAt = time.Now().Add(d)
	}
	fault := p.pick(r, kind)
	if fault != nil && fault.before != nil && fault.before(w, r) {
		return
	}
	// The path keeps its encoding (RawPath): SigV4 signed it as sent.
	u := *p.target
	u.Path, u.RawPath, u.RawQuery = r.URL.Path, r.URL.RawPath, r.URL.RawQuery
	out, err := http.NewRequestWithContext(ctx, r.Method, u.String(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	out.Host = r.Host // signed by SigV4
	out.ContentLength = r.ContentLength
	if r.ContentLength == 0 {
		out.Body = nil
	}
	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return
		}
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	if !answerAt.IsZero() {
		t := time.NewTimer(time.Until(answerAt))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			panic(http.ErrAbortHandler) // the client gave up: no answer at all
		}
	}
	if fault != nil && fault.after != nil {
		fault.after(w, r, resp)
		return
	}
	writeHeader(w, resp)
	_, _ = io.Copy(w, resp.Body)
}

func writeHeader(w http.ResponseWriter, resp *http.Response) {
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
	w.WriteHeader(resp.StatusCode)
}

// reset closes the client's connection with a TCP RST (SO_LINGER 0).
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // closes the connection the ordinary way
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}
