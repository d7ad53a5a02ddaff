package rpcmsg

import "github.com/twmb/franz-go/pkg/kmsg"

// Every request carries TimeoutMs, the time the receiver may take before
// it answers REQUEST_TIMED_OUT (docs/format/coordinator-rpcs.md §Common
// fields). As for Kafka's own requests with a timeout (kmsg.TimeoutRequest),
// Timeout returns it and SetTimeout sets it, so a client can bound its wait
// for the answer by it (peer.Client).

func (v *DescribeFilesRequest) Timeout() int32      { return v.TimeoutMs }
func (v *DescribeFilesRequest) SetTimeout(ms int32) { v.TimeoutMs = ms }

func (v *CommitFileRequest) Timeout() int32      { return v.TimeoutMs }
func (v *CommitFileRequest) SetTimeout(ms int32) { v.TimeoutMs = ms }

func (v *FindBatchesRequest) Timeout() int32      { return v.TimeoutMs }
func (v *FindBatchesRequest) SetTimeout(ms int32) { v.TimeoutMs = ms }

func (v *ListOffsetsRequest) Timeout() int32      { return v.TimeoutMs }
func (v *ListOffsetsRequest) SetTimeout(ms int32) { v.TimeoutMs = ms }

func (v *DeleteRecordsRequest) Timeout() int32      { return v.TimeoutMs }
func (v *DeleteRecordsRequest) SetTimeout(ms int32) { v.TimeoutMs = ms }

func (v *CreatePartitionsRequest) Timeout() int32      { return v.TimeoutMs }
func (v *CreatePartitionsRequest) SetTimeout(ms int32) { v.TimeoutMs = ms }

func (v *DeleteTopicsRequest) Timeout() int32      { return v.TimeoutMs }
func (v *DeleteTopicsRequest) SetTimeout(ms int32) { v.TimeoutMs = ms }

func (v *DeleteFilesRequest) Timeout() int32      { return v.TimeoutMs }
func (v *DeleteFilesRequest) SetTimeout(ms int32) { v.TimeoutMs = ms }

func (v *AllocateProducerIDsRequest) Timeout() int32      { return v.TimeoutMs }
func (v *AllocateProducerIDsRequest) SetTimeout(ms int32) { v.TimeoutMs = ms }

func (v *DisableTopicRequest) Timeout() int32      { return v.TimeoutMs }
func (v *DisableTopicRequest) SetTimeout(ms int32) { v.TimeoutMs = ms }

// timeoutRequest is what every request of the package implements.
type timeoutRequest interface {
	kmsg.Request
	kmsg.TimeoutRequest
	kmsg.SetTimeoutRequest
}

var (
	_ timeoutRequest = (*DescribeFilesRequest)(nil)
	_ timeoutRequest = (*CommitFileRequest)(nil)
	_ timeoutRequest = (*FindBatchesRequest)(nil)
	_ timeoutRequest = (*ListOffsetsRequest)(nil)
	_ timeoutRequest = (*DeleteRecordsRequest)(nil)
	_ timeoutRequest = (*CreatePartitionsRequest)(nil)
	_ timeoutRequest = (*DeleteTopicsRequest)(nil)
	_ timeoutRequest = (*DeleteFilesRequest)(nil)
	_ timeoutRequest = (*AllocateProducerIDsRequest)(nil)
	_ timeoutRequest = (*DisableTopicRequest)(nil)
)
