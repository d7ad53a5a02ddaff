package group

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// classicState is a classic group's state (Kafka's ClassicGroupState).
type classicState uint8

const (
	stateEmpty classicState = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

func (s classicState) String() string {
	switch s {
	case stateEmpty:
		return "Empty"
	case statePreparingRebalance:
		return "PreparingRebalance"
	case stateCompletingRebalance:
		return "CompletingRebalance"
	case stateStable:
		return "Stable"
	default:
		return "Dead"
	}
}

// consumerProtocolType is the protocol type of Kafka consumers.
const consumerProtocolType = "consumer"

type classicMember struct {
	id               string
	instanceID       *string
	clientID         string
	clientHost       string
	rebalanceTimeout int32 // ms
	sessionTimeout   int32 // ms
	protocolType     string
	protocols        []kmsg.JoinGroupRequestProtocol
	assignment       []byte
	isNew            bool

	joinVersion  int16
	awaitingJoin func(*kmsg.JoinGroupResponse)
	syncVersion  int16
	awaitingSync func(*kmsg.SyncGroupResponse)
	// replacedJoins and replacedSyncs are the member's earlier parked
	// JoinGroup and SyncGroup calls that a later one of the same member
	// replaced (a client's retry on a new connection, or a late copy from
	// a half-open one), oldest first, at most maxReplacedCalls each: each
	// gets the answer the parked call gets, where Kafka leaves it
	// unanswered (SPEC §6, a member's parked call replaced).
	replacedJoins []parked[kmsg.JoinGroupResponse]
	replacedSyncs []parked[kmsg.SyncGroupResponse]
}

// parked is a JoinGroup or SyncGroup call waiting for its answer: the
// request's version and where the answer goes.
type parked[R any] struct {
	version int16
	respond func(*R)
}

// maxReplacedCalls bounds a member's replaced JoinGroup calls, and its
// replaced SyncGroup calls, kept to be answered: a client has one call of
// a kind in flight, and a partition's heal delivers a late copy per
// connection it gave up — a few. Past the bound the oldest is dropped,
// unanswered as Kafka leaves every replaced call, so that a client
// sending the same member's calls over and over through one rebalance
// (each connection closed after its request) holds no more than this.
const maxReplacedCalls = 4

// replace appends p to calls, dropping the oldest past maxReplacedCalls.
func replace[R any](calls []parked[R], p parked[R]) []parked[R] {
	if len(calls) == maxReplacedCalls {
		copy(calls, calls[1:])
		calls = calls[:len(calls)-1]
	}
	return append(calls, p)
}

func (m *classicMember) metadata(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// matches reports whether protocols are the member's, names and metadata
// in order (Kafka's ClassicGroupMember.matches).
func (m *classicMember) matches(protocols []kmsg.JoinGroupRequestProtocol) bool {
	return slices.EqualFunc(m.protocols, protocols, func(a, b kmsg.JoinGroupRequestProtocol) bool {
		return a.Name == b.Name && bytes.Equal(a.Metadata, b.Metadata)
	})
}

// classicGroup is one classic-protocol group (Kafka's ClassicGroup),
// soft state.
type classicGroup struct {
	id             string
	state          classicState
	prevState      classicState
	generation     int32
	protocolType   string // "" before the first member
	protocol       string // selected protocol; "" when none
	leader         string // "" when none
	members        map[string]*classicMember
	order          []string          // member ids in join order: leader succession and answers are deterministic
	static         map[string]string // instance id → member id
	pendingJoin    map[string]struct{}
	pendingSync    map[string]struct{}
	supported      map[string]int // protocol name → members supporting it
	awaitingJoins  int
	newMemberAdded bool
	stateTime      int64 // ms, when the state last changed
	// subscribed is the union of the members' subscribed topics for a
	// consumer-protocol group in a generation (nil: unknown).
	subscribed map[string]bool
}

func newClassicGroup(id string, now int64) *classicGroup {
	return &classicGroup{
		id:          id,
		members:     make(map[string]*classicMember),
		static:      make(map[string]string),
		pendingJoin: make(map[string]struct{}),
		pendingSync: make(map[string]struct{}),
		supported:   make(map[string]int),
		stateTime:   now,
	}
}

func (g *classicGroup) is(s classicState) bool { return g.state == s }

func (g *classicGroup) transition(s classicState, now int64) {
	g.prevState, g.state, g.stateTime = g.state, s, now
}

// canRebalance reports whether PreparingRebalance may follow the state.
func (g *classicGroup) canRebalance() bool {
	return g.state == stateStable || g.state == stateCompletingRebalance || g.state == stateEmpty
}

func (g *classicGroup) isLeader(id string) bool { return g.leader != "" && g.leader == id }

func (g *classicGroup) add(m *classicMember) {
	if m.instanceID != nil {
		g.static[*m.instanceID] = m.id
	}
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	if g.leader == "" {
		g.leader = m.id
	}
	g.members[m.id] = m
	g.order = append(g.order, m.id)
	for _, p := range m.protocols {
		g.supported[p.Name]++
	}
	if m.awaitingJoin != nil {
		g.awaitingJoins++
	}
	delete(g.pendingJoin, m.id)
}

func (g *classicGroup) remove(id string) {
	if m := g.members[id]; m != nil {
		delete(g.members, id)
		g.order = slices.DeleteFunc(g.order, func(s string) bool { return s == id })
		for _, p := range m.protocols {
			g.supported[p.Name]--
		}
		if m.awaitingJoin != nil {
			g.awaitingJoins--
		}
		if m.instanceID != nil {
			delete(g.static, *m.instanceID)
		}
	}
	if g.isLeader(id) {
		g.leader = ""
		if len(g.order) > 0 {
			g.leader = g.order[0]
		}
	}
	delete(g.pendingJoin, id)
	delete(g.pendingSync, id)
}

// supportsProtocols is Kafka's ClassicGroup.supportsProtocols: an empty
// group takes any non-empty type and protocol list; otherwise the type
// must match and one protocol must be supported by every member.
func (g *classicGroup) supportsProtocols(protocolType string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if g.is(stateEmpty) {
		return protocolType != "" && len(protocols) > 0
	}
	if g.protocolType != protocolType {
		return false
	}
	for _, p := range protocols {
		if g.supported[p.Name] == len(g.members) {
			return true
		}
	}
	return false
}

// selectProtocol picks the protocol every member supports that most
// members list first among those (Kafka's vote); ties go to the name
// first in order, so the choice is deterministic.
func (g *classicGroup) selectProtocol() string {
	votes := map[string]int{}
	for _, id := range g.order {
		m := g.members[id]
		for _, p := range m.protocols {
			if g.supported[p.Name] == len(g.members) {
				votes[p.Name]++
				break
			}
		}
	}
	best, bestVotes := "", -1
	for name, v := range votes {
		if v > bestVotes || v == bestVotes && name < best {
			best, bestVotes = name, v
		}
	}
	return best
}

func (g *classicGroup) hasAllMembersJoined() bool {
	return len(g.members) == g.awaitingJoins && len(g.pendingJoin) == 0
}

func (g *classicGroup) rebalanceTimeoutMs() int32 {
	var max int32
	for _, m := range g.members {
		max = max2(max, m.rebalanceTimeout)
	}
	return max
}

func max2(a, b int32) int32 {
	if a > b {
		return a
	}
	return b
}

// maybeElectNewJoinedLeader makes a member that rejoined the leader when
// the leader did not rejoin; false when none rejoined.
func (g *classicGroup) maybeElectNewJoinedLeader() bool {
	if g.leader == "" {
		return false
	}
	if g.members[g.leader].awaitingJoin != nil {
		return true
	}
	for _, id := range g.order {
		if g.members[id].awaitingJoin != nil {
			g.leader = id
			return true
		}
	}
	return false
}

// validateMember is Kafka's ClassicGroup.validateMember.
func (g *classicGroup) validateMember(memberID string, instanceID *string) *kerr.Error {
	if instanceID != nil {
		existing, ok := g.static[*instanceID]
		if !ok {
			return kerr.UnknownMemberID
		}
		if existing != memberID {
			return kerr.FencedInstanceID
		}
	}
	if _, ok := g.members[memberID]; !ok {
		return kerr.UnknownMemberID
	}
	return nil
}

func (g *classicGroup) updateMember(m *classicMember, protocols []kmsg.JoinGroupRequestProtocol, rebalance, session int32, version int16, respond func(*kmsg.JoinGroupResponse)) {
	for _, p := range m.protocols {
		g.supported[p.Name]--
	}
	m.protocols = protocols
	for _, p := range m.protocols {
		g.supported[p.Name]++
	}
	m.rebalanceTimeout, m.sessionTimeout = rebalance, session
	if respond != nil && m.awaitingJoin == nil {
		g.awaitingJoins++
	} else if respond == nil && m.awaitingJoin != nil {
		g.awaitingJoins--
	}
	if respond != nil && m.awaitingJoin != nil {
		m.replacedJoins = replace(m.replacedJoins, parked[kmsg.JoinGroupResponse]{m.joinVersion, m.awaitingJoin})
	}
	m.awaitingJoin, m.joinVersion = respond, version
}

// parkSync parks the member's SyncGroup call (v version) until the
// leader's assignment arrives; a call already parked is answered with it
// too.
func (m *classicMember) parkSync(version int16, respond func(*kmsg.SyncGroupResponse)) {
	if m.awaitingSync != nil {
		m.replacedSyncs = replace(m.replacedSyncs, parked[kmsg.SyncGroupResponse]{m.syncVersion, m.awaitingSync})
	}
	m.awaitingSync, m.syncVersion = respond, version
}

// answerReplaced gives each of calls a copy of resp at its own version
// (version sets it on a copy).
func answerReplaced[R any](calls []parked[R], resp *R, version func(*R, int16)) {
	for _, p := range calls {
		r := *resp
		version(&r, p.version)
		p.respond(&r)
	}
}

func (g *classicGroup) completeJoin(m *classicMember, resp *kmsg.JoinGroupResponse) bool {
	if m.awaitingJoin == nil {
		return false
	}
	respond, replaced := m.awaitingJoin, m.replacedJoins
	m.awaitingJoin, m.replacedJoins = nil, nil
	g.awaitingJoins--
	answerReplaced(replaced, resp, func(r *kmsg.JoinGroupResponse, v int16) { r.Version = v })
	resp.Version = m.joinVersion
	respond(resp)
	return true
}

func (g *classicGroup) completeSync(m *classicMember, resp *kmsg.SyncGroupResponse) bool {
	if m.awaitingSync == nil {
		return false
	}
	respond, replaced := m.awaitingSync, m.replacedSyncs
	m.awaitingSync, m.replacedSyncs = nil, nil
	answerReplaced(replaced, resp, func(r *kmsg.SyncGroupResponse, v int16) { r.Version = v })
	resp.Version = m.syncVersion
	respond(resp)
	return true
}

// joinMembers is the member list the leader gets.
func (g *classicGroup) joinMembers() []kmsg.JoinGroupResponseMember {
	out := make([]kmsg.JoinGroupResponseMember, 0, len(g.order))
	for _, id := range g.order {
		m := g.members[id]
		out = append(out, kmsg.JoinGroupResponseMember{MemberID: id, InstanceID: m.instanceID, ProtocolMetadata: m.metadata(g.protocol)})
	}
	return out
}

func (g *classicGroup) joinResponse(memberID string, members []kmsg.JoinGroupResponseMember) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.MemberID = memberID
	resp.Generation = g.generation
	resp.Protocol = strPtr(g.protocol)
	resp.ProtocolType = strPtr(g.protocolType)
	resp.LeaderID = g.leader
	resp.Members = members
	return resp
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// computeSubscribed parses the consumer-protocol subscriptions of the
// selected protocol (nil when the group is not a consumer group or one
// cannot be parsed: then every topic counts as subscribed, Kafka's rule).
func (g *classicGroup) computeSubscribed() map[string]bool {
	if g.protocolType != consumerProtocolType || g.protocol == "" && len(g.members) > 0 {
		return nil
	}
	topics := map[string]bool{}
	for _, m := range g.members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadata(g.protocol)); err != nil {
			return nil
		}
		for _, t := range meta.Topics {
			topics[t] = true
		}
	}
	return topics
}

