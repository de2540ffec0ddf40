package config

import (
	"strings"
	"testing"
	"time"
)

func TestLoadLongJobs(t *testing.T) {
	get := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	c, err := LoadLongJobs(get(nil))
	if err != nil || c.Slice != 0 || c.SliceGrace != 0 || c.Scheduler() {
		t.Errorf("defaults: %+v, %v", c, err)
	}
	c, err = LoadLongJobs(get(map[string]string{EnvSlice: "10m", EnvSliceGrace: "3s", EnvScheduleGroup: "g",
		EnvQueueARN: "arn:aws:sqs:us-east-1:123456789012:jobs", EnvSchedulerRoleARN: "arn:aws:iam::123456789012:role/r",
		EnvSchedulerDLQARN: "arn:aws:sqs:us-east-1:123456789012:jobs-scheduler-dlq"}))
	if err != nil || c.Slice != 10*time.Minute || c.SliceGrace != 3*time.Second || !c.Scheduler() || c.ScheduleGroup != "g" ||
		c.SchedulerDLQARN != "arn:aws:sqs:us-east-1:123456789012:jobs-scheduler-dlq" {
		t.Errorf("set: %+v, %v", c, err)
	}
	if c, err := LoadLongJobs(get(map[string]string{EnvScheduleGroup: "g"})); err != nil || c.Scheduler() {
		t.Errorf("the group alone (the recurring schedules'): %+v, %v", c, err)
	}
	// The CDK stack with WorkerEnqueues and DisableScheduling sets the queue's ARN alone (for a
	// worker main whose jobs enqueue follow-ups): no scheduler, and no error, or the worker
	// function would not start.
	if c, err := LoadLongJobs(get(map[string]string{EnvQueueARN: "arn:aws:sqs:us-east-1:123456789012:jobs"})); err != nil || c.Scheduler() {
		t.Errorf("the queue's ARN alone (WorkerEnqueues without scheduling): %+v, %v; want no scheduler, no error", c, err)
	}
	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{EnvSlice: "500ms"}, "SQSWORKER_SLICE=\"500ms\": want a Go duration from 1s"},
		{map[string]string{EnvSlice: "soon"}, "SQSWORKER_SLICE=\"soon\""},
		{map[string]string{EnvSliceGrace: "1h"}, "SQSWORKER_SLICE_GRACE=\"1h\""},
		{map[string]string{EnvSchedulerRoleARN: "arn:aws:iam::123456789012:role/r"}, "go together"},
		{map[string]string{EnvQueueARN: "arn:aws:sqs:us-east-1:123456789012:jobs", EnvSchedulerRoleARN: "arn:aws:iam::123456789012:role/r"}, "go together"},
		{map[string]string{EnvScheduleGroup: "g", EnvQueueARN: "q", EnvSchedulerRoleARN: "arn:aws:iam::123456789012:role/r"}, "SQSWORKER_QUEUE_ARN=\"q\" is not an ARN"},
	} {
		if _, err := LoadLongJobs(get(tt.env)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v, want %q", tt.env, err, tt.want)
		}
	}
}
