package rpcmsg

import (
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/tagged"
)

// DescribeFilesRequest is DisklessDescribeFiles (API key 100, KIP-1164):
// what one shard knows of some objects (docs/format/coordinator-rpcs.md
// §100 DisklessDescribeFiles).
type DescribeFilesRequest struct {
	Header
	// TimeoutMs bounds the receiver's work; KIP-1164's default 60000.
	TimeoutMs int32
	// ObjectKeys are the objects asked about.
	ObjectKeys []string
	// ShardID (tag 0) is the shard asked; −1 (absent) is refused per file
	// with INVALID_REQUEST.
	ShardID int32
}

// NewDescribeFilesRequest returns a request at its defaults: TimeoutMs
// 60000, ShardID −1.
func NewDescribeFilesRequest() *DescribeFilesRequest {
	return &DescribeFilesRequest{TimeoutMs: DefaultDescribeFilesTimeoutMs, ShardID: -1}
}

func (*DescribeFilesRequest) Key() int16        { return KeyDescribeFiles }
func (*DescribeFilesRequest) MaxVersion() int16 { return maxVersion }
func (v *DescribeFilesRequest) ResponseKind() kmsg.Response {
	return &DescribeFilesResponse{Header: v.Header}
}

func (v *DescribeFilesRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, v.TimeoutMs)
	dst = appendStrings(dst, v.ObjectKeys)
	if v.ShardID == -1 {
		return tagged.AppendNone(dst)
	}
	return appendTag32(dst, 0, v.ShardID)
}

func (v *DescribeFilesRequest) ReadFrom(b []byte) error {
	if err := checkVersion(v.Key(), v.Version); err != nil {
		return err
	}
	r := newReader(b)
	v.TimeoutMs = r.Int32()
	v.ObjectKeys = r.strings("ObjectKeys")
	v.ShardID = -1
	r.tags(func(tag uint32, f *reader) bool {
		if tag != 0 {
			return false
		}
		v.ShardID = f.Int32()
		return true
	})
	return r.done()
}

// DescribeFilesResponse answers DescribeFilesRequest.
type DescribeFilesResponse struct {
	Header
	ThrottleTimeMs int32
	// Files holds one entry per requested key, in request order.
	Files []DescribeFilesFile
}

// DescribeFilesFile is one object's answer.
type DescribeFilesFile struct {
	ObjectKey string
	ErrorCode int16
	// HasLiveBatches is KIP-1164's: the shard still has batches in it.
	HasLiveBatches bool
	// State (tag 0) is the file's state in the shard, as
	// diskless.FileState: 0 unknown, 1 live, 2 released, 3 closed. When
	// absent it is read as 1 if HasLiveBatches, else 0.
	State int8
}

// fileLive is diskless.FileLive, the state HasLiveBatches stands for.
const fileLive = 1

func (*DescribeFilesResponse) Key() int16        { return KeyDescribeFiles }
func (*DescribeFilesResponse) MaxVersion() int16 { return maxVersion }
func (v *DescribeFilesResponse) RequestKind() kmsg.Request {
	return &DescribeFilesRequest{Header: v.Header, TimeoutMs: DefaultDescribeFilesTimeoutMs, ShardID: -1}
}

func (v *DescribeFilesResponse) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, v.ThrottleTimeMs)
	dst = kbin.AppendCompactArrayLen(dst, len(v.Files))
	for i := range v.Files {
		f := &v.Files[i]
		dst = kbin.AppendCompactString(dst, f.ObjectKey)
		dst = kbin.AppendInt16(dst, f.ErrorCode)
		dst = kbin.AppendBool(dst, f.HasLiveBatches)
		dst = appendTag8(dst, 0, f.State)
	}
	return tagged.AppendNone(dst)
}

func (v *DescribeFilesResponse) ReadFrom(b []byte) error {
	if err := checkVersion(v.Key(), v.Version); err != nil {
		return err
	}
	r := newReader(b)
	v.ThrottleTimeMs = r.Int32()
	n := r.arrayLen("Files", 1+2+1+1)
	v.Files = nil
	if r.ok() {
		v.Files = make([]DescribeFilesFile, n)
	}
	for i := range v.Files {
		f := &v.Files[i]
		f.ObjectKey = r.string("ObjectKey")
		f.ErrorCode = r.Int16()
		f.HasLiveBatches = r.Bool()
		f.State = 0
		if f.HasLiveBatches {
			f.State = fileLive
		}
		r.tags(func(tag uint32, t *reader) bool {
			if tag != 0 {
				return false
			}
			f.State = t.Int8()
			return true
		})
	}
	r.noTags()
	return r.done()
}
