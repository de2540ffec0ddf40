package metrics

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// Metric names, for dashboards and alarms.
const (
	MetricJobsSucceeded         = "JobsSucceeded"
	MetricJobsFailed            = "JobsFailed"
	MetricJobsRetried           = "JobsRetried"
	MetricJobsDeadLettered      = "JobsDeadLettered"
	MetricJobsSkippedDuplicate  = "JobsSkippedDuplicate"
	MetricJobsDeferred          = "JobsDeferred"
	MetricJobsNotRun            = "JobsNotRun"
	MetricJobsAbandoned         = "JobsAbandoned"
	MetricDeadLetterSendFailed  = "DeadLetterSendFailed"
	MetricCompletionWriteFailed = "CompletionWriteFailed"
	MetricBatchSize             = "BatchSize"
	MetricJobDuration           = "JobDuration"
	MetricJobQueueLatency       = "JobQueueLatency"
	// MetricPayloadsFetched counts the messages whose job was read from S3 (a pointer body);
	// MetricPayloadFetchFailed those whose object could not be read (retried, or dead-lettered as
	// payload_missing); MetricPayloadBytes sums the bytes read. Written only for kinds (and
	// batches) that had such messages.
	MetricPayloadsFetched    = "PayloadsFetched"
	MetricPayloadFetchFailed = "PayloadFetchFailed"
	MetricPayloadBytes       = "PayloadBytes"
	// MetricJobsMisrouted counts the jobs that arrived on a queue their kind is not routed to
	// (worker.Outcome.Misrouted, a stack of several queues): they ran all the same. Written only
	// for kinds (and batches) that had such jobs.
	MetricJobsMisrouted = "JobsMisrouted"
)

// Dimension names. Every metric has all three.
const (
	DimensionService = "Service"
	DimensionQueue   = "Queue"
	DimensionKind    = "Kind"
)

// UnknownKind is the Kind dimension of messages whose body is not an envelope, and of kinds no
// worker is registered for.
const UnknownKind = "unknown"

// MaxValues is EMF's limit of values per metric in one document.
const MaxValues = 100

// MaxIDs caps the DeadLetteredJobIds and DeadLetteredMessageIds properties of a document.
const MaxIDs = 20

// maxErrorLen caps the Error property of a completion-failure document, in bytes.
const maxErrorLen = 512

// Recorder writes the worker's metrics as EMF documents. Create it with [New]; it is safe for
// concurrent use.
type Recorder struct {
	w   io.Writer
	now func() time.Time

	// Pieces of every document, built once by New.
	head    string // {"_aws":{"Timestamp":
	metrics string // ,"CloudWatchMetrics":[{"Namespace":…,"Dimensions":[[…]],"Metrics":[
	dims    string // ]}]},"Service":…,"Queue":…,"Kind":
	dropped atomic.Int64
	mu      sync.Mutex // guards w and the scratch below
	buf     []byte
	kinds   []string // the batch's Kind dimension values, in order of first appearance
	group   []int32  // outcome index → index in kinds
	reasons []reasonCount
	ends    []int // ends[i] is the end of document i in buf
}

type reasonCount struct {
	reason string
	n      int
}

// New validates cfg, fills in its defaults and returns a Recorder.
func New(cfg Config) (*Recorder, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	r := &Recorder{w: cfg.Writer, now: cfg.Now}
	r.head = `{"_aws":{"Timestamp":`
	b := []byte(`,"CloudWatchMetrics":[{"Namespace":`)
	b = appendString(b, cfg.Namespace)
	b = append(b, `,"Dimensions":[["`+DimensionService+`","`+DimensionQueue+`","`+DimensionKind+`"]],"Metrics":[`...)
	r.metrics = string(b)
	b = append(b[:0], `]}]},"`+DimensionService+`":`...)
	b = appendString(b, cfg.Service)
	b = append(b, `,"`+DimensionQueue+`":`...)
	b = appendString(b, cfg.Queue)
	b = append(b, `,"`+DimensionKind+`":`...)
	r.dims = string(b)
	r.buf = make([]byte, 0, 4096)
	return r, nil
}

// Dropped returns the number of documents whose Write failed. They are not retried.
func (r *Recorder) Dropped() int64 { return r.dropped.Load() }

// counts are one kind's counts in a batch.
type counts struct {
	succeeded, failed, retried, deadLettered, skipped, deferred, notRun, abandoned, sendFailed int
	ran, latencies                                                                             int
	payloads, payloadFailed, payloadBytes                                                      int
	misrouted                                                                                  int
}

