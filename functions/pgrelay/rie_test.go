//go:build unix

package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/functions/internal/rietest"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
)

// The built bootstrap under the Lambda Runtime Interface Emulator, as EventBridge Scheduler
// invokes it: it drains a real outbox into the emulator's queue and answers the summary.
func TestBootstrapUnderRIE(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 12)
	// The only test of this package that runs the bootstrap: built here, with no deadline but
	// the test binary's.
	build := rietest.Once{RIE: true}
	t.Cleanup(build.Remove)
	bootstrap, rie := build.Build(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := rietest.Start(ctx, rie, bootstrap, []string{
		"AWS_ENDPOINT_URL=" + awslocaltest.Backend(t).URL, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=local",
		"AWS_SECRET_ACCESS_KEY=local", "AWS_SESSION_TOKEN=", "AWS_EC2_METADATA_DISABLED=true", "AWS_LAMBDA_FUNCTION_TIMEOUT=30",
		"SQSWORKER_QUEUE_URL=" + f.url, "SQSWORKER_OUTBOX_DSN=" + f.dsn, "SQSWORKER_LOG_LEVEL=debug",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	code, out, err := r.Invoke(ctx, []byte(`{"source":"aws.scheduler"}`))
	if err != nil {
		t.Fatalf("invoke: %v\n%s", err, r.Output())
	}
	var s summary
	if code != 200 || json.Unmarshal(out, &s) != nil || s.Sent != 12 || s.Stopped != "empty" {
		t.Fatalf("HTTP %d %s\n%s", code, out, r.Output())
	}
	if !strings.Contains(r.Output(), `"OutboxSent":12`) {
		t.Errorf("no EMF line with the sent jobs in the function's output:\n%s", r.Output())
	}
}
