// Package config reads the Lambda functions' settings from their environment. Every setting is
// checked at cold start; each missing or invalid one becomes one line of the returned error, so
// a misconfigured function says everything that is wrong at once, on stderr, and exits 1.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// Environment variables read by the functions.
const (
	EnvQueueURL       = "SQSWORKER_QUEUE_URL"
	EnvDLQURL         = "SQSWORKER_DLQ_URL"
	EnvTable          = "SQSWORKER_TABLE"
	EnvTableLayout    = "SQSWORKER_TABLE_LAYOUT"
	EnvExpectRecords  = "SQSWORKER_EXPECT_RECORDS"
	EnvLogLevel       = "SQSWORKER_LOG_LEVEL"
	EnvConcurrency    = "SQSWORKER_CONCURRENCY"
	EnvDeadlineMargin = "SQSWORKER_DEADLINE_MARGIN"
	EnvScheduleGroup  = "SQSWORKER_SCHEDULE_GROUP"
	EnvPayloadBucket  = "SQSWORKER_PAYLOAD_BUCKET"
	EnvPayloadCleanup = "SQSWORKER_PAYLOAD_CLEANUP"
	EnvBatchesOutbox  = "SQSWORKER_BATCHES_OUTBOX_TABLE"

	// The API function's allow-list and its limits (see API).
	EnvAPIKinds        = "SQSWORKER_API_KINDS"
	EnvAPIMaxArgsBytes = "SQSWORKER_API_MAX_ARGS_BYTES"
	EnvAPISchemas      = "SQSWORKER_API_SCHEMAS"
	EnvAPIShowDetails  = "SQSWORKER_API_SHOW_DETAILS"
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
	// DefaultMaxArgsBytes is the API's limit on a job's args (compacted JSON) for the kinds
	// without a limit of their own: 64 KiB, the size SQS bills as one request.
	DefaultMaxArgsBytes = 64 << 10
	// MaxArgsBytesLimit bounds every args limit of the API: the producer's message limit (SQS's
	// 1 MiB minus 8 KiB kept for the worker) less 4 KiB for the rest of the envelope.
	MaxArgsBytesLimit = 1<<20 - 12<<10
)

// Worker is the worker function's configuration.
type Worker struct {
	// QueueURL is the source queue's URL. Empty: derived from the event's eventSourceARN.
	QueueURL string
	// DLQURL is the dead-letter queue's URL. Empty: the source queue's redrive target.
	DLQURL string
	// Table is the DynamoDB job table. Empty: no idempotency and no status records.
	Table string
	// TableLayout is where the table's records are written (SQSWORKER_TABLE_LAYOUT: by-id, or
	// kind-key to keep the layout of earlier releases while they may still have jobs in flight;
	// docs/TABLE.md). Defaults to by-id.
	TableLayout idempotency.Layout
	// ExpectRecords says that producers record jobs before they run (the HTTP API, producers with
	// a status recorder): the first claim then updates that record instead of trying a write
	// that only a job without a record wins (SQSWORKER_EXPECT_RECORDS,
	// idempotency.MiddlewareConfig.ExpectRecords). Defaults to false.
	ExpectRecords bool
	// LogLevel is the level of the JSON log on stderr. Defaults to info.
	LogLevel slog.Level
	// Concurrency bounds the jobs of a batch running at once. Defaults to 10.
	Concurrency int
	// DeadlineMargin is kept free before the invocation's deadline. Defaults to 2s.
	DeadlineMargin time.Duration
	// ScheduleGroup is the EventBridge Scheduler group of the recurring schedules that target
	// the queue. Informational: logged at cold start.
	ScheduleGroup string
	// PayloadBucket is the S3 bucket of jobs larger than SQS allows (pkg/payload): set, the
	// worker reads the jobs whose body points there. Empty: such bodies are malformed.
	PayloadBucket string
	// PayloadCleanup is what the worker does with a settled job's object
	// (SQSWORKER_PAYLOAD_CLEANUP: delete, mark or keep; worker.Config.PayloadCleanup). Defaults
	// to delete; the CDK stack sets mark, its bucket's lifecycle rule expiring marked objects.
	PayloadCleanup worker.PayloadCleanup
	// Queues are the stack's queues (SQSWORKER_QUEUES, SQSWORKER_ROUTES): the worker serves them
	// all and counts the jobs that arrive on a queue their kind is not routed to. Empty: one
	// queue.
	Queues Queues
	// BatchesOutboxTable turns on batches and chains (SQSWORKER_BATCHES_OUTBOX_TABLE, pkg/batch):
	// the worker counts the children of batches and the steps of chains in the job table, and
	// puts callbacks and next steps into this DynamoDB outbox table. It needs Table. Empty: off.
	BatchesOutboxTable string
}

