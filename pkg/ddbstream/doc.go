// Package ddbstream is a long-running DynamoDB Streams consumer with the semantics of Lambda's
// DynamoDB event source mapping, for local runs and containers: a handler of
// events.DynamoDBEvent that runs in Lambda (HandleDynamoDB(ctx, events.DynamoDBEvent)
// (events.DynamoDBEventResponse, error)) runs under a [Poller] unchanged. The transactional
// outbox's stream relay (pkg/outbox/dynamooutbox) is its first user.
//
//	p, err := ddbstream.New(ddbstream.Config{
//		Streams:   dynamodbstreams.NewFromConfig(cfg),
//		StreamARN: streamARN,
//		Handler:   relay, // anything with HandleDynamoDB, as in Lambda
//		Filter:    ddbstream.InsertsOnly,
//	})
//	…
//	err = p.Run(ctx) // until ctx is cancelled
//
// What it does, as Lambda does:
//
//   - It reads every shard of the stream (DescribeStream, GetShardIterator, GetRecords), a
//     child shard only after its parent is closed and read, from [Config.StartingPosition].
//   - Records that do not pass [Config.Filter] (the mapping's filter criteria) are dropped
//     before the handler sees them: they cost no invocation.
//   - It invokes the handler with batches of up to [Config.BatchSize] records in stream order,
//     as the events.DynamoDBEvent Lambda builds (eventID, eventName, eventSource,
//     eventSourceARN, awsRegion, the dynamodb record with keys, images, sequence number, size and
//     view type), one batch of a shard at a time.
//   - A batch is a complete success when the handler returns no error and no batchItemFailures.
//     With [Config.ReportBatchItemFailures], the failure with the lowest sequence number is the
//     checkpoint: the records before it are done, and the batch is retried from it. An
//     itemIdentifier that is empty or names no record of the batch fails the whole batch, as
//     does a handler error or a panic.
//   - A failed batch is retried up to [Config.MaximumRetryAttempts] times, with a backoff
//     between tries; with [Config.BisectBatchOnFunctionError] a batch that failed as a whole is
//     split in two halves first, each retried on its own (a split does not count as a retry).
//     A batch that used up its retries is discarded: [Config.OnFailure] receives what Lambda's
//     on-failure destination receives (the shard, the range of sequence numbers, the batch size)
//     and the shard goes on.
//
// Unlike Lambda it keeps no checkpoint across restarts: a new Poller starts from
// StartingPosition again. Handlers must be idempotent anyway (Lambda delivers at least once).
//
// The embedded emulator's streams fall short in ways docs/OUTBOX.md lists (TransactWriteItems
// and BatchWriteItem emit no records, an iterator can be used once, AFTER_SEQUENCE_NUMBER reads
// from the start); the poller needs none of what is missing, but on the emulator it sees only
// single-item writes.
package ddbstream
