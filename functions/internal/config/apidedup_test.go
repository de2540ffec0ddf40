package config

import (
	"reflect"
	"strings"
	"testing"
)

// TestLoadAPIDedup: SQSWORKER_API_DEDUP allows rules per kind of the allow-list; a rule needs
// the job table, a debounce the scheduler's settings; every problem is one line.
func TestLoadAPIDedup(t *testing.T) {
	t.Parallel()
	base := map[string]string{
		EnvQueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/jobs", EnvAPIKinds: "report.export,search.reindex,email.digest",
		EnvTable: "jobs",
	}
	sched := map[string]string{EnvScheduleGroup: "myapp-jobs", EnvQueueARN: "arn:aws:sqs:us-east-1:123456789012:jobs",
		EnvSchedulerRoleARN: "arn:aws:iam::123456789012:role/sched"}
	with := func(extra ...map[string]string) func(string) string {
		env := map[string]string{}
		for k, v := range base {
			env[k] = v
		}
		for _, m := range extra {
			for k, v := range m {
				env[k] = v
			}
		}
		return func(k string) string { return env[k] }
	}
	c, err := LoadAPI(with(sched, map[string]string{EnvAPIDedup: "report.export=unique, search.reindex=debounce+throttle+debounce"}))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"report.export": {"unique"}, "search.reindex": {"debounce", "throttle"}}
	if !reflect.DeepEqual(c.Dedup, want) || c.Scheduler.ScheduleGroup != "myapp-jobs" || c.Scheduler.RoleARN == "" {
		t.Fatalf("Dedup %v, Scheduler %+v", c.Dedup, c.Scheduler)
	}
	if c, err := LoadAPI(with()); err != nil || c.Dedup != nil {
		t.Fatalf("without the variable: %v, %v", c.Dedup, err)
	}
	for _, tt := range []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{EnvAPIDedup: "report.export"}, []string{`entry "report.export": want kind=rule`}},
		{map[string]string{EnvAPIDedup: "nope.kind=unique"}, []string{`kind "nope.kind" has rules but is not on SQSWORKER_API_KINDS`}},
		{map[string]string{EnvAPIDedup: "report.export=uniq"}, []string{`"uniq" is not a rule`}},
		{map[string]string{EnvAPIDedup: "report.export=unique,report.export=throttle"}, []string{`kind "report.export" is listed twice`}},
		{map[string]string{EnvAPIDedup: "report.export=unique", EnvTable: ""}, []string{"SQSWORKER_API_DEDUP needs SQSWORKER_TABLE"}},
		{map[string]string{EnvAPIDedup: "search.reindex=debounce"}, []string{"needs SQSWORKER_SCHEDULE_GROUP", "needs SQSWORKER_QUEUE_ARN", "needs SQSWORKER_SCHEDULER_ROLE_ARN"}},
	} {
		_, err := LoadAPI(with(tt.env))
		if err == nil {
			t.Errorf("%v: no error", tt.env)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %v, want it to say %q", tt.env, err, w)
			}
		}
	}
}
