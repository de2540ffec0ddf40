package metrics

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// clock is the tests' fixed time: 2026-11-29T10:00:00.123Z.
var clock = time.Date(2026, 11, 29, 10, 0, 0, 123_000_000, time.UTC)

// writes records every Write call separately. It is deliberately not safe for concurrent use:
// the race detector catches a Recorder that writes without its lock.
type writes struct{ calls [][]byte }

func (w *writes) Write(p []byte) (int, error) {
	w.calls = append(w.calls, bytes.Clone(p))
	return len(p), nil
}

func newTestRecorder(t testing.TB, w *writes) *Recorder {
	t.Helper()
	r, err := New(Config{Writer: w, Service: "billing-worker", Queue: "jobs", Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const (
	email  = "email.send"
	report = "report.build"
)

// mixedBatch is a batch of 10 over two kinds with every interesting outcome.
func mixedBatch() []worker.Outcome {
	ms := time.Millisecond
	boom := errors.New("boom")
	return []worker.Outcome{
		{MessageID: "m1", JobID: "j1", Kind: email, Attempt: 1, Outcome: worker.OutcomeSucceeded, Ran: true,
			Duration: 12500 * time.Microsecond, QueueLatency: 1500 * ms},
		{MessageID: "m2", JobID: "j2", Kind: report, Attempt: 1, Outcome: worker.OutcomeSucceeded, Ran: true,
			Duration: 250 * ms, QueueLatency: 2 * time.Second},
		{MessageID: "m3", JobID: "j3", Kind: email, Attempt: 2, Outcome: worker.OutcomeRetry, Err: boom, Ran: true,
			Duration: 40 * ms, Visibility: 10 * time.Second, Failed: true, QueueLatency: 1500250 * time.Microsecond},
		{MessageID: "m4", JobID: "j4", Kind: email, Attempt: 5, Outcome: worker.OutcomeDeadLettered,
			Reason: jobs.ReasonExhausted, Err: boom, Ran: true, Duration: 7 * ms, QueueLatency: 900 * ms},
		{MessageID: "m5", JobID: "j5", Kind: email, Attempt: 1, Outcome: worker.OutcomeSkipped, QueueLatency: 800 * ms},
		{MessageID: "m6", JobID: "j6", Kind: report, Attempt: 1, Outcome: worker.OutcomeDeadLettered,
			Reason: jobs.ReasonCancelled, Err: boom, Ran: true, Duration: 1 * ms, QueueLatency: 700 * ms},
		{MessageID: "m7", JobID: "j7", Kind: email, Attempt: 1, Outcome: worker.OutcomeDeferred,
			Visibility: time.Minute, Failed: true, QueueLatency: 600 * ms},
		{MessageID: "m8", JobID: "j8", Kind: report, Attempt: 5, Outcome: worker.OutcomeDeadLettered,
			Reason: jobs.ReasonExhausted, Err: boom, SendErr: errors.New("dlq down"), Ran: true, Duration: 2 * ms,
			Failed: true, QueueLatency: 500 * ms},
		{MessageID: "m9", JobID: "j9", Kind: report, Attempt: 1, Outcome: worker.OutcomeNotRun, Failed: true,
			QueueLatency: 400 * ms},
		{MessageID: "m10", JobID: "j10", Kind: email, Attempt: 1, Outcome: worker.OutcomeDeadLettered,
			Reason: jobs.ReasonPayloadMismatch, Err: boom, QueueLatency: 300 * ms},
	}
}

// bigBatch has 250 jobs of one kind that ran; 130 of them have a queue latency.
func bigBatch() []worker.Outcome {
	out := make([]worker.Outcome, 250)
	for i := range out {
		out[i] = worker.Outcome{MessageID: fmt.Sprintf("m%d", i), JobID: fmt.Sprintf("j%d", i), Kind: email,
			Outcome: worker.OutcomeSucceeded, Ran: true, Duration: time.Duration(i+1) * time.Millisecond}
		if i < 130 {
			out[i].QueueLatency = time.Duration(i+1) * time.Second
		}
	}
	return out
}

type want struct {
	kind    string
	exact   bool               // the document has exactly the metrics below
	metrics map[string]float64 // single values
	arrays  map[string]int     // metric → number of values
}

func TestObserveBatch(t *testing.T) {
	t.Parallel()
	counts := func(kv ...any) map[string]float64 {
		m := map[string]float64{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = float64(kv[i+1].(int))
		}
		return m
	}
	tests := []struct {
		name string
		run  func(r *Recorder)
		want []want
	}{
		{
			name: "mixed",
			run:  func(r *Recorder) { r.ObserveBatch(context.Background(), mixedBatch()) },
			want: []want{
				{kind: email, exact: true, metrics: counts(MetricJobsSucceeded, 1, MetricJobsFailed, 2, MetricJobsRetried, 1,
					MetricJobsDeadLettered, 2, MetricJobsSkippedDuplicate, 1, MetricJobsDeferred, 1, MetricJobsNotRun, 0,
					MetricJobsAbandoned, 0, MetricDeadLetterSendFailed, 0, MetricCompletionWriteFailed, 0, MetricBatchSize, 10),
					arrays: map[string]int{MetricJobDuration: 3, MetricJobQueueLatency: 6}},
				{kind: report, exact: true, metrics: counts(MetricJobsSucceeded, 1, MetricJobsFailed, 2, MetricJobsRetried, 0,
					MetricJobsDeadLettered, 1, MetricJobsSkippedDuplicate, 0, MetricJobsDeferred, 0, MetricJobsNotRun, 1,
					MetricJobsAbandoned, 0, MetricDeadLetterSendFailed, 1, MetricCompletionWriteFailed, 0, MetricBatchSize, 10),
					arrays: map[string]int{MetricJobDuration: 3, MetricJobQueueLatency: 4}},
			},
		},
		{
			name: "unknown",
			run: func(r *Recorder) {
				r.ObserveBatch(context.Background(), []worker.Outcome{
					{MessageID: "m1", Outcome: worker.OutcomeDeadLettered, Reason: jobs.ReasonMalformed, Err: errors.New("not JSON")},
					{MessageID: "m2", JobID: "j2", Kind: "emial.send", Outcome: worker.OutcomeDeadLettered, Reason: jobs.ReasonUnknownKind},
					{MessageID: "m3", JobID: "j3", Kind: "video.encode", Outcome: worker.OutcomeAbandoned, Ran: true,
						Duration: 14 * time.Minute, Failed: true},
					{MessageID: "m4", Outcome: worker.OutcomeSucceeded, Ran: true, Duration: time.Millisecond}, // malformed hook
				})
			},
			want: []want{
				{kind: UnknownKind, metrics: counts(MetricJobsSucceeded, 1, MetricJobsFailed, 0, MetricJobsDeadLettered, 2, MetricBatchSize, 4),
					arrays: map[string]int{MetricJobDuration: 1}},
				{kind: "video.encode", metrics: counts(MetricJobsAbandoned, 1, MetricJobsFailed, 1, MetricBatchSize, 4),
					arrays: map[string]int{MetricJobDuration: 1}},
			},
		},
		{
			name: "over100",
			run:  func(r *Recorder) { r.ObserveBatch(context.Background(), bigBatch()) },
			want: []want{
				{kind: email, metrics: counts(MetricJobsSucceeded, 250, MetricJobsFailed, 0, MetricBatchSize, 250),
					arrays: map[string]int{MetricJobDuration: 100, MetricJobQueueLatency: 100}},
				{kind: email, exact: true, arrays: map[string]int{MetricJobDuration: 100, MetricJobQueueLatency: 30}},
				{kind: email, exact: true, arrays: map[string]int{MetricJobDuration: 50}},
			},
		},
		{
			name: "finish_error",
			run: func(r *Recorder) {
				r.FinishError(context.Background(), &jobs.Info{ID: "j1", Kind: email},
					errors.New("dynamodb: ProvisionedThroughputExceededException: \"rate\"\nexceeded"))
				r.FinishError(context.Background(), nil, nil)
			},
			want: []want{
				{kind: email, exact: true, metrics: counts(MetricCompletionWriteFailed, 1)},
				{kind: UnknownKind, exact: true, metrics: counts(MetricCompletionWriteFailed, 1)},
			},
		},
		{
			name: "payload",
			run: func(r *Recorder) {
				ms := time.Millisecond
				r.ObserveBatch(context.Background(), []worker.Outcome{
					{MessageID: "m1", JobID: "j1", Kind: email, Outcome: worker.OutcomeSucceeded, Ran: true, Duration: ms,
						Payload: &worker.PayloadOutcome{Bytes: 5 << 20, Fetch: 40 * ms, Deleted: true}},
					{MessageID: "m2", JobID: "j2", Kind: email, Outcome: worker.OutcomeSucceeded, Ran: true, Duration: ms,
						Payload: &worker.PayloadOutcome{Bytes: 2 << 20, Fetch: 20 * ms, Deleted: true}},
					{MessageID: "m3", Outcome: worker.OutcomeDeadLettered, Reason: jobs.ReasonPayloadMissing,
						Payload: &worker.PayloadOutcome{Err: errors.New("NoSuchKey")}},
					{MessageID: "m4", JobID: "j4", Kind: report, Outcome: worker.OutcomeSucceeded, Ran: true, Duration: ms},
				})
			},
			want: []want{
				{kind: email, exact: true, metrics: counts(MetricPayloadsFetched, 2, MetricPayloadFetchFailed, 0, MetricPayloadBytes, 7<<20,
					MetricJobsSucceeded, 2, MetricJobsFailed, 0, MetricJobsRetried, 0, MetricJobsDeadLettered, 0, MetricJobsSkippedDuplicate, 0,
					MetricJobsDeferred, 0, MetricJobsNotRun, 0, MetricJobsAbandoned, 0, MetricDeadLetterSendFailed, 0,
					MetricCompletionWriteFailed, 0, MetricBatchSize, 4),
					arrays: map[string]int{MetricJobDuration: 2}},
				{kind: UnknownKind, metrics: counts(MetricPayloadsFetched, 0, MetricPayloadFetchFailed, 1, MetricPayloadBytes, 0,
					MetricJobsDeadLettered, 1)},
				{kind: report, exact: true, metrics: counts(MetricJobsSucceeded, 1, MetricJobsFailed, 0, MetricJobsRetried, 0,
					MetricJobsDeadLettered, 0, MetricJobsSkippedDuplicate, 0, MetricJobsDeferred, 0, MetricJobsNotRun, 0,
					MetricJobsAbandoned, 0, MetricDeadLetterSendFailed, 0, MetricCompletionWriteFailed, 0, MetricBatchSize, 4),
					arrays: map[string]int{MetricJobDuration: 1}},
			},
		},
		{
			name: "misrouted",
			run: func(r *Recorder) {
				r.ObserveBatch(context.Background(), []worker.Outcome{
					{MessageID: "m1", JobID: "j1", Kind: email, Outcome: worker.OutcomeSucceeded, Ran: true, Duration: time.Millisecond, Misrouted: true},
					{MessageID: "m2", JobID: "j2", Kind: email, Outcome: worker.OutcomeRetry, Ran: true, Duration: time.Millisecond, Failed: true, Misrouted: true},
					{MessageID: "m3", JobID: "j3", Kind: report, Outcome: worker.OutcomeSucceeded, Ran: true, Duration: time.Millisecond},
				})
			},
			want: []want{
				{kind: email, exact: true, metrics: counts(MetricJobsMisrouted, 2, MetricJobsSucceeded, 1, MetricJobsFailed, 1, MetricJobsRetried, 1,
					MetricJobsDeadLettered, 0, MetricJobsSkippedDuplicate, 0, MetricJobsDeferred, 0, MetricJobsNotRun, 0,
					MetricJobsAbandoned, 0, MetricDeadLetterSendFailed, 0, MetricCompletionWriteFailed, 0, MetricBatchSize, 3),
					arrays: map[string]int{MetricJobDuration: 2}},
				{kind: report, exact: true, metrics: counts(MetricJobsSucceeded, 1, MetricJobsFailed, 0, MetricJobsRetried, 0,
					MetricJobsDeadLettered, 0, MetricJobsSkippedDuplicate, 0, MetricJobsDeferred, 0, MetricJobsNotRun, 0,
					MetricJobsAbandoned, 0, MetricDeadLetterSendFailed, 0, MetricCompletionWriteFailed, 0, MetricBatchSize, 3),
					arrays: map[string]int{MetricJobDuration: 1}},
			},
		},
		{
			name: "empty",
			run:  func(r *Recorder) { r.ObserveBatch(context.Background(), nil) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var w writes
			tt.run(newTestRecorder(t, &w))
			if len(w.calls) != len(tt.want) {
				t.Fatalf("%d documents, want %d:\n%s", len(w.calls), len(tt.want), bytes.Join(w.calls, nil))
			}
			for i, doc := range w.calls {
				m := checkEMF(t, doc)
				if m["Kind"] != tt.want[i].kind {
					t.Errorf("document %d: Kind %v, want %s", i, m["Kind"], tt.want[i].kind)
				}
				if m["Service"] != "billing-worker" || m["Queue"] != "jobs" {
					t.Errorf("document %d: Service %v, Queue %v", i, m["Service"], m["Queue"])
				}
				names := metricNames(m)
				wantNames := len(tt.want[i].metrics) + len(tt.want[i].arrays)
				if tt.want[i].exact && len(names) != wantNames {
					t.Errorf("document %d: metrics %v, want %d of them", i, names, wantNames)
				}
				for name, v := range tt.want[i].metrics {
					if got, ok := m[name].(float64); !ok || got != v {
						t.Errorf("document %d: %s = %v, want %v", i, name, m[name], v)
					}
				}
				for name, n := range tt.want[i].arrays {
					if got, ok := m[name].([]any); !ok || len(got) != n {
						t.Errorf("document %d: %s has %v, want %d values", i, name, m[name], n)
					}
				}
			}
			golden(t, bytes.Join(w.calls, nil))
		})
	}
}

// TestSplitKeepsEveryValue checks that the documents of a kind with more than 100 values carry
// every value once, in the batch's order.
func TestSplitKeepsEveryValue(t *testing.T) {
	t.Parallel()
	var w writes
	batch := bigBatch()
	newTestRecorder(t, &w).ObserveBatch(context.Background(), batch)
	var durations, latencies []float64
	for _, doc := range w.calls {
		m := checkEMF(t, doc)
		for _, v := range asArray(m[MetricJobDuration]) {
			durations = append(durations, v)
		}
		for _, v := range asArray(m[MetricJobQueueLatency]) {
			latencies = append(latencies, v)
		}
	}
	if len(durations) != len(batch) || len(latencies) != 130 {
		t.Fatalf("%d durations and %d latencies, want %d and 130", len(durations), len(latencies), len(batch))
	}
	for i, d := range durations {
		if d != float64(i+1) {
			t.Fatalf("duration %d = %v, want %d", i, d, i+1)
		}
	}
	for i, l := range latencies {
		if l != float64(i+1)*1000 {
			t.Fatalf("latency %d = %v, want %d", i, l, (i+1)*1000)
		}
	}
}

func asArray(v any) []float64 {
	a, _ := v.([]any)
	out := make([]float64, 0, len(a))
	for _, x := range a {
		out = append(out, x.(float64))
	}
	return out
}

// TestDeadLetterIDsCapped: the id properties keep at most MaxIDs ids; the counts keep them all.
func TestDeadLetterIDsCapped(t *testing.T) {
	t.Parallel()
	batch := make([]worker.Outcome, 30)
	for i := range batch {
		reason := jobs.ReasonExhausted
		if i%3 == 0 {
			reason = jobs.ReasonCancelled
		}
		batch[i] = worker.Outcome{MessageID: fmt.Sprintf("m%d", i), JobID: fmt.Sprintf("j%d", i), Kind: email,
			Outcome: worker.OutcomeDeadLettered, Reason: reason}
	}
	var w writes
	newTestRecorder(t, &w).ObserveBatch(context.Background(), batch)
	if len(w.calls) != 1 {
		t.Fatalf("%d documents, want 1", len(w.calls))
	}
	m := checkEMF(t, w.calls[0])
	jobIDs, _ := m["DeadLetteredJobIds"].([]any)
	msgIDs, _ := m["DeadLetteredMessageIds"].([]any)
	if len(jobIDs) != MaxIDs || len(msgIDs) != MaxIDs || jobIDs[0] != "j0" || msgIDs[MaxIDs-1] != "m19" {
		t.Errorf("ids: %v / %v", jobIDs, msgIDs)
	}
	reasons, _ := m["DeadLetterReasons"].(map[string]any)
	if m[MetricJobsDeadLettered] != 30.0 || reasons["cancelled"] != 10.0 || reasons["exhausted"] != 20.0 {
		t.Errorf("JobsDeadLettered %v, reasons %v", m[MetricJobsDeadLettered], reasons)
	}
}

// TestConcurrentBatches checks that concurrent batches and completion failures never interleave
// their documents (the writer is not safe for concurrent use; -race watches it).
func TestConcurrentBatches(t *testing.T) {
	t.Parallel()
	var w writes
	r := newTestRecorder(t, &w)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				r.ObserveBatch(context.Background(), mixedBatch())
				r.FinishError(context.Background(), &jobs.Info{ID: "j", Kind: report}, errors.New("x"))
			}
		})
	}
	wg.Wait()
	if len(w.calls) != 8*20*3 {
		t.Fatalf("%d documents, want %d", len(w.calls), 8*20*3)
	}
	for _, doc := range w.calls {
		checkEMF(t, doc)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("closed") }

