package queues_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/queues"
)

type ResetPassword struct {
	User string `json:"user"`
}

func (ResetPassword) Kind() string { return "password.reset" }

type ImportCSV struct {
	File string `json:"file"`
}

func (ImportCSV) Kind() string { return "import.csv" }

// A stack of three queues; kinds routed to them where they are registered; a job's own choice
// overriding its kind's route; and the errors of a queue the stack does not have.
func ExampleSet_Route() {
	const base = "https://sqs.eu-west-1.amazonaws.com/123456789012/shop-jobs"
	set, err := queues.New(
		queues.Queue{Name: "critical", URL: base + "-critical", Weight: 6},
		queues.Queue{Name: "default", URL: base, Weight: 3},
		queues.Queue{Name: "bulk", URL: base + "-bulk"},
	)
	if err != nil {
		panic(err)
	}
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[ResetPassword](func(context.Context, *jobs.Job[ResetPassword]) error { return nil }),
		jobs.WithQueue("critical"))
	jobs.MustRegister(reg, jobs.WorkFunc[ImportCSV](func(context.Context, *jobs.Job[ImportCSV]) error { return nil }),
		jobs.WithQueue("bulk"))

	for _, c := range []struct{ kind, override string }{
		{"password.reset", ""}, {"import.csv", ""}, {"email.send", ""}, {"import.csv", "critical"},
	} {
		q, _ := set.Route(reg, c.kind, c.override)
		fmt.Printf("%-15s %-9q → %s (%s, weight %d)\n", c.kind, c.override, q.Name, q.SQSName(), q.Weight)
	}
	_, err = set.Route(reg, "import.csv", "urgent")
	fmt.Println(errors.Is(err, queues.ErrUnknownQueue), err)
	fmt.Println(set.CheckRoutes(queues.Routes{"report.build": "reports"}))
	// Output:
	// password.reset  ""        → critical (shop-jobs-critical, weight 6)
	// import.csv      ""        → bulk (shop-jobs-bulk, weight 1)
	// email.send      ""        → default (shop-jobs, weight 3)
	// import.csv      "critical" → critical (shop-jobs-critical, weight 6)
	// true kind import.csv: queues: no such queue in the stack: "urgent" (the stack's queues: critical, default, bulk)
	// kind report.build is routed to queue "reports": queues: no such queue in the stack: "reports" (the stack's queues: critical, default, bulk)
}

// The functions read a stack's queues from SQSWORKER_QUEUES and its routes from
// SQSWORKER_ROUTES.
func ExampleParse() {
	set, err := queues.Parse("default=https://sqs.eu-west-1.amazonaws.com/123456789012/shop-jobs," +
		"bulk=https://sqs.eu-west-1.amazonaws.com/123456789012/shop-jobs-bulk")
	if err != nil {
		panic(err)
	}
	routes, err := queues.ParseRoutes("import.csv=bulk")
	if err != nil {
		panic(err)
	}
	q, _ := set.Route(routes, "import.csv", "")
	fmt.Println(set.Names(), set.Default().Name, q.Name, q.ARN)
	// Output:
	// [default bulk] default bulk arn:aws:sqs:eu-west-1:123456789012:shop-jobs-bulk
}
