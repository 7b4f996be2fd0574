package clientlib

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// answerCounts counts decisions by the Source that answered them. Each
// counter has a cache line of its own: the server's is bumped by every
// decision on every core, the policies' by every decision during an
// outage, and none should slow another down.
type answerCounts [FromFailClosed + 1]paddedCounter

type paddedCounter struct {
	atomic.Uint64
	_ [56]byte
}

// answered counts one decision answered by s. One uncontended atomic add:
// no lock, no allocation.
func (c *answerCounts) answered(s Source) { c[s].Add(1) }

// sourceLabels are the decisions metric's source values. Cache answers are
// counted by the over-limit cache itself (sluice_client_overlimit_cache_
// hits_total), not here.
var sourceLabels = [...]struct {
	source Source
	label  string
}{
	{FromServer, "server"},
	{FromFallback, "fallback"},
	{FromFailOpen, "fail_open"},
	{FromFailClosed, "fail_closed"},
}

// Collector returns a prometheus.Collector for the Limiter's counters,
// each with the constant label limiter=name, so that a process with
// several Limiters (one per policy: "login", "api") registers one
// collector for each in the same registry:
//
//   - sluice_client_decisions_total{source}: decisions (AllowN, peeks
//     included, All, Acquire) by who answered them: server, fallback,
//     fail_open or fail_closed. FailError's decisions return the error and are not
//     counted here; sluice_client_server_errors_total counts their cause.
//   - sluice_client_fallback_episodes_total: how many times the server
//     stopped answering and the failure policy took over (Stats.Alarms;
//     WithAlarm's hook fires at the same moments).
//   - sluice_client_fallback_active: 1 while the failure policy answers
//     (Stats.Degraded): from the call that found the server unreachable
//     until one that reaches it again. Calls in flight across the change
//     do not flip it back and forth (see WithAlarm).
//   - sluice_client_overlimit_cache_hits_total: decisions the over-limit
//     cache refused locally (0 without WithOverLimitCache).
//   - sluice_client_server_errors_total: calls (decisions, refunds,
//     resets, inspection, releases) that found the server unreachable or
//     unable to serve. Calls WithProbeInterval sends straight to the
//     policy did not try, and are not counted.
//
// The counters are read when scraped; decisions pay one atomic add each.
func (l *Limiter) Collector(name string) prometheus.Collector {
	labels := prometheus.Labels{"limiter": name}
	return &collector{
		l: l,
		decisions: prometheus.NewDesc("sluice_client_decisions_total",
			"Rate-limit decisions, by who answered: the server or the failure policy (fallback, fail_open, fail_closed).",
			[]string{"source"}, labels),
		episodes: prometheus.NewDesc("sluice_client_fallback_episodes_total",
			"Times the server stopped answering and the failure policy took over.", nil, labels),
		active: prometheus.NewDesc("sluice_client_fallback_active",
			"1 while the failure policy answers instead of the server, else 0.", nil, labels),
		cacheHits: prometheus.NewDesc("sluice_client_overlimit_cache_hits_total",
			"Decisions refused locally by the over-limit cache.", nil, labels),
		serverErrors: prometheus.NewDesc("sluice_client_server_errors_total",
			"Calls that found the server unreachable or unable to serve.", nil, labels),
	}
}

type collector struct {
	l                                                    *Limiter
	decisions, episodes, active, cacheHits, serverErrors *prometheus.Desc
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.decisions, c.episodes, c.active, c.cacheHits, c.serverErrors} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.l.Stats()
	for _, s := range sourceLabels {
		ch <- prometheus.MustNewConstMetric(c.decisions, prometheus.CounterValue, float64(c.l.answers[s.source].Load()), s.label)
	}
	active := 0.0
	if st.Degraded {
		active = 1
	}
	ch <- prometheus.MustNewConstMetric(c.episodes, prometheus.CounterValue, float64(st.Alarms))
	ch <- prometheus.MustNewConstMetric(c.active, prometheus.GaugeValue, active)
	ch <- prometheus.MustNewConstMetric(c.cacheHits, prometheus.CounterValue, float64(st.CacheHits))
	ch <- prometheus.MustNewConstMetric(c.serverErrors, prometheus.CounterValue, float64(c.l.serverErrors.Load()))
}
