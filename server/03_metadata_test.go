package server

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
)

func TestMetadata(t *testing.T) {
	type want struct {
		name string
		code *kerr.Error // nil: NONE
		// partitions of a returned topic (NONE only).
		partitions int
	}
	mdReq := func(v int16, allow bool, names ...string) *kmsg.MetadataRequest {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		req.AllowAutoTopicCreation = allow
		if names != nil {
			req.Topics = []kmsg.MetadataRequestTopic{}
		}
		for _, n := range names {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(n)
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	for _, tc := range []struct {
		name       string
		autoCreate bool
		createErr  error
		req        *kmsg.MetadataRequest
		want       []want
	}{
		{name: "v12 null list is all topics", req: mdReq(12, false),
			want: []want{{name: "a", partitions: 3}, {name: "b", partitions: 1}}},
		{name: "v12 empty list is none", req: mdReq(12, false, []string{}...)},
		{name: "v0 empty list is all topics", req: mdReq(0, false, []string{}...),
			want: []want{{name: "a", partitions: 3}, {name: "b", partitions: 1}}},
		{name: "known topics, duplicates answered once", req: mdReq(12, false, "b", "a", "b"),
			want: []want{{name: "b", partitions: 1}, {name: "a", partitions: 3}}},
		{name: "unknown topic without auto-create", req: mdReq(12, true, "new"),
			want: []want{{name: "new", code: kerr.UnknownTopicOrPartition}}},
		{name: "auto-create allowed", autoCreate: true, req: mdReq(12, true, "new"),
			want: []want{{name: "new", partitions: 2}}},
		{name: "auto-create not allowed by a v4+ request", autoCreate: true, req: mdReq(4, false, "new"),
			want: []want{{name: "new", code: kerr.UnknownTopicOrPartition}}},
		{name: "auto-create implied before v4", autoCreate: true, req: mdReq(3, false, "new"),
			want: []want{{name: "new", partitions: 2}}},
		{name: "invalid name", autoCreate: true, req: mdReq(12, true, "bad/name"),
			want: []want{{name: "bad/name", code: kerr.InvalidTopicException}}},
		{name: "invalid name without auto-create", req: mdReq(12, false, ".."),
			want: []want{{name: "..", code: kerr.InvalidTopicException}}},
		{name: "auto-create racing another creation", autoCreate: true, createErr: kerr.TopicAlreadyExists,
			req: mdReq(12, true, "a"), want: []want{{name: "a", partitions: 3}}},
		{name: "auto-create failing", autoCreate: true, createErr: errors.New("store down"),
			req: mdReq(12, true, "new"), want: []want{{name: "new", code: kerr.LeaderNotAvailable}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, func(cfg *Config, ts *testServer) { cfg.AutoCreateTopics = tc.autoCreate })
			mustCreate(t, ts.cat, "a", 3)
			mustCreate(t, ts.cat, "b", 1)
			if tc.createErr != nil {
				// "a" exists but the catalog's Topic misses it once, as when
				// another sidecar created it in between.
				real := ts.cat.topics["a"]
				delete(ts.cat.topics, "a")
				ts.cat.createHook = func(name string) error {
					if tc.createErr == kerr.TopicAlreadyExists {
						ts.cat.mu.Lock()
						ts.cat.topics["a"] = real
						ts.cat.mu.Unlock()
					}
					return tc.createErr
				}
			}
			resp := ts.handleMetadata(context.Background(), tc.req).(*kmsg.MetadataResponse)
			checkMetadataHeader(t, ts, resp)
			if len(resp.Topics) != len(tc.want) {
				t.Fatalf("%d topics, want %d: %+v", len(resp.Topics), len(tc.want), resp.Topics)
			}
			for i, w := range tc.want {
				got := resp.Topics[i]
				if got.Topic == nil || *got.Topic != w.name {
					t.Fatalf("topic %d: %v, want %s", i, got.Topic, w.name)
				}
				wantCode := int16(0)
				if w.code != nil {
					wantCode = w.code.Code
				}
				if got.ErrorCode != wantCode {
					t.Fatalf("topic %s: error %v, want %v", w.name, kerr.ErrorForCode(got.ErrorCode), w.code)
				}
				if wantCode != 0 {
					continue
				}
				cat, ok := ts.cat.Topic(w.name)
				if !ok || diskless.TopicID(got.TopicID) != cat.ID {
					t.Fatalf("topic %s: id %x, catalog has %v", w.name, got.TopicID, cat.ID)
				}
				checkPartitions(t, ts, got, w.partitions)
			}
		})
	}
}

func TestMetadataByTopicID(t *testing.T) {
	ts := startServer(t, nil)
	a := mustCreate(t, ts.cat, "a", 2)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	unknown := [16]byte{1, 2, 3}
	for _, id := range [][16]byte{unknown, a.ID, a.ID} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.TopicID = id
		req.Topics = append(req.Topics, rt)
	}
	resp := ts.handleMetadata(context.Background(), req).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 2 {
		t.Fatalf("%d topics, want 2 (duplicate id answered once)", len(resp.Topics))
	}
	if got := resp.Topics[0]; got.ErrorCode != kerr.UnknownTopicID.Code || got.TopicID != unknown || got.Topic != nil {
		t.Fatalf("unknown id: %+v", got)
	}
	if got := resp.Topics[1]; got.ErrorCode != 0 || *got.Topic != "a" || got.TopicID != a.ID {
		t.Fatalf("known id: %+v", got)
	}
	checkPartitions(t, ts, resp.Topics[1], 2)
}

