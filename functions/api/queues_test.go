package main

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/queues"
)

// TestAPIRoutesEachKindToItsQueue builds the API from its environment with SQSWORKER_QUEUES and
// SQSWORKER_ROUTES on the embedded emulator: a job of a kind routed to bulk lands on bulk, one
// of another kind on the default queue. Not parallel: the AWS configuration comes from the
// process's environment (t.Setenv).
func TestAPIRoutesEachKindToItsQueue(t *testing.T) {
	b := awslocaltest.Backend(t)
	ctx := context.Background()
	client := sqs.NewFromConfig(b.Config)
	set, _, err := awslocal.ProvisionQueues(ctx, client, awslocal.StackOptions{Name: awslocal.UniqueName("api-q")}, queues.Spec{Name: "bulk"})
	if err != nil {
		t.Fatal(err)
	}
	creds, err := b.Config.Credentials.Retrieve(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"AWS_ENDPOINT_URL": b.URL, "AWS_REGION": b.Config.Region, "AWS_ACCESS_KEY_ID": creds.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY": creds.SecretAccessKey, "AWS_SESSION_TOKEN": creds.SessionToken, "AWS_EC2_METADATA_DISABLED": "true"} {
		t.Setenv(k, v)
	}
	env := map[string]string{
		"SQSWORKER_QUEUES":    set.String(),
		"SQSWORKER_ROUTES":    "report.build=bulk",
		"SQSWORKER_API_KINDS": "email.send,report.build",
	}
	api, _, err := setup(ctx, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{`{"kind":"report.build","args":{"month":"2026-11"}}`, `{"kind":"email.send","args":{"to":"a@b.c"}}`} {
		resp, err := api.Handle(ctx, request("POST", "/jobs", body, nil))
		if err != nil || resp.StatusCode != 202 {
			t.Fatalf("POST %s = %d %s, %v", body, resp.StatusCode, resp.Body, err)
		}
	}
	for name, kind := range map[string]string{"bulk": "report.build", "default": "email.send"} {
		q, _ := set.Get(name)
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, m := range out.Messages {
			env, err := jobs.ParseEnvelope(aws.ToString(m.Body))
			if err != nil {
				t.Fatal(err)
			}
			kinds = append(kinds, env.Kind)
		}
		if strings.Join(kinds, ",") != kind {
			t.Errorf("queue %s holds %v, want %s", name, kinds, kind)
		}
	}
}
