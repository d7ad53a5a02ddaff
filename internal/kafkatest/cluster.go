package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"
)

// ControllerIDBase is added to 1..Controllers to number separate
// controllers (3001, 3002, …), so that brokers keep ids 1..Brokers — the ids
// a sidecar next to each broker takes as its node.id.
const ControllerIDBase = 3000

// Options lays out a cluster; the zero value is one combined
// broker+controller node with the harness's test defaults.
type Options struct {
	// Brokers is the number of brokers, node ids 1..Brokers; default 1.
	Brokers int
	// SeparateControllers puts the KRaft quorum on controller-only nodes
	// (ids ControllerIDBase+1 …); without it every broker is a combined
	// broker+controller node and a voter of the quorum.
	SeparateControllers bool
	// Controllers is the number of controller-only nodes with
	// SeparateControllers; default 1 for one broker, else 3.
	Controllers int
	// BrokerConfig sets broker configs (server.properties keys) on every
	// broker, over the harness's defaults: offsets.topic.replication.factor,
	// transaction.state.log.replication.factor and
	// share.coordinator.state.topic.replication.factor = min(Brokers, 3);
	// transaction.state.log.min.isr and share.coordinator.state.topic.min.isr
	// = min(Brokers, 2); group.initial.rebalance.delay.ms = 0;
	// broker.heartbeat.interval.ms = 500 and broker.session.timeout.ms = 4000
	// (a killed broker is fenced, and its partitions get new leaders, within
	// about 4 s instead of Kafka's 9 s). The keys that lay the cluster out
	// (process.roles, node.id, listeners, advertised.listeners,
	// controller.*, log.dirs …) cannot be set: Start fails naming the key.
	BrokerConfig map[string]string
	// ControllerConfig sets configs on controller-only nodes, likewise
	// (defaults: the broker.* session settings above).
	ControllerConfig map[string]string
	// NodeConfig sets configs on one node, by node id, over BrokerConfig
	// and ControllerConfig: e.g. {2: {"broker.rack": "b"}}.
	NodeConfig map[int32]map[string]string
	// Host is the IP address every node listens on and advertises; default
	// 127.0.0.1. Another address of this machine (a veth's, for tests that
	// put clients in their own network namespace) makes the cluster
	// reachable from there.
	Host string
	// JVMOptions replace the brokers' JVM options (default -Xmx512m, the
	// serial collector; controller-only nodes get -Xmx256m): e.g. a larger
	// heap and G1 for a benchmark.
	JVMOptions []string
	// StartTimeout bounds Start and each Restart; default 2 minutes.
	StartTimeout time.Duration
	// SASLPlainUsers, when set, gives every broker a second client
	// listener, SASL_PLAINTEXT with the PLAIN mechanism and these users
	// (name → password), at SASLAddr; the PLAINTEXT listener stays, its
	// clients and the brokers' own requests being User:ANONYMOUS (make it a
	// super user when an authorizer is configured).
	SASLPlainUsers map[string]string
	// RequestLog logs every request a broker completes (Kafka's
	// kafka.request.logger at DEBUG: the API, the client, and the time the
	// request spent queued, being handled locally, waiting for replicas or
	// other brokers and being sent) into the node's kafka.log, for
	// profiling where a request's time goes. Costly: off by default.
	RequestLog bool
}

// reservedKeys are the configs the harness sets to lay the cluster out.
var reservedKeys = []string{
	"process.roles", "node.id", "broker.id", "listeners", "advertised.listeners",
	"listener.security.protocol.map", "controller.listener.names", "inter.broker.listener.name",
	"controller.quorum.voters", "controller.quorum.bootstrap.servers",
	"log.dir", "log.dirs", "metadata.log.dir",
}

var (
	brokerJVM     = []string{"-Xmx512m", "-XX:+UseSerialGC", "-XX:-UsePerfData", "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true"}
	controllerJVM = []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:-UsePerfData", "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true"}
)

