package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/build"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/diskless-sidecar/sidecar/internal/s3fault"
)

// The stores a started sidecar can run on (-stores).
const (
	storeLocal  = "local"   // the local-directory store (diskless.storage.backend=file)
	storeS3     = "s3"      // versitygw on this machine, through s3fault with no latency
	storeS3Like = "s3-like" // versitygw behind s3fault holding answers as S3 Standard would (-s3-latency)
)

var stores = []string{storeLocal, storeS3, storeS3Like}

// rigOptions say how to start a sidecar for a store (-sidecar-bin and the
// flags beside it).
type rigOptions struct {
	bin     string   // the sidecar binary
	sets    []string // extra key=value settings for every sidecar started
	latency string   // the s3-like store's latency model (s3fault.ParseLatency)
	seed    uint64   // the latency model's seed
	keep    bool     // keep the rig's directory (data.dir, logs, objects)
}

// The test credentials of the versitygw a rig starts, and its bucket.
const (
	rigAccessKey = "load-access-key"
	rigSecretKey = "load-secret-key"
	rigRegion    = "us-east-1"
	rigBucket    = "diskless"
)

// rigStartTimeout bounds a sidecar's (or versitygw's) start-up.
const rigStartTimeout = time.Minute

// rigStopTimeout bounds a sidecar's graceful stop before it is killed.
const rigStopTimeout = time.Minute

// A rig is a sidecar this tool started with a fresh data.dir for one
// store, and for the S3 stores the versitygw and s3fault proxy it uses.
// stop ends every process and goroutine it started.
type rig struct {
	store string
	dir   string // data.dir, the gateway's root, sidecar.log
	keep  bool

	sidecar *proc
	gw      *proc // nil for the local store
	proxy   *s3fault.Proxy
}

// proc is a started process and the goroutines that copy its output to a
// log file and wait for it.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	copied sync.WaitGroup // the output copier
	log    *os.File
}

func startProc(cmd *exec.Cmd, logPath string, lines func(line []byte)) (*proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, exited: make(chan struct{}), log: f}
	out, err := cmd.StderrPipe()
	if err != nil {
		f.Close()
		return nil, err
	}
	cmd.Stdout = f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	p.copied.Go(func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			_, _ = f.Write(append(line, '\n'))
			if lines != nil {
				lines(line)
			}
		}
		_, _ = io.Copy(f, out) // past an over-long line
	})
	go func() {
		p.copied.Wait() // Wait closes the pipe: read it to its end first
		_ = cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	return p, nil
}

// stop sends SIGTERM, waits up to timeout, then kills; it returns the
// exit error of a process that did not exit cleanly.
func (p *proc) stop(timeout time.Duration) error {
	select {
	case <-p.exited:
		return p.exitErr()
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.exitErr()
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("killed after %v without exiting on SIGTERM", timeout)
	}
}

func (p *proc) exitErr() error {
	if st := p.cmd.ProcessState; st != nil && !st.Success() {
		return fmt.Errorf("exited: %v", st)
	}
	return nil
}

// startRig starts a sidecar from o.bin on store (one of stores) in a fresh
// directory and returns it with the Target that drives it (its listener,
// metrics endpoint and process id). info receives a line saying what was
// started.
func startRig(ctx context.Context, o rigOptions, store string, info io.Writer) (*rig, Target, error) {
	if !slices.Contains(stores, store) {
		return nil, Target{}, fmt.Errorf("store %q: want one of %v", store, stores)
	}
	dir, err := os.MkdirTemp("", "load-"+store+"-")
	if err != nil {
		return nil, Target{}, err
	}
	r := &rig{store: store, dir: dir, keep: o.keep}
	t, err := r.start(ctx, o, info)
	if err != nil {
		r.stop()
		return nil, Target{}, fmt.Errorf("%s: %w (logs in %s)", store, err, dir)
	}
	return r, t, nil
}

