// Package telemetry sets up agent-runner's structured logs (log/slog JSON)
// and OpenTelemetry tracing, and turns pipeline stages into spans that join
// the caller's trace: a job whose trace.trace_id is a W3C trace id (set
// from the traceparent header on submit) gets its spans in that trace.
package telemetry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/agent-runner/agent-runner/job"
)

// Log attribute keys shared by every component.
const (
	KeyJobID   = "job_id"
	KeyTraceID = "trace_id"
)

// Logger returns a JSON slog logger at level writing to w.
func Logger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

// TracerProvider returns a provider that exports spans as JSON lines to w,
// or records them without exporting when w is nil.
func TracerProvider(w io.Writer) (*sdktrace.TracerProvider, error) {
	if w == nil {
		return sdktrace.NewTracerProvider(), nil
	}
	exp, err := stdouttrace.New(stdouttrace.WithWriter(w))
	if err != nil {
		return nil, err
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp)), nil
}

// JobContext returns ctx carrying the job's trace as a remote parent when
// its trace.trace_id is a W3C trace id.
func JobContext(ctx context.Context, req job.Request) context.Context {
	tid, err := trace.TraceIDFromHex(req.Trace.String(job.TraceID))
	if err != nil {
		return ctx
	}
	var sid trace.SpanID
	_, _ = rand.Read(sid[:])
	return trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true,
	}))
}

// StageSpan records a finished pipeline stage as a span under ctx.
func StageSpan(ctx context.Context, tr trace.Tracer, jobID, stage string, d time.Duration) {
	end := time.Now()
	_, span := tr.Start(ctx, "job."+stage, trace.WithTimestamp(end.Add(-d)))
	span.SetAttributes(attrString(KeyJobID, jobID))
	span.End(trace.WithTimestamp(end))
}

// NewTraceID returns a random W3C trace id in hex.
func NewTraceID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