func TestDropped(t *testing.T) {
	t.Parallel()
	r, err := New(Config{Writer: failingWriter{}})
	if err != nil {
		t.Fatal(err)
	}
	r.ObserveBatch(context.Background(), mixedBatch())
	r.FinishError(context.Background(), nil, errors.New("x"))
	if got := r.Dropped(); got != 3 {
		t.Fatalf("Dropped() = %d, want 3", got)
	}
}

// TestObserveBatchAllocs: once its buffers have grown, a batch costs no allocation. Not
// parallel: AllocsPerRun counts the whole process's allocations.
func TestObserveBatchAllocs(t *testing.T) {
	r, err := New(Config{Writer: discard{}, Queue: "jobs", Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	batch := mixedBatch()
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() { r.ObserveBatch(ctx, batch) }); n != 0 {
		t.Errorf("ObserveBatch: %v allocations per batch, want 0", n)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// metricNames returns the names in a document's metric directive.
func metricNames(m map[string]any) []string {
	var names []string
	for _, d := range m["_aws"].(map[string]any)["CloudWatchMetrics"].([]any) {
		for _, md := range d.(map[string]any)["Metrics"].([]any) {
			names = append(names, md.(map[string]any)["Name"].(string))
		}
	}
	return names
}

// validUnits are the EMF units (CloudWatch's StandardUnit values).
var validUnits = map[string]bool{
	"Seconds": true, "Microseconds": true, "Milliseconds": true, "Bytes": true, "Kilobytes": true,
	"Megabytes": true, "Gigabytes": true, "Terabytes": true, "Bits": true, "Kilobits": true, "Megabits": true,
	"Gigabits": true, "Terabits": true, "Percent": true, "Count": true, "Bytes/Second": true,
	"Kilobytes/Second": true, "Megabytes/Second": true, "Gigabytes/Second": true, "Terabytes/Second": true,
	"Bits/Second": true, "Kilobits/Second": true, "Megabits/Second": true, "Gigabits/Second": true,
	"Terabits/Second": true, "Count/Second": true, "None": true,
}

// checkEMF checks that doc is one line of valid JSON with a valid EMF shape, and returns it
// decoded.
func checkEMF(t *testing.T, doc []byte) map[string]any {
	t.Helper()
	if !bytes.HasSuffix(doc, []byte("\n")) || bytes.Count(doc, []byte("\n")) != 1 {
		t.Fatalf("not one line ending in a newline: %q", doc)
	}
	if !json.Valid(doc) {
		t.Fatalf("invalid JSON: %s", doc)
	}
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("EMF: "+format+"\n%s", append(args, doc)...)
	}
	keys := func(obj map[string]any, allowed ...string) {
		t.Helper()
		for k := range obj {
			ok := false
			for _, a := range allowed {
				ok = ok || k == a
			}
			if !ok {
				fail("unexpected member %q", k)
			}
		}
	}
	aws, ok := m["_aws"].(map[string]any)
	if !ok {
		fail("no _aws object")
	}
	keys(aws, "Timestamp", "CloudWatchMetrics")
	if ts, ok := aws["Timestamp"].(float64); !ok || int64(ts) != clock.UnixMilli() {
		fail("Timestamp %v, want %d", aws["Timestamp"], clock.UnixMilli())
	}
	directives, ok := aws["CloudWatchMetrics"].([]any)
	if !ok || len(directives) == 0 {
		fail("CloudWatchMetrics is not a non-empty array")
	}
	seen := map[string]bool{}
	for _, d := range directives {
		dir, ok := d.(map[string]any)
		if !ok {
			fail("directive is not an object")
		}
		keys(dir, "Namespace", "Dimensions", "Metrics")
		if ns, ok := dir["Namespace"].(string); !ok || ns == "" {
			fail("Namespace %v", dir["Namespace"])
		}
		sets, ok := dir["Dimensions"].([]any)
		if !ok {
			fail("Dimensions is not an array")
		}
		for _, s := range sets {
			set, ok := s.([]any)
			if !ok || len(set) > 30 {
				fail("dimension set %v", s)
			}
			for _, name := range set {
				n, ok := name.(string)
				if !ok {
					fail("dimension name %v", name)
				}
				v, ok := m[n].(string)
				if !ok || !validDimensionValue(v) {
					fail("dimension %s has value %v: want a valid string", n, m[n])
				}
			}
		}
		defs, ok := dir["Metrics"].([]any)
		if !ok || len(defs) == 0 || len(defs) > 100 {
			fail("Metrics %v", dir["Metrics"])
		}
		for _, md := range defs {
			def, ok := md.(map[string]any)
			if !ok {
				fail("metric definition is not an object")
			}
			keys(def, "Name", "Unit", "StorageResolution")
			name, ok := def["Name"].(string)
			if !ok || name == "" || seen[name] {
				fail("metric name %v (empty or repeated)", def["Name"])
			}
			seen[name] = true
			if u, ok := def["Unit"].(string); !ok || !validUnits[u] {
				fail("metric %s: unit %v", name, def["Unit"])
			}
			switch v := m[name].(type) {
			case float64:
			case []any:
				if len(v) == 0 || len(v) > MaxValues {
					fail("metric %s has %d values", name, len(v))
				}
				for _, x := range v {
					if _, ok := x.(float64); !ok {
						fail("metric %s: value %v is not a number", name, x)
					}
				}
			default:
				fail("metric %s: value %v is not a number or an array of numbers", name, m[name])
			}
		}
	}
	for _, k := range []string{"DeadLetteredJobIds", "DeadLetteredMessageIds"} {
		if ids, ok := m[k].([]any); ok && len(ids) > MaxIDs {
			fail("%s has %d ids", k, len(ids))
		}
	}
	return m
}

// golden compares got with testdata/<test name>.golden, or rewrites it with -update.
func golden(t *testing.T, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", strings.ReplaceAll(t.Name(), "/", "_")+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run with -update to accept):\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}
