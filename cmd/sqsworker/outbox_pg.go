package main

// The PostgreSQL outbox in the CLI: --dsn selects it for list/show/retry, and `outbox relay`
// and `outbox migrate` run on it.

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/pgoutbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/pgoutbox/pgxoutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// Environment variables that give --dsn its default, in order.
const (
	outboxDSNEnv   = "SQSWORKER_OUTBOX_DSN"
	databaseURLEnv = "DATABASE_URL"
)

func init() { registerOutbox(pgOutbox{}) } // the one line that hooks PostgreSQL into `sqsworker outbox`

// pgOutbox is the PostgreSQL backend of `sqsworker outbox`: --dsn selects it.
type pgOutbox struct{}

// addFlags implements outboxBackend: --dsn and --outbox-table, on every outbox subcommand.
func (pgOutbox) addFlags(cmd *cobra.Command) {
	pf := cmd.PersistentFlags()
	pf.String("dsn", "", "PostgreSQL outbox: the database's connection string (default: $"+outboxDSNEnv+", else $"+databaseURLEnv+")")
	pf.String("outbox-table", pgoutbox.DefaultTable, "PostgreSQL outbox: the table, optionally schema-qualified")
}

// open implements outboxBackend: the PostgreSQL outbox when a DSN is given.
func (pgOutbox) open(cmd *cobra.Command, _ *globals) (outbox.Inspector, string, bool, error) {
	o := pgOptions(cmd)
	if o.connString() == "" {
		return nil, "", false, nil
	}
	ob, _, err := o.open(cmd.Context(), pgoutbox.Config{})
	if err != nil {
		return nil, "", true, err
	}
	// The handle lives as long as the command (the process).
	return ob, "PostgreSQL table " + ob.Table(), true, nil
}

// commands implements outboxBackend: relay and migrate.
func (pgOutbox) commands(g *globals) []*cobra.Command {
	return []*cobra.Command{newOutboxRelayCmd(g), newOutboxMigrateCmd()}
}

// pgOutboxOptions are the flags that select a PostgreSQL outbox.
type pgOutboxOptions struct {
	dsn, table string
}

// pgOptions reads --dsn and --outbox-table of a command under `outbox`.
func pgOptions(cmd *cobra.Command) *pgOutboxOptions {
	o := &pgOutboxOptions{table: pgoutbox.DefaultTable}
	if f := cmd.Flags().Lookup("dsn"); f != nil {
		o.dsn = f.Value.String()
	}
	if f := cmd.Flags().Lookup("outbox-table"); f != nil {
		o.table = f.Value.String()
	}
	return o
}

// connString returns --dsn or its default from the environment, "" when none is set.
func (o *pgOutboxOptions) connString() string {
	for _, s := range []string{o.dsn, os.Getenv(outboxDSNEnv), os.Getenv(databaseURLEnv)} {
		if s != "" {
			return s
		}
	}
	return ""
}

// open connects to the database and checks that the outbox table is there.
func (o *pgOutboxOptions) open(ctx context.Context, cfg pgoutbox.Config) (*pgoutbox.Outbox, *sql.DB, error) {
	db, err := o.openDB(ctx)
	if err != nil {
		return nil, nil, err
	}
	cfg.DB, cfg.Table = db, o.table
	ob, err := pgoutbox.New(cfg)
	if err != nil {
		db.Close()
		return nil, nil, &usageError{fmt.Errorf("--outbox-table: %w", err)}
	}
	var found sql.NullString
	if err := db.QueryRowContext(ctx, `SELECT to_regclass($1)::text`, o.table).Scan(&found); err != nil {
		db.Close()
		return nil, nil, &databaseError{fmt.Errorf("look up the outbox table %s in %s: %w", o.table, describeDSN(o.connString()), err)}
	}
	if !found.Valid {
		db.Close()
		return nil, nil, fmt.Errorf("the outbox table %s does not exist in %s: create it with `sqsworker outbox migrate --dsn …` "+
			"(or pgoutbox.Migrate, or pkg/outbox/pgoutbox/schema.sql in your migration tool)", o.table, redactDSN(o.connString()))
	}
	return ob, db, nil
}

