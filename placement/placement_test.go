package placement

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/membership"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func sc(id int32) diskless.Sidecar { return diskless.Sidecar{NodeID: id, Host: "h", Port: 9000 + id} }

// view is a confirmed view of generation 1 of the sidecars ids, this one
// in it or not.
func view(member bool, ids ...int32) membership.View {
	v := membership.View{Generation: 1, Member: member, Current: true}
	for _, id := range ids {
		v.Sidecars = append(v.Sidecars, sc(id))
	}
	return v
}

func nodes(owners []diskless.Sidecar) []int32 {
	out := make([]int32, len(owners))
	for i, o := range owners {
		out[i] = o.NodeID
	}
	return out
}

// TestAssign: a shard goes to the sidecar of its partition's leader; a
// leader without a live sidecar (or none) falls back to the rendezvous
// hash over the live ones, so a sidecar leaving moves only its own
// shards; an empty view names nobody; a view this sidecar is not in (a
// later process of its node id is preferred) names the others.
func TestAssign(t *testing.T) {
	leaders := map[int32]int32{0: 1, 1: 2, 2: 3, 3: 9, 4: -1}
	got := nodes(Assign(6, view(true, 1, 2, 3), leaders))
	if got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Fatalf("owners %v: shards 0–2 must follow their leaders", got)
	}
	for _, i := range []int{3, 4, 5} {
		if !slices.Contains([]int32{1, 2, 3}, got[i]) {
			t.Fatalf("shard %d to %d, not a live sidecar", i, got[i])
		}
	}
	if again := nodes(Assign(6, view(true, 1, 2, 3), leaders)); !slices.Equal(again, got) {
		t.Fatalf("not deterministic: %v then %v", got, again)
	}

	// 64 shards without leaders over 4 sidecars: spread, and removing one
	// moves only its shards.
	many := nodes(Assign(64, view(true, 1, 2, 3, 4), nil))
	count := map[int32]int{}
	for _, n := range many {
		count[n]++
	}
	for _, id := range []int32{1, 2, 3, 4} {
		if count[id] < 6 {
			t.Fatalf("node %d got %d of 64 shards: %v", id, count[id], count)
		}
	}
	fewer := nodes(Assign(64, view(true, 1, 2, 4), nil))
	for i := range many {
		if many[i] != 3 && fewer[i] != many[i] {
			t.Fatalf("shard %d moved from %d to %d though node 3 left", i, many[i], fewer[i])
		}
	}

	for _, o := range Assign(3, view(true), leaders) {
		if o.NodeID != -1 {
			t.Fatalf("an empty view: owner %d, want none", o.NodeID)
		}
	}
	if got := nodes(Assign(3, view(false, 2, 3), leaders)); !slices.Equal(got[1:], []int32{2, 3}) || !slices.Contains([]int32{2, 3}, got[0]) {
		t.Fatalf("a view without this sidecar (1): owners %v, want the others", got)
	}
}

// fakes of the loop's dependencies.
type fakeMembership struct {
	mu      sync.Mutex
	v       membership.View
	changed chan struct{}
}

func newFakeMembership(v membership.View) *fakeMembership {
	return &fakeMembership{v: v, changed: make(chan struct{})}
}

func (f *fakeMembership) View() membership.View {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.v
}

func (f *fakeMembership) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

func (f *fakeMembership) set(v membership.View) {
	f.mu.Lock()
	f.v = v
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

type fakeLeaders struct {
	mu    sync.Mutex
	m     map[int32]int32
	calls int // how many times the loop read them
}

func (f *fakeLeaders) Leaders(context.Context) (map[int32]int32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.m, nil
}

func (f *fakeLeaders) set(m map[int32]int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m = m
}

// waitRounds waits until the loop has read the leaders n more times: it
// has acted on what it was given n times since.
func (f *fakeLeaders) waitRounds(t *testing.T, n int) {
	t.Helper()
	f.mu.Lock()
	want := f.calls + n
	f.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		c := f.calls
		f.mu.Unlock()
		if c >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the loop read the leaders %d times, want %d", c, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type fakeHoster struct {
	mu     sync.Mutex
	hosted map[int32]bool
	fenced map[int32]bool
	log    []string
}

func (f *fakeHoster) Host(_ context.Context, s int32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hosted[s] = true
	f.fenced[s] = false
	f.log = append(f.log, fmt.Sprintf("host %d", s))
	return nil
}

func (f *fakeHoster) Release(s int32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hosted[s] = false
	f.log = append(f.log, fmt.Sprintf("release %d", s))
	return nil
}

func (f *fakeHoster) Hosted(s int32) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hosted[s]
}

func (f *fakeHoster) Serving(s int32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fenced[s] {
		return diskless.ErrShardFenced
	}
	return nil
}

