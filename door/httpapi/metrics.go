package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
)

// Metrics are the service's Prometheus metrics.
type Metrics struct {
	reg       *prometheus.Registry
	jobs      *prometheus.CounterVec
	accepts   *prometheus.CounterVec
	rejects   *prometheus.CounterVec
	durations *prometheus.HistogramVec
	stages    *prometheus.HistogramVec
	running   *prometheus.GaugeVec
}

func newMetrics(reg *prometheus.Registry, q *queue.Queue) *Metrics {
	m := &Metrics{
		reg: reg,
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agent_runner_jobs_total", Help: "Jobs that reached a terminal status, by status and backend.",
		}, []string{"status", "backend"}),
		accepts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agent_runner_jobs_accepted_total", Help: "Jobs accepted into the queue, by backend.",
		}, []string{"backend"}),
		rejects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agent_runner_jobs_rejected_total", Help: "Submissions refused before queueing, by error code.",
		}, []string{"code"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agent_runner_job_duration_seconds", Help: "Job duration from start to result, by backend and status.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14),
		}, []string{"backend", "status"}),
		stages: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agent_runner_stage_duration_seconds", Help: "Pipeline stage latency (policy and snapshot are the setup latency).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 3, 12),
		}, []string{"stage"}),
		running: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "agent_runner_jobs_running", Help: "Jobs running now, by backend.",
		}, []string{"backend"}),
	}
	reg.MustRegister(m.jobs, m.accepts, m.rejects, m.durations, m.stages, m.running)
	if q != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "agent_runner_queue_depth", Help: "Jobs in the queue stream (queued or running).",
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			n, err := q.Depth(ctx)
			if err != nil {
				return -1
			}
			return float64(n)
		}))
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "agent_runner_queue_capacity", Help: "Configured queue capacity.",
		}, func() float64 { return float64(q.Capacity()) }))
	}
	return m
}

// Accepted records a job accepted into the queue (jobs.Observer).
func (m *Metrics) Accepted(backend string) { m.accepts.WithLabelValues(backend).Inc() }

// Rejected records a submission refused before queueing (jobs.Observer).
func (m *Metrics) Rejected(c job.Code) { m.rejects.WithLabelValues(string(c)).Inc() }

// Started records a job a worker began.
func (m *Metrics) Started(backend string) { m.running.WithLabelValues(backend).Inc() }

// Ran records the terminal result of a job a worker ran.
func (m *Metrics) Ran(res job.Result) {
	m.running.WithLabelValues(res.Backend).Dec()
	m.Finished(res)
}

// Finished records a terminal result (jobs.Observer: a job the service
// ended itself, canceled while queued).
func (m *Metrics) Finished(res job.Result) {
	m.jobs.WithLabelValues(string(res.Status), res.Backend).Inc()
	m.durations.WithLabelValues(res.Backend, string(res.Status)).Observe(float64(res.DurationMS) / 1000)
}

// Stage records one pipeline stage's latency.
func (m *Metrics) Stage(stage string, d time.Duration) {
	m.stages.WithLabelValues(stage).Observe(d.Seconds())
}

func (s *Server) metricsHandler(w http.ResponseWriter, r *http.Request) {
	promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}
