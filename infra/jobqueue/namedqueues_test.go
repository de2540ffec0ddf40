package jobqueue

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/sqsworker/sqsworker/infra/internal/testasset"
)

var threeQueues synth

// threeQueueProps is a stack with the default queue and two named ones, the API and the
// DynamoDB outbox.
func threeQueueProps() Props {
	return Props{
		Name: "shop", MaxConcurrency: 10, ReservedConcurrency: 40,
		Queues: []QueueProps{
			{Name: "critical", MaxConcurrency: 20, MaxAttempts: 3, OldestMessageAlarm: time.Minute},
			{Name: "bulk", MaxConcurrency: 5, BatchSize: 100, BatchingWindow: 5 * time.Second, VisibilityTimeout: time.Hour},
		},
		Routes: map[string]string{"password.reset": "critical", "import.run": "bulk", "email.send": "default"},
		Api:    &ApiProps{Kinds: []ApiKind{{Kind: "password.reset"}, {Kind: "import.run"}}},
		Outbox: &OutboxProps{},
	}
}

func three(t *testing.T) (assertions.Template, *JobQueue) {
	t.Helper()
	return threeQueues.getWith(t, func(awscdk.Stack) Props {
		p := threeQueueProps()
		p.Api.Asset = testasset.ApiZip(assetPath)
		p.Outbox.RelayAsset = assetPath
		return p
	})
}

// TestNamedQueuesResources: each named queue has its queue and DLQ with its own visibility and
// redrive budget, and the default queue keeps its own.
func TestNamedQueuesResources(t *testing.T) {
	tmpl, jq := three(t)
	for _, q := range []struct {
		name       string
		visibility float64
		maxReceive float64
	}{{"shop-jobs", 180, 15}, {"shop-jobs-critical", 180, 9}, {"shop-jobs-bulk", 3600, 15}} {
		check(t, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), map[string]any{
				"QueueName": q.name, "VisibilityTimeout": q.visibility, "MaximumMessageSize": 1048576, "SqsManagedSseEnabled": true,
				"RedrivePolicy": map[string]any{"maxReceiveCount": q.maxReceive, "deadLetterTargetArn": map[string]any{
					"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^Jobs(QueueCritical|QueueBulk|)DLQ")), "Arn"}}},
			})
		})
		check(t, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), map[string]any{
				"QueueName": q.name + "-dlq", "MessageRetentionPeriod": 1209600,
			})
		})
	}
	if len(jq.NamedQueues) != 2 || jq.NamedQueues[0].Props.MaxReceiveCount != 9 {
		t.Errorf("NamedQueues = %+v", jq.NamedQueues)
	}
	// Each queue's redrive policy names its own DLQ.
	for id, r := range resourcesOf(tmpl, "AWS::SQS::Queue") {
		for _, n := range []string{"Critical", "Bulk"} {
			if isID(id, "JobsQueue"+n) {
				if b, _ := json.Marshal(r); !strings.Contains(string(b), `"JobsQueue`+n+`DLQ`) {
					t.Errorf("queue %s's redrive policy does not name its own DLQ: %s", id, b)
				}
			}
		}
	}
}

// resourcesOf returns the template's resources of a type, by logical id.
func resourcesOf(tmpl assertions.Template, typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range (*tmpl.ToJSON())["Resources"].(map[string]any) {
		if m := r.(map[string]any); m["Type"] == typ {
			out[id] = m
		}
	}
	return out
}

// isID reports whether a logical id is the one CDK made from a construct path ending in name:
// name and a hash of 8 hexadecimal digits.
func isID(id, name string) bool {
	rest, ok := strings.CutPrefix(id, name)
	if !ok || len(rest) != 8 {
		return false
	}
	for _, c := range rest {
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// TestNamedQueuesEventSources: one event source mapping per queue on the one worker, each with
// its queue's batch, window and MaximumConcurrency.
func TestNamedQueuesEventSources(t *testing.T) {
	tmpl, _ := three(t)
	check(t, func() { tmpl.ResourceCountIs(jsii.String("AWS::Lambda::EventSourceMapping"), jsii.Number(4)) }) // three queues + the outbox stream
	for _, es := range []struct {
		queue          string
		batch, maxConc float64
		window         any
	}{{"JobsQueue[0-9A-F]", 10, 10, assertions.Match_Absent()}, {"JobsQueueCritical[0-9A-F]", 10, 20, assertions.Match_Absent()}, {"JobsQueueBulk[0-9A-F]", 100, 5, 5}} {
		check(t, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), map[string]any{
				"EventSourceArn":                 map[string]any{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^" + es.queue)), "Arn"}},
				"FunctionName":                   map[string]any{"Ref": assertions.Match_StringLikeRegexp(jsii.String("^JobsWorker"))},
				"BatchSize":                      es.batch,
				"ScalingConfig":                  map[string]any{"MaximumConcurrency": es.maxConc},
				"MaximumBatchingWindowInSeconds": es.window,
				"FunctionResponseTypes":          []any{"ReportBatchItemFailures"},
			})
		})
	}
}

