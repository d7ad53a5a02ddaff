package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
)

// apiVersionsCases are ApiVersions v3 client software names and versions
// (KIP-511) with Kafka 4.4's answer to each, observed.
var apiVersionsCases = []struct {
	name, version string
	want          *kerr.Error
}{
	{"kgo", "1.18.0", nil},
	{"a", "1", nil},
	{"apache-kafka-java", "4.4.0", nil},
	{"bad name!", "1.0", kerr.InvalidRequest},
	{"", "1.0", kerr.InvalidRequest},
	{"-lead", "1.0", kerr.InvalidRequest},
	{"trail-", "1.0", kerr.InvalidRequest},
	{"trail.", "1.0", kerr.InvalidRequest},
	{"under_score", "1.0", kerr.InvalidRequest},
	{"ok", "1.0 beta", kerr.InvalidRequest},
	{"ok", "", kerr.InvalidRequest},
	{"ok", "v1.0-rc.1", nil},
	{"ünicode", "1", kerr.InvalidRequest},
}

// TestApiVersionsClientSoftwareMatchesKafka sends ApiVersions v3 with
// each of apiVersionsCases, on one connection, to Apache Kafka 4.4 and to
// the sidecar: both refuse a name or version outside KIP-511's pattern with
// INVALID_REQUEST and no API keys, and go on serving the connection.
func TestApiVersionsClientSoftwareMatchesKafka(t *testing.T) {
	t.Parallel()
	kafkatest.Require(t)
	kc := kafkatest.Start(t, kafkatest.Options{})
	sc := StartSidecar(t, "")
	for _, tg := range []struct {
		name string
		rc   *RawConn
	}{{"kafka", dialRaw(t, kc.BootstrapServers())}, {"sidecar", sc.DialRaw()}} {
		checkApiVersionsClientSoftware(t, tg.name, tg.rc)
	}
}

// checkApiVersionsClientSoftware sends each of apiVersionsCases on rc and
// checks the answers.
func checkApiVersionsClientSoftware(t *testing.T, target string, rc *RawConn) {
	for _, c := range apiVersionsCases {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 3
		req.ClientSoftwareName, req.ClientSoftwareVersion = c.name, c.version
		resp, err := rc.TryRequest(req)
		if err != nil {
			t.Fatalf("%s: ApiVersions %q %q: %v", target, c.name, c.version, err)
		}
		r := resp.(*kmsg.ApiVersionsResponse)
		if r.ErrorCode != codeOf(c.want) {
			t.Errorf("%s: ApiVersions %q %q: %v, want %v", target, c.name, c.version, kerr.ErrorForCode(r.ErrorCode), c.want)
		}
		if r.ErrorCode != 0 && len(r.ApiKeys) != 0 {
			t.Errorf("%s: ApiVersions %q %q: refused with %d api keys, want none", target, c.name, c.version, len(r.ApiKeys))
		}
	}
}

// groupAPIKeys are the consumer-group APIs the sidecar serves.
var groupAPIKeys = []int16{
	10, // FindCoordinator
	11, // JoinGroup
	14, // SyncGroup
	12, // Heartbeat
	13, // LeaveGroup
	8,  // OffsetCommit
	9,  // OffsetFetch
	16, // ListGroups
	15, // DescribeGroups
	42, // DeleteGroups
	47, // OffsetDelete
	68, // ConsumerGroupHeartbeat
	69, // ConsumerGroupDescribe
}

// groupAPIDepartures are the group APIs whose advertised range differs
// from Kafka 4.4's, each by a decision SPEC §6 gives: none.
var groupAPIDepartures = map[int16]string{}