// ProductionJVM returns the JVM options Kafka's own start scripts give a
// broker (kafka-server-start.sh's KAFKA_HEAP_OPTS with the heap asked,
// e.g. "1g", for both -Xms and -Xmx, and kafka-run-class.sh's
// KAFKA_JVM_PERFORMANCE_OPTS: G1 with 20 ms pause goals), for Options.JVMOptions
// in benchmarks that compare with Kafka as operators run it, rather than
// the small serial-collector heap tests use.
func ProductionJVM(heap string) []string {
	return []string{"-Xms" + heap, "-Xmx" + heap, "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
		"-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-XX:+ExitOnOutOfMemoryError",
		"-Djava.awt.headless=true"}
}

// Cluster is a running KRaft cluster. Its methods may be called from any
// goroutine.
type Cluster struct {
	// logf receives the harness's progress lines (the test's Logf, or
	// StartShared's log).
	logf      func(format string, args ...any)
	opts      Options
	dir       string
	clusterID string
	java, cp  string
	logCfg    string

	brokers, controllers []int32 // sorted node ids; equal when combined

	mu      sync.Mutex // guards nodes' procs and stopped
	nodes   map[int32]*node
	stopped bool
}

// node is one Kafka process's layout and, while it runs, its process.
type node struct {
	id                 int32
	host               string
	broker, controller bool
	dir, props, log    string
	port, ctrlPort     int // the PLAINTEXT and CONTROLLER listeners' ports, 0 if absent
	saslPort           int // the SASL_PLAINTEXT listener's port (Options.SASLPlainUsers), else 0
	proc               *proc
}

// proc is a started java process; exited is closed once Wait returned.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // Wait's error, valid once exited is closed
}

func (n *node) addr() string     { return net.JoinHostPort(n.host, strconv.Itoa(n.port)) }
func (n *node) ctrlAddr() string { return net.JoinHostPort(n.host, strconv.Itoa(n.ctrlPort)) }
func (n *node) saslAddr() string { return net.JoinHostPort(n.host, strconv.Itoa(n.saslPort)) }

// Start formats and starts a cluster laid out by opts and returns once every
// broker is listed in a Metadata answer (so the quorum has a leader and every
// broker is registered and unfenced). It skips or fails t as [Require] does,
// and fails t when the cluster does not start within opts.StartTimeout
// (printing the end of each node's log). The cluster is stopped in t's
// cleanup; see the package comment for what is kept when t failed.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	Require(t)
	c, err := start(opts, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.printLogs()
		}
		if err := c.Close(t.Failed()); err != nil {
			t.Error(err)
		}
	})
	return c
}

// StartShared starts a cluster as [Start] does, for a whole test binary
// rather than one test: e.g. from TestMain, or once from the first test
// that needs it, for every later test to share. log receives what Start
// logs to the test (nil: nothing). It does not skip: call [Require] in the
// tests first. The caller stops it with [Cluster.Close]; a node dies with
// the test binary anyway (PR_SET_PDEATHSIG).
func StartShared(opts Options, log func(format string, args ...any)) (*Cluster, error) {
	if _, err := tools(); err != nil {
		return nil, err
	}
	if _, err := classpath(); err != nil {
		return nil, fmt.Errorf("kafkatest: resolving Apache Kafka %s with Maven: %w", Version, err)
	}
	if log == nil {
		log = func(string, ...any) {}
	}
	return start(opts, log)
}