// isSubscribed reports whether the group consumes topic (Kafka's
// isSubscribedToTopic: unknown subscriptions count as subscribed for
// consumer groups, not for others).
func (g *classicGroup) isSubscribed(topic string) bool {
	if g.subscribed == nil {
		return g.protocolType == consumerProtocolType && !g.is(stateEmpty)
	}
	return g.subscribed[topic]
}

func (g *classicGroup) initNextGeneration(now int64) {
	g.generation++
	if len(g.members) > 0 {
		g.protocol = g.selectProtocol()
		g.subscribed = g.computeSubscribed()
		g.transition(stateCompletingRebalance, now)
	} else {
		g.protocol = ""
		g.subscribed = nil
		g.transition(stateEmpty, now)
	}
	clear(g.pendingSync)
}

// memberIDs returns the group's member ids in join order, at most 16
// and then how many more (for a log line).
func memberIDs(g *classicGroup) []string {
	const most = 16
	if len(g.order) <= most {
		return slices.Clone(g.order)
	}
	return append(slices.Clone(g.order[:most]), fmt.Sprintf("(%d more)", len(g.order)-most))
}

// ---- JoinGroup ----

// JoinGroup handles a JoinGroup request (v0–v9). respond is called with the
// answer, at once or from a later call (the join phase ends when every
// member rejoined, or at the rebalance timeout; the first rebalance of an
// empty group waits group.initial.rebalance.delay.ms). clientID and
// clientHost describe the caller for DescribeGroups. A member id the
// group does not know joins as it is while AdoptMembers takes it.
//
// Errors (Kafka's): INVALID_GROUP_ID, INVALID_SESSION_TIMEOUT,
// MEMBER_ID_REQUIRED (v4+, with the member id to rejoin with),
// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL (also
// for a group that uses the consumer protocol — Kafka 4.x would let the
// classic member join it; this coordinator does not), GROUP_MAX_SIZE_REACHED,
// REBALANCE_IN_PROGRESS is never a JoinGroup answer.
func (c *Coordinator) JoinGroup(now time.Time, req *kmsg.JoinGroupRequest, clientID, clientHost string, respond func(*kmsg.JoinGroupResponse)) {
	ms := now.UnixMilli()
	fail := func(code int16, memberID string) {
		resp := kmsg.NewPtrJoinGroupResponse()
		resp.Version = req.Version
		resp.ErrorCode = code
		resp.MemberID = memberID
		respond(resp)
	}
	if req.Group == "" {
		fail(kerr.InvalidGroupID.Code, req.MemberID)
		return
	}
	if req.SessionTimeoutMillis < int32(c.cfg.MinSessionTimeout.Milliseconds()) ||
		int64(req.SessionTimeoutMillis) > c.cfg.MaxSessionTimeout.Milliseconds() {
		fail(kerr.InvalidSessionTimeout.Code, req.MemberID)
		return
	}
	rebalance := req.RebalanceTimeoutMillis
	if req.Version == 0 {
		rebalance = req.SessionTimeoutMillis
	}
	if cg := c.consumer[req.Group]; cg != nil {
		if len(cg.members) > 0 {
			fail(kerr.InconsistentGroupProtocol.Code, "")
			return
		}
		c.deleteConsumerGroup(cg)
	}
	g := c.classic[req.Group]
	unknown := req.MemberID == ""
	if g == nil {
		if !unknown && !c.adopts(req.Group, nil, ms, req.MemberID, req.InstanceID) {
			fail(kerr.UnknownMemberID.Code, req.MemberID)
			return
		}
		g = newClassicGroup(req.Group, ms)
		c.classic[req.Group] = g
	}
	if !c.acceptJoiningMember(g, req.MemberID) {
		g.remove(req.MemberID)
		fail(kerr.GroupMaxSizeReached.Code, "")
		if g.is(stateEmpty) && len(g.members) == 0 {
			c.maybeForgetClassic(g)
		}
		return
	}
	j := joinArgs{req: req, rebalance: rebalance, clientID: clientID, clientHost: clientHost, respond: respond}
	if unknown {
		c.joinNewMember(g, j, ms)
	} else {
		c.joinExistingMember(g, j, ms)
	}
}

