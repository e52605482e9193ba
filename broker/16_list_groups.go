package broker

import (
	"context"
	"slices"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListGroups v0..v4 (v4: filtered by state).
func init() { registerAPI(16, 0, 4, handleListGroups) }

// handleListGroups lists the groups this broker coordinates, answering
// COORDINATOR_LOAD_IN_PROGRESS with those it has while a partition still
// loads.
func handleListGroups(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.ListGroupsRequest)
	resp := r.ResponseKind().(*kmsg.ListGroupsResponse)
	shards, loading := b.groups.activeShards()
	if loading {
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
	}
	for _, sh := range shards {
		sh.mu.Lock()
		if sh.state == shardActive {
			for id, g := range sh.groups {
				state := g.State().String()
				if len(r.StatesFilter) > 0 && !slices.ContainsFunc(r.StatesFilter, func(s string) bool { return strings.EqualFold(s, state) }) {
					continue
				}
				lg := kmsg.NewListGroupsResponseGroup()
				lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = id, g.ProtocolType(), state, "classic"
				resp.Groups = append(resp.Groups, lg)
			}
			for id, g := range sh.consumers {
				state := g.State()
				if len(r.StatesFilter) > 0 && !slices.ContainsFunc(r.StatesFilter, func(s string) bool { return strings.EqualFold(s, state) }) {
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
