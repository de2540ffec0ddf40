package pgoutbox_test

import (
	"context"
	"database/sql"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/pgoutbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/pgoutbox/pgxoutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

const stdURL = "https://sqs.us-east-1.amazonaws.com/123456789012/jobs"

// startRelay runs pgxoutbox.RunRelay until the test ends and returns once it is ready, with a
// counter of its passes.
func startRelay(t *testing.T, cfg pgxoutbox.RunConfig) *atomic.Int64 {
	t.Helper()
	var passes atomic.Int64
	cfg.Relay.OnPass = func(outbox.Stats) { passes.Add(1) }
	cfg.Relay.Logger = quiet()
	ready := make(chan struct{})
	cfg.OnReady = func() { close(ready) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pgxoutbox.RunRelay(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunRelay: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("RunRelay ended at start: %v", err)
	}
	waitFor(t, "the relay's first pass", func() bool { return passes.Load() > 0 })
	return &passes
}

// NOTIFY wakes a sleeping relay at commit: its poll interval is an hour, so only the
// notification can make it send the job.
func TestNotifyWakesASleepingRelay(t *testing.T) {
	t.Parallel()
	api := &countingSQS{}
	p := newProducer(t, api, stdURL)
	o, db, dsn := newOutbox(t, pgoutbox.Config{Producer: p})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := pgxoutbox.NewListener(pgxoutbox.ListenerConfig{ConnString: dsn, Channel: o.Channel(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = l.Run(ctx) }()
	<-l.Ready()
	<-l.C() // the signal every (re)connection gives: from now on, only a notification signals
	var passes atomic.Int64
	r, err := outbox.NewRelay(outbox.RelayConfig{Store: o, Producers: []*producer.Producer{p}, Wake: l.C(), PollInterval: time.Hour,
		OnPass: func(outbox.Stats) { passes.Add(1) }, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.Run(ctx) }()
	waitFor(t, "the relay's first pass", func() bool { return passes.Load() > 0 })
	before := passes.Load()
	// A rolled-back transaction notifies nobody.
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.EnqueueTx(context.Background(), tx, orderArgs{Order: "rolled back"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	var m producer.Message
	inTx(t, db, func(tx *sql.Tx) error {
		var err error
		m, err = o.EnqueueTx(context.Background(), tx, orderArgs{Order: "committed"})
		return err
	})
	waitFor(t, "the notified relay to send the job", func() bool { return len(api.sent()) == 1 })
	if got := api.sent()[0].JobID; got != m.ID {
		t.Errorf("sent %s, want %s", got, m.ID)
	}
	// OnPass runs after the pass's write-back, so a moment after the send.
	waitFor(t, "the pass to end", func() bool { return passes.Load() > before })
}

// With no NOTIFY (NoNotify here; a dropped notification or a lost listener connection are the
// same to the relay), polling still sends.
func TestPollingSendsWithoutNotify(t *testing.T) {
	t.Parallel()
	api := &countingSQS{}
	p := newProducer(t, api, stdURL)
	o, db, dsn := newOutbox(t, pgoutbox.Config{Producer: p, NoNotify: true})
	for _, pollOnly := range []bool{false, true} {
		startRelay(t, pgxoutbox.RunConfig{Outbox: o, ConnString: dsn, PollOnly: pollOnly,
			Relay: outbox.RelayConfig{Producers: []*producer.Producer{p}, PollInterval: 50 * time.Millisecond}})
	}
	enqueue(t, db, o, 3)
	// The send comes before the write-back that deletes the rows: wait for both.
	waitFor(t, "polling relays to send the jobs and delete their rows", func() bool {
		return len(api.sent()) >= 3 && rowCount(t, db, o) == 0
	})
	if n := len(api.sent()); n != 3 {
		t.Errorf("%d sends, want 3", n)
	}
}

// A listener whose connection is killed reconnects, signals at once (notifications sent while
// it was away are lost), and hears later notifications again.
func TestListenerReconnects(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o, db, dsn := newOutbox(t, pgoutbox.Config{})
	l, err := pgxoutbox.NewListener(pgxoutbox.ListenerConfig{ConnString: dsn + "&application_name=outbox-listener-test",
		Channel: o.Channel(), RetryDelay: 20 * time.Millisecond, PingInterval: 50 * time.Millisecond, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = l.Run(ctx) }()
	<-l.Ready()
	<-l.C() // the signal after connecting
	listenerPID := func() int {
		var pid int
		_ = db.QueryRow(`SELECT coalesce(max(pid), 0) FROM pg_stat_activity WHERE application_name = 'outbox-listener-test'`).Scan(&pid)
		return pid
	}
	first := listenerPID()
	if _, err := db.Exec(`SELECT pg_terminate_backend($1)`, first); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.C():
	case <-time.After(60 * time.Second):
		t.Fatal("no signal after the listener's connection was killed")
	}
	waitFor(t, "a new listener connection", func() bool { p := listenerPID(); return p != 0 && p != first })
	time.Sleep(300 * time.Millisecond) // several idle ping cycles: the connection stays, and listens
	if p := listenerPID(); p == first || p == 0 {
		t.Fatalf("listener backend %d after the pings", p)
	}
	if _, err := db.Exec(`SELECT pg_notify($1, '')`, o.Channel()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.C():
	case <-time.After(60 * time.Second):
		t.Fatal("the reconnected listener missed a notification")
	}
}

// SendCommitted, the after-commit fast path, sends the committed jobs at once; a FIFO job whose
// group has an earlier job in flight is left to the relays.
func TestSendCommitted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	api := &countingSQS{}
	p := newProducer(t, api, stdURL)
	fifoP := newProducer(t, api, "https://sqs.us-east-1.amazonaws.com/123456789012/jobs.fifo")
	o, db, _ := newOutbox(t, pgoutbox.Config{Producer: p})
	fifo, err := pgoutbox.New(pgoutbox.Config{Producer: fifoP, DB: db})
	if err != nil {
		t.Fatal(err)
	}
	r, err := outbox.NewRelay(outbox.RelayConfig{Store: o, Producers: []*producer.Producer{p, fifoP}, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	var m producer.Message
	inTx(t, db, func(tx *sql.Tx) error {
		var err error
		m, err = o.EnqueueTx(ctx, tx, orderArgs{Order: "fast"})
		return err
	})
	if st, err := o.SendCommitted(ctx, r, m.ID); err != nil || st.Sent != 1 {
		t.Fatalf("SendCommitted = %+v, %v", st, err)
	}
	if s := api.sent(); len(s) != 1 || s[0].JobID != m.ID || rowCount(t, db, o) != 0 {
		t.Errorf("sent %+v, %d rows left", s, rowCount(t, db, o))
	}
	// FIFO: g-1 is claimed by another relay; g-2 must wait for it.
	var first, second producer.Message
	inTx(t, db, func(tx *sql.Tx) error {
		var err error
		first, err = fifo.EnqueueTx(ctx, tx, orderArgs{Order: "g-1"}, producer.WithGroupID("g"))
		return err
	})
	now := time.Now()
	if got, err := o.Claim(ctx, outbox.Claim{Owner: "other", Max: 10, Now: now, Until: now.Add(time.Minute)}); err != nil || len(got) != 1 || got[0].ID() != first.ID {
		t.Fatalf("other relay's claim = %v, %v", got, err)
	}
	inTx(t, db, func(tx *sql.Tx) error {
		var err error
		second, err = fifo.EnqueueTx(ctx, tx, orderArgs{Order: "g-2"}, producer.WithGroupID("g"))
		return err
	})
	if st, err := fifo.SendCommitted(ctx, r, second.ID); err != nil || st.Claimed != 0 {
		t.Errorf("SendCommitted behind a claimed job of its group = %+v, %v; want nothing claimed", st, err)
	}
	if e, err := o.Get(ctx, second.ID); err != nil || e.State != outbox.StatePending || e.Attempts != 0 {
		t.Errorf("g-2 after the fast path: %+v, %v; want it pending for the relays", e, err)
	}
	if st, err := o.SendCommitted(ctx, r); err != nil || st.Claimed != 0 {
		t.Errorf("SendCommitted with no ids = %+v, %v", st, err)
	}
}
