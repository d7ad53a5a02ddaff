package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// netHost is a host of the test's own for one sidecar: a network
// namespace (ip netns) joined to the rest of the test only through a veth
// pair, so that the test can cut the host off the network and heal it.
//
// Everything else of the test — the shared Kafka, the other sidecars,
// versitygw, the clients — listens on 127.0.0.1 of the test's namespace
// and names itself by that address (Kafka's advertised listeners, the
// sidecars' in the membership view). The host reaches those addresses
// unchanged: a forwarder of the test listens on the same address inside
// the host and carries each connection over the veth — to a second
// namespace of the test's own, the veth's far end, from which it is
// forwarded to the real address. The host's own sidecar listens on the
// host's veth address and is advertised as a port of 127.0.0.1 where a
// forwarder carries each connection over the veth the other way:
//
//	host ns: sidecar ─ 127.0.0.1:P ─▶ veth 10.213.0.2 ═══ 10.213.0.1:P (wire ns) ─▶ 127.0.0.1:P (test ns)
//	test ns: client ─ 127.0.0.1:Q ─▶ (wire ns) 10.213.0.1 ═══ 10.213.0.2:Q (host ns) ─▶ sidecar
//
// Cut sets the wire's end of the veth down: the host's packets are
// dropped (its connections hang, its new ones find no one), and
// connections from outside fail. Heal sets it up again. The addresses
// 10.213.0.1/30 and .2 exist only in the two namespaces; nothing else
// on the machine is reached. A reach made Direct bypasses the veth (the
// object store stays reachable through a cut).
//
// Creating namespaces needs root and ip(8) (iproute2); newNetHost skips
// otherwise (fails with SIDECAR_REQUIRE_INTEGRATION=1).
type netHost struct {
	t          *testing.T
	host, wire string   // the namespaces' names
	hostNS     *os.File // /run/netns/<host>
	wireNS     *os.File
	closed     atomic.Bool
	wg         sync.WaitGroup

	mu    sync.Mutex
	lns   []net.Listener
	conns map[net.Conn]struct{}
}

const (
	netHostAddr = "10.213.0.2" // the host's end of the veth
	netWireAddr = "10.213.0.1" // the far end, in the wire namespace
)

var netHosts atomic.Int32

// sweepNetHosts removes the namespaces of test processes that are gone
// (killed before their cleanups ran: a timeout's panic, SIGKILL), once
// per process.
var sweepNetHosts = sync.OnceFunc(func() {
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		var pid, n int
		var end string
		if _, err := fmt.Sscanf(e.Name(), "dse2e-%d-%d-%s", &pid, &n, &end); err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); errors.Is(err, os.ErrNotExist) {
			_ = exec.Command("ip", "netns", "del", e.Name()).Run()
		}
	}
})

// newNetHost creates the two namespaces and the veth between them,
// removed at the end of the test (after the processes started in the
// host, which are killed first: cleanups run last-in first-out).
func newNetHost(t *testing.T) *netHost {
	t.Helper()
	requireNetHost(t)
	sweepNetHosts()
	ip := "ip"
	n := netHosts.Add(1)
	h := &netHost{t: t, host: fmt.Sprintf("dse2e-%d-%d-h", os.Getpid(), n), wire: fmt.Sprintf("dse2e-%d-%d-w", os.Getpid(), n),
		conns: map[net.Conn]struct{}{}}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", h.host)
	t.Cleanup(func() { exec.Command(ip, "netns", "del", h.host).Run() })
	run("netns", "add", h.wire)
	t.Cleanup(func() { exec.Command(ip, "netns", "del", h.wire).Run() })
	run("-n", h.host, "link", "add", "vh", "type", "veth", "peer", "name", "vw", "netns", h.wire)
	run("-n", h.host, "addr", "add", netHostAddr+"/30", "dev", "vh")
	run("-n", h.wire, "addr", "add", netWireAddr+"/30", "dev", "vw")
	for _, ns := range []string{h.host, h.wire} {
		run("-n", ns, "link", "set", "lo", "up")
	}
	run("-n", h.host, "link", "set", "vh", "up")
	run("-n", h.wire, "link", "set", "vw", "up")
	var err error
	if h.hostNS, err = os.Open("/run/netns/" + h.host); err != nil {
		t.Fatal(err)
	}
	if h.wireNS, err = os.Open("/run/netns/" + h.wire); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.close)
	return h
}

