// Package config reads the Lambda functions' settings from their environment. Every setting is
// checked at cold start; each missing or invalid one becomes one line of the returned error, so
// a misconfigured function says everything that is wrong at once, on stderr, and exits 1.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Environment variables read by the functions.
const (
	EnvQueueURL       = "SQSWORKER_QUEUE_URL"
	EnvDLQURL         = "SQSWORKER_DLQ_URL"
	EnvTable          = "SQSWORKER_TABLE"
	EnvLogLevel       = "SQSWORKER_LOG_LEVEL"
	EnvConcurrency    = "SQSWORKER_CONCURRENCY"
	EnvDeadlineMargin = "SQSWORKER_DEADLINE_MARGIN"
	EnvScheduleGroup  = "SQSWORKER_SCHEDULE_GROUP"
)

// Defaults of the settings.
const (
	DefaultConcurrency    = 10
	DefaultDeadlineMargin = 2 * time.Second
	// MaxConcurrency bounds SQSWORKER_CONCURRENCY (a Lambda batch holds at most 10,000 messages,
	// and more goroutines than that gain nothing).
	MaxConcurrency = 10000
	// MaxDeadlineMargin bounds SQSWORKER_DEADLINE_MARGIN (the worker's own limit).
	MaxDeadlineMargin = 10 * time.Minute
)

// Worker is the worker function's configuration.
type Worker struct {
	// QueueURL is the source queue's URL. Empty: derived from the event's eventSourceARN.
	QueueURL string
	// DLQURL is the dead-letter queue's URL. Empty: the source queue's redrive target.
	DLQURL string
	// Table is the DynamoDB job table. Empty: no idempotency and no status records.
	Table string
	// LogLevel is the level of the JSON log on stderr. Defaults to info.
	LogLevel slog.Level
	// Concurrency bounds the jobs of a batch running at once. Defaults to 10.
	Concurrency int
	// DeadlineMargin is kept free before the invocation's deadline. Defaults to 2s.
	DeadlineMargin time.Duration
	// ScheduleGroup is the EventBridge Scheduler group of the recurring schedules that target
	// the queue. Informational: logged at cold start.
	ScheduleGroup string
}

// API is the producer API function's configuration.
type API struct {
	// QueueURL is the queue jobs are enqueued on. Required.
	QueueURL string
	// Table is the DynamoDB job table read by GET /jobs/{id}. Empty: GET answers 501.
	Table string
	// LogLevel is the level of the JSON log on stderr. Defaults to info.
	LogLevel slog.Level
}

// LoadWorker reads the worker's settings with getenv (os.Getenv in main). The error joins one
// line per missing or invalid setting.
func LoadWorker(getenv func(string) string) (Worker, error) {
	var errs []error
	c := Worker{
		QueueURL:      optionalQueueURL(getenv, EnvQueueURL, &errs),
		DLQURL:        optionalQueueURL(getenv, EnvDLQURL, &errs),
		Table:         table(getenv, &errs),
		LogLevel:      logLevel(getenv, &errs),
		ScheduleGroup: strings.TrimSpace(getenv(EnvScheduleGroup)),
	}
	c.Concurrency = DefaultConcurrency
	if s := strings.TrimSpace(getenv(EnvConcurrency)); s != "" {
		n, err := strconv.Atoi(s)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s=%q is not an integer (want 1–%d, default %d)", EnvConcurrency, s, MaxConcurrency, DefaultConcurrency))
		case n < 1 || n > MaxConcurrency:
			errs = append(errs, fmt.Errorf("%s=%d is out of range (want 1–%d, default %d)", EnvConcurrency, n, MaxConcurrency, DefaultConcurrency))
		default:
			c.Concurrency = n
		}
	}
	c.DeadlineMargin = DefaultDeadlineMargin
	if s := strings.TrimSpace(getenv(EnvDeadlineMargin)); s != "" {
		d, err := time.ParseDuration(s)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s=%q is not a Go duration such as 2s or 500ms (default %s)", EnvDeadlineMargin, s, DefaultDeadlineMargin))
		case d <= 0 || d > MaxDeadlineMargin:
			errs = append(errs, fmt.Errorf("%s=%s is out of range (want more than 0 and at most %s, default %s)", EnvDeadlineMargin, d, MaxDeadlineMargin, DefaultDeadlineMargin))
		default:
			c.DeadlineMargin = d
		}
	}
	if c.ScheduleGroup != "" && !isName(c.ScheduleGroup, 1, 64) {
		errs = append(errs, fmt.Errorf("%s=%q is not a schedule group name (1–64 of [0-9a-zA-Z-_.])", EnvScheduleGroup, c.ScheduleGroup))
	}
	return c, errors.Join(errs...)
}

// LoadAPI reads the API's settings with getenv (os.Getenv in main). The error joins one line
// per missing or invalid setting.
func LoadAPI(getenv func(string) string) (API, error) {
	var errs []error
	c := API{
		QueueURL: optionalQueueURL(getenv, EnvQueueURL, &errs),
		Table:    table(getenv, &errs),
		LogLevel: logLevel(getenv, &errs),
	}
	if c.QueueURL == "" && strings.TrimSpace(getenv(EnvQueueURL)) == "" {
		errs = append([]error{fmt.Errorf("%s is required: the URL of the queue jobs are sent to", EnvQueueURL)}, errs...)
	}
	return c, errors.Join(errs...)
}

// isName reports whether s is min to max characters of [a-zA-Z0-9_.-], the alphabet of DynamoDB
// table and Scheduler group names. A loop, not a regexp: `{3,255}` compiles into a program of
// thousands of instructions at package init, which cost about 1 ms of every cold start.
func isName(s string, min, max int) bool {
	if len(s) < min || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '.', c == '-':
		default:
			return false
		}
	}
	return true
}

func optionalQueueURL(getenv func(string) string, name string, errs *[]error) string {
	s := strings.TrimSpace(getenv(name))
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || strings.Trim(u.Path, "/") == "" {
		*errs = append(*errs, fmt.Errorf("%s=%q is not a queue URL (want https://sqs.<region>.amazonaws.com/<account>/<queue>)", name, s))
		return ""
	}
	return s
}

func table(getenv func(string) string, errs *[]error) string {
	s := strings.TrimSpace(getenv(EnvTable))
	if s != "" && !isName(s, 3, 255) {
		*errs = append(*errs, fmt.Errorf("%s=%q is not a DynamoDB table name (3–255 of [a-zA-Z0-9_.-])", EnvTable, s))
		return ""
	}
	return s
}

func logLevel(getenv func(string) string, errs *[]error) slog.Level {
	s := strings.ToLower(strings.TrimSpace(getenv(EnvLogLevel)))
	switch s {
	case "", "info":
		return slog.LevelInfo
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	*errs = append(*errs, fmt.Errorf("%s=%q is not a log level (want debug, info, warn or error; default info)", EnvLogLevel, getenv(EnvLogLevel)))
	return slog.LevelInfo
}
