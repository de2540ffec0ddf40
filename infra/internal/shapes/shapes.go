// Package shapes lists the stack shapes `make infra-test` synthesizes and checks with cfn-lint
// (make infra-lint): one per option that changes the template's kind of content, so that a
// template mistake in any of them fails the build.
package shapes

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/sqsworker/sqsworker/infra/internal/testasset"
	"github.com/sqsworker/sqsworker/infra/jobqueue"
)

// Shape is one stack configuration. Props builds the props inside the shape's stack (for
// resources the props refer to, such as a key); Configure, when set, runs on the built
// JobQueue (for what needs its resources, such as a cdk-nag suppression).
type Shape struct {
	Name      string
	Props     func(stack awscdk.Stack) jobqueue.Props
	Configure func(jq *jobqueue.JobQueue)
}

func props(p jobqueue.Props) func(awscdk.Stack) jobqueue.Props {
	return func(awscdk.Stack) jobqueue.Props { return p }
}

// All is every shape: the default stack, FIFO, provisioned pollers, a customer key of the
// stack's own (with WorkerEnqueues and deletion protection) and an imported one (with
// WorkerStatusQueries), a large batch with a batching window, reserved concurrency with the
// worker's tuning variables, recursion detection off without scheduling, the longest names
// Validate accepts, with and without scheduling, the HTTP producer: IAM-authenticated with
// schemas inline and in a layer, with deduplication rules (a debounce among them), and public
// (AuthType NONE, its cdk-nag finding suppressed) without the job table; the transactional outbox, on a standard and on a FIFO stack without
// scheduling; the payload bucket (customer key, a worker that enqueues); the PostgreSQL outbox
// relay in a VPC, reading an imported secret under a customer key; the longest Name each part
// allows, with deletion protection; three named queues beside the default one (routes, the API
// and the outbox sending to them), and the longest Name a named queue allows; and both
// outboxes in one stack. shapes_test.go and
// deploy_test.go check rules every shape must keep.
var All = []Shape{
	{"default", props(jobqueue.Props{Name: "sqsworker"}), nil},
	{"fifo", props(jobqueue.Props{Name: "fifo", FIFO: true}), nil},
	{"provisioned", props(jobqueue.Props{Name: "hot", MinPollers: 5, MaxPollers: 50, BatchSize: 100, BatchingWindow: time.Second}), nil},
	{"customer-key", func(stack awscdk.Stack) jobqueue.Props {
		key := awskms.NewKey(stack, jsii.String("JobsKey"), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
		return jobqueue.Props{Name: "enc", EncryptionKey: key, WorkerEnqueues: true, DeletionProtection: true, AlarmEmail: "ops@example.com"}
	}, nil},
	{"imported-key", func(stack awscdk.Stack) jobqueue.Props {
		key := awskms.Key_FromKeyArn(stack, jsii.String("JobsKey"), jsii.String("arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"))
		return jobqueue.Props{Name: "imported", EncryptionKey: key, WorkerStatusQueries: true}
	}, nil},
	{"batching-window", props(jobqueue.Props{Name: "batch", BatchSize: 1000, BatchingWindow: 20 * time.Second, Timeout: time.Minute}), nil},
	{"reserved-concurrency", props(jobqueue.Props{Name: "reserved", MaxConcurrency: 20, ReservedConcurrency: 25,
		LogLevel: "debug", Concurrency: 20, DeadlineMargin: 3 * time.Second, MemoryMB: 1024}), nil},
	{"recursion-allowed", props(jobqueue.Props{Name: "loop", RecursiveLoop: awslambda.RecursiveLoop_ALLOW, DisableScheduling: true, WorkerEnqueues: true}), nil},
	{"long-names", props(jobqueue.Props{Name: strings.Repeat("n", 59), FIFO: true, WorkerEnqueues: true}), nil},
	{"long-names-no-scheduling", props(jobqueue.Props{Name: strings.Repeat("m", 66), FIFO: true, DisableScheduling: true}), nil},
	{"api", props(jobqueue.Props{Name: "api", Api: &jobqueue.ApiProps{
		Kinds: []jobqueue.ApiKind{
			{Kind: "email.send", Schema: `{"type":"object","required":["to"]}`},
			{Kind: "report.build", MaxArgsBytes: 256 << 10, SchemaFile: "report.json"},
			{Kind: "metrics.rollup"},
		},
		MaxArgsBytes: 16 << 10, ShowDetails: true, ReservedConcurrency: 25, LogLevel: "debug",
	}}), nil},
	// The API with deduplication rules (ApiKind.Dedup): a debounce (the scheduler's environment
	// and grants), unique, throttle, and a kind with none.
	{"api-dedup", props(jobqueue.Props{Name: "dedup", Api: &jobqueue.ApiProps{
		Kinds: []jobqueue.ApiKind{
			{Kind: "report.export", Dedup: []string{jobqueue.ApiRuleUnique, jobqueue.ApiRuleDebounce}},
			{Kind: "search.reindex", Dedup: []string{jobqueue.ApiRuleDebounce, jobqueue.ApiRuleThrottle}},
			{Kind: "email.digest", Dedup: []string{jobqueue.ApiRuleThrottle}},
			{Kind: "email.send"},
		},
	}}), nil},
	{"outbox", props(jobqueue.Props{Name: "ob", Outbox: &jobqueue.OutboxProps{}, LogLevel: "debug"}), nil},
	{"outbox-fifo", props(jobqueue.Props{Name: "obf", FIFO: true, DisableScheduling: true, DeletionProtection: true,
		Outbox: &jobqueue.OutboxProps{BatchSize: 500, RetryAttempts: 10, MaxAttempts: 20, SweepAfter: 2 * time.Minute, Timeout: time.Minute}}), nil},
	{"api-public", props(jobqueue.Props{Name: "pub", DisableScheduling: true, Api: &jobqueue.ApiProps{
		Kinds: []jobqueue.ApiKind{{Kind: "email.send"}}, AuthType: awslambda.FunctionUrlAuthType_NONE, DisableStatus: true,
	}}), func(jq *jobqueue.JobQueue) {
		cdknag.NagSuppressions_AddResourceSuppressions(jq.Api.Url, &[]*cdknag.NagPackSuppression{{
			Id:     jsii.String(jobqueue.ApiPublicUrlRule),
			Reason: jsii.String("A linted shape: the public URL is what this shape checks."),
		}}, jsii.Bool(true))
	}},
	{"payload-bucket", func(stack awscdk.Stack) jobqueue.Props {
		key := awskms.NewKey(stack, jsii.String("JobsKey"), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
		return jobqueue.Props{Name: "big", PayloadBucket: true, WorkerEnqueues: true, EncryptionKey: key}
	}, nil},
	{"postgres-outbox", postgresOutboxShape, nil}, // pgoutbox_shape.go
	// The longest Name each part allows (jobqueue.MaxNameLength), with deletion protection, so
	// that cfn-lint checks every derived name at its limit and the retention tests see each part
	// protected.
	{"long-names-outbox", props(longest('o', jobqueue.Props{Outbox: &jobqueue.OutboxProps{}, WorkerEnqueues: true, DeletionProtection: true})), nil},
	{"long-names-postgres-outbox", props(longest('p', jobqueue.Props{DeletionProtection: true,
		PostgresOutbox: &jobqueue.PostgresOutboxProps{DSN: "postgres://relay@db.internal:5432/app"}})), nil},
	{"long-names-api", props(longest('a', jobqueue.Props{FIFO: true, DeletionProtection: true,
		Api: &jobqueue.ApiProps{Kinds: []jobqueue.ApiKind{{Kind: "email.send"}}}})), nil},
	{"long-names-payload-bucket", props(longest('b', jobqueue.Props{PayloadBucket: true, DeletionProtection: true, WorkerEnqueues: true})), nil},
	// Several queues (namedqueues.go): a standard, a large-batch and a FIFO queue beside the
	// default one, routes, the API and the outbox sending to them, a worker that enqueues; and
	// the longest Name a 20-character FIFO queue allows.
	{"three-queues", props(jobqueue.Props{Name: "multi", MaxConcurrency: 10, ReservedConcurrency: 50, WorkerEnqueues: true,
		Queues: []jobqueue.QueueProps{
			{Name: "critical", MaxConcurrency: 20, MaxAttempts: 3, OldestMessageAlarm: time.Minute},
			{Name: "bulk", MaxConcurrency: 5, BatchSize: 100, BatchingWindow: 5 * time.Second, VisibilityTimeout: time.Hour},
			{Name: "orders", FIFO: true, MaxConcurrency: 10},
		},
		Routes: map[string]string{"password.reset": "critical", "import.run": "bulk", "order.ship": "orders"},
		Api:    &jobqueue.ApiProps{Kinds: []jobqueue.ApiKind{{Kind: "password.reset"}, {Kind: "import.run"}}},
		Outbox: &jobqueue.OutboxProps{}}), nil},
	{"long-names-queues", props(longest('q', jobqueue.Props{FIFO: true, Queues: []jobqueue.QueueProps{{Name: strings.Repeat("q", 20), FIFO: true}}})), nil},
	// Both outboxes in one stack, beside the payload bucket: their resources and alarms must not
	// collide.
	{"both-outboxes", props(jobqueue.Props{Name: "both", Outbox: &jobqueue.OutboxProps{}, PayloadBucket: true,
		PostgresOutbox: &jobqueue.PostgresOutboxProps{DSN: "postgres://relay@db.internal:5432/app"}}), nil},
	// Completion events on a bus of the stack, beside the DynamoDB outbox (two stream mappings
	// and their failure queues and alarms must not collide); and on the default bus at the
	// longest name.
	{"events", props(jobqueue.Props{Name: "ev", Events: &jobqueue.EventsProps{CreateBus: true}, Outbox: &jobqueue.OutboxProps{}, LogLevel: "debug"}), nil},
	{"long-names-events", props(longest('e', jobqueue.Props{Events: &jobqueue.EventsProps{}, DeletionProtection: true})), nil},
}

// longest is p with the longest Name its settings allow, made of c.
func longest(c byte, p jobqueue.Props) jobqueue.Props {
	p.Name = strings.Repeat(string(c), jobqueue.MaxNameLength(p))
	return p
}

// Result is one synthesized shape.
type Result struct {
	Shape Shape
	// Path is the template's file.
	Path string
	// Stack and JobQueue are the shape's stack and construct (JobQueue.Props: with defaults).
	Stack    awscdk.Stack
	JobQueue *jobqueue.JobQueue
}

// Synth synthesizes every shape, each as its own stack shape-<name> holding one JobQueue and a
// producer role given GrantEnqueue (and GrantInvokeApi with the API), into the cloud assembly
// directory dir (dir/shape-<name>.template.json). The app carries the feature flags of the
// cdk.json at cdkJSON, and writes each resource's construct path in its metadata
// (aws:cdk:path), as `cdk synth` does; asset is the worker zip, and the API's is beside it
// (testasset.ApiZip), as is the schema directory Synth writes for the API shapes. configure,
// when not nil, runs on each JobQueue before the app is synthesized (the tests add cdk-nag
// there). It returns the shapes in the order of All.
func Synth(dir, cdkJSON, asset string, configure func(*jobqueue.JobQueue)) ([]Result, error) {
	b, err := os.ReadFile(cdkJSON)
	if err != nil {
		return nil, err
	}
	var cfg struct {
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", cdkJSON, err)
	}
	flags := map[string]any{}
	for k, v := range cfg.Context {
		if strings.HasPrefix(k, "@aws-cdk") {
			flags[k] = v
		}
	}
	schemas := filepath.Join(filepath.Dir(asset), "api-schemas")
	if err := os.MkdirAll(schemas, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(schemas, "report.json"), []byte(`{"type":"object","required":["name"]}`), 0o644); err != nil {
		return nil, err
	}
	flags["aws:cdk:enable-path-metadata"] = true
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(dir), Context: &flags})
	var results []Result
	for _, s := range All {
		stack := awscdk.NewStack(app, jsii.String("shape-"+s.Name), nil)
		p := s.Props(stack)
		p.WorkerAsset = asset
		if p.Outbox != nil {
			o := *p.Outbox
			o.RelayAsset = asset // a stub bootstrap, like the worker's
			p.Outbox = &o
		}
		if p.Api != nil {
			a := *p.Api
			a.Asset = testasset.ApiZip(asset)
			for _, k := range a.Kinds {
				if k.SchemaFile != "" {
					a.SchemaDir = schemas
				}
			}
			p.Api = &a
		}
		if p.PostgresOutbox != nil {
			o := *p.PostgresOutbox
			o.Asset = asset
			p.PostgresOutbox = &o
		}
		if p.Events != nil {
			e := *p.Events
			e.Asset = asset
			p.Events = &e
		}
		jq, err := jobqueue.New(stack, "Jobs", p)
		if err != nil {
			return nil, fmt.Errorf("shape %s: %w", s.Name, err)
		}
		producer := awsiam.NewRole(stack, jsii.String("Producer"), &awsiam.RoleProps{
			AssumedBy: awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		})
		jq.GrantEnqueue(producer)
		jq.GrantOutboxWrite(producer)
		if jq.Api != nil {
			jq.GrantInvokeApi(producer)
		}
		if s.Configure != nil {
			s.Configure(jq)
		}
		if configure != nil {
			configure(jq)
		}
		results = append(results, Result{Shape: s, Path: filepath.Join(dir, "shape-"+s.Name+".template.json"), Stack: stack, JobQueue: jq})
	}
	app.Synth(nil)
	return results, nil
}
