package diskless

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TopicState is a topic's diskless state (SPEC §10, KIP-950's pattern):
// ENABLED → DISABLING → DISABLED → ENABLED …, each move to DISABLING or
// back to ENABLED with a new epoch (record 111).
type TopicState int8

const (
	// TopicEnabled: diskless; produce and fetch served.
	TopicEnabled TopicState = 0
	// TopicDisabling: diskless.enable=false was set; the coordinator
	// refuses the topic's commits and waits for every sidecar to confirm
	// that it stopped taking produce for it. Produce gets
	// ErrDisabling.
	TopicDisabling TopicState = 1
	// TopicDisabled: every sidecar confirmed (and, with the delete
	// policy, the data was released). Produce gets ErrDisabled; data kept
	// by the retain policy stays readable until retention removes it.
	TopicDisabled TopicState = 2
)

func (s TopicState) String() string {
	switch s {
	case TopicEnabled:
		return "ENABLED"
	case TopicDisabling:
		return "DISABLING"
	case TopicDisabled:
		return "DISABLED"
	}
	return fmt.Sprintf("TopicState(%d)", int8(s))
}

// DisablePolicy is diskless.disable.policy: what disabling does with the
// topic's data.
type DisablePolicy int8

const (
	// DisableRetain (the default, as in KIP-950): the data stays readable
	// until retention removes it.
	DisableRetain DisablePolicy = 0
	// DisableDelete: every partition's log start moves to its high
	// watermark and the topic's files are released for deletion.
	DisableDelete DisablePolicy = 1
)

func (p DisablePolicy) String() string {
	switch p {
	case DisableRetain:
		return "retain"
	case DisableDelete:
		return "delete"
	}
	return fmt.Sprintf("DisablePolicy(%d)", int8(p))
}

// Disablement is a topic's diskless state, its epoch (0 for a topic never
// disabled) and the policy of its last disablement.
type Disablement struct {
	State  TopicState
	Epoch  int32
	Policy DisablePolicy
}

// The errors producers get for a topic that is not ENABLED (SPEC §10;
// DESIGN §Decisions). Kafka has no code for "this topic stopped being
// diskless"; these are the nearest codes whose handling in the clients is
// the one wanted.
var (
	// ErrDisabling answers produce while DISABLING: NOT_ENOUGH_REPLICAS
	// (19), retriable in every client (the Java client, librdkafka,
	// franz-go, Sarama) without a metadata refresh, so producers back
	// off and retry until the topic is DISABLED or ENABLED again.
	ErrDisabling = kerr.NotEnoughReplicas
	// ErrDisabled answers produce once DISABLED: POLICY_VIOLATION (44),
	// not retriable in any client, so the batch fails at once with the
	// message naming the reason.
	ErrDisabled = kerr.PolicyViolation
)

// ProduceError returns the error and message a produce to t gets because
// of its diskless state, or nil for an ENABLED topic.
func (t *Topic) ProduceError() (*kerr.Error, string) {
	switch t.Disablement.State {
	case TopicDisabling:
		return ErrDisabling, fmt.Sprintf("diskless is being disabled on topic %s (diskless.enable=false, epoch %d); retry", t.Name, t.Disablement.Epoch)
	case TopicDisabled:
		return ErrDisabled, fmt.Sprintf("diskless is disabled on topic %s (diskless.enable=false, epoch %d): it takes no produce on this sidecar", t.Name, t.Disablement.Epoch)
	}
	return nil, ""
}

// DisableTopicRequest is DisklessDisableTopic (SPEC §9, API key 109):
// what the coordinator sends every sidecar when a topic enters DISABLING.
type DisableTopicRequest struct {
	TopicID TopicID
	Topic   string
	Epoch   int32
	Policy  DisablePolicy
}

// DisableTopicResult is a sidecar's confirmation of a
// DisableTopicRequest: TxnShards holds, for each coordinator shard of the
// topic's partitions the sidecar hosts, whether a transaction is open in
// one of the topic's partitions there (SPEC §10: the disablement waits
// for none), read from the shard's durable state once its log was
// confirmed current. A shard the sidecar could not read, or a topic its
// catalog does not hold at the request's epoch yet, is left out.
type DisableTopicResult struct {
	TxnShards []ShardTxns
}

// ShardTxns is one shard of a DisableTopicResult: Open reports a
// transaction open in one of the topic's partitions on shard Shard.
type ShardTxns struct {
	Shard int32
	Open  bool
}

// ConfigChange is one topic's config change (IncrementalAlterConfigs,
// AlterConfigs).
type ConfigChange struct {
	// Apply returns the topic's configs after the change (name → value,
	// only those set) from those set now; it must not keep or modify
	// current. An error refuses the change.
	Apply func(current map[string]string) (map[string]string, error)
	// Names are the configs the request names (set, deleted, appended
	// or subtracted): one naming diskless.enable or
	// diskless.disable.policy while the topic is DISABLING gets the
	// "in progress" error.
	Names []string
	// ValidateOnly checks the change and writes nothing.
	ValidateOnly bool
}
