package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/broker/dynconfig"
	"github.com/tripodmq/tripod/broker/kafkaerr"
	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
)

// IncrementalAlterConfigs v0..v1, for topic and broker resources.
func init() { registerAPI(44, 0, 1, handleIncrementalAlterConfigs) }

// handleIncrementalAlterConfigs changes configs key by key (SET, DELETE,
// and APPEND and SUBTRACT of a LIST config). A topic's configs change
// through the controller (on another broker: the request is forwarded to
// it), validated as CreateTopics validates them; a broker's dynamic
// configs (resource name empty: the cluster default; or this broker's id)
// are written to the coordination backend's config store. Every broker
// applies them without a restart (dynamic_config.go). validate_only
// checks without changing anything.
func handleIncrementalAlterConfigs(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	return nil, func(ctx context.Context) kmsg.Response {
		resources := make([]alterResource, len(r.Resources))
		for i, rr := range r.Resources {
			ar := alterResource{typ: rr.ResourceType, name: rr.ResourceName}
			seen := map[string]bool{}
			for _, c := range rr.Configs {
				if seen[c.Name] && ar.err == nil {
					ar.kind, ar.err = kerr.InvalidRequest, fmt.Errorf("config %s is named more than once", c.Name)
				}
				seen[c.Name] = true
				if c.Value == nil && c.Op != kmsg.IncrementalAlterConfigOpDelete && ar.err == nil {
					ar.kind, ar.err = kerr.InvalidRequest, fmt.Errorf("config %s: a null value is only allowed to DELETE", c.Name)
				}
				ar.alts = append(ar.alts, coord.ConfigAlteration{Op: coord.ConfigOp(c.Op), Key: c.Name, Value: deref(c.Value)})
			}
			resources[i] = ar
		}
		forward := func(ctx context.Context, topics []int) ([]configOutcome, error) {
			fr := kmsg.NewPtrIncrementalAlterConfigsRequest()
			fr.SetVersion(r.Version)
			fr.ValidateOnly = r.ValidateOnly
			for _, i := range topics {
				fr.Resources = append(fr.Resources, r.Resources[i])
			}
			return b.forwardConfigs(ctx, fr, len(topics), func(resp kmsg.Response, j int) (int16, *string, bool) {
				res := resp.(*kmsg.IncrementalAlterConfigsResponse).Resources
				if j >= len(res) {
					return 0, nil, false
				}
				return res[j].ErrorCode, res[j].ErrorMessage, true
			})
		}
		for i, o := range b.alterConfigs(ctx, req, resources, r.ValidateOnly, forward) {
			sr := kmsg.NewIncrementalAlterConfigsResponseResource()
			sr.ResourceType, sr.ResourceName = r.Resources[i].ResourceType, r.Resources[i].ResourceName
			if o.kind != nil {
				sr.ErrorCode = o.kind.Code
				msg := o.err.Error()
				sr.ErrorMessage = &msg
			}
			resp.Resources = append(resp.Resources, sr)
		}
		return resp
	}, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// alterResource is one resource of an IncrementalAlterConfigs or
// AlterConfigs (replace: the whole dynamic set), or the error its
// decoding found.
type alterResource struct {
	typ     kmsg.ConfigResourceType
	name    string
	replace bool
	alts    []coord.ConfigAlteration
	kind    *kerr.Error
	err     error
}

// configOutcome is one resource's answer: no kind for success.
type configOutcome struct {
	kind *kerr.Error
	err  error
}

// forwardConfigs sends fr, holding n resources of an AlterConfigs or
// IncrementalAlterConfigs, to the controller and returns their outcomes
// in order, read from its answer by result (ok false: the answer lacks
// resource j).
func (b *Broker) forwardConfigs(ctx context.Context, fr kmsg.Request, n int, result func(resp kmsg.Response, j int) (code int16, msg *string, ok bool)) ([]configOutcome, error) {
	kresp, err := b.member.forwardToController(ctx, fr)
	if err != nil {
		return nil, err
	}
	out := make([]configOutcome, n)
	for j := range out {
		out[j] = configOutcome{kind: kerr.UnknownServerError, err: errors.New("the controller did not answer for this resource")}
		if code, msg, ok := result(kresp, j); ok {
			out[j] = remoteConfigOutcome(code, msg)
		}
	}
	return out, nil
}

func remoteConfigOutcome(code int16, msg *string) configOutcome {
	if code == 0 {
		return configOutcome{}
	}
	kind, _ := kerr.ErrorForCode(code).(*kerr.Error)
	if kind == nil {
		kind = kerr.UnknownServerError
	}
	text := kind.Message
	if msg != nil {
		text = *msg
	}
	return configOutcome{kind: kind, err: errors.New(text)}
}

// forwarder sends the topic resources (by index) to the controller in a
// request of the caller's API and returns their outcomes in order.
type forwarder func(ctx context.Context, topics []int) ([]configOutcome, error)

// forwardedClientPrefix starts the client id of a request one broker sends
// another (PeerClient): a forwarded alteration that reaches a broker that
// is no longer the controller is answered NOT_CONTROLLER, never forwarded
// again.
const forwardedClientPrefix = "tripod-broker-"

// alterConfigs carries out the resources of one request in order and
// returns their outcomes.
func (b *Broker) alterConfigs(ctx context.Context, req *request, resources []alterResource, validateOnly bool, forward forwarder) []configOutcome {
	out := make([]configOutcome, len(resources))
	seen := map[string]int{}
	for _, ar := range resources {
		seen[fmt.Sprint(ar.typ, "/", ar.name)]++
	}
	var remote []int
	ctrl := b.member.Controller()
	for i, ar := range resources {
		switch {
		case seen[fmt.Sprint(ar.typ, "/", ar.name)] > 1:
			out[i] = configOutcome{kerr.InvalidRequest, fmt.Errorf("resource %s is named more than once in the request", ar.name)}
		case ar.err != nil:
			out[i] = configOutcome{ar.kind, ar.err}
		case ar.typ == kmsg.ConfigResourceTypeBroker:
			out[i] = b.alterBrokerConfigs(ctx, ar, validateOnly)
		case ar.typ == kmsg.ConfigResourceTypeTopic && ctrl != nil:
			out[i] = b.alterTopicConfigs(ctx, ctrl, ar, validateOnly)
		case ar.typ == kmsg.ConfigResourceTypeTopic && strings.HasPrefix(deref(req.header.clientID), forwardedClientPrefix):
			out[i] = configOutcome{kerr.NotController, fmt.Errorf("broker %d is not the controller", b.cfg.BrokerID)}
		case ar.typ == kmsg.ConfigResourceTypeTopic:
			if o := precheckTopicAlteration(ar); o.kind != nil {
				out[i] = o
				continue
			}
			remote = append(remote, i)
		default:
			out[i] = configOutcome{kerr.InvalidRequest, fmt.Errorf("resource type %d is not supported: only TOPIC (2) and BROKER (4)", ar.typ)}
		}
	}
	if len(remote) == 0 {
		return out
	}
	answers, err := forward(ctx, remote)
	for j, i := range remote {
		if err != nil {
			out[i] = configOutcome{kafkaerr.Controller.Error(err), fmt.Errorf("topic %s: forwarding to the controller: %w", resources[i].name, err)}
			continue
		}
		out[i] = answers[j]
		if answers[j].kind == nil && !validateOnly {
			b.awaitTopicConfigs(ctx, resources[i].name, nil)
		}
	}
	return out
}

// precheckTopicAlteration checks what needs no controller: the topic's
// name and the alterations' keys, ops and set values.
func precheckTopicAlteration(ar alterResource) configOutcome {
	if err := config.ValidateTopicName(ar.name); err != nil {
		return configOutcome{kerr.InvalidTopicException, err}
	}
	if err := dynconfig.CheckAlterations(ar.alts); err != nil {
		return configOutcome{kerr.InvalidConfig, fmt.Errorf("topic %s: %w", ar.name, err)}
	}
	for _, a := range ar.alts {
		if a.Op == coord.ConfigDelete {
			continue
		}
		if err := config.ValidateTopicConfig(a.Key, a.Value); err != nil {
			return configOutcome{kerr.InvalidConfig, fmt.Errorf("topic %s: %w", ar.name, err)}
		}
	}
	return configOutcome{}
}

// alterTopicConfigs alters a topic's configs through the controller this
// broker runs, then waits (a little) for this broker to apply them.
func (b *Broker) alterTopicConfigs(ctx context.Context, ctrl *controller.Controller, ar alterResource, validateOnly bool) configOutcome {
	if o := precheckTopicAlteration(ar); o.kind != nil {
		return o
	}
	configs, err := ctrl.AlterTopicConfigs(ctx, controller.TopicConfigsAlteration{
		Topic: ar.name, Replace: ar.replace, Alterations: ar.alts, Validate: dynconfig.ValidateTopicConfigs, ValidateOnly: validateOnly,
	})
	switch {
	case errors.Is(err, controller.ErrInvalidConfig):
		return configOutcome{kerr.InvalidConfig, err}
	case errors.Is(err, coord.ErrNotFound):
		return configOutcome{kerr.UnknownTopicOrPartition, fmt.Errorf("topic %s does not exist", ar.name)}
	case err != nil:
		kind := kafkaerr.Controller.Error(err)
		if kind == kerr.UnknownServerError {
			b.logger.Error("alter topic configs failed", "topic", ar.name, "error", err)
		}
		return configOutcome{kind, fmt.Errorf("topic %s: %w", ar.name, err)}
	}
	for key, value := range configs {
		if !config.TopicConfigHasEffect(key, value) {
			b.logger.Warn("topic config accepted without effect: tripod does not act on it", "topic", ar.name, "config", key, "value", value)
		}
	}
	if !validateOnly {
		b.awaitTopicConfigs(ctx, ar.name, configs)
	}
	return configOutcome{}
}

// alterBrokerConfigs alters the dynamic configs of the cluster default
// (resource name empty) or of this broker, validated on the configs as
// they would become.
func (b *Broker) alterBrokerConfigs(ctx context.Context, ar alterResource, validateOnly bool) configOutcome {
	entity := coord.DefaultBrokerEntity
	if ar.name != "" {
		if id, err := strconv.ParseInt(ar.name, 10, 32); err != nil || int32(id) != b.cfg.BrokerID {
			return configOutcome{kerr.InvalidRequest, fmt.Errorf("unexpected broker id, expected %d or empty string, but received %s", b.cfg.BrokerID, ar.name)}
		}
		entity = b.dyn.Entity()
	}
	if isMigrationAction(ar.alts) {
		if ar.name == "" || ar.replace {
			return configOutcome{kerr.InvalidRequest, fmt.Errorf("a migration action goes to the controller's own broker resource, by IncrementalAlterConfigs")}
		}
		return b.migrationAction(ctx, ar.alts, validateOnly)
	}
	if err := dynconfig.CheckAlterations(ar.alts); err != nil {
		return configOutcome{kerr.InvalidConfig, fmt.Errorf("broker %s: %w", ar.name, err)}
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := b.backend.LoadConfigs(lctx)
	if err != nil {
		return configOutcome{kafkaerr.Controller.Error(err), fmt.Errorf("broker configs: %w", err)}
	}
	next := coord.ApplyConfigAlterations(st.Brokers[entity], ar.replace, ar.alts)
	if err := b.dyn.ValidateBrokerConfigs(next); err != nil {
		if errors.Is(err, dynconfig.ErrNotDynamic) {
			return configOutcome{kerr.InvalidRequest, err}
		}
		return configOutcome{kerr.InvalidConfig, err}
	}
	if validateOnly {
		return configOutcome{}
	}
	written, err := b.backend.AlterBrokerConfigs(lctx, entity, ar.replace, ar.alts)
	if err != nil {
		return configOutcome{kafkaerr.Controller.Error(err), fmt.Errorf("broker configs of %s: %w", entity, err)}
	}
	b.logger.Info("dynamic broker configs altered", "entity", entity, "configs", written)
	b.awaitConfigs(ctx, func(st *coord.ConfigState) bool { return sameConfigs(st.Brokers[entity], written) })
	return configOutcome{}
}

// sameConfigs compares configs, an empty set equal to none.
func sameConfigs(a, b map[string]string) bool { return len(a) == 0 && len(b) == 0 || maps.Equal(a, b) }

// awaitTopicConfigs waits (a little) until this broker has applied topic
// configs (nil: whatever the store holds now).
func (b *Broker) awaitTopicConfigs(ctx context.Context, topic string, configs map[string]string) {
	if configs == nil {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := b.backend.LoadConfigs(lctx)
		cancel()
		if err != nil {
			return
		}
		configs = st.Topics[topic]
	}
	b.awaitConfigs(ctx, func(st *coord.ConfigState) bool { return sameConfigs(st.Topics[topic], configs) })
}

// awaitConfigs waits until the dynamic state this broker applied meets
// cond, for at most configApplyWait: so that a DescribeConfigs on this
// broker right after the alteration shows it. The alteration is durable
// either way.
func (b *Broker) awaitConfigs(ctx context.Context, cond func(*coord.ConfigState) bool) {
	ctx, cancel := context.WithTimeout(ctx, configApplyWait)
	defer cancel()
	for {
		st, changed := b.dyn.Applied()
		if st != nil && cond(st) {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		case <-b.closing:
			return
		}
	}
}

// configApplyWait bounds how long an alteration waits for this broker to
// apply it.
const configApplyWait = 5 * time.Second

// forwardTimeout bounds forwardToController.
const forwardTimeout = 15 * time.Second

// answeredNotController reports whether every resource of a forwarded
// alteration was answered NOT_CONTROLLER.
func answeredNotController(resp kmsg.Response) bool {
	var codes []int16
	switch r := resp.(type) {
	case *kmsg.IncrementalAlterConfigsResponse:
		for _, rr := range r.Resources {
			codes = append(codes, rr.ErrorCode)
		}
	case *kmsg.AlterConfigsResponse:
		for _, rr := range r.Resources {
			codes = append(codes, rr.ErrorCode)
		}
	}
	for _, c := range codes {
		if c != kerr.NotController.Code {
			return false
		}
	}
	return len(codes) > 0
}
