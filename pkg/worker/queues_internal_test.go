package worker

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// TestSourceQueueOfARecord: a configured QueueURL (and DLQURL) is the source (and DLQ) of records
// from that queue or from no named queue; a record from another queue, reaching a handler that
// was given one QueueURL while several queues feed it, is settled on its own queue and its own
// DLQ (its receipt handle is valid only there), with one warning.
func TestSourceQueueOfARecord(t *testing.T) {
	t.Parallel()
	const (
		jobsARN = "arn:aws:sqs:us-east-1:123456789012:app-jobs"
		bulkARN = "arn:aws:sqs:us-east-1:123456789012:app-jobs-bulk"
		jobsURL = "https://sqs.us-east-1.amazonaws.com/123456789012/app-jobs"
		jobsDLQ = "https://sqs.us-east-1.amazonaws.com/123456789012/app-jobs-dlq"
	)
	tests := []struct {
		name              string
		queueURL, dlqURL  string
		arn               string
		wantQueue, wantDL string
		wantWarning       bool
	}{
		{name: "configured, from it", queueURL: jobsURL, dlqURL: jobsDLQ, arn: jobsARN, wantQueue: jobsURL, wantDL: jobsDLQ},
		{name: "configured, no ARN", queueURL: jobsURL, dlqURL: jobsDLQ, wantQueue: jobsURL, wantDL: jobsDLQ},
		{name: "configured, from another queue", queueURL: jobsURL, dlqURL: jobsDLQ, arn: bulkARN,
			wantQueue: "https://sqs.test/app-jobs-bulk", wantDL: "https://sqs.test/app-jobs-bulk-dlq", wantWarning: true},
		{name: "configured queue, its DLQ looked up, from another", queueURL: jobsURL, arn: bulkARN,
			wantQueue: "https://sqs.test/app-jobs-bulk", wantDL: "https://sqs.test/app-jobs-bulk-dlq", wantWarning: true},
		{name: "nothing configured", arn: bulkARN, wantQueue: "https://sqs.test/app-jobs-bulk", wantDL: "https://sqs.test/app-jobs-bulk-dlq"},
		{name: "one DLQ for every queue", dlqURL: jobsDLQ, arn: bulkARN, wantQueue: "https://sqs.test/app-jobs-bulk", wantDL: jobsDLQ},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			h, err := New(Config{Registry: jobs.NewRegistry(), SQS: newFakeSQS(), QueueURL: tt.queueURL, DLQURL: tt.dlqURL,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for range 2 {
				q, err := h.queueURLFor(ctx, tt.arn)
				if err != nil || q != tt.wantQueue {
					t.Errorf("queue = %q, %v; want %q", q, err, tt.wantQueue)
				}
				d, err := h.dlqURLFor(ctx, tt.arn)
				if err != nil || d != tt.wantDL {
					t.Errorf("DLQ = %q, %v; want %q", d, err, tt.wantDL)
				}
			}
			want := 0
			if tt.wantWarning {
				want = 1
			}
			if n := strings.Count(logs.String(), "a record came from a queue other than Config.QueueURL"); n != want {
				t.Errorf("%d warnings, want %d:\n%s", n, want, logs.String())
			}
		})
	}
}
