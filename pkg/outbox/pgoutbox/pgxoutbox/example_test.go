package pgxoutbox_test

import (
	"context"
	"log"
	"os"
	"os/signal"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/pgoutbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/pgoutbox/pgxoutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// ShipOrder is the job of these examples.
type ShipOrder struct {
	Order string `json:"order"`
}

// Kind implements jobs.Args.
func (ShipOrder) Kind() string { return "order.ship" }

// The relay of a service's container: woken by the NOTIFY that EnqueueTx sends at each commit,
// polling as the fallback, until SIGINT; the pass in progress then finishes its write-back. It
// needs a PostgreSQL server, so it is compiled here, not run (pgoutbox's tests run it against a
// real server).
func ExampleRunRelay() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	dsn := os.Getenv("DATABASE_URL")
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	prod, err := producer.New(producer.Config{SQS: sqs.NewFromConfig(cfg), QueueURL: os.Getenv("QUEUE_URL")})
	if err != nil {
		log.Fatal(err)
	}
	db, err := pgxoutbox.OpenDB(dsn) // a *sql.DB on pgx's stdlib driver
	if err != nil {
		log.Fatal(err)
	}
	ob, err := pgoutbox.New(pgoutbox.Config{DB: db})
	if err != nil {
		log.Fatal(err)
	}
	err = pgxoutbox.RunRelay(ctx, pgxoutbox.RunConfig{
		Outbox:     ob,
		ConnString: dsn,
		Relay:      outbox.RelayConfig{Producers: []*producer.Producer{prod}},
		PollOnly:   false, // true behind PgBouncer in transaction mode, where LISTEN does not work
	})
	if err != nil {
		log.Fatal(err)
	}
}

// A job written in a pgx transaction: both commit, or neither.
func ExampleTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	var ob *pgoutbox.Outbox // pgoutbox.New(pgoutbox.Config{Producer: prod, DB: db})

	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `UPDATE orders SET state = 'packed' WHERE id = $1`, "1001"); err != nil {
		log.Fatal(err)
	}
	if _, err := ob.EnqueueTx(ctx, pgxoutbox.Tx(tx), ShipOrder{Order: "1001"}); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
}
