package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// Producer handles Produce requests (the produce package).
type Producer interface {
	// Produce takes one decoded Produce request. It is called on the
	// connection's reader goroutine, in request order, so that appends keep
	// the connection's order; it must return quickly (validate and buffer,
	// not wait for the commit).
	//
	// The returned func blocks until the response is ready and returns it,
	// with the request's version, topics and partitions; it returns nil for
	// acks=0 (nothing is sent). The server calls it exactly once, from the
	// connection's writer goroutine. Once ctx is done (the connection failed,
	// or the server is stopping hard) it must return promptly; its result is
	// then discarded. A nil func is treated as a func returning nil.
	Produce(ctx context.Context, req *kmsg.ProduceRequest) func() *kmsg.ProduceResponse
	// APIVersions returns the versions of Produce (API key 0) that Produce
	// serves, declared beside it: one entry. The server advertises them in
	// ApiVersions and never calls Produce with another version.
	APIVersions() []kmsg.ApiVersionsResponseApiKey
}

// Fetcher handles Fetch and ListOffsets requests (the fetch package). Both are
// called on a goroutine of their own, concurrently with other requests of the
// same connection; the server puts the responses back in request order.
type Fetcher interface {
	// Fetch answers one Fetch request (SPEC §4); it may long-poll up to the
	// request's max wait. It returns promptly once ctx is done. A nil
	// response closes the connection.
	Fetch(ctx context.Context, req *kmsg.FetchRequest) *kmsg.FetchResponse
	// ListOffsets answers one ListOffsets request (SPEC §5). A nil response
	// closes the connection.
	ListOffsets(ctx context.Context, req *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse
	// OffsetForLeaderEpoch answers one OffsetForLeaderEpoch request (SPEC
	// §4). A nil response closes the connection.
	OffsetForLeaderEpoch(ctx context.Context, req *kmsg.OffsetForLeaderEpochRequest) *kmsg.OffsetForLeaderEpochResponse
	// APIVersions returns the versions of Fetch, ListOffsets and
	// OffsetForLeaderEpoch (API keys 1, 2, 23) that the methods above
	// serve, declared beside them: one entry per key. The server
	// advertises them in ApiVersions and never calls a method with
	// another version.
	APIVersions() []kmsg.ApiVersionsResponseApiKey
}

// Catalog is the topic catalog and producer-id allocator (the coordinators).
type Catalog interface {
	// Topic returns the topic named name, if it exists.
	Topic(name string) (diskless.Topic, bool)
	// TopicByID returns the topic with id id, if it exists.
	TopicByID(id diskless.TopicID) (diskless.Topic, bool)
	// Topics returns every topic, sorted by name.
	Topics() []diskless.Topic
	// CreateTopic creates a topic with partitions partitions (≥ 1) and the
	// given configs (name → value, as the client sent them) and returns it
	// once the creation is durable. Errors: *topicconfig.Error (answered
	// INVALID_CONFIG with its message); a *kerr.Error, possibly wrapped
	// (TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION, INVALID_PARTITIONS, …),
	// answered with that code; anything else is answered
	// UNKNOWN_SERVER_ERROR (or REQUEST_TIMED_OUT for a context error).
	CreateTopic(ctx context.Context, name string, partitions int32, configs map[string]string) (diskless.Topic, error)
	// AllocateProducerID returns a producer id never handed out before by
	// any sidecar (SPEC §3). A *kerr.Error is answered with its code, any
	// other error with COORDINATOR_LOAD_IN_PROGRESS (retriable).
	AllocateProducerID(ctx context.Context) (int64, error)
	// DeleteRecords moves a partition's log start offset up to offset (−1:
	// the high watermark) and returns the log start offset after it (SPEC
	// §5). A *kerr.Error (OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION),
	// possibly wrapped, is answered with its code; anything else with
	// KAFKA_STORAGE_ERROR.
	DeleteRecords(ctx context.Context, tp diskless.TopicPartition, offset int64) (int64, error)
	// DeleteTopic deletes the topic with id and returns it as it was
	// (DeleteTopics). Errors: kerr.UnknownTopicID; a *kerr.Error is
	// answered with its code, anything else UNKNOWN_SERVER_ERROR (or
	// REQUEST_TIMED_OUT for a context error).
	DeleteTopic(ctx context.Context, id diskless.TopicID) (diskless.Topic, error)
	// CreatePartitions grows the topic with id to count partitions
	// (nothing with validateOnly) and returns it as it is (or would be).
	// A *kerr.Error (INVALID_PARTITIONS with Kafka's message,
	// UNKNOWN_TOPIC_OR_PARTITION), possibly wrapped, is answered with its
	// code and message.
	CreatePartitions(ctx context.Context, id diskless.TopicID, count int32, validateOnly bool) (diskless.Topic, error)
	// AlterTopicConfigs changes the configs of the topic with id and
	// returns it as it is (or would be) after the change. Errors: a
	// *topicconfig.Error (INVALID_CONFIG, or INVALID_REQUEST with
	// Request), a *kerr.Error (possibly wrapped, with its message).
	AlterTopicConfigs(ctx context.Context, id diskless.TopicID, ch diskless.ConfigChange) (diskless.Topic, error)
	// PartitionSizes returns the bytes each partition of the topic holds
	// (DescribeLogDirs), indexed by partition; nil for an unknown topic.
	PartitionSizes(id diskless.TopicID) []int64
}

// ScramCredentials is the SCRAM credential store (the coordinators'
// shard 0, record 116; SPEC §14, SCRAM). Logins read it through the SASL
// mechanisms (internal/sasl), not through the server.
type ScramCredentials interface {
	// ScramUsers returns every user's credentials, mechanism and
	// iterations only (no salt, no keys), each user's by mechanism.
	ScramUsers() map[string][]diskless.ScramCredential
	// AlterScramCredentials applies changes (users distinct, credentials
	// valid) all together once durable and returns each one's outcome:
	// nil, or kerr.ResourceNotFound for the removal of a credential not
	// held. err (nothing changed): diskless.ErrNotCoordinator where
	// another sidecar hosts shard 0, ctx's error, a storage failure.
	AlterScramCredentials(ctx context.Context, changes []diskless.ScramChange) ([]error, error)
}
