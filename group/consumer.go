package group

import (
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Member epochs of a leaving KIP-848 member (ConsumerGroupHeartbeat).
const (
	leaveEpoch       = -1 // the member leaves
	leaveStaticEpoch = -2 // a static member leaves for now and keeps its partitions
)

// consumerState is a KIP-848 group's state.
type consumerState uint8

const (
	cStateEmpty consumerState = iota
	cStateAssigning
	cStateReconciling
	cStateStable
)

func (s consumerState) String() string {
	return [...]string{"Empty", "Assigning", "Reconciling", "Stable"}[s]
}

// memberState is a KIP-848 member's reconciliation state.
type memberState uint8

const (
	mStable memberState = iota
	mUnrevoked
	mUnreleased
)

type consumerMember struct {
	id               string
	instanceID       *string
	rackID           *string
	clientID         string
	clientHost       string
	rebalanceTimeout int32
	names            []string // subscribed topic names, sorted
	regex            *string
	assignor         string
	epoch, prevEpoch int32
	state            memberState
	assigned         assignment
	revoking         assignment // partitions pending revocation
}

func (m *consumerMember) reconciledTo(epoch int32) bool {
	return m.state == mStable && m.epoch == epoch
}

// consumerGroup is one KIP-848 group, soft state.
type consumerGroup struct {
	id              string
	epoch           int32
	assignmentEpoch int32
	members         map[string]*consumerMember
	static          map[string]string // instance id → member id
	target          map[string]assignment
	// owners maps each owned partition (assigned or pending revocation) to
	// its member: a partition goes to its next owner only once free.
	owners map[[16]byte]map[int32]string
	// regexes holds each subscribed expression's matching topic names.
	regexes map[string]*resolvedRegex
	// partitions is the subscribed topics' ids and partition counts the
	// last assignment used, and catalogVersion the catalog it came from.
	partitions     map[string]topicMeta
	catalogVersion uint64
	catalogSeen    bool
	// assignedAt is when the assignor last ran for the group (ms); ran
	// tells whether it ever did (Config.AssignmentInterval).
	assignedAt int64
	ran        bool
	// byName counts the members subscribing to each topic by name, so
	// that the group's subscribed topics are known without visiting every
	// member; subscribed caches subscribedNames while subscribedOK.
	byName       map[string]int
	subscribed   []string
	subscribedOK bool
}

type topicMeta struct {
	id [16]byte
	n  int32
}

type resolvedRegex struct {
	re         *regexp.Regexp
	topics     []string
	version    uint64
	resolvedAt int64
}

func newConsumerGroup(id string) *consumerGroup {
	return &consumerGroup{
		id: id, members: map[string]*consumerMember{}, static: map[string]string{},
		target: map[string]assignment{}, owners: map[[16]byte]map[int32]string{},
		regexes: map[string]*resolvedRegex{}, partitions: map[string]topicMeta{},
		byName: map[string]int{},
	}
}

// setNames changes a member's subscription by name, keeping byName.
func (g *consumerGroup) setNames(m *consumerMember, names []string) {
	for _, n := range m.names {
		if g.byName[n]--; g.byName[n] <= 0 {
			delete(g.byName, n)
		}
	}
	for _, n := range names {
		g.byName[n]++
	}
	m.names = names
	g.invalidateSubscribed()
}

func (g *consumerGroup) state() consumerState {
	switch {
	case len(g.members) == 0:
		return cStateEmpty
	case g.epoch > g.assignmentEpoch:
		return cStateAssigning
	}
	for _, m := range g.members {
		if !m.reconciledTo(g.assignmentEpoch) {
			return cStateReconciling
		}
	}
	return cStateStable
}

// subscribedNames returns every topic the members subscribe to, by name or
// by expression, sorted (read-only: the slice is cached until a
// subscription changes, invalidateSubscribed).
func (g *consumerGroup) subscribedNames() []string {
	if g.subscribedOK {
		return g.subscribed
	}
	g.subscribed, g.subscribedOK = g.computeSubscribed(), true
	return g.subscribed
}

// invalidateSubscribed drops subscribedNames' cache: a member came or
// went, or a subscription or an expression's topics changed.
func (g *consumerGroup) invalidateSubscribed() { g.subscribed, g.subscribedOK = nil, false }

func (g *consumerGroup) computeSubscribed() []string {
	set := make(map[string]bool, len(g.byName))
	for n := range g.byName {
		set[n] = true
	}
	// g.regexes holds the expressions members use (dropUnusedRegexes).
	for _, r := range g.regexes {
		for _, n := range r.topics {
			set[n] = true
		}
	}
	return sortedKeys(set)
}

func (g *consumerGroup) isSubscribed(topic string) bool {
	for _, m := range g.members {
		if slices.Contains(m.names, topic) {
			return true
		}
		if m.regex != nil {
			if r := g.regexes[*m.regex]; r != nil && slices.Contains(r.topics, topic) {
				return true
			}
		}
	}
	return false
}

func (g *consumerGroup) setOwned(m *consumerMember, owned bool) {
	for _, a := range []assignment{m.assigned, m.revoking} {
		for t, ps := range a {
			byP := g.owners[t]
			if byP == nil {
				byP = map[int32]string{}
				g.owners[t] = byP
			}
			for _, p := range ps {
				if owned {
					byP[p] = m.id
				} else if byP[p] == m.id {
					delete(byP, p)
				}
			}
			if len(byP) == 0 {
				delete(g.owners, t)
			}
		}
	}
}

func (g *consumerGroup) ownedByOther(t [16]byte, p int32, self string) bool {
	o, ok := g.owners[t][p]
	return ok && o != self
}

// ConsumerGroupHeartbeat handles a KIP-848 ConsumerGroupHeartbeat request
// (v0–v1): joining (member epoch 0), heartbeating and reconciling, leaving
// (−1, or −2 for a static member that will come back). The answer carries
// the member's epoch and, when it changed or was asked for, its assignment
// — partitions being revoked are withheld from every other member until
// the owner stops reporting them. clientID and clientHost describe the
// caller for ConsumerGroupDescribe.
//
// Errors (Kafka's): INVALID_REQUEST (malformed: empty group or member id,
// a join without rebalance timeout, subscription or empty owned
// partitions), UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION,
// GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
// FENCED_INSTANCE_ID, UNRELEASED_INSTANCE_ID, and GROUP_ID_NOT_FOUND for a
// group that uses the classic protocol and has members (Kafka 4.x could
// upgrade it online; this coordinator does not). A heartbeat with an
// epoch above 0 for a group this coordinator does not know — its members
// are soft state, lost in a restart — answers UNKNOWN_MEMBER_ID so the
// member rejoins (Kafka, which persists membership, would answer
// GROUP_ID_NOT_FOUND, which clients treat as fatal).
func (c *Coordinator) ConsumerGroupHeartbeat(now time.Time, req *kmsg.ConsumerGroupHeartbeatRequest, clientID, clientHost string) *kmsg.ConsumerGroupHeartbeatResponse {
	ms := now.UnixMilli()
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.Version = req.Version
	fail := func(e *kerr.Error, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
		resp.ErrorCode = e.Code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp
	}
	if msg := c.invalidHeartbeat(req); msg != "" {
		return fail(kerr.InvalidRequest, msg)
	}
	if req.ServerAssignor != nil && !slices.Contains(c.cfg.Assignors, *req.ServerAssignor) {
		return fail(kerr.UnsupportedAssignor, "ServerAssignor "+*req.ServerAssignor+" is not supported.")
	}
	if c.topics == nil {
		return fail(kerr.UnknownServerError, "no topic catalog")
	}
	if req.MemberEpoch == leaveEpoch || req.MemberEpoch == leaveStaticEpoch {
		return c.consumerLeave(req, resp, ms)
	}
	var re *regexp.Regexp
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		var err error
		if re, err = regexp.Compile(*req.SubscribedTopicRegex); err != nil {
			return fail(kerr.InvalidRegularExpression, err.Error())
		}
	}
	joining := req.MemberEpoch == 0
	g := c.consumer[req.Group]
	if g == nil {
		if cg := c.classic[req.Group]; cg != nil {
			if !cg.is(stateEmpty) {
				return fail(kerr.GroupIDNotFound, "Group "+req.Group+" is not a consumer group.")
			}
			if joining {
				c.forgetGroup(req.Group)
			}
		}
		if !joining {
			return fail(kerr.UnknownMemberID, "Member "+req.MemberID+" is not a member of group "+req.Group+".")
		}
		g = newConsumerGroup(req.Group)
	}
	memberID := req.MemberID
	if memberID == "" {
		memberID = c.newID()
	}
	if _, known := g.members[memberID]; !known && len(g.members) >= c.cfg.ConsumerMaxSize {
		return fail(kerr.GroupMaxSizeReached, "")
	}
	m, err := c.consumerMemberFor(g, req, memberID, joining, ms)
	if err != nil {
		return fail(err, "")
	}
	if c.consumer[g.id] == nil {
		c.consumer[g.id] = g
		delete(c.emptySince, g.id)
	}

	before := cloneMember(m)
	m.clientID, m.clientHost = clientID, clientHost
	if req.RackID != nil {
		m.rackID = req.RackID
	}
	if req.RebalanceTimeoutMillis != -1 {
		m.rebalanceTimeout = req.RebalanceTimeoutMillis
	}
	if req.ServerAssignor != nil {
		m.assignor = *req.ServerAssignor
	}
	if req.InstanceID != nil {
		m.instanceID = req.InstanceID
	}
	bump := g.epoch == 0
	// subscriptionChanged is Kafka's hasSubscriptionChanged: the member's
	// own subscription changed in this request (reconcile revokes what it
	// no longer subscribes to, ahead of the next assignor run).
	subscriptionChanged := false
	if req.SubscribedTopicNames != nil {
		names := slices.Sorted(slices.Values(req.SubscribedTopicNames))
		names = slices.Compact(names)
		if !slices.Equal(names, m.names) {
			g.setNames(m, names)
			bump, subscriptionChanged = true, true
		}
	}
	if req.SubscribedTopicRegex != nil {
		var newRegex *string
		if *req.SubscribedTopicRegex != "" {
			newRegex = req.SubscribedTopicRegex
		}
		if !equalStrPtr(newRegex, m.regex) {
			m.regex = newRegex
			if newRegex != nil && g.regexes[*newRegex] == nil {
				g.regexes[*newRegex] = &resolvedRegex{re: re}
			}
			c.dropUnusedRegexes(g)
			g.invalidateSubscribed()
			bump, subscriptionChanged = true, true
		}
	}
	if c.refreshMetadata(g, ms) {
		bump = true
	}
	if bump {
		g.epoch++
	}
	c.maybeComputeTarget(g, ms)
	c.reconcile(g, m, req.Topics, subscriptionChanged, ms)
	c.timers.schedule(timerKey{timerConsumerSession, g.id, m.id}, ms+c.cfg.ConsumerSessionTimeout.Milliseconds(), func(now int64) {
		c.fenceConsumerMember(g.id, m.id, now)
	})

	resp.MemberID = &m.id
	resp.MemberEpoch = m.epoch
	resp.HeartbeatIntervalMillis = int32(c.cfg.ConsumerHeartbeatInterval.Milliseconds())
	full := req.RebalanceTimeoutMillis != -1 && (req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.Topics != nil
	if joining || full || !before.assigned.equal(m.assigned) {
		a := &kmsg.ConsumerGroupHeartbeatResponseAssignment{}
		for _, t := range sortedTopicIDs(m.assigned) {
			a.Topics = append(a.Topics, kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{TopicID: t, Partitions: slices.Clone(m.assigned[t])})
		}
		resp.Assignment = a
	}
	return resp
}

func equalStrPtr(a, b *string) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

func cloneMember(m *consumerMember) consumerMember {
	cp := *m
	cp.assigned = cloneAssignment(m.assigned)
	return cp
}

func cloneAssignment(a assignment) assignment {
	out := make(assignment, len(a))
	for t, ps := range a {
		out[t] = slices.Clone(ps)
	}
	return out
}

// invalidHeartbeat is Kafka's request validation; "" when valid.
func (c *Coordinator) invalidHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest) string {
	if (req.Version >= 1 || req.MemberEpoch > 0 || req.MemberEpoch == leaveEpoch) && req.MemberID == "" {
		return "MemberId can't be empty."
	}
	if req.Group == "" {
		return "GroupId can't be empty."
	}
	if req.InstanceID != nil && *req.InstanceID == "" {
		return "InstanceId can't be empty."
	}
	if req.RackID != nil && *req.RackID == "" {
		return "RackId can't be empty."
	}
	switch {
	case req.MemberEpoch == 0:
		if req.RebalanceTimeoutMillis == -1 {
			return "RebalanceTimeoutMs must be provided in first request."
		}
		if req.Topics == nil || len(req.Topics) > 0 {
			return "TopicPartitions must be empty when (re-)joining."
		}
		if req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil {
			return "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
		}
	case req.MemberEpoch == leaveStaticEpoch:
		if req.InstanceID == nil {
			return "InstanceId can't be null."
		}
	case req.MemberEpoch < leaveStaticEpoch:
		return "MemberEpoch is invalid."
	}
	return ""
}

