package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/coordinator"
	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
	"github.com/diskless-sidecar/sidecar/metalog/metalogtest"
	"github.com/diskless-sidecar/sidecar/server"
)

// TestScramAdminMatchesKafka sends one sequence of
// AlterUserScramCredentials and DescribeUserScramCredentials requests —
// iteration bounds, an unknown mechanism, an empty name, a user named
// twice, the deletion of a credential held and of one not held followed
// by an upsertion of the same user, describes of every user, of a user
// named twice and of an unknown one — to Apache Kafka 4.4 and to the
// coordinator's credentials behind the server, and requires the same
// answers (SPEC §14, SCRAM credentials), each response's results sorted
// by user (Kafka's follow a hash map).
func TestScramAdminMatchesKafka(t *testing.T) {
	kafkatest.Require(t)
	kc := kafkatest.Start(t, kafkatest.Options{})

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := coordinator.Open(coordinator.Config{NumShards: 1, Logger: quiet, LifecycleInterval: -1, OpenLog: (&metalogtest.Memory{}).Open})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := server.New(server.Config{Addr: "127.0.0.1:0", NodeID: 1, ClusterID: "scram", Logger: quiet, Scram: c}, noProduce{}, noFetch{}, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(context.Background()) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		if err := <-served; err != nil {
			t.Error(err)
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var answers [2][]string
	for i, addr := range []string{kc.BootstrapServers(), s.Addr().String()} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		answers[i] = scramSequence(ctx, t, cl)
		cl.Close()
	}
	if len(answers[0]) != len(answers[1]) {
		t.Fatalf("Kafka answered %d steps, the sidecar %d", len(answers[0]), len(answers[1]))
	}
	for i := range answers[0] {
		if k, sc := answers[0][i], answers[1][i]; k != sc {
			t.Errorf("step %d: Kafka %q, sidecar %q", i, k, sc)
		} else {
			t.Logf("step %d: %s", i, k)
		}
	}
}

// scramSequence sends the sequence to the cluster behind cl and returns
// one line per answer.
func scramSequence(ctx context.Context, t *testing.T, cl *kgo.Client) []string {
	// message shows a null message as null, an empty one as "".
	message := func(msg *string) string {
		if msg == nil {
			return "null"
		}
		return fmt.Sprintf("%q", *msg)
	}
	result := func(user string, code int16, msg *string) string {
		name := "NONE"
		if code != 0 {
			name = kerr.ErrorForCode(code).(*kerr.Error).Message
		}
		return fmt.Sprintf("%q: %s %s", user, name, message(msg))
	}
	up := func(name string, mech int8, iters int32) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = name, mech, iters, []byte("salt"), []byte("salted-password")
		return u
	}
	del := func(name string, mech int8) kmsg.AlterUserSCRAMCredentialsRequestDeletion {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = name, mech
		return d
	}
	alter := func(dels []kmsg.AlterUserSCRAMCredentialsRequestDeletion, ups ...kmsg.AlterUserSCRAMCredentialsRequestUpsertion) string {
		req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		req.Deletions, req.Upsertions = dels, ups
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("AlterUserScramCredentials: %v", err)
		}
		var out []string
		for _, r := range resp.Results {
			out = append(out, result(r.User, r.ErrorCode, r.ErrorMessage))
		}
		slices.Sort(out)
		return fmt.Sprintf("alter %v", out)
	}
	describe := func(users ...string) (string, bool) {
		req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
		for _, u := range users {
			n := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
			n.Name = u
			req.Users = append(req.Users, n)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("DescribeUserScramCredentials: %v", err)
		}
		ok := resp.ErrorCode == 0
		var out []string
		for _, r := range resp.Results {
			s := result(r.User, r.ErrorCode, r.ErrorMessage)
			ok = ok && r.ErrorCode == 0
			for _, ci := range r.CredentialInfos {
				s += fmt.Sprintf(" %d/%d", ci.Mechanism, ci.Iterations)
			}
			out = append(out, s)
		}
		slices.Sort(out)
		return fmt.Sprintf("describe %q: %d %s %v", users, resp.ErrorCode, message(resp.ErrorMessage), out), ok
	}
	// Kafka's broker describes from its metadata image, a moment behind
	// the controller: wait until user's credential shows.
	visible := func(user string) {
		for {
			if _, ok := describe(user); ok {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s's credential never described", user)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	var out []string
	out = append(out, alter(nil, up("delup", 1, 4096)))
	visible("delup")
	out = append(out, alter([]kmsg.AlterUserSCRAMCredentialsRequestDeletion{del("none", 1), del("delup", 1), del("noneup", 1)},
		up("ok", 2, 4096), up("ok256", 1, 16384), up("few", 1, 4095), up("many", 2, 16385),
		up("twice", 1, 4096), up("twice", 2, 4096), up("", 1, 4096), up("mech", 3, 4096), up("delup", 1, 4096),
		up("noneup", 1, 4096)))
	visible("ok256")
	for _, users := range [][]string{nil, {"ok", "ok", "nobody", "ok256"}, {"noneup", "twice", "delup"}} {
		d, _ := describe(users...)
		out = append(out, d)
	}
	out = append(out, alter([]kmsg.AlterUserSCRAMCredentialsRequestDeletion{del("delup", 1), del("ok", 1)}))
	return out
}
