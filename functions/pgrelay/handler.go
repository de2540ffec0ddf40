package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqsworker/sqsworker/functions/internal/config"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/pgoutbox"
	"github.com/sqsworker/sqsworker/pkg/payload"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/schedule"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// Metric names of the EMF line each invocation writes (namespace sqsworker, dimensions Service
// and Table: the function's name and the outbox table). infra/jobqueue's PostgresOutbox alarms
// on OutboxDeadRows and OutboxRelayErrors.
const (
	metricNamespace   = "sqsworker"
	metricSent        = "OutboxSent"
	metricFailed      = "OutboxFailed"
	metricDead        = "OutboxDead"
	metricDeadRows    = "OutboxDeadRows"
	metricPendingRows = "OutboxPendingRows"
	metricOldestAge   = "OutboxOldestPendingAge"
	metricErrors      = "OutboxRelayErrors"
)

// noDeadline bounds an invocation without a deadline (a test).
const noDeadline = time.Minute

// handler drains the outbox at each invocation.
type handler struct {
	relay    *outbox.Relay
	ob       *pgoutbox.Outbox
	db       *sql.DB
	margin   time.Duration
	logger   *slog.Logger
	metricsw io.Writer
	service  string
	now      func() time.Time
}

func newHandler(ctx context.Context, cfg config.PGRelay, awsCfg aws.Config, logger *slog.Logger, metricsw io.Writer, service string) (*handler, error) {
	db, err := openDB(ctx, cfg, secretsmanager.NewFromConfig(awsCfg))
	if err != nil {
		return nil, err
	}
	ob, err := pgoutbox.New(pgoutbox.Config{DB: db, Table: cfg.OutboxTable})
	if err != nil {
		return nil, err
	}
	pcfg := producer.Config{SQS: sqs.NewFromConfig(awsCfg), QueueURL: cfg.QueueURL, Queues: cfg.Queues.Set}
	if cfg.Table != "" {
		st, err := status.New(status.Config{Client: dynamodb.NewFromConfig(awsCfg), Table: cfg.Table})
		if err != nil {
			return nil, err
		}
		pcfg.Status = st
	}
	if cfg.ScheduleGroup != "" {
		sc, err := schedule.NewClient(schedule.Config{Scheduler: scheduler.NewFromConfig(awsCfg), Group: cfg.ScheduleGroup,
			QueueARN: cfg.QueueARN, RoleARN: cfg.SchedulerRoleARN, DeadLetterARN: cfg.SchedulerDLQARN})
		if err != nil {
			return nil, err
		}
		pcfg.Scheduler = sc
	}
	if cfg.PayloadBucket != "" {
		st, err := payload.New(payload.Config{S3: s3.NewFromConfig(awsCfg), Bucket: cfg.PayloadBucket})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", config.EnvPayloadBucket, err)
		}
		pcfg.Payload = st
	}
	prod, err := producer.New(pcfg)
	if err != nil {
		return nil, err
	}
	r, err := outbox.NewRelay(outbox.RelayConfig{Store: ob, Producers: prod.PerQueue(), BatchSize: cfg.BatchSize,
		Lease: cfg.Lease, MaxAttempts: cfg.MaxAttempts, Logger: logger})
	if err != nil {
		return nil, err
	}
	if service == "" {
		service = "pgrelay"
	}
	logger.Info("sqsworker pgrelay ready", slog.String("queue_url", cfg.QueueURL), slog.String("outbox_table", cfg.OutboxTable),
		slog.String("relay", r.ID()), slog.Bool("status", cfg.Table != ""), slog.Bool("scheduler", cfg.ScheduleGroup != ""))
	return &handler{relay: r, ob: ob, db: db, margin: cfg.DeadlineMargin, logger: logger, metricsw: metricsw, service: service, now: time.Now}, nil
}