func (r *rig) start(ctx context.Context, o rigOptions, info io.Writer) (Target, error) {
	dataDir := filepath.Join(r.dir, "data")
	args := []string{
		"--set", "data.dir=" + dataDir,
		"--set", "listeners=PLAINTEXT://127.0.0.1:0",
		"--set", "http.listener=127.0.0.1:0",
		"--set", "log.format=json",
	}
	env := os.Environ()
	what := "the local-directory store"
	if r.store != storeLocal {
		endpoint, desc, err := r.startS3(ctx, o)
		if err != nil {
			return Target{}, err
		}
		what = desc
		args = append(args,
			"--set", "diskless.storage.backend=s3",
			"--set", "diskless.storage.s3.bucket="+rigBucket,
			"--set", "diskless.storage.s3.endpoint="+endpoint,
			"--set", "diskless.storage.s3.path.style=true",
			"--set", "diskless.storage.s3.region="+rigRegion)
		env = append(env, "AWS_ACCESS_KEY_ID="+rigAccessKey, "AWS_SECRET_ACCESS_KEY="+rigSecretKey,
			"AWS_EC2_METADATA_DISABLED=true")
	}
	for _, s := range o.sets {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(o.bin, args...)
	cmd.Env = env
	addrs := make(chan [2]string, 1) // Kafka listener, HTTP endpoint
	var httpAddr string
	lines := func(line []byte) {
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(line, &rec) != nil {
			return
		}
		switch rec.Msg {
		case "http endpoint started": // logged before the Kafka listener
			httpAddr = rec.Addr
		case "kafka listener started":
			select {
			case addrs <- [2]string{rec.Addr, httpAddr}:
			default:
			}
		}
	}
	var err error
	if r.sidecar, err = startProc(cmd, filepath.Join(r.dir, "sidecar.log"), lines); err != nil {
		return Target{}, fmt.Errorf("start %s: %w", o.bin, err)
	}
	var a [2]string
	select {
	case a = <-addrs:
	case <-r.sidecar.exited:
		return Target{}, fmt.Errorf("the sidecar exited during start-up (%v)", r.sidecar.cmd.ProcessState)
	case <-time.After(rigStartTimeout):
		return Target{}, fmt.Errorf("the sidecar did not listen within %v", rigStartTimeout)
	case <-ctx.Done():
		return Target{}, ctx.Err()
	}
	pid := r.sidecar.cmd.Process.Pid
	fmt.Fprintf(info, "%s: started %s (pid %d) on %s, http %s, data.dir %s, on %s\n", r.store, o.bin, pid, a[0], a[1], dataDir, what)
	t := Target{Name: r.store, Brokers: []string{a[0]}, PIDs: []int{pid}}
	if a[1] != "" {
		t.MetricsURL = "http://" + a[1] + "/metrics"
	} else {
		t.NoMetrics = "the sidecar's http.listener is empty"
	}
	return t, nil
}

// startS3 starts versitygw with a bucket and the proxy in front of it,
// holding answers by o's latency model for the s3-like store; it returns
// the endpoint the sidecar uses and a description.
func (r *rig) startS3(ctx context.Context, o rigOptions) (endpoint, desc string, err error) {
	bin, err := versitygwBin()
	if err != nil {
		return "", "", err
	}
	root := filepath.Join(r.dir, "s3")
	// The posix backend's buckets are the root's directories.
	if err := os.MkdirAll(filepath.Join(root, rigBucket), 0o755); err != nil {
		return "", "", err
	}
	port, err := freePort()
	if err != nil {
		return "", "", err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command(bin, "--port", addr, "--region", rigRegion, "--keep-alive", "--quiet", "posix", root)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+rigAccessKey, "ROOT_SECRET_ACCESS_KEY="+rigSecretKey)
	if r.gw, err = startProc(cmd, filepath.Join(r.dir, "versitygw.log"), nil); err != nil {
		return "", "", fmt.Errorf("start versitygw: %w", err)
	}
	if err := waitHTTP(ctx, "http://"+addr+"/", r.gw.exited); err != nil {
		return "", "", fmt.Errorf("versitygw: %w", err)
	}
	if r.proxy, err = s3fault.New("http://" + addr); err != nil {
		return "", "", err
	}
	desc = "versitygw " + addr + " through s3fault " + r.proxy.URL + " (no latency added)"
	if r.store == storeS3Like {
		m, err := s3fault.ParseLatency(o.latency, o.seed)
		if err != nil {
			return "", "", err
		}
		r.proxy.SetLatency(m)
		desc = fmt.Sprintf("versitygw %s behind s3fault %s holding answers by the latency model %s (seed %d)", addr, r.proxy.URL, m, o.seed)
	}
	return r.proxy.URL, desc, nil
}

// waitHTTP returns once url answers HTTP at all (versitygw answers an
// anonymous request 403), or the process exits, or rigStartTimeout.
func waitHTTP(ctx context.Context, url string, exited <-chan struct{}) error {
	deadline := time.Now().Add(rigStartTimeout)
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer on %s within %v: %w", url, rigStartTimeout, err)
		}
		select {
		case <-exited:
			return errors.New("exited during start-up")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop stops the sidecar (SIGTERM: it finishes the files in flight), then
// the proxy and versitygw, and removes the directory unless kept. It
// returns what went wrong with the sidecar's stop, if anything.
func (r *rig) stop() error {
	var err error
	if r.sidecar != nil {
		if serr := r.sidecar.stop(rigStopTimeout); serr != nil {
			err = fmt.Errorf("%s: sidecar %w (logs in %s)", r.store, serr, r.dir)
		}
	}
	if r.proxy != nil {
		r.proxy.Close()
	}
	if r.gw != nil {
		_ = r.gw.stop(5 * time.Second)
	}
	if err == nil && !r.keep {
		_ = os.RemoveAll(r.dir)
	}
	return err
}

// versitygwBin finds the versitygw binary as internal/versitygw does
// (which this tool does not import: it links the AWS SDK): VERSITYGW_BIN,
// then PATH, then $GOPATH/bin.
func versitygwBin() (string, error) {
	if p := os.Getenv("VERSITYGW_BIN"); p != "" {
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

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// parseStores parses -stores: a comma-separated list of stores.
func parseStores(s string) ([]string, error) {
	var out []string
	for _, st := range strings.Split(s, ",") {
		st = strings.TrimSpace(st)
		if st == "" {
			continue
		}
		if !slices.Contains(stores, st) {
			return nil, fmt.Errorf("store %q: want one of %v", st, stores)
		}
		out = append(out, st)
	}
	if len(out) == 0 {
		return nil, errors.New("no store")
	}
	return out, nil
}