// consumerMemberFor finds (or, joining, creates or replaces) the member.
func (c *Coordinator) consumerMemberFor(g *consumerGroup, req *kmsg.ConsumerGroupHeartbeatRequest, memberID string, joining bool, now int64) (*consumerMember, *kerr.Error) {
	if req.InstanceID == nil {
		m := g.members[memberID]
		if m == nil {
			if !joining {
				return nil, kerr.UnknownMemberID
			}
			m = &consumerMember{id: memberID, assigned: assignment{}, revoking: assignment{}}
			g.members[memberID] = m
			return m, nil
		}
		if err := checkEpoch(m, req.MemberEpoch, req.Topics); err != nil {
			return nil, err
		}
		return m, nil
	}
	inst := *req.InstanceID
	oldID, ok := g.static[inst]
	old := g.members[oldID]
	if !joining {
		if !ok {
			return nil, kerr.UnknownMemberID
		}
		if oldID != memberID {
			return nil, kerr.FencedInstanceID
		}
		if err := checkEpoch(old, req.MemberEpoch, req.Topics); err != nil {
			return nil, err
		}
		return old, nil
	}
	if !ok {
		m := &consumerMember{id: memberID, instanceID: req.InstanceID, assigned: assignment{}, revoking: assignment{}}
		g.members[memberID] = m
		g.static[inst] = memberID
		return m, nil
	}
	if old.epoch != leaveStaticEpoch {
		return nil, kerr.UnreleasedInstanceID
	}
	// The instance is back (KIP-345 for KIP-848): the new member id takes
	// the old one's place, target and partitions, so no rebalance.
	g.setOwned(old, false)
	c.timers.cancel(timerKey{timerConsumerSession, g.id, oldID})
	c.timers.cancel(timerKey{timerConsumerRebalance, g.id, oldID})
	delete(g.members, oldID)
	m := &consumerMember{
		id: memberID, instanceID: old.instanceID, rackID: old.rackID, rebalanceTimeout: old.rebalanceTimeout,
		names: old.names, regex: old.regex, assignor: old.assignor, state: old.state,
		assigned: old.assigned, revoking: assignment{},
	}
	g.members[memberID] = m
	g.invalidateSubscribed()
	g.static[inst] = memberID
	if t, ok := g.target[oldID]; ok {
		delete(g.target, oldID)
		g.target[memberID] = t
	}
	g.setOwned(m, true)
	return m, nil
}