// API is the producer API function's configuration.
type API struct {
	// QueueURL is the queue jobs are enqueued on. Required.
	QueueURL string
	// Table is the DynamoDB job table: GET /jobs/{id} reads it, and POST /jobs writes a queued
	// record there before each send (so that a repeated Idempotency-Key gets the first answer).
	// Empty: GET answers 501 and repeated keys are not recognised by the API.
	Table string
	// TableLayout is where the table's records are written (SQSWORKER_TABLE_LAYOUT), as the
	// worker's. Defaults to by-id.
	TableLayout idempotency.Layout
	// LogLevel is the level of the JSON log on stderr. Defaults to info.
	LogLevel slog.Level
	// Kinds is the allow-list (SQSWORKER_API_KINDS): the only kinds POST /jobs enqueues, each
	// with its args limit. Required: at least one kind, or nothing could be enqueued.
	Kinds []AllowedKind
	// Schemas maps allowed kinds to the JSON Schema their args are validated against
	// (SQSWORKER_API_SCHEMAS). Kinds without one are checked for size only. Defaults to none.
	Schemas map[string]SchemaSource
	// ShowDetails makes GET /jobs/{id} show the key, the stored result, the last error and the
	// dead-letter reason (SQSWORKER_API_SHOW_DETAILS). Defaults to false: state, attempts and
	// timestamps only.
	ShowDetails bool
	// Queues are the stack's queues (SQSWORKER_QUEUES, SQSWORKER_ROUTES): each kind is enqueued
	// on its queue. With them QueueURL may be left empty (it is then the default queue's).
	Queues Queues
	// Dedup maps allowed kinds to the deduplication rules a request may ask for them
	// (SQSWORKER_API_DEDUP, apidedup.go): unique, debounce, throttle. Defaults to none.
	Dedup map[string][]string
	// Scheduler is where debounced jobs wait, when a kind allows debounce.
	Scheduler APIScheduler
}

// AllowedKind is one entry of the API's allow-list.
type AllowedKind struct {
	// Kind is the job kind.
	Kind string
	// MaxArgsBytes bounds the size of its args as compacted JSON: the entry's own "=size", else
	// SQSWORKER_API_MAX_ARGS_BYTES, else DefaultMaxArgsBytes.
	MaxArgsBytes int
}

// SchemaSource is where a kind's JSON Schema comes from: exactly one field is set.
type SchemaSource struct {
	// Inline is the schema document itself (a JSON object or boolean).
	Inline json.RawMessage
	// File is the path of a file holding the schema (a layer's files are under /opt).
	File string
}

// Kind returns the allow-list entry of kind, if kind is on the list.
func (c *API) Kind(kind string) (AllowedKind, bool) {
	for _, k := range c.Kinds {
		if k.Kind == kind {
			return k, true
		}
	}
	return AllowedKind{}, false
}

