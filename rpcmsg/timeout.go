package rpcmsg

// Every request carries TimeoutMs, the time the receiver may take before
// it answers REQUEST_TIMED_OUT (docs/format/coordinator-rpcs.md §Common
// fields). As Kafka's own requests with a timeout do, each implements
// kmsg.TimeoutRequest: Timeout returns it, so a client can bound its wait
// for the answer by it (peer.Client). TestKinds checks every key's request.

func (v *DescribeFilesRequest) Timeout() int32       { return v.TimeoutMs }
func (v *CommitFileRequest) Timeout() int32          { return v.TimeoutMs }
func (v *FindBatchesRequest) Timeout() int32         { return v.TimeoutMs }
func (v *ListOffsetsRequest) Timeout() int32         { return v.TimeoutMs }
func (v *DeleteRecordsRequest) Timeout() int32       { return v.TimeoutMs }
func (v *CreatePartitionsRequest) Timeout() int32    { return v.TimeoutMs }
func (v *DeleteTopicsRequest) Timeout() int32        { return v.TimeoutMs }
func (v *DeleteFilesRequest) Timeout() int32         { return v.TimeoutMs }
func (v *AllocateProducerIDsRequest) Timeout() int32 { return v.TimeoutMs }
func (v *DisableTopicRequest) Timeout() int32        { return v.TimeoutMs }
func (v *CheckTxnRequest) Timeout() int32            { return v.TimeoutMs }
func (v *EndTxnOffsetsRequest) Timeout() int32       { return v.TimeoutMs }
