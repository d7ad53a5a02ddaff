package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"

	"github.com/diskless-sidecar/sidecar/coordinator"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/sasl"
	"github.com/diskless-sidecar/sidecar/metalog/metalogtest"
)

// startScramServer starts a server with a PLAINTEXT listener (to manage
// credentials) and a SASL_PLAINTEXT one offering SCRAM-SHA-512 and
// SCRAM-SHA-256 over the credentials of a real coordinator (one shard on
// an in-memory metadata log), holding creds (user → credential) at the
// start; it returns both.
func startScramServer(t testing.TB, creds map[string]diskless.ScramCredential, mod func(*Config)) (*testServer, *coordinator.Coordinator) {
	t.Helper()
	store, err := coordinator.Open(coordinator.Config{NumShards: 1, LifecycleInterval: -1, OpenLog: (&metalogtest.Memory{}).Open,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	for user, cred := range creds {
		if res, err := store.AlterScramCredentials(context.Background(), []diskless.ScramChange{{User: user, Credential: cred}}); err != nil || res[0] != nil {
			t.Fatalf("credential of %s: %v %v", user, res, err)
		}
	}
	var mechs []SASLMechanism
	for _, m := range []diskless.ScramMechanism{diskless.ScramSHA512, diskless.ScramSHA256} {
		sc, err := sasl.NewScram(m, store.ScramCredential)
		if err != nil {
			t.Fatal(err)
		}
		mechs = append(mechs, sc)
	}
	return startServer(t, func(c *Config, _ *testServer) {
		c.Addr = ""
		c.Listeners = []Listener{
			{Name: "PLAINTEXT", Protocol: Plaintext, Addr: "127.0.0.1:0"},
			{Name: "SASL_PLAINTEXT", Protocol: SASLPlaintext, Addr: "127.0.0.1:0", SASL: mechs},
		}
		c.Scram = store
		c.FailedAuthDelay = time.Millisecond
		if mod != nil {
			mod(c)
		}
	}), store
}

// loginScram runs SaslHandshake v1 and the SCRAM exchange over
// SaslAuthenticate v2 and returns the last answer.
func loginScram(c *rawConn, mech, user, password string) *kmsg.SASLAuthenticateResponse {
	c.t.Helper()
	hs := c.roundTrip(handshake(1, mech)).(*kmsg.SASLHandshakeResponse)
	if hs.ErrorCode != 0 {
		c.t.Fatalf("SaslHandshake: error %d", hs.ErrorCode)
	}
	gen := xscram.SHA512
	if mech == "SCRAM-SHA-256" {
		gen = xscram.SHA256
	}
	cl, err := gen.NewClient(user, password, "")
	if err != nil {
		c.t.Fatal(err)
	}
	conv := cl.NewConversation()
	msg, _ := conv.Step("")
	for {
		a := c.roundTrip(authenticate(2, msg)).(*kmsg.SASLAuthenticateResponse)
		if a.ErrorCode != 0 {
			return a
		}
		if msg, err = conv.Step(string(a.SASLAuthBytes)); err != nil {
			c.t.Fatalf("client refuses the server's answer: %v", err)
		}
		if conv.Done() {
			if !conv.Valid() {
				c.t.Fatal("server signature not verified")
			}
			return a
		}
	}
}

// TestScramLogins: credentials set with kadm over the PLAINTEXT listener
// (AlterUserScramCredentials) log kgo in over SASL_PLAINTEXT with
// SCRAM-SHA-512 and SCRAM-SHA-256; a wrong password, an unknown user and
// a user of the other mechanism are refused with Kafka's message while
// the others go on; removal ends a user's logins; a SCRAM session
// re-authenticates (KIP-368).
func TestScramLogins(t *testing.T) {
	ts, _ := startScramServer(t, nil, func(c *Config) { c.MaxReauth = time.Hour })
	ctx := context.Background()
	admin, err := kgo.NewClient(kgo.SeedBrokers(ts.ListenerAddr("PLAINTEXT").String()))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "alice-secret"},
		{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "bob-secret"},
	})
	if err != nil || res.Error() != nil {
		t.Fatalf("AlterUserSCRAMs: %v %v", err, res.Error())
	}
	sasAddr := ts.ListenerAddr("SASL_PLAINTEXT").String()
	try := func(opt kgo.Opt) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(sasAddr), opt, kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		return err
	}
	good512 := kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism())
	good256 := kgo.SASL(scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha256Mechanism())
	for name, opt := range map[string]kgo.Opt{"alice SCRAM-SHA-512": good512, "bob SCRAM-SHA-256": good256} {
		if err := try(opt); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for name, opt := range map[string]kgo.Opt{
		"wrong password":   kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secreT"}.AsSha512Mechanism()),
		"unknown user":     kgo.SASL(scram.Auth{User: "carol", Pass: "x"}.AsSha512Mechanism()),
		"other mechanism":  kgo.SASL(scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism()),
		"authzid of other": kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret", Zid: "bob"}.AsSha512Mechanism()),
	} {
		err := try(opt)
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("%s: %v, want SASL_AUTHENTICATION_FAILED", name, err)
		}
		if err := try(good512); err != nil {
			t.Fatalf("alice after %s: %v", name, err)
		}
	}
	// Kafka's messages, over a raw connection.
	addr := ts.ListenerAddr("SASL_PLAINTEXT")
	c := dialRaw(t, addr)
	if a := loginScram(c, "SCRAM-SHA-512", "alice", "nope"); a.ErrorCode != kerr.SaslAuthenticationFailed.Code || a.ErrorMessage == nil ||
		*a.ErrorMessage != "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512" {
		t.Fatalf("wrong password: %d %v", a.ErrorCode, a.ErrorMessage)
	}
	c.expectClosed()
	// Re-authentication: the same user, twice on one connection.
	c = dialRaw(t, addr)
	for range 2 {
		if a := loginScram(c, "SCRAM-SHA-256", "bob", "bob-secret"); a.ErrorCode != 0 || a.SessionLifetimeMillis != 3_600_000 {
			t.Fatalf("bob: %+v", a)
		}
		c.roundTrip(metadataReq())
	}
	if a := loginScram(c, "SCRAM-SHA-256", "bob", "wrong"); a.ErrorCode != kerr.SaslAuthenticationFailed.Code ||
		!strings.Contains(*a.ErrorMessage, "during re-authentication") {
		t.Fatalf("re-authentication with a wrong password: %d %v", a.ErrorCode, a.ErrorMessage)
	}
	c.expectClosed()
	// Removal ends logins.
	if res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "bob", Mechanism: kadm.ScramSha256}}, nil); err != nil || res.Error() != nil {
		t.Fatalf("delete bob: %v %v", err, res.Error())
	}
	if err := try(good256); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("bob after removal: %v", err)
	}
	if !strings.Contains(ts.logs.String(), "failed authentication: SASL") {
		t.Fatal("no failed-authentication line logged")
	}
	for _, secret := range []string{"alice-secret", "alice-secreT", "bob-secret", "carol"} {
		if strings.Contains(ts.logs.String(), secret) {
			t.Fatalf("the log shows %q", secret)
		}
	}
}

