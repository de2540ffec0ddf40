package jobqueue

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"

	"github.com/sqsworker/sqsworker/infra/internal/testasset"
)

// The tests share one Node process (jsii); they run serially (no t.Parallel) and each template is
// synthesized once.

var assetPath string

func TestMain(m *testing.M) { testasset.Main(m, &assetPath) }

// newTestApp is an App with the feature flags the app sets in ../cdk.json (the context keys that
// name a flag, "@aws-cdk/…"), so that the tests check what `make synth` deploys.
func newTestApp(t *testing.T) awscdk.App {
	t.Helper()
	b, err := os.ReadFile("../cdk.json")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	flags := map[string]any{}
	for k, v := range cfg.Context {
		if strings.HasPrefix(k, "@aws-cdk") {
			flags[k] = v
		}
	}
	return awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir()), Context: &flags})
}

type synth struct {
	once sync.Once
	tmpl assertions.Template
	jq   *JobQueue
}

var standard, fifo, provisioned, keyed, enqueuing, enqueuingNoSchedule synth

func (s *synth) get(t *testing.T, props Props) (assertions.Template, *JobQueue) {
	t.Helper()
	return s.getWith(t, func(awscdk.Stack) Props { return props })
}

// getWith is get with props built in the stack (for resources the props refer to).
func (s *synth) getWith(t *testing.T, mk func(awscdk.Stack) Props) (assertions.Template, *JobQueue) {
	t.Helper()
	s.once.Do(func() {
		app := newTestApp(t)
		stack := awscdk.NewStack(app, jsii.String("Test"), nil)
		props := mk(stack)
		props.WorkerAsset = assetPath
		jq, err := New(stack, "Jobs", props)
		if err != nil {
			panic(err)
		}
		producer := awsiam.NewRole(stack, jsii.String("Producer"), &awsiam.RoleProps{
			AssumedBy: awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		})
		jq.GrantEnqueue(producer)
		s.jq = jq
		s.tmpl = assertions.Template_FromStack(stack, nil)
	})
	return s.tmpl, s.jq
}

func std(t *testing.T) assertions.Template {
	tmpl, _ := standard.get(t, Props{Name: "demo", MaxConcurrency: 20, ReservedConcurrency: 25, LogLevel: "debug"})
	return tmpl
}

// check turns an assertions panic (a jsii error) into a test failure.
func check(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%v", r)
		}
	}()
	f()
}

func TestResourceCounts(t *testing.T) {
	tmpl := std(t)
	for typ, n := range map[string]float64{
		"AWS::SQS::Queue": 3, "AWS::SQS::QueuePolicy": 3, "AWS::DynamoDB::Table": 1,
		"AWS::Lambda::Function": 1, "AWS::Lambda::EventSourceMapping": 1, "AWS::Logs::LogGroup": 1,
		"AWS::Scheduler::ScheduleGroup": 1, "AWS::CloudWatch::Alarm": 6, "AWS::SNS::Topic": 1,
		"AWS::CloudWatch::Dashboard": 1,
	} {
		check(t, func() { tmpl.ResourceCountIs(jsii.String(typ), jsii.Number(n)) })
	}
}

func TestQueues(t *testing.T) {
	tmpl := std(t)
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), map[string]any{
			"QueueName":            "demo-jobs",
			"SqsManagedSseEnabled": true,
			"VisibilityTimeout":    180,
			"MaximumMessageSize":   1048576,
			"RedrivePolicy": map[string]any{
				"maxReceiveCount":     15,
				"deadLetterTargetArn": assertions.Match_AnyValue(),
			},
		})
	})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), map[string]any{
			"QueueName":              "demo-jobs-dlq",
			"SqsManagedSseEnabled":   true,
			"MessageRetentionPeriod": 1209600,
			"MaximumMessageSize":     1048576,
		})
	})
	// TLS only: each queue policy denies requests without aws:SecureTransport.
	policies := *tmpl.FindResources(jsii.String("AWS::SQS::QueuePolicy"), nil)
	for id, p := range policies {
		if b, _ := json.Marshal(p); !strings.Contains(string(b), `"aws:SecureTransport":"false"`) {
			t.Errorf("queue policy %s has no TLS-only deny: %s", id, b)
		}
	}
}

