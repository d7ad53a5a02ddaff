package server

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Every API key's range of versions is declared once, beside its handler:
// the server's own in the handler's file (metadataVersions in
// 03_metadata.go, ...), those of the keys it delegates by the delegate
// (Producer.APIVersions, Fetcher.APIVersions), each with the reason for its
// bounds. New derives the ApiVersions table from them (Server.apis); the
// dispatcher refuses any version outside it.

// ownAPIs are the ranges of the server's own handlers.
var ownAPIs = []kmsg.ApiVersionsResponseApiKey{
	metadataVersions, apiVersionsVersions, createTopicsVersions,
	deleteRecordsVersions, initProducerIDVersions, describeConfigsVersions,
	deleteTopicsVersions, alterConfigsVersions, describeLogDirsVersions, createPartitionsVersions,
	incrementalAlterConfigsVersions, describeClusterVersions,
	// SASL (sasl.go answers them while a connection authenticates).
	saslHandshakeVersions, saslAuthenticateVersions,
	describeUserScramCredentialsVersions, alterUserScramCredentialsVersions, describeClientQuotasVersions,
	// ACLs (29_describe_acls.go, 30_…, 31_…).
	describeACLsVersions, createACLsVersions, deleteACLsVersions,
	// Forwarding to the controller (58_envelope.go).
	envelopeVersions,
	// Consumer groups (groups.go).
	offsetCommitVersions, offsetFetchVersions, findCoordinatorVersions, joinGroupVersions,
	heartbeatVersions, leaveGroupVersions, syncGroupVersions, describeGroupsVersions,
	listGroupsVersions, deleteGroupsVersions, offsetDeleteVersions,
	consumerGroupHeartbeatVersions, consumerGroupDescribeVersions,
	// Transactions (txns.go), advertised only with Config.Transactions.
	addPartitionsToTxnVersions, addOffsetsToTxnVersions, endTxnVersions, txnOffsetCommitVersions,
	describeProducersVersions, describeTransactionsVersions, listTransactionsVersions, writeTxnMarkersVersions,
}

// The API keys each delegate answers, one per method of its interface.
var (
	producerKeys = []int16{0}        // Produce
	fetcherKeys  = []int16{1, 2, 23} // Fetch, ListOffsets, OffsetForLeaderEpoch
)

// buildAPIs returns the ApiVersions table, sorted by key: the server's own
// ranges, the coordinator RPCs' (rpc.go) and the delegates'. Errors: a delegate that declares other keys
// than it answers, a key declared twice or not routed, a range that is
// empty or outside what kmsg can decode.
func buildAPIs(producer, fetcher []kmsg.ApiVersionsResponseApiKey) ([]kmsg.ApiVersionsResponseApiKey, error) {
	for _, d := range []struct {
		name string
		apis []kmsg.ApiVersionsResponseApiKey
		keys []int16
	}{{"Producer", producer, producerKeys}, {"Fetcher", fetcher, fetcherKeys}} {
		keys := make([]int16, len(d.apis))
		for i, a := range d.apis {
			keys[i] = a.ApiKey
		}
		slices.Sort(keys)
		if !slices.Equal(keys, d.keys) {
			return nil, fmt.Errorf("server: the %s declares versions of API keys %v, want exactly %v", d.name, keys, d.keys)
		}
	}
	apis := slices.Concat(ownAPIs, rpcVersions, producer, fetcher)
	slices.SortFunc(apis, func(a, b kmsg.ApiVersionsResponseApiKey) int { return cmp.Compare(a.ApiKey, b.ApiKey) })
	for i, a := range apis {
		name := nameForKey(a.ApiKey)
		_, routed := routes[a.ApiKey]
		switch req := requestForKey(a.ApiKey); {
		case i > 0 && apis[i-1].ApiKey == a.ApiKey:
			return nil, fmt.Errorf("server: versions of %s declared twice", name)
		case req == nil || !routed:
			return nil, fmt.Errorf("server: versions declared for API key %d, which has no handler", a.ApiKey)
		case a.MinVersion < 0 || a.MinVersion > a.MaxVersion || a.MaxVersion > req.MaxVersion():
			return nil, fmt.Errorf("server: %s versions %d–%d: not a range within kmsg's 0–%d", name, a.MinVersion, a.MaxVersion, req.MaxVersion())
		}
	}
	if len(apis) != len(routes) {
		return nil, fmt.Errorf("server: %d API keys have handlers, %d have versions", len(routes), len(apis))
	}
	return apis, nil
}

// apiVersionsKey is ApiVersions' API key, special-cased in framing.
const apiVersionsKey = 18

// versionRange returns the advertised range of key.
func (s *Server) versionRange(key int16) (lo, hi int16, ok bool) {
	for _, a := range s.apis {
		if a.ApiKey == key {
			return a.MinVersion, a.MaxVersion, true
		}
	}
	return 0, 0, false
}

