package pgoutbox_test

import (
	"context"
	"database/sql"
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

type ConfirmOrder struct {
	Order string `json:"order"`
}

func (ConfirmOrder) Kind() string { return "order.confirm" }

// EnqueueTx writes the job in the same database/sql transaction as the business data: both
// commit, or neither.
func ExampleOutbox_EnqueueTx() {
	ctx := context.Background()
	cfg, _ := config.LoadDefaultConfig(ctx)
	prod, _ := producer.New(producer.Config{SQS: sqs.NewFromConfig(cfg), QueueURL: os.Getenv("QUEUE_URL")})
	db, _ := sql.Open("pgx", os.Getenv("DATABASE_URL")) // any database/sql driver
	ob, _ := pgoutbox.New(pgoutbox.Config{Producer: prod, DB: db})
	if err := ob.Migrate(ctx); err != nil { // once, at deploy; or apply schema.sql
		log.Fatal(err)
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE orders SET state = 'paid' WHERE id = $1`, "42"); err != nil {
		log.Fatal(err)
	}
	msg, err := ob.EnqueueTx(ctx, tx, ConfirmOrder{Order: "42"}, producer.WithKey("confirm-42"))
	if err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
	log.Printf("job %s is in the outbox; a relay sends it", msg.ID)
}

// With pgx, wrap the transaction with pgxoutbox.Tx.
func ExampleOutbox_EnqueueTx_pgx() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	var ob *pgoutbox.Outbox // pgoutbox.New(…)

	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := ob.EnqueueTx(ctx, pgxoutbox.Tx(tx), ConfirmOrder{Order: "42"}); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
}

// A relay in a container: woken by NOTIFY at every commit, polling as a fallback; Ctrl-C lets
// the pass in progress finish.
func ExampleOutbox_relay() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	dsn := os.Getenv("DATABASE_URL")
	cfg, _ := config.LoadDefaultConfig(ctx)
	prod, _ := producer.New(producer.Config{SQS: sqs.NewFromConfig(cfg), QueueURL: os.Getenv("QUEUE_URL")})
	db, _ := pgxoutbox.OpenDB(dsn)
	ob, _ := pgoutbox.New(pgoutbox.Config{DB: db})
	err := pgxoutbox.RunRelay(ctx, pgxoutbox.RunConfig{
		Outbox:     ob,
		ConnString: dsn,
		Relay:      outbox.RelayConfig{Producers: []*producer.Producer{prod}},
		PollOnly:   false, // true behind PgBouncer in transaction mode
	})
	if err != nil {
		log.Fatal(err)
	}
}