// countDefs are the metric definitions of the counts, in the order they are written.
const countDefs = `{"Name":"` + MetricJobsSucceeded + `","Unit":"Count"},` +
	`{"Name":"` + MetricJobsFailed + `","Unit":"Count"},` +
	`{"Name":"` + MetricJobsRetried + `","Unit":"Count"},` +
	`{"Name":"` + MetricJobsDeadLettered + `","Unit":"Count"},` +
	`{"Name":"` + MetricJobsSkippedDuplicate + `","Unit":"Count"},` +
	`{"Name":"` + MetricJobsDeferred + `","Unit":"Count"},` +
	`{"Name":"` + MetricJobsNotRun + `","Unit":"Count"},` +
	`{"Name":"` + MetricJobsAbandoned + `","Unit":"Count"},` +
	`{"Name":"` + MetricDeadLetterSendFailed + `","Unit":"Count"},` +
	`{"Name":"` + MetricCompletionWriteFailed + `","Unit":"Count"},` +
	`{"Name":"` + MetricBatchSize + `","Unit":"Count"}`

// payloadDefs are the definitions of the payload metrics, written after the counts when a kind
// had pointer messages.
const payloadDefs = `,{"Name":"` + MetricPayloadsFetched + `","Unit":"Count"},` +
	`{"Name":"` + MetricPayloadFetchFailed + `","Unit":"Count"},` +
	`{"Name":"` + MetricPayloadBytes + `","Unit":"Bytes"}`

// misroutedDef is the definition of JobsMisrouted, written after the counts when a kind had
// misrouted jobs.
const misroutedDef = `,{"Name":"` + MetricJobsMisrouted + `","Unit":"Count"}`

const (
	durationDef = `{"Name":"` + MetricJobDuration + `","Unit":"Milliseconds"}`
	latencyDef  = `{"Name":"` + MetricJobQueueLatency + `","Unit":"Milliseconds"}`
)

// ObserveBatch writes the metrics of one settled batch: one document per kind, and more when a
// kind has over [MaxValues] durations or latencies (see the package documentation). Its
// signature is worker.Config.OnBatch's.
func (r *Recorder) ObserveBatch(_ context.Context, outcomes []worker.Outcome) {
	if len(outcomes) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ts := r.now().UnixMilli()

	r.kinds, r.group = r.kinds[:0], r.group[:0]
	for i := range outcomes {
		k := kindDimension(&outcomes[i])
		g := -1
		for j := len(r.kinds) - 1; j >= 0; j-- { // runs of one kind are common: look back first
			if r.kinds[j] == k {
				g = j
				break
			}
		}
		if g < 0 {
			g = len(r.kinds)
			r.kinds = append(r.kinds, k)
		}
		r.group = append(r.group, int32(g))
	}

	r.buf, r.ends = r.buf[:0], r.ends[:0]
	for g := range r.kinds {
		c := r.count(outcomes, int32(g))
		r.buf = r.appendFirst(r.buf, ts, outcomes, int32(g), &c)
		r.ends = append(r.ends, len(r.buf))
		if c.ran <= MaxValues && c.latencies <= MaxValues {
			continue
		}
		// Further documents while values remain, each with the next MaxValues of each metric.
		durNext, latNext := r.skip(outcomes, int32(g), 0, MaxValues, false), r.skip(outcomes, int32(g), 0, MaxValues, true)
		for sent := MaxValues; sent < c.ran || sent < c.latencies; sent += MaxValues {
			nd, nl := clamp(c.ran-sent), clamp(c.latencies-sent)
			r.buf = r.appendHead(r.buf, ts)
			if nd > 0 {
				r.buf = append(r.buf, durationDef...)
			}
			if nl > 0 {
				if nd > 0 {
					r.buf = append(r.buf, ',')
				}
				r.buf = append(r.buf, latencyDef...)
			}
			r.buf = append(r.buf, r.dims...)
			r.buf = appendString(r.buf, r.kinds[g])
			if nd > 0 {
				r.buf = append(r.buf, `,"`+MetricJobDuration+`":`...)
				r.buf, durNext = r.appendValues(r.buf, outcomes, int32(g), durNext, nd, false)
			}
			if nl > 0 {
				r.buf = append(r.buf, `,"`+MetricJobQueueLatency+`":`...)
				r.buf, latNext = r.appendValues(r.buf, outcomes, int32(g), latNext, nl, true)
			}
			r.buf = append(r.buf, "}\n"...)
			r.ends = append(r.ends, len(r.buf))
		}
	}
	start := 0
	for _, end := range r.ends {
		r.write(r.buf[start:end])
		start = end
	}
	if cap(r.buf) > 1<<20 { // a huge batch: do not keep its buffer
		r.buf = nil
	}
}

