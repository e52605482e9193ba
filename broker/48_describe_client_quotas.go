package broker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/kafkaerr"
	"github.com/tripodmq/tripod/coord"
)

// DescribeClientQuotas v0-v1 (KIP-546): the client quotas stored for the
// entities a filter matches.
func init() { registerAPI(48, 0, 1, handleDescribeClientQuotas) }

// Kafka's client quota entity types.
const (
	quotaEntityUser     = "user"
	quotaEntityClientID = "client-id"
	quotaEntityIP       = "ip"
)

// Match types of a DescribeClientQuotas filter component.
const (
	quotaMatchExact   = 0
	quotaMatchDefault = 1
	quotaMatchAny     = 2
)

// quotaFilter is a DescribeClientQuotas filter checked: per entity type,
// its component (nil: none given).
type quotaFilter struct {
	user, clientID, ip *kmsg.DescribeClientQuotasRequestComponent
	strict             bool
}

// parseQuotaFilter checks the components as Kafka does: each type once,
// only user, client-id and ip, ip never with the others.
func parseQuotaFilter(r *kmsg.DescribeClientQuotasRequest) (quotaFilter, *kerr.Error, string) {
	f := quotaFilter{strict: r.Strict}
	for i := range r.Components {
		c := &r.Components[i]
		var slot **kmsg.DescribeClientQuotasRequestComponent
		var name string
		switch c.EntityType {
		case quotaEntityUser:
			slot, name = &f.user, "user"
		case quotaEntityClientID:
			slot, name = &f.clientID, "client"
		case quotaEntityIP:
			slot, name = &f.ip, "ip"
		case "":
			return f, kerr.InvalidRequest, "Unexpected empty filter component entity type"
		default:
			return f, kerr.UnsupportedVersion, fmt.Sprintf("Custom entity type '%s' not supported", c.EntityType)
		}
		if *slot != nil {
			return f, kerr.InvalidRequest, fmt.Sprintf("Duplicate %s filter component entity type", name)
		}
		if c.MatchType < quotaMatchExact || c.MatchType > quotaMatchAny {
			return f, kerr.InvalidRequest, fmt.Sprintf("Unexpected match type %d", c.MatchType)
		}
		if c.MatchType == quotaMatchExact && c.Match == nil {
			return f, kerr.InvalidRequest, fmt.Sprintf("Missing match name for the %s filter component", name)
		}
		*slot = c
	}
	if (f.user != nil || f.clientID != nil) && f.ip != nil {
		return f, kerr.InvalidRequest, "Invalid entity filter component combination, IP filter component should not be used with user or clientId filter component."
	}
	return f, nil, ""
}

// matchPart reports whether an entity's part (its name, DefaultQuotaEntity,
// or "" when the entity has none) passes the component of its type.
func (f quotaFilter) matchPart(c *kmsg.DescribeClientQuotasRequestComponent, part string) bool {
	if c == nil {
		return !f.strict || part == ""
	}
	switch c.MatchType {
	case quotaMatchExact:
		return part != "" && part != coord.DefaultQuotaEntity && part == *c.Match
	case quotaMatchDefault:
		return part == coord.DefaultQuotaEntity
	default:
		return part != ""
	}
}

func (f quotaFilter) matches(e coord.QuotaEntity) bool {
	return f.matchPart(f.user, e.User) && f.matchPart(f.clientID, e.ClientID) && f.matchPart(f.ip, e.IP)
}

// quotaEntityData is an entity as the quota APIs carry it: its parts in
// Kafka's order (user, client-id; or ip), a default as a null name.
func quotaEntityData(e coord.QuotaEntity) []kmsg.DescribeClientQuotasResponseEntryEntity {
	var out []kmsg.DescribeClientQuotasResponseEntryEntity
	add := func(typ, name string) {
		if name == "" {
			return
		}
		d := kmsg.NewDescribeClientQuotasResponseEntryEntity()
		d.Type = typ
		if name != coord.DefaultQuotaEntity {
			d.Name = &name
		}
		out = append(out, d)
	}
	add(quotaEntityUser, e.User)
	add(quotaEntityClientID, e.ClientID)
	add(quotaEntityIP, e.IP)
	return out
}

// handleDescribeClientQuotas answers from the config store: every entity
// the filter matches with its quotas, sorted by entity. A filter Kafka
// refuses gets its error (INVALID_REQUEST, or UNSUPPORTED_VERSION for a
// custom entity type) and message. With an authorizer the request needs
// DESCRIBE_CONFIGS on the cluster (security/rules.go).
func handleDescribeClientQuotas(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := r.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	fail := func(code *kerr.Error, msg string) kmsg.Response {
		resp.ErrorCode, resp.ErrorMessage = code.Code, &msg
		return resp
	}
	filter, code, msg := parseQuotaFilter(r)
	if code != nil {
		return fail(code, msg), nil, nil
	}
	return nil, func(ctx context.Context) kmsg.Response {
		lctx, cancel := context.WithTimeout(ctx, securityTimeout)
		defer cancel()
		st, err := b.backend.LoadConfigs(lctx)
		if err != nil {
			return fail(kafkaerr.SecurityStore.Error(err), fmt.Sprintf("read the client quotas: %v", err))
		}
		entities := slices.SortedFunc(maps.Keys(st.Quotas), func(a, b coord.QuotaEntity) int {
			return compareStrings(a.String(), b.String())
		})
		for _, e := range entities {
			if !filter.matches(e) {
				continue
			}
			entry := kmsg.NewDescribeClientQuotasResponseEntry()
			entry.Entity = quotaEntityData(e)
			for _, key := range slices.Sorted(maps.Keys(st.Quotas[e])) {
				v, err := strconv.ParseFloat(st.Quotas[e][key], 64)
				if err != nil {
					continue // not a quota tripod applies either (quota.ParseQuotas)
				}
				value := kmsg.NewDescribeClientQuotasResponseEntryValue()
				value.Key, value.Value = key, v
				entry.Values = append(entry.Values, value)
			}
			resp.Entries = append(resp.Entries, entry)
		}
		return resp
	}, nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
