package e2e

import (
	"context"
	"fmt"
	"slices"
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
)

// aclTarget is Kafka or the sidecar, each with an authorizer: admin is a
// super user, bob a user with no ACL but those a case gives him; broker is
// the node id requests are sent to.
type aclTarget struct {
	name       string
	admin, bob *kgo.Client
	broker     int32
}

// send sends req as cl straight to the target's one broker (a client
// would find a group's coordinator first, which bob may not).
func (tg *aclTarget) send(t *testing.T, ctx context.Context, cl *kgo.Client, req kmsg.Request) kmsg.Response {
	t.Helper()
	resp, err := cl.Broker(int(tg.broker)).Request(ctx, req)
	mustNoErr(t, tg.name+" "+kmsg.NameForKey(req.Key()), err)
	return resp
}

// aclCase is one row of the ACL matrix: a request bob sends without the
// ACLs it needs (answered denied, on Kafka and the sidecar alike, and
// nothing changes: unchanged holds) and again with them (answered the
// same by both, with no authorization error).
type aclCase struct {
	name string
	// acls are what bob needs (principal and host are filled in).
	acls []acl.Binding
	// setup prepares the target as admin.
	setup func(t *testing.T, ctx context.Context, tg *aclTarget)
	// req builds the request (topics by name and by id, so that either
	// version a client picks works).
	req func(t *testing.T, ctx context.Context, tg *aclTarget) kmsg.Request
	// codes are the answer's error codes, in a fixed order.
	codes  func(kmsg.Response) []int16
	denied int16
	// unchanged checks, as admin, that the refused request changed nothing.
	unchanged func(t *testing.T, ctx context.Context, tg *aclTarget)
}

func topicACL(name string, ops ...kmsg.ACLOperation) []acl.Binding {
	return resourceACL(kmsg.ACLResourceTypeTopic, name, ops...)
}

func resourceACL(rt kmsg.ACLResourceType, name string, ops ...kmsg.ACLOperation) []acl.Binding {
	var out []acl.Binding
	for _, op := range ops {
		out = append(out, acl.Binding{ResourceType: rt, ResourceName: name, PatternType: kmsg.ACLResourcePatternTypeLiteral,
			Principal: "User:bob", Host: "*", Operation: op, Permission: kmsg.ACLPermissionTypeAllow})
	}
	return out
}

func createTopicAs(t *testing.T, ctx context.Context, tg *aclTarget, name string, partitions int32) {
	t.Helper()
	_, err := kadm.NewClient(tg.admin).CreateTopic(ctx, partitions, -1, nil, name)
	mustNoErr(t, tg.name+" create "+name, err)
}

func topicIDAs(t *testing.T, ctx context.Context, tg *aclTarget, topic string) [16]byte {
	t.Helper()
	td, err := kadm.NewClient(tg.admin).ListTopics(ctx, topic)
	mustNoErr(t, tg.name+" list "+topic, err)
	return td[topic].ID
}

func endOffsetAs(t *testing.T, ctx context.Context, tg *aclTarget, topic string) int64 {
	t.Helper()
	ends, err := kadm.NewClient(tg.admin).ListEndOffsets(ctx, topic)
	mustNoErr(t, tg.name+" end offsets", err)
	o, _ := ends.Lookup(topic, 0)
	return o.Offset
}

