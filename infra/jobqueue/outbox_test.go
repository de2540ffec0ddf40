package jobqueue

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

var withOutbox synth

// outboxStack synthesizes a stack with the outbox and a producer granted GrantOutboxWrite.
func outboxStack(t *testing.T) (assertions.Template, *JobQueue) {
	t.Helper()
	withOutbox.once.Do(func() {
		app := newTestApp(t)
		stack := awscdk.NewStack(app, jsii.String("Test"), nil)
		jq, err := New(stack, "Jobs", Props{Name: "shop", WorkerAsset: assetPath, Outbox: &OutboxProps{RelayAsset: assetPath, BatchSize: 50}})
		if err != nil {
			panic(err)
		}
		producer := awsiam.NewRole(stack, jsii.String("Producer"), &awsiam.RoleProps{
			AssumedBy: awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		})
		jq.GrantOutboxWrite(producer)
		withOutbox.jq = jq
		withOutbox.tmpl = assertions.Template_FromStack(stack, nil)
	})
	return withOutbox.tmpl, withOutbox.jq
}

func TestOutboxOffByDefault(t *testing.T) {
	tmpl, jq := standard.get(t, Props{Name: "demo", MaxConcurrency: 20, ReservedConcurrency: 25, LogLevel: "debug"})
	if jq.Outbox != nil {
		t.Fatal("an outbox without Props.Outbox")
	}
	check(t, func() { tmpl.ResourceCountIs(jsii.String("AWS::Scheduler::Schedule"), jsii.Number(0)) })
	check(t, func() { tmpl.ResourceCountIs(jsii.String("AWS::DynamoDB::Table"), jsii.Number(1)) })
}

func TestOutboxTable(t *testing.T) {
	tmpl, _ := outboxStack(t)
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{
			"TableName":               "shop-outbox",
			"BillingMode":             "PAY_PER_REQUEST",
			"StreamSpecification":     map[string]any{"StreamViewType": "NEW_IMAGE"},
			"TimeToLiveSpecification": map[string]any{"AttributeName": "exp", "Enabled": true},
			"KeySchema": []any{
				map[string]any{"AttributeName": "pk", "KeyType": "HASH"},
				map[string]any{"AttributeName": "sk", "KeyType": "RANGE"},
			},
			"GlobalSecondaryIndexes": []any{
				map[string]any{
					"IndexName": "by_state",
					"KeySchema": []any{
						map[string]any{"AttributeName": "gpk", "KeyType": "HASH"},
						map[string]any{"AttributeName": "ord", "KeyType": "RANGE"},
					},
					"Projection": map[string]any{"ProjectionType": "INCLUDE", "NonKeyAttributes": OutboxByStateProjection},
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

func TestOutboxRelayAndItsEventSource(t *testing.T) {
	tmpl, _ := outboxStack(t)
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
			"Timeout": 30, "MemorySize": 256, "Runtime": "provided.al2023",
			"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(&map[string]any{
				EnvOutboxTable: map[string]any{"Ref": assertions.Match_StringLikeRegexp(jsii.String("OutboxTable"))},
				EnvQueueURL:    assertions.Match_AnyValue(), EnvOutboxSweepAfter: "1m0s", EnvOutboxMaxAttempts: "10", EnvOutboxLease: "1m0s",
				EnvScheduleGroup: "shop-jobs", EnvQueueARN: assertions.Match_AnyValue(), EnvSchedulerRoleARN: assertions.Match_AnyValue(),
			})},
		})
	})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), map[string]any{
			"EventSourceArn":             map[string]any{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("OutboxTable")), "StreamArn"}},
			"StartingPosition":           "TRIM_HORIZON",
			"BatchSize":                  50,
			"BisectBatchOnFunctionError": true,
			"MaximumRetryAttempts":       3,
			"FunctionResponseTypes":      []any{"ReportBatchItemFailures"},
			"FilterCriteria":             map[string]any{"Filters": []any{map[string]any{"Pattern": `{"eventName":["INSERT"]}`}}},
			"DestinationConfig": map[string]any{"OnFailure": map[string]any{
				"Destination": map[string]any{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("OutboxRelayFailures")), "Arn"}},
			}},
		})
	})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Scheduler::Schedule"), map[string]any{
			"ScheduleExpression": "rate(1 minute)",
			"Target": assertions.Match_ObjectLike(&map[string]any{
				"Input":       `{"mode":"sweep"}`,
				"RetryPolicy": assertions.Match_ObjectLike(&map[string]any{"MaximumRetryAttempts": 0}),
			}),
		})
	})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), map[string]any{"QueueName": "shop-outbox-relay-failures", "SqsManagedSseEnabled": true})
	})
	for _, name := range []string{"OutboxTableName", "OutboxRelayFunctionName", "OutboxFailuresQueueUrl"} {
		check(t, func() { tmpl.HasOutput(jsii.String("Jobs"+name), map[string]any{}) })
	}
}

