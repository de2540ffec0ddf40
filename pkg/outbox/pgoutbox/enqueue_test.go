package pgoutbox_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/pgoutbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/pgoutbox/pgxoutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// A business write and its job commit or roll back together, through database/sql and pgx; on
// the emulator, the committed job arrives once, with the id EnqueueTx returned, and the
// rolled-back one never.
func TestEnqueueTxCommitAndRollback(t *testing.T) {
	t.Parallel()
	client, stack := emulatorQueue(t, false)
	p := newProducer(t, client, stack.QueueURL)
	o, db, dsn := newOutbox(t, pgoutbox.Config{Producer: p})
	ctx := context.Background()
	if _, err := db.Exec(`CREATE TABLE orders (id text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	var committed []string
	// database/sql: rollback, then commit.
	for _, commit := range []bool{false, true} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		id := "sql-" + map[bool]string{false: "rolled-back", true: "committed"}[commit]
		if _, err := tx.ExecContext(ctx, `INSERT INTO orders VALUES ($1)`, id); err != nil {
			t.Fatal(err)
		}
		m, err := o.EnqueueTx(ctx, tx, orderArgs{Order: id})
		if err != nil {
			t.Fatal(err)
		}
		if commit {
			committed = append(committed, m.ID)
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// pgx: rollback, then commit.
	for _, commit := range []bool{false, true} {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		id := "pgx-" + map[bool]string{false: "rolled-back", true: "committed"}[commit]
		if _, err := tx.Exec(ctx, `INSERT INTO orders VALUES ($1)`, id); err != nil {
			t.Fatal(err)
		}
		m, err := o.EnqueueTx(ctx, pgxoutbox.Tx(tx), orderArgs{Order: id}, producer.WithKey("order-"+id))
		if err != nil {
			t.Fatal(err)
		}
		if commit {
			committed = append(committed, m.ID)
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := rowCount(t, db, o); n != 2 {
		t.Fatalf("%d rows in the outbox, want the 2 committed", n)
	}
	r, err := outbox.NewRelay(outbox.RelayConfig{Store: o, Producers: []*producer.Producer{p}, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.Drain(ctx)
	if err != nil || st.Sent != 2 || st.Failed+st.Dead != 0 {
		t.Fatalf("Drain = %+v, %v; want 2 sent", st, err)
	}
	if n := rowCount(t, db, o); n != 0 {
		t.Errorf("%d rows left after the relay sent them", n)
	}
	seen, order := received(t, client, stack.QueueURL, 3, 5*time.Second) // wait for a third, which must not come
	if len(order) != 2 || seen[committed[0]] != 1 || seen[committed[1]] != 1 {
		t.Errorf("received %v, want %v once each and nothing else", seen, committed)
	}
	for _, env := range order {
		if !strings.Contains(string(env.Args), "committed") {
			t.Errorf("received a rolled-back job: %s", env.Args)
		}
	}
}

// The row keeps the whole message: key, attributes, delay, FIFO group and dedup id, trace
// context.
func TestEnqueueTxKeepsTheMessage(t *testing.T) {
	t.Parallel()
	api := &countingSQS{}
	fifo := newProducer(t, api, "https://sqs.us-east-1.amazonaws.com/123456789012/jobs.fifo")
	o, db, _ := newOutbox(t, pgoutbox.Config{Producer: fifo})
	ctx := context.Background()
	var m producer.Message
	inTx(t, db, func(tx *sql.Tx) error {
		var err error
		m, err = o.EnqueueTx(ctx, tx, orderArgs{Order: "é ✓"}, producer.WithGroupID("tenant-1"), producer.WithDeduplicationID("d-1"),
			producer.WithKey("k ✓"), producer.WithMeta("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"))
		return err
	})
	got, err := o.Get(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	g := got.Message
	if g.ID != m.ID || g.Body != m.Body || g.Key != "k ✓" || g.Kind != "order.confirm" || g.GroupID != "tenant-1" ||
		g.DeduplicationID != "d-1" || g.QueueURL != fifo.QueueURL() {
		t.Errorf("stored %+v\nwant %+v", g, m)
	}
	if got.State != outbox.StatePending || got.Attempts != 0 || got.CreatedAt.IsZero() || !got.AvailableAt.Equal(got.CreatedAt) {
		t.Errorf("new row: %+v", got)
	}
	var groupKey string
	if err := db.QueryRow(`SELECT group_key FROM `+o.Table()+` WHERE id = $1`, m.ID).Scan(&groupKey); err != nil || groupKey != fifo.QueueURL()+" tenant-1" {
		t.Errorf("group_key = %q, %v", groupKey, err)
	}
}

// A batch is written in order in one statement; one invalid job rejects it all.
func TestEnqueueBatchTx(t *testing.T) {
	t.Parallel()
	p := newProducer(t, &countingSQS{}, "https://sqs.us-east-1.amazonaws.com/123456789012/jobs")
	o, db, _ := newOutbox(t, pgoutbox.Config{Producer: p})
	ctx := context.Background()
	var reqs []producer.Request
	for i := range 250 {
		reqs = append(reqs, producer.Request{Args: orderArgs{Order: "o", N: i}})
	}
	var msgs []producer.Message
	inTx(t, db, func(tx *sql.Tx) error {
		var err error
		msgs, err = o.EnqueueBatchTx(ctx, tx, reqs)
		return err
	})
	page, err := o.List(ctx, outbox.ListQuery{State: outbox.StatePending, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Entries) != 250 {
		t.Fatalf("listed %d, want 250", len(page.Entries))
	}
	for i := range page.Entries {
		if page.Entries[i].ID() != msgs[i].ID {
			t.Fatalf("row %d is %s, want %s: not in the batch's order", i, page.Entries[i].ID(), msgs[i].ID)
		}
	}
	bad := append(append([]producer.Request(nil), reqs[:3]...), producer.Request{Args: orderArgs{Order: "x"}, Options: []producer.Option{producer.WithKey(strings.Repeat("k", 5000))}})
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	_, err = o.EnqueueBatchTx(ctx, tx, bad)
	if !errors.Is(err, producer.ErrInvalid) || !strings.Contains(err.Error(), "job 3 of 4") {
		t.Errorf("EnqueueBatchTx with an invalid job = %v, want ErrInvalid naming job 3 of 4", err)
	}
	var n int
	if err := tx.QueryRow("SELECT count(*) FROM " + o.Table()).Scan(&n); err != nil || n != 250 {
		t.Errorf("rows after the rejected batch: %d, %v; want the 250 of before", n, err)
	}
}

// Only a transaction is a pgoutbox.Tx: *sql.DB and *sql.Conn have ExecContext too, but would
// commit the job on their own, outside the business transaction.
func TestTxIsOnlyATransaction(t *testing.T) {
	for _, tt := range []struct {
		name string
		v    any
		want bool
	}{
		{"*sql.Tx", (*sql.Tx)(nil), true},
		{"*sql.DB", (*sql.DB)(nil), false},
		{"*sql.Conn", (*sql.Conn)(nil), false},
	} {
		if _, ok := tt.v.(pgoutbox.Tx); ok != tt.want {
			t.Errorf("%s implements pgoutbox.Tx: %v, want %v", tt.name, ok, tt.want)
		}
	}
}

func TestNewAndEnqueueTxReject(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		cfg  pgoutbox.Config
		want string
	}{
		{"upper-case table", pgoutbox.Config{Table: "Outbox"}, "lower-case"},
		{"injection", pgoutbox.Config{Table: "outbox; DROP TABLE users"}, "lower-case"},
		{"three parts", pgoutbox.Config{Table: "a.b.c"}, "lower-case"},
		{"long part", pgoutbox.Config{Table: strings.Repeat("t", 51)}, "longer than 50"},
		{"long channel", pgoutbox.Config{Channel: strings.Repeat("c", 64)}, "63-byte"},
		{"negative lease", pgoutbox.Config{Lease: -time.Second}, "Lease"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := pgoutbox.New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New = %v, want an error with %q", err, tt.want)
			}
		})
	}
	o, err := pgoutbox.New(pgoutbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if o.Table() != "sqsworker_outbox" || o.Channel() != "sqsworker_outbox" {
		t.Errorf("defaults: table %q channel %q", o.Table(), o.Channel())
	}
	if _, err := o.EnqueueTx(context.Background(), nil, orderArgs{}); err == nil || !strings.Contains(err.Error(), "Config.Producer") {
		t.Errorf("EnqueueTx without a producer = %v", err)
	}
	p := newProducer(t, &countingSQS{}, "https://sqs.us-east-1.amazonaws.com/123456789012/jobs")
	o, _ = pgoutbox.New(pgoutbox.Config{Producer: p, Table: "app.jobs_outbox"})
	if o.Channel() != "app_jobs_outbox" {
		t.Errorf("channel of app.jobs_outbox = %q", o.Channel())
	}
	if _, err := o.EnqueueTx(context.Background(), nil, orderArgs{}); err == nil || !strings.Contains(err.Error(), "tx is nil") {
		t.Errorf("EnqueueTx with a nil tx = %v", err)
	}
	if _, err := o.Claim(context.Background(), outbox.Claim{Owner: "r", Max: 1, Now: time.Now(), Until: time.Now().Add(time.Second)}); err == nil || !strings.Contains(err.Error(), "Config.DB") {
		t.Errorf("Claim without a DB = %v", err)
	}
}

// Delete removes a row a person gave up on; Counts counts pending and dead rows.
func TestDeleteAndCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newProducer(t, &countingSQS{}, stdURL)
	o, db, _ := newOutbox(t, pgoutbox.Config{Producer: p})
	if c, err := o.Counts(ctx); err != nil || c.Pending != 0 || c.Dead != 0 || !c.OldestPending.IsZero() {
		t.Fatalf("empty: %+v, %v", c, err)
	}
	ids := enqueue(t, db, o, 3)
	if _, err := db.Exec(`UPDATE `+o.Table()+` SET state = 'dead' WHERE id = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}
	c, err := o.Counts(ctx)
	if err != nil || c.Pending != 2 || c.Dead != 1 || c.OldestPending.IsZero() {
		t.Errorf("counts %+v, %v", c, err)
	}
	if err := o.Delete(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Get(ctx, ids[0]); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("Get after Delete = %v", err)
	}
	if err := o.Delete(ctx, ids[0]); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("Delete twice = %v, want ErrNotFound", err)
	}
}