func aclCases() []aclCase {
	cluster := func(ops ...kmsg.ACLOperation) []acl.Binding {
		return resourceACL(kmsg.ACLResourceTypeCluster, acl.ClusterName, ops...)
	}
	group := func(name string, ops ...kmsg.ACLOperation) []acl.Binding {
		return resourceACL(kmsg.ACLResourceTypeGroup, name, ops...)
	}
	topicAuth, groupAuth, clusterAuth := kerr.TopicAuthorizationFailed.Code, kerr.GroupAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Code
	return []aclCase{
		{
			name: "Produce needs WRITE on the topic", acls: topicACL("acl-produce", kmsg.ACLOperationWrite),
			setup: func(t *testing.T, ctx context.Context, tg *aclTarget) { createTopicAs(t, ctx, tg, "acl-produce", 1) },
			req: func(t *testing.T, ctx context.Context, tg *aclTarget) kmsg.Request {
				req := produceRequest("acl-produce", batchtest.Make(batchtest.Plain(time.Now().UnixMilli()), batchtest.Values("r", 2)...))
				req.Topics[0].TopicID = topicIDAs(t, ctx, tg, "acl-produce")
				return req
			},
			codes: func(r kmsg.Response) []int16 {
				return []int16{r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode}
			},
			denied: topicAuth,
			unchanged: func(t *testing.T, ctx context.Context, tg *aclTarget) {
				if o := endOffsetAs(t, ctx, tg, "acl-produce"); o != 0 {
					t.Errorf("%s: the refused produce stored records (end offset %d)", tg.name, o)
				}
			},
		},
		{
			name: "Fetch needs READ on the topic", acls: topicACL("acl-fetch", kmsg.ACLOperationRead),
			setup: func(t *testing.T, ctx context.Context, tg *aclTarget) { createTopicAs(t, ctx, tg, "acl-fetch", 1) },
			req: func(t *testing.T, ctx context.Context, tg *aclTarget) kmsg.Request {
				req := kmsg.NewPtrFetchRequest()
				req.Version, req.MaxBytes, req.MaxWaitMillis = 12, 1<<20, 10
				ft := kmsg.NewFetchRequestTopic()
				ft.Topic, ft.TopicID = "acl-fetch", topicIDAs(t, ctx, tg, "acl-fetch")
				fp := kmsg.NewFetchRequestTopicPartition()
				fp.PartitionMaxBytes = 1 << 20
				ft.Partitions = append(ft.Partitions, fp)
				req.Topics = append(req.Topics, ft)
				return req
			},
			codes: func(r kmsg.Response) []int16 {
				return []int16{r.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode}
			},
			denied: topicAuth,
		},
		{
			name: "ListOffsets needs DESCRIBE on the topic", acls: topicACL("acl-list", kmsg.ACLOperationDescribe),
			setup: func(t *testing.T, ctx context.Context, tg *aclTarget) { createTopicAs(t, ctx, tg, "acl-list", 1) },
			req: func(t *testing.T, ctx context.Context, tg *aclTarget) kmsg.Request {
				req := kmsg.NewPtrListOffsetsRequest()
				req.Version = 7
				lt := kmsg.NewListOffsetsRequestTopic()
				lt.Topic = "acl-list"
				lp := kmsg.NewListOffsetsRequestTopicPartition()
				lp.Timestamp = -1
				lt.Partitions = append(lt.Partitions, lp)
				req.Topics = append(req.Topics, lt)
				return req
			},
			codes: func(r kmsg.Response) []int16 {
				return []int16{r.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode}
			},
			denied: topicAuth,
		},
		{
			name: "Metadata of a topic needs DESCRIBE on it", acls: topicACL("acl-meta", kmsg.ACLOperationDescribe),
			setup: func(t *testing.T, ctx context.Context, tg *aclTarget) { createTopicAs(t, ctx, tg, "acl-meta", 1) },
			req: func(t *testing.T, ctx context.Context, tg *aclTarget) kmsg.Request {
				req := kmsg.NewPtrMetadataRequest()
				req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("acl-meta")}}
				return req
			},
			codes:  func(r kmsg.Response) []int16 { return []int16{r.(*kmsg.MetadataResponse).Topics[0].ErrorCode} },
			denied: topicAuth,
		},
		{
			name: "CreateTopics needs CREATE on the topic", acls: topicACL("acl-create", kmsg.ACLOperationCreate),
			req: func(t *testing.T, ctx context.Context, tg *aclTarget) kmsg.Request {
				req := kmsg.NewPtrCreateTopicsRequest()
				req.TimeoutMillis = 30000
				ct := kmsg.NewCreateTopicsRequestTopic()
				ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "acl-create", 1, -1
				req.Topics = append(req.Topics, ct)
				return req
			},
			codes:  func(r kmsg.Response) []int16 { return []int16{r.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode} },
			denied: topicAuth,
			unchanged: func(t *testing.T, ctx context.Context, tg *aclTarget) {
				td, err := kadm.NewClient(tg.admin).ListTopics(ctx, "acl-create")
				mustNoErr(t, "list", err)
				if td.Has("acl-create") {
					t.Errorf("%s: the refused CreateTopics created the topic", tg.name)
				}
			},
		},
		{
			name: "DeleteTopics needs DELETE on the topic", acls: topicACL("acl-delete", kmsg.ACLOperationDelete),
			setup: func(t *testing.T, ctx context.Context, tg *aclTarget) { createTopicAs(t, ctx, tg, "acl-delete", 1) },
			req: func(t *testing.T, ctx context.Context, tg *aclTarget) kmsg.Request {
				req := kmsg.NewPtrDeleteTopicsRequest()
				req.Version, req.TimeoutMillis = 6, 30000
				dt := kmsg.NewDeleteTopicsRequestTopic()
				dt.Topic = kmsg.StringPtr("acl-delete")
				req.Topics = append(req.Topics, dt)
				return req
			},
			codes:  func(r kmsg.Response) []int16 { return []int16{r.(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode} },
			denied: topicAuth,
			unchanged: func(t *testing.T, ctx context.Context, tg *aclTarget) {
				td, err := kadm.NewClient(tg.admin).ListTopics(ctx, "acl-delete")
				mustNoErr(t, "list", err)
				if !td.Has("acl-delete") {
					t.Errorf("%s: the refused DeleteTopics deleted the topic", tg.name)
				}
			},
		},
		{
			name: "CreatePartitions needs ALTER on the topic", acls: topicACL("acl-grow", kmsg.ACLOperationAlter),
			setup: func(t *testing.T, ctx context.Context, tg *aclTarget) { createTopicAs(t, ctx, tg, "acl-grow", 1) },
			req: func(t *testing.T, ctx context.Context, tg *aclTarget) kmsg.Request {
				req := kmsg.NewPtrCreatePartitionsRequest()
				req.TimeoutMillis = 30000
				ct := kmsg.NewCreatePartitionsRequestTopic()
				ct.Topic, ct.Count = "acl-grow", 2
				req.Topics = append(req.Topics, ct)
				return req
			},
			codes:  func(r kmsg.Response) []int16 { return []int16{r.(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode} },
			denied: topicAuth,
			unchanged: func(t *testing.T, ctx context.Context, tg *aclTarget) {
				td, err := kadm.NewClient(tg.admin).ListTopics(ctx, "acl-grow")
				mustNoErr(t, "list", err)
				if n := len(td["acl-grow"].Partitions); n != 1 {
					t.Errorf("%s: the refused CreatePartitions left %d partitions", tg.name, n)
				}
			},
		},
		{
			name: "DescribeConfigs needs DESCRIBE_CONFIGS on the topic", acls: topicACL("acl-dconf", kmsg.ACLOperationDescribeConfigs),
			setup: func(t *testing.T, ctx context.Context, tg *aclTarget) { createTopicAs(t, ctx, tg, "acl-dconf", 1) },
			req: func(t *testing.T, ctx context.Context, tg *aclTarget) kmsg.Request {
				req := kmsg.NewPtrDescribeConfigsRequest()
				rr := kmsg.NewDescribeConfigsRequestResource()
				rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeTopic, "acl-dconf", []string{"retention.ms"}
				req.Resources = append(req.Resources, rr)
				return req
			},
			codes: func(r kmsg.Response) []int16 {
				return []int16{r.(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode}
			},
			denied: topicAuth,
		},
		{
			name: "IncrementalAlterConfigs needs ALTER_CONFIGS on the topic", acls: topicACL("acl-aconf", kmsg.ACLOperationAlterConfigs),
			setup: func(t *testing.T, ctx context.Context, tg *aclTarget) { createTopicAs(t, ctx, tg, "acl-aconf", 1) },
			req: func(t *testing.T, ctx context.Context, tg *aclTarget) kmsg.Request {
				req := kmsg.NewPtrIncrementalAlterConfigsRequest()
				rr := kmsg.NewIncrementalAlterConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "acl-aconf"
				c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
				c.Name, c.Value = "retention.ms", kmsg.StringPtr("123456789")
				rr.Configs = append(rr.Configs, c)
				req.Resources = append(req.Resources, rr)
				return req
			},
			codes: func(r kmsg.Response) []int16 {
				return []int16{r.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode}
			},
			denied: topicAuth,
			unchanged: func(t *testing.T, ctx context.Context, tg *aclTarget) {
				rc, err := kadm.NewClient(tg.admin).DescribeTopicConfigs(ctx, "acl-aconf")
				mustNoErr(t, "describe configs", err)
				for _, r := range rc {
					for _, c := range r.Configs {
						if c.Key == "retention.ms" && c.Value != nil && *c.Value == "123456789" {
							t.Errorf("%s: the refused IncrementalAlterConfigs set retention.ms", tg.name)
						}
					}
				}
			},
		},
		{
			name: "DeleteRecords needs DELETE on the topic", acls: topicACL("acl-trim", kmsg.ACLOperationDelete),
			setup: func(t *testing.T, ctx context.Context, tg *aclTarget) {
				createTopicAs(t, ctx, tg, "acl-trim", 1)
				req := produceRequest("acl-trim", batchtest.Make(batchtest.Plain(time.Now().UnixMilli()), batchtest.Values("r", 3)...))
				req.Topics[0].TopicID = topicIDAs(t, ctx, tg, "acl-trim")
				// Kafka's broker may learn of the topic just created a
				// moment after CreateTopics answered: UNKNOWN_TOPIC_ID
				// (or another retriable code) until then.
				for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
					resp := tg.send(t, ctx, tg.admin, req)
					c := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
					if c == 0 {
						break
					}
					if err := kerr.ErrorForCode(c); !kerr.IsRetriable(err) || time.Now().After(deadline) {
						t.Fatalf("%s: produce to acl-trim: %v", tg.name, err)
					}
				}
			},
			req: func(t *testing.T, ctx context.Context, tg *aclTarget) kmsg.Request {
				req := kmsg.NewPtrDeleteRecordsRequest()
				req.TimeoutMillis = 30000
				rt := kmsg.NewDeleteRecordsRequestTopic()
				rt.Topic = "acl-trim"
				rp := kmsg.NewDeleteRecordsRequestTopicPartition()
				rp.Offset = 2
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				return req
			},
			codes: func(r kmsg.Response) []int16 {
				return []int16{r.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode}
			},
			denied: topicAuth,
			unchanged: func(t *testing.T, ctx context.Context, tg *aclTarget) {
				starts, err := kadm.NewClient(tg.admin).ListStartOffsets(ctx, "acl-trim")
				mustNoErr(t, "start offsets", err)
				if o, _ := starts.Lookup("acl-trim", 0); o.Offset != 0 {
					t.Errorf("%s: the refused DeleteRecords moved the log start to %d", tg.name, o.Offset)
				}
			},
		},
		{
			name: "InitProducerId needs IDEMPOTENT_WRITE on the cluster", acls: cluster(kmsg.ACLOperationIdempotentWrite),
			req: func(t *testing.T, ctx context.Context, tg *aclTarget) kmsg.Request {
				req := kmsg.NewPtrInitProducerIDRequest()
				req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = 60000, -1, -1
				return req
			},
			codes:  func(r kmsg.Response) []int16 { return []int16{r.(*kmsg.InitProducerIDResponse).ErrorCode} },
			denied: clusterAuth,
		},
		{
			name: "FindCoordinator needs DESCRIBE on the group", acls: group("acl-find", kmsg.ACLOperationDescribe),
			req: func(t *testing.T, ctx context.Context, tg *aclTarget) kmsg.Request {
				req := kmsg.NewPtrFindCoordinatorRequest()
				req.Version, req.CoordinatorKeys = 4, []string{"acl-find"}
				return req
			},
			codes: func(r kmsg.Response) []int16 {
				return []int16{r.(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode}
			},
			denied: groupAuth,
		},
		{
			name:  "OffsetCommit needs READ on the group and the topic",
			acls:  append(group("acl-commit", kmsg.ACLOperationRead), topicACL("acl-commit-t", kmsg.ACLOperationRead)...),
			setup: func(t *testing.T, ctx context.Context, tg *aclTarget) { createTopicAs(t, ctx, tg, "acl-commit-t", 1) },
			req: func(t *testing.T, ctx context.Context, tg *aclTarget) kmsg.Request {
				req := kmsg.NewPtrOffsetCommitRequest()
				req.Version, req.Group, req.Generation = 8, "acl-commit", -1
				ct := kmsg.NewOffsetCommitRequestTopic()
				ct.Topic, ct.TopicID = "acl-commit-t", topicIDAs(t, ctx, tg, "acl-commit-t")
				cp := kmsg.NewOffsetCommitRequestTopicPartition()
				cp.Offset = 0
				ct.Partitions = append(ct.Partitions, cp)
				req.Topics = append(req.Topics, ct)
				return req
			},
			codes: func(r kmsg.Response) []int16 {
				return []int16{r.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode}
			},
			denied: groupAuth,
			unchanged: func(t *testing.T, ctx context.Context, tg *aclTarget) {
				offs, err := kadm.NewClient(tg.admin).FetchOffsets(ctx, "acl-commit")
				mustNoErr(t, "fetch offsets", err)
				if _, ok := offs.Lookup("acl-commit-t", 0); ok {
					t.Errorf("%s: the refused OffsetCommit committed an offset", tg.name)
				}
			},
		},
		{
			name: "OffsetFetch needs DESCRIBE on the group", acls: group("acl-ofetch", kmsg.ACLOperationDescribe),
			req: func(t *testing.T, ctx context.Context, tg *aclTarget) kmsg.Request {
				req := kmsg.NewPtrOffsetFetchRequest()
				req.Version = 8
				g := kmsg.NewOffsetFetchRequestGroup()
				g.Group = "acl-ofetch"
				req.Groups = append(req.Groups, g)
				return req
			},
			codes:  func(r kmsg.Response) []int16 { return []int16{r.(*kmsg.OffsetFetchResponse).Groups[0].ErrorCode} },
			denied: groupAuth,
		},
		{
			name: "DescribeGroups needs DESCRIBE on the group", acls: group("acl-dgroup", kmsg.ACLOperationDescribe),
			req: func(t *testing.T, ctx context.Context, tg *aclTarget) kmsg.Request {
				req := kmsg.NewPtrDescribeGroupsRequest()
				req.Groups = []string{"acl-dgroup"}
				return req
			},
			codes:  func(r kmsg.Response) []int16 { return []int16{r.(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode} },
			denied: groupAuth,
		},
		{
			// Kafka 4.4 answers DescribeCluster without any ACL.
			name: "DescribeCluster needs no ACL", acls: cluster(kmsg.ACLOperationDescribe),
			req: func(t *testing.T, ctx context.Context, tg *aclTarget) kmsg.Request {
				return kmsg.NewPtrDescribeClusterRequest()
			},
			codes:  func(r kmsg.Response) []int16 { return []int16{r.(*kmsg.DescribeClusterResponse).ErrorCode} },
			denied: 0,
		},
		{
			name: "DescribeAcls needs DESCRIBE on the cluster", acls: cluster(kmsg.ACLOperationDescribe),
			req: func(t *testing.T, ctx context.Context, tg *aclTarget) kmsg.Request {
				req := kmsg.NewPtrDescribeACLsRequest()
				req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeGroup, kmsg.ACLResourcePatternTypeAny
				req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
				return req
			},
			codes:  func(r kmsg.Response) []int16 { return []int16{r.(*kmsg.DescribeACLsResponse).ErrorCode} },
			denied: clusterAuth,
		},
		{
			name: "CreateAcls needs ALTER on the cluster", acls: cluster(kmsg.ACLOperationAlter),
			req: func(t *testing.T, ctx context.Context, tg *aclTarget) kmsg.Request {
				req := kmsg.NewPtrCreateACLsRequest()
				c := kmsg.NewCreateACLsRequestCreation()
				c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeGroup, "acl-made", kmsg.ACLResourcePatternTypeLiteral
				c.Principal, c.Host, c.Operation, c.PermissionType = "User:carol", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
				req.Creations = append(req.Creations, c)
				return req
			},
			codes:  func(r kmsg.Response) []int16 { return []int16{r.(*kmsg.CreateACLsResponse).Results[0].ErrorCode} },
			denied: clusterAuth,
			unchanged: func(t *testing.T, ctx context.Context, tg *aclTarget) {
				req := kmsg.NewPtrDescribeACLsRequest()
				req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeGroup, kmsg.ACLResourcePatternTypeAny
				req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
				if r := tg.send(t, ctx, tg.admin, req).(*kmsg.DescribeACLsResponse); len(r.Resources) != 0 {
					t.Errorf("%s: the refused CreateAcls created %+v", tg.name, r.Resources)
				}
			},
		},
		{
			name: "AlterUserScramCredentials needs ALTER on the cluster", acls: cluster(kmsg.ACLOperationAlter),
			req: func(t *testing.T, ctx context.Context, tg *aclTarget) kmsg.Request {
				req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
				u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
				u.Name, u.Mechanism, u.Iterations = "acl-scram-user", 2, 4096
				u.Salt, u.SaltedPassword = []byte("salt"), make([]byte, 64)
				req.Upsertions = append(req.Upsertions, u)
				return req
			},
			codes: func(r kmsg.Response) []int16 {
				return []int16{r.(*kmsg.AlterUserSCRAMCredentialsResponse).Results[0].ErrorCode}
			},
			denied: clusterAuth,
			unchanged: func(t *testing.T, ctx context.Context, tg *aclTarget) {
				d, err := kadm.NewClient(tg.admin).DescribeUserSCRAMs(ctx)
				mustNoErr(t, "describe SCRAM", err)
				if _, ok := d["acl-scram-user"]; ok {
					t.Errorf("%s: the refused AlterUserScramCredentials set a credential", tg.name)
				}
			},
		},
		{
			name: "DescribeLogDirs needs DESCRIBE on the cluster", acls: cluster(kmsg.ACLOperationDescribe),
			req: func(t *testing.T, ctx context.Context, tg *aclTarget) kmsg.Request {
				req := kmsg.NewPtrDescribeLogDirsRequest()
				req.Version = 3
				return req
			},
			codes:  func(r kmsg.Response) []int16 { return []int16{r.(*kmsg.DescribeLogDirsResponse).ErrorCode} },
			denied: clusterAuth,
		},
		{
			name: "DescribeTransactions needs DESCRIBE on the transactional id",
			acls: resourceACL(kmsg.ACLResourceTypeTransactionalId, "acl-dtxn", kmsg.ACLOperationDescribe),
			setup: func(t *testing.T, ctx context.Context, tg *aclTarget) {
				// The id exists (Kafka answers NOT_COORDINATOR before its
				// transaction log does): FindCoordinator creates the log,
				// InitProducerId the id, each retried until answered.
				for {
					fc := kmsg.NewPtrFindCoordinatorRequest()
					fc.Version, fc.CoordinatorType, fc.CoordinatorKeys = 4, 1, []string{"acl-dtxn"}
					tg.send(t, ctx, tg.admin, fc)
					ip := kmsg.NewPtrInitProducerIDRequest()
					ip.TransactionalID, ip.TransactionTimeoutMillis, ip.ProducerID, ip.ProducerEpoch = kmsg.StringPtr("acl-dtxn"), 60000, -1, -1
					code := tg.send(t, ctx, tg.admin, ip).(*kmsg.InitProducerIDResponse).ErrorCode
					if code == 0 {
						return
					}
					if ctx.Err() != nil {
						t.Fatalf("%s: InitProducerId acl-dtxn: %v", tg.name, kerr.ErrorForCode(code))
					}
					time.Sleep(100 * time.Millisecond)
				}
			},
			req: func(t *testing.T, ctx context.Context, tg *aclTarget) kmsg.Request {
				req := kmsg.NewPtrDescribeTransactionsRequest()
				req.TransactionalIDs = []string{"acl-dtxn"}
				return req
			},
			codes: func(r kmsg.Response) []int16 {
				return []int16{r.(*kmsg.DescribeTransactionsResponse).TransactionStates[0].ErrorCode}
			},
			denied: kerr.TransactionalIDAuthorizationFailed.Code,
		},
		{
			name: "DescribeProducers needs READ on the topic", acls: topicACL("acl-dprod", kmsg.ACLOperationRead),
			setup: func(t *testing.T, ctx context.Context, tg *aclTarget) { createTopicAs(t, ctx, tg, "acl-dprod", 1) },
			req: func(t *testing.T, ctx context.Context, tg *aclTarget) kmsg.Request {
				req := kmsg.NewPtrDescribeProducersRequest()
				req.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "acl-dprod", Partitions: []int32{0}}}
				return req
			},
			codes: func(r kmsg.Response) []int16 {
				return []int16{r.(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ErrorCode}
			},
			denied: topicAuth,
		},
		{
			name: "WriteTxnMarkers needs CLUSTER_ACTION on the cluster", acls: cluster(kmsg.ACLOperationClusterAction),
			setup: func(t *testing.T, ctx context.Context, tg *aclTarget) { createTopicAs(t, ctx, tg, "acl-wtm", 1) },
			req: func(t *testing.T, ctx context.Context, tg *aclTarget) kmsg.Request {
				req := kmsg.NewPtrWriteTxnMarkersRequest()
				req.Version = 1
				m := kmsg.NewWriteTxnMarkersRequestMarker()
				m.ProducerID, m.ProducerEpoch = 123456, 0
				m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "acl-wtm", Partitions: []int32{0}}}
				req.Markers = append(req.Markers, m)
				return req
			},
			codes: func(r kmsg.Response) []int16 {
				return []int16{r.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode}
			},
			denied: clusterAuth,
		},
	}
}