func TestTable(t *testing.T) {
	tmpl := std(t)
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{
			"TableName":                        "demo-jobs",
			"BillingMode":                      "PAY_PER_REQUEST",
			"KeySchema":                        []any{map[string]any{"AttributeName": "pk", "KeyType": "HASH"}},
			"TimeToLiveSpecification":          map[string]any{"AttributeName": "exp", "Enabled": true},
			"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": true},
			"DeletionProtectionEnabled":        false,
			"AttributeDefinitions": assertions.Match_ArrayWith(&[]any{
				map[string]any{"AttributeName": "pk", "AttributeType": "S"},
				map[string]any{"AttributeName": "gsi1pk", "AttributeType": "S"},
				map[string]any{"AttributeName": "gsi1sk", "AttributeType": "N"},
				map[string]any{"AttributeName": "job_id", "AttributeType": "S"},
			}),
			"GlobalSecondaryIndexes": []any{
				map[string]any{
					"IndexName": "by_status",
					"KeySchema": []any{
						map[string]any{"AttributeName": "gsi1pk", "KeyType": "HASH"},
						map[string]any{"AttributeName": "gsi1sk", "KeyType": "RANGE"},
					},
					"Projection": map[string]any{"ProjectionType": "INCLUDE", "NonKeyAttributes": ByStatusProjection},
				},
				map[string]any{
					"IndexName":  "by_id",
					"KeySchema":  []any{map[string]any{"AttributeName": "job_id", "KeyType": "HASH"}},
					"Projection": map[string]any{"ProjectionType": "KEYS_ONLY"},
				},
			},
		})
	})
}

func TestWorkerFunction(t *testing.T) {
	tmpl := std(t)
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
			"Runtime":                      "provided.al2023",
			"Architectures":                []any{"arm64"},
			"Handler":                      "bootstrap",
			"MemorySize":                   512,
			"Timeout":                      30,
			"ReservedConcurrentExecutions": 25,
			"Environment": map[string]any{"Variables": map[string]any{
				EnvQueueURL:      map[string]any{"Ref": assertions.Match_AnyValue()},
				EnvDLQURL:        map[string]any{"Ref": assertions.Match_AnyValue()},
				EnvTable:         map[string]any{"Ref": assertions.Match_AnyValue()},
				EnvLogLevel:      "debug",
				EnvScheduleGroup: "demo-jobs",
			}},
		})
	})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), map[string]any{
			"BatchSize":             10,
			"FunctionResponseTypes": []any{"ReportBatchItemFailures"},
			"ScalingConfig":         map[string]any{"MaximumConcurrency": 20},
		})
	})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Logs::LogGroup"), map[string]any{"RetentionInDays": 30})
	})
}

// TestIAM checks the policies name exact resources: no bare "*". TestWorkerGrants and the other
// grants tests check each role's actions resource by resource.
func TestIAM(t *testing.T) {
	tmpl := std(t)
	policies := *tmpl.FindResources(jsii.String("AWS::IAM::Policy"), nil)
	if len(policies) == 0 {
		t.Fatal("no IAM policies")
	}
	for id, p := range policies {
		doc := (*p)["Properties"].(map[string]any)["PolicyDocument"].(map[string]any)
		for _, s := range doc["Statement"].([]any) {
			st := s.(map[string]any)
			for _, r := range list(st["Resource"]) {
				if r == "*" {
					t.Errorf("policy %s: statement %v has Resource *", id, st)
				}
			}
		}
	}
}

func TestScheduling(t *testing.T) {
	tmpl := std(t)
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Scheduler::ScheduleGroup"), map[string]any{"Name": "demo-jobs"})
	})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), map[string]any{
			"QueueName": "demo-jobs-scheduler-dlq", "MessageRetentionPeriod": 1209600, "SqsManagedSseEnabled": true,
		})
	})
}

// TestWorkerEnqueues checks the environment a schedule.Config needs (TestWorkerGrantsEnqueuing
// checks the grants).
func TestWorkerEnqueues(t *testing.T) {
	tmpl, _ := enqueuing.get(t, Props{Name: "chain", WorkerEnqueues: true})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
			"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(&map[string]any{
				EnvQueueARN:         map[string]any{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^JobsQueue")), "Arn"}},
				EnvSchedulerRoleARN: map[string]any{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^JobsSchedulerRole")), "Arn"}},
				EnvSchedulerDLQARN:  map[string]any{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^JobsSchedulerDLQ")), "Arn"}},
			})},
		})
	})

	// Without scheduling: the queue's ARN only.
	tmpl, _ = enqueuingNoSchedule.get(t, Props{Name: "chain2", WorkerEnqueues: true, DisableScheduling: true})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
			"Environment": map[string]any{"Variables": map[string]any{
				EnvSchedulerRoleARN: assertions.Match_Absent(),
				EnvQueueARN:         assertions.Match_AnyValue(),
			}},
		})
	})
}

