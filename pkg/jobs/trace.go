package jobs

import "context"

// StepTracer traces the steps a middleware takes for a job, such as the idempotency store's
// claim and finish: pkg/tracing puts one in the job's context (as child spans). Without one,
// [StartStep] costs a context lookup and does nothing.
type StepTracer interface {
	// StartStep starts a step named name and returns the step's context (pass it to the calls the
	// step makes) and the function that ends it with the step's error (nil for success).
	StartStep(ctx context.Context, name string) (context.Context, func(err error))
}

type stepKey struct{}

// WithStepTracer returns a context whose steps t traces.
func WithStepTracer(ctx context.Context, t StepTracer) context.Context {
	return context.WithValue(ctx, stepKey{}, t)
}

// StartStep starts a traced step of the job in ctx (see [StepTracer]). Without a tracer it
// returns ctx and a function that does nothing.
func StartStep(ctx context.Context, name string) (context.Context, func(err error)) {
	if t, ok := ctx.Value(stepKey{}).(StepTracer); ok && t != nil {
		return t.StartStep(ctx, name)
	}
	return ctx, endNothing
}

func endNothing(error) {}

type awsTraceKey struct{}

// WithAWSTraceHeader returns a context carrying an X-Ray trace header (Root=…;Parent=…;Sampled=…)
// that the producer sends as the SQS AWSTraceHeader system attribute, so that X-Ray links the
// producer to the Lambda invocation that consumes the message. pkg/tracing sets it when
// configured with the X-Ray propagator.
func WithAWSTraceHeader(ctx context.Context, header string) context.Context {
	return context.WithValue(ctx, awsTraceKey{}, header)
}

// AWSTraceHeaderFromContext returns the header set with [WithAWSTraceHeader], or "". Unlike
// TraceParentFromContext it does not fall back to the running job's: the worker's re-sends copy
// their own header, and copying it into new jobs would make Lambda's recursive-loop detection
// count follow-up jobs as a loop.
func AWSTraceHeaderFromContext(ctx context.Context) string {
	h, _ := ctx.Value(awsTraceKey{}).(string)
	return h
}
