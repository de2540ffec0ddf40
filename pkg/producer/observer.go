package producer

import (
	"context"
	"reflect"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// Operations a [Call] reports.
const (
	OpEnqueue      = "enqueue"       // Enqueue, EnqueueAt, EnqueueIn, EnqueueRaw
	OpEnqueueBatch = "enqueue_batch" // EnqueueBatch
	OpPrepare      = "prepare"       // Prepare, PrepareRaw: builds a job, sends nothing
	OpSend         = "send"          // Send: sends prepared jobs
)

// Call describes one producer call, for an [Observer].
type Call struct {
	// Operation is one of the Op* constants.
	Operation string
	// QueueURL is the producer's queue.
	QueueURL string
	// Jobs is how many jobs the call was given.
	Jobs int
	// Kind is the job's kind for a one-job call (Enqueue, Prepare), "" otherwise.
	Kind string
}

// Observer sees each producer call (Config.Observer): pkg/tracing implements it with a
// PRODUCER span per call. Its methods may be called from many goroutines at once.
type Observer interface {
	// Start is called when a call starts, before any job is built. The trace context of the
	// context it returns (jobs.WithTraceParent, jobs.WithAWSTraceHeader) goes into the jobs it
	// builds: the envelope's meta.traceparent and the message's AWSTraceHeader system attribute.
	// Send's jobs keep the trace context they were prepared with.
	Start(ctx context.Context, call Call) context.Context
	// End is called when the call returns, with the context Start returned and the call's
	// results, one per job (Prepare: the id, kind and key, or the error).
	End(ctx context.Context, call Call, results []Result)
}

// kindOf returns args' kind, or "" when args cannot tell it.
func kindOf(args jobs.Args) string {
	if args == nil {
		return ""
	}
	if v := reflect.ValueOf(args); v.Kind() == reflect.Pointer && v.IsNil() {
		return ""
	}
	return args.Kind()
}
