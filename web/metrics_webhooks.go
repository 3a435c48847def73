package web

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/queue"
)

// webhookMetrics are the webhook sender's: deliveries and give-ups by this
// process's sender, and the events waiting, across the cluster.
type webhookMetrics struct {
	deliveries *prometheus.CounterVec
	givenUp    prometheus.Counter
	pending    prometheus.Collector
}

func newWebhookMetrics(q *queue.Client) webhookMetrics {
	m := webhookMetrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_webhook_deliveries_total",
			Help: "Webhook delivery attempts by this process's sender: ok (a 2xx) or error.",
		}, []string{"result"}),
		givenUp: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_webhook_given_up_total",
			Help: "Webhook events this process's sender gave up on, 24 h after the event.",
		}),
		pending: &pendingCollector{q: q, desc: prometheus.NewDesc("leasehold_webhook_pending",
			"Webhook events waiting for delivery, across the cluster.", nil, nil)},
	}
	m.deliveries.WithLabelValues("ok")
	m.deliveries.WithLabelValues("error")
	return m
}

// ObserveWebhook records one delivery attempt; the server's sender calls it.
func (m *Metrics) ObserveWebhook(ok bool) {
	result := "error"
	if ok {
		result = "ok"
	}
	m.webhooks.deliveries.WithLabelValues(result).Inc()
}

// ObserveWebhookGivenUp records one event given up.
func (m *Metrics) ObserveWebhookGivenUp() { m.webhooks.givenUp.Inc() }

// pendingCollector reads the outbox's size at scrape time; a failed read
// drops it from that scrape.
type pendingCollector struct {
	q    *queue.Client
	desc *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (pc *pendingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- pc.desc }

// Collect implements prometheus.Collector.
func (pc *pendingCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), countsTimeout)
	defer cancel()
	n, err := pc.q.WebhookPending(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(pc.desc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(pc.desc, prometheus.GaugeValue, float64(n))
}