// clamp returns n limited to [0, MaxValues].
func clamp(n int) int { return min(max(n, 0), MaxValues) }

// kindDimension returns the Kind dimension of an outcome.
func kindDimension(o *worker.Outcome) string {
	if o.Kind == "" || o.Reason == jobs.ReasonUnknownKind || !validDimensionValue(o.Kind) {
		return UnknownKind
	}
	return o.Kind
}

// count tallies group g's outcomes.
func (r *Recorder) count(outcomes []worker.Outcome, g int32) counts {
	var c counts
	for i := range outcomes {
		if r.group[i] != g {
			continue
		}
		o := &outcomes[i]
		if o.Failed {
			c.failed++
		}
		if o.SendErr != nil {
			c.sendFailed++
		}
		switch o.Outcome {
		case worker.OutcomeSucceeded:
			c.succeeded++
		case worker.OutcomeRetry:
			c.retried++
		case worker.OutcomeDeadLettered:
			if o.SendErr == nil {
				c.deadLettered++
			}
		case worker.OutcomeSkipped:
			c.skipped++
		case worker.OutcomeDeferred:
			c.deferred++
		case worker.OutcomeNotRun:
			c.notRun++
		case worker.OutcomeAbandoned:
			c.abandoned++
		}
		if o.Ran {
			c.ran++
		}
		if o.Misrouted {
			c.misrouted++
		}
		if o.QueueLatency != 0 {
			c.latencies++
		}
		if p := o.Payload; p != nil {
			if p.Err != nil {
				c.payloadFailed++
			} else {
				c.payloads++
				c.payloadBytes += p.Bytes
			}
		}
	}
	return c
}

// appendHead appends the start of a document, up to its metric definitions.
func (r *Recorder) appendHead(dst []byte, ts int64) []byte {
	dst = append(dst, r.head...)
	dst = appendInt(dst, ts)
	return append(dst, r.metrics...)
}

// appendFirst appends group g's first document: every count, the first values, the properties.
func (r *Recorder) appendFirst(dst []byte, ts int64, outcomes []worker.Outcome, g int32, c *counts) []byte {
	dst = r.appendHead(dst, ts)
	dst = append(dst, countDefs...)
	hasPayloads := c.payloads+c.payloadFailed > 0
	if hasPayloads {
		dst = append(dst, payloadDefs...)
	}
	if c.misrouted > 0 {
		dst = append(dst, misroutedDef...)
	}
	if c.ran > 0 {
		dst = append(dst, ',')
		dst = append(dst, durationDef...)
	}
	if c.latencies > 0 {
		dst = append(dst, ',')
		dst = append(dst, latencyDef...)
	}
	dst = append(dst, r.dims...)
	dst = appendString(dst, r.kinds[g])
	for _, kv := range [...]struct {
		name string
		n    int
	}{
		{MetricJobsSucceeded, c.succeeded}, {MetricJobsFailed, c.failed}, {MetricJobsRetried, c.retried},
		{MetricJobsDeadLettered, c.deadLettered}, {MetricJobsSkippedDuplicate, c.skipped},
		{MetricJobsDeferred, c.deferred}, {MetricJobsNotRun, c.notRun}, {MetricJobsAbandoned, c.abandoned},
		{MetricDeadLetterSendFailed, c.sendFailed}, {MetricCompletionWriteFailed, 0},
		{MetricBatchSize, len(outcomes)},
	} {
		dst = append(dst, `,"`...)
		dst = append(dst, kv.name...)
		dst = append(dst, `":`...)
		dst = appendInt(dst, int64(kv.n))
	}
	if hasPayloads {
		dst = append(dst, `,"`+MetricPayloadsFetched+`":`...)
		dst = appendInt(dst, int64(c.payloads))
		dst = append(dst, `,"`+MetricPayloadFetchFailed+`":`...)
		dst = appendInt(dst, int64(c.payloadFailed))
		dst = append(dst, `,"`+MetricPayloadBytes+`":`...)
		dst = appendInt(dst, int64(c.payloadBytes))
	}
	if c.misrouted > 0 {
		dst = append(dst, `,"`+MetricJobsMisrouted+`":`...)
		dst = appendInt(dst, int64(c.misrouted))
	}
	if c.ran > 0 {
		dst = append(dst, `,"`+MetricJobDuration+`":`...)
		dst, _ = r.appendValues(dst, outcomes, g, 0, min(c.ran, MaxValues), false)
	}
	if c.latencies > 0 {
		dst = append(dst, `,"`+MetricJobQueueLatency+`":`...)
		dst, _ = r.appendValues(dst, outcomes, g, 0, min(c.latencies, MaxValues), true)
	}
	if c.deadLettered > 0 {
		dst = r.appendDeadLetters(dst, outcomes, g)
	}
	return append(dst, "}\n"...)
}

