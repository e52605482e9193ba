package broker

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeConfigs v0..v4, for broker and topic resources.
func init() { registerAPI(32, 0, 4, handleDescribeConfigs) }

// handleDescribeConfigs lists the broker's properties (resource name: its
// broker id, or empty) or a topic's configs (its overrides, else the
// broker's defaults), filtered by the requested names.
func handleDescribeConfigs(ctx context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.DescribeConfigsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range r.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType = rr.ResourceType
		sr.ResourceName = rr.ResourceName
		var err error
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeBroker:
			if rr.ResourceName != "" && rr.ResourceName != strconv.Itoa(int(b.cfg.BrokerID)) {
				sr.ErrorCode = kerr.InvalidRequest.Code
				err = fmt.Errorf("broker %s: this is broker %d", rr.ResourceName, b.cfg.BrokerID)
				break
			}
			for _, name := range BrokerKeys() {
				if !wanted(rr.ConfigNames, name) {
					continue
				}
				v, _ := b.cfg.Get(name)
				v = kafkaMeaning(name, v)
				c := describedConfig(r.Version, name, v, kmsg.ConfigSourceStaticBrokerConfig, true)
				if sslKeys[name].sensitive || saslKeys[name].sensitive || coordSensitiveKeys[name] {
					// As Kafka: a key or password is never shown.
					c.Value, c.IsSensitive = nil, true
				}
				sr.Configs = append(sr.Configs, c)
			}
		case kmsg.ConfigResourceTypeTopic:
			_, ok := b.cache.topic(rr.ResourceName)
			configs := b.topicConfigs(ctx, []string{rr.ResourceName})[rr.ResourceName]
			if !ok {
				sr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				err = fmt.Errorf("topic %s does not exist", rr.ResourceName)
				break
			}
			for _, name := range topicKeyNames() {
				if !wanted(rr.ConfigNames, name) {
					continue
				}
				v, ok := configs[name]
				source := kmsg.ConfigSourceDynamicTopicConfig
				if !ok {
					v = b.cfg.topicDefault(name)
					source = kmsg.ConfigSourceDefaultConfig
				}
				sr.Configs = append(sr.Configs, describedConfig(r.Version, name, v, source, false))
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

// wanted reports whether name is among names (nil: all names).
func wanted(names []string, name string) bool {
	return names == nil || slices.Contains(names, name)
}

// describedConfig builds one DescribeConfigs entry.
func describedConfig(version int16, name, value string, source kmsg.ConfigSource, readOnly bool) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = name
	c.Value = &value
	c.ReadOnly = readOnly
	c.Source = source
	c.IsDefault = source == kmsg.ConfigSourceDefaultConfig
	c.ConfigType = configType(name)
	if version == 0 {
		c.Source = -1
	}
	return c
}

// configType is the declared type of a config, for DescribeConfigs v3+.
func configType(name string) kmsg.ConfigType {
	if k, ok := sslKeys[name]; ok {
		switch {
		case k.sensitive:
			return kmsg.ConfigTypePassword
		case name == "ssl.enabled.protocols" || name == "ssl.cipher.suites":
			return kmsg.ConfigTypeList
		}
		return kmsg.ConfigTypeString
	}
	if k, ok := saslKeys[name]; ok {
		return k.configType
	}
	if coordSensitiveKeys[name] {
		return kmsg.ConfigTypePassword
	}
	switch name {
	case "listeners", "advertised.listeners", "log.dirs", "cleanup.policy", "listener.security.protocol.map",
		"inter.broker.listener.name", "security.inter.broker.protocol":
		return kmsg.ConfigTypeString
	case "auto.create.topics.enable":
		return kmsg.ConfigTypeBoolean
	case "broker.id", "num.partitions", "socket.request.max.bytes", "message.max.bytes", "max.message.bytes", "segment.bytes", "index.interval.bytes":
		return kmsg.ConfigTypeInt
	}
	return kmsg.ConfigTypeLong
}
