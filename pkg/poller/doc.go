// Package poller is a long-running Amazon SQS consumer with the semantics of Lambda's SQS event
// source mapping, for local runs and containers: the same handler that runs in Lambda
// (anything with HandleSQS(ctx, events.SQSEvent) (events.SQSEventResponse, error)) runs under a
// [Poller] unchanged.
//
// What it does, as Lambda does:
//
//   - It long-polls the queue (ReceiveMessage, at most 10 messages a call, all system and message
//     attributes) and gathers up to [Config.BatchSize] messages within [Config.BatchWindow]; with
//     no window it hands over what the first receive returned.
//   - It builds the events.SQSEvent Lambda builds: messageId, receiptHandle, body, md5OfBody,
//     md5OfMessageAttributes, attributes (every system attribute SQS returned), messageAttributes
//     (with empty stringListValues and binaryListValues), eventSource "aws:sqs", eventSourceARN
//     (the queue ARN) and awsRegion. A [MessageHandler] (pkg/worker's Handler is one) is given
//     the messages as ReceiveMessage returned them instead, with the queue ARN and region, and
//     judges them as it would judge that event: building the event is skipped.
//   - A handler error (or a panic, logged with its stack) fails the whole batch: nothing is deleted
//     and the messages return after their visibility timeout. Otherwise every message not listed in
//     the response's BatchItemFailures is deleted (DeleteMessageBatch), as with a mapping that has
//     ReportBatchItemFailures on. An itemIdentifier that is empty or not a message of the batch
//     fails the whole batch.
//
// What it adds for work outside Lambda:
//
//   - A heartbeat: while a batch is in flight, every visibility/3 its messages' visibility is
//     extended back to the visibility timeout, so a job longer than the visibility timeout is not
//     redelivered to another consumer. It stops when the handler returns, at the handler's
//     deadline when [Config.InvocationTimeout] is set, and at SQS's limit of 12 hours from the
//     receive. See [Config.DisableHeartbeat]. A handler that sets a message's visibility itself
//     (pkg/worker scheduling a retry) first tells the heartbeat to leave that message alone,
//     through the handler's context (internal/heartbeat), so that no late extension overwrites
//     the retry's delay.
//   - Graceful shutdown: cancelling the context given to [Poller.Run] stops receiving at once (a long
//     poll is abandoned), lets the batches in flight finish with an uncancelled context, deletes
//     their successes and returns nil. A receive whose answer has started to arrive is read to its
//     end (for at most 5 s) and its messages handled: SQS has already taken them off the queue.
//   - Receive errors are logged and retried after a bounded, jittered exponential backoff.
//
// A message SQS returned is always handed to the handler or made visible again at once, never left
// invisible for a visibility timeout without a word:
//
//   - The SDK does not retry ReceiveMessage on its own (the poller retries): a retry of a receive
//     whose answer was cut off after SQS had taken its messages would hide them. Such a failure
//     (status 200, answer unreadable) is logged as an error that says so.
//   - Every call sends its request body to net/http without io.WriterTo. smithy-go closes the
//     request body as soon as the response arrives, and its body then reports io.EOF from
//     WriteTo, which net/http's writeLoop (draining the body after sending it) takes for a failed
//     write: it closes the connection while the response is still being read from it. Against a
//     local server that answers within microseconds (the emulator as a separate process), that cut
//     off ReceiveMessage answers larger than 4 KB now and then, and the SDK's silent retry left
//     their messages in flight for the whole visibility timeout (aws-sdk-go-v2 issues 1825, 2737
//     and 2935 report the same symptom, "use of closed network connection", on AWS).
//   - The poller checks each body against its MD5 itself: the SDK's check fails the whole call for
//     one damaged body. A damaged message is made visible again (visibility timeout 0); the others
//     are handed over.
//
// # Several queues, by priority
//
// With [Config.Queues] one Poller consumes several queues (a stack's "critical", "default" and
// "bulk": pkg/queues), sharing its [Config.Concurrency] handler slots among them. Each queue has
// a receiver of its own that long-polls it and holds at most one received batch (its visibility
// extended by the heartbeat) until a slot takes it; at each hand-off the slot chooses the queue
// by [Config.Priority]:
//
//   - [Weighted] (the default, as asynq's weighted queues): an order of the queues drawn at random
//     by weight, the first queue in it that is not empty. While all have messages each queue gets
//     its weight's share of the batches, and none that has messages starves.
//   - [Strict] (as asynq's strict priority and Sidekiq's ordered queues): the first queue of
//     Config.Queues that is not empty. A higher queue's job waits at most for the batches already
//     running plus one receive; lower queues wait while higher ones have messages.
//
// A queue counts as empty once its last receive came back empty; after a receive that returned
// messages it is asked again at once (a short poll; a receive of at most 1 s on a queue whose
// ReceiveMessageWaitTimeSeconds is above 0), and a slot whose choice falls on it waits for that
// answer. An empty queue costs one long poll every Config.WaitTime, as with one queue.
// BenchmarkCriticalLatency measures a critical queue's wait during a flood on a bulk one
// (docs/BENCHMARKS.md).
//
// A FIFO queue needs nothing special: SQS keeps a message group locked while any of its messages
// is in flight, and the group id, deduplication id and sequence number reach the handler as
// attributes.
package poller