func (o *pgOutboxOptions) openDB(ctx context.Context) (*sql.DB, error) {
	dsn := o.connString()
	if dsn == "" {
		return nil, &usageError{fmt.Errorf("needs --dsn (or $%s / $%s): the PostgreSQL outbox's database", outboxDSNEnv, databaseURLEnv)}
	}
	db, err := pgxoutbox.OpenDB(dsn)
	if err != nil {
		return nil, &usageError{fmt.Errorf("--dsn: %v", err)}
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, &databaseError{fmt.Errorf("cannot connect to %s (--dsn %s): %w\n"+
			"  is the server running and reachable from here? Check --dsn (or $%s / $%s)", describeDSN(dsn), redactDSN(dsn), err, outboxDSNEnv, databaseURLEnv)}
	}
	return db, nil
}

// databaseError is an error of the PostgreSQL outbox's database, already explained: explain
// leaves it alone (a refused connection is the database's, not an AWS endpoint's).
type databaseError struct{ err error }

func (e *databaseError) Error() string { return e.err.Error() }
func (e *databaseError) Unwrap() error { return e.err }

// describeDSN names the database and host a connection string points to, for messages, such as
// `PostgreSQL database "app" on db.example.com:5432`; never its password. It reads the URL form
// (postgres://user:password@host:port/database?…) and the key=value form (host=… dbname=…),
// with libpq's defaults from $PGHOST, $PGPORT, $PGDATABASE and the user name.
func describeDSN(dsn string) string {
	v := map[string]string{}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if u, err := url.Parse(dsn); err == nil {
			v["host"], v["dbname"] = u.Host, strings.TrimPrefix(u.Path, "/")
			if u.User != nil {
				v["user"] = u.User.Username()
			}
			for k, vals := range u.Query() {
				if len(vals) > 0 && (k == "host" || k == "port" || k == "dbname" || k == "user") {
					v[k] = vals[len(vals)-1]
				}
			}
		}
	} else {
		for _, kv := range keyValues(dsn) {
			v[kv[0]] = kv[1]
		}
	}
	host := firstOf(v["host"], v["hostaddr"], os.Getenv("PGHOST"))
	port := firstOf(v["port"], os.Getenv("PGPORT"))
	if host == "" {
		host = "the default host (a local socket or localhost)"
	} else if port != "" && !strings.Contains(host, ":") && !strings.HasPrefix(host, "/") {
		host += ":" + port
	}
	db := firstOf(v["dbname"], os.Getenv("PGDATABASE"), v["user"], os.Getenv("PGUSER"))
	if db == "" {
		return "PostgreSQL on " + host
	}
	return fmt.Sprintf("PostgreSQL database %q on %s", db, host)
}

// keyValues parses a key=value connection string into its pairs, in order (values may be
// single-quoted, with \' and \\ escapes).
func keyValues(s string) [][2]string {
	var out [][2]string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			break
		}
		key := strings.TrimSpace(s[:eq])
		s = strings.TrimLeft(s[eq+1:], " ")
		var val strings.Builder
		if strings.HasPrefix(s, "'") {
			i := 1
			for ; i < len(s) && s[i] != '\''; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				val.WriteByte(s[i])
			}
			s = s[min(i+1, len(s)):]
		} else {
			end := strings.IndexAny(s, " \t\n")
			if end < 0 {
				end = len(s)
			}
			val.WriteString(s[:end])
			s = s[end:]
		}
		out = append(out, [2]string{key, val.String()})
	}
	return out
}