// checkEpoch is Kafka's member epoch rule: an epoch ahead is fenced; one
// behind is accepted only if it is the previous epoch and the member owns
// nothing beyond its assignment (the answer bumping it was lost).
func checkEpoch(m *consumerMember, epoch int32, owned []kmsg.ConsumerGroupHeartbeatRequestTopic) *kerr.Error {
	if epoch > m.epoch {
		return kerr.FencedMemberEpoch
	}
	if epoch < m.epoch {
		if epoch != m.prevEpoch || !ownedSubset(owned, m.assigned) {
			return kerr.FencedMemberEpoch
		}
	}
	return nil
}

func ownedSubset(owned []kmsg.ConsumerGroupHeartbeatRequestTopic, a assignment) bool {
	for _, t := range owned {
		for _, p := range t.Partitions {
			if !a.has(t.TopicID, p) {
				return false
			}
		}
	}
	return true
}

func (c *Coordinator) dropUnusedRegexes(g *consumerGroup) {
	used := map[string]bool{}
	for _, m := range g.members {
		if m.regex != nil {
			used[*m.regex] = true
		}
	}
	for r := range g.regexes {
		if !used[r] {
			delete(g.regexes, r)
		}
	}
}

// refreshMetadata resolves the group's expressions and partition counts
// again when the catalog changed (or an expression is due for refresh)
// and reports whether what the assignment depends on changed.
func (c *Coordinator) refreshMetadata(g *consumerGroup, now int64) bool {
	version := c.topics.Version()
	changed := false
	var names []string
	for _, r := range g.regexes {
		if r.version == version && r.re != nil && r.resolvedAt != 0 && now-r.resolvedAt < c.cfg.RegexRefreshInterval.Milliseconds() {
			continue
		}
		if names == nil {
			names = c.topics.Names()
		}
		var matched []string
		for _, n := range names {
			if r.re.MatchString(n) {
				matched = append(matched, n)
			}
		}
		slices.Sort(matched)
		if !slices.Equal(matched, r.topics) {
			r.topics = matched
			g.invalidateSubscribed()
			changed = true
		}
		r.version, r.resolvedAt = version, now
	}
	subscribed := g.subscribedNames()
	meta := make(map[string]topicMeta, len(subscribed))
	for _, n := range subscribed {
		if id, parts, ok := c.topics.Topic(n); ok {
			meta[n] = topicMeta{id, parts}
		}
	}
	if len(meta) != len(g.partitions) {
		changed = true
	} else {
		for n, tm := range meta {
			if g.partitions[n] != tm {
				changed = true
				break
			}
		}
	}
	g.partitions = meta
	g.catalogVersion, g.catalogSeen = version, true
	return changed
}

