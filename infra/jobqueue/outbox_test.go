package jobqueue

import (
	"encoding/json"
	"github.com/sqsworker/sqsworker/infra/internal/cfnread"
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
			"State":              "ENABLED",
			"GroupName":          map[string]any{"Ref": assertions.Match_StringLikeRegexp(jsii.String("^JobsOutboxScheduleGroup"))},
			"Target": map[string]any{
				"Arn":         map[string]any{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^JobsRelay[0-9A-F]{8}$")), "Arn"}},
				"RoleArn":     map[string]any{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^JobsOutboxSweepRole")), "Arn"}},
				"Input":       `{"mode":"sweep"}`,
				"RetryPolicy": map[string]any{"MaximumRetryAttempts": 0},
			},
		})
	})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Scheduler::ScheduleGroup"), map[string]any{"Name": "shop-outbox"})
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
}

// The relay's calls (functions/relay, pkg/outbox/dynamooutbox): on its table UpdateItem (claim,
// release, kill), DeleteItem (sent), GetItem, BatchGetItem and Query (a FIFO group's head); Query
// on by_state (due jobs, CountDead) and by_id (a job's key). Its producer sends, and schedules
// delays beyond 15 minutes (CreateSchedule only: pkg/schedule's ScheduleJob).
var (
	relayTable = []string{"dynamodb:BatchGetItem", "dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem"}
	// What Lambda's event source mapping reads the stream with (on the relay's role).
	streamRead = []string{"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"}
)

// TestOutboxRelayGrants compares the relay's and the sweep schedule's roles action by action and
// resource by resource: exactly what the relay calls (no /index/* wildcard, no PutItem or Scan,
// no schedule reads, updates or deletes), the stream reads and on-failure send its event source
// needs, and for the sweep lambda:InvokeFunction on the relay's unqualified ARN only.
func TestOutboxRelayGrants(t *testing.T) {
	tmpl, _ := outboxStack(t)
	ob := "JobsOutboxTable"
	checkGrants(t, "JobsRelayRole", grants(t, tmpl, "JobsRelayRole"), map[string][]string{
		"JobsRelayLogs.Arn":           {"logs:CreateLogStream", "logs:PutLogEvents"},
		ob + ".Arn":                   relayTable,
		ob + ".Arn/index/by_state":    {"dynamodb:Query"},
		ob + ".Arn/index/by_id":       {"dynamodb:Query"},
		ob + ".StreamArn":             streamRead,
		"*":                           {"dynamodb:ListStreams"},
		"JobsOutboxRelayFailures.Arn": send,
		queueArn:                      sendOnly,
		schedulesOf("shop-jobs"):      {"scheduler:CreateSchedule"},
		schedRole:                     {"iam:PassRole"},
	})
	checkGrants(t, "JobsOutboxSweepRole", grants(t, tmpl, "JobsOutboxSweepRole"), map[string][]string{
		"JobsRelay.Arn": {"lambda:InvokeFunction"},
	})
}

// TestOutboxSweepTrust: only EventBridge Scheduler, for this account and for schedules in the
// relays' own schedule group (where the sweep is), may assume the sweep's role.
func TestOutboxSweepTrust(t *testing.T) {
	tmpl, _ := outboxStack(t)
	checkSchedulerTrust(t, tmpl, "JobsOutboxSweepRole", "JobsOutboxScheduleGroup.Arn")
}

// checkSchedulerTrust checks that the role's trust policy is one statement for
// scheduler.amazonaws.com with StringEquals aws:SourceAccount (this account) and aws:SourceArn
// (the group's ARN, rendered).
func checkSchedulerTrust(t *testing.T, tmpl assertions.Template, role, groupArn string) {
	t.Helper()
	for id, r := range *tmpl.FindResources(jsii.String("AWS::IAM::Role"), nil) {
		if cfnread.LogicalName(id) != role {
			continue
		}
		doc := (*r)["Properties"].(map[string]any)["AssumeRolePolicyDocument"].(map[string]any)
		b, _ := json.Marshal(doc["Statement"])
		sts := doc["Statement"].([]any)
		if len(sts) != 1 {
			t.Fatalf("%s: trust statements %s", role, b)
		}
		st := sts[0].(map[string]any)
		if p := render(st["Principal"]); p != `{"Service":"scheduler.amazonaws.com"}` {
			t.Errorf("%s: trusts %s", role, p)
		}
		cond, _ := st["Condition"].(map[string]any)
		eq, _ := cond["StringEquals"].(map[string]any)
		if len(cond) != 1 || len(eq) != 2 {
			t.Fatalf("%s: trust condition %s, want StringEquals on aws:SourceAccount and aws:SourceArn", role, b)
		}
		if got := render(eq["aws:SourceAccount"]); got != "${AWS::AccountId}" {
			t.Errorf("%s: aws:SourceAccount %s", role, got)
		}
		if got := render(eq["aws:SourceArn"]); got != groupArn {
			t.Errorf("%s: aws:SourceArn %s, want %s", role, got, groupArn)
		}
		return
	}
	t.Fatalf("no role %s", role)
}

