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
// schemas inline and in a layer, and public (AuthType NONE, its cdk-nag finding suppressed)
// without the job table; the transactional outbox, on a standard and on a FIFO stack without
// scheduling; and the payload bucket (customer key, a worker that enqueues).
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
}

// Synth synthesizes every shape, each as its own stack shape-<name> holding one JobQueue and a
// producer role given GrantEnqueue (and GrantInvokeApi with the API), into the cloud assembly
// directory dir (dir/shape-<name>.template.json). The app carries the feature flags of the
// cdk.json at cdkJSON; asset is the worker zip, and the API's is beside it (testasset.ApiZip),
// as is the schema directory Synth writes for the API shapes. It returns the template paths.
func Synth(dir, cdkJSON, asset string) ([]string, error) {
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
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(dir), Context: &flags})
	var paths []string
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
		paths = append(paths, filepath.Join(dir, "shape-"+s.Name+".template.json"))
	}
	app.Synth(nil)
	return paths, nil
}