// maybeComputeTarget runs the group's assignor for a group epoch the
// target assignment is behind, unless it ran less than AssignmentInterval
// ago: then the run is scheduled for when the interval has passed, and
// members reconcile toward the current target meanwhile (the group is
// Assigning). Kafka 4.4 batches assignor runs the same way (KIP-1263).
func (c *Coordinator) maybeComputeTarget(g *consumerGroup, now int64) {
	if g.epoch <= g.assignmentEpoch {
		return
	}
	if every := c.cfg.AssignmentInterval.Milliseconds(); g.ran && every > 0 && now-g.assignedAt < every {
		c.timers.schedule(timerKey{timerConsumerAssign, g.id, ""}, g.assignedAt+every, func(now int64) {
			if c.consumer[g.id] == g {
				c.maybeComputeTarget(g, now)
			}
		})
		return
	}
	c.timers.cancel(timerKey{timerConsumerAssign, g.id, ""})
	c.computeTarget(g)
	g.assignedAt, g.ran = now, true
}

// computeTarget runs the group's assignor for the group epoch.
func (c *Coordinator) computeTarget(g *consumerGroup) {
	ids := sortedKeys(g.members)
	spec := &assignSpec{partitions: map[[16]byte]int32{}}
	votes := map[string]int{}
	for _, id := range ids {
		m := g.members[id]
		if m.assignor != "" {
			votes[m.assignor]++
		}
		var topics [][16]byte
		add := func(n string) {
			if tm, ok := g.partitions[n]; ok {
				topics = append(topics, tm.id)
				spec.partitions[tm.id] = tm.n
			}
		}
		for _, n := range m.names {
			add(n)
		}
		if m.regex != nil {
			if r := g.regexes[*m.regex]; r != nil {
				for _, n := range r.topics {
					add(n)
				}
			}
		}
		slices.SortFunc(topics, func(a, b [16]byte) int { return compareID(a, b) })
		topics = slices.Compact(topics)
		spec.members = append(spec.members, assignMember{id: id, instanceID: m.instanceID, topics: topics, current: g.target[id]})
	}
	// The assignor most members ask for, else the first configured (ties
	// to the one configured first).
	name := c.cfg.Assignors[0]
	best := 0
	for _, a := range c.cfg.Assignors {
		if votes[a] > best {
			name, best = a, votes[a]
		}
	}
	result := runAssignor(name, spec)
	target := make(map[string]assignment, len(ids))
	for i, id := range ids {
		target[id] = result[i]
	}
	g.target = target
	g.assignmentEpoch = g.epoch
}