// policyStatements returns the statements of the IAM policies attached to roles whose logical
// id matches role.
func policyStatements(t *testing.T, tmpl assertions.Template, role string) []map[string]any {
	t.Helper()
	b, _ := json.Marshal(tmpl.FindResources(jsii.String("AWS::IAM::Policy"), nil))
	var pols map[string]struct {
		Properties struct {
			PolicyDocument struct{ Statement []map[string]any }
			Roles          []map[string]any
		}
	}
	if err := json.Unmarshal(b, &pols); err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, p := range pols {
		for _, r := range p.Properties.Roles {
			if ref, _ := r["Ref"].(string); strings.Contains(ref, role) {
				out = append(out, p.Properties.PolicyDocument.Statement...)
			}
		}
	}
	return out
}

func TestOutboxGrants(t *testing.T) {
	tmpl, _ := outboxStack(t)
	// The producer: PutItem on the outbox table for outbox keys only, and the queued record's
	// UpdateItem on the job table, nothing else.
	st := policyStatements(t, tmpl, "Producer")
	b, _ := json.Marshal(st)
	got := string(b)
	for _, want := range []string{
		`"Action":"dynamodb:PutItem","Condition":{"ForAllValues:StringLike":{"dynamodb:LeadingKeys":["job#*","fifo#*"]}}`,
		`"Action":"dynamodb:UpdateItem","Condition":{"ForAllValues:StringEquals":{"dynamodb:Attributes":["pk","kind","key","st","runs","upd","exp","job_id","hash"]},"StringEqualsIfExists":{"dynamodb:ReturnValues":"NONE"}}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("producer policy lacks %s:\n%s", want, got)
		}
	}
	if len(st) != 2 {
		t.Errorf("producer policy has %d statements, want 2: %s", len(st), got)
	}
	// The relay: its table's item actions (no Scan, no PutItem), the stream, the queue.
	relay, _ := json.Marshal(policyStatements(t, tmpl, "RelayRole"))
	for _, want := range []string{"dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:Query", "dynamodb:GetRecords", "sqs:SendMessage"} {
		if !strings.Contains(string(relay), want) {
			t.Errorf("relay policy lacks %s: %s", want, relay)
		}
	}
	for _, bad := range []string{"dynamodb:Scan", "dynamodb:PutItem", "dynamodb:*", `"Action":"*"`} {
		if strings.Contains(string(relay), bad) {
			t.Errorf("relay policy has %s: %s", bad, relay)
		}
	}
	// The one statement on every resource is ListStreams, which has no resource-level permission.
	if n := strings.Count(string(relay), `"Resource":"*"`); n != 1 || !strings.Contains(string(relay), `{"Action":"dynamodb:ListStreams","Effect":"Allow","Resource":"*"}`) {
		t.Errorf("relay policy: %d statements on *, want only ListStreams: %s", n, relay)
	}
}

func TestOutboxAlarmsAndDashboard(t *testing.T) {
	tmpl, jq := outboxStack(t)
	alarms := *tmpl.FindResources(jsii.String("AWS::CloudWatch::Alarm"), nil)
	for _, id := range []string{"OutboxIteratorAgeAlarm", "OutboxRelayFailuresAlarm", "OutboxDeadAlarm", "OutboxRelayErrorsAlarm"} {
		found := false
		for logical := range alarms {
			found = found || strings.Contains(logical, id)
		}
		if !found {
			t.Errorf("no alarm %s", id)
		}
	}
	if len(jq.Alarms) != len(alarms) {
		t.Errorf("JobQueue.Alarms holds %d alarms, the template %d", len(jq.Alarms), len(alarms))
	}
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
			"MetricName": "IteratorAge", "Namespace": "AWS/Lambda", "Threshold": 60000, "Statistic": "Maximum",
		})
	})
	check(t, func() {
		// A standing count (the sweep's gauge), not the deaths of one period: the alarm holds
		// while any job is dead.
		tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
			"MetricName": "OutboxDeadJobs", "Namespace": "sqsworker", "Threshold": 1, "Statistic": "Maximum",
			"ComparisonOperator": "GreaterThanOrEqualToThreshold", "TreatMissingData": "ignore",
			"Dimensions": assertions.Match_ArrayWith(&[]any{map[string]any{"Name": "Table", "Value": "shop-outbox"}}),
		})
	})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
			"MetricName": "ApproximateNumberOfMessagesVisible",
			"Dimensions": []any{map[string]any{"Name": "QueueName", "Value": map[string]any{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("OutboxRelayFailures")), "QueueName"}}}},
		})
	})
	body, _ := json.Marshal(tmpl.FindResources(jsii.String("AWS::CloudWatch::Dashboard"), nil))
	for _, w := range []string{"Outbox jobs sent / failed / died", "Outbox dead jobs (standing, max)", "Outbox relay iterator age", "Outbox relay failures queue depth"} {
		if !strings.Contains(string(body), w) {
			t.Errorf("dashboard lacks %q", w)
		}
	}
	if jq.Outbox.Sweep == nil || jq.Outbox.Relay == nil {
		t.Error("JobQueue.Outbox is not filled in")
	}
}

func TestOutboxValidate(t *testing.T) {
	for _, tt := range []struct {
		o    OutboxProps
		want string
	}{
		{OutboxProps{BatchSize: 10001}, "Outbox.BatchSize=10001"},
		{OutboxProps{RelayAsset: "no/such.zip"}, "Outbox.RelayAsset no/such.zip is missing"},
		{OutboxProps{Timeout: 5 * time.Second}, "Outbox.Timeout=5s"},
		{OutboxProps{RetryAttempts: -1}, "Outbox.RetryAttempts=-1"},
		{OutboxProps{MaxAttempts: 1001}, "Outbox.MaxAttempts=1001"},
	} {
		if tt.o.RelayAsset == "" {
			tt.o.RelayAsset = assetPath
		}
		err := Props{Name: "t", WorkerAsset: assetPath, Outbox: &tt.o}.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate(%+v) = %v, want %q", tt.o, err, tt.want)
		}
	}
	if err := (Props{Name: "t", WorkerAsset: assetPath, Outbox: &OutboxProps{RelayAsset: assetPath}}).Validate(); err != nil {
		t.Errorf("the outbox's defaults: %v", err)
	}
}

// TestNagOutbox runs the AwsSolutions pack over a stack with the outbox: no errors, and every
// suppression has a reason (the outbox adds two: its failures queue and the relay's role).
func TestNagOutbox(t *testing.T) {
	app := newTestApp(t)
	stack := awscdk.NewStack(app, jsii.String("NagOutbox"), nil)
	jq, err := New(stack, "Jobs", Props{Name: "nag", WorkerAsset: assetPath, Outbox: &OutboxProps{RelayAsset: assetPath}})
	if err != nil {
		t.Fatal(err)
	}
	jq.GrantOutboxWrite(awsiam.NewRole(stack, jsii.String("Producer"), &awsiam.RoleProps{AssumedBy: awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil)}))
	awscdk.Aspects_Of(stack).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	ann := assertions.Annotations_FromStack(stack)
	for _, m := range *ann.FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))) {
		t.Errorf("error %s: %v", *m.Id, m.Entry.Data)
	}
	b, _ := json.Marshal(assertions.Template_FromStack(stack, nil).ToJSON())
	var tmpl struct {
		Resources map[string]struct {
			Metadata struct {
				CdkNag struct {
					Rules []struct{ ID, Reason string } `json:"rules_to_suppress"`
				} `json:"cdk_nag"`
			}
		}
	}
	if err := json.Unmarshal(b, &tmpl); err != nil {
		t.Fatal(err)
	}
	n := 0
	for id, r := range tmpl.Resources {
		for _, rule := range r.Metadata.CdkNag.Rules {
			if strings.Contains(id, "Outbox") || strings.Contains(id, "Relay") {
				n++
			}
			if len(rule.Reason) < 40 {
				t.Errorf("%s: suppression %s has no real reason: %q", id, rule.ID, rule.Reason)
			}
		}
	}
	if n != 3 {
		t.Errorf("the outbox's resources carry %d suppressions, want 3 (failures queue, relay role, sweep role)", n)
	}
}
