package config

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Environment variables of the PostgreSQL outbox relay (functions/pgrelay), beside
// SQSWORKER_QUEUE_URL, SQSWORKER_TABLE, SQSWORKER_LOG_LEVEL, SQSWORKER_DEADLINE_MARGIN,
// SQSWORKER_SCHEDULE_GROUP and those it shares with the DynamoDB outbox's relay (relay.go):
// SQSWORKER_OUTBOX_TABLE (here a PostgreSQL table), SQSWORKER_OUTBOX_LEASE,
// SQSWORKER_OUTBOX_MAX_ATTEMPTS and the scheduler's SQSWORKER_QUEUE_ARN,
// SQSWORKER_SCHEDULER_ROLE_ARN and SQSWORKER_SCHEDULER_DLQ_ARN.
const (
	EnvOutboxDSN       = "SQSWORKER_OUTBOX_DSN"
	EnvOutboxSecretARN = "SQSWORKER_OUTBOX_SECRET_ARN"
	EnvOutboxSSLMode   = "SQSWORKER_OUTBOX_SSLMODE"
	// EnvOutboxSSLRootCert is the sslrootcert of the connection built from the secret: a PEM
	// file of the CAs that may sign the server's certificate (the RDS bundle in a layer, under
	// /opt), or "system" for the system's roots.
	EnvOutboxSSLRootCert = "SQSWORKER_OUTBOX_SSLROOTCERT"
	EnvOutboxBatchSize   = "SQSWORKER_OUTBOX_BATCH_SIZE"
	// EnvOutboxLease and EnvOutboxMaxAttempts are relay.go's EnvLease and EnvMaxAttempts.
	EnvOutboxLease       = EnvLease
	EnvOutboxMaxAttempts = EnvMaxAttempts
)

// Defaults of the relay's settings.
const (
	DefaultOutboxTable       = "sqsworker_outbox"
	DefaultOutboxBatchSize   = 100
	DefaultOutboxLease       = 30 * time.Second
	DefaultOutboxMaxAttempts = 10
	// DefaultOutboxSSLMode encrypts without verifying the server's certificate: RDS's CAs are
	// in no trust store the function has, so verify-full needs SSLRootCert as well.
	DefaultOutboxSSLMode = "require"
	// DefaultRelayDeadlineMargin is kept free before the invocation's deadline: a pass cut
	// short by it still has up to 10 s to write back what SQS accepted.
	DefaultRelayDeadlineMargin = 12 * time.Second
)

// PGRelay is the PostgreSQL outbox relay function's configuration.
type PGRelay struct {
	// QueueURL is the queue the outbox's jobs are sent to. Required.
	QueueURL string
	// DSN is the database's connection string, or SecretARN the Secrets Manager secret that
	// holds its credentials in the RDS format ({"username","password","host","port","dbname"}).
	// Exactly one is required.
	DSN, SecretARN string
	// SSLMode is the sslmode of a DSN built from the secret. Defaults to require: TLS, the
	// server's certificate not verified (the function ships no CA bundle). For verify-full,
	// set SSLRootCert too. A DSN carries its own sslmode.
	SSLMode string
	// SSLRootCert is the sslrootcert of a DSN built from the secret: an absolute path to a PEM
	// file of CAs (such as the RDS bundle, global-bundle.pem, in a layer: /opt/…), or "system".
	// With it, require verifies the chain (as verify-ca) and verify-full the host name too.
	// Empty: none.
	SSLRootCert string
	// OutboxTable is the outbox table. Defaults to sqsworker_outbox.
	OutboxTable string
	// Table is the DynamoDB job table: each job SQS accepted is recorded as queued. Empty: none.
	Table string
	// LogLevel is the level of the JSON log on stderr. Defaults to info.
	LogLevel slog.Level
	// BatchSize, Lease and MaxAttempts configure the relay (outbox.RelayConfig).
	BatchSize   int
	Lease       time.Duration
	MaxAttempts int
	// DeadlineMargin is kept free before the invocation's deadline. Defaults to 12 s.
	DeadlineMargin time.Duration
	// PayloadBucket is the S3 bucket of jobs larger than SQS allows (pkg/payload): such a row's
	// envelope is written there when it is sent. Empty: such rows fail, and end dead.
	PayloadBucket string
	// ScheduleGroup, QueueARN, SchedulerRoleARN and SchedulerDLQARN set up EventBridge Scheduler
	// for jobs delayed beyond 15 minutes (any delay on a FIFO queue): all of the first three, or
	// none (such jobs then fail, and end dead with the reason). SchedulerDLQARN is optional.
	ScheduleGroup, QueueARN, SchedulerRoleARN, SchedulerDLQARN string
	// Queues are the stack's queues (SQSWORKER_QUEUES): the relay sends each job to the queue it
	// was prepared for. With them QueueURL may be left empty (it is then the default queue's).
	Queues Queues
}

var (
	pgTableName = regexp.MustCompile(`^([a-z_][a-z0-9_]*\.)?[a-z_][a-z0-9_]*$`)
	arnPattern  = regexp.MustCompile(`^arn:aws[a-z-]*:[a-z0-9-]+:[a-z0-9-]*:[0-9]{12}:.+$`)
)

