// Package jobevents publishes an event to Amazon EventBridge each time a job's record enters a
// final state (succeeded, dead or cancelled; detail-type "Job Finished", Event), and each time a
// batch of pkg/batch finishes ("Batch Finished", BatchEvent), so that other services subscribe
// with a rule instead of polling the job table.
//
//	pub, err := jobevents.New(jobevents.Config{EventBridge: eventbridge.NewFromConfig(cfg)})
//	…
//	lambda.Start(pub.HandleDynamoDB) // behind the job table's stream (functions/events does this)
//
// The events come from the job table's DynamoDB stream (NEW_AND_OLD_IMAGES): on AWS through the
// events function (functions/events), which the CDK stack deploys with an event source mapping
// that passes only final states (FilterPattern), reports partial batch failures, bisects failed
// batches and sends what it gives up on to an on-failure queue; locally the same Publisher runs
// under a pkg/ddbstream Poller (with Filter) on the emulator's stream.
//
// # Guarantees
//
//   - One event per state change: a record written into succeeded, dead or cancelled from
//     another state (or created in it) yields one event; writes that leave the state alone yield
//     none. A job that dies, is redriven and dies again yields two dead events.
//   - At least once: a stream record whose publish failed, or whose batch failed after it was
//     published (a crash between the publish and the checkpoint), is delivered again, and its
//     event published again with the same Event.ID (derived from the record's key, its new
//     state and the time of the write). Subscribers deduplicate on detail.event_id.
//   - In order per job: the stream orders a key's writes, and the publisher sends a batch in
//     order and stops at its first failure.
//   - The event carries no args, error text or result (only the result's size): a bus is shared
//     more widely than the table. Read the record with pkg/status for them.
//
// The schema, the costs and the emulator's limits (a write made inside a DynamoDB transaction
// or a batch write emits no stream record on the emulator) are in docs/JOB-CONTROL.md.
package jobevents