// secretsAPI is the part of Secrets Manager the function uses.
type secretsAPI interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// rdsSecret is a database secret in the format RDS and its rotation functions keep.
type rdsSecret struct {
	Username string          `json:"username"`
	Password string          `json:"password"`
	Host     string          `json:"host"`
	Port     json.RawMessage `json:"port"` // a number, or a string
	DBName   string          `json:"dbname"`
}

// secretTTL is how long a read secret is used for new connections.
const secretTTL = 5 * time.Minute

// secretSource reads the secret, caching it for secretTTL.
type secretSource struct {
	api secretsAPI
	arn string

	mu   sync.Mutex
	last rdsSecret
	at   time.Time
}

func (s *secretSource) get(ctx context.Context) (rdsSecret, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.at.IsZero() && time.Since(s.at) < secretTTL {
		return s.last, nil
	}
	out, err := s.api.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(s.arn)})
	if err != nil {
		return rdsSecret{}, fmt.Errorf("read the database secret %s: %w", s.arn, err)
	}
	var sec rdsSecret
	if err := json.Unmarshal([]byte(aws.ToString(out.SecretString)), &sec); err != nil || sec.Username == "" || sec.Host == "" {
		return rdsSecret{}, fmt.Errorf("the database secret %s is not an RDS secret ({\"username\",\"password\",\"host\",\"port\",\"dbname\"} as JSON)", s.arn)
	}
	s.last, s.at = sec, time.Now()
	return sec, nil
}

// port returns the secret's port, 5432 when it has none.
func (r rdsSecret) port() string {
	p := string(r.Port)
	if unq, err := strconv.Unquote(p); err == nil {
		p = unq
	}
	if p == "" || p == "null" {
		return "5432"
	}
	return p
}

// openDB opens the outbox's database: from the DSN, or from the secret, whose password is read
// again (at most every five minutes) whenever a connection is opened, so rotation needs no
// restart.
func openDB(ctx context.Context, cfg config.PGRelay, sm secretsAPI) (*sql.DB, error) {
	var opts []stdlib.OptionOpenDB
	dsn := cfg.DSN
	if cfg.SecretARN != "" {
		src := &secretSource{api: sm, arn: cfg.SecretARN}
		sec, err := src.get(ctx)
		if err != nil {
			return nil, err
		}
		db := sec.DBName
		if db == "" {
			db = "postgres"
		}
		q := url.Values{"sslmode": {cfg.SSLMode}}
		if cfg.SSLRootCert != "" {
			q.Set("sslrootcert", cfg.SSLRootCert)
		}
		u := url.URL{Scheme: "postgres", User: url.User(sec.Username), Host: sec.Host + ":" + sec.port(), Path: "/" + db,
			RawQuery: q.Encode()}
		dsn = u.String()
		opts = append(opts, stdlib.OptionBeforeConnect(func(ctx context.Context, cc *pgx.ConnConfig) error {
			sec, err := src.get(ctx)
			if err != nil {
				return err
			}
			cc.User, cc.Password = sec.Username, sec.Password
			return nil
		}))
	}
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		if cfg.SecretARN != "" {
			return nil, fmt.Errorf("the connection from the secret (%s=%s, %s=%q): %v", config.EnvOutboxSSLMode, cfg.SSLMode,
				config.EnvOutboxSSLRootCert, cfg.SSLRootCert, err)
		}
		return nil, fmt.Errorf("%s: %v", config.EnvOutboxDSN, err)
	}
	db := stdlib.OpenDB(*cc, opts...)
	// One invocation at a time per instance: a claim and a write-back at once at most.
	db.SetMaxOpenConns(2)
	db.SetMaxIdleConns(2)
	db.SetConnMaxIdleTime(5 * time.Minute)
	return db, nil
}

// summary is what an invocation returns.
type summary struct {
	Sent                    int     `json:"sent"`
	Failed                  int     `json:"failed"`
	Dead                    int     `json:"dead"`
	Released                int     `json:"released"`
	Passes                  int     `json:"passes"`
	Stopped                 string  `json:"stopped"` // "empty" or "deadline"
	PendingRows             int64   `json:"pending_rows"`
	DeadRows                int64   `json:"dead_rows"`
	OldestPendingAgeSeconds float64 `json:"oldest_pending_age_seconds"`
}

