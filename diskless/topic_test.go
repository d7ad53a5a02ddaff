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