// firstOf returns the first non-empty string.
func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// redactDSN hides a password in a connection string, for messages.
func redactDSN(dsn string) string {
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "the --dsn database"
		}
		if q := u.Query(); q.Has("password") { // libpq takes a password in the query too
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.Redacted()
	}
	var b strings.Builder // key=value form: rebuilt without the password
	for _, kv := range keyValues(dsn) {
		k, v := kv[0], kv[1]
		if k == "password" {
			v = "xxxxx"
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		if v == "" || strings.ContainsAny(v, ` '\`) {
			v = "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
		}
		b.WriteString(k + "=" + v)
	}
	return b.String()
}

type relayOptions struct {
	pollOnly, drain, fifo     bool
	batchSize, maxAttempts    int
	lease, pollInterval       time.Duration
	id, schedulerRole, logLvl string
	statsEvery                time.Duration
}

func newOutboxRelayCmd(g *globals) *cobra.Command {
	o := &relayOptions{}
	cmd := &cobra.Command{
		Use:   "relay",
		Short: "Send a PostgreSQL outbox's entries to the stack's queue",
		Long: `relay runs an outbox relay: it claims the due rows of the PostgreSQL outbox (FOR UPDATE SKIP
LOCKED, a lease of --lease), sends them to the stack's queue <stack>-jobs with
SendMessageBatch (delays beyond 15 minutes, and any delay on a FIFO queue, through the
stack's EventBridge Scheduler group), deletes the sent rows, and retries failed ones with
exponential backoff until --max-attempts, after which they are dead ('sqsworker outbox list
--state dead'). Any number of relays may run at once.

It drains the outbox, then waits for a notification (EnqueueTx notifies at commit; the
relay LISTENs on a connection of its own) or --poll-interval, and drains again. Behind
PgBouncer in transaction mode, where LISTEN does not work, pass --poll-only. --drain stops
once nothing is due. Ctrl-C lets the pass in progress finish its write-back, then stops.

With a job table in the stack, each job SQS accepted is recorded as queued there. The queue
must be the one the application's producer enqueued for (rows name their queue URL).`,
		Example: `  sqsworker outbox relay --dsn postgres://app@db/app --stack myapp
  sqsworker outbox relay --dsn postgres://app@pgbouncer/app --stack myapp --poll-only --poll-interval 500ms
  sqsworker outbox relay --stack myapp --drain          # DSN from $SQSWORKER_OUTBOX_DSN or $DATABASE_URL`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPGOutboxRelay(cmd, g, pgOptions(cmd), o)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.pollOnly, "poll-only", false, "do not LISTEN (PgBouncer in transaction mode): poll every --poll-interval")
	f.BoolVar(&o.drain, "drain", false, "send what is due, then exit")
	f.BoolVar(&o.fifo, "fifo", false, "the stack's queues are FIFO (found by name otherwise)")
	f.IntVar(&o.batchSize, "batch-size", outbox.DefaultBatchSize, "most rows one pass claims")
	f.IntVar(&o.maxAttempts, "max-attempts", outbox.DefaultMaxAttempts, "sends a row gets before it is dead")
	f.DurationVar(&o.lease, "lease", outbox.DefaultLease, "how long a claim lasts (another relay takes the rows of a crashed one after it)")
	f.DurationVar(&o.pollInterval, "poll-interval", outbox.DefaultPollInterval, "how long to wait between passes that found nothing, without a notification")
	f.StringVar(&o.id, "id", "", "the relay's id in the rows it claims (default: host, pid and a random suffix)")
	f.StringVar(&o.schedulerRole, "scheduler-role", "", "IAM role EventBridge Scheduler assumes for delayed jobs (default: $"+schedulerRoleEnv+", else the stack's output)")
	f.DurationVar(&o.statsEvery, "stats-every", time.Second, "how often to print what the relay sent (0: after every pass)")
	f.StringVar(&o.logLvl, "log-level", "warn", "level of the relay's log lines on stderr: debug, info, warn or error")
	return cmd
}

func runPGOutboxRelay(cmd *cobra.Command, g *globals, pg *pgOutboxOptions, o *relayOptions) error {
	ctx, stdout, stderr := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
	stack, err := g.stackName(cmd)
	if err != nil {
		return err
	}
	switch {
	case o.batchSize < 1:
		return &usageError{fmt.Errorf("--batch-size %d: must be at least 1", o.batchSize)}
	case o.maxAttempts < 1:
		return &usageError{fmt.Errorf("--max-attempts %d: must be at least 1", o.maxAttempts)}
	case o.lease < time.Second:
		return &usageError{fmt.Errorf("--lease %v: must be at least 1s", o.lease)}
	case o.pollInterval <= 0:
		return &usageError{fmt.Errorf("--poll-interval %v: must be positive", o.pollInterval)}
	case o.statsEvery < 0:
		return &usageError{fmt.Errorf("--stats-every %v: must not be negative", o.statsEvery)}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLvl)); err != nil {
		return &usageError{fmt.Errorf("--log-level %q: want debug, info, warn or error", o.logLvl)}
	}
	if o.schedulerRole != "" {
		if err := checkRoleARN("--scheduler-role", o.schedulerRole); err != nil {
			return err
		}
	}
	if pg.connString() == "" {
		return &usageError{fmt.Errorf("outbox relay needs --dsn (or $%s / $%s): the PostgreSQL outbox's database", outboxDSNEnv, databaseURLEnv)}
	}
	c, err := connect(ctx, g)
	if err != nil {
		return err
	}
	refs, err := resolveStack(ctx, c, stack, o.fifo, needQueue|optTable)
	if err != nil {
		return err
	}
	pcfg := producer.Config{SQS: c.sqs, QueueURL: refs.QueueURL}
	if refs.Table != "" {
		if pcfg.Status, err = status.New(status.Config{Client: c.ddb, Table: refs.Table}); err != nil {
			return err
		}
	}
	// Delayed jobs need the scheduler: set it up when its role can be found, else say what fails.
	target := schedulingTarget{Stack: stack, QueueName: refs.QueueName, QueueURL: refs.QueueURL, FIFO: refs.FIFO,
		Local: c.local, Where: c.where, Role: o.schedulerRole}
	role, rerr := schedulerRole(ctx, c.cfn, target, os.Getenv)
	if rerr == nil {
		sc, err := newJobScheduler(ctx, c, target, role)
		if err == nil {
			pcfg.Scheduler = sc
		} else {
			rerr = err
		}
	}
	if rerr != nil {
		what := "jobs delayed beyond 15 minutes"
		if refs.FIFO {
			what = "delayed jobs (a FIFO queue has no per-message delay)"
		}
		fmt.Fprintf(stderr, "sqsworker: warning: no EventBridge Scheduler for %s: they will fail and end dead: %s\n", what, errorText(rerr))
	}
	// Jobs larger than an SQS message go through the stack's payload bucket, when it has one.
	if st, err := payloadStore(ctx, c, g, stack); err != nil {
		fmt.Fprintf(stderr, "sqsworker: warning: no payload bucket for jobs larger than an SQS message: they will fail and end dead: %s\n", errorText(err))
	} else if st != nil {
		pcfg.Payload = st
	}
	prod, err := producer.New(pcfg)
	if err != nil {
		return err
	}
	prods := []*producer.Producer{prod}
	if c.local {
		// Emulators answer GetQueueUrl with a host of their own (the embedded one always says
		// localhost:4566), which resolveStack rewrote to the endpoint's: rows an application
		// wrote with the URL as the emulator gave it name that form. Serve both.
		if raw, err := queueURL(ctx, c, refs.QueueName); err == nil && raw != refs.QueueURL {
			rcfg := pcfg
			rcfg.QueueURL = raw
			if p2, err := producer.New(rcfg); err == nil {
				prods = append(prods, p2)
			}
		}
	}
	ob, db, err := pg.open(ctx, pgoutbox.Config{})
	if err != nil {
		return err
	}
	defer db.Close()

	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	pr := &passPrinter{w: stdout, every: o.statsEvery}
	rcfg := outbox.RelayConfig{Producers: prods, ID: o.id, BatchSize: o.batchSize, Lease: o.lease,
		MaxAttempts: o.maxAttempts, PollInterval: o.pollInterval, Logger: logger, OnPass: pr.add}
	wake := fmt.Sprintf("woken by NOTIFY on channel %s, polling every %v", ob.Channel(), o.pollInterval)
	if o.pollOnly {
		wake = fmt.Sprintf("polling every %v (no LISTEN)", o.pollInterval)
	}
	if o.drain {
		r, err := outbox.NewRelay(withStore(rcfg, ob))
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "relay %s: outbox %s → queue %s; draining\n", safe(r.ID()), ob.Table(), refs.QueueName)
		st, err := r.Drain(ctx)
		pr.flush()
		fmt.Fprintf(stdout, "drained: %s\n", statsLine(st))
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	stopPrinter := pr.start()
	err = pgxoutbox.RunRelay(ctx, pgxoutbox.RunConfig{Outbox: ob, ConnString: pg.connString(), Relay: rcfg, PollOnly: o.pollOnly,
		OnReady: func() {
			fmt.Fprintf(stdout, "relay: outbox %s → queue %s; %s. Ctrl-C stops.\n", ob.Table(), refs.QueueName, wake)
		}})
	stopPrinter()
	fmt.Fprintf(stdout, "stopped: %s\n", statsLine(pr.total()))
	return err
}

// statsLine says what a relay did.
func statsLine(st outbox.Stats) string {
	line := fmt.Sprintf("%d sent", st.Sent)
	if st.Failed > 0 {
		line += fmt.Sprintf(", %d failed (retried later)", st.Failed)
	}
	if st.Dead > 0 {
		line += fmt.Sprintf(", %d dead", st.Dead)
	}
	if st.Released > 0 {
		line += fmt.Sprintf(", %d released (their FIFO group stopped)", st.Released)
	}
	return line
}

func withStore(c outbox.RelayConfig, s outbox.Store) outbox.RelayConfig {
	c.Store = s
	return c
}

// passPrinter prints what the relay did, a line at most every `every` (0: every pass).
type passPrinter struct {
	w     io.Writer
	every time.Duration
	mu    sync.Mutex
	since outbox.Stats
	all   outbox.Stats
}

func (p *passPrinter) add(st outbox.Stats) {
	p.mu.Lock()
	defer p.mu.Unlock()
	addStats(&p.since, st)
	addStats(&p.all, st)
	if p.every == 0 {
		p.printLocked()
	}
}

func addStats(to *outbox.Stats, st outbox.Stats) {
	to.Claimed += st.Claimed
	to.Sent += st.Sent
	to.Failed += st.Failed
	to.Dead += st.Dead
	to.Released += st.Released
	to.Passes += st.Passes
}

func (p *passPrinter) printLocked() {
	if p.since.Claimed > 0 {
		fmt.Fprintf(p.w, "%s  %s\n", time.Now().UTC().Format(time.TimeOnly), statsLine(p.since))
	}
	p.since = outbox.Stats{}
}

func (p *passPrinter) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.printLocked()
}

func (p *passPrinter) total() outbox.Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.printLocked()
	return p.all
}