// LoadPGRelay reads the relay's settings with getenv. The error joins one line per missing or
// invalid setting.
func LoadPGRelay(getenv func(string) string) (PGRelay, error) {
	var errs []error
	env := func(name string) string { return strings.TrimSpace(getenv(name)) }
	c := PGRelay{
		QueueURL:         optionalQueueURL(getenv, EnvQueueURL, &errs),
		DSN:              env(EnvOutboxDSN),
		SecretARN:        env(EnvOutboxSecretARN),
		SSLMode:          env(EnvOutboxSSLMode),
		SSLRootCert:      env(EnvOutboxSSLRootCert),
		OutboxTable:      env(EnvOutboxTable),
		Table:            table(getenv, &errs),
		LogLevel:         logLevel(getenv, &errs),
		ScheduleGroup:    env(EnvScheduleGroup),
		QueueARN:         env(EnvQueueARN),
		SchedulerRoleARN: env(EnvSchedulerRoleARN),
		SchedulerDLQARN:  env(EnvSchedulerDLQARN),
		PayloadBucket:    env(EnvPayloadBucket),
	}
	c.Queues = loadQueues(getenv, c.QueueURL, false, &errs)
	if c.QueueURL == "" && c.Queues.Set != nil {
		c.QueueURL = c.Queues.Set.Default().URL
	}
	if c.QueueURL == "" && env(EnvQueueURL) == "" && env(EnvQueues) == "" {
		errs = append([]error{fmt.Errorf("%s is required: the URL of the queue the outbox's jobs are sent to", EnvQueueURL)}, errs...)
	}
	switch {
	case c.DSN == "" && c.SecretARN == "":
		errs = append(errs, fmt.Errorf("%s or %s is required: the outbox's database", EnvOutboxDSN, EnvOutboxSecretARN))
	case c.DSN != "" && c.SecretARN != "":
		errs = append(errs, fmt.Errorf("%s and %s are both set: set one", EnvOutboxDSN, EnvOutboxSecretARN))
	case c.SecretARN != "" && !arnPattern.MatchString(c.SecretARN):
		errs = append(errs, fmt.Errorf("%s=%q is not an ARN", EnvOutboxSecretARN, c.SecretARN))
	}
	switch c.SSLMode {
	case "":
		c.SSLMode = DefaultOutboxSSLMode
	case "disable", "allow", "prefer", "require", "verify-ca", "verify-full":
	default:
		errs = append(errs, fmt.Errorf("%s=%q is not an sslmode (disable, allow, prefer, require, verify-ca, verify-full)", EnvOutboxSSLMode, c.SSLMode))
	}
	switch {
	case c.SSLRootCert == "" || c.SSLRootCert == "system":
	case !strings.HasPrefix(c.SSLRootCert, "/"):
		errs = append(errs, fmt.Errorf("%s=%q: want an absolute path to a PEM file of CAs (a layer's files are under /opt), or \"system\"", EnvOutboxSSLRootCert, c.SSLRootCert))
	}
	if c.SSLRootCert != "" && (c.SSLMode == "disable" || c.SSLMode == "allow" || c.SSLMode == "prefer") {
		errs = append(errs, fmt.Errorf("%s is set but %s=%s does not verify certificates: use verify-full (or require, verify-ca)", EnvOutboxSSLRootCert, EnvOutboxSSLMode, c.SSLMode))
	}
	if c.OutboxTable == "" {
		c.OutboxTable = DefaultOutboxTable
	} else if !pgTableName.MatchString(c.OutboxTable) {
		errs = append(errs, fmt.Errorf("%s=%q is not a table name (lower-case letters, digits and _, optionally schema.table)", EnvOutboxTable, c.OutboxTable))
	}
	c.BatchSize = intSetting(getenv, EnvOutboxBatchSize, DefaultOutboxBatchSize, 1, 10000, &errs)
	c.MaxAttempts = intSetting(getenv, EnvOutboxMaxAttempts, DefaultOutboxMaxAttempts, 1, 1000, &errs)
	c.Lease = durationSetting(getenv, EnvOutboxLease, DefaultOutboxLease, time.Second, time.Hour, &errs)
	c.DeadlineMargin = durationSetting(getenv, EnvDeadlineMargin, DefaultRelayDeadlineMargin, time.Second, MaxDeadlineMargin, &errs)
	sched := 0
	for _, s := range []string{c.ScheduleGroup, c.QueueARN, c.SchedulerRoleARN} {
		if s != "" {
			sched++
		}
	}
	if sched != 0 && sched != 3 {
		errs = append(errs, fmt.Errorf("%s, %s and %s go together (EventBridge Scheduler for delayed jobs): set all three or none",
			EnvScheduleGroup, EnvQueueARN, EnvSchedulerRoleARN))
	}
	if c.ScheduleGroup != "" && !isName(c.ScheduleGroup, 1, 64) {
		errs = append(errs, fmt.Errorf("%s=%q is not a schedule group name (1–64 of [0-9a-zA-Z-_.])", EnvScheduleGroup, c.ScheduleGroup))
	}
	for name, v := range map[string]string{EnvQueueARN: c.QueueARN, EnvSchedulerRoleARN: c.SchedulerRoleARN, EnvSchedulerDLQARN: c.SchedulerDLQARN} {
		if v != "" && !arnPattern.MatchString(v) {
			errs = append(errs, fmt.Errorf("%s=%q is not an ARN", name, v))
		}
	}
	return c, errors.Join(errs...)
}

func intSetting(getenv func(string) string, name string, def, lo, hi int, errs *[]error) int {
	s := strings.TrimSpace(getenv(name))
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		*errs = append(*errs, fmt.Errorf("%s=%q: want an integer from %d to %d (default %d)", name, s, lo, hi, def))
		return def
	}
	return n
}

func durationSetting(getenv func(string) string, name string, def, lo, hi time.Duration, errs *[]error) time.Duration {
	s := strings.TrimSpace(getenv(name))
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < lo || d > hi {
		*errs = append(*errs, fmt.Errorf("%s=%q: want a Go duration from %s to %s (default %s)", name, s, lo, hi, def))
		return def
	}
	return d
}
