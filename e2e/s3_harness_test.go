package e2e

import (
	"os/exec"
	"testing"

	"github.com/diskless-sidecar/sidecar/internal/s3fault"
	"github.com/diskless-sidecar/sidecar/internal/versitygw"
)

// S3Store is an S3-compatible server (versitygw, on a temporary directory)
// with a bucket, and a fault-injecting proxy in front of it that sidecars
// talk to: tests program faults and count requests on Proxy, and look
// behind it (open multipart uploads) through GW.
type S3Store struct {
	GW     *versitygw.Server
	Proxy  *s3fault.Proxy
	Bucket string
	Prefix string // diskless.storage.s3.prefix
}

// StartS3 starts versitygw and the proxy for the test; versitygw missing
// skips the test, or fails it with SIDECAR_REQUIRE_INTEGRATION=1.
func StartS3(t *testing.T) *S3Store {
	t.Helper()
	skipIfShort(t)
	gw := versitygw.Start(t)
	st := &S3Store{GW: gw, Bucket: "diskless", Prefix: "e2e"}
	gw.CreateBucket(t, st.Bucket)
	st.Proxy = s3fault.Start(t, gw.Endpoint)
	return st
}

// StartSidecarS3 starts a sidecar whose objects go to st through its
// proxy, with credentials in the environment (the SDK's default chain), as
// an operator would run it.
func StartSidecarS3(t *testing.T, st *S3Store, dataDir string, sets ...string) *Sidecar {
	t.Helper()
	return startSidecarS3Cmd(t, exec.Command, st, dataDir, sets...)
}

// startSidecarS3Cmd is StartSidecarS3 with the binary run by command.
func startSidecarS3Cmd(t *testing.T, command func(string, ...string) *exec.Cmd, st *S3Store, dataDir string, sets ...string) *Sidecar {
	t.Helper()
	env := []string{
		"AWS_ACCESS_KEY_ID=" + versitygw.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + versitygw.SecretKey,
		"AWS_EC2_METADATA_DISABLED=true", // never look for an instance role
	}
	base := []string{
		"diskless.storage.backend=s3",
		"diskless.storage.s3.bucket=" + st.Bucket,
		"diskless.storage.s3.prefix=" + st.Prefix,
		"diskless.storage.s3.endpoint=" + st.Proxy.URL,
		"diskless.storage.s3.path.style=true",
		"diskless.storage.s3.region=" + versitygw.Region,
	}
	return startSidecarCmd(t, command, dataDir, env, append(base, sets...)...)
}

// NoOpenUploads fails the test if a multipart upload is left open in the
// bucket (asked of versitygw directly, not through the proxy).
func (st *S3Store) NoOpenUploads(t *testing.T) {
	t.Helper()
	if ups := st.GW.OpenUploads(t, st.Bucket, ""); len(ups) > 0 {
		t.Fatalf("%d multipart uploads left open, the first for %s", len(ups), *ups[0].Key)
	}
}
