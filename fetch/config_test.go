package fetch

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		field string // the key (or field) named in the error; "" for valid
	}{
		{name: "zero value", cfg: Config{}},
		{name: "all set", cfg: Config{LeaderEpoch: 4, MaxWait: time.Second, MaxBytes: 1 << 20, ReadConcurrency: 2,
			MaxScanTime: time.Second, DecompressConcurrency: 1}},
		{name: "negative leader epoch", cfg: Config{LeaderEpoch: -1}, field: "LeaderEpoch"},
		{name: "negative max wait", cfg: Config{MaxWait: -time.Second}, field: "diskless.fetch.max.wait.ms"},
		{name: "negative max bytes", cfg: Config{MaxBytes: -1}, field: "fetch.max.bytes"},
		{name: "negative read concurrency", cfg: Config{ReadConcurrency: -1}, field: "ReadConcurrency"},
		{name: "negative max scan time", cfg: Config{MaxScanTime: -1}, field: "MaxScanTime"},
		{name: "negative decompress concurrency", cfg: Config{DecompressConcurrency: -1}, field: "DecompressConcurrency"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if (err != nil) != (tc.field != "") || (err != nil && !strings.Contains(err.Error(), tc.field)) {
				t.Errorf("Validate() = %v, want an error naming %q", err, tc.field)
			}
			if _, nerr := New(tc.cfg, newFakeCoord(), newFakeStore()); (nerr != nil) != (err != nil) {
				t.Errorf("New error %v, Validate error %v", nerr, err)
			}
		})
	}
	if _, err := New(Config{}, nil, newFakeStore()); err == nil {
		t.Error("New accepted a nil Coordinator")
	}
	if _, err := New(Config{}, newFakeCoord(), nil); err == nil {
		t.Error("New accepted a nil ObjectReader")
	}
}