type joinArgs struct {
	req                  *kmsg.JoinGroupRequest
	rebalance            int32
	clientID, clientHost string
	respond              func(*kmsg.JoinGroupResponse)
}

func (j *joinArgs) fail(code int16, memberID string) {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Version = j.req.Version
	resp.ErrorCode = code
	resp.MemberID = memberID
	j.respond(resp)
}

func (c *Coordinator) acceptJoiningMember(g *classicGroup, memberID string) bool {
	switch g.state {
	case statePreparingRebalance:
		m := g.members[memberID]
		return m != nil && m.awaitingJoin != nil || g.awaitingJoins < c.cfg.MaxSize
	case stateCompletingRebalance, stateStable:
		_, ok := g.members[memberID]
		return ok || len(g.members) < c.cfg.MaxSize
	default:
		return true
	}
}

func (c *Coordinator) joinNewMember(g *classicGroup, j joinArgs, now int64) {
	req := j.req
	if !g.supportsProtocols(req.ProtocolType, req.Protocols) {
		j.fail(kerr.InconsistentGroupProtocol.Code, "")
		return
	}
	prefix := j.clientID
	if req.InstanceID != nil {
		prefix = *req.InstanceID
	}
	newID := prefix + "-" + c.newID()
	if req.InstanceID != nil {
		if old, ok := g.static[*req.InstanceID]; ok {
			c.updateStaticMember(g, j, old, newID, now)
			return
		}
		c.addMember(g, j, newID, now)
		return
	}
	if req.Version >= 4 {
		// KIP-394: the member must rejoin with the id it is given, so a
		// client that loses the answer leaves no ghost member behind.
		g.pendingJoin[newID] = struct{}{}
		c.scheduleClassicHeartbeat(g.id, newID, now+int64(req.SessionTimeoutMillis))
		j.fail(kerr.MemberIDRequired.Code, newID)
		return
	}
	c.addMember(g, j, newID, now)
}

