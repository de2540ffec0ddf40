package jobqueue

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/sqsworker/sqsworker/infra/internal/testasset"
)

// Stacks whose API kinds allow deduplication rules (ApiKind.Dedup): with a debounce, and with
// unique and throttle only.
var apiDebounce, apiUniqueOnly apiShape

var dedupKinds = []ApiKind{
	{Kind: "report.export", Dedup: []string{ApiRuleUnique, ApiRuleDebounce}},
	{Kind: "search.reindex", Dedup: []string{ApiRuleThrottle}},
	{Kind: "email.send"},
}

func debounceShape(t *testing.T) (assertions.Template, *JobQueue, awscdk.Stack) {
	return apiDebounce.get(t, func() Props { return apiProps("dd", ApiProps{Kinds: dedupKinds}) }, nil)
}

// apiEnv returns the variables of the API function (the function whose environment has
// SQSWORKER_API_KINDS), rendered.
func apiEnv(t *testing.T, tmpl assertions.Template) map[string]string {
	t.Helper()
	var found map[string]string
	for id, fn := range *tmpl.FindResources(jsii.String("AWS::Lambda::Function"), nil) {
		vars, _ := (*fn)["Properties"].(map[string]any)["Environment"].(map[string]any)["Variables"].(map[string]any)
		if _, ok := vars[EnvAPIKinds]; !ok {
			continue
		}
		if found != nil {
			t.Fatalf("two API functions (%s too)", id)
		}
		found = map[string]string{}
		for k, v := range vars {
			found[k] = render(v)
		}
	}
	if found == nil {
		t.Fatal("no API function")
	}
	return found
}

// TestApiDedupEnvironment: SQSWORKER_API_DEDUP lists the kinds that allow rules, in the order of
// Kinds, each rule once and sorted (functions/internal/config reads "kind=rule+rule"); with a
// debounce the API also gets the schedule.Config of debounced jobs: the stack's group, the
// default queue's ARN, the scheduler role and its DLQ. Without a debounce, none of those.
func TestApiDedupEnvironment(t *testing.T) {
	tmpl, _, _ := debounceShape(t)
	env := apiEnv(t, tmpl)
	for k, want := range map[string]string{
		EnvAPIKinds:         "report.export,search.reindex,email.send",
		EnvAPIDedup:         "report.export=debounce+unique,search.reindex=throttle",
		EnvScheduleGroup:    "dd-jobs",
		EnvQueueARN:         queueArn,
		EnvSchedulerRoleARN: schedRole,
		EnvSchedulerDLQARN:  schedDLQArn,
		EnvTable:            "JobsTable",
	} {
		if env[k] != want {
			t.Errorf("%s = %q, want %q", k, env[k], want)
		}
	}

	tmpl, _, _ = apiUniqueOnly.get(t, func() Props {
		return apiProps("uq", ApiProps{Kinds: []ApiKind{{Kind: "report.export", Dedup: []string{ApiRuleThrottle, ApiRuleUnique}}}})
	}, nil)
	env = apiEnv(t, tmpl)
	if got := env[EnvAPIDedup]; got != "report.export=throttle+unique" {
		t.Errorf("%s = %q, want report.export=throttle+unique", EnvAPIDedup, got)
	}
	for _, k := range []string{EnvScheduleGroup, EnvQueueARN, EnvSchedulerRoleARN, EnvSchedulerDLQARN} {
		if v, ok := env[k]; ok {
			t.Errorf("no kind allows debounce, yet %s = %q", k, v)
		}
	}
	// A stack whose kinds allow no rule has no SQSWORKER_API_DEDUP (and its whole template is
	// as before: TestSingleQueueTemplatesUnchanged, single-api-options and single-api-outbox).
	tmpl, _, _ = iamShape(t)
	if v, ok := apiEnv(t, tmpl)[EnvAPIDedup]; ok {
		t.Errorf("no kind allows a rule, yet %s = %q", EnvAPIDedup, v)
	}
}