// TestNamedQueuesWorkerEnvironmentAndGrants: the worker gets the queue set and routes, not one
// queue's URL; it may send to each queue (re-sends) and each DLQ (dead letters).
func TestNamedQueuesWorkerEnvironmentAndGrants(t *testing.T) {
	tmpl, _ := three(t)
	var worker map[string]any
	for id, f := range resourcesOf(tmpl, "AWS::Lambda::Function") {
		if isID(id, "JobsWorker") {
			worker = f
		}
	}
	if worker == nil {
		t.Fatal("no worker function")
	}
	vars := worker["Properties"].(map[string]any)["Environment"].(map[string]any)["Variables"].(map[string]any)
	if _, ok := vars[EnvQueueURL]; ok {
		t.Errorf("the worker of several queues has %s: %v", EnvQueueURL, vars)
	}
	if _, ok := vars[EnvDLQURL]; ok {
		t.Errorf("the worker of several queues has %s", EnvDLQURL)
	}
	b, _ := json.Marshal(vars[EnvQueues])
	for _, want := range []string{`"default="`, `",critical="`, `",bulk="`, `"JobsQueueCritical`, `"JobsQueueBulk`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s = %s lacks %s", EnvQueues, b, want)
		}
	}
	if vars[EnvRoutes] != "email.send=default,import.run=bulk,password.reset=critical" {
		t.Errorf("%s = %v", EnvRoutes, vars[EnvRoutes])
	}
	policies := resourcesOf(tmpl, "AWS::IAM::Policy")
	for _, target := range []string{"JobsQueueCritical", "JobsQueueCriticalDLQ", "JobsQueueBulk", "JobsQueueBulkDLQ"} {
		if !policyGrants(t, policies, "JobsWorkerRole", target, "sqs:SendMessage") {
			t.Errorf("the worker may not send to %s", target)
		}
	}
	// Its event source per queue: receive, delete, and the visibility changes of retries and
	// deferrals; never a DLQ's messages.
	for _, target := range []string{"JobsQueueCritical", "JobsQueueBulk"} {
		for _, action := range []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"} {
			if !policyGrants(t, policies, "JobsWorkerRole", target, action) {
				t.Errorf("the worker may not %s on %s", action, target)
			}
		}
		if policyGrants(t, policies, "JobsWorkerRole", target+"DLQ", "sqs:ReceiveMessage") {
			t.Errorf("the worker may receive from %sDLQ", target)
		}
	}
	for _, who := range []string{"JobsSchedulerRole", "JobsApiRole", "JobsRelayRole", "Producer"} {
		for _, target := range []string{"JobsQueueCritical", "JobsQueueBulk"} {
			if !policyGrants(t, policies, who, target, "sqs:SendMessage") {
				t.Errorf("%s may not send to %s", who, target)
			}
		}
		if policyGrants(t, policies, who, "JobsQueueCriticalDLQ", "sqs:SendMessage") {
			t.Errorf("%s may send to a DLQ", who)
		}
	}
}

// policyGrants reports whether a policy attached to a role whose logical id starts with role
// allows action on a resource whose logical id starts with target (and is not a longer id that
// only shares the prefix, such as a DLQ of the queue).
func policyGrants(t *testing.T, policies map[string]map[string]any, role, target, action string) bool {
	t.Helper()
	for _, p := range policies {
		props := p["Properties"].(map[string]any)
		rb, _ := json.Marshal(props["Roles"])
		if !strings.Contains(string(rb), `"Ref":"`+role) {
			continue
		}
		doc := props["PolicyDocument"].(map[string]any)
		for _, st := range doc["Statement"].([]any) {
			s := st.(map[string]any)
			ab, _ := json.Marshal(s["Action"])
			if !strings.Contains(string(ab), `"`+action+`"`) {
				continue
			}
			resb, _ := json.Marshal(s["Resource"])
			for _, part := range strings.Split(string(resb), `"Fn::GetAtt":["`)[1:] {
				if isID(part[:strings.IndexByte(part, '"')], target) {
					return true
				}
			}
		}
	}
	return false
}