func (c *Coordinator) joinExistingMember(g *classicGroup, j joinArgs, now int64) {
	req := j.req
	memberID := req.MemberID
	if !g.supportsProtocols(req.ProtocolType, req.Protocols) {
		j.fail(kerr.InconsistentGroupProtocol.Code, memberID)
		return
	}
	if _, ok := g.pendingJoin[memberID]; ok {
		if req.InstanceID != nil {
			// A pending member is always dynamic; a static id here is a
			// client bug.
			j.fail(kerr.UnknownMemberID.Code, memberID)
			return
		}
		c.addMember(g, j, memberID, now)
		return
	}
	if c.adopts(g.id, g, now, memberID, req.InstanceID) {
		// A member from before the shard's takeover (AdoptMembers).
		c.log.Debug("group: a member from before the takeover joins as it is", "group", g.id, "member", memberID)
		c.addMember(g, j, memberID, now)
		return
	}
	if err := g.validateMember(memberID, req.InstanceID); err != nil {
		j.fail(err.Code, memberID)
		return
	}
	m := g.members[memberID]
	switch g.state {
	case statePreparingRebalance:
		g.updateMember(m, req.Protocols, j.rebalance, req.SessionTimeoutMillis, req.Version, j.respond)
		c.maybePrepareRebalanceOrCompleteJoin(g, now, "member "+memberID+" rejoined")
	case stateCompletingRebalance:
		if m.matches(req.Protocols) {
			// The member lost the join answer: send it again.
			var members []kmsg.JoinGroupResponseMember
			if g.isLeader(memberID) {
				members = g.joinMembers()
			}
			resp := g.joinResponse(memberID, members)
			resp.Version = req.Version
			j.respond(resp)
			return
		}
		g.updateMember(m, req.Protocols, j.rebalance, req.SessionTimeoutMillis, req.Version, j.respond)
		c.maybePrepareRebalanceOrCompleteJoin(g, now, "member "+memberID+" rejoined with other protocols")
	case stateStable:
		if g.isLeader(memberID) || !m.matches(req.Protocols) {
			// A leader's JoinGroup starts a rebalance (it may have seen
			// topic metadata change); so does changed member metadata.
			reason := "member " + memberID + " rejoined with other protocols"
			if m.matches(req.Protocols) {
				reason = "the leader " + memberID + " rejoined"
			}
			g.updateMember(m, req.Protocols, j.rebalance, req.SessionTimeoutMillis, req.Version, j.respond)
			c.maybePrepareRebalanceOrCompleteJoin(g, now, reason)
			return
		}
		resp := g.joinResponse(memberID, nil)
		resp.Version = req.Version
		j.respond(resp)
	default:
		j.fail(kerr.UnknownMemberID.Code, memberID)
	}
}