// netHostOK reports whether netHosts can be made here: root, and ip(8).
func netHostOK() bool {
	_, err := exec.LookPath("ip")
	return err == nil && os.Geteuid() == 0
}

// requireNetHost skips t, or fails it with SIDECAR_REQUIRE_INTEGRATION=1,
// when netHosts cannot be made here.
func requireNetHost(t *testing.T) {
	t.Helper()
	requireTool(t, "ip")
	if os.Geteuid() != 0 {
		if os.Getenv("SIDECAR_REQUIRE_INTEGRATION") == "1" {
			t.Fatal("network namespaces need root (SIDECAR_REQUIRE_INTEGRATION=1)")
		}
		t.Skip("network namespaces need root")
	}
}

// Command returns the command that runs name with args inside the host.
func (h *netHost) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", h.host, name}, args...)...)
}

// Cut takes the host off the network: the veth's far end goes down.
func (h *netHost) Cut() { h.link("down") }

// Heal puts the host back on the network.
func (h *netHost) Heal() { h.link("up") }

func (h *netHost) link(state string) {
	h.t.Helper()
	if out, err := exec.Command("ip", "-n", h.wire, "link", "set", "vw", state).CombinedOutput(); err != nil {
		h.t.Fatalf("ip link set vw %s: %v\n%s", state, err, out)
	}
}

// Reach makes each address (127.0.0.1:port of the test's namespace)
// reachable at the same address inside the host, over the veth.
func (h *netHost) Reach(addrs ...string) {
	h.t.Helper()
	for _, a := range addrs {
		_, port, err := net.SplitHostPort(a)
		if err != nil {
			h.t.Fatal(err)
		}
		// host ns: a → the wire's end of the veth, same port.
		h.forward(h.hostNS, a, h.hostNS, net.JoinHostPort(netWireAddr, port))
		// wire ns: its end of the veth → a, in the test's namespace.
		h.forward(h.wireNS, net.JoinHostPort(netWireAddr, port), nil, a)
	}
}

// ReachDirect makes addr reachable at the same address inside the host
// without crossing the veth: a cut leaves it reachable.
func (h *netHost) ReachDirect(addr string) {
	h.t.Helper()
	h.forward(h.hostNS, addr, nil, addr)
}

// Expose returns an address of the test's namespace, 127.0.0.1 and a free
// port, that reaches port of the same number on the host's veth address,
// over the veth; the host's server is to listen on HostAddr(port).
func (h *netHost) Expose() (outside string, port string) {
	h.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.t.Fatal(err)
	}
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	h.serve(ln, h.wireNS, net.JoinHostPort(netHostAddr, port))
	return ln.Addr().String(), port
}

// HostAddr is the host's veth address with port.
func (h *netHost) HostAddr(port string) string { return net.JoinHostPort(netHostAddr, port) }

// forward listens on addr inside namespace lns and carries each
// connection to to, dialed inside namespace dns (nil: the test's).
func (h *netHost) forward(lns *os.File, addr string, dns *os.File, to string) {
	h.t.Helper()
	var ln net.Listener
	err := inNetNS(lns, func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		h.t.Fatalf("listen on %s in the host's namespaces: %v", addr, err)
	}
	h.serve(ln, dns, to)
}

// serve accepts on ln until the host is closed, carrying each connection
// to to, dialed inside namespace dns (nil: the test's).
func (h *netHost) serve(ln net.Listener, dns *os.File, to string) {
	h.mu.Lock()
	h.lns = append(h.lns, ln)
	h.mu.Unlock()
	h.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.wg.Go(func() { h.pipe(c, dns, to) })
		}
	})
}