func (f *fakeHoster) hostedSet() []int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []int32
	for s, h := range f.hosted {
		if h {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// waitHosted waits (on the placement's changes and the hoster's state)
// until h hosts exactly want.
func waitHosted(t *testing.T, p *Placement, h *fakeHoster, want ...int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Equal(h.hostedSet(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("hosted %v, want %v (calls %v)", h.hostedSet(), want, h.log)
		}
		select {
		case <-p.Changed():
		case <-time.After(20 * time.Millisecond): // the hoster's calls follow the publication
		}
	}
}

// startLoop starts the placement loop of sidecar 1 over 4 shards with a
// fake hoster hosting nothing yet; it is closed when t ends.
func startLoop(t *testing.T, fm *fakeMembership, fl *fakeLeaders) (*Placement, *fakeHoster) {
	t.Helper()
	fh := &fakeHoster{hosted: map[int32]bool{}, fenced: map[int32]bool{}}
	p, err := Start(Config{Self: 1, NumShards: 4, Membership: fm, Leaders: fl, Hoster: fh, Refresh: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, fh
}

// TestPlacementLoop: the loop hosts the shards that fall to this sidecar
// and releases the others as the view and the leaders change; a fenced
// shard it should host is released and hosted again; left out of a
// confirmed view (another process of its node id preferred) it hosts
// nothing and names no broker.
func TestPlacementLoop(t *testing.T) {
	fm := newFakeMembership(view(true, 1, 2))
	fl := &fakeLeaders{m: map[int32]int32{0: 1, 1: 2, 2: 1, 3: 2}}
	p, fh := startLoop(t, fm, fl)
	waitHosted(t, p, fh, 0, 2)
	if o, ok := p.Owner(1); !ok || o.NodeID != 2 {
		t.Fatalf("Owner(1) = %+v %v", o, ok)
	}
	if got := p.Sidecars(); len(got) != 2 {
		t.Fatalf("Sidecars %v", got)
	}

	// The leader of partition 3 moves to broker 1.
	fl.set(map[int32]int32{0: 1, 1: 2, 2: 1, 3: 1})
	waitHosted(t, p, fh, 0, 2, 3)

	// Node 2 dies: its shard falls to the fallback, this sidecar (alone).
	fm.set(view(true, 1))
	waitHosted(t, p, fh, 0, 1, 2, 3)

	// Another sidecar took shard 2 over (fenced here): taken back.
	fh.mu.Lock()
	fh.fenced[2] = true
	n := len(fh.log)
	fh.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		fh.mu.Lock()
		calls := slices.Clone(fh.log[n:])
		fh.mu.Unlock()
		if slices.Equal(calls, []string{"release 2", "host 2"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a fenced shard: calls %v, want release and host", calls)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// Left out of a confirmed view: nothing hosted, no broker named.
	fm.set(view(false, 2))
	waitHosted(t, p, fh)
	if got := p.Sidecars(); got != nil {
		t.Fatalf("Sidecars out of the view: %v", got)
	}
	if o, ok := p.Owner(0); !ok || o.NodeID != 2 {
		t.Fatalf("Owner(0) = %+v %v out of the view, want sidecar 2", o, ok)
	}
}

// TestPlacementUnconfirmed: while the view is unconfirmed — a rebalance,
// the group's coordinator failing over, a network cut
// — the placement stays: the hosted shards are
// kept and named as before whatever the leaders do, none is taken, and
// only a fenced one is released (and not taken back); removed by Kafka,
// it lets every shard go; confirmed again, the placement follows the view
// and the leaders.
func TestPlacementUnconfirmed(t *testing.T) {
	fm := newFakeMembership(view(true, 1, 2))
	fl := &fakeLeaders{m: map[int32]int32{0: 1, 1: 2, 2: 1, 3: 2}}
	p, fh := startLoop(t, fm, fl)
	waitHosted(t, p, fh, 0, 2)

	// No heartbeat answered for a session timeout; meanwhile the leader
	// of partition 0 moves to broker 2 and that of 3 to broker 1.
	unconfirmed := view(true, 1, 2)
	unconfirmed.Current = false
	fm.set(unconfirmed)
	fl.set(map[int32]int32{0: 2, 1: 2, 2: 1, 3: 1})
	fl.waitRounds(t, 5)
	if got := fh.hostedSet(); !slices.Equal(got, []int32{0, 2}) {
		t.Fatalf("unconfirmed view: hosted %v, want [0 2] kept (calls %v)", got, fh.log)
	}
	if o, _ := p.Owner(0); o.NodeID != 1 {
		t.Fatalf("unconfirmed view: Owner(0) = %d, want 1 as placed", o.NodeID)
	}
	if got := p.Sidecars(); len(got) != 2 {
		t.Fatalf("unconfirmed view: Sidecars %v, want the last view's", got)
	}

	// A shard fenced meanwhile is released, not taken back.
	fh.mu.Lock()
	fh.fenced[2] = true
	fh.mu.Unlock()
	waitHosted(t, p, fh, 0)
	fl.waitRounds(t, 5)
	if got := fh.hostedSet(); !slices.Equal(got, []int32{0}) {
		t.Fatalf("unconfirmed, shard 2 fenced: hosted %v, want [0] (calls %v)", got, fh.log)
	}

	// Kafka says it no longer knows this member (its session expired:
	// the others may have taken its shards, and its state of them may be
	// behind): everything released until a confirmed view.
	out := unconfirmed
	out.Member = false
	fm.set(out)
	waitHosted(t, p, fh)

	// Joined again, confirmed: the placement follows the leaders.
	fm.set(membership.View{Generation: 2, Member: true, Current: true, Sidecars: []diskless.Sidecar{sc(1), sc(2)}})
	waitHosted(t, p, fh, 2, 3)
}
