package server

import (
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkProducePipelined measures the server's share of a produce:
// framing, kmsg decode, dispatch, ordered response encode, over loopback TCP
// with a fake Producer that answers at once. Requests are pipelined as a
// client with several in flight would send them. Bytes are record bytes.
func BenchmarkProducePipelined(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10, 1 << 20} {
		b.Run(byteSize(size), func(b *testing.B) {
			ts := startServer(b, nil)
			req := kmsg.NewPtrProduceRequest()
			req.Version = 9
			req.Acks = -1
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = "bench"
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = make([]byte, size)
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			frame := kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)

			c := dialRaw(b, ts.Addr())
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			errc := make(chan error, 1)
			go func() {
				for range b.N {
					if _, err := c.nc.Write(frame); err != nil {
						errc <- err
						return
					}
				}
				errc <- nil
			}()
			for range b.N {
				if _, err := c.readFrame(); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
		})
	}
}

func byteSize(n int) string {
	switch {
	case n >= 1<<20:
		return strconv.Itoa(n>>20) + "MiB"
	case n >= 1<<10:
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}