func TestOutboxAlarmsAndDashboard(t *testing.T) {
	tmpl, jq := outboxStack(t)
	alarms := *tmpl.FindResources(jsii.String("AWS::CloudWatch::Alarm"), nil)
	// Each named <Name>-jobs-<suffix>, which the alarm topic's policy covers (an alarm without a
	// name of its own cannot notify: TestEveryAlarmCanNotify in internal/shapes checks all).
	for id, suffix := range map[string]string{"OutboxIteratorAgeAlarm": AlarmOutboxIteratorAge, "OutboxRelayFailuresAlarm": AlarmOutboxRelayFailures,
		"OutboxDeadAlarm": AlarmOutboxDeadJobs, "OutboxRelayFunctionErrorsAlarm": AlarmOutboxRelayFunctionErrors} {
		found := false
		for logical, a := range alarms {
			if cfnread.LogicalName(logical) != "Jobs"+id {
				continue
			}
			found = true
			props := (*a)["Properties"].(map[string]any)
			if got, want := props["AlarmName"], "shop-jobs-"+suffix; got != want {
				t.Errorf("alarm %s is named %v, want %s", id, got, want)
			}
			if acts := props["AlarmActions"].([]any); len(acts) != 1 || render(acts[0]) != "JobsAlarmTopic" {
				t.Errorf("alarm %s actions %v", id, acts)
			}
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
	// The reviewer's case: 59 characters passed, and the failures queue got 81 (SQS: 80).
	long := strings.Repeat("n", 59)
	if err := (Props{Name: long, WorkerAsset: assetPath, Outbox: &OutboxProps{RelayAsset: assetPath}}).Validate(); err == nil ||
		!strings.Contains(err.Error(), "Name is 59 characters, at most 57 fit") {
		t.Errorf("Validate with a 59-character Name and the outbox = %v", err)
	}
}

// TestNagOutbox runs the AwsSolutions pack over a stack with the outbox: no errors, and every
// suppression has a reason (the outbox adds two: its failures queue and the relay's role; the
// sweep's role has no wildcard left to suppress).
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
	if n != 2 {
		t.Errorf("the outbox's resources carry %d suppressions, want 2 (failures queue, relay role)", n)
	}
}

var bothOutboxes synth

// TestBothOutboxes: a stack may have the DynamoDB and the PostgreSQL outbox at once (their
// alarms, roles and schedules do not collide; both schedules are in the relays' one group), and
// beside a payload bucket only the PostgreSQL relay, which sends large jobs through it, may write
// there: a DynamoDB outbox item always fits in an SQS message.
func TestBothOutboxes(t *testing.T) {
	tmpl, _ := bothOutboxes.get(t, Props{Name: "both", PayloadBucket: true, Outbox: &OutboxProps{RelayAsset: assetPath},
		PostgresOutbox: &PostgresOutboxProps{Asset: assetPath, DSN: "postgres://relay@db/app"}})
	check(t, func() { tmpl.ResourceCountIs(jsii.String("AWS::Scheduler::ScheduleGroup"), jsii.Number(2)) })
	check(t, func() { tmpl.ResourceCountIs(jsii.String("AWS::Scheduler::Schedule"), jsii.Number(2)) })
	names := map[string]bool{}
	for id, a := range *tmpl.FindResources(jsii.String("AWS::CloudWatch::Alarm"), nil) {
		name, _ := (*a)["Properties"].(map[string]any)["AlarmName"].(string)
		if names[name] {
			t.Errorf("alarm %s: name %q taken twice", id, name)
		}
		names[name] = true
	}
	for _, want := range []string{AlarmOutboxRelayFunctionErrors, AlarmOutboxRelayErrors, AlarmOutboxDeadJobs, AlarmOutboxDeadRows} {
		if !names[AlarmName("both", want)] {
			t.Errorf("no alarm %s", AlarmName("both", want))
		}
	}
	for r := range grants(t, tmpl, "JobsRelayRole") {
		if strings.Contains(r, "PayloadBucket") {
			t.Errorf("the DynamoDB relay has grants on the payload bucket (%s), which it never writes", r)
		}
	}
	if got := grants(t, tmpl, "JobsPgRelayRole")[bucketPrefix]; len(got) != 1 || got[0] != "s3:PutObject" {
		t.Errorf("the PostgreSQL relay on the payload objects (%s): %v, want s3:PutObject", bucketPrefix, got)
	}
}
