package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/telemetry"
)

func TestStageSpansJoinTheJobTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tr := tp.Tracer("test")
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	req := job.Request{JobID: "job_t"}
	req.Trace = req.Trace.WithString(job.TraceID, traceID)

	ctx, run := tr.Start(telemetry.JobContext(context.Background(), req), "job.run")
	telemetry.StageSpan(ctx, tr, "job_t", "snapshot", 30*time.Millisecond)
	run.End()

	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	stage, parent := spans[0], spans[1]
	if got := stage.SpanContext().TraceID().String(); got != traceID {
		t.Errorf("stage trace id = %s, want %s", got, traceID)
	}
	if stage.Name() != "job.snapshot" || stage.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("stage span %q parent %s, want job.snapshot under job.run %s", stage.Name(), stage.Parent().SpanID(), parent.SpanContext().SpanID())
	}
	if d := stage.EndTime().Sub(stage.StartTime()); d != 30*time.Millisecond {
		t.Errorf("stage span lasts %s, want 30ms", d)
	}
	var hasJobID bool
	for _, a := range stage.Attributes() {
		hasJobID = hasJobID || (string(a.Key) == telemetry.KeyJobID && a.Value.AsString() == "job_t")
	}
	if !hasJobID {
		t.Errorf("stage span attributes %v lack job_id", stage.Attributes())
	}
}

func TestJobContextIgnoresNonW3CTraceIDs(t *testing.T) {
	for _, id := range []string{"", "tr_example", "00000000000000000000000000000000"} {
		req := job.Request{}
		req.Trace = req.Trace.WithString(job.TraceID, id)
		if sc := trace.SpanContextFromContext(telemetry.JobContext(context.Background(), req)); sc.IsValid() {
			t.Errorf("JobContext(trace_id %q) has a span context %v, want none", id, sc)
		}
	}
	if got := telemetry.NewTraceID(); len(got) != 32 {
		t.Errorf("NewTraceID() = %q, want 32 hex digits", got)
	}
}

func TestLoggerWritesJSON(t *testing.T) {
	var buf bytes.Buffer
	telemetry.Logger(&buf, 0).Info("job accepted", telemetry.KeyJobID, "job_x", telemetry.KeyTraceID, "abc")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("log line %q is not JSON: %v", buf.String(), err)
	}
	if line["job_id"] != "job_x" || line["trace_id"] != "abc" || line["msg"] != "job accepted" {
		t.Errorf("log line = %v", line)
	}
}

func TestTracerProviderExportsJSONLines(t *testing.T) {
	var buf bytes.Buffer
	tp, err := telemetry.TracerProvider(&buf)
	if err != nil {
		t.Fatal(err)
	}
	_, span := tp.Tracer("t").Start(context.Background(), "job.submit")
	span.End()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(bytes.TrimSpace(buf.Bytes()), []byte("\n")); n != 0 {
		t.Errorf("one span exported on %d lines, want one JSON line", n+1)
	}
	var got struct{ Name string }
	if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &got); err != nil || got.Name != "job.submit" {
		t.Errorf("exported %q (%v), want a job.submit span as JSON", buf.String(), err)
	}
}