// Invoke implements lambda.Handler: the payload (EventBridge Scheduler's) is not read.
func (h *handler) Invoke(ctx context.Context, _ []byte) ([]byte, error) {
	dctx, cancel := h.drainContext(ctx)
	defer cancel()
	st, err := h.relay.Drain(dctx)
	sum := summary{Sent: st.Sent, Failed: st.Failed, Dead: st.Dead, Released: st.Released, Passes: st.Passes, Stopped: "empty"}
	if dctx.Err() != nil && ctx.Err() == nil {
		sum.Stopped, err = "deadline", nil // the next invocation goes on
	}
	relayErr := err
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer ccancel()
	counts, cerr := h.ob.Counts(cctx)
	if cerr == nil {
		sum.PendingRows, sum.DeadRows = counts.Pending, counts.Dead
		if !counts.OldestPending.IsZero() {
			sum.OldestPendingAgeSeconds = max(0, h.now().Sub(counts.OldestPending).Seconds())
		}
	} else {
		h.logger.WarnContext(ctx, "sqsworker pgrelay: could not count the outbox", slog.String("error", cerr.Error()))
	}
	h.writeMetrics(sum, relayErr != nil, cerr == nil)
	if relayErr != nil {
		h.logger.ErrorContext(ctx, "sqsworker pgrelay: relay pass failed", slog.String("error", relayErr.Error()),
			slog.Int("sent", sum.Sent))
		return nil, fmt.Errorf("outbox relay: %w", relayErr)
	}
	h.logger.InfoContext(ctx, "sqsworker pgrelay: drained", slog.Int("sent", sum.Sent), slog.Int("failed", sum.Failed),
		slog.Int("dead", sum.Dead), slog.String("stopped", sum.Stopped), slog.Int64("pending_rows", sum.PendingRows),
		slog.Int64("dead_rows", sum.DeadRows))
	return json.Marshal(sum)
}

// drainContext ends DeadlineMargin before the invocation's deadline.
func (h *handler) drainContext(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithTimeout(ctx, noDeadline)
	}
	return context.WithDeadline(ctx, deadline.Add(-h.margin))
}

// writeMetrics writes one EMF document; the row gauges only when they were read.
func (h *handler) writeMetrics(s summary, relayErr, counted bool) {
	type metric struct {
		Name string `json:"Name"`
		Unit string `json:"Unit"`
	}
	values := map[string]any{
		"Service": h.service, "Table": h.ob.Table(),
		metricSent: s.Sent, metricFailed: s.Failed, metricDead: s.Dead, metricErrors: boolCount(relayErr),
	}
	ms := []metric{{metricSent, "Count"}, {metricFailed, "Count"}, {metricDead, "Count"}, {metricErrors, "Count"}}
	if counted {
		values[metricPendingRows], values[metricDeadRows], values[metricOldestAge] = s.PendingRows, s.DeadRows, s.OldestPendingAgeSeconds
		ms = append(ms, metric{metricPendingRows, "Count"}, metric{metricDeadRows, "Count"}, metric{metricOldestAge, "Seconds"})
	}
	values["_aws"] = map[string]any{
		"Timestamp": h.now().UnixMilli(),
		"CloudWatchMetrics": []map[string]any{{
			"Namespace": metricNamespace, "Dimensions": [][]string{{"Service", "Table"}}, "Metrics": ms,
		}},
	}
	b, err := json.Marshal(values)
	if err != nil {
		h.logger.Error("sqsworker pgrelay: metrics", slog.String("error", err.Error()))
		return
	}
	if _, err := h.metricsw.Write(append(b, '\n')); err != nil && !errors.Is(err, io.ErrClosedPipe) {
		h.logger.Error("sqsworker pgrelay: metrics", slog.String("error", err.Error()))
	}
}

func boolCount(b bool) int {
	if b {
		return 1
	}
	return 0
}
