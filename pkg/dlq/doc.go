// Package dlq inspects and redrives the dead-letter queue (DLQ) of a sqsworker job queue.
//
// A dead letter is a job message the worker gave up on — it sends a copy with a
// [worker.FailureAttribute] that says why — or one SQS moved itself after maxReceiveCount
// receives (a crash or timeout safety net: no failure attribute). [DLQ.Peek] and [DLQ.Show] read
// dead letters without losing them, [DLQ.RedriveAll] and [DLQ.RedriveJob] move them back to the
// job queue with a fresh attempt budget, [DLQ.ReplaySchedulerDLQ] re-enqueues the jobs of failed
// EventBridge Scheduler firings, and [DLQ.Purge] empties the DLQ.
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
// dead letters need the destination). A move task copies each message as it is: the failure
// attribute (harmless: the worker ignores and replaces it) and the envelope's attempts_before come
// along, so the fresh attempt budget comes only from the status reset — with the idempotency
// middleware the attempt number is the status record's run count, which [Config.Status] resets
// to 0 (RedriveAll does so for every dead letter before it starts the task); without it, the
// attempt number is attempts_before + the receive count, and a job that had spent
// attempts_before attempts keeps them.
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
// # Emulator
//
// The embedded emulator (pkg/awslocal) has no StartMessageMoveTask, refreshes queue counters only
// on receive, and does not wake long polls for messages whose visibility expired: this package
// uses 1-second receives and stops when one returns nothing.
package dlq