func TestDashboard(t *testing.T) {
	tmpl := std(t)
	b, _ := json.Marshal(*tmpl.FindResources(jsii.String("AWS::CloudWatch::Dashboard"), nil))
	for _, want := range []string{`MetricName=\\\"JobsSucceeded\\\" Queue=\\\"demo-jobs\\\"`, "ApproximateNumberOfMessagesVisible", "ApproximateAgeOfOldestMessage", "p99"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("dashboard lacks %s: %s", want, b)
		}
	}
}

func TestOutputs(t *testing.T) {
	tmpl := std(t)
	outs := *tmpl.FindOutputs(jsii.String("*"), nil)
	var names []string
	for id := range outs {
		names = append(names, id)
	}
	// Fixed keys, without CDK's hash: the CLI and producers look them up by name.
	slices.Sort(names)
	want := []string{"JobsAlarmTopicArn", "JobsDLQArn", "JobsDLQUrl", "JobsQueueArn", "JobsQueueUrl", "JobsScheduleGroupName",
		"JobsSchedulerDLQArn", "JobsSchedulerRoleArn", "JobsTableName"}
	if !slices.Equal(names, want) {
		t.Errorf("outputs %v, want %v", names, want)
	}
}

func TestFIFO(t *testing.T) {
	tmpl, _ := fifo.get(t, Props{Name: "demo", FIFO: true, DisableScheduling: true, DeletionProtection: true})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), map[string]any{
			"QueueName": "demo-jobs.fifo", "FifoQueue": true, "ContentBasedDeduplication": true,
			"RedrivePolicy": assertions.Match_ObjectLike(&map[string]any{"maxReceiveCount": 15}),
		})
	})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), map[string]any{"QueueName": "demo-jobs-dlq.fifo", "FifoQueue": true})
	})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), map[string]any{
			"MaximumBatchingWindowInSeconds": assertions.Match_Absent(),
			"FunctionResponseTypes":          []any{"ReportBatchItemFailures"},
		})
	})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{"DeletionProtectionEnabled": true})
	})
	check(t, func() { tmpl.ResourceCountIs(jsii.String("AWS::Scheduler::ScheduleGroup"), jsii.Number(0)) })
	check(t, func() { tmpl.ResourceCountIs(jsii.String("AWS::SQS::Queue"), jsii.Number(2)) })
}

func TestProvisionedMode(t *testing.T) {
	tmpl, _ := provisioned.get(t, Props{Name: "hot", MinPollers: 5, MaxPollers: 50, BatchSize: 100, BatchingWindow: time.Second})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), map[string]any{
			"BatchSize":                      100,
			"MaximumBatchingWindowInSeconds": 1,
			"ProvisionedPollerConfig":        map[string]any{"MinimumPollers": 5, "MaximumPollers": 50},
			"ScalingConfig":                  assertions.Match_Absent(),
		})
	})
}

// TestNewRefuses checks New fails with the rule's message, and on a missing asset tells to build.
func TestNewRefuses(t *testing.T) {
	app := newTestApp(t)
	stack := awscdk.NewStack(app, jsii.String("Bad"), nil)
	_, err := New(stack, "Jobs", Props{Name: "bad", Timeout: 30 * time.Second, VisibilityTimeout: 30 * time.Second, WorkerAsset: assetPath})
	if err == nil || !strings.Contains(err.Error(), "must be at least 6 × function Timeout") {
		t.Errorf("visibility: err = %v", err)
	}
	_, err = New(stack, "Jobs2", Props{Name: "bad", WorkerAsset: filepath.Join(t.TempDir(), "none.zip")})
	if err == nil || !strings.Contains(err.Error(), "run `make build`") {
		t.Errorf("missing asset: err = %v", err)
	}
	if n := len(*stack.Node().Children()); n != 0 {
		t.Errorf("New created %d constructs before failing", n)
	}
}