func compareID(a, b [16]byte) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// reconcile moves the member toward its target (Kafka 4.4's
// CurrentAssignmentBuilder): partitions it must give up are revoked first
// (its epoch stays until it stops reporting them); partitions it gains are
// assigned only once no other member owns them. The target is taken only
// for the topics the member subscribes to now: with assignor runs batched
// (Config.AssignmentInterval) a target can be older than a subscription,
// so a member whose subscription changed gives up the topics it left at
// once (revokeUnsubscribed) and is never given one it does not subscribe
// to, as Kafka does since KIP-1263.
func (c *Coordinator) reconcile(g *consumerGroup, m *consumerMember, owned []kmsg.ConsumerGroupHeartbeatRequestTopic, subscriptionChanged bool, now int64) {
	target := g.assignmentEpoch
	switch m.state {
	case mStable:
		if m.epoch == target {
			if subscriptionChanged {
				c.revokeUnsubscribed(g, m, owned, now)
			}
			return
		}
		c.computeNext(g, m, m.epoch, owned, now)
	case mUnrevoked:
		if ownsAny(owned, m.revoking) {
			if subscriptionChanged {
				c.revokeUnsubscribed(g, m, owned, now)
			}
			return
		}
		// Revoked: reconciled from its own epoch, as Kafka 4.4 does — not
		// epoch+1, which, for a revocation a subscription change started at
		// the target's epoch, would be an epoch no assignor run produced
		// (TestConsumerSecondSubscriptionChangeWhileRevoking).
		c.computeNext(g, m, m.epoch, owned, now)
	case mUnreleased:
		c.computeNext(g, m, m.epoch, owned, now)
	}
}