// TestGroupAPIVersionsMatchKafka compares the version range the sidecar
// advertises for every consumer-group API with Apache Kafka 4.4's (SPEC
// §6), and DeleteGroups' answers at v2 and v3 — the codes, and the error
// messages v3 added, which Kafka leaves null — for a group that does not
// exist, one with a member, an empty group id and a group holding
// offsets.
func TestGroupAPIVersionsMatchKafka(t *testing.T) {
	t.Parallel()
	kafkatest.Require(t)
	ctx := testCtx(t, 3*time.Minute)
	kc := kafkatest.Start(t, kafkatest.Options{})
	sc := StartSidecar(t, "", groupSidecarSets...)
	ranges := func(rc *RawConn) map[int16][2]int16 {
		r := rc.Request(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
		out := map[int16][2]int16{}
		for _, k := range r.ApiKeys {
			out[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
		}
		return out
	}
	krc, src := dialRaw(t, kc.BootstrapServers()), sc.DialRaw()
	kafka, sidecar := ranges(krc), ranges(src)
	for _, key := range groupAPIKeys {
		k, okK := kafka[key]
		s, okS := sidecar[key]
		why, departs := groupAPIDepartures[key]
		switch {
		case !okK || !okS:
			t.Errorf("%s (%d): advertised by Kafka %v, by the sidecar %v", kmsg.NameForKey(key), key, okK, okS)
		case k != s && !departs:
			t.Errorf("%s (%d): the sidecar advertises %d–%d, Kafka 4.4 %d–%d", kmsg.NameForKey(key), key, s[0], s[1], k[0], k[1])
		case k == s && departs:
			t.Errorf("%s (%d): listed as departing (%s) but both advertise %d–%d", kmsg.NameForKey(key), key, why, k[0], k[1])
		}
	}

	// DeleteGroups on both: "busy" has a kgo member, "simple" offsets.
	for _, tg := range []struct {
		name, addr string
		rc         *RawConn
		topic      func(string)
	}{
		{"kafka", kc.BootstrapServers(), krc, func(n string) {
			if _, err := kc.Admin(t).CreateTopic(ctx, 1, 1, nil, n); err != nil {
				t.Fatal(err)
			}
		}},
		{"sidecar", sc.Addr, src, func(n string) { createTopic(t, ctx, sc, n, 1, nil) }},
	} {
		tg.topic("dg")
		cl, err := kgo.NewClient(kgo.SeedBrokers(tg.addr), kgo.ConsumerGroup("busy"), kgo.ConsumeTopics("dg"))
		if err != nil {
			t.Fatal(err)
		}
		adm := kadm.NewClient(cl)
		waitFor(t, 60*time.Second, tg.name+": busy Stable", func() bool {
			pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			cl.PollFetches(pctx)
			cancel()
			d, err := adm.DescribeGroups(ctx, "busy")
			return err == nil && d["busy"].State == "Stable"
		})
		for _, v := range []int16{2, 3} {
			o := kadm.Offsets{}
			o.Add(kadm.Offset{Topic: "dg", Partition: 0, At: 1, LeaderEpoch: -1})
			waitFor(t, 30*time.Second, tg.name+": commit of simple", func() bool {
				r, err := adm.CommitOffsets(ctx, "simple", o)
				return err == nil && r.Error() == nil
			})
			req := kmsg.NewPtrDeleteGroupsRequest()
			req.Version = v
			req.Groups = []string{"nope", "busy", "", "simple"}
			r := tg.rc.Request(req).(*kmsg.DeleteGroupsResponse)
			got := map[string]error{}
			for _, g := range r.Groups {
				got[g.Group] = kerr.ErrorForCode(g.ErrorCode)
				if g.ErrorMessage != nil {
					t.Errorf("%s: DeleteGroups v%d %q: error message %q, want null", tg.name, v, g.Group, *g.ErrorMessage)
				}
			}
			want := map[string]error{"nope": kerr.GroupIDNotFound, "busy": kerr.NonEmptyGroup, "": kerr.GroupIDNotFound, "simple": nil}
			if len(got) != len(want) {
				t.Errorf("%s: DeleteGroups v%d answered %v", tg.name, v, got)
			}
			for g, w := range want {
				if got[g] != w {
					t.Errorf("%s: DeleteGroups v%d %q: %v, want %v", tg.name, v, g, got[g], w)
				}
			}
		}
		cl.Close()
	}
}