// TestCustomerKey checks the KMS option: both job queues use the key, the scheduler DLQ and the
// alarm topic keep their own encryption.
func TestCustomerKey(t *testing.T) {
	tmpl, jq := keyedShape(t)
	keyArn := map[string]any{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^JobsKey")), "Arn"}}
	for _, name := range []string{"enc-jobs", "enc-jobs-dlq"} {
		check(t, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), map[string]any{
				"QueueName":            name,
				"KmsMasterKeyId":       keyArn,
				"SqsManagedSseEnabled": assertions.Match_Absent(),
			})
		})
	}
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), map[string]any{
			"QueueName": "enc-jobs-scheduler-dlq", "SqsManagedSseEnabled": true, "KmsMasterKeyId": assertions.Match_Absent(),
		})
	})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::SNS::Topic"), map[string]any{"KmsMasterKeyId": assertions.Match_Absent()})
	})

	// TestCustomerKeyGrants checks what each role may do with the key.
	if jq.Props.EncryptionKey == nil {
		t.Error("Props.EncryptionKey lost by withDefaults")
	}
}

// TestSchedulerTrust: only EventBridge Scheduler acting for this account's schedule group of
// this stack may assume the scheduler role (aws:SourceArn is the group's ARN: AWS's most
// effective confused-deputy protection for Scheduler).
func TestSchedulerTrust(t *testing.T) {
	tmpl := std(t)
	for id, r := range *tmpl.FindResources(jsii.String("AWS::IAM::Role"), nil) {
		if !strings.HasPrefix(id, "JobsSchedulerRole") {
			continue
		}
		doc := (*r)["Properties"].(map[string]any)["AssumeRolePolicyDocument"].(map[string]any)
		sts := doc["Statement"].([]any)
		if len(sts) != 1 {
			t.Fatalf("trust statements %v", sts)
		}
		st := sts[0].(map[string]any)
		cond, _ := st["Condition"].(map[string]any)
		eq, _ := cond["StringEquals"].(map[string]any)
		if len(cond) != 1 || len(eq) != 2 {
			t.Fatalf("trust condition %v, want StringEquals on aws:SourceAccount and aws:SourceArn", cond)
		}
		if got := render(eq["aws:SourceAccount"]); got != "${AWS::AccountId}" {
			t.Errorf("aws:SourceAccount %s", got)
		}
		if got := render(eq["aws:SourceArn"]); got != "JobsScheduleGroup.Arn" {
			t.Errorf("aws:SourceArn %s, want the schedule group's ARN", got)
		}
		return
	}
	t.Fatal("no scheduler role")
}

// TestDeletionProtectionRetainsOnlyTheTable: with deletion protection the table is retained
// (and protected); everything else, the schedule group and the log group included, is deleted
// with the stack, so no retained group keeps firing schedules at a deleted queue and role, and a
// redeploy with the same name does not collide with a leftover. Its successor over every part,
// TestDeletionProtectionRetainsOnlyTables in internal/shapes, checks every shape.
func TestDeletionProtectionRetainsOnlyTheTable(t *testing.T) {
	for name, tmpl := range map[string]assertions.Template{"protected": must(keyedShape(t)), "unprotected": std(t)} {
		var retained []string
		for id, r := range (*tmpl.ToJSON())["Resources"].(map[string]any) {
			res := r.(map[string]any)
			if res["Type"] == "AWS::KMS::Key" {
				continue // the test's own key, outside the construct
			}
			if res["DeletionPolicy"] == "Retain" || res["UpdateReplacePolicy"] == "Retain" {
				retained = append(retained, render(map[string]any{"Ref": id}))
			}
		}
		want := map[string][]string{"protected": {"JobsTable"}, "unprotected": nil}[name]
		if !slices.Equal(retained, want) {
			t.Errorf("%s: retained %v, want %v", name, retained, want)
		}
	}
	check(t, func() {
		must(keyedShape(t)).HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{"DeletionProtectionEnabled": true})
	})
}

func must(tmpl assertions.Template, _ *JobQueue) assertions.Template { return tmpl }

var longNames synth

// TestLongNames synthesizes the longest Name Validate accepts with scheduling and FIFO queues:
// every derived name is within its service's limit.
func TestLongNames(t *testing.T) {
	name := strings.Repeat("n", 59)
	tmpl, _ := longNames.get(t, Props{Name: name, FIFO: true})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Scheduler::ScheduleGroup"), map[string]any{"Name": name + "-jobs"})
	})
	for _, q := range []string{name + "-jobs.fifo", name + "-jobs-dlq.fifo", name + "-jobs-scheduler-dlq"} {
		if len(q) > 80 {
			t.Errorf("queue name %s is %d characters", q, len(q))
		}
		check(t, func() { tmpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), map[string]any{"QueueName": q}) })
	}
	if g := ScheduleGroupName(name); len(g) != 64 {
		t.Errorf("group name %d characters, want exactly the limit 64", len(g))
	}
}
