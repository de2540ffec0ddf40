//go:build unix

// Package functions_test measures the Lambda functions' cold start under the Runtime Interface
// Emulator against a hello-world Go function built the same way:
//
//	go test -run '^$' -bench ColdStart -benchtime 20x ./functions
//
// Each iteration starts a new RIE (so a new bootstrap process) and times process start → first
// response; bootstrap_MB reports the bootstrap's size.
package functions_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/functions/internal/rietest"
)

func BenchmarkColdStart(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := b.TempDir()
	rie, err := rietest.BuildRIE(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	event, err := os.ReadFile("../events/standard-batch.json")
	if err != nil {
		b.Fatal(err)
	}
	env := []string{
		"AWS_ENDPOINT_URL=http://127.0.0.1:9", "AWS_REGION=us-east-1", "AWS_MAX_ATTEMPTS=1",
		"AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local", "AWS_EC2_METADATA_DISABLED=true",
		"SQSWORKER_LOG_LEVEL=warn",
	}
	// The API answers a function URL GET without a table (501: no AWS call), with an allow-list
	// and one inline schema to compile.
	apiEvent := []byte(`{"version":"2.0","rawPath":"/jobs/01JOB","headers":{},"requestContext":{"http":{"method":"GET","path":"/jobs/01JOB"}}}`)
	apiEnv := append(env[:len(env):len(env)], "SQSWORKER_QUEUE_URL=https://sqs.us-east-1.amazonaws.com/123456789012/jobs",
		"SQSWORKER_API_KINDS=email.send,report.build",
		`SQSWORKER_API_SCHEMAS={"email.send":{"type":"object","required":["to"],"properties":{"to":{"type":"string","format":"email"}}}}`)
	for _, fn := range []struct {
		name, pkg string
		event     []byte
		env       []string
	}{
		{"hello", "./internal/hello", event, env},
		{"worker", "./worker", event, env},
		{"api", "./api", apiEvent, apiEnv},
	} {
		bootstrap := filepath.Join(dir, fn.name, "bootstrap")
		if err := rietest.Build(ctx, fn.pkg, bootstrap); err != nil {
			b.Fatal(err)
		}
		st, err := os.Stat(bootstrap)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fn.name, func(b *testing.B) {
			for b.Loop() {
				ictx, icancel := context.WithTimeout(ctx, 30*time.Second)
				r, err := rietest.Start(ictx, rie, bootstrap, fn.env)
				if err != nil {
					icancel()
					b.Fatal(err)
				}
				code, body, err := r.Invoke(ictx, fn.event)
				r.Stop()
				icancel()
				if err != nil || code != 200 {
					b.Fatalf("invoke: HTTP %d %s %v", code, body, err)
				}
			}
			b.ReportMetric(float64(st.Size())/1e6, "bootstrap_MB")
		})
	}
}