// start starts a cluster laid out by opts, after Require.
func start(opts Options, logf func(string, ...any)) (*Cluster, error) {
	if err := opts.normalise(); err != nil {
		return nil, err
	}
	p, _ := tools()
	cp, _ := classpath()
	logCfg, err := brokerLogConfig(opts.RequestLog)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kafkatest-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{logf: logf, opts: opts, dir: dir, java: p.java, cp: cp, logCfg: logCfg}
	// Ports are picked free and handed to Java, which leaves a window in
	// which another process may bind one: start over a few times then.
	for attempt := 1; ; attempt++ {
		err = c.start()
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, errPortTaken) || attempt == 3 {
			c.printLogs()
			c.Close(true)
			return nil, fmt.Errorf("kafkatest: starting Apache Kafka %s (%d brokers): %w", Version, opts.Brokers, err)
		}
		c.killAll()
		if err := os.RemoveAll(filepath.Join(dir, "cluster")); err != nil {
			return nil, err
		}
	}
}

func (o *Options) normalise() error {
	if o.Brokers == 0 {
		o.Brokers = 1
	}
	if o.Brokers < 0 {
		return fmt.Errorf("kafkatest: Brokers %d < 0", o.Brokers)
	}
	if !o.SeparateControllers {
		o.Controllers = 0
	} else if o.Controllers == 0 {
		o.Controllers = 3
		if o.Brokers == 1 {
			o.Controllers = 1
		}
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 2 * time.Minute
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if net.ParseIP(o.Host) == nil {
		return fmt.Errorf("kafkatest: Host %q is not an IP address", o.Host)
	}
	all := []map[string]string{o.BrokerConfig, o.ControllerConfig}
	for _, m := range o.NodeConfig {
		all = append(all, m)
	}
	for _, m := range all {
		for _, k := range reservedKeys {
			if _, ok := m[k]; ok {
				return fmt.Errorf("kafkatest: config %s is set by the harness", k)
			}
		}
	}
	return nil
}

// errPortTaken marks a start that failed because a port was taken.
var errPortTaken = errors.New("a listener's port was taken")

// start lays the nodes out under <dir>/cluster, formats them, starts them
// and waits until every broker serves.
func (c *Cluster) start() error {
	o := c.opts
	id, err := newClusterID()
	if err != nil {
		return err
	}
	c.clusterID = id
	var nodes []*node
	c.brokers, c.controllers = nil, nil
	for i := 1; i <= o.Brokers; i++ {
		n := &node{id: int32(i), host: o.Host, broker: true, controller: !o.SeparateControllers}
		nodes = append(nodes, n)
		c.brokers = append(c.brokers, n.id)
		if n.controller {
			c.controllers = append(c.controllers, n.id)
		}
	}
	for i := 1; i <= o.Controllers; i++ {
		n := &node{id: int32(ControllerIDBase + i), host: o.Host, controller: true}
		nodes = append(nodes, n)
		c.controllers = append(c.controllers, n.id)
	}
	var need int
	for _, n := range nodes {
		if n.broker {
			need++
			if len(o.SASLPlainUsers) > 0 {
				need++
			}
		}
		if n.controller {
			need++
		}
	}
	ports, err := freePorts(o.Host, need)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if n.broker {
			n.port, ports = ports[0], ports[1:]
			if len(o.SASLPlainUsers) > 0 {
				n.saslPort, ports = ports[0], ports[1:]
			}
		}
		if n.controller {
			n.ctrlPort, ports = ports[0], ports[1:]
		}
	}
	var voters []string
	for _, n := range nodes {
		if n.controller {
			voters = append(voters, fmt.Sprintf("%d@%s", n.id, n.ctrlAddr()))
		}
	}
	for _, n := range nodes {
		n.dir = filepath.Join(c.dir, "cluster", fmt.Sprintf("node-%d", n.id))
		n.props = filepath.Join(n.dir, "server.properties")
		n.log = filepath.Join(n.dir, "kafka.log")
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(n.props, []byte(c.properties(n, strings.Join(voters, ","))), 0o644); err != nil {
			return err
		}
	}
	c.mu.Lock()
	c.nodes = map[int32]*node{}
	for _, n := range nodes {
		c.nodes[n.id] = n
	}
	c.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), o.StartTimeout)
	defer cancel()
	began := time.Now()
	var g errgroup.Group
	for _, n := range nodes {
		g.Go(func() error { return c.format(ctx, n) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	formatted := time.Now()
	for _, n := range nodes {
		if err := c.startNode(n); err != nil {
			return err
		}
	}
	for _, n := range nodes {
		if !n.broker {
			if err := c.waitController(ctx, n); err != nil {
				return err
			}
		}
	}
	if err := c.waitBrokers(ctx, c.brokers...); err != nil {
		return err
	}
	c.logf("kafkatest: Apache Kafka %s, %d nodes in %s: formatted in %v, serving %v later",
		Version, len(nodes), c.Dir(), formatted.Sub(began).Round(time.Millisecond), time.Since(formatted).Round(time.Millisecond))
	return nil
}

// properties is node n's server.properties.
func (c *Cluster) properties(n *node, voters string) string {
	brokers := c.opts.Brokers
	cfg := map[string]string{
		"broker.heartbeat.interval.ms": "500",
		"broker.session.timeout.ms":    "4000",
	}
	var roles, listeners []string
	if n.broker {
		roles = append(roles, "broker")
		listeners = append(listeners, "PLAINTEXT://"+n.addr())
		maps.Copy(cfg, map[string]string{
			"advertised.listeners":                             "PLAINTEXT://" + n.addr(),
			"inter.broker.listener.name":                       "PLAINTEXT",
			"offsets.topic.replication.factor":                 strconv.Itoa(min(brokers, 3)),
			"transaction.state.log.replication.factor":         strconv.Itoa(min(brokers, 3)),
			"transaction.state.log.min.isr":                    strconv.Itoa(min(brokers, 2)),
			"share.coordinator.state.topic.replication.factor": strconv.Itoa(min(brokers, 3)),
			"share.coordinator.state.topic.min.isr":            strconv.Itoa(min(brokers, 2)),
			"group.initial.rebalance.delay.ms":                 "0",
		})
		maps.Copy(cfg, c.opts.BrokerConfig)
	}
	if n.controller {
		roles = append(roles, "controller")
		listeners = append(listeners, "CONTROLLER://"+n.ctrlAddr())
		if !n.broker {
			maps.Copy(cfg, c.opts.ControllerConfig)
		}
	}
	protocols := "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
	if n.broker && n.saslPort != 0 {
		sasl := "SASL_PLAINTEXT://" + n.saslAddr()
		listeners = append(listeners, sasl)
		cfg["advertised.listeners"] += "," + sasl
		protocols += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
		cfg["sasl.enabled.mechanisms"] = "PLAIN"
		var jaas strings.Builder
		jaas.WriteString("org.apache.kafka.common.security.plain.PlainLoginModule required")
		for _, u := range slices.Sorted(maps.Keys(c.opts.SASLPlainUsers)) {
			fmt.Fprintf(&jaas, " user_%s=%q", u, c.opts.SASLPlainUsers[u])
		}
		jaas.WriteString(";")
		cfg["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = jaas.String()
	}
	maps.Copy(cfg, c.opts.NodeConfig[n.id])
	maps.Copy(cfg, map[string]string{
		"process.roles":                  strings.Join(roles, ","),
		"node.id":                        strconv.Itoa(int(n.id)),
		"listeners":                      strings.Join(listeners, ","),
		"listener.security.protocol.map": protocols,
		"controller.listener.names":      "CONTROLLER",
		"controller.quorum.voters":       voters,
		"log.dirs":                       filepath.Join(n.dir, "data"),
	})
	var b strings.Builder
	fmt.Fprintf(&b, "# written by kafkatest (Apache Kafka %s): node %d\n", Version, n.id)
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		fmt.Fprintf(&b, "%s=%s\n", k, cfg[k])
	}
	return b.String()
}

// format runs `kafka-storage format` for node n.
func (c *Cluster) format(ctx context.Context, n *node) error {
	cmd, err := ToolCommand(ctx, "kafka-storage", "format", "--cluster-id", c.clusterID, "--config", n.props)
	if err != nil {
		return err
	}
	// run's error carries the end of stderr; the tool says why on stdout.
	if out, _, err := run(cmd, fmt.Sprintf("kafka-storage format (node %d)", n.id)); err != nil {
		return fmt.Errorf("%w\n%s", err, tail(out, 20))
	}
	return nil
}

// startNode starts node n's process, its output appended to its kafka.log.
func (c *Cluster) startNode(n *node) error {
	lf, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer lf.Close() // the child has its own copy
	fmt.Fprintf(lf, "=== kafkatest: starting node %d at %s\n", n.id, time.Now().Format(time.RFC3339Nano))
	jvm := controllerJVM
	if n.broker {
		jvm = brokerJVM
		if c.opts.JVMOptions != nil {
			jvm = c.opts.JVMOptions
		}
	}
	args := append(append([]string{}, jvm...), "-cp", c.cp, "-Dlog4j2.configurationFile="+c.logCfg, "kafka.Kafka", n.props)
	cmd := exec.Command(c.java, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	// If the test binary dies without its cleanups (a timeout panic, a
	// SIGKILL), the kernel kills the node too instead of leaving it running
	// (Linux; elsewhere the cleanups alone stop it).
	killWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting node %d: %w", n.id, err)
	}
	p := &proc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	c.mu.Lock()
	n.proc = p
	c.mu.Unlock()
	return nil
}

// exitedErr returns an error if node n's process has exited, carrying the
// end of its log (errPortTaken when a port was taken).
func (c *Cluster) exitedErr(n *node) error {
	c.mu.Lock()
	p := n.proc
	c.mu.Unlock()
	if p == nil {
		return fmt.Errorf("node %d is not running", n.id)
	}
	select {
	case <-p.exited:
	default:
		return nil
	}
	log := c.logTail(n, 60)
	err := fmt.Errorf("node %d exited during start-up (%v); end of %s:\n%s", n.id, p.err, n.log, log)
	if strings.Contains(log, "Address already in use") {
		err = fmt.Errorf("%w: %w", errPortTaken, err)
	}
	return err
}

// waitBrokers waits until a Metadata answer of one of ids lists every
// broker in ids (and a controller), failing early when one of their
// processes exits. Asking the nodes being waited for shows that they serve
// clients themselves, not only that the others know of them.
func (c *Cluster) waitBrokers(ctx context.Context, ids ...int32) error {
	var last error
	for {
		for _, id := range ids {
			n := c.node(id)
			if err := c.exitedErr(n); err != nil {
				return err
			}
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			m, err := brokerMetadata(rctx, n.addr())
			cancel()
			if err != nil {
				last = err
				continue
			}
			var listed []int32
			for _, b := range m.Brokers {
				listed = append(listed, b.NodeID)
			}
			missing := slices.DeleteFunc(slices.Clone(ids), func(id int32) bool { return slices.Contains(listed, id) })
			if len(missing) == 0 && m.ControllerID >= 0 {
				return nil
			}
			last = fmt.Errorf("node %d's metadata lists brokers %v, controller %d", id, listed, m.ControllerID)
		}
		select {
		case <-ctx.Done():
			var logs strings.Builder
			for _, id := range ids {
				fmt.Fprintf(&logs, "--- end of node %d's log:\n%s\n", id, c.logTail(c.node(id), 30))
			}
			return fmt.Errorf("brokers %v not serving after %v (%v)\n%s", ids, c.opts.StartTimeout, last, logs.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitController waits until controller-only node n answers ApiVersions on
// its CONTROLLER listener.
func (c *Cluster) waitController(ctx context.Context, n *node) error {
	for {
		if err := c.exitedErr(n); err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := apiVersions(rctx, n.ctrlAddr())
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("controller %d not answering on %s after %v (%v); end of its log:\n%s",
				n.id, n.ctrlAddr(), c.opts.StartTimeout, err, c.logTail(n, 30))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) node(id int32) *node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[id]
}

func (c *Cluster) brokerAddrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var addrs []string
	for _, id := range c.brokers {
		addrs = append(addrs, c.nodes[id].addr())
	}
	return addrs
}

// BootstrapServers returns every broker's address, host:port joined with
// commas (a client's bootstrap.servers), whether or not it runs now.
func (c *Cluster) BootstrapServers() string { return strings.Join(c.brokerAddrs(), ",") }

// Brokers returns the brokers' node ids, ascending (1..Options.Brokers).
func (c *Cluster) Brokers() []int32 { return slices.Clone(c.brokers) }

// Controllers returns the node ids of the quorum's voters, ascending: the
// brokers' when combined, else ControllerIDBase+1 ….
func (c *Cluster) Controllers() []int32 { return slices.Clone(c.controllers) }

// Addr returns broker id's PLAINTEXT listener, host:port (Options.Host), or
// "" when id is not a broker.
func (c *Cluster) Addr(id int32) string {
	n := c.node(id)
	if n == nil || !n.broker {
		return ""
	}
	return n.addr()
}

// SASLAddr returns broker id's SASL_PLAINTEXT listener (PLAIN, the users
// of Options.SASLPlainUsers), host:port, or "" when id is not a broker or
// there is none.
func (c *Cluster) SASLAddr(id int32) string {
	n := c.node(id)
	if n == nil || !n.broker || n.saslPort == 0 {
		return ""
	}
	return n.saslAddr()
}

// ControllerAddr returns voter id's CONTROLLER listener, or "" when id is
// not a voter.
func (c *Cluster) ControllerAddr(id int32) string {
	n := c.node(id)
	if n == nil || !n.controller {
		return ""
	}
	return n.ctrlAddr()
}

// ClusterID returns the cluster id the nodes were formatted with (a Kafka
// Uuid in URL-safe base64, 22 characters).
func (c *Cluster) ClusterID() string { return c.clusterID }

// Dir returns the cluster's directory: node-<id>/ per node, each holding
// server.properties, kafka.log and data/.
func (c *Cluster) Dir() string { return filepath.Join(c.dir, "cluster") }

// LogFile returns the path of node id's log (its stdout and stderr).
func (c *Cluster) LogFile(id int32) string {
	if n := c.node(id); n != nil {
		return n.log
	}
	return ""
}

// Running reports whether node id's process is running.
func (c *Cluster) Running(id int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[id]
	if n == nil || n.proc == nil {
		return false
	}
	select {
	case <-n.proc.exited:
		return false
	default:
		return true
	}
}

// running returns node id's process, or an error when it is not running.
func (c *Cluster) running(id int32) (*node, *proc, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[id]
	switch {
	case c.stopped:
		return n, nil, errStopped
	case n == nil:
		return nil, nil, fmt.Errorf("kafkatest: no node %d", id)
	case n.proc == nil:
		return n, nil, fmt.Errorf("kafkatest: node %d is not running", id)
	}
	select {
	case <-n.proc.exited:
		return n, nil, fmt.Errorf("kafkatest: node %d is not running", id)
	default:
		return n, n.proc, nil
	}
}

// PID returns node id's process id while it runs (e.g. to measure its
// CPU time), or 0.
func (c *Cluster) PID(id int32) int {
	_, p, err := c.running(id)
	if err != nil || p == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Kill sends SIGKILL to node id and waits until the process is gone. It
// fails when the node is not running.
func (c *Cluster) Kill(id int32) error {
	_, p, err := c.running(id)
	if err != nil {
		return err
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	return nil
}

// StopNode stops node id gracefully (SIGTERM: a broker's controlled
// shutdown moves its leaderships first) and waits until it exited; after
// timeout it sends SIGKILL and returns an error.
func (c *Cluster) StopNode(id int32, timeout time.Duration) error {
	_, p, err := c.running(id)
	if err != nil {
		return err
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(timeout):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
		return fmt.Errorf("kafkatest: node %d did not stop within %v of SIGTERM; killed", id, timeout)
	}
}

// Restart starts node id again (after Kill or StopNode; a running node is
// first stopped gracefully) on the same ports and data, and waits until it
// serves: a broker until a Metadata answer lists it again (it has caught up
// with the metadata log and is unfenced; its partitions may still be
// catching up to rejoin their ISRs), a controller until it answers
// ApiVersions. It fails after Options.StartTimeout.
func (c *Cluster) Restart(id int32) error {
	n, _, err := c.running(id)
	if n == nil || errors.Is(err, errStopped) {
		return err
	}
	if err == nil {
		if err := c.StopNode(id, 60*time.Second); err != nil {
			return err
		}
	}
	if err := c.startNode(n); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.StartTimeout)
	defer cancel()
	if n.broker {
		err = c.waitBrokers(ctx, n.id)
	} else {
		err = c.waitController(ctx, n)
	}
	if err != nil {
		return fmt.Errorf("kafkatest: restarting node %d: %w", id, err)
	}
	return nil
}

var errStopped = errors.New("kafkatest: the cluster was stopped")

// Stop kills every node (SIGKILL: the cluster's data is thrown away, so
// there is nothing to shut down gracefully) and waits until they are gone.
// It is idempotent; t's cleanup calls it.
func (c *Cluster) Stop() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.killAll()
}

func (c *Cluster) killAll() {
	c.mu.Lock()
	var procs []*proc
	for _, n := range c.nodes {
		if n.proc != nil {
			procs = append(procs, n.proc)
		}
	}
	c.mu.Unlock()
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	for _, p := range procs {
		<-p.exited
	}
}

// Close stops the cluster and removes its directory, or keeps it (keep:
// e.g. a test failed), naming it. Close again does nothing more.
func (c *Cluster) Close(keep bool) error {
	c.Stop()
	if keep {
		c.logf("kafkatest: the cluster's directory is kept: %s", c.dir)
		return nil
	}
	if err := os.RemoveAll(c.dir); err != nil {
		return fmt.Errorf("kafkatest: removing %s: %w", c.dir, err)
	}
	return nil
}

// printLogs logs the end of every node's log.
func (c *Cluster) printLogs() {
	c.mu.Lock()
	ids := slices.Sorted(maps.Keys(c.nodes))
	c.mu.Unlock()
	for _, id := range ids {
		n := c.node(id)
		if n == nil {
			continue
		}
		if _, err := os.Stat(n.log); err != nil {
			continue // never started
		}
		c.logf("kafkatest: end of node %d's log (%s):\n%s", id, n.log, c.logTail(n, 80))
	}
}

// logTail returns the last n lines of node's log.
func (c *Cluster) logTail(nd *node, n int) string {
	b, err := os.ReadFile(nd.log)
	if err != nil {
		return err.Error()
	}
	return tail(string(b), n)
}

// Client returns a kgo client seeded with every broker, with opts added;
// it is closed when t ends.
func (c *Cluster) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.brokerAddrs()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin returns a kadm client over [Cluster.Client].
func (c *Cluster) Admin(t testing.TB) *kadm.Client {
	t.Helper()
	return kadm.NewClient(c.Client(t))
}

// newClusterID returns a random Kafka Uuid as `kafka-storage random-uuid`
// prints it: 16 random bytes in URL-safe base64 without padding, never
// starting with '-' (Kafka avoids those so that an id is never taken for a
// command-line flag).
func newClusterID() (string, error) {
	for {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		s := base64.RawURLEncoding.EncodeToString(b[:])
		if s[0] != '-' {
			return s, nil
		}
	}
}

// freePorts returns n distinct free ports of host (all held open until
// all are picked, then released).
func freePorts(host string, n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