func (c *Coordinator) addMember(g *classicGroup, j joinArgs, memberID string, now int64) {
	req := j.req
	m := &classicMember{
		id:               memberID,
		instanceID:       req.InstanceID,
		clientID:         j.clientID,
		clientHost:       j.clientHost,
		rebalanceTimeout: j.rebalance,
		sessionTimeout:   req.SessionTimeoutMillis,
		protocolType:     req.ProtocolType,
		protocols:        req.Protocols,
		isNew:            true,
		joinVersion:      req.Version,
		awaitingJoin:     j.respond,
	}
	if g.is(statePreparingRebalance) && g.prevState == stateEmpty {
		g.newMemberAdded = true
	}
	g.add(m)
	delete(c.emptySince, g.id)
	// A new member cannot heartbeat (it has no id yet) and a parked join
	// hides a disconnect: time the join out so defunct members go.
	c.scheduleClassicHeartbeat(g.id, memberID, now+c.cfg.NewMemberJoinTimeout.Milliseconds())
	c.maybePrepareRebalanceOrCompleteJoin(g, now, "member "+memberID+" joined")
}

// updateStaticMember replaces a static member's old member id by a new one
// (the instance restarted). In Stable, if the group's protocol would not
// change, the member takes the old one's place and assignment without a
// rebalance (KIP-345); otherwise a rebalance starts.
func (c *Coordinator) updateStaticMember(g *classicGroup, j joinArgs, oldID, newID string, now int64) {
	req := j.req
	oldLeader := g.leader
	old := g.members[oldID]
	// Fence the old instance's parked calls.
	if old.awaitingJoin != nil {
		g.completeJoin(old, &kmsg.JoinGroupResponse{MemberID: oldID, ErrorCode: kerr.FencedInstanceID.Code})
	}
	g.completeSync(old, &kmsg.SyncGroupResponse{ErrorCode: kerr.FencedInstanceID.Code})
	c.timers.cancel(timerKey{timerClassicHeartbeat, g.id, oldID})
	m := &classicMember{
		id: newID, instanceID: old.instanceID, clientID: old.clientID, clientHost: old.clientHost,
		rebalanceTimeout: old.rebalanceTimeout, sessionTimeout: old.sessionTimeout,
		protocolType: old.protocolType, protocols: old.protocols, assignment: old.assignment,
	}
	delete(g.members, oldID)
	g.members[newID] = m
	if i := slices.Index(g.order, oldID); i >= 0 {
		g.order[i] = newID
	}
	if g.leader == oldID {
		g.leader = newID
	}
	g.static[*req.InstanceID] = newID
	c.scheduleClassicHeartbeat(g.id, newID, now+int64(m.sessionTimeout))
	g.updateMember(m, req.Protocols, j.rebalance, req.SessionTimeoutMillis, req.Version, j.respond)

	switch g.state {
	case stateStable:
		if g.selectProtocol() == g.protocol {
			isLeader := g.isLeader(newID)
			var resp *kmsg.JoinGroupResponse
			if req.Version >= 9 {
				// KIP-814: the leader learns it leads but need not assign.
				var members []kmsg.JoinGroupResponseMember
				if isLeader {
					members = g.joinMembers()
				}
				resp = g.joinResponse(newID, members)
				resp.SkipAssignment = isLeader
			} else {
				// Older leaders would assign again; answering with the
				// old leader id makes the member a follower that fetches
				// its assignment with SyncGroup.
				resp = g.joinResponse(newID, nil)
				resp.LeaderID = oldLeader
			}
			g.completeJoin(m, resp)
			return
		}
		c.maybePrepareRebalanceOrCompleteJoin(g, now, "static member "+newID+" rejoined with other protocols")
	case stateCompletingRebalance:
		// The leader may already be assigning for the old member id.
		c.prepareRebalance(g, now, "static member "+newID+" replaced "+oldID+" while the leader assigns")
	default:
		c.maybeCompleteJoinPhase(g, now)
	}
}

// maybePrepareRebalanceOrCompleteJoin begins a rebalance for reason
// (logged) if the group's state allows one, else ends the join phase if
// every member rejoined.
func (c *Coordinator) maybePrepareRebalanceOrCompleteJoin(g *classicGroup, now int64, reason string) {
	if g.canRebalance() {
		c.prepareRebalance(g, now, reason)
		return
	}
	c.maybeCompleteJoinPhase(g, now)
}

func (c *Coordinator) maybeCompleteJoinPhase(g *classicGroup, now int64) {
	if !g.is(statePreparingRebalance) || g.prevState == stateEmpty || !g.hasAllMembersJoined() {
		return
	}
	c.completeJoin(g, now)
}

func (c *Coordinator) prepareRebalance(g *classicGroup, now int64, reason string) {
	if g.is(stateCompletingRebalance) {
		// Members waiting in SyncGroup rejoin.
		for _, id := range g.order {
			m := g.members[id]
			m.assignment = nil
			c.propagateSync(g, m, kerr.RebalanceInProgress.Code, now)
		}
	}
	clear(g.pendingSync)
	c.timers.cancel(timerKey{timerClassicSync, g.id, ""})
	initial := g.is(stateEmpty)
	g.transition(statePreparingRebalance, now)
	if c.debug() {
		c.log.Debug("group: rebalance begun", "group", g.id, "from", g.prevState.String(), "generation", g.generation,
			"members", memberIDs(g), "reason", reason, "rebalance_timeout_ms", g.rebalanceTimeoutMs())
	}
	if initial {
		delay := c.cfg.InitialRebalanceDelay.Milliseconds()
		remaining := max(int64(g.rebalanceTimeoutMs())-delay, 0)
		c.scheduleInitialRebalance(g.id, now, delay, remaining)
		return
	}
	if g.hasAllMembersJoined() {
		c.completeJoin(g, now)
		return
	}
	c.scheduleJoinTimeout(g.id, now+int64(g.rebalanceTimeoutMs()))
}

