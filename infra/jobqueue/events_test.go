package jobqueue

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/jsii-runtime-go"
)

var withEvents, withEventsDefaultBus synth

// eventsStack synthesizes a stack whose completion events go to a bus of its own.
func eventsStack(t *testing.T) (assertions.Template, *JobQueue) {
	t.Helper()
	return withEvents.get(t, Props{Name: "shop", Events: &EventsProps{Asset: assetPath, CreateBus: true, BatchSize: 50}})
}

func TestEventsOffByDefault(t *testing.T) {
	tmpl, jq := std(t), standard.jq
	if jq.Events != nil {
		t.Fatal("events without Props.Events")
	}
	check(t, func() { tmpl.ResourceCountIs(jsii.String("AWS::Events::EventBus"), jsii.Number(0)) })
	tables := tmpl.FindResources(jsii.String("AWS::DynamoDB::Table"), nil)
	b, _ := json.Marshal(tables)
	if json.Valid(b) && containsKey(b, "StreamSpecification") {
		t.Errorf("the job table has a stream without Props.Events: %s", b)
	}
}

func containsKey(b []byte, key string) bool {
	var v any
	_ = json.Unmarshal(b, &v)
	var walk func(any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if k == key || walk(e) {
					return true
				}
			}
		case []any:
			for _, e := range v {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}

func TestEventsStreamFunctionAndMapping(t *testing.T) {
	tmpl, jq := eventsStack(t)
	if jq.Events == nil {
		t.Fatal("no Events")
	}
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{
			"TableName": "shop-jobs", "StreamSpecification": map[string]any{"StreamViewType": "NEW_AND_OLD_IMAGES"},
		})
	})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Events::EventBus"), map[string]any{"Name": "shop-jobs"})
	})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
			"Timeout": 30, "MemorySize": 128, "Runtime": "provided.al2023", "Architectures": []any{"arm64"},
			"Environment": map[string]any{"Variables": map[string]any{
				EnvEventBus:    map[string]any{"Ref": assertions.Match_StringLikeRegexp(jsii.String("^JobsEventBus"))},
				EnvEventSource: "sqsworker",
			}},
		})
	})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), map[string]any{
			"EventSourceArn":             map[string]any{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^JobsTable")), "StreamArn"}},
			"FunctionName":               map[string]any{"Ref": assertions.Match_StringLikeRegexp(jsii.String("^JobsEventsFunction"))},
			"StartingPosition":           "TRIM_HORIZON",
			"BatchSize":                  50,
			"BisectBatchOnFunctionError": true,
			"MaximumRetryAttempts":       10,
			"FunctionResponseTypes":      []any{"ReportBatchItemFailures"},
			"DestinationConfig": map[string]any{"OnFailure": map[string]any{
				"Destination": map[string]any{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^JobsEventsFailures")), "Arn"}},
			}},
		})
	})
	// The mapping's filter is exactly the documented pattern (pkg/jobevents.FilterPattern).
	var mappings map[string]struct {
		Properties struct {
			FunctionName   map[string]any
			FilterCriteria struct{ Filters []struct{ Pattern string } }
		}
	}
	b, _ := json.Marshal(tmpl.FindResources(jsii.String("AWS::Lambda::EventSourceMapping"), nil))
	if err := json.Unmarshal(b, &mappings); err != nil {
		t.Fatal(err)
	}
	var want any
	_ = json.Unmarshal([]byte(EventsFilterPattern), &want)
	found := false
	for _, m := range mappings {
		if ref, _ := m.Properties.FunctionName["Ref"].(string); strings.HasPrefix(ref, "JobsEventsFunction") {
			found = true
			if len(m.Properties.FilterCriteria.Filters) != 1 {
				t.Fatalf("filters %+v", m.Properties.FilterCriteria.Filters)
			}
			var got any
			if err := json.Unmarshal([]byte(m.Properties.FilterCriteria.Filters[0].Pattern), &got); err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("filter pattern %s, want %s", m.Properties.FilterCriteria.Filters[0].Pattern, EventsFilterPattern)
			}
		}
	}
	if !found {
		t.Error("no event source mapping for the events function")
	}
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), map[string]any{"QueueName": "shop-jobs-events-failures", "SqsManagedSseEnabled": true})
	})
	for _, s := range []string{AlarmEventsIteratorAge, AlarmEventsFailures, AlarmEventsErrors} {
		check(t, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{"AlarmName": AlarmName("shop", s)})
		})
	}
	for _, name := range []string{"EventBusName", "EventsFunctionName", "EventsFailuresQueueUrl"} {
		check(t, func() { tmpl.HasOutput(jsii.String("Jobs"+name), map[string]any{}) })
	}
}

// The events function's role: events:PutEvents on its one bus, the stream reads and on-failure
// send its event source needs, its logs; no table access (the stream carries the images).
func TestEventsGrants(t *testing.T) {
	tmpl, _ := eventsStack(t)
	checkGrants(t, "JobsEventsRole", grants(t, tmpl, "JobsEventsRole"), map[string][]string{
		"JobsEventsLogs.Arn":     {"logs:CreateLogStream", "logs:PutLogEvents"},
		"JobsEventBus.Arn":       {"events:PutEvents"},
		"JobsTable.StreamArn":    streamRead,
		"*":                      {"dynamodb:ListStreams"},
		"JobsEventsFailures.Arn": send,
	})
}

// On the account's default bus: the grant names that bus's ARN, and no bus is created.
func TestEventsDefaultBus(t *testing.T) {
	tmpl, _ := withEventsDefaultBus.get(t, Props{Name: "shop", Events: &EventsProps{Asset: assetPath}})
	check(t, func() { tmpl.ResourceCountIs(jsii.String("AWS::Events::EventBus"), jsii.Number(0)) })
	b, _ := json.Marshal(roleStatements(t, tmpl, "JobsEventsRole"))
	if !strings.Contains(string(b), ":event-bus/default") {
		t.Errorf("the events role does not name the default bus: %s", b)
	}
}

func TestEventsValidation(t *testing.T) {
	app := newTestApp(t)
	stack := awscdk.NewStack(app, jsii.String("Bad"), nil)
	bus := awsevents.NewEventBus(stack, jsii.String("Bus"), nil)
	for _, e := range []EventsProps{
		{Asset: assetPath, Bus: bus, CreateBus: true},
		{Asset: assetPath, BatchSize: 10001},
		{Asset: assetPath, Timeout: 1500 * time.Millisecond},
		{Asset: "/no/such/events.zip"},
	} {
		e := e
		if err := (Props{Name: "shop", WorkerAsset: assetPath, Events: &e}).Validate(); err == nil {
			t.Errorf("Validate accepted %+v", e)
		}
	}
	long := Props{Name: "a-name-of-sixty-five-characters-which-is-too-long-for-the-queue-x", WorkerAsset: assetPath, DisableScheduling: true,
		Events: &EventsProps{Asset: assetPath}}
	if err := long.Validate(); err == nil {
		t.Errorf("Validate accepted a name whose events failures queue is above 80 characters")
	}
}

func TestNagEvents(t *testing.T) {
	nagCheck(t, 3, func(_ awscdk.Stack, p *Props) { p.Events = &EventsProps{Asset: assetPath, CreateBus: true} })
}
