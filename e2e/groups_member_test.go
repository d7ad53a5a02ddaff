package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// memberEnv, when set, makes the test binary a consumer-group member
// (runMember) instead of running tests: a group member the test can
// SIGKILL, as a crashed consumer is, without leaving the group.
const memberEnv = "SIDECAR_E2E_GROUP_MEMBER"

// memberConfig is what a member subprocess is told, as JSON-free
// key=value pairs in memberEnv.
type memberConfig struct {
	brokers, group, topic, balancer, instance string
	session                                   time.Duration
}

func (c memberConfig) env() string {
	return strings.Join([]string{"brokers=" + c.brokers, "group=" + c.group, "topic=" + c.topic,
		"balancer=" + c.balancer, "instance=" + c.instance, "session=" + strconv.FormatInt(c.session.Milliseconds(), 10)}, ";")
}

func parseMemberConfig(s string) memberConfig {
	var c memberConfig
	for _, kv := range strings.Split(s, ";") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "brokers":
			c.brokers = v
		case "group":
			c.group = v
		case "topic":
			c.topic = v
		case "balancer":
			c.balancer = v
		case "instance":
			c.instance = v
		case "session":
			n, _ := strconv.Atoi(v)
			c.session = time.Duration(n) * time.Millisecond
		}
	}
	return c
}

// runMember consumes the group's topic and prints, one line each:
// "R <partition> <offset> <value>" per record, "A <n>" when n partitions
// were assigned (followed by "M <member id>"), "V <n>" when n were
// revoked or lost. Offsets are
// autocommitted every 200 ms and on revocation; SIGTERM closes the client
// (leaving the group, committing).
func runMember() int {
	c := parseMemberConfig(os.Getenv(memberEnv))
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	emit := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
		mu.Unlock()
	}
	count := func(m map[string][]int32) int {
		n := 0
		for _, ps := range m {
			n += len(ps)
		}
		return n
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.brokers),
		kgo.ConsumerGroup(c.group),
		kgo.ConsumeTopics(c.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitInterval(200 * time.Millisecond),
		kgo.SessionTimeout(c.session),
		kgo.HeartbeatInterval(c.session / 6),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, m map[string][]int32) {
			emit("A %d", count(m))
			id, _ := cl.GroupMetadata()
			emit("M %s", id)
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
			if err := cl.CommitMarkedOffsets(ctx); err != nil {
				emit("E commit on revoke: %v", err)
			}
			emit("V %d", count(m))
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { emit("V %d", count(m)) }),
	}
	switch c.balancer {
	case "range":
		opts = append(opts, kgo.Balancers(kgo.RangeBalancer()))
	case "cooperative-sticky":
		opts = append(opts, kgo.Balancers(kgo.CooperativeStickyBalancer()))
	case "consumer":
		opts = append(opts, kgo.Balancers(kgo.RangeBalancer()), kgo.ServerSideBalancer())
	}
	if c.instance != "" {
		opts = append(opts, kgo.InstanceID(c.instance))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(t string, p int32, err error) {
			if ctx.Err() == nil {
				emit("E %s/%d: %v", t, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { emit("R %d %d %s", r.Partition, r.Offset, r.Value) })
	}
	cl.Close() // commits what was polled and leaves the group (not a static member)
	emit("X")
	return 0
}

// member is a running member subprocess and what it printed.
type member struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	done chan struct{}

	mu          sync.Mutex
	values      []string // record values, in the order consumed
	owned       int      // partitions owned now
	assignments int      // assignment callbacks
	revocations int      // revocation (or loss) callbacks
	memberID    string   // the member id at the last assignment
	errors      []string
}

// startMember starts a member subprocess.
func startMember(t *testing.T, name string, c memberConfig) *member {
	t.Helper()
	m := &member{t: t, name: name, done: make(chan struct{})}
	m.cmd = exec.Command(os.Args[0], "-test.run=^$")
	m.cmd.Env = append(os.Environ(), memberEnv+"="+c.env())
	m.cmd.Stderr = os.Stderr
	stdout, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(m.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			m.mu.Lock()
			switch kind, rest, _ := strings.Cut(line, " "); kind {
			case "R":
				f := strings.SplitN(rest, " ", 3)
				if len(f) == 3 {
					m.values = append(m.values, f[2])
				}
			case "A":
				n, _ := strconv.Atoi(rest)
				m.owned += n
				m.assignments++
			case "V":
				n, _ := strconv.Atoi(rest)
				m.owned -= n
				m.revocations++
			case "M":
				m.memberID = rest
			case "E":
				m.errors = append(m.errors, rest)
			}
			m.mu.Unlock()
		}
		m.cmd.Wait()
	}()
	t.Cleanup(func() { m.kill() })
	return m
}

// kill SIGKILLs the member (a crash: no LeaveGroup, no last commit).
func (m *member) kill() {
	if m.cmd.Process != nil {
		m.cmd.Process.Kill()
	}
	<-m.done
}

// stop SIGTERMs the member and waits for it to leave the group.
func (m *member) stop() {
	m.t.Helper()
	m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		m.t.Fatalf("member %s did not exit within 30s of SIGTERM", m.name)
	}
}

// state returns the values consumed, the partitions owned, and the
// assignment and revocation callbacks seen.
func (m *member) state() (values []string, owned, assignments, revocations int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.values...), m.owned, m.assignments, m.revocations
}