// LoadWorker reads the worker's settings with getenv (os.Getenv in main). The error joins one
// line per missing or invalid setting.
func LoadWorker(getenv func(string) string) (Worker, error) {
	var errs []error
	c := Worker{
		QueueURL:      optionalQueueURL(getenv, EnvQueueURL, &errs),
		DLQURL:        optionalQueueURL(getenv, EnvDLQURL, &errs),
		Table:         table(getenv, &errs),
		TableLayout:   tableLayout(getenv, &errs),
		LogLevel:      logLevel(getenv, &errs),
		ScheduleGroup: strings.TrimSpace(getenv(EnvScheduleGroup)),
		PayloadBucket: strings.TrimSpace(getenv(EnvPayloadBucket)),
	}
	if s := strings.TrimSpace(getenv(EnvExpectRecords)); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q is not a boolean (true or false; default false)", EnvExpectRecords, s))
		}
		c.ExpectRecords = b
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
	if s := strings.TrimSpace(getenv(EnvBatchesOutbox)); s != "" {
		switch {
		case !isName(s, 3, 255):
			errs = append(errs, fmt.Errorf("%s=%q is not a DynamoDB table name (3–255 of [a-zA-Z0-9_.-])", EnvBatchesOutbox, s))
		case c.Table == "":
			errs = append(errs, fmt.Errorf("%s is set but %s is not: batches live in the job table", EnvBatchesOutbox, EnvTable))
		case s == c.Table:
			errs = append(errs, fmt.Errorf("%s=%q is the job table: name the outbox table", EnvBatchesOutbox, s))
		default:
			c.BatchesOutboxTable = s
		}
	}
	if s := strings.TrimSpace(getenv(EnvPayloadCleanup)); s != "" {
		m, err := worker.ParsePayloadCleanup(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q is not a payload cleanup (delete, mark or keep; default delete)", EnvPayloadCleanup, s))
		}
		c.PayloadCleanup = m
	}
	c.Queues = loadQueues(getenv, c.QueueURL, true, &errs)
	return c, errors.Join(errs...)
}

// LoadAPI reads the API's settings with getenv (os.Getenv in main). The error joins one line
// per missing or invalid setting.
func LoadAPI(getenv func(string) string) (API, error) {
	var errs []error
	c := API{
		QueueURL:    optionalQueueURL(getenv, EnvQueueURL, &errs),
		Table:       table(getenv, &errs),
		TableLayout: tableLayout(getenv, &errs),
		LogLevel:    logLevel(getenv, &errs),
	}
	c.Queues = loadQueues(getenv, c.QueueURL, false, &errs)
	if c.QueueURL == "" && c.Queues.Set != nil {
		c.QueueURL = c.Queues.Set.Default().URL
	}
	if c.QueueURL == "" && strings.TrimSpace(getenv(EnvQueueURL)) == "" && strings.TrimSpace(getenv(EnvQueues)) == "" {
		errs = append([]error{fmt.Errorf("%s is required: the URL of the queue jobs are sent to", EnvQueueURL)}, errs...)
	}
	def := DefaultMaxArgsBytes
	if s := strings.TrimSpace(getenv(EnvAPIMaxArgsBytes)); s != "" {
		n, err := parseSize(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %v", EnvAPIMaxArgsBytes, s, err))
		} else {
			def = n
		}
	}
	c.Kinds = apiKinds(getenv(EnvAPIKinds), def, &errs)
	c.Schemas = apiSchemas(getenv(EnvAPISchemas), &c, &errs)
	apiDedup(getenv, &c, &errs)
	if s := strings.TrimSpace(getenv(EnvAPIShowDetails)); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q is not a boolean (true or false; default false)", EnvAPIShowDetails, s))
		}
		c.ShowDetails = b
	}
	return c, errors.Join(errs...)
}

