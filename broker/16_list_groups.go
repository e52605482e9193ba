package broker

import (
	"context"
	"slices"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListGroups v0..v5 (v4: filtered by state; v5: filtered by type, and
// each group's type, KIP-848).
func init() { registerAPI(16, 0, 5, handleListGroups) }

// handleListGroups lists the groups this broker coordinates, answering
// COORDINATOR_LOAD_IN_PROGRESS with those it has while a partition still
// loads. A group's type is "classic" or "consumer" (a group of the
// consumer protocol, mixed ones too); the state and type filters match
// regardless of case, as Kafka's.
func handleListGroups(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.ListGroupsRequest)
	resp := r.ResponseKind().(*kmsg.ListGroupsResponse)
	shards, loading := b.groups.activeShards()
	if loading {
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
	}
	matches := func(filter []string, v string) bool {
		return len(filter) == 0 || slices.ContainsFunc(filter, func(s string) bool { return strings.EqualFold(s, v) })
	}
	for _, sh := range shards {
		sh.mu.Lock()
		if sh.state == shardActive {
			for id, g := range sh.groups {
				state := g.State().String()
				if !matches(r.StatesFilter, state) || !matches(r.TypesFilter, "classic") {
					continue
				}
				lg := kmsg.NewListGroupsResponseGroup()
				lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = id, g.ProtocolType(), state, "classic"
				resp.Groups = append(resp.Groups, lg)
			}
			for id, g := range sh.consumers {
				state := g.State()
				if !matches(r.StatesFilter, state) || !matches(r.TypesFilter, "consumer") {
					continue
				}
				lg := kmsg.NewListGroupsResponseGroup()
				lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = id, "consumer", state, "consumer"
				resp.Groups = append(resp.Groups, lg)
			}
		}
		sh.mu.Unlock()
	}
	sort.Slice(resp.Groups, func(i, j int) bool { return resp.Groups[i].Group < resp.Groups[j].Group })
	return resp, nil, nil
}
