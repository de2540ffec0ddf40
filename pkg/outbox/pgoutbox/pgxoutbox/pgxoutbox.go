package pgxoutbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/pgoutbox"
)

// Tx adapts a pgx transaction (pgx.Tx: what pgx.Conn.Begin and pgxpool.Pool.Begin return)
// for pgoutbox.Outbox.EnqueueTx:
//
//	tx, err := pool.Begin(ctx)
//	…
//	msg, err := ob.EnqueueTx(ctx, pgxoutbox.Tx(tx), WelcomeEmail{To: "ada@example.com"})
//	…
//	err = tx.Commit(ctx)
//
// It takes only a transaction: a *pgx.Conn or a *pgxpool.Pool would run the insert in a
// transaction of its own, outside the business write. The adapter's Commit and Rollback (which
// EnqueueTx never calls) commit and roll back tx.
func Tx(tx pgx.Tx) pgoutbox.Tx { return txAdapter{tx} }

type txAdapter struct{ tx pgx.Tx }

func (a txAdapter) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	tag, err := a.tx.Exec(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return result(tag.RowsAffected()), nil
}

func (a txAdapter) Commit() error   { return a.tx.Commit(context.Background()) }
func (a txAdapter) Rollback() error { return a.tx.Rollback(context.Background()) }

type result int64

func (r result) LastInsertId() (int64, error) { return 0, errors.New("pgxoutbox: no LastInsertId") }
func (r result) RowsAffected() (int64, error) { return int64(r), nil }

// OpenDB opens a database/sql handle through pgx's stdlib driver, for pgoutbox.Config.DB.
func OpenDB(connString string) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("pgxoutbox: %w", err)
	}
	return stdlib.OpenDB(*cfg), nil
}

// ListenerConfig configures a Listener. ConnString and Channel are required; the zero value of
// every other field is its default.
type ListenerConfig struct {
	// ConnString is the database to listen on (a DSN or URL). It must reach PostgreSQL itself
	// or a pooler in session mode: LISTEN does not work through PgBouncer's transaction mode
	// (use polling there, RunConfig.PollOnly). Required.
	ConnString string
	// Channel is the outbox's channel, pgoutbox.Outbox.Channel(). Required.
	Channel string
	// RetryDelay is the first wait before reconnecting after the connection failed; it doubles
	// up to a minute. Defaults to 1 s.
	RetryDelay time.Duration
	// PingInterval is how long the listener waits for a notification before it checks that the
	// connection is alive. Defaults to 30 s.
	PingInterval time.Duration
	// Logger receives a line per lost connection. Defaults to slog.Default().
	Logger *slog.Logger
}

// Listener holds a dedicated connection that LISTENs on an outbox's channel, and signals C at
// every notification (EnqueueTx notifies at commit) and after every (re)connection, since
// notifications sent while it was disconnected are lost. Create it with NewListener and run it
// with Run.
type Listener struct {
	cfg       ListenerConfig
	c         chan struct{}
	ready     chan struct{}
	readyOnce sync.Once
}

// NewListener checks cfg and returns a Listener.
func NewListener(cfg ListenerConfig) (*Listener, error) {
	if cfg.ConnString == "" || cfg.Channel == "" {
		return nil, errors.New("pgxoutbox: ListenerConfig needs ConnString and Channel")
	}
	if _, err := pgx.ParseConfig(cfg.ConnString); err != nil {
		return nil, fmt.Errorf("pgxoutbox: ListenerConfig.ConnString: %w", err)
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = time.Second
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Listener{cfg: cfg, c: make(chan struct{}, 1), ready: make(chan struct{})}, nil
}

// C receives when the relay should look at the outbox: give it to outbox.RelayConfig.Wake.
func (l *Listener) C() <-chan struct{} { return l.c }

// Ready is closed once the first LISTEN is in place (a transaction committed after it wakes C).
func (l *Listener) Ready() <-chan struct{} { return l.ready }

func (l *Listener) wake() {
	select {
	case l.c <- struct{}{}:
	default:
	}
}

// Run listens until ctx is done, reconnecting after failures, and returns nil then.
func (l *Listener) Run(ctx context.Context) error {
	delay := l.cfg.RetryDelay
	for ctx.Err() == nil {
		err := l.listen(ctx)
		if ctx.Err() != nil {
			break
		}
		l.cfg.Logger.WarnContext(ctx, "outbox listener lost its connection; polling until it is back",
			"channel", l.cfg.Channel, "retry_in", delay, "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Minute)
	}
	return nil
}

// listen connects, LISTENs and waits for notifications until the connection fails.
func (l *Listener) listen(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, l.cfg.ConnString)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.cfg.Channel}.Sanitize()); err != nil {
		return err
	}
	l.readyOnce.Do(func() { close(l.ready) })
	l.wake() // whatever was committed while no one listened
	for {
		wctx, cancel := context.WithTimeout(ctx, l.cfg.PingInterval)
		_, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			l.wake()
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err):
			if err := conn.Ping(ctx); err != nil {
				return err
			}
		default:
			return err
		}
	}
}

// RunConfig configures RunRelay. Outbox, ConnString and Relay.Producers are required.
type RunConfig struct {
	// Outbox is the relays' store (Relay.Store is set to it).
	Outbox *pgoutbox.Outbox
	// ConnString is the database the Listener connects to.
	ConnString string
	// Relay configures the relay; Store and Wake are filled in.
	Relay outbox.RelayConfig
	// PollOnly leaves LISTEN out: the relay polls every Relay.PollInterval. Set it behind
	// PgBouncer in transaction mode (or any pooler that does not keep a session), where LISTEN
	// does not work. Defaults to false: listen, and poll as a fallback.
	PollOnly bool
	// OnReady, when set, is called once the relay runs (and listens, unless PollOnly).
	OnReady func()
}

// RunRelay runs a relay until ctx is done: it drains the outbox, then sleeps until a
// notification (the Listener on a dedicated connection) or PollInterval, and drains again. When
// ctx is cancelled, the pass in progress finishes its write-back; RunRelay returns nil then.
func RunRelay(ctx context.Context, cfg RunConfig) error {
	if cfg.Outbox == nil {
		return errors.New("pgxoutbox: RunConfig.Outbox is nil")
	}
	rc := cfg.Relay
	rc.Store = cfg.Outbox
	var l *Listener
	if !cfg.PollOnly {
		var err error
		l, err = NewListener(ListenerConfig{ConnString: cfg.ConnString, Channel: cfg.Outbox.Channel(), Logger: rc.Logger})
		if err != nil {
			return err
		}
		rc.Wake = l.C()
	}
	r, err := outbox.NewRelay(rc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	if l != nil {
		wg.Go(func() { _ = l.Run(ctx) })
		select {
		case <-l.Ready():
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			// Not listening yet (the listener keeps trying, and logs why): poll meanwhile.
		}
	}
	if cfg.OnReady != nil {
		cfg.OnReady()
	}
	err = r.Run(ctx)
	cancel()
	wg.Wait()
	return err
}
