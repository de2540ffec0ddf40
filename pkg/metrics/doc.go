// Package metrics writes the worker's metrics in CloudWatch Embedded Metric Format (EMF): one
// JSON log line per document, which CloudWatch Logs turns into metrics. In Lambda, the lines go
// to stdout and need nothing else: no agent, no PutMetricData call, no added latency.
//
// Wire a [Recorder] into both hooks:
//
//	rec, _ := metrics.New(metrics.Config{Queue: metrics.QueueName(os.Getenv("QUEUE_URL"))})
//	worker.Config{OnBatch: rec.ObserveBatch, …}
//	idempotency.MiddlewareConfig{OnFinishError: rec.FinishError, …}
//
// # Documents
//
// EMF allows one value per dimension in a document, so [Recorder.ObserveBatch] writes one
// document per job kind per batch, in the order the kinds first appear in the batch. Every
// metric has the dimensions Service, Queue and Kind (Kind "unknown" for bodies that are not
// envelopes and for kinds no worker is registered for, so that a producer's typo cannot create
// metrics without bound). The namespace defaults to "sqsworker".
//
//	JobsSucceeded         Count         the job returned nil (or the malformed hook accepted the body)
//	JobsFailed            Count         messages reported as batch item failures (they come back)
//	JobsRetried           Count         outcome "retry": failed, retried after its backoff
//	JobsDeadLettered      Count         sent to the DLQ with its reason
//	JobsSkippedDuplicate  Count         acknowledged without running (a duplicate of a succeeded job)
//	JobsDeferred          Count         waiting without running (run_at ahead, claim held elsewhere)
//	JobsNotRun            Count         not started: FIFO tail after a failure, or past the deadline
//	JobsAbandoned         Count         still running at the deadline
//	DeadLetterSendFailed  Count         the DLQ send (or a re-send) failed; the message comes back
//	CompletionWriteFailed Count         see below
//	BatchSize             Count         the whole batch's message count (all kinds)
//	JobDuration           Milliseconds  one value per job that ran
//	JobQueueLatency       Milliseconds  one value per message: SentTimestamp to the batch's start
//	PayloadsFetched       Count         jobs read from S3 (the body was a pointer: pkg/payload)
//	PayloadFetchFailed    Count         pointers whose object could not be read (retried or payload_missing)
//	PayloadBytes          Bytes         the bytes read from S3
//
//	JobsMisrouted         Count         jobs that arrived on a queue their kind is not routed to (ran all the same)
//
// The three Payload metrics are written only in the documents of kinds that had pointer messages
// in the batch (a pointer whose object could not be read counts under Kind "unknown"), and
// JobsMisrouted only in those of kinds that had misrouted jobs (worker.Config.Routing: a stack
// of several queues, pkg/queues). With several queues, give each queue's batches the Queue
// dimension of their queue (functions/worker keeps a Recorder per event source queue).
//
// A dead letter whose DLQ send failed counts in DeadLetterSendFailed and JobsFailed, not in
// JobsDeadLettered: it has not reached the DLQ, and it is counted there when it does.
//
// High-cardinality values are properties, never dimensions: DeadLetteredJobIds and
// DeadLetteredMessageIds (at most [MaxIDs] each) and DeadLetterReasons (reason → count) help
// find the dead letters with CloudWatch Logs Insights.
//
// # More than 100 values
//
// EMF takes at most 100 values per metric in a document. When a kind has more than 100
// durations or latencies in one batch (batches go up to 10,000 messages), the values are split
// over several documents, in the batch's order: the first document carries every count and the
// first 100 values; each further document carries only the next 100 values of JobDuration and
// JobQueueLatency (its directive names only those metrics). Nothing is aggregated away, so
// percentiles stay exact, and the counts are written once, so Sum and SampleCount stay true.
//
// # Zero counts
//
// Every count is written in every kind's first document, zeros included. CloudWatch alarms
// treat a period without data as missing, not as zero: with the zeros, a period in which the
// kind ran has a datapoint for every count (JobsFailed 0 keeps a failure alarm OK, and ratios
// such as JobsFailed/BatchSize can be computed). Periods without any batch still have no data:
// give failure alarms TreatMissingData "notBreaching". Zeros cost log bytes only; CloudWatch
// bills custom metrics per metric name and dimension set, not per value.
//
// # Completion write failures
//
// [Recorder.FinishError] (the idempotency middleware's OnFinishError) writes its own document
// at once, with CompletionWriteFailed 1 and the job's id and error as properties. It is called
// while the job's batch is still running (or after it, for a job abandoned at the deadline),
// so holding the count for the next batch document could lose it when the kind does not come
// back before the process ends; writing at once never does, and these failures are rare. Batch
// documents carry CompletionWriteFailed 0, so that the metric has a datapoint in every period
// with traffic; alarm on its Sum.
//
// # Writing
//
// Each document is one line of JSON ending in "\n", written with one Write call while the
// Recorder's mutex is held: concurrent batches (the poller) never interleave, and the Writer
// need not be safe for concurrent use. The JSON is built with strconv into a buffer the
// Recorder reuses, so a batch costs no allocations once the buffer has grown.
package metrics
