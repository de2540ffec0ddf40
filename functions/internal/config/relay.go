package config

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// Environment variables of the outbox relay function (and the scheduler settings it shares with
// a worker that enqueues).
const (
	EnvOutboxTable      = "SQSWORKER_OUTBOX_TABLE"
	EnvSweepAfter       = "SQSWORKER_OUTBOX_SWEEP_AFTER"
	EnvMaxAttempts      = "SQSWORKER_OUTBOX_MAX_ATTEMPTS"
	EnvLease            = "SQSWORKER_OUTBOX_LEASE"
	EnvQueueARN         = "SQSWORKER_QUEUE_ARN"
	EnvSchedulerRoleARN = "SQSWORKER_SCHEDULER_ROLE_ARN"
	EnvSchedulerDLQARN  = "SQSWORKER_SCHEDULER_DLQ_ARN"
)

// Defaults of the relay's settings.
const (
	DefaultSweepAfter  = time.Minute
	DefaultMaxAttempts = 10
	DefaultLease       = 30 * time.Second
)

// Relay is the outbox relay function's configuration.
type Relay struct {
	// OutboxTable is the outbox table. Required.
	OutboxTable string
	// QueueURL is the queue the jobs are sent to. Required.
	QueueURL string
	// SweepAfter is how old a job never attempted must be before a sweep takes it (the stream
	// relay has it first). Defaults to 1 minute.
	SweepAfter time.Duration
	// MaxAttempts is how many sends a job gets before it is dead. Defaults to 10.
	MaxAttempts int
	// Lease is how long a claim lasts; keep it above the function timeout. Defaults to 30 s.
	Lease time.Duration
	// ScheduleGroup, QueueARN, SchedulerRoleARN and SchedulerDLQARN, when the first three are
	// set, let the relay deliver jobs delayed beyond 15 minutes through one-time schedules.
	ScheduleGroup, QueueARN, SchedulerRoleARN, SchedulerDLQARN string
	// LogLevel is the level of the JSON log on stderr. Defaults to info.
	LogLevel slog.Level
	// Queues are the stack's queues (SQSWORKER_QUEUES): the relay sends each job to the queue it
	// was prepared for. With them QueueURL may be left empty (it is then the default queue's).
	Queues Queues
}

// Scheduling reports whether the scheduler settings are complete.
func (r Relay) Scheduling() bool {
	return r.ScheduleGroup != "" && r.QueueARN != "" && r.SchedulerRoleARN != ""
}

// LoadRelay reads the relay's settings with getenv (os.Getenv in main). The error joins one line
// per missing or invalid setting.
func LoadRelay(getenv func(string) string) (Relay, error) {
	var errs []error
	c := Relay{
		OutboxTable:      strings.TrimSpace(getenv(EnvOutboxTable)),
		QueueURL:         optionalQueueURL(getenv, EnvQueueURL, &errs),
		ScheduleGroup:    strings.TrimSpace(getenv(EnvScheduleGroup)),
		QueueARN:         strings.TrimSpace(getenv(EnvQueueARN)),
		SchedulerRoleARN: strings.TrimSpace(getenv(EnvSchedulerRoleARN)),
		SchedulerDLQARN:  strings.TrimSpace(getenv(EnvSchedulerDLQARN)),
		LogLevel:         logLevel(getenv, &errs),
		SweepAfter:       DefaultSweepAfter,
		MaxAttempts:      DefaultMaxAttempts,
		Lease:            DefaultLease,
	}
	switch {
	case c.OutboxTable == "":
		errs = append(errs, fmt.Errorf("%s is required: the outbox table whose jobs the relay sends", EnvOutboxTable))
	case !isName(c.OutboxTable, 3, 255):
		errs = append(errs, fmt.Errorf("%s=%q is not a DynamoDB table name (3–255 of [a-zA-Z0-9_.-])", EnvOutboxTable, c.OutboxTable))
	}
	c.Queues = loadQueues(getenv, c.QueueURL, false, &errs)
	if c.QueueURL == "" && c.Queues.Set != nil {
		c.QueueURL = c.Queues.Set.Default().URL
	}
	if c.QueueURL == "" && strings.TrimSpace(getenv(EnvQueueURL)) == "" && strings.TrimSpace(getenv(EnvQueues)) == "" {
		errs = append(errs, fmt.Errorf("%s is required: the URL of the queue the jobs are sent to", EnvQueueURL))
	}
	duration := func(name string, def, max time.Duration, dst *time.Duration, zeroOK bool) {
		s := strings.TrimSpace(getenv(name))
		if s == "" {
			return
		}
		d, err := time.ParseDuration(s)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s=%q is not a Go duration such as 1m or 30s (default %s)", name, s, def))
		case d < 0 || (d == 0 && !zeroOK) || d > max:
			errs = append(errs, fmt.Errorf("%s=%s is out of range (want at most %s, default %s)", name, d, max, def))
		default:
			*dst = d
		}
	}
	duration(EnvSweepAfter, DefaultSweepAfter, 24*time.Hour, &c.SweepAfter, true)
	duration(EnvLease, DefaultLease, time.Hour, &c.Lease, false)
	if s := strings.TrimSpace(getenv(EnvMaxAttempts)); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			errs = append(errs, fmt.Errorf("%s=%q: want an integer 1–1000 (default %d)", EnvMaxAttempts, s, DefaultMaxAttempts))
		} else {
			c.MaxAttempts = n
		}
	}
	if c.ScheduleGroup != "" && !isName(c.ScheduleGroup, 1, 64) {
		errs = append(errs, fmt.Errorf("%s=%q is not a schedule group name (1–64 of [0-9a-zA-Z-_.])", EnvScheduleGroup, c.ScheduleGroup))
	}
	return c, errors.Join(errs...)
}
