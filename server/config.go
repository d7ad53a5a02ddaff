package server

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/diskless-sidecar/sidecar/internal/acl"
)

// Defaults applied by New to zero Config fields.
const (
	// DefaultMaxRequestBytes is Kafka's socket.request.max.bytes default,
	// 100 MiB.
	DefaultMaxRequestBytes int32 = 104857600
	// DefaultMaxInflightPerConn bounds the requests read but not yet answered
	// on one connection. 32 is well above what clients pipeline (kgo and the
	// Java client default to 5 in-flight produce requests per broker, plus a
	// fetch and some metadata) while bounding a connection's memory to 32
	// requests.
	DefaultMaxInflightPerConn = 32
	// DefaultMaxQueuedRequestBytes bounds the request bytes read and not
	// yet answered across all connections (Kafka's
	// queued.max.request.bytes, which is unbounded by default there; the
	// produce path's own bound, diskless.append.max.pending.bytes, is
	// 256 MiB, and request frames are held until their answers).
	DefaultMaxQueuedRequestBytes int64 = 512 << 20
	// DefaultIdleTimeout is Kafka's connections.max.idle.ms default: a
	// connection with no request in flight and nothing sent for this long
	// is closed, and a response that cannot be written for this long
	// closes its connection.
	DefaultIdleTimeout = 10 * time.Minute
	// DefaultLogDir is the log dir DescribeLogDirs reports by default.
	DefaultLogDir = "diskless"
	// DefaultNumPartitions is Kafka's num.partitions default.
	DefaultNumPartitions int32 = 1
)