// memberTopics returns the ids of the topics the member subscribes to now
// (by name or expression) that exist, as of the group's last catalog
// refresh (refreshMetadata).
func (g *consumerGroup) memberTopics(m *consumerMember) map[[16]byte]bool {
	out := make(map[[16]byte]bool, len(m.names))
	for _, n := range m.names {
		if tm, ok := g.partitions[n]; ok {
			out[tm.id] = true
		}
	}
	if m.regex != nil {
		if r := g.regexes[*m.regex]; r != nil {
			for _, n := range r.topics {
				if tm, ok := g.partitions[n]; ok {
					out[tm.id] = true
				}
			}
		}
	}
	return out
}

// revokeUnsubscribed is Kafka's updateCurrentAssignment: a member whose
// subscription changed while its epoch is the target's (or while it is
// still revoking) gives up the partitions of topics it no longer
// subscribes to without waiting for the next assignor run. If it still
// reports one of them it must revoke them first (Unrevoked, under its
// rebalance timeout); its epoch does not change.
func (c *Coordinator) revokeUnsubscribed(g *consumerGroup, m *consumerMember, owned []kmsg.ConsumerGroupHeartbeatRequestTopic, now int64) {
	subscribed := g.memberTopics(m)
	kept, revoke := assignment{}, cloneAssignment(m.revoking)
	moved := false
	for t, ps := range m.assigned {
		if subscribed[t] {
			kept[t] = ps
			continue
		}
		revoke[t] = append(revoke[t], ps...)
		slices.Sort(revoke[t])
		revoke[t] = slices.Compact(revoke[t])
		moved = true
	}
	if !moved {
		return
	}
	g.setOwned(m, false)
	m.assigned = kept
	m.setEpoch(m.epoch)
	if ownsAny(owned, revoke) {
		m.state, m.revoking = mUnrevoked, revoke
		c.scheduleRevocation(g, m, now)
	}
	g.setOwned(m, true)
}