// route says how one API key is handled. Exactly one field is set.
type route struct {
	// inline is called on the connection's reader goroutine, in request
	// order, and returns a func the writer calls to await the response
	// (Produce: appends keep the connection's order).
	inline func(s *Server, ctx context.Context, req kmsg.Request) func() kmsg.Response
	// async runs on a goroutine of its own; the response is still written
	// in request order.
	async func(s *Server, ctx context.Context, req kmsg.Request) kmsg.Response
}

// routes is how each API key is handled. Every key here has its versions
// declared, and no other (buildAPIs checks).
var routes = map[int16]route{
	0: {inline: func(s *Server, ctx context.Context, r kmsg.Request) func() kmsg.Response {
		return s.handleProduce(ctx, r.(*kmsg.ProduceRequest))
	}},
	1:  async((*Server).handleFetch),
	2:  async((*Server).handleListOffsets),
	3:  async((*Server).handleMetadata),
	18: async((*Server).handleApiVersions),
	19: async((*Server).handleCreateTopics),
	21: async((*Server).handleDeleteRecords),
	22: async((*Server).handleInitProducerID),
	23: async((*Server).handleOffsetForLeaderEpoch),
	32: async((*Server).handleDescribeConfigs),
	// The topic lifecycle (20_delete_topics.go, 33_alter_configs.go, …).
	20: async((*Server).handleDeleteTopics),
	33: async((*Server).handleAlterConfigs),
	35: async((*Server).handleDescribeLogDirs),
	37: async((*Server).handleCreatePartitions),
	44: async((*Server).handleIncrementalAlterConfigs),
	60: async((*Server).handleDescribeCluster),
	17: async((*Server).handleSaslHandshake),
	36: async((*Server).handleSaslAuthenticate),
	48: async((*Server).handleDescribeClientQuotas),
	50: async((*Server).handleDescribeUserScramCredentials),
	51: async((*Server).handleAlterUserScramCredentials),
	29: async((*Server).handleDescribeAcls),
	30: async((*Server).handleCreateAcls),
	31: async((*Server).handleDeleteAcls),
	58: async((*Server).handleEnvelope),
	// Consumer groups (groups.go).
	8:  async((*Server).handleOffsetCommit),
	9:  async((*Server).handleOffsetFetch),
	10: async((*Server).handleFindCoordinator),
	11: async((*Server).handleJoinGroup),
	12: async((*Server).handleHeartbeat),
	13: async((*Server).handleLeaveGroup),
	14: async((*Server).handleSyncGroup),
	15: async((*Server).handleDescribeGroups),
	16: async((*Server).handleListGroups),
	42: async((*Server).handleDeleteGroups),
	47: async((*Server).handleOffsetDelete),
	68: async((*Server).handleConsumerGroupHeartbeat),
	69: async((*Server).handleConsumerGroupDescribe),
	// Transactions (txns.go).
	24: async((*Server).handleAddPartitionsToTxn),
	25: async((*Server).handleAddOffsetsToTxn),
	26: async((*Server).handleEndTxn),
	27: async((*Server).handleWriteTxnMarkers),
	28: async((*Server).handleTxnOffsetCommit),
	61: async((*Server).handleDescribeProducers),
	65: async((*Server).handleDescribeTransactions),
	66: async((*Server).handleListTransactions),
	// The coordinator RPCs (rpc.go).
	100: async((*Server).handleDisklessDescribeFiles),
	101: async((*Server).handleDisklessCommitFile),
	102: async((*Server).handleDisklessFindBatches),
	103: async((*Server).handleDisklessListOffsets),
	104: async((*Server).handleDisklessDeleteRecords),
	105: async((*Server).handleDisklessCreatePartitions),
	106: async((*Server).handleDisklessDeleteTopics),
	107: async((*Server).handleDisklessDeleteFiles),
	108: async((*Server).handleDisklessAllocateProducerIDs),
	109: async((*Server).handleDisklessDisableTopic),
	110: async((*Server).handleDisklessCheckTxn),
	111: async((*Server).handleDisklessEndTxnOffsets),
}

// async routes requests of type Req to handle, on a goroutine of their own.
func async[Req kmsg.Request](handle func(*Server, context.Context, Req) kmsg.Response) route {
	return route{async: func(s *Server, ctx context.Context, r kmsg.Request) kmsg.Response {
		r, merge, refused := s.gate(ctx, r) // ACLs (authorize_apis.go)
		if refused != nil {
			return refused
		}
		resp := handle(s, ctx, r.(Req))
		if merge == nil || resp == nil {
			return resp
		}
		return merge(resp)
	}}
}

// routeFor returns how key is handled, or false for keys this server does
// not implement.
func routeFor(key int16) (route, bool) {
	rt, ok := routes[key]
	return rt, ok
}

// withRequestTimeout bounds ctx by a request's TimeoutMillis (≤ 0: no
// bound).
func withRequestTimeout(ctx context.Context, timeoutMillis int32) (context.Context, context.CancelFunc) {
	if timeoutMillis <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, time.Duration(timeoutMillis)*time.Millisecond)
}