// An explicit job id (producer.WithID) names one job: enqueued again while its row is still in
// the outbox (pending or dead), it writes nothing, returns no error and leaves the caller's
// transaction usable — a unique violation would abort the business write with it. The first
// row is kept as it was.
func TestEnqueueTxSameIDTwiceKeepsTheTransaction(t *testing.T) {
	t.Parallel()
	for _, url := range []string{stdURL, fifoURL} {
		t.Run(url[strings.LastIndex(url, "/")+1:], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			p := newProducer(t, &countingSQS{}, url)
			o, db, _ := newOutbox(t, pgoutbox.Config{Producer: p})
			if _, err := db.Exec(`CREATE TABLE orders (id text PRIMARY KEY)`); err != nil {
				t.Fatal(err)
			}
			opts := func(id string) []producer.Option {
				o := []producer.Option{producer.WithID(id)}
				if strings.HasSuffix(url, ".fifo") {
					o = append(o, producer.WithGroupID("g"))
				}
				return o
			}
			var first producer.Message
			inTx(t, db, func(tx *sql.Tx) error {
				var err error
				first, err = o.EnqueueTx(ctx, tx, orderArgs{Order: "first"}, opts("confirm-1")...)
				return err
			})
			// Again, beside a business write and a new job, twice in one batch too.
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if _, err := tx.ExecContext(ctx, `INSERT INTO orders VALUES ('order-2')`); err != nil {
				t.Fatal(err)
			}
			m, err := o.EnqueueTx(ctx, tx, orderArgs{Order: "again"}, opts("confirm-1")...)
			if err != nil || m.ID != "confirm-1" {
				t.Fatalf("EnqueueTx of a pending id = %+v, %v; want no error", m, err)
			}
			if _, err := o.EnqueueBatchTx(ctx, tx, []producer.Request{
				{Args: orderArgs{Order: "again"}, Options: opts("confirm-1")},
				{Args: orderArgs{Order: "new"}, Options: opts("confirm-2")},
				{Args: orderArgs{Order: "new again"}, Options: opts("confirm-2")},
			}); err != nil {
				t.Fatalf("EnqueueBatchTx with pending and repeated ids: %v", err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatalf("the business transaction after a repeated id: %v", err)
			}
			var orders int
			if err := db.QueryRow(`SELECT count(*) FROM orders`).Scan(&orders); err != nil || orders != 1 {
				t.Errorf("orders: %d, %v; want the business write committed", orders, err)
			}
			if n := rowCount(t, db, o); n != 2 {
				t.Errorf("%d rows, want 2 (confirm-1 once, confirm-2 once)", n)
			}
			if e, err := o.Get(ctx, "confirm-1"); err != nil || e.Message.Body != first.Body {
				t.Errorf("confirm-1 = %+v, %v; want the first enqueue's row, unchanged", e, err)
			}
			if e, err := o.Get(ctx, "confirm-2"); err != nil || !strings.Contains(e.Message.Body, `"new"`) {
				t.Errorf("confirm-2 = %+v, %v; want the batch's first", e, err)
			}
			// A dead row of that id stays dead: the job is known (listed, retryable by hand).
			if _, err := db.Exec(`UPDATE ` + o.Table() + ` SET state = 'dead' WHERE id = 'confirm-1'`); err != nil {
				t.Fatal(err)
			}
			inTx(t, db, func(tx *sql.Tx) error {
				_, err := o.EnqueueTx(ctx, tx, orderArgs{Order: "after death"}, opts("confirm-1")...)
				return err
			})
			if e, err := o.Get(ctx, "confirm-1"); err != nil || e.State != outbox.StateDead || e.Message.Body != first.Body {
				t.Errorf("dead confirm-1 after a new EnqueueTx = %+v, %v; want it dead and unchanged", e, err)
			}
		})
	}
}
