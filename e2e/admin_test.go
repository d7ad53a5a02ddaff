package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestAdminDeleteRecordsAndDescribeConfigs drives DeleteRecords and
// DescribeConfigs with kadm, as operators' tools do.
func TestAdminDeleteRecordsAndDescribeConfigs(t *testing.T) {
	t.Parallel()
	sc := StartSidecar(t, "")
	ctx := testCtx(t, time.Minute)
	const topic = "admin"
	ret := "3600000"
	createTopic(t, ctx, sc, topic, 1, map[string]*string{"retention.ms": &ret})
	prod := sc.Client(kgo.DefaultProduceTopic(topic))
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)})
	}
	mustNoErr(t, "produce", prod.ProduceSync(ctx, recs...).FirstErr())
	adm := kadm.NewClient(sc.Client())

	// DeleteRecords up to offset 4 (inside the one batch): the low
	// watermark moves to 4; reads below it are out of range.
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 4})
	dr, err := adm.DeleteRecords(ctx, offs)
	mustNoErr(t, "DeleteRecords", err)
	r, ok := dr.Lookup(topic, 0)
	if !ok || r.Err != nil || r.LowWatermark != 4 {
		t.Fatalf("DeleteRecords: %+v", r)
	}
	if p := fetchRaw(t, sc.DialRaw(), topic, 0, 0, 1<<20, 0); p.ErrorCode != kerr.OffsetOutOfRange.Code || p.LogStartOffset != 4 {
		t.Fatalf("fetch below the new log start: error %d, log start %d", p.ErrorCode, p.LogStartOffset)
	}
	// Beyond the high watermark: OFFSET_OUT_OF_RANGE.
	var past kadm.Offsets
	past.Add(kadm.Offset{Topic: topic, Partition: 0, At: 99})
	dr, err = adm.DeleteRecords(ctx, past)
	mustNoErr(t, "DeleteRecords past the end", err)
	if r, _ := dr.Lookup(topic, 0); r.Err != kerr.OffsetOutOfRange {
		t.Fatalf("DeleteRecords past the high watermark: %v", r.Err)
	}

	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	mustNoErr(t, "DescribeTopicConfigs", err)
	rc, err := rcs.On(topic, nil)
	mustNoErr(t, "DescribeTopicConfigs result", err)
	got := map[string]string{}
	for _, c := range rc.Configs {
		got[c.Key] = c.MaybeValue()
	}
	if got["retention.ms"] != "3600000" || got["max.message.bytes"] != "1048588" || got["message.timestamp.type"] != "CreateTime" {
		t.Fatalf("configs: %v", got)
	}
}
