package e2e

import (
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/diskless-sidecar/sidecar/internal/acl"
	"github.com/diskless-sidecar/sidecar/internal/batchtest"
	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
	"github.com/diskless-sidecar/sidecar/peer"
	"github.com/diskless-sidecar/sidecar/rpcmsg"
)

// TestClusterSASLSSL: two sidecars of a cluster whose only listener is
// SASL_SSL (SCRAM-SHA-512 for clients, PLAIN for the sidecars' own logins
// to each other: inter.broker.listener.name), with the authorizer on and
// no ACL of User:ANONYMOUS, their Kafka clients (metadata log,
// membership) logged in over SASL_PLAINTEXT to a Kafka whose only other
// listener is PLAINTEXT (SPEC §14, Inter-sidecar traffic):
//
//   - a SCRAM user created through sidecar 2 (forwarded to the
//     controller, sidecar 1) logs in on sidecar 1;
//   - ACLs created on sidecar 1 decide on sidecar 2: an ALLOW lets alice
//     produce there, a DENY refuses her;
//   - alice's records produced through sidecar 2, which hosts no shard
//     (it commits over the coordinator RPCs, authenticated as
//     User:sidecar), are read through sidecar 1;
//   - bob (no CLUSTER_ACTION) calling DisklessCommitFile (101) is refused
//     CLUSTER_AUTHORIZATION_FAILED; the sidecars' own principal is not;
//   - the controller checks a forwarded CreateTopics as the client whose
//     principal the Envelope carries: bob's is refused
//     TOPIC_AUTHORIZATION_FAILED and nothing is created, admin's creates
//     the topic; an Envelope from bob himself is refused
//     CLUSTER_AUTHORIZATION_FAILED (no one else may speak for a client);
//   - no password appears in either sidecar's log.
func TestClusterSASLSSL(t *testing.T) {
	t.Parallel()
	skipIfShort(t)
	kafkatest.Require(t)
	k := kafkatest.Start(t, kafkatest.Options{SASLPlainUsers: map[string]string{"sidecar": "sidecar-kafka-secret"}})
	f := newTLSFiles(t)
	st := StartS3(t)
	ctx := testCtx(t, 6*time.Minute)
	sets := []string{
		"diskless.metadata.log=kafka",
		"diskless.metadata.kafka.bootstrap.servers=" + k.SASLAddr(k.Brokers()[0]),
		"diskless.metadata.kafka.security.protocol=SASL_PLAINTEXT",
		"diskless.metadata.kafka.sasl.mechanism=PLAIN",
		`diskless.metadata.kafka.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="sidecar" password="sidecar-kafka-secret";`,
		"diskless.metadata.topic=meta-sasl-ssl",
		"diskless.metadata.topic.num.partitions=2",
		"diskless.metadata.topic.replication.factor=1",
		"diskless.cluster.enable=true",
		"diskless.append.commit.interval.ms=50",
		"listeners=SASL_SSL://127.0.0.1:0",
		"inter.broker.listener.name=SASL_SSL",
		"ssl.keystore.location=" + f.serverKeystore,
		"ssl.truststore.location=" + f.truststore,
		"sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN",
		"sasl.mechanism.inter.broker.protocol=PLAIN",
		`listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="sidecar" password="sidecar-secret" user_sidecar="sidecar-secret" user_admin="admin-secret";`,
		"authorizer.class.name=" + acl.StandardAuthorizerClass,
		"super.users=User:admin;User:sidecar",
	}
	leader := k.Brokers()[0] // leads both metadata partitions: its sidecar hosts every shard
	sc1 := StartSidecarS3(t, st, "", append(slices.Clone(sets), fmt.Sprintf("node.id=%d", leader))...)
	sc2 := StartSidecarS3(t, st, "", append(slices.Clone(sets), fmt.Sprintf("node.id=%d", leader+1))...)
	addr1, addr2 := sc1.Listeners["SASL_SSL"], sc2.Listeners["SASL_SSL"]
	tlsCfg := f.clientTLS(t, nil)
	client := func(addr string, m sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
		t.Helper()
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DialTLSConfig(tlsCfg), kgo.SASL(m)}, opts...)...)
		mustNoErr(t, "kgo client", err)
		t.Cleanup(cl.Close)
		return cl
	}
	admin := plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()
	admCl1, admCl2 := client(addr1, admin), client(addr2, admin)
	adm1, adm2 := kadm.NewClient(admCl1), kadm.NewClient(admCl2)

	// Both name both, each at its SASL_SSL address. A Metadata request
	// each time: kadm's BrokerMetadata answers from kgo's cached metadata,
	// which a request naming no topic does not refresh, so it kept the
	// first answer (the sidecar before the other joined) for kgo's
	// metadata max age (5 minutes).
	want := []int32{leader, leader + 1}
	for _, cl := range []*kgo.Client{admCl1, admCl2} {
		for {
			req := kmsg.NewPtrMetadataRequest()
			req.Topics = []kmsg.MetadataRequestTopic{}
			m, err := req.RequestWith(ctx, cl)
			var ids []int32
			var controller int32 = -1
			if err == nil {
				for _, b := range m.Brokers {
					ids = append(ids, b.NodeID)
				}
				controller = m.ControllerID
			}
			slices.Sort(ids)
			if err == nil && slices.Equal(ids, want) && controller == leader {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("Metadata: brokers %v controller %d (%v), want %v and %d", ids, controller, err, want, leader)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	// SCRAM users created through sidecar 2 log in on sidecar 1.
	res, err := adm2.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-secret"},
		{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "bob-secret"},
	})
	mustNoErr(t, "create SCRAM users through sidecar 2", errors.Join(err, res.Error()))
	alice := scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()
	bob := scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism()
	for {
		_, err := kadm.NewClient(client(addr1, alice)).BrokerMetadata(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("alice, created through sidecar 2, logs in on sidecar 1: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// ACLs created on sidecar 1 decide on sidecar 2.
	_, err = adm1.CreateTopic(ctx, 2, 1, nil, "sasl-orders")
	mustNoErr(t, "create sasl-orders", err)
	_, err = adm1.CreateTopic(ctx, 1, 1, nil, "sasl-denied")
	mustNoErr(t, "create sasl-denied", err)
	allow := kadm.NewACLs().Allow("User:alice").Topics("sasl-").ResourcePatternType(kadm.ACLPatternPrefixed).
		Operations(kadm.OpAll)
	deny := kadm.NewACLs().Deny("User:alice").Topics("sasl-denied").Operations(kadm.OpWrite)
	for _, b := range []*kadm.ACLBuilder{allow, deny} {
		r, err := adm1.CreateACLs(ctx, b)
		mustNoErr(t, "create ACLs on sidecar 1", err)
		for _, c := range r {
			mustNoErr(t, "create an ACL on sidecar 1", c.Err)
		}
	}
	for {
		d, err := adm2.DescribeACLs(ctx, kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).
			Operations(kadm.OpAny).Allow().Deny().AllowHosts().DenyHosts())
		n := 0
		for _, r := range d {
			n += len(r.Described)
		}
		if err == nil && n == 2 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("sidecar 2 holds %d ACLs (%v), want the 2 created on sidecar 1", n, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	alice2 := client(addr2, alice)
	ids := map[string][16]byte{}
	for _, name := range []string{"sasl-orders", "sasl-denied"} {
		td, err := adm1.ListTopics(ctx, name)
		mustNoErr(t, "list "+name, err)
		ids[name] = td[name].ID
	}
	produce := func(cl *kgo.Client, node int32, topic string, value string) *kmsg.ProduceResponse {
		t.Helper()
		req := produceRequest(topic, batchtest.Make(batchtest.Plain(time.Now().UnixMilli()), batchtest.Values(value, 1)...))
		req.Topics[0].TopicID = ids[topic]
		raw, err := cl.Broker(int(node)).Request(ctx, req)
		mustNoErr(t, "produce to "+topic, err)
		return raw.(*kmsg.ProduceResponse)
	}
	if c := produce(alice2, leader+1, "sasl-denied", "no").Topics[0].Partitions[0].ErrorCode; c != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("alice produces to sasl-denied through sidecar 2: code %d, want TOPIC_AUTHORIZATION_FAILED (the DENY created on sidecar 1)", c)
	}

	// Produced through sidecar 2 (no shard: committed over the RPCs to
	// sidecar 1), read through sidecar 1.
	for i := range 3 {
		p := produce(alice2, leader+1, "sasl-orders", fmt.Sprintf("r%d", i)).Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.BaseOffset != int64(i) {
			t.Fatalf("alice produces through sidecar 2: code %d base offset %d, want 0 and %d", p.ErrorCode, p.BaseOffset, i)
		}
	}
	freq := kmsg.NewPtrFetchRequest()
	freq.Version, freq.MaxWaitMillis, freq.MaxBytes = 12, 100, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = "sasl-orders", ids["sasl-orders"]
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	freq.Topics = append(freq.Topics, ft)
	raw, err := client(addr1, alice).Broker(int(leader)).Request(ctx, freq)
	mustNoErr(t, "alice fetches through sidecar 1", err)
	fpart := raw.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if fpart.ErrorCode != 0 || fpart.HighWatermark != 3 || len(fpart.RecordBatches) == 0 {
		t.Fatalf("alice fetches through sidecar 1: code %d high watermark %d, %d bytes; want 0, 3 and the records",
			fpart.ErrorCode, fpart.HighWatermark, len(fpart.RecordBatches))
	}

	// A coordinator RPC needs CLUSTER_ACTION: bob is refused, the
	// sidecars' own principal is not.
	rpcAs := func(m sasl.Mechanism) *peer.Client {
		pc := peer.NewClient(peer.ClientConfig{TLS: &tls.Config{RootCAs: f.ca.Pool(), MinVersion: tls.VersionTLS12}, SASL: m})
		t.Cleanup(pc.Close)
		return pc
	}
	commit := rpcmsg.NewCommitFileRequest()
	// Of a shard no sidecar has: checked, never committed.
	commit.TimeoutMs, commit.ShardID, commit.ObjectKey = 5000, 99, "no-such-object"
	for _, c := range []struct {
		who     string
		m       sasl.Mechanism
		refused bool
	}{{"bob", bob, true}, {"sidecar", plain.Auth{User: "sidecar", Pass: "sidecar-secret"}.AsMechanism(), false}} {
		raw, err := rpcAs(c.m).Request(ctx, addr1, commit)
		mustNoErr(t, "DisklessCommitFile as "+c.who, err)
		if code := raw.(*rpcmsg.CommitFileResponse).ErrorCode; (code == kerr.ClusterAuthorizationFailed.Code) != c.refused {
			t.Errorf("DisklessCommitFile as %s: code %d, refused CLUSTER_AUTHORIZATION_FAILED: want %v", c.who, code, c.refused)
		}
	}

	// bob may not create topics, through either sidecar...
	bres, err := kadm.NewClient(client(addr2, bob)).CreateTopic(ctx, 1, 1, nil, "bobs-topic")
	if !errors.Is(err, kerr.TopicAuthorizationFailed) && !errors.Is(bres.Err, kerr.TopicAuthorizationFailed) {
		t.Errorf("bob creates a topic through sidecar 2: %v %v, want TOPIC_AUTHORIZATION_FAILED", err, bres.Err)
	}
	// ... nor in an Envelope the controller takes from a sidecar: it
	// checks the principal carried, not the sender.
	sidecarRPC := rpcAs(plain.Auth{User: "sidecar", Pass: "sidecar-secret"}.AsMechanism())
	envelopeAs := func(pc *peer.Client, principal, topic string) *kmsg.EnvelopeResponse {
		t.Helper()
		ct := kmsg.NewPtrCreateTopicsRequest()
		ct.Version, ct.TimeoutMillis = 7, 30000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, -1
		ct.Topics = append(ct.Topics, rt)
		frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("forwarded-client")).AppendRequest(nil, ct, 7)
		pd := kmsg.DefaultPrincipalData{Type: "User", Name: principal}
		env := kmsg.NewPtrEnvelopeRequest()
		env.RequestData, env.RequestPrincipal, env.ClientHostAddress = frame[4:], pd.AppendTo(nil), []byte{127, 0, 0, 1}
		raw, err := pc.Request(ctx, addr1, env)
		mustNoErr(t, "Envelope", err)
		return raw.(*kmsg.EnvelopeResponse)
	}
	innerCode := func(env *kmsg.EnvelopeResponse) int16 {
		t.Helper()
		if env.ErrorCode != 0 {
			t.Fatalf("Envelope refused: %v", kerr.ErrorForCode(env.ErrorCode))
		}
		resp := kmsg.NewPtrCreateTopicsResponse()
		resp.Version = 7
		mustNoErr(t, "the CreateTopics answer inside", resp.ReadFrom(env.ResponseData[4+1:]))
		return resp.Topics[0].ErrorCode
	}
	if c := innerCode(envelopeAs(sidecarRPC, "bob", "bobs-topic")); c != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("CreateTopics forwarded for bob: code %d, want TOPIC_AUTHORIZATION_FAILED", c)
	}
	if c := innerCode(envelopeAs(sidecarRPC, "admin", "admins-topic")); c != 0 {
		t.Errorf("CreateTopics forwarded for admin: %v", kerr.ErrorForCode(c))
	}
	if c := envelopeAs(rpcAs(bob), "admin", "bob-as-admin").ErrorCode; c != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("an Envelope from bob: code %d, want CLUSTER_AUTHORIZATION_FAILED", c)
	}
	td, err := adm1.ListTopics(ctx)
	mustNoErr(t, "list topics", err)
	if !td.Has("admins-topic") || td.Has("bobs-topic") || td.Has("bob-as-admin") {
		t.Errorf("topics %v: want admins-topic alone of the forwarded ones", td.Names())
	}
	// No password in the logs (at debug level).
	for i, s := range []*Sidecar{sc1, sc2} {
		for _, pw := range []string{"sidecar-secret", "sidecar-kafka-secret", "admin-secret", "alice-secret"} {
			if strings.Contains(s.Logs(), pw) {
				t.Errorf("sidecar %d's log shows a password", i+1)
			}
		}
	}
}
