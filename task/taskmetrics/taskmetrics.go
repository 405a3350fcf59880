// Package taskmetrics exports seed 004's agent-task metrics to
// Prometheus: agentic_tasks_total{state} (tasks that entered each state),
// agentic_tasks_active{state} (tasks in each active state now),
// agentic_task_duration_seconds{outcome} (submission to terminal state),
// agentic_provision_duration_seconds and its seed name
// agentic_vm_provision_duration_seconds (provisioning to ready), and
// agentic_agent_connected (agents running now). It is fed by the task state
// machines' observer, so every committed transition counts exactly once.
package taskmetrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agent-runner/agent-runner/task/state"
)

// Metrics holds the collectors and the provisioning start times.
type Metrics struct {
	total     *prometheus.CounterVec
	active    *prometheus.GaugeVec
	duration  *prometheus.HistogramVec
	provision prometheus.Histogram
	vmProv    prometheus.Histogram
	connected prometheus.Gauge

	mu           sync.Mutex
	provisioning map[string]time.Time
	now          func() time.Time
}

// New registers the collectors on reg.
func New(reg prometheus.Registerer) *Metrics {
	provBuckets := []float64{0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30, 100, 300}
	m := &Metrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentic_tasks_total", Help: "Agent tasks that entered each state (this process).",
		}, []string{"state"}),
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "agentic_tasks_active", Help: "Agent tasks in each active state now.",
		}, []string{"state"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agentic_task_duration_seconds", Help: "Agent task duration from submission to its terminal state, by outcome (the terminal state).",
			Buckets: prometheus.ExponentialBuckets(1, 3, 12),
		}, []string{"outcome"}),
		provision: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "agentic_provision_duration_seconds", Help: "Time from provisioning to ready (sandbox, token, secrets).", Buckets: provBuckets,
		}),
		vmProv: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "agentic_vm_provision_duration_seconds", Help: "Seed 004's name for agentic_provision_duration_seconds (same observations).", Buckets: provBuckets,
		}),
		connected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "agentic_agent_connected", Help: "Agents running now (tasks in state running).",
		}),
		provisioning: map[string]time.Time{},
		now:          time.Now,
	}
	reg.MustRegister(m.total, m.active, m.duration, m.provision, m.vmProv, m.connected)
	for _, s := range state.All {
		m.total.WithLabelValues(string(s))
		if !s.Terminal() {
			m.active.WithLabelValues(string(s))
		}
	}
	return m
}

// Observe is a state.Observer: from is "" when the task had no state in
// this process (submitted, or found by recovery).
func (m *Metrics) Observe(from state.State, rec state.Record) {
	to := rec.State
	m.total.WithLabelValues(string(to)).Inc()
	if from != "" && !from.Terminal() {
		m.active.WithLabelValues(string(from)).Dec()
	}
	if !to.Terminal() {
		m.active.WithLabelValues(string(to)).Inc()
	}
	if from == state.Running {
		m.connected.Dec()
	}
	if to == state.Running {
		m.connected.Inc()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case to == state.Provisioning:
		m.provisioning[rec.TaskID] = m.now()
	case from == state.Provisioning:
		if start, ok := m.provisioning[rec.TaskID]; ok && to == state.Ready {
			d := m.now().Sub(start).Seconds()
			m.provision.Observe(d)
			m.vmProv.Observe(d)
		}
		delete(m.provisioning, rec.TaskID)
	}
	if to.Terminal() {
		end := m.now()
		if rec.EndedAt != nil {
			end = *rec.EndedAt
		}
		m.duration.WithLabelValues(string(to)).Observe(end.Sub(rec.CreatedAt).Seconds())
	}
}
