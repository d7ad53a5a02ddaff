package group

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Topics is the topic catalog as the group coordinator sees it: KIP-848
// subscriptions name topics, assignments carry their ids and partition
// counts. Implementations are immutable snapshots or safe to call from the
// shard's driver.
type Topics interface {
	// Topic returns a topic's id and partition count by name.
	Topic(name string) (id [16]byte, partitions int32, ok bool)
	// TopicByID returns a topic's name and partition count by id.
	TopicByID(id [16]byte) (name string, partitions int32, ok bool)
	// Names returns every topic name (regex subscriptions match them).
	Names() []string
	// Version changes whenever the catalog does (a topic created, deleted
	// or grown), so subscriptions are resolved again.
	Version() uint64
}

// Coordinator is the group coordinator of one coordinator shard: the
// classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) and
// the KIP-848 consumer protocol (ConsumerGroupHeartbeat) for the groups the
// shard owns, and the rules that tie committed offsets to membership.
//
// It is deterministic and does no IO: time comes in as the now argument of
// every call and deadlines fire only in Tick; member ids come from
// Deps.NewID; durable state is the Offsets table, changed only by records
// the caller makes durable and then applies (ApplyRecord). Group
// membership is soft state, as the issue asks: after a restart members
// rejoin. Parked JoinGroup and SyncGroup answers are delivered through the
// callbacks their calls passed, from within a later call on the
// Coordinator (never concurrently). Not safe for concurrent use: the
// shard's driver owns it.
type Coordinator struct {
	cfg      Config
	topics   Topics
	newID    func() string
	log      *slog.Logger
	offsets  *Offsets
	timers   timers
	classic  map[string]*classicGroup
	consumer map[string]*consumerGroup
	// emptySince is when a group this Coordinator saw lose its last member
	// became empty (ms): offsets of an empty group expire that long after
	// it (KIP-211). Soft state; groups not seen since Open count from
	// openedAt, which only makes retention longer, never shorter.
	emptySince map[string]int64
	openedAt   int64
	// adoptUntil is when AdoptMembers' window ends (ms; 0: never
	// opened).
	adoptUntil int64
	// ending holds, per producer id, the largest token of the records
	// 110 EndTxnOffsets returned that are not applied yet (the group
	// commit being decided): CommitTxnOffsets refuses against them as
	// against the table's guard.
	ending map[int64]int64
}

// Deps are the Coordinator's injected dependencies.
type Deps struct {
	// Topics is the topic catalog KIP-848 groups are assigned from; nil
	// refuses ConsumerGroupHeartbeat with UNKNOWN_SERVER_ERROR.
	Topics Topics
	// NewID returns a fresh unique member id suffix (a UUID in Kafka);
	// nil uses 128 random bits in hex. Tests inject a counter.
	NewID func() string
	// Logger gets the classic groups' state changes at debug level
	// (a rebalance begun and ended, with its generation and members; a
	// member removed, and why) and the adoption window at info (DESIGN
	// §Logging: a client can cause rebalances at will, so they are
	// debug lines); nil logs nothing.
	Logger *slog.Logger
}

