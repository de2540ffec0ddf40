// Package flow is sqsworker's flow control: concurrency and rate limits per kind or per key
// (a tenant, an account), shared by every worker of a job table, and pausing a kind or a queue.
//
// Limits are declared when the worker is set up, and a [Middleware] placed before (outside) the
// idempotency middleware applies them to every job:
//
//	tbl, _ := flow.NewTable(flow.TableConfig{Client: ddb, Table: "myapp-jobs"})
//	fl, err := flow.NewMiddleware(flow.Config{
//		Store:       tbl,
//		Concurrency: []flow.Concurrency{{Kind: "webhook.deliver", Limit: 5, Key: flow.TenantKey}},
//		Rates:       []flow.Rate{{Kind: "email.send", Limit: 10, Period: time.Second}},
//	})
//	// worker.Config{Middleware: []worker.Middleware{fl, idem}}
//
// Guarantees:
//   - A concurrency limit is never exceeded while every holder's lease lasts: a slot is taken with
//     one conditional write before the job runs and given back when it returns (success, failure
//     or panic); a holder that died keeps its slot until its lease ends (in Lambda the
//     invocation's deadline plus AbandonGrace; in a container Lease, renewed every third), and
//     then the next acquisition removes it.
//   - A rate limit starts at most Burst + Limit·W/Period jobs in any window of length W (the
//     generic cell rate algorithm, one attribute, one conditional write per job).
//   - A job denied a slot or a token is deferred (jobs.Defer): it does not run, spends no attempt,
//     comes back when capacity is expected (with jitter), and is dead-lettered with the reason
//     jobs.ReasonDeferredTooLong once it has waited MaxDeferral. A key function that fails is a
//     jobs.ReasonFlowKey dead letter. No message is lost: the worker deletes one only once it is
//     in the DLQ or was re-sent.
//   - A paused kind's jobs are deferred without running (not dead-lettered, not counted against
//     MaxDeferral) until it is resumed; each worker reads the pauses at most once per PauseCheck.
//
// The state lives in the job table as items of their own (docs/TABLE.md, "Flow control"), and
// docs/FLOW.md has the design, the costs and the AWS limits.
package flow
