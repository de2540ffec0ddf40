// Package dlq inspects and redrives the dead-letter queue (DLQ) of a sqsworker job queue.
//
// A dead letter is a job message the worker gave up on — it sends a copy with a
// [worker.FailureAttribute] that says why — or one SQS moved itself after maxReceiveCount
// receives (a crash or timeout safety net: no failure attribute). [DLQ.Peek] and [DLQ.Show] read
// dead letters without losing them, [DLQ.RedriveAll] and [DLQ.RedriveJob] move them back to the
// job queue with a fresh attempt budget, [DLQ.ReplaySchedulerDLQ] re-enqueues the jobs of failed
// EventBridge Scheduler firings, [DLQ.Purge] empties the DLQ, and [DLQ.DeleteMessage] deletes one
// dead letter by its message id (one no redrive can heal, such as a body that is not a job).
//
//	d, err := dlq.New(dlq.Config{SQS: sqsClient, DLQURL: dlqURL, SourceURL: queueURL, Status: table})
//	…
//	msgs, err := d.Peek(ctx, 10)                       // each with its Failure: reason, error, attempts
//	res, err := d.RedriveAll(ctx, dlq.RedriveOptions{}) // res.Moved of res.Total, each job once more
//
// No operation here deletes a dead letter before its copy is safely in the job queue, and a
// redrive stopped halfway can be run again: every message is in one of the two queues.
//
// # Jobs kept in S3
//
// A job larger than SQS allows travels as an S3 pointer (pkg/payload), and so does its dead
// letter. When the failure attribute does not name the job (the worker could not read the
// object, or SQS moved the message itself), every reader of this package resolves the pointer
// the same way, through Config.Payload: Peek lists the job with its id and kind, and Show,
// RedriveJob and DeleteMessage find it by its id, as for any other job. Without a payload store
// the dead letter is listed without them, its Payload.Err wrapping [ErrNoPayloadStore], and a
// lookup by id that finds nothing returns a [NotFoundError] that counts such dead letters and
// says why they could not be read.
//
// # Reading without losing
//
// SQS has no way to read a message without receiving it. Peek receives messages with a short
// visibility timeout and makes them visible again at once (ChangeMessageVisibility 0), so they
// stay in the queue; a receive still bumps the message's ApproximateReceiveCount. Show and
// RedriveJob scan the queue the same way, holding what they received until the scan ends. On a
// FIFO DLQ, a held message hides the rest of its group from the scan.
//
// # Redrive
//
// RedriveAll first tries SQS's own mover, StartMessageMoveTask, with the job queue as its
// DestinationArn (SQS returns only the messages it moved itself to their origin; the worker's
// dead letters need the destination). The task runs in SQS after RedriveAll returns: [DLQ.WaitMoveTask]
// follows it through ListMessageMoveTasks with its progress. SQS runs one task per queue and
// refuses a second with InvalidParameterValue, so a redrive while a task runs on the DLQ follows
// that one instead (RedriveResult.Attached). A move task copies each message as it is: the failure
// attribute (harmless: the worker ignores and replaces it) and the envelope's attempts_before come
// along, so the fresh attempt budget comes only from the status reset, which [Config.Status]
// does for every dead letter before RedriveAll starts the task (run count 0). The attempt number
// counts attempts_before with or without a store (with the idempotency middleware it is
// max(run count, attempts_before) + 1; without, attempts_before + the receive count), so a job
// whose envelope had spent attempts_before attempts (a retry re-sent beyond SQS's 12-hour
// visibility limit) keeps them after a move task; the fallback mover resets attempts_before.
//
// When the backend answers that StartMessageMoveTask is unsupported (the embedded emulator, some
// other emulators), RedriveAll moves the messages itself: it receives up to 10 dead letters,
// removes the failure attribute, resets attempts_before to 0 (unless KeepAttempts; a body that is
// not an envelope is moved unchanged), resets the job's status record, sends the batch to the job
// queue (FIFO: the dead letter's group, else the job's kind, and a fresh deduplication id), and
// deletes from the DLQ only the messages whose send succeeded. The DLQ itself is the mover's
// state: a run that stops (error, cancelled context) is resumed by running it again. A message
// is never deleted before its copy was sent; the one window for a duplicate is a copy sent but
// not yet deleted when the run stops, and the job's idempotency key absorbs that duplicate.
//
// # What a redrive moves
//
// A redrive moves the dead letters that were in the DLQ when it started, each once, as SQS's move
// task does (it counts the messages to move when it starts); dead letters that arrive later wait
// for the next redrive. This matters while a worker runs: a redriven job that fails again comes
// back to the DLQ as a new message (new id, new SentTimestamp), and a mover that took it again
// would run the job again and again and never end. The fallback mover leaves a dead letter in
// the DLQ when
//   - SQS's SentTimestamp is after the start, read in SQS's clock (the Date of the response to
//     the count at the start, rounded up to the second; this host's clock when a backend sends
//     no Date), or
//   - it is a copy of a message this redrive sent: its failure attribute's source_message_id is
//     one of them (the worker dead-lettered it again), or its own id is (SQS's redrive policy
//     moved it), or
//   - it carries the job id of a job this redrive moved (a job re-sent under a new message id,
//     then dead-lettered; or two dead letters of one job: the second waits for the next redrive).
//
// It holds what it leaves behind until it returns, then makes it visible again, and it ends when
// a receive brings nothing, or when a few receives in a row bring only dead letters it leaves
// behind (so it ends even while new dead letters keep arriving). [RedriveResult] reports what it
// moved, the DLQ's count at the start, and what it left behind.
//
// # Emulator
//
// The embedded emulator (pkg/awslocal) has no StartMessageMoveTask, refreshes queue counters only
// on receive, and does not wake long polls for messages whose visibility expired: this package
// uses 1-second receives and stops when one returns nothing.
package dlq
