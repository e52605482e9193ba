package controller

import (
	"errors"
	"fmt"
	"maps"

	"github.com/tripodmq/tripod/coord"
)

// ErrInvalidConfig: a topic config alteration whose outcome the broker's
// validation refuses (Kafka's INVALID_CONFIG). It wraps the validation's
// error, which names the key.
var ErrInvalidConfig = errors.New("controller: invalid config")

// TopicConfigsAlteration is one topic's config change, as
// IncrementalAlterConfigs (Replace false) and AlterConfigs (Replace true)
// ask for it.
type TopicConfigsAlteration struct {
	Topic       string
	Replace     bool
	Alterations []coord.ConfigAlteration
	// Validate checks the topic's configs as they would become, as
	// CreateTopics checks them; nil accepts any.
	Validate func(configs map[string]string) error
	// ValidateOnly decides and plans nothing.
	ValidateOnly bool
}

// AlterTopicConfigs decides a change of a topic's configs: the
// alterations applied to the configs the state holds, validated, and one
// Commit of a SetTopic with the topic otherwise as the state holds it (its
// assignment included). Brokers learn of the new configs by watching them
// (coord.ConfigStore), so the step sends nothing; but when the change
// turns unclean leader election on, the leaderless partitions it lets
// elect are elected in a second step, as Reconcile would. It returns the
// configs as they become. An unchanged config plans nothing. Errors:
// coord.ErrNotFound, ErrInvalidConfig.
func (s *State) AlterTopicConfigs(a TopicConfigsAlteration) (Plan, map[string]string, error) {
	topic, ok := s.md.Topics[a.Topic]
	if !ok {
		return Plan{}, nil, fmt.Errorf("%w: topic %q", coord.ErrNotFound, a.Topic)
	}
	for _, alt := range a.Alterations {
		if err := alt.Validate(); err != nil {
			return Plan{}, nil, fmt.Errorf("%w: topic %q: %v", ErrInvalidConfig, a.Topic, err)
		}
	}
	next := coord.ApplyConfigAlterations(topic.Config, a.Replace, a.Alterations)
	if a.Validate != nil {
		if err := a.Validate(next); err != nil {
			return Plan{}, nil, fmt.Errorf("%w: topic %q: %v", ErrInvalidConfig, a.Topic, err)
		}
	}
	if a.ValidateOnly || maps.Equal(next, topic.Config) || len(next) == 0 && len(topic.Config) == 0 {
		return Plan{}, next, nil
	}
	changed := topic
	changed.Config = next
	var plan Plan
	step := Step{Ops: []coord.Op{coord.SetTopic{Topic: changed}}}
	plan.add(step)
	if !s.unclean(topic) && s.unclean(changed) {
		view := s.clone()
		view.Committed(step)
		plan.add(view.reconcileStep(nil))
	}
	return plan, next, nil
}
