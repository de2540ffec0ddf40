//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/functions/internal/rietest"
)

// invokeEnv is the worker's environment under the RIE, as in make invoke: no queue URL (derived
// from each event's ARN), no table (attempt = receive count), and an SDK endpoint that refuses
// connections, so the calls the worker makes for failed items (visibility changes, DLQ sends)
// fail at once. Those items are reported failed — never lost — which the expected responses
// record.
var invokeEnv = []string{
	"AWS_ENDPOINT_URL=http://127.0.0.1:9", "AWS_REGION=us-east-1", "AWS_MAX_ATTEMPTS=1",
	"AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local", "AWS_SESSION_TOKEN=",
	"AWS_EC2_METADATA_DISABLED=true", "AWS_LAMBDA_FUNCTION_TIMEOUT=30",
	"SQSWORKER_QUEUE_URL=", "SQSWORKER_DLQ_URL=", "SQSWORKER_TABLE=", "SQSWORKER_LOG_LEVEL=debug",
}

// The bootstrap and the RIE are built once for the tests of this package.
var build = rietest.Once{RIE: true}

func TestMain(m *testing.M) {
	code := m.Run()
	build.Remove()
	os.Exit(code)
}

// TestEventsUnderRIE builds the worker's bootstrap for the host, runs it under the Lambda
// Runtime Interface Emulator once per events/*.json, and compares each response with the
// event's .expected.json.
func TestEventsUnderRIE(t *testing.T) {
	events, err := filepath.Glob("../../events/*.json")
	if err != nil {
		t.Fatal(err)
	}
	var inputs []string
	for _, e := range events {
		if !strings.HasSuffix(e, ".expected.json") {
			inputs = append(inputs, e)
		}
	}
	if len(inputs) < 5 {
		t.Fatalf("found %d events in ../../events, want at least 5", len(inputs))
	}

	bootstrap, rie := build.Build(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)

	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".json")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			payload, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(strings.TrimSuffix(in, ".json") + ".expected.json")
			if err != nil {
				t.Fatal(err)
			}
			ictx, icancel := context.WithTimeout(ctx, 30*time.Second)
			defer icancel()
			r, err := rietest.Start(ictx, rie, bootstrap, invokeEnv)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(r.Stop)
			code, got, err := r.Invoke(ictx, payload)
			if err != nil {
				t.Fatalf("invoke: %v\n%s", err, r.Output())
			}
			if code != 200 || !equalJSON(t, got, want) {
				t.Errorf("HTTP %d, response\n%s\nwant\n%s\nfunction output:\n%s", code, got, bytes.TrimSpace(want), r.Output())
			}
		})
	}
}

func equalJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Errorf("response is not JSON: %v", err)
		return false
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("expected file is not JSON: %v", err)
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}
