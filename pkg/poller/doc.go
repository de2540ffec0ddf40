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
//     (the queue ARN) and awsRegion.
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
//     their successes and returns nil.
//   - Receive errors are logged and retried after a bounded, jittered exponential backoff.
//
// A FIFO queue needs nothing special: SQS keeps a message group locked while any of its messages
// is in flight, and the group id, deduplication id and sequence number reach the handler as
// attributes.
package poller
