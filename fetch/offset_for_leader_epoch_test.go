package fetch

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestOffsetForLeaderEpoch(t *testing.T) {
	e := listOffsetsEnv(t) // leader epoch 2; "l" partition 0 ends at 12
	for _, tc := range []struct {
		name           string
		version        int16
		topic          string
		partition      int32
		current, epoch int32
		errc           *kerr.Error
		wantEpoch      int32
		wantEnd        int64
	}{
		{name: "current epoch: end of log", version: 4, topic: "l", current: -1, epoch: 2, wantEpoch: 2, wantEnd: 12},
		{name: "v0", version: 0, topic: "l", current: -1, epoch: 2, wantEpoch: 2, wantEnd: 12},
		{name: "current leader epoch given", version: 3, topic: "l", current: 2, epoch: 2, wantEpoch: 2, wantEnd: 12},
		{name: "an epoch that never was", version: 4, topic: "l", current: -1, epoch: 1, wantEpoch: -1, wantEnd: -1},
		{name: "a future epoch", version: 4, topic: "l", current: -1, epoch: 7, wantEpoch: -1, wantEnd: -1},
		{name: "fenced", version: 4, topic: "l", current: 1, epoch: 2, errc: kerr.FencedLeaderEpoch, wantEpoch: -1, wantEnd: -1},
		{name: "unknown leader epoch", version: 2, topic: "l", current: 3, epoch: 2, errc: kerr.UnknownLeaderEpoch, wantEpoch: -1, wantEnd: -1},
		{name: "current epoch ignored before v2", version: 1, topic: "l", current: 1, epoch: 2, wantEpoch: 2, wantEnd: 12},
		{name: "unknown topic", version: 4, topic: "nope", current: -1, epoch: 2, errc: kerr.UnknownTopicOrPartition, wantEpoch: -1, wantEnd: -1},
		{name: "unknown partition", version: 4, topic: "l", partition: 9, current: -1, epoch: 2, errc: kerr.UnknownTopicOrPartition, wantEpoch: -1, wantEnd: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := e.h.OffsetForLeaderEpoch(context.Background(), epochReq(tc.version, tc.topic, tc.current, tc.epoch, tc.partition))
			if resp.Version != tc.version || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				t.Fatalf("response shape: %+v", resp)
			}
			p := resp.Topics[0].Partitions[0]
			var wantCode int16
			if tc.errc != nil {
				wantCode = tc.errc.Code
			}
			if p.ErrorCode != wantCode || p.LeaderEpoch != tc.wantEpoch || p.EndOffset != tc.wantEnd || p.Partition != tc.partition {
				t.Fatalf("got (%d, epoch %d, end %d), want (%d, epoch %d, end %d)", p.ErrorCode, p.LeaderEpoch, p.EndOffset, wantCode, tc.wantEpoch, tc.wantEnd)
			}
		})
	}
}
