package diskless

import "testing"

func TestSidecarListener(t *testing.T) {
	s := Sidecar{Host: "10.0.0.1", Port: 9100, Listeners: "INTERNAL://10.0.0.1:9100,EXTERNAL://[::1]:9093,BAD://h:0"}
	for name, want := range map[string]string{"EXTERNAL": "[::1]:9093", "INTERNAL": "10.0.0.1:9100", "OTHER": "10.0.0.1:9100", "BAD": "10.0.0.1:9100"} {
		h, p := s.Listener(name)
		if got := (Sidecar{Host: h, Port: p}).Addr(); got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
}

// TestComparePartitions: topic id bytes first (byte 0 before byte 15,
// unsigned), then the partition.
func TestComparePartitions(t *testing.T) {
	a, b := TopicID{0: 1}, TopicID{0: 2, 15: 0}
	hi := TopicID{15: 0xff}
	for _, tc := range []struct {
		name string
		x, y TopicPartition
		want int
	}{
		{"same", TopicPartition{a, 3}, TopicPartition{a, 3}, 0},
		{"partition", TopicPartition{a, 2}, TopicPartition{a, 10}, -1},
		{"topic before partition", TopicPartition{a, 9}, TopicPartition{b, 0}, -1},
		{"first byte first", TopicPartition{b, 0}, TopicPartition{hi, 0}, 1},
		{"unsigned bytes", TopicPartition{TopicID{0: 0x80}, 0}, TopicPartition{TopicID{0: 0x7f}, 0}, 1},
	} {
		if got := ComparePartitions(tc.x, tc.y); got != tc.want {
			t.Errorf("%s: ComparePartitions(%v, %v) = %d, want %d", tc.name, tc.x, tc.y, got, tc.want)
		}
		if got := ComparePartitions(tc.y, tc.x); got != -tc.want {
			t.Errorf("%s: ComparePartitions(%v, %v) = %d, want %d", tc.name, tc.y, tc.x, got, -tc.want)
		}
	}
}
