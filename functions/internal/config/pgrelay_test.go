package config

import (
	"strings"
	"testing"
	"time"
)

func TestLoadPGRelay(t *testing.T) {
	base := map[string]string{EnvQueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/jobs", EnvOutboxDSN: "postgres://app@db/app"}
	get := func(extra map[string]string) func(string) string {
		return func(k string) string {
			if v, ok := extra[k]; ok {
				return v
			}
			return base[k]
		}
	}
	c, err := LoadPGRelay(get(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.OutboxTable != DefaultOutboxTable || c.BatchSize != 100 || c.Lease != 30*time.Second || c.MaxAttempts != 10 ||
		c.DeadlineMargin != DefaultRelayDeadlineMargin || c.SSLMode != "require" || c.SSLRootCert != "" {
		t.Errorf("defaults: %+v", c)
	}
	for _, tt := range []struct {
		name  string
		extra map[string]string
		want  []string
	}{
		{"nothing", map[string]string{EnvQueueURL: "", EnvOutboxDSN: ""}, []string{"SQSWORKER_QUEUE_URL is required", "SQSWORKER_OUTBOX_DSN or SQSWORKER_OUTBOX_SECRET_ARN is required"}},
		{"both", map[string]string{EnvOutboxSecretARN: "arn:aws:secretsmanager:us-east-1:123456789012:secret:db"}, []string{"both set"}},
		{"bad secret", map[string]string{EnvOutboxDSN: "", EnvOutboxSecretARN: "db-secret"}, []string{"is not an ARN"}},
		{"bad table", map[string]string{EnvOutboxTable: "Outbox"}, []string{"SQSWORKER_OUTBOX_TABLE"}},
		{"bad numbers", map[string]string{EnvOutboxBatchSize: "0", EnvOutboxMaxAttempts: "x", EnvOutboxLease: "10ms"}, []string{"BATCH_SIZE", "MAX_ATTEMPTS", "LEASE"}},
		{"bad sslmode", map[string]string{EnvOutboxSSLMode: "on"}, []string{"not an sslmode"}},
		{"relative root cert", map[string]string{EnvOutboxSSLRootCert: "rds.pem"}, []string{"SQSWORKER_OUTBOX_SSLROOTCERT=\"rds.pem\"", "absolute path"}},
		{"root cert without verification", map[string]string{EnvOutboxSSLRootCert: "/opt/rds.pem", EnvOutboxSSLMode: "prefer"}, []string{"does not verify"}},
		{"half a scheduler", map[string]string{EnvScheduleGroup: "g"}, []string{"go together"}},
		{"bad arns", map[string]string{EnvScheduleGroup: "g", EnvQueueARN: "q", EnvSchedulerRoleARN: "arn:aws:iam::123456789012:role/r"}, []string{"SQSWORKER_QUEUE_ARN=\"q\" is not an ARN"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadPGRelay(get(tt.extra))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	c, err = LoadPGRelay(get(map[string]string{EnvOutboxSSLMode: "verify-full", EnvOutboxSSLRootCert: "/opt/rds/global-bundle.pem"}))
	if err != nil || c.SSLMode != "verify-full" || c.SSLRootCert != "/opt/rds/global-bundle.pem" {
		t.Errorf("verify-full with a CA bundle: %+v, %v", c, err)
	}
	c, err = LoadPGRelay(get(map[string]string{EnvScheduleGroup: "g", EnvQueueARN: "arn:aws:sqs:us-east-1:123456789012:jobs",
		EnvSchedulerRoleARN: "arn:aws:iam::123456789012:role/r", EnvOutboxTable: "app.outbox", EnvPayloadBucket: "big"}))
	if err != nil || c.ScheduleGroup != "g" || c.OutboxTable != "app.outbox" || c.PayloadBucket != "big" {
		t.Errorf("scheduler settings: %+v, %v", c, err)
	}
}
