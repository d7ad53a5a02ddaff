package rpcmsg

import (
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/tagged"
)

// DeleteFilesRequest is DisklessDeleteFiles (API key 107): close released
// files in one shard, a record 106 each naming the deleter
// (docs/format/coordinator-rpcs.md §107 DisklessDeleteFiles).
type DeleteFilesRequest struct {
	Header
	TimeoutMs int32
	ShardID   int32
	// DeleterShardID is the owner shard that deletes the objects.
	DeleterShardID int32
	ObjectKeys     []string
}

// NewDeleteFilesRequest returns an empty request.
func NewDeleteFilesRequest() *DeleteFilesRequest { return &DeleteFilesRequest{} }

func (*DeleteFilesRequest) Key() int16        { return KeyDeleteFiles }
func (*DeleteFilesRequest) MaxVersion() int16 { return maxVersion }
func (v *DeleteFilesRequest) ResponseKind() kmsg.Response {
	return &DeleteFilesResponse{Header: v.Header}
}

func (v *DeleteFilesRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, v.TimeoutMs)
	dst = kbin.AppendInt32(dst, v.ShardID)
	dst = kbin.AppendInt32(dst, v.DeleterShardID)
	dst = appendStrings(dst, v.ObjectKeys)
	return tagged.AppendNone(dst)
}

func (v *DeleteFilesRequest) ReadFrom(b []byte) error {
	if err := checkVersion(v.Key(), v.Version); err != nil {
		return err
	}
	r := newReader(b)
	v.TimeoutMs = r.Int32()
	v.ShardID = r.Int32()
	v.DeleterShardID = r.Int32()
	v.ObjectKeys = r.strings("ObjectKeys")
	r.noTags()
	return r.done()
}

// DeleteFilesResponse answers DeleteFilesRequest.
type DeleteFilesResponse struct {
	Header
	ThrottleTimeMs int32
	ErrorCode      int16
	ErrorMessage   *string
}

func (*DeleteFilesResponse) Key() int16        { return KeyDeleteFiles }
func (*DeleteFilesResponse) MaxVersion() int16 { return maxVersion }
func (v *DeleteFilesResponse) RequestKind() kmsg.Request {
	return &DeleteFilesRequest{Header: v.Header}
}

func (v *DeleteFilesResponse) AppendTo(dst []byte) []byte {
	return tagged.AppendNone(appendTop(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage))
}

func (v *DeleteFilesResponse) ReadFrom(b []byte) error {
	if err := checkVersion(v.Key(), v.Version); err != nil {
		return err
	}
	r := newReader(b)
	v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage = r.top()
	r.noTags()
	return r.done()
}
