package diskless

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"net"
	"strconv"
	"strings"

	"github.com/diskless-sidecar/sidecar/internal/topicconfig"
)

// TopicID is a Kafka topic id: a random UUID, 16 bytes (Metadata v10+).
type TopicID [16]byte

// String formats the id as a canonical UUID (8-4-4-4-12 hex digits).
func (id TopicID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], id[10:16])
	return string(b[:])
}

// TopicPartition names one partition of a topic by topic id.
type TopicPartition struct {
	TopicID   TopicID
	Partition int32
}

// ComparePartitions orders partitions by topic id bytes, then by
// partition: −1, 0 or +1 as a sorts before, with or after b (a
// comparator for slices.SortFunc).
func ComparePartitions(a, b TopicPartition) int {
	if c := bytes.Compare(a.TopicID[:], b.TopicID[:]); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// Topic is a diskless topic as the coordinators know it.
type Topic struct {
	ID         TopicID
	Name       string
	Partitions int32
	// Config is the parsed topic config (SPEC §11); Config.Raw holds what
	// was set explicitly. A Topic is an immutable snapshot: Config.Raw is
	// shared with the catalog and must not be modified.
	Config topicconfig.Config
	// Disablement is the topic's diskless state (SPEC §10).
	Disablement Disablement
}

// ShardFor returns the coordinator shard, in [0, numShards), that owns a
// partition:
//
//	h     = FNV-1a 32-bit hash of the 16 topic id bytes
//	shard = (h + partition) mod numShards    (in uint64 arithmetic)
//
// so a topic's partitions go round-robin over the shards from a start that
// depends on the topic. Every sidecar computes the same answer; the result
// is recorded with the partition (record 100). It returns 0 when
// numShards < 1 or partition < 0.
func ShardFor(id TopicID, partition int32, numShards int32) int32 {
	if numShards < 1 || partition < 0 {
		return 0
	}
	const (
		offset32 = 2166136261
		prime32  = 16777619
	)
	h := uint32(offset32)
	for _, b := range id {
		h ^= uint32(b)
		h *= prime32
	}
	return int32((uint64(h) + uint64(partition)) % uint64(numShards))
}

// GroupShardFor returns the coordinator shard, in [0, numShards), that
// hosts the consumer group with id group (DESIGN §Consumer groups): the
// 32-bit FNV-1a hash of the id modulo numShards, as every sidecar computes
// it. numShards < 1 gives 0.
func GroupShardFor(group string, numShards int32) int32 {
	if numShards < 1 {
		return 0
	}
	const (
		offset32 = 2166136261
		prime32  = 16777619
	)
	h := uint32(offset32)
	for i := 0; i < len(group); i++ {
		h ^= uint32(group[i])
		h *= prime32
	}
	return int32(uint64(h) % uint64(numShards))
}

// TopicPartitions names some partitions of one topic (the partitions a
// shard creates for a topic's creation or growth, DisklessCreatePartitions).
type TopicPartitions struct {
	ID         TopicID
	Name       string
	Partitions []int32
}

// Sidecar is one sidecar of a cluster as it announces itself to the others
// (DESIGN §Membership): the node id of the broker it runs next to, where
// clients and the other sidecars reach its Kafka listener, and its rack
// (zone).
type Sidecar struct {
	NodeID int32
	// Host and Port are the advertised address of its inter-sidecar
	// listener (inter.broker.listener.name), where the others call it.
	Host string
	Port int32
	// Rack is the sidecar's broker.rack, its zone; "" when not set.
	Rack string
	// Listeners are the advertised addresses of all its listeners as
	// advertised.listeners writes them, NAME://host:port separated by
	// commas (names upper case): Metadata names each client the address
	// of the listener it connected to. "" (a sidecar of an older
	// release): Host and Port for every listener.
	Listeners string
}

// Addr is the sidecar's inter-sidecar listener as host:port.
func (s Sidecar) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(int(s.Port))) }

// Listener returns the advertised host and port of s's listener named
// name (upper case), else Host and Port.
func (s Sidecar) Listener(name string) (string, int32) {
	for l := range strings.SplitSeq(s.Listeners, ",") {
		n, hp, ok := strings.Cut(l, "://")
		if !ok || n != name {
			continue
		}
		host, port, err := net.SplitHostPort(hp)
		if p, perr := strconv.ParseUint(port, 10, 16); err == nil && perr == nil && p > 0 {
			return host, int32(p)
		}
	}
	return s.Host, s.Port
}
