package jobqueue

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
)

// topicStatements returns the alarm topic's policy statements.
func topicStatements(t *testing.T, tmpl assertions.Template) []map[string]any {
	t.Helper()
	policies := *tmpl.FindResources(jsii.String("AWS::SNS::TopicPolicy"), nil)
	if len(policies) != 1 {
		t.Fatalf("%d topic policies, want 1", len(policies))
	}
	var out []map[string]any
	for _, p := range policies {
		props := (*p)["Properties"].(map[string]any)
		if topics := render(props["Topics"].([]any)[0]); topics != "JobsAlarmTopic" {
			t.Errorf("topic policy on %s", topics)
		}
		for _, s := range props["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			out = append(out, s.(map[string]any))
		}
	}
	return out
}

// TestAlarmTopicPolicy: EnforceSSL makes CDK write a topic policy, which replaces SNS's default
// one, so it must itself let CloudWatch publish: an Allow of sns:Publish to
// cloudwatch.amazonaws.com on the topic, for this account's alarms named <Name>-jobs-… only.
// Without it every alarm action fails with "not authorized to perform: SNS:Publish".
func TestAlarmTopicPolicy(t *testing.T) {
	var allow, deny int
	for _, st := range topicStatements(t, std(t)) {
		switch st["Effect"] {
		case "Deny":
			deny++
			if b, _ := json.Marshal(st["Condition"]); string(b) != `{"Bool":{"aws:SecureTransport":"false"}}` {
				t.Errorf("deny statement: %s", b)
			}
		case "Allow":
			allow++
			if b, _ := json.Marshal(st["Principal"]); string(b) != `{"Service":"cloudwatch.amazonaws.com"}` {
				t.Errorf("allow principal %s", b)
			}
			if st["Action"] != "sns:Publish" {
				t.Errorf("allow action %v, want sns:Publish only", st["Action"])
			}
			if r := render(st["Resource"]); r != "JobsAlarmTopic" {
				t.Errorf("allow resource %s", r)
			}
			cond := st["Condition"].(map[string]any)
			if got := render(cond["StringEquals"].(map[string]any)["aws:SourceAccount"]); got != "${AWS::AccountId}" {
				t.Errorf("aws:SourceAccount %s", got)
			}
			want := "arn:${AWS::Partition}:cloudwatch:${AWS::Region}:${AWS::AccountId}:alarm:demo-jobs-*"
			if got := render(cond["ArnLike"].(map[string]any)["aws:SourceArn"]); got != want {
				t.Errorf("aws:SourceArn %s, want %s", got, want)
			}
			if len(cond) != 2 {
				t.Errorf("conditions %v", cond)
			}
		}
	}
	if allow != 1 || deny != 1 {
		t.Errorf("%d allow and %d deny statements, want 1 and 1", allow, deny)
	}
}

// TestAlarmNames: every alarm is named <Name>-jobs-…, so that the topic policy's aws:SourceArn
// covers it, and notifies the topic.
func TestAlarmNames(t *testing.T) {
	tmpl := std(t)
	var names []string
	for id, a := range *tmpl.FindResources(jsii.String("AWS::CloudWatch::Alarm"), nil) {
		props := (*a)["Properties"].(map[string]any)
		name, _ := props["AlarmName"].(string)
		if !strings.HasPrefix(name, "demo-jobs-") {
			t.Errorf("alarm %s is named %q, outside the topic policy's demo-jobs-*", id, name)
		}
		names = append(names, name)
		if acts := props["AlarmActions"].([]any); len(acts) != 1 || render(acts[0]) != "JobsAlarmTopic" {
			t.Errorf("alarm %s actions %v", id, acts)
		}
	}
	slices.Sort(names)
	want := []string{"demo-jobs-dlq-visible", "demo-jobs-oldest-message", "demo-jobs-recursive-loop-stopped",
		"demo-jobs-scheduler-dlq-visible", "demo-jobs-worker-errors", "demo-jobs-worker-throttles"}
	if !slices.Equal(names, want) {
		t.Errorf("alarms %v, want %v", names, want)
	}
}

// TestRecursiveLoopDefault: the worker keeps Lambda's recursive loop detection on (Terminate),
// written into the template, and an alarm watches the metric Lambda emits when it stops a loop.
func TestRecursiveLoopDefault(t *testing.T) {
	tmpl := std(t)
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{"RecursiveLoop": "Terminate"})
	})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
			"AlarmName":          "demo-jobs-recursive-loop-stopped",
			"Namespace":          "AWS/Lambda",
			"MetricName":         "RecursiveInvocationsDropped",
			"Dimensions":         []any{map[string]any{"Name": "FunctionName", "Value": map[string]any{"Ref": assertions.Match_StringLikeRegexp(jsii.String("^JobsWorker"))}}},
			"Statistic":          "Sum",
			"Period":             300,
			"Threshold":          1,
			"ComparisonOperator": "GreaterThanOrEqualToThreshold",
			"TreatMissingData":   "notBreaching",
			"AlarmActions":       []any{map[string]any{"Ref": assertions.Match_StringLikeRegexp(jsii.String("^JobsAlarmTopic"))}},
		})
	})
}

var loopAllowed synth

// TestRecursiveLoopAllow: with RecursiveLoop Allow the template says so, and there is no alarm on
// a metric Lambda then never emits.
func TestRecursiveLoopAllow(t *testing.T) {
	tmpl, _ := loopAllowed.get(t, Props{Name: "loop", RecursiveLoop: awslambda.RecursiveLoop_ALLOW, DisableScheduling: true})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{"RecursiveLoop": "Allow"})
	})
	for id, a := range *tmpl.FindResources(jsii.String("AWS::CloudWatch::Alarm"), nil) {
		if (*a)["Properties"].(map[string]any)["MetricName"] == MetricRecursiveInvocationsDropped {
			t.Errorf("alarm %s watches %s although detection is off", id, MetricRecursiveInvocationsDropped)
		}
	}
	check(t, func() { tmpl.ResourceCountIs(jsii.String("AWS::CloudWatch::Alarm"), jsii.Number(4)) })
}

// TestAlarmSuffixesListed: every alarm of the stacks with each part (the API, the DynamoDB
// outbox, the PostgreSQL outbox) is named AlarmName(Name, suffix) with a suffix of
// alarmSuffixes, the list Validate measures Name against.
func TestAlarmSuffixesListed(t *testing.T) {
	apiTmpl, _, _ := iamShape(t)
	outboxTmpl, _ := outboxStack(t)
	pgTmpl, _ := pgOutboxApp(t)
	for name, tm := range map[string]assertions.Template{"demo": apiTmpl, "shop": outboxTmpl, "pg": pgTmpl} {
		for id, a := range *tm.FindResources(jsii.String("AWS::CloudWatch::Alarm"), nil) {
			got, _ := (*a)["Properties"].(map[string]any)["AlarmName"].(string)
			if !slices.ContainsFunc(alarmSuffixes, func(s string) bool { return got == AlarmName(name, s) }) {
				t.Errorf("%s: alarm %s is named %q, not AlarmName(%q, s) for any s of alarmSuffixes", name, id, got, name)
			}
		}
	}
}
