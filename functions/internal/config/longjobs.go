package config

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Environment variables of the worker's long jobs (docs/LONG-JOBS.md).
const (
	// EnvSlice is the worker's default slice (worker.Config.Slice), a Go duration; unset: none
	// (the invocation's deadline ends the slices of checkpointing jobs).
	EnvSlice = "SQSWORKER_SLICE"
	// EnvSliceGrace is the time a job whose slice ended gets to return (worker.Config.SliceGrace).
	EnvSliceGrace = "SQSWORKER_SLICE_GRACE"
)

// LongJobs is the worker function's configuration of long jobs.
type LongJobs struct {
	// Slice is the default slice (SQSWORKER_SLICE). Defaults to 0: none.
	Slice time.Duration
	// SliceGrace is worker.Config.SliceGrace (SQSWORKER_SLICE_GRACE). Defaults to 0: the
	// worker's default, 2 s.
	SliceGrace time.Duration
	// ScheduleGroup, QueueARN and SchedulerRoleARN, all set, give the worker a scheduler for
	// the copies of jobs that sleep (or retry) more than 15 minutes ahead
	// (worker.Config.Scheduler): SQSWORKER_SCHEDULE_GROUP, SQSWORKER_QUEUE_ARN and
	// SQSWORKER_SCHEDULER_ROLE_ARN, as the relays take them; the function's role then needs
	// scheduler:CreateSchedule on the group and iam:PassRole on the role. Unset: those copies
	// wait in SQS. The CDK stack sets them, and grants what they need, with WorkerEnqueues.
	// SchedulerDLQARN (SQSWORKER_SCHEDULER_DLQ_ARN, optional) receives the firings Scheduler could
	// not deliver. Without the role there is no scheduler: the group alone (recurring schedules)
	// or the queue's ARN alone (WorkerEnqueues without scheduling) is no error.
	ScheduleGroup, QueueARN, SchedulerRoleARN, SchedulerDLQARN string
}

// Scheduler reports whether the worker schedules far copies through EventBridge Scheduler.
func (c LongJobs) Scheduler() bool { return c.QueueARN != "" }

// LoadLongJobs reads the worker's long-job settings with getenv. The error joins one line per
// invalid setting.
func LoadLongJobs(getenv func(string) string) (LongJobs, error) {
	var errs []error
	c := LongJobs{
		Slice:      durationSetting(getenv, EnvSlice, 0, time.Second, 7*24*time.Hour, &errs),
		SliceGrace: durationSetting(getenv, EnvSliceGrace, 0, 100*time.Millisecond, 10*time.Minute, &errs),
	}
	group, queue, role := strings.TrimSpace(getenv(EnvScheduleGroup)), strings.TrimSpace(getenv(EnvQueueARN)), strings.TrimSpace(getenv(EnvSchedulerRoleARN))
	switch {
	case role == "":
		// No scheduler. The group alone is the recurring schedules'; the queue's ARN alone is a
		// follow-up producer's (the CDK stack with WorkerEnqueues and DisableScheduling sets it).
	case group == "" || queue == "":
		errs = append(errs, fmt.Errorf("%s, %s and %s go together (EventBridge Scheduler for sleeping jobs): set all three, or no scheduler role",
			EnvScheduleGroup, EnvQueueARN, EnvSchedulerRoleARN))
	default:
		dlq := strings.TrimSpace(getenv(EnvSchedulerDLQARN))
		for name, v := range map[string]string{EnvQueueARN: queue, EnvSchedulerRoleARN: role, EnvSchedulerDLQARN: dlq} {
			if v != "" && !arnPattern.MatchString(v) {
				errs = append(errs, fmt.Errorf("%s=%q is not an ARN", name, v))
			}
		}
		c.ScheduleGroup, c.QueueARN, c.SchedulerRoleARN, c.SchedulerDLQARN = group, queue, role, dlq
	}
	return c, errors.Join(errs...)
}
