package group

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeTopics is a topic catalog for tests.
type fakeTopics struct {
	byName  map[string]topicMeta
	version uint64
}

func newFakeTopics(topics map[string]int32) *fakeTopics {
	f := &fakeTopics{byName: map[string]topicMeta{}}
	for n, p := range topics {
		f.set(n, p)
	}
	return f
}

func topicID(name string) [16]byte {
	var id [16]byte
	copy(id[:], name)
	id[15] = 1
	return id
}

func (f *fakeTopics) set(name string, partitions int32) {
	f.byName[name] = topicMeta{topicID(name), partitions}
	f.version++
}

func (f *fakeTopics) Topic(name string) ([16]byte, int32, bool) {
	tm, ok := f.byName[name]
	return tm.id, tm.n, ok
}

func (f *fakeTopics) TopicByID(id [16]byte) (string, int32, bool) {
	for n, tm := range f.byName {
		if tm.id == id {
			return n, tm.n, true
		}
	}
	return "", 0, false
}

func (f *fakeTopics) Names() []string { return sortedKeys(f.byName) }
func (f *fakeTopics) Version() uint64 { return f.version }

// harness drives a Coordinator with a manual clock.
type harness struct {
	t      testing.TB
	c      *Coordinator
	now    time.Time
	topics *fakeTopics
	ids    int
}

var epoch0 = time.UnixMilli(1_700_000_000_000)

func newHarness(t testing.TB, cfg Config) *harness { return newHarnessLogged(t, cfg, nil) }

// newHarnessLogged is newHarness with log as Deps.Logger (nil: none).
func newHarnessLogged(t testing.TB, cfg Config, log *slog.Logger) *harness {
	h := &harness{t: t, now: epoch0, topics: newFakeTopics(map[string]int32{"t": 8, "u": 4})}
	var err error
	h.c, err = New(cfg, Deps{Topics: h.topics, NewID: func() string { h.ids++; return fmt.Sprintf("id%d", h.ids) }, Logger: log}, nil, h.now)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// advance moves the clock and fires what is due.
func (h *harness) advance(d time.Duration) {
	h.now = h.now.Add(d)
	h.c.Tick(h.now)
}

// joinResult collects a parked JoinGroup answer.
type joinResult struct{ resp *kmsg.JoinGroupResponse }

func (r *joinResult) done() bool { return r.resp != nil }

func consumerMeta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = 3
	m.Topics = topics
	return m.AppendTo(nil)
}

func joinReq(version int16, group, member string, instance *string, protocols ...string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = version
	req.Group = group
	req.MemberID = member
	req.InstanceID = instance
	req.SessionTimeoutMillis = 10_000
	req.RebalanceTimeoutMillis = 30_000
	req.ProtocolType = consumerProtocolType
	if len(protocols) == 0 {
		protocols = []string{"range"}
	}
	for _, p := range protocols {
		req.Protocols = append(req.Protocols, kmsg.JoinGroupRequestProtocol{Name: p, Metadata: consumerMeta("t")})
	}
	return req
}

func (h *harness) join(req *kmsg.JoinGroupRequest) *joinResult {
	r := &joinResult{}
	h.c.JoinGroup(h.now, req, "client", "/127.0.0.1", func(resp *kmsg.JoinGroupResponse) {
		if r.resp != nil {
			h.t.Fatalf("JoinGroup answered twice")
		}
		r.resp = resp
	})
	return r
}

// joinNew makes a v9 member join: MEMBER_ID_REQUIRED, then the join with
// the given id, which parks.
func (h *harness) joinNew(group string) (string, *joinResult) {
	h.t.Helper()
	first := h.join(joinReq(9, group, "", nil))
	if !first.done() || first.resp.ErrorCode != kerr.MemberIDRequired.Code {
		h.t.Fatalf("first JoinGroup: %+v", first.resp)
	}
	id := first.resp.MemberID
	return id, h.join(joinReq(9, group, id, nil))
}

type syncResult struct{ resp *kmsg.SyncGroupResponse }

func (h *harness) sync(group, member string, generation int32, assignments map[string]string) *syncResult {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group, req.MemberID, req.Generation = group, member, generation
	pt, p := consumerProtocolType, "range"
	req.ProtocolType, req.Protocol = &pt, &p
	for _, id := range slices.Sorted(mapKeys(assignments)) {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: []byte(assignments[id])})
	}
	r := &syncResult{}
	h.c.SyncGroup(h.now, req, func(resp *kmsg.SyncGroupResponse) {
		if r.resp != nil {
			h.t.Fatalf("SyncGroup answered twice")
		}
		r.resp = resp
	})
	return r
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (h *harness) heartbeat(group, member string, generation int32) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group, req.MemberID, req.Generation = group, member, generation
	return h.c.Heartbeat(h.now, req).ErrorCode
}

// commit commits offset o on t-0 and applies the record, as the shard would.
func (h *harness) commit(version int16, group, member string, generation int32, o int64) int16 {
	h.t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = version
	req.Group, req.MemberID, req.Generation = group, member, generation
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: o, LeaderEpoch: -1}}}}
	resp, rec := h.c.CommitOffsets(h.now, req)
	code := resp.Topics[0].Partitions[0].ErrorCode
	if (rec != nil) != (code == 0) {
		h.t.Fatalf("commit answered %d with record %v", code, rec)
	}
	if rec != nil {
		h.apply(rec)
	}
	return code
}

// apply round-trips a record through its encoding before applying it, as
// replay would see it.
func (h *harness) apply(rec Record) {
	h.t.Helper()
	dec, err := DecodeRecord(AppendRecord(nil, rec))
	if err != nil {
		h.t.Fatalf("decode of %T: %v", rec, err)
	}
	h.c.ApplyRecord(dec)
}

func errName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(code).Error()
}

func wantCode(t testing.TB, what string, got int16, want *kerr.Error) {
	t.Helper()
	if got != errCode(want) {
		t.Fatalf("%s: got %s, want %s", what, errName(got), errName(errCode(want)))
	}
}

func strp(s string) *string { return &s }
