// Package status looks up and lists jobs, and records the states a job takes outside the worker:
// queued (the producer's optional write), scheduled, and cancelled.
//
//	table, err := status.New(status.Config{Client: dynamodb.NewFromConfig(cfg), Table: "myapp-jobs"})
//	…
//	job, err := table.Get(ctx, "email.welcome", "user-42-welcome") // errors.Is(err, status.ErrNotFound)
//	page, err := table.List(ctx, status.ListQuery{State: idempotency.StateDead, Kind: "email.welcome"})
//
// It reads the DynamoDB table that pkg/idempotency's DynamoDB store writes: one item per job key
// (docs/TABLE.md describes it). [Table.Get] reads one job by kind and key, [Table.GetByID] by job
// id (through the by_id index), and [Table.List] lists the jobs in a state that needs attention
// — retrying, dead, scheduled or cancelled — newest first, through the sparse, sharded by_status
// index. Other states are not indexed, by design: they are the bulk of the table and are looked
// up one job at a time.
//
// [Table.CancelJob] (and [Table.Cancel], lenient) cancels a waiting job at once and asks a running
// one to stop, by a cancellation request on its record that its worker honours
// (docs/JOB-CONTROL.md). [Table.Wait] reads a job until it is succeeded, dead or cancelled.
//
// Every record has an expiry (the TTL attribute exp). DynamoDB deletes expired items lazily, up
// to about two days late, so this package compares expiry times itself: List skips expired
// records, Get and GetByID return them with [Job.Expired] set, and the writes here treat an
// expired record as absent.
package status
