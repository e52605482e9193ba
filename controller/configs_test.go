package controller

import (
	"errors"
	"fmt"
	"maps"
	"testing"

	"github.com/tripodmq/tripod/coord"
)

// TestAlterTopicConfigs checks a topic config change: the alterations
// over the configs held, the validation, one SetTopic keeping the
// assignment, and every refusal planning nothing.
func TestAlterTopicConfigs(t *testing.T) {
	set := func(k, v string) coord.ConfigAlteration {
		return coord.ConfigAlteration{Op: coord.ConfigSet, Key: k, Value: v}
	}
	del := func(k string) coord.ConfigAlteration { return coord.ConfigAlteration{Op: coord.ConfigDelete, Key: k} }
	noRetention := func(configs map[string]string) error {
		if v, ok := configs["retention.ms"]; ok && v == "-5" {
			return fmt.Errorf("retention.ms: %s is below -1", v)
		}
		return nil
	}
	tests := []struct {
		name         string
		alteration   TopicConfigsAlteration
		wantConfigs  map[string]string
		want         []string
		wantErr      error
		validateOnly bool
	}{
		{
			name:        "set a key beside the one held",
			alteration:  TopicConfigsAlteration{Topic: "t", Alterations: []coord.ConfigAlteration{set("retention.ms", "1000")}},
			wantConfigs: map[string]string{"min.insync.replicas": "2", "retention.ms": "1000"},
			want:        []string{"set topic t [[1 2] [2 1]]"},
		},
		{
			name:        "delete the key held",
			alteration:  TopicConfigsAlteration{Topic: "t", Alterations: []coord.ConfigAlteration{del("min.insync.replicas")}},
			wantConfigs: map[string]string{},
			want:        []string{"set topic t [[1 2] [2 1]]"},
		},
		{
			name:        "replace the whole set",
			alteration:  TopicConfigsAlteration{Topic: "t", Replace: true, Alterations: []coord.ConfigAlteration{set("cleanup.policy", "compact")}},
			wantConfigs: map[string]string{"cleanup.policy": "compact"},
			want:        []string{"set topic t [[1 2] [2 1]]"},
		},
		{
			name:        "an unchanged config plans nothing",
			alteration:  TopicConfigsAlteration{Topic: "t", Alterations: []coord.ConfigAlteration{set("min.insync.replicas", "2"), del("retention.ms")}},
			wantConfigs: map[string]string{"min.insync.replicas": "2"},
		},
		{
			name:        "validate only plans nothing",
			alteration:  TopicConfigsAlteration{Topic: "t", ValidateOnly: true, Alterations: []coord.ConfigAlteration{set("retention.ms", "1")}},
			wantConfigs: map[string]string{"min.insync.replicas": "2", "retention.ms": "1"},
		},
		{
			name: "unclean election turned on elects the leaderless partition from a live replica",
			alteration: TopicConfigsAlteration{Topic: "t", Alterations: []coord.ConfigAlteration{
				set("unclean.leader.election.enable", "true")}},
			wantConfigs: map[string]string{"min.insync.replicas": "2", "unclean.leader.election.enable": "true"},
			want:        []string{"set topic t [[1 2] [2 1]]", "--", "set t-1 leader 1 epoch 4 isr [1] if 0"},
		},
		{
			name:       "an unknown topic",
			alteration: TopicConfigsAlteration{Topic: "nope", Alterations: []coord.ConfigAlteration{set("retention.ms", "1")}},
			wantErr:    coord.ErrNotFound,
		},
		{
			name:       "the validation refuses the outcome",
			alteration: TopicConfigsAlteration{Topic: "t", Validate: noRetention, Alterations: []coord.ConfigAlteration{set("retention.ms", "-5")}},
			wantErr:    ErrInvalidConfig,
		},
		{
			name:       "an alteration without a key",
			alteration: TopicConfigsAlteration{Topic: "t", Alterations: []coord.ConfigAlteration{set("", "1")}},
			wantErr:    ErrInvalidConfig,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// t-1's leader 2 is dead and its ISR holds only 2: only an
			// unclean election gives it a leader.
			s := newTestState(Policy{}, ids(1),
				part{topic: "t", p: 0, replicas: ids(1, 2), leader: 1, isr: ids(1)},
				part{topic: "t", p: 1, replicas: ids(2, 1), leader: coord.NoBroker, isr: ids(2), leaderEpoch: 3},
			)
			withTopicConfig(s, "t", "min.insync.replicas", "2")
			before := maps.Clone(s.md.Topics["t"].Config)
			plan, configs, err := s.AlterTopicConfigs(tt.alteration)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				if !plan.Empty() {
					t.Errorf("got plan %v with the error, want none", render(t, s, plan))
				}
				if !maps.Equal(s.md.Topics["t"].Config, before) {
					t.Errorf("the refusal changed the state's configs to %v", s.md.Topics["t"].Config)
				}
				return
			}
			if !maps.Equal(configs, tt.wantConfigs) {
				t.Errorf("got configs %v, want %v", configs, tt.wantConfigs)
			}
			checkLines(t, opLines(render(t, s, plan)), tt.want)
			if plan.Empty() {
				return
			}
			op := plan.Steps[0].Ops[0].(coord.SetTopic)
			if !maps.Equal(op.Topic.Config, tt.wantConfigs) || op.Topic.ID != s.md.Topics["t"].ID {
				t.Errorf("SetTopic: got configs %v id %x, want %v and the topic's id", op.Topic.Config, op.Topic.ID, tt.wantConfigs)
			}
			commitAll(s, plan)
			if got := s.md.Topics["t"].Config; !maps.Equal(got, tt.wantConfigs) {
				t.Errorf("after the commit: the state holds %v, want %v", got, tt.wantConfigs)
			}
		})
	}
}