// start prints every p.every until the returned function is called.
func (p *passPrinter) start() func() {
	if p.every == 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(p.every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				p.flush()
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

func newOutboxMigrateCmd() *cobra.Command {
	var printOnly bool
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade the PostgreSQL outbox table",
		Long: `migrate creates the outbox table (--outbox-table, default sqsworker_outbox) or brings it up to
this program's schema version, as pgoutbox.Migrate does: idempotent, and safe when several
processes run it at once (an advisory lock). --print writes the SQL instead, for your own
migration tool (the same as pkg/outbox/pgoutbox/schema.sql for the default table).`,
		Example: `  sqsworker outbox migrate --dsn postgres://app@db/app
  sqsworker outbox migrate --outbox-table app.outbox --print > 0042_outbox.sql`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pg := pgOptions(cmd)
			if printOnly {
				s, err := pgoutbox.SchemaSQL(pg.table)
				if err != nil {
					return &usageError{fmt.Errorf("--outbox-table: %w", err)}
				}
				_, err = io.WriteString(cmd.OutOrStdout(), s)
				return err
			}
			db, err := pg.openDB(cmd.Context())
			if err != nil {
				return err
			}
			defer db.Close()
			ob, err := pgoutbox.New(pgoutbox.Config{DB: db, Table: pg.table})
			if err != nil {
				return &usageError{fmt.Errorf("--outbox-table: %w", err)}
			}
			if err := ob.Migrate(cmd.Context()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "outbox table %s is at schema version %d\n", ob.Table(), pgoutbox.SchemaVersion)
			return nil
		},
	}
	cmd.Flags().BoolVar(&printOnly, "print", false, "print the schema's SQL instead of applying it")
	return cmd
}
