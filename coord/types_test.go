package coord

import "testing"

// TestBrokerAddr joins host and port as a dialer expects them, brackets
// around an IPv6 host included.
func TestBrokerAddr(t *testing.T) {
	for _, tc := range []struct {
		host string
		want string
	}{
		{"127.0.0.1", "127.0.0.1:9092"},
		{"broker-1.example", "broker-1.example:9092"},
		{"::1", "[::1]:9092"},
	} {
		if got := (Broker{Host: tc.host, Port: 9092}).Addr(); got != tc.want {
			t.Errorf("Broker{Host: %q, Port: 9092}.Addr(): got %q, want %q", tc.host, got, tc.want)
		}
	}
}
