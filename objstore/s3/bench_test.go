package s3_test

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/diskless-sidecar/sidecar/internal/s3fault"
	"github.com/diskless-sidecar/sidecar/objstore/s3"
)

// benchEnv is newS3Env for a benchmark: versitygw on this machine, through
// the (fault-free) proxy, as in the e2e tests.
func benchEnv(b *testing.B) (*s3Env, *s3.Store) {
	if testing.Short() {
		b.Skip("starts versitygw")
	}
	e := newS3EnvTB(b)
	return e, e.storeTB(b, s3.Config{})
}

// BenchmarkS3Put uploads objects to versitygw with the default part size
// (8 MiB) and concurrency (4): 1 and 8 MiB are one PUT, 64 MiB a multipart
// upload of 8 parts. Reports the requests per object.
func BenchmarkS3Put(b *testing.B) {
	e, s := benchEnv(b)
	for _, size := range []int{1 << 20, 8 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			data := randomBytes(size)
			e.proxy.ResetCounts()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if err := s.Put(b.Context(), fmt.Sprintf("bench/%d/%d", size, i), data); err != nil {
					b.Fatal(err)
				}
			}
			c := e.proxy.Counts()
			n := float64(b.N)
			b.ReportMetric(float64(c[s3fault.PutObject]+c[s3fault.UploadPart]+c[s3fault.CreateMultipartUpload]+c[s3fault.CompleteMultipartUpload]+c[s3fault.HeadObject])/n, "requests/op")
		})
	}
}

// BenchmarkS3HeadObject is the round trip a HEAD after every Put would
// add to the upload stage (Put verifies with the checksum in the answer
// instead).
func BenchmarkS3HeadObject(b *testing.B) {
	e, s := benchEnv(b)
	if err := s.Put(b.Context(), "bench/head", []byte("x")); err != nil {
		b.Fatal(err)
	}
	cl := e.gw.Client(b)
	for b.Loop() {
		if _, err := cl.HeadObject(b.Context(), &awss3.HeadObjectInput{Bucket: aws.String(e.bucket), Key: aws.String("bench/head")}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkS3ReadRange reads 4 MiB ranges (a cache block) of a 64 MiB object.
func BenchmarkS3ReadRange(b *testing.B) {
	_, s := benchEnv(b)
	const size, block = 64 << 20, 4 << 20
	if err := s.Put(b.Context(), "bench/read", randomBytes(size)); err != nil {
		b.Fatal(err)
	}
	p := make([]byte, block)
	b.SetBytes(block)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		// The last block ends at the object's end: io.EOF with it whole.
		if n, _, err := s.ReadRange(b.Context(), "bench/read", int64(i%(size/block))*block, p); err != nil || n != len(p) {
			b.Fatal(err)
		}
	}
}
