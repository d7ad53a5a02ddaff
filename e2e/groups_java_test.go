package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
)

// TestGroupsJava: the Java client 4.x subscribes as a group member with
// the classic protocol and with group.protocol=consumer (KIP-848),
// consumes to the end committing synchronously, and the commits are the
// end offsets; a second run of the same group resumes there and reads
// nothing.
func TestGroupsJava(t *testing.T) {
	t.Parallel()
	for _, protocol := range []string{"classic", "consumer"} {
		t.Run(protocol, func(t *testing.T) {
			const partitions, n = 4, 2000
			ctx := testCtx(t, 4*time.Minute)
			sc := StartSidecar(t, "", groupSidecarSets...)
			topic, group := "java-"+protocol, "gj-"+protocol
			createTopic(t, ctx, sc, topic, partitions, nil)
			want := produceValues(t, ctx, sc, topic, partitions, 0, n)
			consume := func(idleMs string) ([]kafkatest.Record, string) {
				stdout, stderr, err := kafkatest.Java(ctx, "Consume", "--bootstrap-server", sc.Addr, "--topic", topic,
					"--group", group, "--idle-timeout-ms", idleMs, "--property", "group.protocol="+protocol)
				if err != nil {
					t.Fatalf("java Consume: %v\n%s", err, stderr)
				}
				recs, err := kafkatest.ParseRecords(stdout)
				if err != nil {
					t.Fatal(err)
				}
				return recs, stderr
			}
			recs, stderr := consume("8000")
			got := map[string]int{}
			for _, r := range recs {
				got[string(r.Value)]++
			}
			for _, v := range want {
				if got[v] != 1 {
					t.Fatalf("record %q consumed %d times; %d records consumed, %d produced\n%s", v, got[v], len(recs), n, stderr)
				}
			}
			adm := kadm.NewClient(sc.Client())
			if ok, why := committedAtEnd(ctx, adm, group, topic, partitions); !ok {
				t.Fatalf("the Java consumer's commits are not at the end: %s", why)
			}
			recs, stderr = consume("4000")
			if len(recs) != 0 || !strings.Contains(stderr, "consumed 0 records") {
				t.Fatalf("the second run of the group read %d records; want none (it resumes at the commits)\n%s", len(recs), stderr)
			}
		})
	}
}

// TestGroupsConsumerGroupsTool: Kafka 4.4's kafka-consumer-groups lists
// the groups and describes a classic and a KIP-848 group with a member:
// its partitions, committed offsets and lag, and the member and its
// assignment; once the member is gone, the lag of records produced since;
// then deletes the group.
func TestGroupsConsumerGroupsTool(t *testing.T) {
	t.Parallel()
	for _, balancer := range []string{"range", "consumer"} {
		t.Run(balancer, func(t *testing.T) {
			const partitions = 4
			ctx := testCtx(t, 4*time.Minute)
			sc := StartSidecar(t, "", groupSidecarSets...)
			topic, group := "tool-"+balancer, "gt-"+balancer
			createTopic(t, ctx, sc, topic, partitions, nil)
			produceValues(t, ctx, sc, topic, partitions, 0, 400)
			m := startMember(t, "m", memberConfig{brokers: sc.Addr, group: group, topic: topic, balancer: balancer, session: 6 * time.Second})
			adm := kadm.NewClient(sc.Client())
			waitFor(t, 60*time.Second, "the member committing every record", func() bool {
				ok, _ := committedAtEnd(ctx, adm, group, topic, partitions)
				return ok
			})
			if out := tool(t, ctx, sc, "kafka-consumer-groups", "--list"); !strings.Contains(out, group) {
				t.Fatalf("kafka-consumer-groups --list does not list %s:\n%s", group, out)
			}
			out := tool(t, ctx, sc, "kafka-consumer-groups", "--describe", "--group", group)
			rows := 0
			for _, l := range lines(out) {
				f := strings.Fields(l)
				// GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
				if len(f) >= 9 && f[0] == group && f[1] == topic {
					rows++
					if f[3] != "100" || f[4] != "100" || f[5] != "0" || f[6] == "-" {
						t.Fatalf("describe row %q: want offset 100, end 100, lag 0 and a consumer id\n%s", l, out)
					}
				}
			}
			if rows != partitions {
				t.Fatalf("kafka-consumer-groups --describe shows %d partitions of %s, want %d:\n%s", rows, topic, partitions, out)
			}
			out = tool(t, ctx, sc, "kafka-consumer-groups", "--describe", "--group", group, "--members", "--verbose")
			if !strings.Contains(out, topic+":0,1,2,3") && !strings.Contains(out, topic+":0,1,2,3)") {
				t.Fatalf("kafka-consumer-groups --describe --members does not show the member owning %s 0–3:\n%s", topic, out)
			}
			m.stop()
			produceValues(t, ctx, sc, topic, partitions, 400, 500)
			var lag string
			defer func() {
				if t.Failed() {
					t.Logf("last kafka-consumer-groups --describe:\n%s", lag)
				}
			}()
			waitFor(t, 60*time.Second, "the group empty with lag 100", func() bool {
				out := tool(t, ctx, sc, "kafka-consumer-groups", "--describe", "--group", group)
				lag = out
				total, members := 0, 0
				for _, l := range lines(out) {
					f := strings.Fields(l)
					if len(f) >= 7 && f[0] == group && f[1] == topic {
						if f[6] != "-" {
							members++
						}
						n := 0
						for _, c := range f[5] {
							n = n*10 + int(c-'0')
						}
						total += n
					}
				}
				return members == 0 && total == 100
			})
			out = tool(t, ctx, sc, "kafka-consumer-groups", "--delete", "--group", group)
			if !strings.Contains(out, "successful") {
				t.Fatalf("kafka-consumer-groups --delete: %s (last describe:\n%s)", out, lag)
			}
			if out := tool(t, ctx, sc, "kafka-consumer-groups", "--list"); strings.Contains(out, group) {
				t.Fatalf("the deleted group is still listed:\n%s", out)
			}
		})
	}
}
