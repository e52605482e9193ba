package broker

import (
	"net/http"
)

// metrics is the broker's Prometheus registry and the counters the rest of
// the broker reports to. (Stub: filled in by the metrics work.)
type metrics struct{}

// newMetrics builds the broker's metrics; gauges read b when scraped.
func newMetrics(b *Broker) *metrics { return &metrics{} }

// isrChanged counts ISR shrinks and expansions committed for partitions
// this broker leads.
func (m *metrics) isrChanged(shrinks, expands int) {}

// MetricsHandler serves the broker's metrics in Prometheus text format,
// for /metrics.
func (b *Broker) MetricsHandler() http.Handler { return http.NotFoundHandler() }
