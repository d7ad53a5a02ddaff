package server

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// supportedAPIs is what ApiVersions advertises: every API key this server
// answers and its version range, sorted by key. It is the one place versions
// are decided; the dispatcher (route) refuses any version outside it, and a
// test checks that the two agree. Why each range (SPEC §6):
//
//   - Produce 0–13: min 0 for librdkafka's sake (SPEC §6); the producer
//     itself refuses v0–2 (no record batch v2). v13 names topics by id.
//   - Fetch 4–16: v4 is the first with isolation level and last stable
//     offset; v13+ name topics by id; v16 adds the (tagged) node endpoints
//     of KIP-951. v17 and v18 only add follower fields (directory id,
//     KIP-1166 high watermark), meaningless for a leaderless sidecar.
//   - ListOffsets 1–8: v1 is the first with (timestamp, offset) answers; v7
//     adds max timestamp (−3, SPEC §5); v8 adds −4, earliest local offset
//     (KIP-405), which fetch.Handler answers with the log start offset (a
//     diskless log has no local part). v9+ add tiered-storage lookups (−5)
//     and a timeout, not implemented. Kept equal to
//     fetch.ListOffsetsMinVersion/MaxVersion, as Fetch is to
//     fetch.FetchMinVersion/MaxVersion.
//   - Metadata 0–12: v10+ carry topic ids, v12 accepts ids in requests; v13
//     adds a top-level error for KIP-1102 rebootstrap, not implemented.
//   - ApiVersions 0–4: v5 (KIP-1242) adds cluster/node checks, not
//     implemented; clients asking v5 get UNSUPPORTED_VERSION and retry at 4.
//   - CreateTopics 0–7: all of kmsg's versions; v7 returns topic ids.
//   - InitProducerId 0–5: all of kmsg's versions; v3+ carry the producer's
//     current id and epoch (KIP-360), v5 only signals transactions v2.
//   - DeleteRecords 0–2 and DescribeConfigs 0–4: all of kmsg's versions.
//   - OffsetForLeaderEpoch 0–4: all of kmsg's versions; consumers (franz-go
//     first) validate their position with it once they know an epoch.
var supportedAPIs = []kmsg.ApiVersionsResponseApiKey{
	{ApiKey: 0, MinVersion: 0, MaxVersion: 13}, // Produce
	{ApiKey: 1, MinVersion: 4, MaxVersion: 16}, // Fetch
	{ApiKey: 2, MinVersion: 1, MaxVersion: 8},  // ListOffsets
	{ApiKey: 3, MinVersion: 0, MaxVersion: 12}, // Metadata
	{ApiKey: 18, MinVersion: 0, MaxVersion: 4}, // ApiVersions
	{ApiKey: 19, MinVersion: 0, MaxVersion: 7}, // CreateTopics
	{ApiKey: 21, MinVersion: 0, MaxVersion: 2}, // DeleteRecords
	{ApiKey: 22, MinVersion: 0, MaxVersion: 5}, // InitProducerId
	{ApiKey: 23, MinVersion: 0, MaxVersion: 4}, // OffsetForLeaderEpoch
	{ApiKey: 32, MinVersion: 0, MaxVersion: 4}, // DescribeConfigs
}

// SupportedAPIs returns a copy of the API keys and version ranges the
// server advertises in ApiVersions, sorted by key.
func SupportedAPIs() []kmsg.ApiVersionsResponseApiKey {
	return append([]kmsg.ApiVersionsResponseApiKey(nil), supportedAPIs...)
}

// apiVersionsKey is ApiVersions' API key, special-cased in framing.
const apiVersionsKey = 18

// versionRange returns the advertised range of key.
func versionRange(key int16) (lo, hi int16, ok bool) {
	for _, a := range supportedAPIs {
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

// routes is how each API key is handled. Every key here must be in
// supportedAPIs and vice versa.
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
}

// async routes requests of type Req to handle, on a goroutine of their own.
func async[Req kmsg.Request](handle func(*Server, context.Context, Req) kmsg.Response) route {
	return route{async: func(s *Server, ctx context.Context, r kmsg.Request) kmsg.Response {
		return handle(s, ctx, r.(Req))
	}}
}

// routeFor returns how key is handled, or false for keys this server does
// not implement.
func routeFor(key int16) (route, bool) {
	rt, ok := routes[key]
	return rt, ok
}

// orNil returns resp as a kmsg.Response, nil (not a typed nil in the
// interface, which the writer would try to encode) when resp is nil.
func orNil[R interface {
	*T
	kmsg.Response
}, T any](resp R) kmsg.Response {
	if resp == nil {
		return nil
	}
	return resp
}

// withRequestTimeout bounds ctx by a request's TimeoutMillis (≤ 0: no
// bound).
func withRequestTimeout(ctx context.Context, timeoutMillis int32) (context.Context, context.CancelFunc) {
	if timeoutMillis <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, time.Duration(timeoutMillis)*time.Millisecond)
}