// apiKinds parses the allow-list: comma-separated entries "kind" or "kind=size" (size in bytes,
// or with a KiB or MiB suffix). It is required, so that a function deployed without one
// enqueues nothing rather than everything.
func apiKinds(s string, def int, errs *[]error) []AllowedKind {
	s = strings.TrimSpace(s)
	if s == "" {
		*errs = append(*errs, fmt.Errorf("%s is required: the comma-separated kinds POST /jobs may enqueue, such as "+
			"\"email.send,report.build=256KiB\" (deny by default: without the list nothing is enqueued)", EnvAPIKinds))
		return nil
	}
	var out []AllowedKind
	seen := map[string]bool{}
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		kind, size, hasSize := strings.Cut(entry, "=")
		kind = strings.TrimSpace(kind)
		k := AllowedKind{Kind: kind, MaxArgsBytes: def}
		if err := jobs.ValidateKind(kind); err != nil {
			*errs = append(*errs, fmt.Errorf("%s: entry %q: %v", EnvAPIKinds, entry, err))
			continue
		}
		if hasSize {
			n, err := parseSize(strings.TrimSpace(size))
			if err != nil {
				*errs = append(*errs, fmt.Errorf("%s: entry %q: %v", EnvAPIKinds, entry, err))
				continue
			}
			k.MaxArgsBytes = n
		}
		if seen[kind] {
			*errs = append(*errs, fmt.Errorf("%s: kind %q is listed twice", EnvAPIKinds, kind))
			continue
		}
		seen[kind] = true
		out = append(out, k)
	}
	if len(out) == 0 && len(*errs) == 0 {
		*errs = append(*errs, fmt.Errorf("%s=%q lists no kind", EnvAPIKinds, s))
	}
	return out
}

// parseSize reads a byte count: digits, optionally followed by KiB or MiB; 2 to MaxArgsBytesLimit
// (the smallest args are "{}").
func parseSize(s string) (int, error) {
	mult := 1
	num := s
	switch {
	case strings.HasSuffix(s, "KiB"):
		mult, num = 1<<10, strings.TrimSpace(strings.TrimSuffix(s, "KiB"))
	case strings.HasSuffix(s, "MiB"):
		mult, num = 1<<20, strings.TrimSpace(strings.TrimSuffix(s, "MiB"))
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size (bytes, or a number with KiB or MiB, such as 65536 or 64KiB)", s)
	}
	if n < 2 || n > MaxArgsBytesLimit/mult {
		return 0, fmt.Errorf("size %s is out of range (want 2 bytes to %d bytes, the most a message leaves for the args)", s, MaxArgsBytesLimit)
	}
	return n * mult, nil
}

// apiSchemas parses SQSWORKER_API_SCHEMAS: a JSON object mapping kinds of the allow-list to a
// schema document (an object or a boolean) or to the path of a file holding one.
func apiSchemas(s string, c *API, errs *[]error) map[string]SchemaSource {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		*errs = append(*errs, fmt.Errorf("%s is not a JSON object of kind → schema (an object, or the path of a file as a string): %v", EnvAPISchemas, err))
		return nil
	}
	kinds := make([]string, 0, len(raw))
	for k := range raw {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds) // one error line per kind, in a stable order
	out := make(map[string]SchemaSource, len(raw))
	for _, kind := range kinds {
		v := bytes.TrimSpace(raw[kind])
		if _, ok := c.Kind(kind); !ok {
			*errs = append(*errs, fmt.Errorf("%s: kind %q has a schema but is not on %s", EnvAPISchemas, kind, EnvAPIKinds))
			continue
		}
		switch {
		case len(v) > 0 && v[0] == '"':
			var path string
			if err := json.Unmarshal(v, &path); err != nil || strings.TrimSpace(path) == "" {
				*errs = append(*errs, fmt.Errorf("%s: kind %q: the file name is empty", EnvAPISchemas, kind))
				continue
			}
			out[kind] = SchemaSource{File: path}
		case len(v) > 0 && (v[0] == '{' || string(v) == "true" || string(v) == "false"):
			out[kind] = SchemaSource{Inline: json.RawMessage(v)}
		default:
			*errs = append(*errs, fmt.Errorf("%s: kind %q: want a schema (a JSON object or boolean) or a file path (a string), got %s", EnvAPISchemas, kind, v))
		}
	}
	return out
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

func tableLayout(getenv func(string) string, errs *[]error) idempotency.Layout {
	s := strings.ToLower(strings.TrimSpace(getenv(EnvTableLayout)))
	l, err := idempotency.ParseLayout(s)
	if err != nil {
		*errs = append(*errs, fmt.Errorf("%s=%q is not a table layout (want %s, the default, or %s)", EnvTableLayout, s,
			idempotency.LayoutByID, idempotency.LayoutKindKey))
	}
	return l
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