// TestScramAdminAnswers: AlterUserScramCredentials and
// DescribeUserScramCredentials answer as Kafka's controller and broker
// (SPEC §14, SCRAM): duplicates, unknown users and mechanisms, iteration
// bounds, removal of a credential not held; describe lists iterations
// only.
func TestScramAdminAnswers(t *testing.T) {
	ts, store := startScramServer(t, map[string]diskless.ScramCredential{
		"delup": sasl.NewScramCredential(diskless.ScramSHA256, "delup-secret", []byte("salt"), 4096),
	}, nil)
	c := dialRaw(t, ts.ListenerAddr("PLAINTEXT"))
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
	alter := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	alter.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		up("ok", 2, 4096), up("ok256", 1, 16384), up("few", 1, 4095), up("many", 2, 16385),
		up("twice", 1, 4096), up("twice", 2, 4096), up("", 1, 4096), up("mech", 3, 4096), up("delup", 1, 4096),
		up("noneup", 1, 4096),
	}
	// A deletion is checked against the credentials held when it is
	// read, before the upsertions: "noneup" holds none, so it is
	// RESOURCE_NOT_FOUND and its upsertion is not read (Kafka's
	// ScramControlManager); "delup" holds one, so its upsertion is the
	// second change.
	alter.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{del("none", 1), del("delup", 1), del("noneup", 1)}
	got := map[string]string{}
	resp := c.roundTrip(alter).(*kmsg.AlterUserSCRAMCredentialsResponse)
	for _, r := range resp.Results {
		if _, dup := got[r.User]; dup {
			t.Fatalf("user %q answered twice", r.User)
		}
		msg := ""
		if r.ErrorMessage != nil {
			msg = *r.ErrorMessage
		}
		got[r.User] = "ok"
		if r.ErrorCode != 0 {
			got[r.User] = kerr.ErrorForCode(r.ErrorCode).Error() + " " + msg
		}
	}
	want := map[string]string{
		"ok": "ok", "ok256": "ok",
		"few":    kerr.UnacceptableCredential.Error() + " Too few iterations",
		"many":   kerr.UnacceptableCredential.Error() + " Too many iterations",
		"twice":  kerr.DuplicateResource.Error() + " A user credential cannot be altered twice in the same request",
		"delup":  kerr.DuplicateResource.Error() + " A user credential cannot be altered twice in the same request",
		"":       kerr.UnacceptableCredential.Error() + " Username must not be empty",
		"mech":   kerr.UnsupportedSaslMechanism.Error() + " Unknown SCRAM mechanism",
		"none":   kerr.ResourceNotFound.Error() + " Attempt to delete a user credential that does not exist",
		"noneup": kerr.ResourceNotFound.Error() + " Attempt to delete a user credential that does not exist",
	}
	for u, w := range want {
		if got[u] != w {
			t.Errorf("user %q: %q, want %q", u, got[u], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("results %v", got)
	}
	if _, ok := store.ScramCredential("twice", diskless.ScramSHA256); ok {
		t.Error("a user named twice got a credential")
	}
	if _, ok := store.ScramCredential("noneup", diskless.ScramSHA256); ok {
		t.Error("the upsertion after a refused deletion was applied")
	}
	if _, ok := store.ScramCredential("delup", diskless.ScramSHA256); !ok {
		t.Error("delup's credential removed by a refused request")
	}

	describe := func(users ...string) map[string]string {
		r := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
		for _, u := range users {
			n := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
			n.Name = u
			r.Users = append(r.Users, n)
		}
		out := map[string]string{}
		for _, res := range c.roundTrip(r).(*kmsg.DescribeUserSCRAMCredentialsResponse).Results {
			s := ""
			if res.ErrorCode != 0 {
				s = kerr.ErrorForCode(res.ErrorCode).Error() + " " + *res.ErrorMessage
			}
			for _, ci := range res.CredentialInfos {
				s += " " + diskless.ScramMechanism(ci.Mechanism).Name() + "/" + string(rune('0'+ci.Iterations/4096))
			}
			out[res.User] = strings.TrimSpace(s)
		}
		return out
	}
	all := describe()
	if names := slices.Sorted(maps.Keys(all)); !slices.Equal(names, []string{"delup", "ok", "ok256"}) || all["delup"] != "SCRAM-SHA-256/1" || all["ok"] != "SCRAM-SHA-512/1" || all["ok256"] != "SCRAM-SHA-256/4" {
		t.Fatalf("describe all: %v", all)
	}
	some := describe("ok", "ok", "nobody", "ok256")
	if some["ok"] != kerr.DuplicateResource.Error()+" Cannot describe SCRAM credentials for the same user twice in a single request: ok" ||
		some["nobody"] != kerr.ResourceNotFound.Error()+" Attempt to describe a user credential that does not exist: nobody" ||
		some["ok256"] != "SCRAM-SHA-256/4" || len(some) != 3 {
		t.Fatalf("describe: %v", some)
	}
}

// TestScramAlterForwarded: in a cluster AlterUserScramCredentials goes to
// the controller (shard 0's host) like the catalog's admin requests; when
// it cannot be reached every user named is answered NOT_CONTROLLER, once,
// and nothing is written here.
func TestScramAlterForwarded(t *testing.T) {
	fc := &fakeController{fail: true}
	ts, store := startScramServer(t, nil, func(c *Config) { c.Controller = fc })
	alter := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	for _, n := range []string{"a", "b", "a"} {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = n, 2, 4096, []byte("s"), []byte("p")
		alter.Upsertions = append(alter.Upsertions, u)
	}
	d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	d.Name, d.Mechanism = "c", 1
	alter.Deletions = append(alter.Deletions, d)
	resp := dialRaw(t, ts.ListenerAddr("PLAINTEXT")).roundTrip(alter).(*kmsg.AlterUserSCRAMCredentialsResponse)
	var users []string
	for _, r := range resp.Results {
		if r.ErrorCode != kerr.NotController.Code {
			t.Fatalf("user %s: error %d, want NOT_CONTROLLER", r.User, r.ErrorCode)
		}
		users = append(users, r.User)
	}
	if fc.forwarded.Load() != 1 || strings.Join(users, ",") != "c,a,b" || len(store.ScramUsers()) != 0 {
		t.Fatalf("forwarded %d, answered %v, store %v", fc.forwarded.Load(), users, store.ScramUsers())
	}
}

// TestScramV0: after SaslHandshake v0 the four SCRAM messages travel bare
// (size-prefixed, unwrapped) and the connection then serves requests; a
// wrong password closes it unanswered, as Kafka does for v0.
func TestScramV0(t *testing.T) {
	ts, _ := startScramServer(t, map[string]diskless.ScramCredential{
		"alice": sasl.NewScramCredential(diskless.ScramSHA256, "alice-secret", []byte("salt"), 4096),
	}, nil)
	login := func(password string) *rawConn {
		c := dialRaw(t, ts.ListenerAddr("SASL_PLAINTEXT"))
		if hs := c.roundTrip(handshake(0, "SCRAM-SHA-256")).(*kmsg.SASLHandshakeResponse); hs.ErrorCode != 0 {
			t.Fatalf("SaslHandshake v0: error %d", hs.ErrorCode)
		}
		cl, err := xscram.SHA256.NewClient("alice", password, "")
		if err != nil {
			t.Fatal(err)
		}
		conv := cl.NewConversation()
		first, _ := conv.Step("")
		c.write(appendRaw(nil, []byte(first)))
		serverFirst, err := c.readFrame()
		if err != nil {
			t.Fatalf("server-first: %v", err)
		}
		final, err := conv.Step(string(serverFirst))
		if err != nil {
			t.Fatal(err)
		}
		c.write(appendRaw(nil, []byte(final)))
		return c
	}
	c := login("alice-secret")
	if serverFinal, err := c.readFrame(); err != nil || !strings.HasPrefix(string(serverFinal), "v=") {
		t.Fatalf("server-final %q, %v", serverFinal, err)
	}
	if md := c.roundTrip(metadataReq()).(*kmsg.MetadataResponse); len(md.Brokers) != 1 {
		t.Fatalf("Metadata after authentication: %+v", md)
	}
	login("wrong").expectClosed()
}