// TestApiDedupGrants checks the API role exactly: with a debounce, on top of the default shape's
// grants, ApiSchedulerActions (CreateSchedule, UpdateSchedule, DeleteSchedule: no read, no list)
// on the schedules of this stack's group only, and iam:PassRole on the scheduler role only, to
// Scheduler only; no other DynamoDB action (the rules' items are written with ApiTableActions).
// With unique and throttle alone, the default shape's grants and nothing more.
func TestApiDedupGrants(t *testing.T) {
	tmpl, _, _ := debounceShape(t)
	checkGrants(t, "JobsApiRole", grants(t, tmpl, "JobsApiRole"), map[string][]string{
		"JobsApiLogs.Arn":         {"logs:CreateLogStream", "logs:PutLogEvents"},
		queueArn:                  sendOnly,
		tableArn:                  ApiTableActions,
		tableArn + "/index/by_id": {"dynamodb:Query"},
		schedulesOf("dd-jobs"):    {"scheduler:CreateSchedule", "scheduler:DeleteSchedule", "scheduler:UpdateSchedule"},
		schedRole:                 {"iam:PassRole"},
	})
	passRoles := 0
	for _, st := range roleStatements(t, tmpl, "JobsApiRole") {
		if !slices.Contains(st.Actions, "iam:PassRole") {
			continue
		}
		passRoles++
		if len(st.Actions) != 1 || len(st.Resources) != 1 {
			t.Errorf("PassRole shares its statement: %+v", st)
		}
		if want := `{"StringEquals":{"iam:PassedToService":"scheduler.amazonaws.com"}}`; st.Condition != want {
			t.Errorf("PassRole condition %s, want %s", st.Condition, want)
		}
	}
	if passRoles != 1 {
		t.Errorf("%d PassRole statements, want 1", passRoles)
	}

	tmpl, _, _ = apiUniqueOnly.get(t, func() Props {
		return apiProps("uq", ApiProps{Kinds: []ApiKind{{Kind: "report.export", Dedup: []string{ApiRuleThrottle, ApiRuleUnique}}}})
	}, nil)
	checkGrants(t, "JobsApiRole", grants(t, tmpl, "JobsApiRole"), map[string][]string{
		"JobsApiLogs.Arn":         {"logs:CreateLogStream", "logs:PutLogEvents"},
		queueArn:                  sendOnly,
		tableArn:                  ApiTableActions,
		tableArn + "/index/by_id": {"dynamodb:Query"},
	})
}

// TestApiDedupNag: cdk-nag's AwsSolutions pack finds nothing in a stack whose API debounces; the
// one suppression the debounce adds is IAM5 on the API role's schedule/<group>/* (schedule names
// are per job), with its reason, beside the scheduler DLQ's SQS3.
func TestApiDedupNag(t *testing.T) {
	nagCheck(t, 2, func(_ awscdk.Stack, p *Props) {
		p.Api = &ApiProps{Kinds: dedupKinds, Asset: testasset.ApiZip(assetPath)}
	})
	// Unique and throttle need no suppression.
	nagCheck(t, 1, func(_ awscdk.Stack, p *Props) {
		p.Api = &ApiProps{Kinds: dedupKinds[1:], Asset: testasset.ApiZip(assetPath)}
	})
}

// TestApiDedupValidate: every rule of ApiKind.Dedup is checked before anything is built, each
// with its message: only unique, debounce and throttle, each once; the job table; and for a
// debounce, scheduling. A debounce of a kind Routes sends to a named queue is valid (its
// schedule targets that queue: TestApiDebounceRoutedKind).
func TestApiDedupValidate(t *testing.T) {
	api := testasset.ApiZip(assetPath)
	kinds := func(k ...ApiKind) *ApiProps { return &ApiProps{Asset: api, Kinds: k} }
	for _, tc := range []struct {
		name  string
		props Props
		want  []string
	}{
		{"valid", Props{Api: kinds(dedupKinds...)}, nil},
		{"debounce routed to the default queue", Props{Api: kinds(dedupKinds...), Queues: []QueueProps{{Name: "bulk"}},
			Routes: map[string]string{"report.export": DefaultQueueName, "search.reindex": "bulk"}}, nil},
		{"unknown and repeated rules", Props{Api: kinds(ApiKind{Kind: "a", Dedup: []string{"uniq", ApiRuleThrottle, ApiRuleThrottle, ""}})},
			[]string{`Api.Kinds[0].Dedup (a): "uniq" is not a rule (want "unique", "debounce" or "throttle")`,
				`Api.Kinds[0].Dedup (a): "throttle" is listed twice`, `Api.Kinds[0].Dedup (a): "" is not a rule`}},
		{"no table", Props{Api: &ApiProps{Asset: api, DisableStatus: true, Kinds: []ApiKind{{Kind: "a"}, {Kind: "b", Dedup: []string{ApiRuleUnique}}}}},
			[]string{"Api.Kinds[1].Dedup (b) needs the job table, which DisableStatus leaves out"}},
		{"debounce without scheduling", Props{DisableScheduling: true, Api: kinds(dedupKinds...)},
			[]string{`Api.Kinds[0].Dedup (report.export) allows "debounce", which needs scheduling`}},
		{"throttle without scheduling", Props{DisableScheduling: true, Api: kinds(dedupKinds[1:]...)}, nil},
		{"debounce routed to a named queue", Props{Api: kinds(dedupKinds...), Queues: []QueueProps{{Name: "bulk"}}, Routes: map[string]string{"report.export": "bulk"}}, nil},
		{"debounce routed away without scheduling", Props{DisableScheduling: true, Api: kinds(dedupKinds...), Queues: []QueueProps{{Name: "bulk"}}, Routes: map[string]string{"report.export": "bulk"}},
			[]string{`Api.Kinds[0].Dedup (report.export) allows "debounce", which needs scheduling`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.props
			p.Name = "v"
			err := p.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("%d lines, want %d:\n%v", len(lines), len(tc.want), err)
			}
			for i, w := range tc.want {
				if !strings.Contains(lines[i], w) {
					t.Errorf("line %d = %q, want %q", i, lines[i], w)
				}
			}
		})
	}
}