// scheduleRevocation fences the member if it is still revoking at its
// current epoch when its rebalance timeout has passed.
func (c *Coordinator) scheduleRevocation(g *consumerGroup, m *consumerMember, now int64) {
	epoch := m.epoch
	c.timers.schedule(timerKey{timerConsumerRebalance, g.id, m.id}, now+int64(m.rebalanceTimeout), func(now int64) {
		if cg := c.consumer[g.id]; cg != nil {
			if cur := cg.members[m.id]; cur != nil && cur.epoch == epoch && cur.state == mUnrevoked {
				c.fenceConsumerMember(g.id, m.id, now)
			}
		}
	})
}

// ownsAny reports whether the member still reports a partition of a (an
// absent owned list counts as owning everything).
func ownsAny(owned []kmsg.ConsumerGroupHeartbeatRequestTopic, a assignment) bool {
	if owned == nil {
		return true
	}
	for _, t := range owned {
		for _, p := range t.Partitions {
			if a.has(t.TopicID, p) {
				return true
			}
		}
	}
	return false
}

func (c *Coordinator) computeNext(g *consumerGroup, m *consumerMember, epoch int32, owned []kmsg.ConsumerGroupHeartbeatRequestTopic, now int64) {
	tgt := g.target[m.id]
	subscribed := g.memberTopics(m)
	targetEpoch := g.assignmentEpoch
	kept, revoke, gain := assignment{}, assignment{}, assignment{}
	unreleased := false
	for t, ps := range m.assigned {
		for _, p := range ps {
			if subscribed[t] && tgt.has(t, p) {
				kept[t] = append(kept[t], p)
			} else {
				revoke[t] = append(revoke[t], p)
			}
		}
	}
	for t, ps := range tgt {
		if !subscribed[t] {
			continue
		}
		for _, p := range ps {
			if kept.has(t, p) {
				continue
			}
			if g.ownedByOther(t, p, m.id) {
				unreleased = true
				continue
			}
			gain[t] = append(gain[t], p)
		}
	}
	g.setOwned(m, false)
	if len(revoke) > 0 && ownsAny(owned, revoke) {
		m.state = mUnrevoked
		m.setEpoch(epoch)
		m.assigned, m.revoking = kept, revoke
		g.setOwned(m, true)
		c.scheduleRevocation(g, m, now)
		return
	}
	c.timers.cancel(timerKey{timerConsumerRebalance, g.id, m.id})
	for t, ps := range gain {
		kept[t] = append(kept[t], ps...)
		slices.Sort(kept[t])
	}
	m.assigned, m.revoking = kept, assignment{}
	m.setEpoch(targetEpoch)
	m.state = mStable
	if unreleased {
		m.state = mUnreleased
	}
	g.setOwned(m, true)
}

// setEpoch is Kafka's updateMemberEpoch: the previous epoch becomes the
// current one even when the epoch does not change.
func (m *consumerMember) setEpoch(e int32) { m.prevEpoch, m.epoch = m.epoch, e }

func (c *Coordinator) consumerLeave(req *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse, now int64) *kmsg.ConsumerGroupHeartbeatResponse {
	g := c.consumer[req.Group]
	resp.MemberID = &req.MemberID
	resp.MemberEpoch = req.MemberEpoch
	if g == nil {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp
	}
	var m *consumerMember
	if req.InstanceID == nil {
		m = g.members[req.MemberID]
		if m == nil {
			resp.ErrorCode = kerr.UnknownMemberID.Code
			return resp
		}
	} else {
		id, ok := g.static[*req.InstanceID]
		if !ok {
			resp.ErrorCode = kerr.UnknownMemberID.Code
			return resp
		}
		if id != req.MemberID {
			resp.ErrorCode = kerr.FencedInstanceID.Code
			return resp
		}
		m = g.members[id]
		if req.MemberEpoch == leaveStaticEpoch {
			// The instance keeps its place and partitions until its
			// session times out or it rejoins.
			g.setOwned(m, false)
			m.revoking = assignment{}
			m.epoch = leaveStaticEpoch
			g.setOwned(m, true)
			return resp
		}
	}
	c.removeConsumerMember(g, m, now)
	return resp
}

