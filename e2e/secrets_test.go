package e2e

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/diskless-sidecar/sidecar/internal/s3fault"
	"github.com/diskless-sidecar/sidecar/internal/versitygw"
)

// TestNoSecretsInLogsOrMetrics (issue 14; DESIGN §Logging): no
// credential the sidecar is given or sent reaches its log (at debug level)
// or /metrics, also where it fails — the S3 access and secret keys (a
// sidecar serving through S3, and one whose secret key is wrong, so that
// every request to the store is refused, and uploads the store answers
// 403 SignatureDoesNotMatch), the SASL PLAIN passwords of the
// JAAS line, the SCRAM passwords set with AlterUserScramCredentials and
// the wrong passwords of failed logins, and the secrets of a configuration
// that does not load (a JAAS line cut short, an ssl.keystore.key that is
// not a key, ssl.key.password). The sidecar's own Kafka client (the
// metadata log's) takes no credentials yet, so has none to leak.
func TestNoSecretsInLogsOrMetrics(t *testing.T) {
	t.Parallel()
	const (
		plainPW     = "plain-pw-4f1c9e"
		scramPW     = "scram-pw-8b2d7a"
		wrongPW     = "wrong-pw-5e3a1f"
		badS3Secret = "bad-s3-secret-9c6e2b"
		cfgSecret   = "cfg-secret-2a7d4c"
	)
	secrets := []string{plainPW, scramPW, wrongPW, badS3Secret, cfgSecret, versitygw.SecretKey, versitygw.AccessKey}
	st := StartS3(t)
	ctx := testCtx(t, 4*time.Minute)
	jaas := `listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="` + plainPW + `";`
	sc := StartSidecarS3(t, st, "",
		"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512", jaas)

	adm := kadm.NewClient(sc.Client())
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: scramPW}})
	mustNoErr(t, "AlterUserSCRAMs", errors.Join(err, res.Error()))
	addr := sc.Listeners["SASL_PLAINTEXT"]
	for _, m := range []sasl.Mechanism{
		plain.Auth{User: "alice", Pass: plainPW}.AsMechanism(),
		scram.Auth{User: "bob", Pass: scramPW}.AsSha512Mechanism(),
	} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(m), kgo.DefaultProduceTopic("secrets"), kgo.AllowAutoTopicCreation())
		mustNoErr(t, "client", err)
		mustNoErr(t, "produce through S3", cl.ProduceSync(ctx, kgo.StringRecord(m.Name())).FirstErr())
		cl.Close()
	}
	for _, m := range []sasl.Mechanism{
		plain.Auth{User: "alice", Pass: wrongPW}.AsMechanism(),
		plain.Auth{User: wrongPW, Pass: wrongPW}.AsMechanism(),
		scram.Auth{User: "bob", Pass: wrongPW}.AsSha512Mechanism(),
		scram.Auth{User: wrongPW, Pass: wrongPW}.AsSha512Mechanism(),
	} {
		mustRefuseSASL(t, ctx, m.Name()+" with a wrong password", kgo.SeedBrokers(addr), kgo.SASL(m))
	}
	// The store refusing the running sidecar's credentials: a PUT
	// answered 403 SignatureDoesNotMatch fails the produce, logged.
	st.Proxy.Add(&s3fault.Rule{Kind: s3fault.PutObject, Times: 5, Fault: s3fault.Error(http.StatusForbidden, "SignatureDoesNotMatch")})
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(plain.Auth{User: "alice", Pass: plainPW}.AsMechanism()),
		kgo.DefaultProduceTopic("secrets"), kgo.RecordRetries(0))
	mustNoErr(t, "client", err)
	if err := cl.ProduceSync(ctx, kgo.StringRecord("refused")).FirstErr(); err == nil {
		t.Fatal("a produce whose upload got 403 succeeded")
	}
	cl.Close()
	// The harness reads the sidecar's output as it comes: the line may
	// arrive after the answer.
	waitFor(t, 10*time.Second, "the refused upload in the log", func() bool { return strings.Contains(sc.Logs(), "SignatureDoesNotMatch") })
	outputs := map[string]string{"/metrics": metricsText(t, sc)}

	// A sidecar whose S3 secret key is wrong: start-up or its first
	// uploads fail on every request.
	outputs["wrong S3 secret"] = runSidecarBriefly(t, ctx, []string{
		"AWS_ACCESS_KEY_ID=" + versitygw.AccessKey, "AWS_SECRET_ACCESS_KEY=" + badS3Secret, "AWS_EC2_METADATA_DISABLED=true",
	}, "diskless.storage.backend=s3", "diskless.storage.s3.bucket="+st.Bucket, "diskless.storage.s3.endpoint="+st.Proxy.URL,
		"diskless.storage.s3.path.style=true", "diskless.storage.s3.region="+versitygw.Region)
	if !strings.Contains(outputs["wrong S3 secret"], "level") {
		t.Fatalf("the sidecar with a wrong S3 secret logged nothing: %q", outputs["wrong S3 secret"])
	}
	// Configurations that do not load.
	for name, sets := range map[string][]string{
		"JAAS cut short": {"listeners=SASL_PLAINTEXT://127.0.0.1:0",
			`listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_x="` + cfgSecret + `"`},
		"JAAS unterminated": {"listeners=SASL_PLAINTEXT://127.0.0.1:0",
			`listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_x="` + cfgSecret},
		"keystore key not a key": {"listeners=SSL://127.0.0.1:0", "ssl.keystore.key=-----BEGIN PRIVATE KEY-----\n" + cfgSecret + "\n-----END PRIVATE KEY-----",
			"ssl.keystore.certificate.chain=" + cfgSecret},
		"ssl.key.password": {"listeners=SSL://127.0.0.1:0", "ssl.key.password=" + cfgSecret},
	} {
		out := runSidecarBriefly(t, ctx, nil, sets...)
		if !strings.Contains(out, "ssl.") && !strings.Contains(out, "jaas") {
			t.Errorf("%s: the refusal names no key: %q", name, out)
		}
		outputs["config: "+name] = out
	}
	outputs["sidecar"] = sc.Logs() // last: every line the runs above gave it time to arrive
	for where, out := range outputs {
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("%q appears in %s", s, where)
			}
		}
	}
}

// runSidecarBriefly runs the sidecar binary with env and sets (a fresh
// data.dir, debug logs) until it exits or 15 s have passed, and returns
// everything it printed.
func runSidecarBriefly(t *testing.T, ctx context.Context, env []string, sets ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	args := []string{"--set", "http.listener=127.0.0.1:0", "--set", "data.dir=" + t.TempDir(), "--set", "log.level=debug"}
	if !strings.HasPrefix(sets[0], "listeners=") {
		args = append(args, "--set", "listeners=PLAINTEXT://127.0.0.1:0")
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	cmd := exec.CommandContext(ctx, sidecarBin, args...)
	cmd.Env = append(os.Environ(), env...)
	out, _ := cmd.CombinedOutput()
	return string(out)
}