// TestApiDedupEnvironmentSize: the scheduler's variables count against Lambda's 4 KB, at their
// longest, only when a kind allows debounce.
func TestApiDedupEnvironmentSize(t *testing.T) {
	plain := ApiProps{Kinds: []ApiKind{{Kind: "a", Dedup: []string{ApiRuleUnique}}}}
	debounced := ApiProps{Kinds: []ApiKind{{Kind: "a", Dedup: []string{ApiRuleDebounce}}}}
	p, d := envSize(plain.environment(longestApiRefs)), envSize(debounced.environment(longestApiRefs))
	want := len(EnvScheduleGroup) + 64 + len(EnvQueueARN) + len(longestApiRefs.queueARN) + len(EnvSchedulerRoleARN) +
		len(longestApiRefs.schedulerRoleARN) + len(EnvSchedulerDLQARN) + len(longestApiRefs.schedulerDLQ) + len("debounce") - len("unique")
	if d-p != want {
		t.Errorf("debounce adds %d bytes to the environment, want %d", d-p, want)
	}
}

var apiDebounceRouted apiShape

// TestApiDebounceRoutedKind: a stack whose API debounces a kind Routes sends to the named queue
// "bulk" synthesizes, and has what pkg/dedup needs to schedule the kind's jobs onto bulk: the
// API gets the queue set and the routes (the queue's ARN comes from its URL in SQSWORKER_QUEUES)
// beside the scheduler's variables (the default queue's ARN, the scheduler role); the API role
// may create, move and delete the group's schedules and pass the scheduler role, and nothing
// more for the debounce; the scheduler role, which the schedules send with, may send to every
// queue of the stack (bulk included) and to its own DLQ, and to nothing else.
func TestApiDebounceRoutedKind(t *testing.T) {
	tmpl, _, _ := apiDebounceRouted.get(t, func() Props {
		p := apiProps("rt", ApiProps{Kinds: dedupKinds})
		p.Queues = []QueueProps{{Name: "bulk"}}
		p.Routes = map[string]string{"report.export": "bulk"}
		return p
	}, nil)
	env := apiEnv(t, tmpl)
	if got := env[EnvRoutes]; got != "report.export=bulk" {
		t.Errorf("%s = %q, want report.export=bulk", EnvRoutes, got)
	}
	if got := env[EnvQueues]; !strings.Contains(got, "default=") || !strings.Contains(got, ",bulk=") || !strings.Contains(got, "JobsQueueBulk") {
		t.Errorf("%s = %q, want the default queue and bulk", EnvQueues, got)
	}
	for k, want := range map[string]string{EnvScheduleGroup: "rt-jobs", EnvQueueARN: queueArn, EnvSchedulerRoleARN: schedRole, EnvSchedulerDLQARN: schedDLQArn} {
		if env[k] != want {
			t.Errorf("%s = %q, want %q", k, env[k], want)
		}
	}

	api := grants(t, tmpl, "JobsApiRole")
	var bulk string // the bulk queue's rendered ARN
	for r := range api {
		if strings.HasPrefix(r, "JobsQueueBulk") && !strings.Contains(r, "DLQ") {
			bulk = r
		}
	}
	if bulk == "" {
		t.Fatalf("the API may not send to the bulk queue: %v", api)
	}
	checkGrants(t, "JobsApiRole", api, map[string][]string{
		"JobsApiLogs.Arn":         {"logs:CreateLogStream", "logs:PutLogEvents"},
		queueArn:                  sendOnly,
		bulk:                      sendOnly,
		tableArn:                  ApiTableActions,
		tableArn + "/index/by_id": {"dynamodb:Query"},
		schedulesOf("rt-jobs"):    {"scheduler:CreateSchedule", "scheduler:DeleteSchedule", "scheduler:UpdateSchedule"},
		schedRole:                 {"iam:PassRole"},
	})
	checkGrants(t, "JobsSchedulerRole", grants(t, tmpl, "JobsSchedulerRole"), map[string][]string{
		queueArn:    sendOnly,
		bulk:        sendOnly,
		schedDLQArn: sendOnly,
	})
}
