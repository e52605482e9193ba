package console

import (
	"context"
	"sync"
	"time"
)

// The consumer groups' lag over time that the group pages chart.
const (
	// lagSampleInterval is how often the console samples the total lag
	// of the groups whose pages are open.
	lagSampleInterval = 5 * time.Second
	// lagSamples is how many samples a group keeps: ten minutes.
	lagSamples = 120
	// lagWatch is how long after its page last asked a group is still
	// sampled; pages ask every lagSampleInterval.
	lagWatch = 30 * time.Second
	// maxLagGroups bounds the groups whose history is kept; the one
	// viewed longest ago is forgotten first.
	maxLagGroups = 64
)

// lagSample is a group's total lag at a time (Unix milliseconds).
type lagSample struct {
	At  int64 `json:"at"`
	Lag int64 `json:"lag"`
}

// lagHistory keeps a ring of lag samples per group viewed, for at most
// maxLagGroups groups.
type lagHistory struct {
	mu     sync.Mutex
	groups map[string]*groupLag
}

// groupLag is one group's samples, oldest first, and when its page last
// asked for them.
type groupLag struct {
	viewed  time.Time
	samples []lagSample
}

func newLagHistory() *lagHistory {
	return &lagHistory{groups: map[string]*groupLag{}}
}

// view records that group's page asked for it at now, with its total
// lag then, and returns its samples, oldest first. A sample is added
// only if the last one is older than half the sampling interval, so
// pages and the sampler do not crowd the ring.
func (h *lagHistory) view(group string, now time.Time, lag int64) []lagSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	g := h.groups[group]
	if g == nil {
		if len(h.groups) >= maxLagGroups {
			h.forgetOldest()
		}
		g = &groupLag{}
		h.groups[group] = g
	}
	g.viewed = now
	if n := len(g.samples); n == 0 || now.UnixMilli()-g.samples[n-1].At >= lagSampleInterval.Milliseconds()/2 {
		g.add(lagSample{now.UnixMilli(), lag})
	}
	return append([]lagSample(nil), g.samples...)
}

// forgetOldest drops the group viewed longest ago.
func (h *lagHistory) forgetOldest() {
	var oldest string
	var at time.Time
	for name, g := range h.groups {
		if oldest == "" || g.viewed.Before(at) {
			oldest, at = name, g.viewed
		}
	}
	delete(h.groups, oldest)
}

// add appends s, dropping the oldest sample beyond lagSamples.
func (g *groupLag) add(s lagSample) {
	if len(g.samples) >= lagSamples {
		g.samples = append(g.samples[:0], g.samples[1:]...)
	}
	g.samples = append(g.samples, s)
}

// watched returns the groups whose pages asked for them within lagWatch
// of now.
func (h *lagHistory) watched(now time.Time) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var names []string
	for name, g := range h.groups {
		if now.Sub(g.viewed) < lagWatch {
			names = append(names, name)
		}
	}
	return names
}

// record adds a sample to group's history, if it is still kept.
func (h *lagHistory) record(group string, s lagSample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if g := h.groups[group]; g != nil {
		g.add(s)
	}
}

// sampleLag samples the total lag of the groups whose pages are open
// every lagSampleInterval, until ctx ends (the server's Close).
func (d *dataAPI) sampleLag(ctx context.Context) {
	tick := time.NewTicker(lagSampleInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		names := d.lag.watched(time.Now())
		if len(names) == 0 {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, lagSampleInterval)
		lags, err := d.adm.Lag(rctx, names...)
		cancel()
		if err != nil && len(lags) == 0 {
			d.log.Debug("sample consumer group lag", "groups", names, "err", err)
			continue
		}
		now := time.Now().UnixMilli()
		for _, l := range lags {
			if l.Error() == nil {
				d.lag.record(l.Group, lagSample{now, totalLag(l.Lag)})
			}
		}
	}
}