func TestMetadataAuthorizedOperations(t *testing.T) {
	ts := startServer(t, nil)
	mustCreate(t, ts.cat, "a", 1)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 10
	req.IncludeClusterAuthorizedOperations = true
	req.IncludeTopicAuthorizedOperations = true
	resp := ts.handleMetadata(context.Background(), req).(*kmsg.MetadataResponse)
	if resp.AuthorizedOperations != clusterAuthorizedOps || resp.Topics[0].AuthorizedOperations != topicAuthorizedOps {
		t.Fatalf("authorized operations %b / %b", resp.AuthorizedOperations, resp.Topics[0].AuthorizedOperations)
	}
	req.IncludeClusterAuthorizedOperations, req.IncludeTopicAuthorizedOperations = false, false
	resp = ts.handleMetadata(context.Background(), req).(*kmsg.MetadataResponse)
	if resp.AuthorizedOperations != -2147483648 || resp.Topics[0].AuthorizedOperations != -2147483648 {
		t.Fatalf("authorized operations reported though not requested")
	}
}

// TestAdvertisedAddress checks the advertised host and port defaults and
// overrides.
func TestAdvertisedAddress(t *testing.T) {
	for _, tc := range []struct {
		name     string
		host     string
		port     int32
		wantHost string
		wantPort int32 // 0: the bound port
	}{
		{name: "defaults to the listener", wantHost: "127.0.0.1"},
		{name: "advertised.listeners", host: "kafka.example", port: 19092, wantHost: "kafka.example", wantPort: 19092},
		{name: "host only", host: "kafka.example", wantHost: "kafka.example"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, func(cfg *Config, _ *testServer) {
				cfg.AdvertisedHost, cfg.AdvertisedPort = tc.host, tc.port
			})
			_, bound, _ := net.SplitHostPort(ts.Addr().String())
			wantPort := strconv.Itoa(int(tc.wantPort))
			if tc.wantPort == 0 {
				wantPort = bound
			}
			req := kmsg.NewPtrMetadataRequest()
			req.Version = 1
			resp := ts.handleMetadata(context.Background(), req).(*kmsg.MetadataResponse)
			b := resp.Brokers[0]
			if b.Host != tc.wantHost || strconv.Itoa(int(b.Port)) != wantPort {
				t.Fatalf("advertised %s:%d, want %s:%s", b.Host, b.Port, tc.wantHost, wantPort)
			}
		})
	}
}

func mustCreate(t testing.TB, cat *fakeCatalog, name string, partitions int32) diskless.Topic {
	t.Helper()
	topic, err := cat.CreateTopic(context.Background(), name, partitions, nil)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return topic
}

func checkMetadataHeader(t testing.TB, ts *testServer, resp *kmsg.MetadataResponse) {
	t.Helper()
	_, port, _ := net.SplitHostPort(ts.Addr().String())
	if len(resp.Brokers) != 1 {
		t.Fatalf("%d brokers, want 1", len(resp.Brokers))
	}
	b := resp.Brokers[0]
	if b.NodeID != 7 || b.Host != "127.0.0.1" || strconv.Itoa(int(b.Port)) != port || b.Rack != nil {
		t.Fatalf("broker %+v, want node 7 at 127.0.0.1:%s without rack", b, port)
	}
	if resp.ClusterID == nil || *resp.ClusterID != "test-cluster" || resp.ControllerID != 7 {
		t.Fatalf("cluster %v controller %d", resp.ClusterID, resp.ControllerID)
	}
}

func checkPartitions(t testing.TB, ts *testServer, mt kmsg.MetadataResponseTopic, n int) {
	t.Helper()
	if len(mt.Partitions) != n {
		t.Fatalf("topic %s: %d partitions, want %d", *mt.Topic, len(mt.Partitions), n)
	}
	for i, p := range mt.Partitions {
		if p.Partition != int32(i) || p.ErrorCode != 0 || p.Leader != 7 || p.LeaderEpoch != 0 ||
			len(p.Replicas) != 1 || p.Replicas[0] != 7 || len(p.ISR) != 1 || p.ISR[0] != 7 ||
			p.OfflineReplicas == nil || len(p.OfflineReplicas) != 0 {
			t.Fatalf("topic %s partition %d: %+v", *mt.Topic, i, p)
		}
	}
}
