package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Metric returns the value of the broker's metric name, a series without
// labels, from its Prometheus metrics (Config.Metrics).
func (b *Broker) Metric(ctx context.Context, name string) (float64, error) {
	if b.MetricsAddr == "" {
		return 0, fmt.Errorf("%s: serves no metrics (cluster Config.Metrics)", b)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.MetricsAddr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s: metrics: %w", b, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: metrics: %s", b, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		value, ok := strings.CutPrefix(sc.Text(), name+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return 0, fmt.Errorf("%s: metric %s %q: %w", b, name, value, err)
		}
		return v, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("%s: metrics: %w", b, err)
	}
	return 0, fmt.Errorf("%s: metric %s: %w", b, name, errNoMetric)
}

// errNoMetric is a metric the broker does not serve.
var errNoMetric = errors.New("not served")