// Config configures a Server. A zero field takes its default (the Default
// constants above); Validate reports invalid fields naming their
// configuration keys.
type Config struct {
	// Listeners are the Kafka listeners (listeners,
	// listener.security.protocol.map, advertised.listeners, ssl.*; SPEC §14,
	// Listeners), names unique; each client is told the addresses of the
	// listener it connected to. Empty: one PLAINTEXT listener named
	// PLAINTEXT from Addr, AdvertisedHost and AdvertisedPort, which must
	// be empty when Listeners is set.
	Listeners []Listener
	// Addr is the host:port to listen on (from `listeners`). Port 0 picks a
	// free port; Addr() then returns it. An empty host listens on all
	// interfaces.
	Addr string
	// AdvertisedHost is the host clients are told to connect to in Metadata
	// (from `advertised.listeners`). "" means Addr's host; if that is empty
	// or unspecified (0.0.0.0, ::), the machine's hostname, as Kafka does.
	AdvertisedHost string
	// AdvertisedPort is the port advertised in Metadata, 0–65535; 0 means the
	// bound port.
	AdvertisedPort int32
	// NodeID is this sidecar's node.id, ≥ 0: the broker id, controller id
	// and the leader, replica and ISR of every partition in Metadata.
	NodeID int32
	// ClusterID is the cluster id reported in Metadata (v2+); required.
	ClusterID string
	// AutoCreateTopics is auto.create.topics.enable: Metadata creates
	// unknown topics when the request allows it (v4+) or always (v0–3).
	AutoCreateTopics bool
	// NumPartitions is num.partitions, the partition count of auto-created
	// topics and of CreateTopics requests that ask for −1; ≥ 1, default 1.
	NumPartitions int32
	// MaxRequestBytes is socket.request.max.bytes, the largest request frame
	// accepted, in bytes (size prefix excluded); default 104857600. A larger
	// frame closes its connection.
	MaxRequestBytes int32
	// MaxInflightPerConn bounds the requests read but not yet answered on one
	// connection; default 32. When it is reached the reader waits.
	MaxInflightPerConn int
	// MaxQueuedRequestBytes (queued.max.request.bytes) bounds the bytes of
	// request frames read and not yet answered, over all connections;
	// readers wait before reading a frame that does not fit. A frame larger
	// than the whole budget waits for it to be entirely free. Default
	// DefaultMaxQueuedRequestBytes; must be ≥ MaxRequestBytes.
	MaxQueuedRequestBytes int64
	// IdleTimeout (connections.max.idle.ms) closes a connection that sent
	// nothing for this long while nothing was in flight, and one whose
	// response could not be written for this long (a client that stopped
	// reading). Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxReauth is connections.max.reauth.ms: a SASL session lasts this
	// long, then the client must re-authenticate on the connection
	// (KIP-368) or it is closed at its next request; 0 (default): sessions
	// do not expire.
	MaxReauth time.Duration
	// FailedAuthDelay is connection.failed.authentication.delay.ms: a
	// connection whose authentication failed is closed this long after
	// the answer; default DefaultFailedAuthDelay.
	FailedAuthDelay time.Duration
	// TLSHandshakeTimeout bounds the TLS handshake of an SSL or SASL_SSL
	// listener's connection: one not done by then is closed. Default
	// DefaultTLSHandshakeTimeout.
	TLSHandshakeTimeout time.Duration
	// Now is the clock of SASL sessions (tests); default time.Now.
	Now func() time.Time
	// LogDir is the log dir DescribeLogDirs reports (where the objects
	// are, e.g. s3://bucket/prefix). Default DefaultLogDir.
	LogDir string
	// Logger receives the server's logs; connection-scoped records carry
	// "remote" and "client_id" attributes. Default slog.Default().
	Logger *slog.Logger
	// Groups is the consumer-group coordinator the group APIs (FindCoordinator,
	// JoinGroup, OffsetCommit, …) are answered by; nil answers them
	// COORDINATOR_NOT_AVAILABLE.
	Groups Groups
	// Transactions is the transaction coordinator: with it
	// FindCoordinator answers key type 1, InitProducerId takes
	// transactional ids and AddPartitionsToTxn, AddOffsetsToTxn, EndTxn
	// and TxnOffsetCommit (which needs Groups too) are served; nil
	// refuses transactional producers (SPEC §3) and does not advertise
	// those APIs.
	Transactions Transactions
	// Shards are the coordinator shards this sidecar hosts, which the
	// coordinator RPCs (API keys 100–108, SPEC §9) reach; nil answers
	// them NOT_COORDINATOR.
	Shards Shards
	// Scram is the SCRAM credential store DescribeUserScramCredentials and
	// AlterUserScramCredentials answer from (the coordinators' shard 0;
	// SPEC §14, SCRAM); nil describes no user and refuses every change
	// UNKNOWN_SERVER_ERROR.
	Scram ScramCredentials
	// Controller is where the catalog is written in a cluster: admin
	// requests that change it are forwarded there (controller.go); nil:
	// this sidecar.
	Controller Controller
	// Cluster is this sidecar's cluster (membership): Metadata names its
	// live sidecars and spreads partition leaders over them, by the
	// client's zone; nil names this sidecar alone.
	Cluster Cluster
	// Rack is this sidecar's broker.rack (its zone), in Metadata when
	// there is no Cluster.
	Rack string
	// ClientZones is diskless.client.zone.cidrs: the zone of a client
	// that names none in its client id, by its address (ParseZoneCIDRs).
	ClientZones []ZoneCIDR
	// Disabler is this sidecar's part of a topic's disablement
	// (DisklessDisableTopic, API key 109); nil answers it
	// UNSUPPORTED_VERSION.
	Disabler TopicDisabler
	// Authorizer decides what each request's principal may do (SPEC §14,
	// ACLs; `authorizer.class.name`): nil allows everything and answers
	// CreateAcls, DescribeAcls and DeleteAcls SECURITY_DISABLED, as a
	// Kafka broker without an authorizer does.
	Authorizer *acl.Authorizer
	// ACLs is the store of the access control entries the ACL APIs
	// change and list (the coordinators' shard 0); required with
	// Authorizer.
	ACLs ACLStore
}

