package broker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/coord"
)

// DescribeConfigs v0..v4, for broker and topic resources.
func init() { registerAPI(32, 0, 4, handleDescribeConfigs) }

// handleDescribeConfigs lists the broker's configs (resource name: its
// broker id) or the cluster's dynamic default broker configs (resource
// name empty), or a topic's configs (its overrides, else the broker's
// defaults), filtered by the requested names. Each value carries its
// source, Kafka's precedence: a topic override (DYNAMIC_TOPIC_CONFIG),
// this broker's dynamic config (DYNAMIC_BROKER_CONFIG), the cluster's
// (DYNAMIC_DEFAULT_BROKER_CONFIG), the static properties
// (STATIC_BROKER_CONFIG), the default (DEFAULT_CONFIG); with
// include_synonyms, every one of those that has a value, in that order.
func handleDescribeConfigs(ctx context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.DescribeConfigsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
	st := b.dyn.Current().Configs
	for _, rr := range r.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType = rr.ResourceType
		sr.ResourceName = rr.ResourceName
		var err error
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeBroker:
			switch rr.ResourceName {
			case "":
				if st == nil {
					break
				}
				defaults := st.Brokers[coord.DefaultBrokerEntity]
				for _, name := range slices.Sorted(maps.Keys(defaults)) {
					if wanted(rr.ConfigNames, name) {
						syn := []configSynonym{{name, defaults[name], kmsg.ConfigSourceDynamicDefaultBrokerConfig}}
						sr.Configs = append(sr.Configs, documented(r, describedConfig(r, name, syn, false)))
					}
				}
			case b.dyn.Entity():
				names := append(config.BrokerKeys(), config.LeaderThrottleRateKey, config.FollowerThrottleRateKey)
				slices.Sort(names)
				for _, name := range names {
					if !wanted(rr.ConfigNames, name) {
						continue
					}
					c := describedConfig(r, name, b.brokerSynonyms(st, name), !config.IsDynamicBrokerKey(name))
					if config.Sensitive(name) {
						// As Kafka: a key or password is never shown.
						c.Value, c.IsSensitive = nil, true
						for i := range c.ConfigSynonyms {
							c.ConfigSynonyms[i].Value = nil
						}
					}
					sr.Configs = append(sr.Configs, documented(r, c))
				}
				if named := migrationKeysNamed(rr.ConfigNames); len(named) > 0 {
					mc := b.migrationConfigs(ctx)
					for _, name := range named {
						if v, ok := mc[name]; ok {
							syn := []configSynonym{{name, v, kmsg.ConfigSourceUnknown}}
							sr.Configs = append(sr.Configs, describedConfig(r, name, syn, true))
						}
					}
				}
			default:
				sr.ErrorCode = kerr.InvalidRequest.Code
				err = fmt.Errorf("broker %s: this is broker %d", rr.ResourceName, b.cfg.BrokerID)
			}
		case kmsg.ConfigResourceTypeTopic:
			if !b.cache.HasTopic(rr.ResourceName) {
				sr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				err = fmt.Errorf("topic %s does not exist", rr.ResourceName)
				break
			}
			configs, watched := b.dyn.WatchedTopicConfigs([]string{rr.ResourceName})[rr.ResourceName]
			if !watched {
				configs = b.replicas.TopicConfigs(ctx, []string{rr.ResourceName})[rr.ResourceName]
			}
			for _, name := range config.TopicKeys() {
				if !wanted(rr.ConfigNames, name) {
					continue
				}
				var syn []configSynonym
				if v, ok := configs[name]; ok {
					syn = append(syn, configSynonym{name, v, kmsg.ConfigSourceDynamicTopicConfig})
				}
				syn = append(syn, b.topicDefaultSynonyms(st, name)...)
				sr.Configs = append(sr.Configs, describedConfig(r, name, syn, false))
			}
		default:
			sr.ErrorCode = kerr.InvalidRequest.Code
			err = fmt.Errorf("resource type %d is not supported", rr.ResourceType)
		}
		if err != nil {
			msg := err.Error()
			sr.ErrorMessage = &msg
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil, nil
}

// configSynonym is one source of a config's value.
type configSynonym struct {
	name, value string
	source      kmsg.ConfigSource
}

// brokerSynonyms returns the sources of broker config name for this
// broker, in precedence order.
func (b *Broker) brokerSynonyms(st *coord.ConfigState, name string) []configSynonym {
	var syn []configSynonym
	for _, v := range b.dyn.BrokerValues(st, name) {
		syn = append(syn, configSynonym{name, v.Value, dynamicSource(v.Entity)})
	}
	if config.IsThrottleRateKey(name) {
		return append(syn, configSynonym{name, strconv.FormatInt(replica.Unthrottled, 10), kmsg.ConfigSourceDefaultConfig})
	}
	v, _ := b.cfg.Get(name)
	return append(syn, configSynonym{name, config.KafkaMeaning(name, v), kmsg.ConfigSourceStaticBrokerConfig})
}

// topicDefaultSynonyms returns the sources of topic config name's default
// for this broker, in precedence order: the dynamic broker configs of its
// broker key, then the static default.
func (b *Broker) topicDefaultSynonyms(st *coord.ConfigState, name string) []configSynonym {
	var syn []configSynonym
	if key := config.TopicConfigSynonym(name); key != "" && config.IsDynamicBrokerKey(key) {
		for _, v := range b.dyn.BrokerValues(st, key) {
			syn = append(syn, configSynonym{key, config.KafkaMeaning(key, v.Value), dynamicSource(v.Entity)})
		}
	}
	name2 := name
	if key := config.TopicConfigSynonym(name); key != "" {
		name2 = key
	}
	return append(syn, configSynonym{name2, b.cfg.TopicDefault(name), kmsg.ConfigSourceDefaultConfig})
}

// dynamicSource is the source of a dynamic broker config of entity.
func dynamicSource(entity string) kmsg.ConfigSource {
	if entity == coord.DefaultBrokerEntity {
		return kmsg.ConfigSourceDynamicDefaultBrokerConfig
	}
	return kmsg.ConfigSourceDynamicBrokerConfig
}

// wanted reports whether name is among names (nil: all names).
func wanted(names []string, name string) bool {
	return names == nil || slices.Contains(names, name)
}

// describedConfig builds one DescribeConfigs entry from its sources in
// precedence order: the first gives the value; the synonyms are listed
// when the request asks for them.
func describedConfig(r *kmsg.DescribeConfigsRequest, name string, syn []configSynonym, readOnly bool) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = name
	value := syn[0].value
	c.Value = &value
	c.ReadOnly = readOnly
	c.Source = syn[0].source
	c.IsDefault = c.Source == kmsg.ConfigSourceDefaultConfig
	c.ConfigType = config.Type(name)
	if r.Version == 0 {
		c.Source = -1
	}
	if r.IncludeSynonyms && r.Version >= 1 {
		for _, s := range syn {
			cs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			v := s.value
			cs.Name, cs.Value, cs.Source = s.name, &v, s.source
			c.ConfigSynonyms = append(c.ConfigSynonyms, cs)
		}
	}
	return c
}

// documented adds a broker property's documentation to c when the
// request asks for it (DescribeConfigs v3+), from the broker's property
// table; a config that is not a broker property keeps none.
func documented(r *kmsg.DescribeConfigsRequest, c kmsg.DescribeConfigsResponseResourceConfig) kmsg.DescribeConfigsResponseResourceConfig {
	if !r.IncludeDocumentation || r.Version < 3 {
		return c
	}
	if doc, ok := config.BrokerKeyDocumentation(c.Name); ok {
		c.Documentation = &doc
	}
	return c
}