func (c *Coordinator) scheduleInitialRebalance(group string, now, delay, remaining int64) {
	c.timers.schedule(timerKey{timerClassicJoin, group, ""}, now+delay, func(now int64) {
		g := c.classic[group]
		if g == nil {
			return
		}
		if g.newMemberAdded && remaining != 0 {
			g.newMemberAdded = false
			next := min(c.cfg.InitialRebalanceDelay.Milliseconds(), remaining)
			c.scheduleInitialRebalance(group, now, next, max(remaining-delay, 0))
			return
		}
		c.completeJoin(g, now)
	})
}

func (c *Coordinator) scheduleJoinTimeout(group string, at int64) {
	c.timers.schedule(timerKey{timerClassicJoin, group, ""}, at, func(now int64) {
		if g := c.classic[group]; g != nil {
			c.completeJoin(g, now)
		}
	})
}

// completeJoin ends the join phase: dynamic members that did not rejoin
// are removed, the generation advances and every joined member gets its
// answer (the leader with the member list).
func (c *Coordinator) completeJoin(g *classicGroup, now int64) {
	c.timers.cancel(timerKey{timerClassicJoin, g.id, ""})
	var removed []string
	for _, id := range slices.Clone(g.order) {
		m := g.members[id]
		if m.awaitingJoin == nil && m.instanceID == nil {
			g.remove(id)
			c.timers.cancel(timerKey{timerClassicHeartbeat, g.id, id})
			removed = append(removed, id)
		}
	}
	if g.is(stateDead) {
		return
	}
	if !g.maybeElectNewJoinedLeader() && len(g.members) > 0 {
		// Only static members that did not rejoin are left: wait another
		// rebalance timeout for them (their sessions expire meanwhile).
		if c.debug() {
			c.log.Debug("group: join phase extended: only static members that did not rejoin are left", "group", g.id,
				"members", memberIDs(g), "removed", removed)
		}
		c.scheduleJoinTimeout(g.id, now+int64(g.rebalanceTimeoutMs()))
		return
	}
	g.initNextGeneration(now)
	if c.debug() {
		c.log.Debug("group: join phase ended", "group", g.id, "generation", g.generation, "state", g.state.String(),
			"members", memberIDs(g), "leader", g.leader, "protocol", g.protocol, "removed", removed)
	}
	if g.is(stateEmpty) {
		c.markEmpty(g.id, now)
		return
	}
	for _, id := range g.order {
		m := g.members[id]
		var members []kmsg.JoinGroupResponseMember
		if g.isLeader(id) {
			members = g.joinMembers()
		}
		g.completeJoin(m, g.joinResponse(id, members))
		c.scheduleClassicHeartbeat(g.id, id, now+int64(m.sessionTimeout))
		m.isNew = false
		g.pendingSync[id] = struct{}{}
	}
	gen := g.generation
	c.timers.schedule(timerKey{timerClassicSync, g.id, ""}, now+int64(g.rebalanceTimeoutMs()), func(now int64) {
		c.expirePendingSync(g.id, gen, now)
	})
}

func (c *Coordinator) expirePendingSync(group string, generation int32, now int64) {
	g := c.classic[group]
	if g == nil || g.generation != generation {
		return
	}
	if !g.is(stateCompletingRebalance) && !g.is(stateStable) || len(g.pendingSync) == 0 {
		return
	}
	var removed []string
	for _, id := range slices.Clone(g.order) {
		if _, ok := g.pendingSync[id]; ok {
			g.remove(id)
			c.timers.cancel(timerKey{timerClassicHeartbeat, g.id, id})
			removed = append(removed, id)
		}
	}
	c.prepareRebalance(g, now, fmt.Sprintf("members %v did not sync within the rebalance timeout", removed))
}

func (c *Coordinator) scheduleClassicHeartbeat(group, member string, at int64) {
	c.timers.schedule(timerKey{timerClassicHeartbeat, group, member}, at, func(now int64) {
		c.expireClassicHeartbeat(group, member, now)
	})
}

func (c *Coordinator) expireClassicHeartbeat(group, memberID string, now int64) {
	g := c.classic[group]
	if g == nil || g.is(stateDead) {
		return
	}
	if _, ok := g.pendingJoin[memberID]; ok {
		c.log.Debug("group: a member given its id did not join within its session timeout", "group", g.id, "member", memberID)
		g.remove(memberID)
		if g.is(statePreparingRebalance) && g.hasAllMembersJoined() {
			c.completeJoin(g, now)
		}
		return
	}
	m := g.members[memberID]
	if m == nil {
		return
	}
	// A member waiting in JoinGroup or SyncGroup satisfies its heartbeat,
	// unless it is new.
	if !m.isNew && (m.awaitingJoin != nil || m.awaitingSync != nil) {
		return
	}
	reason := "member " + m.id + "'s session expired"
	if m.isNew {
		reason = "new member " + m.id + "'s join timed out"
	}
	c.log.Debug("group: member removed", "group", g.id, "member", m.id, "state", g.state.String(), "generation", g.generation,
		"reason", reason)
	c.removeClassicMember(g, m, now, reason)
}

