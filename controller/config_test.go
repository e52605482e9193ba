package controller

import (
	"strings"
	"testing"
	"time"
)

// TestConfigValidate checks that DefaultConfig is valid and that each
// bad setting is refused naming its key and range.
func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: got %v, want valid", err)
	}
	tests := []struct {
		name string
		set  func(*Config)
		want string // "" when valid
	}{
		{"interval 0", func(c *Config) { c.LeaderImbalanceCheckInterval = 0 }, "leader.imbalance.check.interval.seconds 0s: must be above 0"},
		{"interval negative", func(c *Config) { c.LeaderImbalanceCheckInterval = -time.Second }, "leader.imbalance.check.interval.seconds -1s: must be above 0"},
		{"interval 1ms", func(c *Config) { c.LeaderImbalanceCheckInterval = time.Millisecond }, ""},
		{"percentage -1", func(c *Config) { c.LeaderImbalancePerBrokerPercentage = -1 }, "leader.imbalance.per.broker.percentage -1: must be between 0 and 100"},
		{"percentage 101", func(c *Config) { c.LeaderImbalancePerBrokerPercentage = 101 }, "leader.imbalance.per.broker.percentage 101: must be between 0 and 100"},
		{"percentage 0", func(c *Config) { c.LeaderImbalancePerBrokerPercentage = 0 }, ""},
		{"percentage 100", func(c *Config) { c.LeaderImbalancePerBrokerPercentage = 100 }, ""},
		{"backoff 0", func(c *Config) { c.RetryBackoff = 0 }, "controller RetryBackoff 0s: must be between 1ms and 1m"},
		{"backoff 2m", func(c *Config) { c.RetryBackoff = 2 * time.Minute }, "controller RetryBackoff 2m0s: must be between 1ms and 1m"},
		{"backoff 1ms", func(c *Config) { c.RetryBackoff = time.Millisecond }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.set(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("got %v, want valid", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}

// TestDefaultConfigIsKafkas pins the defaults to Kafka's.
func TestDefaultConfigIsKafkas(t *testing.T) {
	c := DefaultConfig()
	if c.UncleanLeaderElection || !c.AutoLeaderRebalance || c.LeaderImbalanceCheckInterval != 300*time.Second ||
		c.LeaderImbalancePerBrokerPercentage != 10 || c.RetryBackoff != 500*time.Millisecond {
		t.Errorf("got %+v, want unclean off, rebalance on every 300s at 10 %%, retry after 500ms", c)
	}
}
