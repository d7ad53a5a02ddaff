package group

import (
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CommitOffsets handles an OffsetCommit request (v2–v10): it checks the
// commit against the group's membership and returns the answer, every
// partition answered, and the record that makes the accepted offsets
// durable (nil when nothing is to be written). Topics must carry their
// names (for v10, the caller resolves TopicID first and answers unknown
// ids itself); TopicID is kept with the offsets.
//
// The caller writes the record to the shard's log, applies it
// (ApplyRecord) once durable and only then sends the answer; if the write
// fails, every partition answered 0 gets the write's error instead.
//
// Membership rules (Kafka's): generation −1 with member "" is a simple
// consumer's commit, accepted while the group is Empty (and creating the
// group if there is none); otherwise UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID
// or ILLEGAL_GENERATION (classic), UNKNOWN_MEMBER_ID or STALE_MEMBER_EPOCH
// (KIP-848 members, which must use v9+: UNSUPPORTED_VERSION below),
// REBALANCE_IN_PROGRESS while a classic group completes a rebalance (and
// for a member AdoptMembers takes, until it rejoined), and
// for a group that does not exist GROUP_ID_NOT_FOUND from v9 (before:
// ILLEGAL_GENERATION). Per partition: UNKNOWN_TOPIC_OR_PARTITION for a
// topic or partition the catalog (Deps.Topics) does not hold, whatever the
// group's answer (SPEC §6), OFFSET_METADATA_TOO_LARGE.
func (c *Coordinator) CommitOffsets(now time.Time, req *kmsg.OffsetCommitRequest) (*kmsg.OffsetCommitResponse, *OffsetCommitRecord) {
	ms := now.UnixMilli()
	resp := kmsg.NewPtrOffsetCommitResponse()
	resp.Version = req.Version
	if unknown := c.unknownPartitions(req); unknown > 0 {
		return c.commitKnown(now, req, resp, unknown)
	}
	if err := c.validateCommit(req, ms); err != nil {
		return commitError(resp, req, err.Code), nil
	}
	expire := int64(-1)
	if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis >= 0 {
		expire = ms + req.RetentionTimeMillis
	}
	rec := &OffsetCommitRecord{Group: req.Group, CommitTimestamp: ms, ProducerID: -1, ProducerEpoch: -1}
	for i := range req.Topics {
		t := &req.Topics[i]
		rt := kmsg.OffsetCommitResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
		ct := CommitTopic{Name: t.Topic, TopicID: t.TopicID}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			rp := kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition}
			meta := ""
			if p.Metadata != nil {
				meta = *p.Metadata
			}
			if len(meta) > c.cfg.OffsetMetadataMaxBytes {
				rp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			} else {
				epoch := int32(-1)
				if req.Version >= 6 {
					epoch = p.LeaderEpoch
				}
				ct.Partitions = append(ct.Partitions, CommitPartition{
					Partition: p.Partition, Offset: p.Offset, LeaderEpoch: epoch,
					Metadata: meta, ExpireTimestamp: expire,
				})
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		if len(ct.Partitions) > 0 {
			rec.Topics = append(rec.Topics, ct)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(rec.Topics) == 0 {
		return resp, nil
	}
	return resp, rec
}

// knownPartition reports whether the catalog holds the topic and
// partition; with no catalog (Deps.Topics nil) every one is taken to exist.
func (c *Coordinator) knownPartition(topic string, p int32) bool {
	if c.topics == nil {
		return true
	}
	_, n, ok := c.topics.Topic(topic)
	return ok && p >= 0 && p < n
}

// unknownPartitions counts the request's partitions the catalog does not
// hold.
func (c *Coordinator) unknownPartitions(req *kmsg.OffsetCommitRequest) int {
	n := 0
	for i := range req.Topics {
		for _, p := range req.Topics[i].Partitions {
			if !c.knownPartition(req.Topics[i].Topic, p.Partition) {
				n++
			}
		}
	}
	return n
}

// commitKnown answers a commit naming partitions the catalog does not
// hold: those get UNKNOWN_TOPIC_OR_PARTITION, as Kafka 4.4 answers them
// before its group coordinator sees the request (SPEC §6); the others are
// committed (or refused) as a request of their own. Refusing them keeps
// the table free of offsets of topics that do not exist, so the offsets
// of a deleted topic are all in the table when record 113 removes them.
func (c *Coordinator) commitKnown(now time.Time, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, unknown int) (*kmsg.OffsetCommitResponse, *OffsetCommitRecord) {
	known := *req
	known.Topics = nil
	for _, t := range req.Topics {
		kt := t
		kt.Partitions = nil
		for _, p := range t.Partitions {
			if c.knownPartition(t.Topic, p.Partition) {
				kt.Partitions = append(kt.Partitions, p)
			}
		}
		if len(kt.Partitions) > 0 {
			known.Topics = append(known.Topics, kt)
		}
	}
	var rec *OffsetCommitRecord
	var sub *kmsg.OffsetCommitResponse
	if len(known.Topics) > 0 {
		sub, rec = c.CommitOffsets(now, &known)
	}
	// The answer in request order: each partition's code from the
	// known partitions' answer, or UNKNOWN_TOPIC_OR_PARTITION.
	codes := make(map[string]map[int32]int16)
	if sub != nil {
		for _, t := range sub.Topics {
			m := codes[t.Topic]
			if m == nil {
				m = make(map[int32]int16)
				codes[t.Topic] = m
			}
			for _, p := range t.Partitions {
				m[p.Partition] = p.ErrorCode
			}
		}
	}
	for _, t := range req.Topics {
		rt := kmsg.OffsetCommitResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
		for _, p := range t.Partitions {
			code := kerr.UnknownTopicOrPartition.Code
			if c.knownPartition(t.Topic, p.Partition) {
				code = codes[t.Topic][p.Partition]
			}
			rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, rec
}

func commitError(resp *kmsg.OffsetCommitResponse, req *kmsg.OffsetCommitRequest, code int16) *kmsg.OffsetCommitResponse {
	for i := range req.Topics {
		t := &req.Topics[i]
		rt := kmsg.OffsetCommitResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// FailCommit sets code on every partition of resp answered 0: what a
// caller sends when the commit's record could not be made durable.
func FailCommit(resp *kmsg.OffsetCommitResponse, code int16) {
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if p := &resp.Topics[i].Partitions[j]; p.ErrorCode == 0 {
				p.ErrorCode = code
			}
		}
	}
}

func (c *Coordinator) validateCommit(req *kmsg.OffsetCommitRequest, now int64) *kerr.Error {
	if cg := c.consumer[req.Group]; cg != nil {
		if req.Generation < 0 && len(cg.members) == 0 {
			return nil
		}
		m := cg.members[req.MemberID]
		if m == nil {
			return kerr.UnknownMemberID
		}
		if req.Version < 9 {
			return kerr.UnsupportedVersion
		}
		if req.Generation != m.epoch {
			return kerr.StaleMemberEpoch
		}
		return nil
	}
	g := c.classic[req.Group]
	if c.adopts(req.Group, g, now, req.MemberID, req.InstanceID) {
		return kerr.RebalanceInProgress // rejoin first (AdoptMembers)
	}
	if g == nil {
		if !c.offsets.HasGroup(req.Group) {
			if req.Generation < 0 {
				return nil // a simple group is created by the commit
			}
			if req.Version >= 9 {
				return kerr.GroupIDNotFound
			}
			return kerr.IllegalGeneration
		}
		g = newClassicGroup(req.Group, now) // offsets only: an Empty simple group
	}
	if req.Generation < 0 && g.is(stateEmpty) {
		return nil
	}
	if req.Generation >= 0 || req.MemberID != "" || req.InstanceID != nil {
		if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
			return err
		}
		if req.Generation != g.generation {
			return kerr.IllegalGeneration
		}
	} else if !g.is(stateEmpty) {
		return kerr.UnknownMemberID
	}
	if g.is(stateCompletingRebalance) {
		return kerr.RebalanceInProgress
	}
	if g.is(stateStable) || g.is(statePreparingRebalance) {
		// A commit keeps a classic member's session, as a heartbeat does.
		if m := g.members[req.MemberID]; m != nil {
			c.scheduleClassicHeartbeat(g.id, m.id, now+int64(m.sessionTimeout))
		}
	}
	return nil
}

// FetchRequest is one group of an OffsetFetch request (v0–v7 requests have
// one; v8+ a list), topics named (the caller resolves v10 topic ids).
type FetchRequest struct {
	Group string
	// MemberID and MemberEpoch (v9+) identify a KIP-848 member; nil and
	// −1 otherwise.
	MemberID    *string
	MemberEpoch int32
	// Topics are the partitions asked; nil asks for every committed
	// offset of the group.
	Topics []kmsg.OffsetFetchRequestGroupTopic
}

// FetchOffsets answers one group of an OffsetFetch request. A partition
// without a committed offset answers offset −1; with requireStable (v7+),
// a partition with an offset pending in an open transaction answers
// UNSTABLE_OFFSET_COMMIT (KIP-447). Group errors (v9+ KIP-848 members):
// UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH; an empty group id:
// INVALID_GROUP_ID.
func (c *Coordinator) FetchOffsets(req FetchRequest, requireStable bool) kmsg.OffsetFetchResponseGroup {
	out := kmsg.OffsetFetchResponseGroup{Group: req.Group}
	if req.Group == "" && req.Topics == nil {
		out.ErrorCode = kerr.InvalidGroupID.Code
		return out
	}
	if cg := c.consumer[req.Group]; cg != nil && (req.MemberID != nil || req.MemberEpoch >= 0) {
		var m *consumerMember
		if req.MemberID != nil {
			m = cg.members[*req.MemberID]
		}
		if m == nil {
			out.ErrorCode = kerr.UnknownMemberID.Code
			return out
		}
		if req.MemberEpoch != m.epoch {
			out.ErrorCode = kerr.StaleMemberEpoch.Code
			return out
		}
	}
	part := func(topic string, p int32) kmsg.OffsetFetchResponseGroupTopicPartition {
		rp := kmsg.OffsetFetchResponseGroupTopicPartition{Partition: p, Offset: -1, LeaderEpoch: -1, Metadata: strPtrAlways("")}
		if requireStable && c.offsets.HasPending(req.Group, topic, p) {
			rp.ErrorCode = kerr.UnstableOffsetCommit.Code
			return rp
		}
		if v, ok := c.offsets.Get(req.Group, topic, p); ok {
			rp.Offset, rp.LeaderEpoch, rp.Metadata = v.Offset, v.LeaderEpoch, strPtrAlways(v.Metadata)
		}
		return rp
	}
	if req.Topics == nil {
		for _, t := range c.offsets.Topics(req.Group) {
			rt := kmsg.OffsetFetchResponseGroupTopic{Topic: t}
			for _, p := range c.offsets.Partitions(req.Group, t) {
				rp := part(t, p)
				if v, ok := c.offsets.Get(req.Group, t, p); ok {
					rt.TopicID = v.TopicID
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			out.Topics = append(out.Topics, rt)
		}
		return out
	}
	for _, t := range req.Topics {
		rt := kmsg.OffsetFetchResponseGroupTopic{Topic: t.Topic, TopicID: t.TopicID}
		for _, p := range t.Partitions {
			rp := part(t.Topic, p)
			// An offset committed for another topic of the same name (the
			// topic was deleted and created again) is not this topic's.
			if v, ok := c.offsets.Get(req.Group, t.Topic, p); ok && mismatchedID(v.TopicID, t.TopicID) && rp.ErrorCode == 0 {
				rp.Offset, rp.LeaderEpoch, rp.Metadata = -1, -1, strPtrAlways("")
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		out.Topics = append(out.Topics, rt)
	}
	return out
}

func mismatchedID(stored, asked [16]byte) bool {
	var zero [16]byte
	return stored != zero && asked != zero && stored != asked
}

func strPtrAlways(s string) *string { return &s }

// DeleteOffsets handles an OffsetDelete request and returns the answer and
// the record removing the offsets (nil when none is held). Errors:
// INVALID_GROUP_ID, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP (a classic group
// with members that does not use the consumer protocol), and per
// partition GROUP_SUBSCRIBED_TO_TOPIC while the group consumes the topic.
// The caller writes, applies and then answers, as for CommitOffsets.
func (c *Coordinator) DeleteOffsets(req *kmsg.OffsetDeleteRequest) (*kmsg.OffsetDeleteResponse, *OffsetsDeletedRecord) {
	resp := kmsg.NewPtrOffsetDeleteResponse()
	resp.Version = req.Version
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp, nil
	}
	if !c.exists(req.Group) {
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		return resp, nil
	}
	subscribed := func(string) bool { return false }
	if g := c.classic[req.Group]; g != nil {
		if !g.is(stateEmpty) && g.protocolType != consumerProtocolType {
			resp.ErrorCode = kerr.NonEmptyGroup.Code
			return resp, nil
		}
		subscribed = g.isSubscribed
	} else if cg := c.consumer[req.Group]; cg != nil {
		subscribed = cg.isSubscribed
	}
	rec := &OffsetsDeletedRecord{Group: req.Group}
	for _, t := range req.Topics {
		rt := kmsg.OffsetDeleteResponseTopic{Topic: t.Topic}
		dt := DeletedTopic{Name: t.Topic}
		sub := subscribed(t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.OffsetDeleteResponseTopicPartition{Partition: p.Partition}
			if sub {
				rp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			} else if _, ok := c.offsets.Get(req.Group, t.Topic, p.Partition); ok || c.offsets.HasPending(req.Group, t.Topic, p.Partition) {
				dt.Partitions = append(dt.Partitions, p.Partition)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		if len(dt.Partitions) > 0 {
			rec.Topics = append(rec.Topics, dt)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(rec.Topics) == 0 {
		return resp, nil
	}
	return resp, rec
}

// DeleteGroups handles the groups of a DeleteGroups request: the answers,
// in request order, and the records deleting the offsets of those that
// hold any (record 109). A deleted group with no offsets is gone at once;
// one with offsets once its record is applied. Errors: GROUP_ID_NOT_FOUND,
// NON_EMPTY_GROUP. The caller writes, applies and then answers.
func (c *Coordinator) DeleteGroups(groups []string) ([]kmsg.DeleteGroupsResponseGroup, []Record) {
	var recs []Record
	out := make([]kmsg.DeleteGroupsResponseGroup, 0, len(groups))
	for _, id := range groups {
		r := kmsg.DeleteGroupsResponseGroup{Group: id}
		switch {
		case !c.exists(id):
			r.ErrorCode = kerr.GroupIDNotFound.Code
		case c.classic[id] != nil && !c.classic[id].is(stateEmpty),
			c.consumer[id] != nil && len(c.consumer[id].members) > 0:
			r.ErrorCode = kerr.NonEmptyGroup.Code
		default:
			if c.offsets.HasGroup(id) {
				recs = append(recs, &GroupDeletedRecord{Group: id})
			} else {
				c.forgetGroup(id)
			}
		}
		out = append(out, r)
	}
	return out, recs
}

// forgetGroup drops an empty group's soft state.
func (c *Coordinator) forgetGroup(id string) {
	if g := c.classic[id]; g != nil && g.is(stateEmpty) {
		for pid := range g.pendingJoin {
			c.timers.cancel(timerKey{timerClassicHeartbeat, id, pid})
		}
		c.timers.cancel(timerKey{timerClassicJoin, id, ""})
		c.timers.cancel(timerKey{timerClassicSync, id, ""})
		g.transition(stateDead, 0)
		delete(c.classic, id)
	}
	if cg := c.consumer[id]; cg != nil && len(cg.members) == 0 {
		delete(c.consumer, id)
	}
	delete(c.emptySince, id)
}

// ListGroups answers ListGroups (v0–v5): every group the shard knows,
// filtered by state (v4+, case-insensitive) and type (v5+: classic,
// consumer). A group that only holds offsets is an Empty classic group
// with protocol type "", as in Kafka.
func (c *Coordinator) ListGroups(req *kmsg.ListGroupsRequest) []kmsg.ListGroupsResponseGroup {
	states := map[string]bool{}
	for _, s := range req.StatesFilter {
		states[strings.ToLower(strings.TrimSpace(s))] = true
	}
	types := map[string]bool{}
	for _, t := range req.TypesFilter {
		types[strings.ToLower(strings.TrimSpace(t))] = true
	}
	var out []kmsg.ListGroupsResponseGroup
	add := func(id, protocolType, state, typ string) {
		if len(states) > 0 && !states[strings.ToLower(state)] || len(types) > 0 && !types[typ] {
			return
		}
		out = append(out, kmsg.ListGroupsResponseGroup{Group: id, ProtocolType: protocolType, GroupState: state, GroupType: typ})
	}
	seen := map[string]bool{}
	for _, id := range sortedKeys(c.classic) {
		g := c.classic[id]
		seen[id] = true
		add(id, g.protocolType, g.state.String(), typeClassic)
	}
	for _, id := range sortedKeys(c.consumer) {
		seen[id] = true
		add(id, consumerProtocolType, c.consumer[id].state().String(), typeConsumer)
	}
	for _, id := range c.offsets.Groups() {
		if !seen[id] {
			add(id, "", stateEmpty.String(), typeClassic)
		}
	}
	slices.SortFunc(out, func(a, b kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, b.Group) })
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// DescribeGroups answers DescribeGroups (v0–v6) for classic groups. A
// group that does not exist, or uses the consumer protocol
// (ConsumerGroupDescribe describes those), is Dead, with GROUP_ID_NOT_FOUND
// from v6 (Kafka's answers). Member metadata and assignments are given in
// Stable only.
func (c *Coordinator) DescribeGroups(version int16, groups []string) []kmsg.DescribeGroupsResponseGroup {
	out := make([]kmsg.DescribeGroupsResponseGroup, 0, len(groups))
	for _, id := range groups {
		d := kmsg.NewDescribeGroupsResponseGroup()
		d.Group = id
		g := c.classic[id]
		if g == nil && c.consumer[id] == nil && c.offsets.HasGroup(id) {
			g = newClassicGroup(id, 0)
		}
		if g == nil {
			d.State = stateDead.String()
			if version >= 6 {
				d.ErrorCode = kerr.GroupIDNotFound.Code
				msg := "Group " + id + " not found."
				if c.consumer[id] != nil {
					msg = "Group " + id + " is not a classic group."
				}
				d.ErrorMessage = &msg
			}
			out = append(out, d)
			continue
		}
		d.State = g.state.String()
		d.ProtocolType = g.protocolType
		stable := g.is(stateStable)
		if stable {
			d.Protocol = g.protocol
		}
		for _, mid := range g.order {
			m := g.members[mid]
			dm := kmsg.DescribeGroupsResponseGroupMember{MemberID: mid, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost, ProtocolMetadata: []byte{}, MemberAssignment: []byte{}}
			if stable {
				dm.ProtocolMetadata = orEmpty(m.metadata(g.protocol))
				dm.MemberAssignment = orEmpty(m.assignment)
			}
			d.Members = append(d.Members, dm)
		}
		out = append(out, d)
	}
	return out
}

// ExpireOffsets returns the records removing the offsets expired at now
// (KIP-211, offsets.retention.minutes): for an empty group, every offset
// once the group has been empty for the retention (Kafka counts from the
// state change; a group this Coordinator has not seen since it was
// opened counts from its opening or the commit, whichever is later, so a
// restart never shortens retention); for a group with members, the
// offsets of topics it no longer consumes, by commit time; an offset
// committed with a retention time (v2–v4) at that time. A group whose last
// offset expires is deleted whole (record 109). Offsets pending in an
// open transaction never expire. The caller writes and applies them.
func (c *Coordinator) ExpireOffsets(now time.Time) []Record {
	ms := now.UnixMilli()
	retention := c.cfg.OffsetsRetention.Milliseconds()
	var recs []Record
	for _, id := range c.offsets.Groups() {
		// base returns the time retention counts from and whether the
		// topic's offsets may expire at all.
		var base func(topic string, v OffsetAndMetadata) (int64, bool)
		switch g, cg := c.classic[id], c.consumer[id]; {
		case g != nil && g.protocolType == "":
			base = func(_ string, v OffsetAndMetadata) (int64, bool) { return v.CommitTimestamp, true }
		case g != nil && g.is(stateEmpty):
			since := g.stateTime
			if s, ok := c.emptySince[id]; ok {
				since = s
			}
			base = func(_ string, v OffsetAndMetadata) (int64, bool) { return since, true }
		case g != nil && g.is(stateStable) && g.protocolType == consumerProtocolType && g.subscribed != nil:
			base = func(t string, v OffsetAndMetadata) (int64, bool) { return v.CommitTimestamp, !g.subscribed[t] }
		case g != nil:
			continue
		case cg != nil:
			base = func(t string, v OffsetAndMetadata) (int64, bool) { return v.CommitTimestamp, !cg.isSubscribed(t) }
		default:
			since, ok := c.emptySince[id]
			if !ok {
				since = c.openedAt
			}
			base = func(_ string, v OffsetAndMetadata) (int64, bool) { return max(since, v.CommitTimestamp), true }
		}
		del := &OffsetsDeletedRecord{Group: id}
		all := true
		for _, t := range c.offsets.Topics(id) {
			dt := DeletedTopic{Name: t}
			for _, p := range c.offsets.Partitions(id, t) {
				v, _ := c.offsets.Get(id, t, p)
				b, may := base(t, v)
				expired := may && !c.offsets.HasPending(id, t, p) &&
					(v.ExpireTimestamp >= 0 && ms >= v.ExpireTimestamp || v.ExpireTimestamp < 0 && ms-b >= retention)
				if expired {
					dt.Partitions = append(dt.Partitions, p)
				} else {
					all = false
				}
			}
			if len(dt.Partitions) > 0 {
				del.Topics = append(del.Topics, dt)
			}
		}
		switch {
		case all && !c.offsets.HasPendingGroup(id):
			recs = append(recs, &GroupDeletedRecord{Group: id})
		case len(del.Topics) > 0:
			recs = append(recs, del)
		}
	}
	// Empty groups that hold nothing are forgotten.
	for _, id := range sortedKeys(c.classic) {
		if g := c.classic[id]; g.is(stateEmpty) && len(g.pendingJoin) == 0 && !c.offsets.HasGroup(id) {
			c.forgetGroup(id)
		}
	}
	return recs
}

// CommitTxnOffsets is the seam for TxnOffsetCommit (issue 15): it checks
// a transactional commit against the group's membership and returns the
// answer and a record 107 with the request's producer id and seq, the
// token of its transaction (0: not known), whose offsets stay pending
// until a record 110 ends the transaction. The transaction coordinator
// checks the producer (epoch, the partition added with AddOffsetsToTxn)
// and answers the token before calling it; the caller writes, applies
// and then answers, as for CommitOffsets.
//
// The offsets' guard (DESIGN §Transactions): when the transaction seq
// ended on this shard after that check — a record 110 of the producer
// with a token of seq or more, applied or returned by EndTxnOffsets
// before this call, within producer.id.expiration.ms —, a commit that
// would write answers INVALID_TXN_STATE on every partition and writes
// nothing, as Kafka's append to the offsets partition fails once the
// marker cleared its verification guard (KIP-890).
//
// Membership rules (Kafka's): a request naming no member (generation −1,
// member "", no instance, as before v3) is accepted whatever the group's
// state; a member is checked as for OffsetCommit, except that a commit
// during CompletingRebalance is accepted and a KIP-848 member's stale
// epoch is ILLEGAL_GENERATION; a group that does not exist is
// ILLEGAL_GENERATION unless the generation is −1. Per partition:
// UNKNOWN_TOPIC_OR_PARTITION for one the catalog does not hold (as for
// CommitOffsets), OFFSET_METADATA_TOO_LARGE.
func (c *Coordinator) CommitTxnOffsets(now time.Time, req *kmsg.TxnOffsetCommitRequest, seq int64) (*kmsg.TxnOffsetCommitResponse, *OffsetCommitRecord) {
	ms := now.UnixMilli()
	resp := kmsg.NewPtrTxnOffsetCommitResponse()
	resp.Version = req.Version
	if err := c.validateTxnCommit(req, ms); err != nil {
		for _, t := range req.Topics {
			rt := kmsg.TxnOffsetCommitResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
			for _, p := range t.Partitions {
				code := err.Code
				if !c.knownPartition(t.Topic, p.Partition) {
					code = kerr.UnknownTopicOrPartition.Code
				}
				rt.Partitions = append(rt.Partitions, kmsg.TxnOffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	rec := &OffsetCommitRecord{Group: req.Group, CommitTimestamp: ms, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch, TxnSeq: seq}
	for _, t := range req.Topics {
		rt := kmsg.TxnOffsetCommitResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
		ct := CommitTopic{Name: t.Topic, TopicID: t.TopicID}
		for _, p := range t.Partitions {
			rp := kmsg.TxnOffsetCommitResponseTopicPartition{Partition: p.Partition}
			meta := ""
			if p.Metadata != nil {
				meta = *p.Metadata
			}
			if !c.knownPartition(t.Topic, p.Partition) {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else if len(meta) > c.cfg.OffsetMetadataMaxBytes {
				rp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			} else {
				epoch := int32(-1)
				if req.Version >= 2 {
					epoch = p.LeaderEpoch
				}
				ct.Partitions = append(ct.Partitions, CommitPartition{Partition: p.Partition, Offset: p.Offset, LeaderEpoch: epoch, Metadata: meta, ExpireTimestamp: -1})
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		if len(ct.Partitions) > 0 {
			rec.Topics = append(rec.Topics, ct)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(rec.Topics) == 0 || req.ProducerID < 0 {
		return resp, nil
	}
	if c.txnEnded(req.ProducerID, seq, ms) {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].ErrorCode = kerr.InvalidTxnState.Code
			}
		}
		return resp, nil
	}
	return resp, rec
}

// txnEnded reports whether the offsets' guard refuses a record 107 of
// producer pid with token seq written at ms: the table's (Offsets.reached)
// or a record 110 returned by EndTxnOffsets and not applied yet — one
// earlier in the same group commit, which the log will hold before it.
func (c *Coordinator) txnEnded(pid, seq, ms int64) bool {
	return c.offsets.reached(pid, seq, ms) || seq > 0 && seq <= c.ending[pid]
}

// EndTxnOffsets returns record 110 ending producer (pid, epoch)'s
// transaction seq (its token; 0: not known) on this shard, committed or
// aborted, stamped with now (its Timestamp, from which the offsets' guard
// remembers seq). Until the caller applies it (ApplyRecord) — or replaces
// the table after a failed write (ReplaceOffsets) — CommitTxnOffsets
// refuses the producer's offsets of seq or before as if it were applied.
func (c *Coordinator) EndTxnOffsets(now time.Time, pid int64, epoch int16, seq int64, committed bool) *TxnOffsetsEndedRecord {
	if seq > 0 {
		c.ending[pid] = max(c.ending[pid], seq)
	}
	return &TxnOffsetsEndedRecord{ProducerID: pid, ProducerEpoch: epoch, Committed: committed, TxnSeq: seq, Timestamp: now.UnixMilli()}
}

func (c *Coordinator) validateTxnCommit(req *kmsg.TxnOffsetCommitRequest, now int64) *kerr.Error {
	anonymous := req.Generation < 0 && req.MemberID == "" && req.InstanceID == nil
	if req.Group == "" {
		return kerr.InvalidGroupID
	}
	if cg := c.consumer[req.Group]; cg != nil {
		if req.Generation < 0 && len(cg.members) == 0 || anonymous {
			return nil
		}
		m := cg.members[req.MemberID]
		if m == nil {
			return kerr.UnknownMemberID
		}
		if req.Generation != m.epoch {
			return kerr.IllegalGeneration
		}
		return nil
	}
	g := c.classic[req.Group]
	if g == nil {
		if !c.offsets.HasGroup(req.Group) {
			if req.Generation < 0 {
				return nil
			}
			return kerr.IllegalGeneration
		}
		g = newClassicGroup(req.Group, now)
	}
	if req.Generation < 0 && g.is(stateEmpty) || anonymous {
		return nil
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		return err
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration
	}
	return nil
}
