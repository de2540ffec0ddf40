// Package queues is a stack's set of queues: several named SQS queues ("critical", "default",
// "bulk"), each with its own dead-letter queue, visibility timeout, redrive budget and Lambda
// concurrency, so that a flood of one kind cannot take the capacity another needs, and a poller
// can serve them by priority.
//
// A [Set] names the queues, knows their URLs (and ARNs, DLQs, poller weights when given), which
// one is the default, and which are FIFO. It is built from configuration ([New]), from the
// functions' environment (SQSWORKER_QUEUES, read by [Parse]) or from the stack's outputs (the
// CLI), and checked when built: two queues with one name, a bad URL or name, a weight out of range
// are errors wrapping [ErrInvalid].
//
// Kinds are routed to queues where they are registered, with jobs.WithQueue; a [Router] (the
// registry, or [Routes] for a producer without the workers' code) names each kind's queue, and
// [Set.Route] resolves it, with a per-job override:
//
//	set, _ := queues.New(
//		queues.Queue{Name: "critical", URL: criticalURL, Weight: 6},
//		queues.Queue{Name: "default", URL: defaultURL, Weight: 3},
//		queues.Queue{Name: "bulk", URL: bulkURL, Weight: 1},
//	)
//	reg := jobs.NewRegistry()
//	jobs.MustRegister(reg, resetPassword, jobs.WithQueue("critical"))
//	jobs.MustRegister(reg, importCSV, jobs.WithQueue("bulk"))
//	prod, _ := producer.New(producer.Config{SQS: client, Queues: set, Routes: reg})
//	prod.Enqueue(ctx, ResetPassword{…})                              // to critical
//	prod.Enqueue(ctx, ImportCSV{…}, producer.WithQueue("default"))   // overridden
//
// A kind routed to a queue the set does not have is an error ([ErrUnknownQueue]) when the
// producer is built ([Set.CheckRoutes]) or, for a router that cannot list its routes, when the
// job is enqueued; an override that moves a kind between a FIFO queue and a standard one is an
// error too ([ErrMixedFIFO]).
//
// The worker serves any queue of the set (a Lambda event source per queue, or one poller over
// all): a job that arrives on a queue its kind is not routed to runs all the same, so a routing
// change never strands the jobs already sent, and is counted ([Routing], worker.Config.Routing,
// the JobsMisrouted metric).
//
// Queue names follow jobs.ValidateQueueName; the SQS names derive from the stack's name
// ([SQSName], [DLQSQSName]): "<stack>-jobs" is the default queue, "<stack>-jobs-critical" and
// "<stack>-jobs-critical-dlq" a queue named critical. See docs/QUEUES.md.
package queues