// fenceConsumerMember removes a member whose session or revocation
// deadline expired.
func (c *Coordinator) fenceConsumerMember(group, memberID string, now int64) {
	g := c.consumer[group]
	if g == nil {
		return
	}
	if m := g.members[memberID]; m != nil {
		c.removeConsumerMember(g, m, now)
	}
}

func (c *Coordinator) removeConsumerMember(g *consumerGroup, m *consumerMember, now int64) {
	g.setOwned(m, false)
	g.setNames(m, nil)
	delete(g.members, m.id)
	delete(g.target, m.id)
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
	c.timers.cancel(timerKey{timerConsumerSession, g.id, m.id})
	c.timers.cancel(timerKey{timerConsumerRebalance, g.id, m.id})
	c.dropUnusedRegexes(g)
	c.refreshMetadata(g, now)
	g.epoch++
	if len(g.members) == 0 {
		c.markEmpty(g.id, now)
	}
}

func (c *Coordinator) deleteConsumerGroup(g *consumerGroup) {
	c.timers.cancel(timerKey{timerConsumerAssign, g.id, ""})
	delete(c.consumer, g.id)
}

// ConsumerGroupDescribe answers ConsumerGroupDescribe (v0–v1) for the
// groups asked, in order. A group that does not exist or uses the classic
// protocol gets GROUP_ID_NOT_FOUND (Kafka's answer), an empty id
// INVALID_GROUP_ID.
func (c *Coordinator) ConsumerGroupDescribe(groups []string) []kmsg.ConsumerGroupDescribeResponseGroup {
	out := make([]kmsg.ConsumerGroupDescribeResponseGroup, 0, len(groups))
	for _, id := range groups {
		d := kmsg.NewConsumerGroupDescribeResponseGroup()
		d.Group = id
		g := c.consumer[id]
		switch {
		case id == "":
			d.ErrorCode = kerr.InvalidGroupID.Code
		case g == nil:
			d.ErrorCode = kerr.GroupIDNotFound.Code
			msg := "Group " + id + " not found."
			if c.exists(id) {
				msg = "Group " + id + " is not a consumer group."
			}
			d.ErrorMessage = &msg
		default:
			d.State = g.state().String()
			d.Epoch = g.epoch
			d.AssignmentEpoch = g.assignmentEpoch
			d.AssignorName = c.cfg.Assignors[0]
			for _, mid := range sortedKeys(g.members) {
				m := g.members[mid]
				dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
				dm.MemberID, dm.InstanceID, dm.RackID = mid, m.instanceID, m.rackID
				dm.MemberEpoch, dm.ClientID, dm.ClientHost = m.epoch, m.clientID, m.clientHost
				dm.SubscribedTopics = slices.Clone(m.names)
				if dm.SubscribedTopics == nil {
					dm.SubscribedTopics = []string{}
				}
				dm.SubscribedTopicRegex = m.regex
				dm.Assignment = c.describeAssignment(m.assigned)
				dm.TargetAssignment = c.describeAssignment(g.target[mid])
				dm.MemberType = 1 // consumer protocol (KIP-1099)
				d.Members = append(d.Members, dm)
			}
		}
		out = append(out, d)
	}
	return out
}

func (c *Coordinator) describeAssignment(a assignment) kmsg.Assignment {
	var out kmsg.Assignment
	for _, t := range sortedTopicIDs(a) {
		tp := kmsg.AssignmentTopicPartition{TopicID: t, Partitions: slices.Clone(a[t])}
		if name, _, ok := c.topics.TopicByID(t); ok {
			tp.Topic = name
		}
		out.TopicPartitions = append(out.TopicPartitions, tp)
	}
	return out
}
