package console

import (
	"fmt"
	"testing"
	"time"
)

// TestLagHistoryBounded views more groups than are kept, and one group
// more often than its ring holds: the history forgets the group viewed
// longest ago, keeps the newest samples, and samples only the groups
// viewed within lagWatch.
func TestLagHistoryBounded(t *testing.T) {
	h := newLagHistory()
	start := time.Unix(1_700_000_000, 0)
	for i := range maxLagGroups + 1 {
		h.view(fmt.Sprintf("g%d", i), start.Add(time.Duration(i)*time.Second), int64(i))
	}
	if len(h.groups) != maxLagGroups {
		t.Errorf("groups kept: got %d, want %d", len(h.groups), maxLagGroups)
	}
	if _, ok := h.groups["g0"]; ok {
		t.Errorf("g0, viewed longest ago: still kept, want forgotten")
	}
	now := start.Add(time.Hour)
	var samples []lagSample
	for i := range lagSamples + 10 {
		now = now.Add(lagSampleInterval)
		samples = h.view("busy", now, int64(i))
	}
	if len(samples) != lagSamples || samples[0].Lag != 10 || samples[len(samples)-1].Lag != lagSamples+9 {
		t.Errorf("busy's samples: got %d from lag %d to %d, want %d from 10 to %d",
			len(samples), samples[0].Lag, samples[len(samples)-1].Lag, lagSamples, lagSamples+9)
	}
	// A view within half an interval of the last sample adds none.
	if got := h.view("busy", now.Add(lagSampleInterval/4), 0); len(got) != lagSamples || got[len(got)-1].Lag != lagSamples+9 {
		t.Errorf("view right after a sample: got last lag %d, want %d kept", got[len(got)-1].Lag, lagSamples+9)
	}
	if got := h.watched(now.Add(lagWatch / 2)); len(got) != 1 || got[0] != "busy" {
		t.Errorf("watched groups: got %v, want [busy]", got)
	}
}