// pipe connects c to to and copies both ways until either side ends.
func (h *netHost) pipe(c net.Conn, dns *os.File, to string) {
	var up net.Conn
	err := inNetNS(dns, func() (err error) {
		up, err = net.DialTimeout("tcp", to, 10*time.Second)
		return err
	})
	if err != nil || !h.track(c, up) {
		c.Close()
		if up != nil {
			up.Close()
		}
		return
	}
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(up, c)
	go cp(c, up)
	<-done
	c.Close()
	up.Close()
	<-done
	h.untrack(c, up)
}

func (h *netHost) track(cs ...net.Conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed.Load() {
		return false
	}
	for _, c := range cs {
		h.conns[c] = struct{}{}
	}
	return true
}

func (h *netHost) untrack(cs ...net.Conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range cs {
		delete(h.conns, c)
	}
}

// close stops every forwarder and waits for their goroutines.
func (h *netHost) close() {
	h.mu.Lock()
	h.closed.Store(true)
	for _, ln := range h.lns {
		ln.Close()
	}
	for c := range h.conns {
		c.Close()
	}
	h.mu.Unlock()
	h.wg.Wait()
	h.hostNS.Close()
	h.wireNS.Close()
}

// inNetNS runs fn on a thread of its own moved into network namespace ns
// (nil: fn runs where it is). A socket keeps the namespace it was created
// in, so a listener or a connection made by fn works from any goroutine
// afterwards. The thread returns to its namespace after fn, or, if it
// cannot, is never used again (it exits with its goroutine, still
// locked). Threads the runtime starts meanwhile come from its template
// thread, not this one.
func inNetNS(ns *os.File, fn func() error) error {
	if ns == nil {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer self.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns: %w", err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("setns back: %w", err))
			return // the thread stays locked and exits with this goroutine
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// ClientNet adds a network of clients to the host: a namespace of its own
// joined to the host by a veth of its own, subnet 10.214.<n>.0/24 (n in
// 1 … 250, one per network of a host), the clients at 10.214.<n>.2 and
// the host's end at .1, their default route. Unlike the forwarders, this
// is routed by the kernel: a client reaches the host's servers at the
// host's address (HostAddr) and they see its own address — a zone of
// clients by CIDR (diskless.client.zone.cidrs). It returns a dial
// function for clients of the network (kgo.Dialer) and their address;
// the namespace goes with the host.
func (h *netHost) ClientNet(n int) (dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string) {
	h.t.Helper()
	if n < 1 || n > 250 {
		h.t.Fatalf("ClientNet(%d): n must be in 1 … 250", n)
	}
	name := fmt.Sprintf("%s-c%d", h.host, n)
	run := func(args ...string) {
		h.t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			h.t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", name)
	h.t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	hostEnd, addr := fmt.Sprintf("10.214.%d.1", n), fmt.Sprintf("10.214.%d.2", n)
	dev := fmt.Sprintf("vc%d", n)
	run("-n", h.host, "link", "add", dev, "type", "veth", "peer", "name", "vc", "netns", name)
	run("-n", h.host, "addr", "add", hostEnd+"/24", "dev", dev)
	run("-n", name, "addr", "add", addr+"/24", "dev", "vc")
	run("-n", name, "link", "set", "lo", "up")
	run("-n", name, "link", "set", "vc", "up")
	run("-n", h.host, "link", "set", dev, "up")
	run("-n", name, "route", "add", "default", "via", hostEnd)
	ns, err := os.Open("/run/netns/" + name)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { ns.Close() })
	dial = func(ctx context.Context, network, to string) (c net.Conn, err error) {
		err = inNetNS(ns, func() (err error) {
			c, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, to)
			return err
		})
		return c, err
	}
	return dial, addr
}