// TestNamedQueuesAlarmsDashboardOutputs: two alarms per named queue, named under the stack's
// pattern; a dashboard row per queue; outputs for each.
func TestNamedQueuesAlarmsDashboardOutputs(t *testing.T) {
	tmpl, _ := three(t)
	for _, a := range []struct {
		name      string
		threshold float64
	}{{"shop-jobs-critical-dlq-visible", 1}, {"shop-jobs-critical-oldest-message", 60}, {"shop-jobs-bulk-dlq-visible", 1}, {"shop-jobs-bulk-oldest-message", 900}} {
		check(t, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
				"AlarmName": a.name, "Threshold": a.threshold, "AlarmActions": []any{map[string]any{"Ref": assertions.Match_StringLikeRegexp(jsii.String("^JobsAlarmTopic"))}},
			})
		})
	}
	b, _ := json.Marshal(resourcesOf(tmpl, "AWS::CloudWatch::Dashboard"))
	for _, want := range []string{"Queue critical: depth, in flight, DLQ depth", "Queue bulk: jobs succeeded / failed / misrouted per kind", `Queue=\\\"shop-jobs-bulk\\\"`, "JobsMisrouted"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the dashboard lacks %s", want)
		}
	}
	outputs := *tmpl.ToJSON()
	out := outputs["Outputs"].(map[string]any)
	for _, key := range []string{"JobsQueues", "JobsQueueCriticalUrl", "JobsQueueCriticalArn", "JobsQueueCriticalDLQUrl", "JobsQueueBulkUrl", "JobsQueueUrl"} {
		if _, ok := out[key]; !ok {
			t.Errorf("no output %s", key)
		}
	}
}

// TestNamedQueuesBadProps: two queues with one name, a route to a queue the stack lacks, FIFO
// limits, capacity above the reserved concurrency: errors at synthesis, before any resource.
func TestNamedQueuesBadProps(t *testing.T) {
	for _, tt := range []struct {
		name     string
		mod      func(*Props)
		mentions []string
	}{
		{"two queues with one name", func(p *Props) { p.Queues = []QueueProps{{Name: "bulk"}, {Name: "bulk"}} },
			[]string{`Queues[0] and Queues[1] are both named "bulk"`}},
		{"two names, one construct id", func(p *Props) {
			p.Queues = []QueueProps{{Name: "bulk_2"}, {Name: "bulk2"}, {Name: "a_b"}, {Name: "a__b"}}
		},
			[]string{`Queues[0] ("bulk_2") and Queues[1] ("bulk2") differ only in their underscores: both would be the construct QueueBulk2`,
				`Queues[2] ("a_b") and Queues[3] ("a__b")`}},
		{"a route to a missing queue", func(p *Props) {
			p.Queues = []QueueProps{{Name: "bulk"}}
			p.Routes = map[string]string{"email.send": "critical"}
		}, []string{`kind email.send is routed to queue "critical", which the stack does not have (its queues: default, bulk)`}},
		{"a bad kind", func(p *Props) { p.Routes = map[string]string{"Email": "default"} }, []string{`"Email" is not a kind`}},
		{"bad names", func(p *Props) {
			p.Queues = []QueueProps{{Name: "Critical"}, {Name: "default"}, {Name: "dlq"}, {Name: ""}}
		},
			[]string{`"Critical" has 'C'`, `"default" is the default queue's`, `"dlq" is reserved`, "the name is empty"}},
		{"FIFO limits", func(p *Props) {
			p.Queues = []QueueProps{{Name: "orders", FIFO: true, BatchSize: 20}, {Name: "slow", FIFO: true, BatchSize: 5, BatchingWindow: time.Second}}
		}, []string{`Queues[0] ("orders"): BatchSize=20: a FIFO queue's event source takes 1–10`, `Queues[1] ("slow"): BatchingWindow=1s`}},
		{"redrive budget", func(p *Props) { p.Queues = []QueueProps{{Name: "bulk", MaxAttempts: 10, MaxReceiveCount: 20}} },
			[]string{"MaxReceiveCount=20 must be at least 3 × MaxAttempts = 30"}},
		{"visibility", func(p *Props) { p.Queues = []QueueProps{{Name: "bulk", VisibilityTimeout: time.Minute}} },
			[]string{"VisibilityTimeout=1m0s must be whole seconds, at least 6 × Timeout + BatchingWindow = 3m0s"}},
		{"capacity", func(p *Props) {
			p.MaxConcurrency, p.ReservedConcurrency = 10, 25
			p.Queues = []QueueProps{{Name: "bulk", MaxConcurrency: 20}}
		}, []string{"ReservedConcurrency=25 is below the sum of the queues' MaxConcurrency, 30"}},
		{"name too long", func(p *Props) {
			p.Name = strings.Repeat("s", 55)
			p.Queues = []QueueProps{{Name: "critical_queue_xy", FIFO: true}}
		}, []string{`the queue critical_queue_xy's DLQ name "sssss`, "above SQS's limit of 80"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := Props{Name: "shop"}
			tt.mod(&p)
			err := p.Validate()
			if err == nil {
				t.Fatal("Validate = nil, want an error")
			}
			for _, m := range tt.mentions {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
		})
	}
	ok := threeQueueProps()
	ok.Api.Asset, ok.Outbox.RelayAsset = testasset.ApiZip(assetPath), assetPath
	if err := ok.Validate(); err != nil {
		t.Errorf("the three-queue props: %v", err)
	}
}