// changeACLs adds (or, with remove, deletes) bindings as admin and waits
// until DescribeAcls shows the change (Kafka's brokers apply the metadata
// log's records a moment after the controller answers).
func (tg *aclTarget) changeACLs(t *testing.T, ctx context.Context, bindings []acl.Binding, remove bool) {
	t.Helper()
	if remove {
		req := kmsg.NewPtrDeleteACLsRequest()
		for _, b := range bindings {
			f := kmsg.NewDeleteACLsRequestFilter()
			f.ResourceType, f.ResourceName, f.ResourcePatternType = b.ResourceType, kmsg.StringPtr(b.ResourceName), b.PatternType
			f.Principal, f.Host, f.Operation, f.PermissionType = kmsg.StringPtr(b.Principal), kmsg.StringPtr(b.Host), b.Operation, b.Permission
			req.Filters = append(req.Filters, f)
		}
		for _, r := range tg.send(t, ctx, tg.admin, req).(*kmsg.DeleteACLsResponse).Results {
			mustNoErr(t, tg.name+" DeleteAcls", kerr.ErrorForCode(r.ErrorCode))
		}
	} else {
		req := kmsg.NewPtrCreateACLsRequest()
		for _, b := range bindings {
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceType, c.ResourceName, c.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
			c.Principal, c.Host, c.Operation, c.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
			req.Creations = append(req.Creations, c)
		}
		for _, r := range tg.send(t, ctx, tg.admin, req).(*kmsg.CreateACLsResponse).Results {
			mustNoErr(t, tg.name+" CreateAcls", kerr.ErrorForCode(r.ErrorCode))
		}
	}
	for {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
		req.Operation, req.PermissionType, req.Principal = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny, kmsg.StringPtr("User:bob")
		n := 0
		for _, r := range tg.send(t, ctx, tg.admin, req).(*kmsg.DescribeACLsResponse).Resources {
			n += len(r.ACLs)
		}
		if (remove && n == 0) || (!remove && n == len(bindings)) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: bob's ACLs did not become %d (%d)", tg.name, len(bindings), n)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestACLMatrixMatchesKafka sends each aclCases request as bob to Apache
// Kafka 4.4 with StandardAuthorizer and to the sidecar with its
// authorizer: without the ACLs both refuse it with the case's code and
// nothing changes; with them both answer the same codes, none of them an
// authorization failure.
func TestACLMatrixMatchesKafka(t *testing.T) {
	t.Parallel()
	kafkatest.Require(t)
	users := map[string]string{"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
	kc := kafkatest.Start(t, kafkatest.Options{SASLPlainUsers: users, BrokerConfig: map[string]string{
		"authorizer.class.name": acl.StandardAuthorizerClass,
		"super.users":           "User:ANONYMOUS;User:admin",
	}})
	sc := StartSidecar(t, "", aclSidecarSets...)
	ctx := testCtx(t, 6*time.Minute)
	client := func(addr, user string) *kgo.Client {
		opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(0)}
		if user != "" {
			opts = append(opts, kgo.SASL(plain.Auth{User: user, Pass: users[user]}.AsMechanism()))
		}
		cl, err := kgo.NewClient(opts...)
		mustNoErr(t, "client", err)
		t.Cleanup(cl.Close)
		// Learn the broker's node id before sending to it.
		_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		mustNoErr(t, "metadata", err)
		return cl
	}
	targets := []*aclTarget{
		{name: "kafka", admin: client(kc.BootstrapServers(), ""), bob: client(kc.SASLAddr(1), "bob"), broker: 1},
		{name: "sidecar", admin: client(sc.Listeners["SASL_PLAINTEXT"], "admin"), bob: client(sc.Listeners["SASL_PLAINTEXT"], "bob"), broker: 0},
	}
	authCodes := []int16{kerr.TopicAuthorizationFailed.Code, kerr.GroupAuthorizationFailed.Code,
		kerr.ClusterAuthorizationFailed.Code, kerr.TransactionalIDAuthorizationFailed.Code}
	for _, c := range aclCases() {
		t.Run(c.name, func(t *testing.T) {
			got := map[string][]int16{}
			for _, tg := range targets {
				if c.setup != nil {
					c.setup(t, ctx, tg)
				}
				codes := c.codes(tg.send(t, ctx, tg.bob, c.req(t, ctx, tg)))
				for _, code := range codes {
					if code != c.denied {
						t.Errorf("%s without the ACLs: codes %v, want %d", tg.name, codes, c.denied)
					}
				}
				if c.unchanged != nil {
					c.unchanged(t, ctx, tg)
				}
				tg.changeACLs(t, ctx, c.acls, false)
				// Kafka creates __consumer_offsets and __transaction_state
				// on first use: retriable codes until they are there.
				for {
					codes = c.codes(tg.send(t, ctx, tg.bob, c.req(t, ctx, tg)))
					if !slices.ContainsFunc(codes, func(code int16) bool {
						return code == kerr.CoordinatorNotAvailable.Code || code == kerr.CoordinatorLoadInProgress.Code
					}) || ctx.Err() != nil {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				if slices.ContainsFunc(codes, func(code int16) bool { return slices.Contains(authCodes, code) }) {
					t.Errorf("%s with the ACLs: codes %v", tg.name, codes)
				}
				got[tg.name] = codes
				tg.changeACLs(t, ctx, c.acls, true)
			}
			if fmt.Sprint(got["kafka"]) != fmt.Sprint(got["sidecar"]) {
				t.Errorf("with the ACLs Kafka answers %v, the sidecar %v", got["kafka"], got["sidecar"])
			}
		})
	}
}