// removeClassicMember drops a member (session expired or left: reason,
// logged) and moves the group on.
func (c *Coordinator) removeClassicMember(g *classicGroup, m *classicMember, now int64, reason string) {
	g.completeJoin(m, &kmsg.JoinGroupResponse{ErrorCode: kerr.UnknownMemberID.Code})
	g.remove(m.id)
	c.timers.cancel(timerKey{timerClassicHeartbeat, g.id, m.id})
	switch g.state {
	case stateStable, stateCompletingRebalance:
		c.maybePrepareRebalanceOrCompleteJoin(g, now, reason)
	case statePreparingRebalance:
		if g.hasAllMembersJoined() {
			c.completeJoin(g, now)
		}
	}
}

// ---- SyncGroup ----

// SyncGroup handles a SyncGroup request (v0–v5). respond is called with the
// answer: at once for a follower in Stable or an error; for members of a
// group completing a rebalance, once the leader's assignment arrives (or
// with REBALANCE_IN_PROGRESS when a new rebalance starts first).
//
// Errors: INVALID_GROUP_ID, UNKNOWN_MEMBER_ID (also for an unknown or
// empty group), FENCED_INSTANCE_ID, ILLEGAL_GENERATION,
// INCONSISTENT_GROUP_PROTOCOL (v5+: protocol type or name missing or
// different),
// REBALANCE_IN_PROGRESS (also for a member AdoptMembers takes).
func (c *Coordinator) SyncGroup(now time.Time, req *kmsg.SyncGroupRequest, respond func(*kmsg.SyncGroupResponse)) {
	ms := now.UnixMilli()
	fail := func(code int16) {
		resp := kmsg.NewPtrSyncGroupResponse()
		resp.Version = req.Version
		resp.ErrorCode = code
		respond(resp)
	}
	if req.Version >= 5 && (req.ProtocolType == nil || req.Protocol == nil) {
		// From v5 both are mandatory (Kafka checks this before the group).
		fail(kerr.InconsistentGroupProtocol.Code)
		return
	}
	if req.Group == "" {
		fail(kerr.InvalidGroupID.Code)
		return
	}
	g := c.classic[req.Group]
	if c.adopts(req.Group, g, ms, req.MemberID, req.InstanceID) {
		fail(kerr.RebalanceInProgress.Code) // rejoin (AdoptMembers)
		return
	}
	if g == nil || g.is(stateEmpty) {
		fail(kerr.UnknownMemberID.Code)
		return
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		fail(err.Code)
		return
	}
	if req.Generation != g.generation {
		fail(kerr.IllegalGeneration.Code)
		return
	}
	if req.ProtocolType != nil && *req.ProtocolType != g.protocolType ||
		req.Protocol != nil && *req.Protocol != g.protocol {
		fail(kerr.InconsistentGroupProtocol.Code)
		return
	}
	m := g.members[req.MemberID]
	switch g.state {
	case statePreparingRebalance:
		fail(kerr.RebalanceInProgress.Code)
	case stateCompletingRebalance:
		m.parkSync(req.Version, respond)
		c.removePendingSync(g, req.MemberID)
		if !g.isLeader(req.MemberID) {
			return
		}
		assignment := make(map[string][]byte, len(req.GroupAssignment))
		for _, a := range req.GroupAssignment {
			assignment[a.MemberID] = a.MemberAssignment
		}
		// Membership is soft state: nothing is written, so the group is
		// Stable at once (Kafka waits for its GroupMetadata record).
		for _, id := range g.order {
			g.members[id].assignment = assignment[id]
		}
		for _, id := range g.order {
			c.propagateSync(g, g.members[id], 0, ms)
		}
		g.transition(stateStable, ms)
		if c.debug() {
			c.log.Debug("group: stable", "group", g.id, "generation", g.generation, "members", memberIDs(g))
		}
	case stateStable:
		c.removePendingSync(g, req.MemberID)
		resp := kmsg.NewPtrSyncGroupResponse()
		resp.Version = req.Version
		resp.ProtocolType = strPtr(g.protocolType)
		resp.Protocol = strPtr(g.protocol)
		resp.MemberAssignment = orEmpty(m.assignment)
		respond(resp)
	}
}

