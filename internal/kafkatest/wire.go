package kafkatest

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// request sends req on a new connection to addr and returns the answer.
// The harness asks its nodes directly rather than through a client, whose
// connection backoff and metadata cache would delay or hide a change.
// req.Version must be set; the caller checks the answer's error codes.
func request(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	const correlationID = 1
	buf := kmsg.NewRequestFormatter(kmsg.FormatterClientID("kafkatest")).AppendRequest(nil, req, correlationID)
	if _, err := conn.Write(buf); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 64<<20 {
		return nil, fmt.Errorf("an answer of %d bytes from %s", n, addr)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(conn, body); err != nil {
		return nil, err
	}
	if id := binary.BigEndian.Uint32(body); id != correlationID {
		return nil, fmt.Errorf("answer from %s has correlation id %d, want %d", addr, id, correlationID)
	}
	body = body[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	// Response header v1 (flexible versions, except ApiVersions, whose
	// header stays v0) ends with tagged fields.
	if resp.IsFlexible() && resp.Key() != kmsg.ApiVersions.Int16() {
		tags, m := binary.Uvarint(body)
		if m <= 0 {
			return nil, fmt.Errorf("bad response header from %s", addr)
		}
		body = body[m:]
		for range tags {
			if _, m = binary.Uvarint(body); m <= 0 {
				return nil, fmt.Errorf("bad response header tag from %s", addr)
			}
			body = body[m:]
			l, m := binary.Uvarint(body)
			if m <= 0 || uint64(len(body)-m) < l {
				return nil, fmt.Errorf("bad response header tag from %s", addr)
			}
			body = body[m+int(l):]
		}
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decoding %T v%d from %s: %w", resp, req.GetVersion(), addr, err)
	}
	return resp, nil
}

// apiVersions asks addr for ApiVersions v0, which every Kafka listener, a
// controller's included, answers before anything else.
func apiVersions(ctx context.Context, addr string) (*kmsg.ApiVersionsResponse, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	resp, err := request(ctx, addr, req)
	if err != nil {
		return nil, err
	}
	r := resp.(*kmsg.ApiVersionsResponse)
	if r.ErrorCode != 0 {
		return nil, fmt.Errorf("ApiVersions error code %d from %s", r.ErrorCode, addr)
	}
	return r, nil
}

// brokerMetadata asks addr for Metadata v12 with no topics: the live
// (registered and unfenced) brokers and a controller id.
func brokerMetadata(ctx context.Context, addr string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	req.Topics = []kmsg.MetadataRequestTopic{}
	resp, err := request(ctx, addr, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.MetadataResponse), nil
}
