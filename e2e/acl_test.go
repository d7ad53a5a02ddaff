package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/acl"
	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
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