func orEmpty(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func (c *Coordinator) propagateSync(g *classicGroup, m *classicMember, code int16, now int64) {
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.ErrorCode = code
	resp.MemberAssignment = orEmpty(m.assignment)
	if code == 0 {
		resp.ProtocolType = strPtr(g.protocolType)
		resp.Protocol = strPtr(g.protocol)
	}
	if g.completeSync(m, resp) {
		// The session restarts when the answer goes out.
		c.scheduleClassicHeartbeat(g.id, m.id, now+int64(m.sessionTimeout))
	}
}

func (c *Coordinator) removePendingSync(g *classicGroup, memberID string) {
	delete(g.pendingSync, memberID)
	if len(g.pendingSync) == 0 || g.is(statePreparingRebalance) || g.is(stateEmpty) {
		c.timers.cancel(timerKey{timerClassicSync, g.id, ""})
	}
}

// ---- Heartbeat ----

// Heartbeat handles a classic Heartbeat request (v0–v4): it keeps the
// member's session and tells it whether to rejoin.
//
// Errors: INVALID_GROUP_ID, UNKNOWN_MEMBER_ID (also for an unknown group,
// and for an Empty one), FENCED_INSTANCE_ID, ILLEGAL_GENERATION,
// REBALANCE_IN_PROGRESS (rejoin; also for a member AdoptMembers takes).
func (c *Coordinator) Heartbeat(now time.Time, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	ms := now.UnixMilli()
	resp := kmsg.NewPtrHeartbeatResponse()
	resp.Version = req.Version
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	g := c.classic[req.Group]
	if c.adopts(req.Group, g, ms, req.MemberID, req.InstanceID) {
		resp.ErrorCode = kerr.RebalanceInProgress.Code // rejoin (AdoptMembers)
		return resp
	}
	if g == nil {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		resp.ErrorCode = err.Code
		return resp
	}
	if req.Generation != g.generation {
		resp.ErrorCode = kerr.IllegalGeneration.Code
		return resp
	}
	m := g.members[req.MemberID]
	switch g.state {
	case stateEmpty:
		resp.ErrorCode = kerr.UnknownMemberID.Code
	case statePreparingRebalance:
		c.scheduleClassicHeartbeat(g.id, m.id, ms+int64(m.sessionTimeout))
		resp.ErrorCode = kerr.RebalanceInProgress.Code
	default:
		c.scheduleClassicHeartbeat(g.id, m.id, ms+int64(m.sessionTimeout))
	}
	return resp
}

// ---- LeaveGroup ----

// LeaveGroup handles a LeaveGroup request: v0–v2 name one member; v3+ a
// batch of members (by member id, or by instance id with member id "").
// Before v3 a member's error is the answer's error.
//
// Errors: INVALID_GROUP_ID, UNKNOWN_MEMBER_ID (per member; for every
// member of an unknown group), FENCED_INSTANCE_ID.
func (c *Coordinator) LeaveGroup(now time.Time, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	ms := now.UnixMilli()
	resp := kmsg.NewPtrLeaveGroupResponse()
	resp.Version = req.Version
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	members := req.Members
	if req.Version < 3 {
		members = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	if cg := c.consumer[req.Group]; cg != nil {
		// Classic members are not hosted by consumer groups here: none of
		// these can be a member.
		for _, lm := range members {
			resp.Members = append(resp.Members, kmsg.LeaveGroupResponseMember{MemberID: lm.MemberID, InstanceID: lm.InstanceID, ErrorCode: kerr.UnknownMemberID.Code})
		}
		return leaveFinish(resp)
	}
	g := c.classic[req.Group]
	if g == nil {
		for _, lm := range members {
			resp.Members = append(resp.Members, kmsg.LeaveGroupResponseMember{MemberID: lm.MemberID, InstanceID: lm.InstanceID, ErrorCode: kerr.UnknownMemberID.Code})
		}
		return leaveFinish(resp)
	}
	left := 0
	for _, lm := range members {
		out := kmsg.LeaveGroupResponseMember{MemberID: lm.MemberID, InstanceID: lm.InstanceID}
		switch {
		case lm.MemberID == "":
			if lm.InstanceID != nil && g.static[*lm.InstanceID] != "" {
				c.removeCurrentClassicMember(g, g.static[*lm.InstanceID])
				left++
			} else {
				out.ErrorCode = kerr.UnknownMemberID.Code
			}
		case isPending(g, lm.MemberID):
			g.remove(lm.MemberID)
			c.timers.cancel(timerKey{timerClassicHeartbeat, g.id, lm.MemberID})
			left++
		default:
			if err := g.validateMember(lm.MemberID, lm.InstanceID); err != nil {
				out.ErrorCode = err.Code
			} else {
				c.removeCurrentClassicMember(g, lm.MemberID)
				left++
			}
		}
		resp.Members = append(resp.Members, out)
	}
	if left > 0 {
		switch g.state {
		case stateStable, stateCompletingRebalance:
			c.maybePrepareRebalanceOrCompleteJoin(g, ms, fmt.Sprintf("%d member(s) left", left))
		case statePreparingRebalance:
			c.maybeCompleteJoinPhase(g, ms)
		}
	}
	return leaveFinish(resp)
}

func isPending(g *classicGroup, id string) bool {
	_, ok := g.pendingJoin[id]
	return ok
}

func (c *Coordinator) removeCurrentClassicMember(g *classicGroup, id string) {
	m := g.members[id]
	c.timers.cancel(timerKey{timerClassicHeartbeat, g.id, id})
	g.completeJoin(m, &kmsg.JoinGroupResponse{ErrorCode: kerr.UnknownMemberID.Code})
	g.remove(id)
}

// leaveFinish moves a single member's error to the top level for v0–v2.
func leaveFinish(resp *kmsg.LeaveGroupResponse) *kmsg.LeaveGroupResponse {
	if resp.Version < 3 {
		if len(resp.Members) == 1 {
			resp.ErrorCode = resp.Members[0].ErrorCode
		}
		resp.Members = nil
	}
	return resp
}

// maybeForgetClassic drops an empty classic group the coordinator no
// longer needs (no member, no pending member, no deadline).
func (c *Coordinator) maybeForgetClassic(g *classicGroup) {
	if len(g.members) == 0 && len(g.pendingJoin) == 0 && g.is(stateEmpty) && !c.offsets.HasGroup(g.id) && g.generation == 0 {
		delete(c.classic, g.id)
	}
}
