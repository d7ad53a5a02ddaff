package e2e

import (
	"bufio"
	"bytes"
	"context"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// kcatMember is a `kcat -G` balanced consumer and the records it printed.
type kcatMember struct {
	cmd    *exec.Cmd
	done   chan struct{}
	stderr bytes.Buffer

	mu         sync.Mutex
	values     []string
	partitions map[int32]bool
}

func startKcatMember(t *testing.T, ctx context.Context, addr, group, topic string) *kcatMember {
	t.Helper()
	bin := requireTool(t, "kcat")
	k := &kcatMember{done: make(chan struct{}), partitions: map[int32]bool{}}
	k.cmd = exec.CommandContext(ctx, bin, "-b", addr, "-u",
		"-X", "auto.offset.reset=earliest", "-X", "auto.commit.interval.ms=200",
		"-f", "%p %o %s\n", "-G", group, topic)
	k.cmd.Stderr = &k.stderr
	out, err := k.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(k.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.SplitN(sc.Text(), " ", 3)
			if len(f) != 3 {
				continue
			}
			p, _ := strconv.Atoi(f[0])
			k.mu.Lock()
			k.values = append(k.values, f[2])
			k.partitions[int32(p)] = true
			k.mu.Unlock()
		}
		k.cmd.Wait()
	}()
	t.Cleanup(func() {
		k.cmd.Process.Kill()
		<-k.done
		if t.Failed() {
			t.Logf("kcat -G stderr:\n%s", k.stderr.String())
		}
	})
	return k
}

func (k *kcatMember) state() ([]string, map[int32]bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	ps := make(map[int32]bool, len(k.partitions))
	for p := range k.partitions {
		ps[p] = true
	}
	return append([]string(nil), k.values...), ps
}

// stop sends SIGTERM: kcat commits and leaves the group.
func (k *kcatMember) stop(t *testing.T) {
	t.Helper()
	k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.done:
	case <-time.After(30 * time.Second):
		t.Fatal("kcat -G did not exit within 30s of SIGTERM")
	}
}

// TestGroupsKcat: two `kcat -G` consumers of one group on an 8-partition
// topic split the partitions; one exits and the other takes them all;
// after the sidecar is SIGKILLed and restarted a new consumer of the group
// resumes from the last commit: every record is consumed exactly once.
func TestGroupsKcat(t *testing.T) {
	t.Parallel()
	requireTool(t, "kcat")
	const partitions = 8
	ctx := testCtx(t, 4*time.Minute)
	// The initial rebalance delay lets both consumers join the first
	// generation.
	sets := append(append([]string(nil), groupSidecarSets...), "group.initial.rebalance.delay.ms=3000")
	sc := StartSidecar(t, "", sets...)
	topic, group := "groups-kcat", "g-kcat"
	createTopic(t, ctx, sc, topic, partitions, nil)
	want := produceValues(t, ctx, sc, topic, partitions, 0, 800)

	a := startKcatMember(t, ctx, sc.Addr, group, topic)
	b := startKcatMember(t, ctx, sc.Addr, group, topic)
	consumed := func() int {
		va, _ := a.state()
		vb, _ := b.state()
		return len(va) + len(vb)
	}
	waitFor(t, 60*time.Second, "the pair consuming the first 800 records", func() bool { return consumed() >= len(want) })
	_, pa := a.state()
	_, pb := b.state()
	if len(pa) == 0 || len(pb) == 0 || len(pa)+len(pb) != partitions {
		t.Fatalf("the consumers did not split the partitions: a read %v, b read %v", pa, pb)
	}
	for p := range pa {
		if pb[p] {
			t.Fatalf("partition %d read by both consumers (a %v, b %v)", p, pa, pb)
		}
	}

	a.stop(t)
	want = append(want, produceValues(t, ctx, sc, topic, partitions, 800, 1600)...)
	waitFor(t, 60*time.Second, "the remaining consumer taking every partition", func() bool {
		vb, ps := b.state()
		va, _ := a.state()
		return len(ps) == partitions && len(va)+len(vb) >= len(want)
	})

	adm := kadm.NewClient(sc.Client())
	waitFor(t, 30*time.Second, "the commits reaching the end offsets", func() bool {
		ok, _ := committedAtEnd(ctx, adm, group, topic, partitions)
		return ok
	})
	// kcat gives up when every broker is down, so the consumer stops
	// before the sidecar is killed; a new one resumes after the restart.
	b.stop(t)
	sc.Kill()
	sc = StartSidecar(t, sc.DataDir, sets...)
	resumed := produceValues(t, ctx, sc, topic, partitions, 1600, 2400)
	want = append(want, resumed...)
	c := startKcatMember(t, ctx, sc.Addr, group, topic)
	waitFor(t, 90*time.Second, "a consumer resuming after the restart", func() bool {
		vc, _ := c.state()
		return len(vc) >= len(resumed)
	})
	time.Sleep(time.Second) // a record consumed twice would arrive now
	va, _ := a.state()
	vb, _ := b.state()
	vc, _ := c.state()
	all := append(append(va, vb...), vc...)
	count := map[string]int{}
	for _, v := range all {
		count[v]++
	}
	for _, v := range want {
		if count[v] != 1 {
			t.Fatalf("record %q consumed %d times (want exactly once); %d consumed in all, %d produced", v, count[v], len(all), len(want))
		}
	}
	if len(all) != len(want) || len(vc) != len(resumed) {
		t.Fatalf("%d records consumed (%d after the restart), %d produced (%d after the restart)", len(all), len(vc), len(want), len(resumed))
	}
}