// New returns a Coordinator over offsets (the shard's replayed table,
// which it keeps using: ApplyRecord applies to it). now is the time the
// shard was opened.
func New(cfg Config, deps Deps, offsets *Offsets, now time.Time) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if offsets == nil {
		offsets = NewOffsets()
	}
	newID := deps.NewID
	if newID == nil {
		newID = randomID
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Coordinator{
		cfg:        cfg.withDefaults(),
		topics:     deps.Topics,
		newID:      newID,
		log:        log,
		offsets:    offsets,
		timers:     newTimers(),
		classic:    make(map[string]*classicGroup),
		consumer:   make(map[string]*consumerGroup),
		emptySince: make(map[string]int64),
		openedAt:   now.UnixMilli(),
		ending:     make(map[int64]int64),
	}, nil
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// AdoptMembers opens a window, from now for MaxSessionTimeout, in which
// a classic group that has not completed a rebalance on this Coordinator
// takes a dynamic member it does not know for one of its members from
// before: the shard was taken over from another sidecar (DESIGN
// §Consumer groups, across a shard move), whose groups' members are not
// in the log. Such a member's Heartbeat, SyncGroup and OffsetCommit are
// answered REBALANCE_IN_PROGRESS instead of UNKNOWN_MEMBER_ID, and its
// JoinGroup joins with its member id as it is, so a cooperative consumer
// keeps its partitions through the rebalance instead of giving them up
// and joining anew. Kafka's coordinators never need this: they load a group's members
// with its offsets.
func (c *Coordinator) AdoptMembers(now time.Time) {
	c.adoptUntil = now.UnixMilli() + c.cfg.MaxSessionTimeout.Milliseconds()
	c.log.Info("group: adopting the members of the groups from before the takeover as they come",
		"until", time.UnixMilli(c.adoptUntil).UTC())
}

// debug reports whether the Coordinator's logger takes debug lines: the
// lines that list a group's members are built only then (a rebalance of
// a large group is O(members) already; its log line need not add to it
// when nobody reads it).
func (c *Coordinator) debug() bool { return c.log.Enabled(context.Background(), slog.LevelDebug) }

// adopts reports whether a member of group g (nil: not known here) that
// this Coordinator does not know is taken as one from before the
// takeover (AdoptMembers).
func (c *Coordinator) adopts(group string, g *classicGroup, now int64, memberID string, instanceID *string) bool {
	if now >= c.adoptUntil || memberID == "" || instanceID != nil || c.consumer[group] != nil {
		return false
	}
	return g == nil || g.generation == 0 && g.members[memberID] == nil && !isPending(g, memberID)
}

// Offsets returns the committed-offsets table (read-only for callers: it
// changes only through ApplyRecord).
func (c *Coordinator) Offsets() *Offsets { return c.offsets }

// ReplaceOffsets makes offsets the table the Coordinator uses: the
// shard's table rebuilt from its log after a failed append (which may or
// may not have made the last records durable). Membership is kept.
func (c *Coordinator) ReplaceOffsets(offsets *Offsets) {
	if offsets == nil {
		offsets = NewOffsets()
	}
	c.offsets = offsets
	clear(c.ending)
}

// ApplyRecord applies a durable record (107 … 110, 113) to the offsets
// table. The caller applies each record the Coordinator returned once it
// is durable, in log order, before answering the request that made it.
func (c *Coordinator) ApplyRecord(rec Record) {
	switch r := rec.(type) {
	case *GroupDeletedRecord:
		c.offsets.Apply(rec)
		c.forgetGroup(r.Group)
	case *TopicOffsetsDeletedRecord:
		// A group left with no offset and no member stays, Empty, until
		// the next expiry check forgets it (ExpireOffsets), as Kafka keeps
		// it until its next cleanup (SPEC §6).
		groups := c.offsets.GroupsOfTopic(r.TopicName)
		c.offsets.Apply(rec)
		for _, g := range groups {
			if !c.exists(g) {
				c.classic[g] = newClassicGroup(g, 0)
			}
		}
	case *TxnOffsetsEndedRecord:
		c.offsets.Apply(rec)
		if c.ending[r.ProducerID] <= r.TxnSeq {
			delete(c.ending, r.ProducerID)
		}
	default:
		c.offsets.Apply(rec)
	}
}

// DeleteTopicOffsets returns the record removing every group's offsets of
// the deleted topic (record 113), or nil when no group of this shard
// holds any. id is the topic's id, all zero when unknown. The caller
// writes it and applies it once durable.
func (c *Coordinator) DeleteTopicOffsets(topic string, id [16]byte) Record {
	if !c.offsets.HasTopic(topic) {
		return nil
	}
	return &TopicOffsetsDeletedRecord{TopicName: topic, TopicID: id}
}

// Tick fires every deadline due at now: session and rebalance timeouts,
// the end of join and sync phases and initial rebalance delays. Parked
// answers they complete are delivered before Tick returns.
func (c *Coordinator) Tick(now time.Time) {
	ms := now.UnixMilli()
	for {
		tm := c.timers.popDue(ms)
		if tm == nil {
			return
		}
		// A deadline fires at its own time, however late the tick: the
		// same calls give the same state whatever the tick granularity.
		tm.fire(tm.at)
	}
}

// NextDeadline returns when Tick next has work, if ever.
func (c *Coordinator) NextDeadline() (time.Time, bool) {
	at, ok := c.timers.next()
	if !ok {
		return time.Time{}, false
	}
	return time.UnixMilli(at), true
}

// errCode is a kerr error's code; nil is 0.
func errCode(e *kerr.Error) int16 {
	if e == nil {
		return 0
	}
	return e.Code
}

// groupType is a group's type as ListGroups v5 and DescribeGroups name it.
const (
	typeClassic  = "classic"
	typeConsumer = "consumer"
)

// exists reports whether the coordinator knows the group: members,
// or offsets (a "simple" group, as Kafka calls a group that only holds
// offsets).
func (c *Coordinator) exists(group string) bool {
	if _, ok := c.classic[group]; ok {
		return true
	}
	if _, ok := c.consumer[group]; ok {
		return true
	}
	return c.offsets.HasGroup(group)
}

// markEmpty records when a group became empty (for offset expiry).
func (c *Coordinator) markEmpty(group string, now int64) { c.emptySince[group] = now }
