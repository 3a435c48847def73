package web

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/queue"
)

// usageCollector exports what executors reported, across the cluster,
// from the usage_totals table (one row per currency and model, kept by
// every usage write and never pruned): one small read per scrape, and
// counters that only grow while retention deletes old jobs.
type usageCollector struct {
	q                          *queue.Client
	cost, input, output, count *prometheus.Desc
}

func newUsageCollector(q *queue.Client) *usageCollector {
	return &usageCollector{
		q: q,
		cost: prometheus.NewDesc("leasehold_usage_cost_micros_total",
			"Cost executors reported, in micro-units of the currency, across the cluster.", []string{"currency", "model"}, nil),
		input: prometheus.NewDesc("leasehold_usage_input_tokens_total",
			"Input tokens executors reported, across the cluster.", []string{"currency", "model"}, nil),
		output: prometheus.NewDesc("leasehold_usage_output_tokens_total",
			"Output tokens executors reported, across the cluster.", []string{"currency", "model"}, nil),
		count: prometheus.NewDesc("leasehold_usage_reports_total",
			"Usage reports recorded, across the cluster.", []string{"currency", "model"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (uc *usageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- uc.cost
	ch <- uc.input
	ch <- uc.output
	ch <- uc.count
}

// Collect implements prometheus.Collector.
func (uc *usageCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), countsTimeout)
	defer cancel()
	totals, err := uc.q.UsageTotals(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(uc.cost, err)
		return
	}
	for _, t := range totals {
		ch <- prometheus.MustNewConstMetric(uc.cost, prometheus.CounterValue, float64(t.CostMicros), t.Currency, t.Model)
		ch <- prometheus.MustNewConstMetric(uc.input, prometheus.CounterValue, float64(t.InputTokens), t.Currency, t.Model)
		ch <- prometheus.MustNewConstMetric(uc.output, prometheus.CounterValue, float64(t.OutputTokens), t.Currency, t.Model)
		ch <- prometheus.MustNewConstMetric(uc.count, prometheus.CounterValue, float64(t.Reports), t.Currency, t.Model)
	}
}
