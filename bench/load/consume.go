package main

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// consumer drives one kgo client that reads explicit partitions: it counts
// this run's records and their end-to-end latency (receive time minus the
// send time in the record).
type consumer struct {
	cl  *kgo.Client
	st  *stats
	lat *latencyShard
}

// loop polls until ctx is done or the client is closed.
func (c *consumer) loop(ctx context.Context) {
	for {
		fs := c.cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		fs.EachError(func(_ string, _ int32, err error) {
			c.st.countError("fetch", err)
		})
		now := c.st.now()
		countNow := c.st.inWindow(now)
		fs.EachRecord(func(r *kgo.Record) {
			sent, ours := readHeader(r.Value, c.st.runID)
			if !ours {
				c.st.foreign.Add(1)
				return
			}
			n := int64(len(r.Value))
			c.st.consumed.Add(1)
			c.st.consumedBytes.Add(n)
			if countNow {
				c.st.winConsumed.Add(1)
				c.st.winConsumedBytes.Add(n)
			}
			c.lat.record(time.Duration(now-sent), c.st.inWindow(sent))
		})
	}
}
