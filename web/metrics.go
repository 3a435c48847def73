package web

import (
	"context"
	"log/slog"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/replica"
)

// countsTimeout bounds the database read of one scrape.
const countsTimeout = 5 * time.Second

// Metrics are the Prometheus metrics of one server process, in a registry
// of its own so that tests and embedders never collide on the global one.
type Metrics struct {
	registry     *prometheus.Registry
	reclaimDelay prometheus.Histogram
	reaped       *prometheus.CounterVec
	notDelivered prometheus.Counter
	webhooks     webhookMetrics
}

// NewMetrics registers Leasehold's metrics. Job counts and lifecycle totals
// are read from q at scrape time and are cluster-wide; the reaper metrics
// are this process's own, fed by ObserveReap.
func NewMetrics(q *queue.Client) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		reclaimDelay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "leasehold_reclaim_delay_seconds",
			Help: "Time from a lease's deadline to its reclaim by this process's reaper.",
			// Reclaiming is meant to take milliseconds: resolve those finely,
			// and still place a stalled reaper.
			Buckets: []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}),
		reaped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_reaped_total",
			Help: "Jobs reclaimed from expired leases by this process's reaper, by the state they went to.",
		}, []string{"next_state"}),
		notDelivered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_not_delivered_total",
			Help: "Hand-overs to remote workers never confirmed, taken back by this process's reaper uncounted (not in leasehold_reaped_total).",
		}),
	}
	for _, st := range []queue.State{queue.StatePending, queue.StateDead, queue.StateCancelled} {
		m.reaped.WithLabelValues(string(st)) // present at 0 before the first reclaim
	}
	m.webhooks = newWebhookMetrics(q)
	m.registry.MustRegister(
		m.reclaimDelay, m.reaped, m.notDelivered, newCountsCollector(q), newUsageCollector(q),
		m.webhooks.deliveries, m.webhooks.givenUp, m.webhooks.pending,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// ObserveReap records one reclaimed lease; the server's reaper calls it.
func (m *Metrics) ObserveReap(r queue.Reaped) {
	if r.NotDelivered {
		m.notDelivered.Inc()
	} else {
		m.reaped.WithLabelValues(string(r.State)).Inc()
	}
	m.reclaimDelay.Observe(max(r.ReapedAt.Sub(r.LeaseUntil), 0).Seconds())
}

// ObserveRole exposes whether this process plays role now (reaper,
// pruner, scheduler: the roles one server of a database plays) as
// leasehold_role_active{role="…"} 1 or 0, so that operators and tests can
// tell which replica holds it.
func (m *Metrics) ObserveRole(role string, active func() bool) {
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "leasehold_role_active",
		Help:        "1 while this process holds the role (one process of a database at a time), else 0.",
		ConstLabels: prometheus.Labels{"role": role},
	}, func() float64 {
		if active() {
			return 1
		}
		return 0
	}))
}

// ObserveReadReplica exposes what r's last check of the read replica
// found: leasehold_read_replica_lag_seconds (-1 while it cannot be told:
// unreachable, not streaming) and leasehold_read_replica_reading, 1 while
// reads go to the replica. Both come from the check's memory: a scrape
// asks no database.
func (m *Metrics) ObserveReadReplica(r *replica.Reads) {
	m.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "leasehold_read_replica_lag_seconds",
			Help: "How far the read replica's replay was behind the primary at its last check (each second); -1 when unknown (unreachable, not streaming).",
		}, func() float64 {
			if s := r.Status(); s.LagKnown {
				return s.Lag.Seconds()
			}
			return -1
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "leasehold_read_replica_reading",
			Help: "1 while this process sends the dashboard's reads to the read replica, 0 while it reads the primary (replica behind or away).",
		}, func() float64 {
			if r.Status().Reading {
				return 1
			}
			return 0
		}),
	)
}

// metricsHandler serves the registry. A failed database read drops the
// job metrics from that scrape but keeps the others, so the process stays
// observable while its database is not.
func (s *server) metricsHandler() echo.HandlerFunc {
	return echo.WrapHandler(promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	}))
}

// countsCollector reads queue.Counts once per scrape for all the metrics
// that come from it.
type countsCollector struct {
	q                      *queue.Client
	jobs, claims, expiries *prometheus.Desc
	completions, refused   *prometheus.Desc
}

func newCountsCollector(q *queue.Client) *countsCollector {
	return &countsCollector{
		q: q,
		jobs: prometheus.NewDesc("leasehold_jobs",
			"Jobs per state, across the cluster.", []string{"state"}, nil),
		claims: prometheus.NewDesc("leasehold_claims_total",
			"Claims (attempts started), across the cluster.", nil, nil),
		completions: prometheus.NewDesc("leasehold_completions_total",
			"Attempts that succeeded, across the cluster.", nil, nil),
		expiries: prometheus.NewDesc("leasehold_lease_expiries_total",
			"Leases that expired and were reclaimed, across the cluster.", nil, nil),
		refused: prometheus.NewDesc("leasehold_stale_writes_refused_total",
			"Writes refused for a stale fencing token or an expired lease, across the cluster.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (cc *countsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- cc.jobs
	ch <- cc.claims
	ch <- cc.completions
	ch <- cc.expiries
	ch <- cc.refused
}

// Collect implements prometheus.Collector.
func (cc *countsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), countsTimeout)
	defer cancel()
	counts, err := cc.q.Counts(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(cc.jobs, err)
		return
	}
	for _, st := range queue.States {
		ch <- prometheus.MustNewConstMetric(cc.jobs, prometheus.GaugeValue, float64(counts.Jobs[st]), string(st))
	}
	ch <- prometheus.MustNewConstMetric(cc.claims, prometheus.CounterValue, float64(counts.Claims))
	ch <- prometheus.MustNewConstMetric(cc.completions, prometheus.CounterValue, float64(counts.Completions))
	ch <- prometheus.MustNewConstMetric(cc.expiries, prometheus.CounterValue, float64(counts.Expired))
	ch <- prometheus.MustNewConstMetric(cc.refused, prometheus.CounterValue, float64(counts.Refused))
}