// hasValue reports whether o has a value of the duration (latency false) or latency metric.
func hasValue(o *worker.Outcome, latency bool) bool {
	if latency {
		return o.QueueLatency != 0
	}
	return o.Ran
}

// appendValues appends a JSON array of n values of group g, from outcome index from on, and
// returns the index after the last one used.
func (r *Recorder) appendValues(dst []byte, outcomes []worker.Outcome, g int32, from, n int, latency bool) ([]byte, int) {
	dst = append(dst, '[')
	i, written := from, 0
	for ; i < len(outcomes) && written < n; i++ {
		o := &outcomes[i]
		if r.group[i] != g || !hasValue(o, latency) {
			continue
		}
		if written > 0 {
			dst = append(dst, ',')
		}
		d := o.Duration
		if latency {
			d = o.QueueLatency
		}
		dst = appendMillis(dst, d)
		written++
	}
	return append(dst, ']'), i
}

// skip returns the index after the first n values of group g from outcome index from on.
func (r *Recorder) skip(outcomes []worker.Outcome, g int32, from, n int, latency bool) int {
	i, seen := from, 0
	for ; i < len(outcomes) && seen < n; i++ {
		if r.group[i] == g && hasValue(&outcomes[i], latency) {
			seen++
		}
	}
	return i
}

// appendDeadLetters appends the dead letters' properties: their job and message ids (at most
// MaxIDs each) and the count of each reason.
func (r *Recorder) appendDeadLetters(dst []byte, outcomes []worker.Outcome, g int32) []byte {
	r.reasons = r.reasons[:0]
	dst = append(dst, `,"DeadLetteredJobIds":[`...)
	n := 0
	for i := range outcomes {
		o := &outcomes[i]
		if r.group[i] != g || o.Outcome != worker.OutcomeDeadLettered || o.SendErr != nil {
			continue
		}
		found := false
		for j := range r.reasons {
			if r.reasons[j].reason == o.Reason {
				r.reasons[j].n++
				found = true
				break
			}
		}
		if !found {
			r.reasons = append(r.reasons, reasonCount{reason: o.Reason, n: 1})
		}
		if o.JobID != "" && n < MaxIDs {
			if n > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, o.JobID)
			n++
		}
	}
	dst = append(dst, `],"DeadLetteredMessageIds":[`...)
	n = 0
	for i := 0; i < len(outcomes) && n < MaxIDs; i++ {
		o := &outcomes[i]
		if r.group[i] != g || o.Outcome != worker.OutcomeDeadLettered || o.SendErr != nil {
			continue
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, o.MessageID)
		n++
	}
	dst = append(dst, `],"DeadLetterReasons":{`...)
	for j, rc := range r.reasons {
		if j > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, rc.reason)
		dst = append(dst, ':')
		dst = appendInt(dst, int64(rc.n))
	}
	return append(dst, '}')
}

// FinishError writes a document counting one completion write that failed
// (CompletionWriteFailed 1), with the job's id and the error as properties. Its signature is
// idempotency.MiddlewareConfig.OnFinishError's.
func (r *Recorder) FinishError(_ context.Context, job *jobs.Info, err error) {
	kind, id := UnknownKind, ""
	if job != nil {
		id = job.ID
		if job.Kind != "" && validDimensionValue(job.Kind) {
			kind = job.Kind
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.appendHead(r.buf[:0], r.now().UnixMilli())
	b = append(b, `{"Name":"`+MetricCompletionWriteFailed+`","Unit":"Count"}`...)
	b = append(b, r.dims...)
	b = appendString(b, kind)
	b = append(b, `,"`+MetricCompletionWriteFailed+`":1`...)
	if id != "" {
		b = append(b, `,"JobId":`...)
		b = appendString(b, id)
	}
	if err != nil {
		b = append(b, `,"Error":`...)
		b = appendString(b, truncate(err.Error(), maxErrorLen))
	}
	b = append(b, "}\n"...)
	r.buf = b
	r.write(b)
}

// write writes one document; r.mu is held.
func (r *Recorder) write(doc []byte) {
	if _, err := r.w.Write(doc); err != nil {
		r.dropped.Add(1)
	}
}
