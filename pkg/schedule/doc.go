// Package schedule is sqsworker's side of EventBridge Scheduler: schedule expressions (at, rate,
// cron with AWS's rules), one-time schedules for delayed jobs, recurring schedules, and a local
// dispatcher that fires schedules where the backend only stores them (the embedded emulator,
// LocalStack).
//
//	sched, err := schedule.NewClient(schedule.Config{Scheduler: scheduler.NewFromConfig(cfg),
//		Group: "myapp-jobs", QueueARN: queueARN, RoleARN: schedulerRoleARN})
//	…
//	err = sched.Upsert(ctx, schedule.Recurring{Name: "nightly-rollup", Expression: "cron(0 2 * * ? *)",
//		Timezone: "Europe/Berlin", Kind: "metrics.rollup", Args: []byte(`{"window":"1d"}`)})
//
// A producer with a [Client] as its Scheduler (producer.Config.Scheduler) sends delays beyond
// SQS's 15 minutes, and any delay on a FIFO queue, as one-time schedules.
//
// # Guarantees
//
//   - A one-time schedule is named after its job's id ([ScheduleName]): an enqueue retried after
//     a timeout never creates two.
//   - Every firing of a recurring schedule is a distinct job whose key is
//     "<name>@<scheduled time>", so the scheduler's retries of one firing run once under the
//     worker's idempotency.
//   - [CheckRecurring] validates a recurring schedule with AWS's rules before any call; Upsert,
//     the CLI and the console all use it.
//   - The [Dispatcher] fires each due occurrence once, a one-time schedule even if it fell due
//     while the dispatcher was stopped; its state can live in a file ([FileState]).
//
// docs/scheduling.md is the guide.
package schedule
