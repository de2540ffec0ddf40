package flow_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/flow"
	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// Example limits a kind to one job at a time per tenant and pauses another, on the embedded
// emulator's job table. In a worker, the middleware goes first in worker.Config.Middleware,
// before the idempotency middleware; here it is called directly.
func Example() {
	ctx := context.Background()
	backend, err := awslocal.Shared()
	if err != nil {
		log.Fatal(err)
	}
	ddb := dynamodb.NewFromConfig(backend.Config, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	table, err := awslocal.ProvisionTable(ctx, ddb, awslocal.UniqueName("example"))
	if err != nil {
		log.Fatal(err)
	}
	tbl, err := flow.NewTable(flow.TableConfig{Client: ddb, Table: table})
	if err != nil {
		log.Fatal(err)
	}
	fl, err := flow.NewMiddleware(flow.Config{
		Store:       tbl,
		Concurrency: []flow.Concurrency{{Kind: "webhook.deliver", Limit: 1, Key: flow.TenantKey}},
		Rates:       []flow.Rate{{Kind: "email.send", Limit: 10, Period: time.Second}},
		MaxHold:     -1, // defer at once, for the example
	})
	if err != nil {
		log.Fatal(err)
	}
	job := func(id, kind, tenant string) *jobs.Info {
		return &jobs.Info{ID: id, Kind: kind, Key: id, Meta: map[string]string{jobs.MetaTenant: tenant}, RawArgs: []byte(`{}`)}
	}

	// Pause a kind: its jobs are deferred until it is resumed (each worker sees the pause within
	// PauseCheck, 5 s by default).
	if err := tbl.PauseKind(ctx, flow.Pause{Kind: "report.build", By: "ops", Note: "warehouse maintenance"}); err != nil {
		log.Fatal(err)
	}

	// Tenant acme's first webhook runs; while it does, acme's second is deferred (no attempt
	// spent) and another tenant's runs.
	_ = fl.Work(ctx, job("w1", "webhook.deliver", "acme"), func(ctx context.Context) error {
		err := fl.Work(ctx, job("w2", "webhook.deliver", "acme"), func(context.Context) error { return nil })
		fmt.Println("acme's second webhook deferred:", errors.Is(err, flow.ErrLimited))
		err = fl.Work(ctx, job("w3", "webhook.deliver", "globex"), func(context.Context) error { return nil })
		fmt.Println("globex's webhook ran:", err == nil)
		return nil
	})

	err = fl.Work(ctx, job("r1", "report.build", ""), func(context.Context) error { return nil })
	fmt.Println("report deferred while paused:", errors.Is(err, flow.ErrPaused))
	pauses, _ := tbl.Pauses(ctx)
	for _, p := range pauses.Kinds {
		fmt.Printf("paused: %s by %s (%s)\n", p.Kind, p.By, p.Note)
	}
	// Output:
	// acme's second webhook deferred: true
	// globex's webhook ran: true
	// report deferred while paused: true
	// paused: report.build by ops (warehouse maintenance)
}
