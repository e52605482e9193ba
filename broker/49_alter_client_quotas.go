package broker

import (
	"context"
	"fmt"
	"math"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/kafkaerr"
	"github.com/tripodmq/tripod/coord"
)

// AlterClientQuotas v0-v1 (KIP-546): set or remove quotas of client quota
// entities, stored in the config store, which every broker follows.
func init() { registerAPI(49, 0, 1, handleAlterClientQuotas) }

// quotaKeyTypes are the quota keys with Kafka's config type: a LONG or
// INT quota must be a whole number.
var quotaKeyTypes = map[string]string{
	coord.QuotaProducerByteRate:       "Long",
	coord.QuotaConsumerByteRate:       "Long",
	coord.QuotaRequestPercentage:      "Double",
	coord.QuotaControllerMutationRate: "Double",
	coord.QuotaConnectionCreationRate: "Int",
}

// parseQuotaEntity reads an entry's entity as Kafka does: at least one
// part, each of user, client-id or ip once, a null name for the default,
// no empty name, and an ip (a valid address) alone.
func parseQuotaEntity(parts []kmsg.AlterClientQuotasRequestEntryEntity) (coord.QuotaEntity, string) {
	var e coord.QuotaEntity
	if len(parts) == 0 {
		return e, "Invalid empty client quota entity"
	}
	for _, p := range parts {
		name := coord.DefaultQuotaEntity
		if p.Name != nil {
			if *p.Name == "" {
				return e, fmt.Sprintf("Empty %s not supported", p.Type)
			}
			name = *p.Name
		}
		var slot *string
		switch p.Type {
		case quotaEntityUser:
			slot = &e.User
		case quotaEntityClientID:
			slot = &e.ClientID
		case quotaEntityIP:
			slot = &e.IP
		default:
			return e, fmt.Sprintf("Unhandled client quota entity type: %s", p.Type)
		}
		if *slot != "" {
			return e, fmt.Sprintf("Duplicate %s entity type", p.Type)
		}
		*slot = name
	}
	if e.IP != "" && (e.User != "" || e.ClientID != "") {
		return e, "Invalid quota entity combination, IP entity should not be used with user/client ID entity."
	}
	if e.IP != "" && e.IP != coord.DefaultQuotaEntity && net.ParseIP(e.IP) == nil {
		return e, fmt.Sprintf("%s is not a valid IP.", e.IP)
	}
	return e, ""
}

// quotaAlterations checks an entry's ops as Kafka does (a known key of
// the entity, a whole number for a Long or Int quota) and returns them as
// alterations with the values written as Kafka writes them. tripod also
// refuses a quota that is not above 0, which it could not enforce.
func quotaAlterations(e coord.QuotaEntity, ops []kmsg.AlterClientQuotasRequestEntryOp) ([]coord.ConfigAlteration, string) {
	var alts []coord.ConfigAlteration
	for _, op := range ops {
		typ, known := quotaKeyTypes[op.Key]
		allowed := false
		for _, k := range e.Keys() {
			allowed = allowed || k == op.Key
		}
		if !known || !allowed {
			return nil, fmt.Sprintf("Invalid configuration key %s", op.Key)
		}
		if op.Remove {
			alts = append(alts, coord.ConfigAlteration{Op: coord.ConfigDelete, Key: op.Key})
			continue
		}
		v := op.Value
		if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
			return nil, fmt.Sprintf("Quota %s must be greater than 0", op.Key)
		}
		value := strconv.FormatFloat(v, 'f', -1, 64)
		if typ != "Double" {
			const epsilon = 1e-6
			whole := math.Floor(v + epsilon)
			if math.Abs(whole-v) > epsilon || (typ == "Int" && whole > math.MaxInt32) {
				return nil, fmt.Sprintf("Configuration %s must be a %s value", op.Key, typ)
			}
			value = strconv.FormatFloat(whole, 'f', 0, 64)
		}
		alts = append(alts, coord.ConfigAlteration{Op: coord.ConfigSet, Key: op.Key, Value: value})
	}
	return alts, ""
}

// handleAlterClientQuotas checks every entry and, unless validate_only,
// writes each valid one to the config store; each entry gets its own
// error (INVALID_REQUEST with Kafka's message for an invalid entity or
// op). With an authorizer the request needs ALTER_CONFIGS on the cluster
// (security/rules.go).
func handleAlterClientQuotas(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.AlterClientQuotasRequest)
	resp := r.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	type checked struct {
		entity coord.QuotaEntity
		alts   []coord.ConfigAlteration
	}
	work := make([]*checked, len(r.Entries))
	for i, entry := range r.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		for _, p := range entry.Entity {
			d := kmsg.NewAlterClientQuotasResponseEntryEntity()
			d.Type, d.Name = p.Type, p.Name
			re.Entity = append(re.Entity, d)
		}
		entity, msg := parseQuotaEntity(entry.Entity)
		var alts []coord.ConfigAlteration
		if msg == "" {
			alts, msg = quotaAlterations(entity, entry.Ops)
		}
		if msg != "" {
			re.ErrorCode, re.ErrorMessage = kerr.InvalidRequest.Code, &msg
		} else if !r.ValidateOnly {
			work[i] = &checked{entity: entity, alts: alts}
		}
		resp.Entries = append(resp.Entries, re)
	}
	return nil, func(ctx context.Context) kmsg.Response {
		lctx, cancel := context.WithTimeout(ctx, securityTimeout)
		defer cancel()
		for i, w := range work {
			if w == nil || len(w.alts) == 0 {
				continue
			}
			if _, err := b.backend.AlterClientQuotas(lctx, w.entity, w.alts); err != nil {
				msg := fmt.Sprintf("write the client quotas of %s: %v", w.entity, err)
				resp.Entries[i].ErrorCode, resp.Entries[i].ErrorMessage = kafkaerr.SecurityStore.Error(err).Code, &msg
			}
		}
		return resp
	}, nil
}
