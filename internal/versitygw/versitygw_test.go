package versitygw_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"go.uber.org/goleak"

	"github.com/diskless-sidecar/sidecar/internal/versitygw"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStart starts a gateway, creates a bucket, puts an object, opens a
// multipart upload and finds it listed; the cleanup stops the gateway.
func TestStart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts versitygw")
	}
	gw := versitygw.Start(t)
	if !strings.HasPrefix(gw.Endpoint, "http://127.0.0.1:") {
		t.Fatalf("endpoint %s is not on 127.0.0.1", gw.Endpoint)
	}
	gw.CreateBucket(t, "bkt")
	cl := gw.Client(t)
	if _, err := cl.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), Body: strings.NewReader("v")}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateMultipartUpload(t.Context(), &s3.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("p/u")}); err != nil {
		t.Fatal(err)
	}
	if ups := gw.OpenUploads(t, "bkt", "p/"); len(ups) != 1 || aws.ToString(ups[0].Key) != "p/u" {
		t.Fatalf("open uploads %v, want p/u", ups)
	}
	if ups := gw.OpenUploads(t, "bkt", "q/"); len(ups) != 0 {
		t.Fatalf("open uploads under q/: %v", ups)
	}
}
