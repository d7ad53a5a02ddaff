package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/diskless-sidecar/sidecar/internal/acl"
	"github.com/diskless-sidecar/sidecar/internal/batchtest"
	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
	"github.com/diskless-sidecar/sidecar/peer"
	"github.com/diskless-sidecar/sidecar/rpcmsg"
)

// aclSidecarSets are the settings of a sidecar with the authorizer: a
// PLAINTEXT listener (User:ANONYMOUS) and a SASL_PLAINTEXT one with PLAIN
// users admin (a super user), alice and bob.
var aclSidecarSets = []string{
	"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
	"sasl.enabled.mechanisms=PLAIN",
	`listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";`,
	"authorizer.class.name=" + acl.StandardAuthorizerClass,
	"super.users=User:admin",
}

// plainToolConfig writes a Kafka tool's --command-config logging in with
// SASL PLAIN as user.
func plainToolConfig(t *testing.T, user, pass string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), user+".properties")
	body := "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n" +
		`sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="` + user + `" password="` + pass + "\";\n"
	mustNoErr(t, "write the tool's config", os.WriteFile(p, []byte(body), 0o600))
	return p
}

// TestKafkaACLsTool: kafka-acls.sh, logged in as a super user, adds ACLs
// (--add, --producer, --consumer, prefixed), lists them (--list, by topic
// and all) and removes them (--remove); they survive a restart of the
// sidecar; a principal who is not a super user and has no ACL on the
// cluster is refused CLUSTER_AUTHORIZATION_FAILED (the tool fails, nothing
// changes); and a sidecar without an authorizer answers the ACL APIs
// SECURITY_DISABLED.
func TestKafkaACLsTool(t *testing.T) {
	t.Parallel()
	kafkatest.Require(t)
	dataDir := t.TempDir()
	sc := StartSidecar(t, dataDir, aclSidecarSets...)
	ctx := testCtx(t, 5*time.Minute)
	admin := plainToolConfig(t, "admin", "admin-secret")
	acls := func(sc *Sidecar, config string, args ...string) (string, error) {
		t.Helper()
		out, errOut, err := kafkatest.Tool(ctx, "kafka-acls",
			append([]string{"--bootstrap-server", sc.Listeners["SASL_PLAINTEXT"], "--command-config", config}, args...)...)
		return out + errOut, err
	}
	mustACLs := func(sc *Sidecar, args ...string) string {
		t.Helper()
		out, err := acls(sc, admin, args...)
		if err != nil {
			t.Fatalf("kafka-acls %v: %v\n%s", args, err, out)
		}
		return out
	}
	mustACLs(sc, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders")
	mustACLs(sc, "--add", "--allow-principal", "User:alice", "--producer", "--topic", "orders")
	mustACLs(sc, "--add", "--deny-principal", "User:bob", "--deny-host", "10.0.0.9", "--operation", "All",
		"--topic", "orders-", "--resource-pattern-type", "prefixed")
	mustACLs(sc, "--add", "--allow-principal", "User:bob", "--consumer", "--topic", "events", "--group", "readers")
	want := map[string][]string{
		"ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)": {
			"(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
			"(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)",
			"(principal=User:alice, host=*, operation=CREATE, permissionType=ALLOW)",
			"(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)",
		},
		"ResourcePattern(resourceType=TOPIC, name=orders-, patternType=PREFIXED)": {
			"(principal=User:bob, host=10.0.0.9, operation=ALL, permissionType=DENY)",
		},
		"ResourcePattern(resourceType=TOPIC, name=events, patternType=LITERAL)": {
			"(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)",
			"(principal=User:bob, host=*, operation=DESCRIBE, permissionType=ALLOW)",
		},
		"ResourcePattern(resourceType=GROUP, name=readers, patternType=LITERAL)": {
			"(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)",
		},
	}
	checkList := func(sc *Sidecar, when string) {
		t.Helper()
		out := mustACLs(sc, "--list")
		for res, entries := range want {
			i := strings.Index(out, res)
			if i < 0 {
				t.Fatalf("%s: kafka-acls --list shows no %s:\n%s", when, res, out)
			}
			block := out[i:]
			if j := strings.Index(block[len(res):], "Current ACLs for resource"); j >= 0 {
				block = block[:len(res)+j]
			}
			for _, e := range entries {
				if !strings.Contains(block, e) {
					t.Errorf("%s: %s lacks %s:\n%s", when, res, e, block)
				}
			}
			if n := strings.Count(block, "(principal="); n != len(entries) {
				t.Errorf("%s: %s lists %d entries, want %d:\n%s", when, res, n, len(entries), block)
			}
		}
		if n := strings.Count(out, "(principal="); n != 8 {
			t.Errorf("%s: --list shows %d entries, want 8:\n%s", when, n, out)
		}
	}
	checkList(sc, "before the restart")
	if out := mustACLs(sc, "--list", "--topic", "events"); !strings.Contains(out, "operation=READ") || strings.Contains(out, "alice") {
		t.Errorf("kafka-acls --list --topic events:\n%s", out)
	}

	// alice is no super user and holds nothing on the cluster.
	out, err := acls(sc, plainToolConfig(t, "alice", "alice-secret"), "--add", "--allow-principal", "User:alice", "--operation", "All", "--cluster")
	if err == nil || !strings.Contains(out, "ClusterAuthorizationException") {
		t.Errorf("alice adding an ACL: err %v\n%s", err, out)
	}
	dreq := kmsg.NewPtrDescribeACLsRequest()
	dreq.ResourceType, dreq.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	dreq.Operation, dreq.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	anon := sc.Client()
	dresp, err := dreq.RequestWith(ctx, anon)
	mustNoErr(t, "DescribeAcls as User:ANONYMOUS", err)
	if err := kerr.ErrorForCode(dresp.ErrorCode); err != kerr.ClusterAuthorizationFailed || len(dresp.Resources) != 0 {
		t.Errorf("DescribeAcls as User:ANONYMOUS: %v, %d resources; want CLUSTER_AUTHORIZATION_FAILED", err, len(dresp.Resources))
	}

	sc.Stop()
	sc = StartSidecar(t, dataDir, aclSidecarSets...)
	checkList(sc, "after the restart")

	mustACLs(sc, "--remove", "--force", "--allow-principal", "User:bob", "--consumer", "--topic", "events", "--group", "readers")
	out = mustACLs(sc, "--list")
	if strings.Contains(out, "events") || strings.Contains(out, "readers") || strings.Count(out, "(principal=") != 5 {
		t.Errorf("after --remove of bob's consumer ACLs:\n%s", out)
	}

	plainSC := StartSidecar(t, "")
	dresp, err = dreq.RequestWith(ctx, plainSC.Client())
	mustNoErr(t, "DescribeAcls without an authorizer", err)
	if err := kerr.ErrorForCode(dresp.ErrorCode); err != kerr.SecurityDisabled {
		t.Errorf("DescribeAcls without an authorizer: %v, want SECURITY_DISABLED", err)
	}
}

// TestACLChecks drives real clients against a sidecar with the
// authorizer: with ACLs (kafka-acls.sh --producer and --consumer) alice
// produces and consumes in a group; bob, without, is refused
// TOPIC_AUTHORIZATION_FAILED on produce and on fetch, does not see the
// topic in a listing, is refused GROUP_AUTHORIZATION_FAILED joining the
// group, and none of his refused records is stored; User:ANONYMOUS on
// the PLAINTEXT listener cannot create a topic nor call a coordinator RPC
// (CLUSTER_ACTION); with
// allow.everyone.if.no.acl.found a topic no ACL names is open to all.
func TestACLChecks(t *testing.T) {
	t.Parallel()
	kafkatest.Require(t)
	sc := StartSidecar(t, "", aclSidecarSets...)
	ctx := testCtx(t, 4*time.Minute)
	admin := plainToolConfig(t, "admin", "admin-secret")
	tool := func(args ...string) {
		t.Helper()
		out, errOut, err := kafkatest.Tool(ctx, "kafka-acls",
			append([]string{"--bootstrap-server", sc.Listeners["SASL_PLAINTEXT"], "--command-config", admin}, args...)...)
		if err != nil {
			t.Fatalf("kafka-acls %v: %v\n%s%s", args, err, out, errOut)
		}
	}
	asUser := func(user string, opts ...kgo.Opt) *kgo.Client {
		t.Helper()
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(sc.Listeners["SASL_PLAINTEXT"]),
			kgo.SASL(plain.Auth{User: user, Pass: user + "-secret"}.AsMechanism())}, opts...)...)
		mustNoErr(t, "client", err)
		t.Cleanup(cl.Close)
		return cl
	}
	adm := kadm.NewClient(asUser("admin"))
	_, err := adm.CreateTopic(ctx, 2, 1, nil, "orders")
	mustNoErr(t, "create orders as admin", err)
	tool("--add", "--allow-principal", "User:alice", "--producer", "--topic", "orders")
	tool("--add", "--allow-principal", "User:alice", "--consumer", "--topic", "orders", "--group", "alices")

	alice := asUser("alice", kgo.DefaultProduceTopic("orders"), kgo.ConsumeTopics("orders"), kgo.ConsumerGroup("alices"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	mustNoErr(t, "alice produces", alice.ProduceSync(ctx, kgo.StringRecord("a1"), kgo.StringRecord("a2")).FirstErr())
	got := 0
	for got < 2 {
		fs := alice.PollFetches(ctx)
		mustNoErr(t, "alice consumes", fs.Err())
		got += fs.NumRecords()
	}
	mustNoErr(t, "alice commits", alice.CommitUncommittedOffsets(ctx))

	bob := asUser("bob", kgo.DefaultProduceTopic("orders"), kgo.RecordRetries(1), kgo.RequestRetries(1))
	if err := bob.ProduceSync(ctx, kgo.StringRecord("b1")).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("bob produces: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	// The raw requests, so that the client's retries hide nothing.
	preq := produceRequest("orders", batchtest.Make(batchtest.Plain(time.Now().UnixMilli()), batchtest.Values("raw", 1)...))
	ordersID := topicIDOf(t, ctx, adm, "orders") // the client may pick a version with topic ids
	preq.Topics[0].TopicID = ordersID
	presp, err := preq.RequestWith(ctx, bob)
	mustNoErr(t, "bob's raw produce", err)
	if c := presp.Topics[0].Partitions[0].ErrorCode; c != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("bob's raw produce: code %d", c)
	}
	mreq := kmsg.NewPtrMetadataRequest()
	mresp, err := mreq.RequestWith(ctx, bob)
	mustNoErr(t, "bob's metadata", err)
	if len(mresp.Topics) != 0 {
		t.Errorf("bob's listing shows %d topics, want none", len(mresp.Topics))
	}
	mreq.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("orders")}}
	mresp, err = mreq.RequestWith(ctx, bob)
	mustNoErr(t, "bob's metadata of orders", err)
	if len(mresp.Topics) != 1 || mresp.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code || len(mresp.Topics[0].Partitions) != 0 {
		t.Errorf("bob's metadata of orders: %+v", mresp.Topics)
	}
	freq := kmsg.NewPtrFetchRequest()
	freq.Version, freq.MaxWaitMillis, freq.MaxBytes = 12, 100, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = "orders", ordersID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	freq.Topics = append(freq.Topics, ft)
	fresp, err := freq.RequestWith(ctx, bob)
	mustNoErr(t, "bob's fetch", err)
	if p := fresp.Topics[0].Partitions[0]; p.ErrorCode != kerr.TopicAuthorizationFailed.Code || len(p.RecordBatches) != 0 {
		t.Errorf("bob's fetch: code %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
	jreq := kmsg.NewPtrJoinGroupRequest()
	jreq.Group, jreq.ProtocolType, jreq.SessionTimeoutMillis, jreq.RebalanceTimeoutMillis = "alices", "consumer", 10000, 10000
	jreq.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	// Straight to the sidecar: a client finds the coordinator first,
	// which bob may not either (FindCoordinator needs DESCRIBE on the
	// group).
	if err := kadm.NewClient(bob).FindGroupCoordinators(ctx, "alices").Error(); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Errorf("bob finds alices' coordinator: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}
	raw, err := bob.Broker(0).Request(ctx, jreq)
	mustNoErr(t, "bob joins", err)
	if jresp := raw.(*kmsg.JoinGroupResponse); jresp.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("bob joins alices: code %d, want GROUP_AUTHORIZATION_FAILED", jresp.ErrorCode)
	}
	// Nothing of bob's was stored: the end offsets are alice's two records.
	ends, err := adm.ListEndOffsets(ctx, "orders")
	mustNoErr(t, "end offsets", err)
	total := int64(0)
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != 2 {
		t.Errorf("orders holds %d records, want alice's 2", total)
	}

	anon := kadm.NewClient(sc.Client())
	res, err := anon.CreateTopic(ctx, 1, 1, nil, "anon-topic")
	if !errors.Is(err, kerr.TopicAuthorizationFailed) && !errors.Is(res.Err, kerr.TopicAuthorizationFailed) {
		t.Errorf("ANONYMOUS creates a topic: %v %v, want TOPIC_AUTHORIZATION_FAILED", err, res.Err)
	}

	// The coordinator RPCs need CLUSTER_ACTION on the cluster: a client
	// calling DisklessDeleteTopics (106) itself deletes nothing.
	pc := peer.NewClient(peer.ClientConfig{})
	defer pc.Close()
	dreq := rpcmsg.NewDeleteTopicsRequest()
	dreq.TimeoutMs, dreq.TopicIDs = 5000, [][16]byte{ordersID}
	for shard := range int32(2) {
		dreq.ShardID = shard
		raw, err := pc.Request(ctx, sc.Addr, dreq)
		mustNoErr(t, "DisklessDeleteTopics as User:ANONYMOUS", err)
		if c := raw.(*rpcmsg.DeleteTopicsResponse).ErrorCode; c != kerr.ClusterAuthorizationFailed.Code {
			t.Errorf("DisklessDeleteTopics on shard %d as User:ANONYMOUS: code %d, want CLUSTER_AUTHORIZATION_FAILED", shard, c)
		}
	}
	if td, err := adm.ListTopics(ctx, "orders"); err != nil || len(td["orders"].Partitions) != 2 {
		t.Errorf("orders after the refused DisklessDeleteTopics: %v %v", td, err)
	}

	open := StartSidecar(t, "", append(slices.Clone(aclSidecarSets), "allow.everyone.if.no.acl.found=true")...)
	kgoRoundTrip(t, ctx, "free-for-all", 10, kgo.SeedBrokers(open.Addr))
}

func topicIDOf(t *testing.T, ctx context.Context, adm *kadm.Client, topic string) [16]byte {
	t.Helper()
	td, err := adm.ListTopics(ctx, topic)
	mustNoErr(t, "list "+topic, err)
	return td[topic].ID
}
