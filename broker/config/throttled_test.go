package config

import "testing"

// TestThrottledReplicas reads the throttled replicas configs as Kafka
// does: "*" or partition:broker pairs for this broker.
func TestThrottledReplicas(t *testing.T) {
	tests := []struct {
		value     string
		partition int32
		broker    int32
		want      bool
	}{
		{"", 0, 1, false},
		{"*", 7, 3, true},
		{" * ", 0, 1, true},
		{"0:1", 0, 1, true},
		{"0:1", 0, 2, false},
		{"0:1", 1, 1, false},
		{"0:1,1:2,2:3", 1, 2, true},
		{"0:1, 1:2 ,2:3", 2, 3, true},
		{"0:1,1:2", 2, 3, false},
	}
	for _, tt := range tests {
		if got := ThrottledReplicas(tt.value, tt.partition, tt.broker); got != tt.want {
			t.Errorf("ThrottledReplicas(%q, %d, %d): got %v, want %v", tt.value, tt.partition, tt.broker, got, tt.want)
		}
	}
	for _, good := range []string{"", "*", "0:1", "0:1,1:2", " 0 : 1 , 12:101 "} {
		if err := ValidateThrottledReplicas("leader.replication.throttled.replicas", good); err != nil {
			t.Errorf("validate %q: got %v, want nil", good, err)
		}
	}
	for _, bad := range []string{"**", "0", "0:", ":1", "a:1", "0:b", "-1:1", "0:1,", "0:1;1:2", "*,0:1"} {
		if err := ValidateThrottledReplicas("leader.replication.throttled.replicas", bad); err == nil {
			t.Errorf("validate %q: got nil, want an error", bad)
		}
	}
}
