package topicconfig_test

import (
	"errors"
	"testing"

	"github.com/diskless-sidecar/sidecar/internal/topicconfig"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name    string
		raw     map[string]string
		check   func(c topicconfig.Config) bool
		badName string // the config the error must name; "" = valid
	}{
		{"defaults", nil, func(c topicconfig.Config) bool {
			return c.MaxMessageBytes == 1048588 && !c.LogAppendTime && c.RetentionMs == 604800000 && c.RetentionBytes == -1
		}, ""},
		{"log append time", map[string]string{"message.timestamp.type": "LogAppendTime"}, func(c topicconfig.Config) bool { return c.LogAppendTime }, ""},
		{"max message bytes", map[string]string{"max.message.bytes": "100"}, func(c topicconfig.Config) bool { return c.MaxMessageBytes == 100 }, ""},
		{"retention forever", map[string]string{"retention.ms": "-1"}, func(c topicconfig.Config) bool { return c.RetentionMs == -1 }, ""},
		{"inert config kept", map[string]string{"min.insync.replicas": "2"}, func(c topicconfig.Config) bool { return c.Raw["min.insync.replicas"] == "2" }, ""},
		{"bad timestamp type", map[string]string{"message.timestamp.type": "Wallclock"}, nil, "message.timestamp.type"},
		{"bad max message bytes", map[string]string{"max.message.bytes": "-5"}, nil, "max.message.bytes"},
		{"retention below -1", map[string]string{"retention.ms": "-2"}, nil, "retention.ms"},
		{"compaction refused", map[string]string{"cleanup.policy": "compact"}, nil, "cleanup.policy"},
		{"recompression refused", map[string]string{"compression.type": "gzip"}, nil, "compression.type"},
		{"unknown", map[string]string{"no.such.config": "1"}, nil, "no.such.config"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := topicconfig.Parse(c.raw)
			if c.badName != "" {
				var ce *topicconfig.Error
				if !errors.As(err, &ce) || ce.Name != c.badName {
					t.Fatalf("Parse error = %v, want one naming %s", err, c.badName)
				}
				return
			}
			if err != nil || !c.check(got) {
				t.Fatalf("Parse = %+v, %v", got, err)
			}
		})
	}
}