// listeners returns the listeners to bind: Listeners, or the one
// PLAINTEXT listener Addr and AdvertisedHost/Port describe.
func (c Config) listeners() []Listener {
	if len(c.Listeners) > 0 {
		return c.Listeners
	}
	return []Listener{{Name: string(Plaintext), Protocol: Plaintext, Addr: c.Addr,
		AdvertisedHost: c.AdvertisedHost, AdvertisedPort: c.AdvertisedPort}}
}

// withDefaults returns c with zero fields replaced by their defaults.
func (c Config) withDefaults() Config {
	if c.NumPartitions == 0 {
		c.NumPartitions = DefaultNumPartitions
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.MaxInflightPerConn == 0 {
		c.MaxInflightPerConn = DefaultMaxInflightPerConn
	}
	if c.MaxQueuedRequestBytes == 0 {
		c.MaxQueuedRequestBytes = max(DefaultMaxQueuedRequestBytes, int64(c.MaxRequestBytes))
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.LogDir == "" {
		c.LogDir = DefaultLogDir
	}
	if c.FailedAuthDelay == 0 {
		c.FailedAuthDelay = DefaultFailedAuthDelay
	}
	if c.TLSHandshakeTimeout == 0 {
		c.TLSHandshakeTimeout = DefaultTLSHandshakeTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports every invalid field of c (zero fields count as their
// defaults), each error naming the Kafka configuration key it comes from
// (the field, for those without one).
func (c Config) Validate() error {
	var errs []error
	if len(c.Listeners) > 0 && (c.Addr != "" || c.AdvertisedHost != "" || c.AdvertisedPort != 0) {
		errs = append(errs, errors.New("listeners: Addr and AdvertisedHost/Port must be empty when Listeners is set"))
	}
	names := map[string]bool{}
	for _, l := range c.listeners() {
		errs = append(errs, l.validate()...)
		if names[l.Name] {
			errs = append(errs, fmt.Errorf("listeners: listener name %s used twice", l.Name))
		}
		names[l.Name] = true
	}
	if c.NodeID < 0 {
		errs = append(errs, fmt.Errorf("node.id %d: must be ≥ 0", c.NodeID))
	}
	if c.ClusterID == "" {
		errs = append(errs, errors.New("ClusterID: must not be empty"))
	}
	d := c.withDefaults()
	if d.NumPartitions < 1 {
		errs = append(errs, fmt.Errorf("num.partitions %d: must be ≥ 1", d.NumPartitions))
	}
	if d.MaxRequestBytes < 1 {
		errs = append(errs, fmt.Errorf("socket.request.max.bytes %d: must be > 0", d.MaxRequestBytes))
	} else if d.MaxQueuedRequestBytes < int64(d.MaxRequestBytes) {
		errs = append(errs, fmt.Errorf("queued.max.request.bytes %d: must be ≥ socket.request.max.bytes (%d)", d.MaxQueuedRequestBytes, d.MaxRequestBytes))
	}
	if d.MaxReauth < 0 {
		errs = append(errs, fmt.Errorf("connections.max.reauth.ms %v: must be ≥ 0", d.MaxReauth))
	}
	if d.FailedAuthDelay < 0 {
		errs = append(errs, fmt.Errorf("connection.failed.authentication.delay.ms %v: must be ≥ 0", d.FailedAuthDelay))
	}
	if d.TLSHandshakeTimeout < 0 {
		errs = append(errs, fmt.Errorf("TLS handshake timeout %v: must be > 0", d.TLSHandshakeTimeout))
	}
	if d.IdleTimeout < 0 {
		errs = append(errs, fmt.Errorf("connections.max.idle.ms %v: must be > 0", d.IdleTimeout))
	}
	if c.Authorizer != nil && c.ACLs == nil {
		errs = append(errs, errors.New("authorizer.class.name: an authorizer needs the ACL store (ACLs)"))
	}
	if d.MaxInflightPerConn < 0 {
		errs = append(errs, fmt.Errorf("MaxInflightPerConn %d: must be > 0", d.MaxInflightPerConn))
	}
	return errors.Join(errs...)
}
