package coord

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Client quotas (Kafka's KIP-13, KIP-55, KIP-257, KIP-546, KIP-612) are
// part of the config state: ConfigStore.AlterClientQuotas writes them,
// ConfigState.Quotas carries them to every broker. The store checks the
// shape of an entity and that an alteration sets or deletes a quota key
// the entity may have; the ranges of the values are the broker's.

// DefaultQuotaEntity names the default of an entity type, as Kafka names
// it in ZooKeeper (/config/users/<default>, /config/clients/<default>,
// /config/ips/<default>).
const DefaultQuotaEntity = "<default>"

// Quota keys, Kafka's names.
const (
	QuotaProducerByteRate       = "producer_byte_rate"
	QuotaConsumerByteRate       = "consumer_byte_rate"
	QuotaRequestPercentage      = "request_percentage"
	QuotaControllerMutationRate = "controller_mutation_rate"
	QuotaConnectionCreationRate = "connection_creation_rate"
)

// ClientQuotaKeys are the keys a user, client-id or user and client-id
// entity may have; IPQuotaKeys those of an ip entity.
var (
	ClientQuotaKeys = []string{QuotaProducerByteRate, QuotaConsumerByteRate, QuotaRequestPercentage, QuotaControllerMutationRate}
	IPQuotaKeys     = []string{QuotaConnectionCreationRate}
)

// QuotaEntity names the entity a client quota applies to: a user, a
// client id, both, or an ip. Each part is a name, DefaultQuotaEntity for
// the default of its type, or empty when the entity has no such part.
type QuotaEntity struct {
	User     string
	ClientID string
	IP       string
}

// String returns the entity's path, as Kafka's entity_path: users/<user>,
// users/<user>/clients/<client-id>, clients/<client-id> or ips/<ip>, the
// names sanitized as Kafka's Sanitizer does.
func (e QuotaEntity) String() string {
	switch {
	case e.IP != "":
		return "ips/" + e.IP
	case e.User != "" && e.ClientID != "":
		return "users/" + sanitizeEntity(e.User) + "/clients/" + sanitizeEntity(e.ClientID)
	case e.User != "":
		return "users/" + sanitizeEntity(e.User)
	default:
		return "clients/" + sanitizeEntity(e.ClientID)
	}
}

// Validate checks e's shape: an ip alone, or a user, a client id or both;
// an ip is an address or DefaultQuotaEntity.
func (e QuotaEntity) Validate() error {
	switch {
	case e.IP != "" && (e.User != "" || e.ClientID != ""):
		return fmt.Errorf("quota entity %s: an ip entity is not combined with a user or client-id", e)
	case e.IP != "":
		if e.IP != DefaultQuotaEntity && net.ParseIP(e.IP) == nil {
			return fmt.Errorf("quota entity ips/%s: not an ip address", e.IP)
		}
	case e.User == "" && e.ClientID == "":
		return fmt.Errorf("quota entity: empty")
	}
	return nil
}

// Keys returns the quota keys e may have.
func (e QuotaEntity) Keys() []string {
	if e.IP != "" {
		return IPQuotaKeys
	}
	return ClientQuotaKeys
}

// ParseQuotaEntity reads an entity path as String writes it.
func ParseQuotaEntity(p string) (QuotaEntity, error) {
	parts := strings.Split(p, "/")
	var e QuotaEntity
	var err error
	switch {
	case len(parts) == 2 && parts[0] == "ips":
		e.IP = parts[1]
	case len(parts) == 2 && parts[0] == "clients":
		e.ClientID, err = desanitizeEntity(parts[1])
	case len(parts) == 2 && parts[0] == "users":
		e.User, err = desanitizeEntity(parts[1])
	case len(parts) == 4 && parts[0] == "users" && parts[2] == "clients":
		e.User, err = desanitizeEntity(parts[1])
		if err == nil {
			e.ClientID, err = desanitizeEntity(parts[3])
		}
	default:
		return QuotaEntity{}, fmt.Errorf("quota entity path %q: want users/<user>, users/<user>/clients/<client-id>, clients/<client-id> or ips/<ip>", p)
	}
	if err != nil {
		return QuotaEntity{}, fmt.Errorf("quota entity path %q: %w", p, err)
	}
	if err := e.Validate(); err != nil {
		return QuotaEntity{}, err
	}
	return e, nil
}

// ValidateQuotaAlterations checks entity and every alteration of an
// AlterClientQuotas call: only SET and DELETE of the entity's keys.
func ValidateQuotaAlterations(entity QuotaEntity, alterations []ConfigAlteration) error {
	if err := entity.Validate(); err != nil {
		return err
	}
	for _, a := range alterations {
		if a.Op != ConfigSet && a.Op != ConfigDelete {
			return fmt.Errorf("quota %s of %s: op %v: want SET or DELETE", a.Key, entity, a.Op)
		}
		known := false
		for _, k := range entity.Keys() {
			known = known || k == a.Key
		}
		if !known {
			return fmt.Errorf("quota entity %s: invalid configuration key %s", entity, a.Key)
		}
	}
	return nil
}

// SanitizeName escapes a name for a ZooKeeper path as Kafka's Sanitizer
// does: URL-encoded, a space as %20 and "*" as %2A.
func SanitizeName(name string) string {
	var sb strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(".-_~", c) >= 0 {
			sb.WriteByte(c)
		} else {
			fmt.Fprintf(&sb, "%%%02X", c)
		}
	}
	return sb.String()
}

// sanitizeEntity is SanitizeName, except for DefaultQuotaEntity, which
// Kafka writes as it is.
func sanitizeEntity(name string) string {
	if name == DefaultQuotaEntity {
		return name
	}
	return SanitizeName(name)
}

func desanitizeEntity(name string) (string, error) {
	if name == DefaultQuotaEntity {
		return name, nil
	}
	return url.QueryUnescape(name)
}
