package awslocal_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/logging"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
)

func TestProvisionCreatesQueueDLQAndRedrive(t *testing.T) {
	t.Parallel()
	for _, fifo := range []bool{false, true} {
		b := awslocaltest.Backend(t)
		ctx := context.Background()
		client := sqs.NewFromConfig(b.Config)
		name := awslocal.UniqueName("prov")
		st, err := awslocal.Provision(ctx, client, awslocal.StackOptions{Name: name, FIFO: fifo, MaxReceiveCount: 7})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := strings.HasSuffix(st.QueueURL, ".fifo"), fifo; got != want {
			t.Errorf("queue URL %q: fifo suffix %v, want %v", st.QueueURL, got, want)
		}
		if !strings.HasSuffix(st.DLQARN, awslocal.DLQName(name, fifo)) {
			t.Errorf("DLQ ARN %q does not end with %q", st.DLQARN, awslocal.DLQName(name, fifo))
		}
		out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl: aws.String(st.QueueURL), AttributeNames: []sqstypes.QueueAttributeName{"All"},
		})
		if err != nil {
			t.Fatal(err)
		}
		rp := out.Attributes["RedrivePolicy"]
		if !strings.Contains(rp, st.DLQARN) || !strings.Contains(rp, `"7"`) {
			t.Errorf("RedrivePolicy = %s, want the DLQ ARN and maxReceiveCount 7", rp)
		}
		// Both queues take the 1 MiB messages the producer sends (SQS's default is 256 KiB).
		for _, u := range []string{st.QueueURL, st.DLQURL} {
			out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
				QueueUrl: aws.String(u), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameMaximumMessageSize},
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := out.Attributes["MaximumMessageSize"]; got != "1048576" {
				t.Errorf("%s: MaximumMessageSize %s, want 1048576", u, got)
			}
		}
		// Provision is idempotent: a second call finds the same queues.
		again, err := awslocal.Provision(ctx, client, awslocal.StackOptions{Name: name, FIFO: fifo, MaxReceiveCount: 7})
		if err != nil {
			t.Fatal(err)
		}
		if again.QueueURL != st.QueueURL || again.DLQURL != st.DLQURL {
			t.Errorf("second Provision = %+v, want %+v", again, st)
		}
	}
}

func TestProvisionRejectsBadInput(t *testing.T) {
	t.Parallel()
	b := awslocaltest.Backend(t)
	client := sqs.NewFromConfig(b.Config)
	for _, opts := range []awslocal.StackOptions{
		{Name: ""},
		{Name: "has space"},
		{Name: strings.Repeat("x", 61)},
		{Name: "ok", MaxReceiveCount: 1001},
		{Name: "ok", VisibilityTimeout: 43201},
	} {
		if _, err := awslocal.Provision(context.Background(), client, opts); err == nil {
			t.Errorf("Provision(%+v) succeeded, want an error", opts)
		}
	}
}

func TestProvisionTableIsIdempotentWithTTL(t *testing.T) {
	t.Parallel()
	b := awslocaltest.Backend(t)
	ddb := b.DynamoDB()
	stack := awslocal.UniqueName("tbl")
	for range 2 {
		name, err := awslocal.ProvisionTable(context.Background(), ddb, stack)
		if err != nil {
			t.Fatal(err)
		}
		if name != stack+"-jobs" {
			t.Errorf("table name = %q", name)
		}
	}
	d, err := ddb.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(stack + "-jobs")})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(d.Table.GlobalSecondaryIndexes); n != 2 {
		t.Errorf("GSIs = %d, want 2", n)
	}
	ttl, err := ddb.DescribeTimeToLive(context.Background(), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(stack + "-jobs")})
	if err != nil || ttl.TimeToLiveDescription == nil || aws.ToString(ttl.TimeToLiveDescription.AttributeName) != "exp" {
		t.Errorf("TTL = %+v, %v", ttl, err)
	}
}

func TestIsAWSEndpoint(t *testing.T) {
	t.Parallel()
	for endpoint, want := range map[string]bool{
		"https://dynamodb.us-east-1.amazonaws.com":     true,
		"https://sqs.cn-north-1.amazonaws.com.cn":      true,
		"http://localhost:4566":                        false,
		"http://127.0.0.1:38211":                       false,
		"http://amazonaws.com.evil.example":            false,
		"http://localstack:4566/path?x=.amazonaws.com": false,
		"not a url\x7f":                                false,
		"":                                             false,
	} {
		if got := awslocal.IsAWSEndpoint(endpoint); got != want {
			t.Errorf("IsAWSEndpoint(%q) = %v, want %v", endpoint, got, want)
		}
	}
}

// TestEndpointBackendDynamoDBDoesNotWarn: an emulator reached through an endpoint (what
// `sqsworker up --endpoint` does) sends no DynamoDB response checksums; the client must not
// validate them, or the SDK warns on every call.
func TestEndpointBackendDynamoDBDoesNotWarn(t *testing.T) {
	t.Parallel()
	emu := awslocaltest.Backend(t)
	b, err := awslocal.Start(t.Context(), awslocal.Options{Backend: awslocal.Endpoint, Endpoint: emu.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var mu sync.Mutex
	var warnings []string
	b.Config.Logger = logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
		mu.Lock()
		defer mu.Unlock()
		warnings = append(warnings, fmt.Sprintf(string(c)+": "+format, v...))
	})
	name, err := awslocal.ProvisionTable(t.Context(), b.DynamoDB(), awslocal.UniqueName("ep"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.DynamoDB().DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(warnings) > 0 {
		t.Errorf("the SDK logged %d lines, want none: %q", len(warnings), warnings)
	}
}

// TestEndpointWithoutCredentialsNeverAsksInstanceMetadata: on an emulator's endpoint with no
// credentials configured (what `AWS_ENDPOINT_URL=… sqsworker jobs` meets on a laptop), the
// credential chain must not ask the EC2 instance metadata service: a metadata endpoint that
// answers (here a recorder that refuses tokens, as some networks do) made the SDK print "WARN
// falling back to IMDSv1" on every command. The backend falls back to test credentials. Not
// parallel: it empties the credential environment of the process.
func TestEndpointWithoutCredentialsNeverAsksInstanceMetadata(t *testing.T) {
	var asked atomic.Int32
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.Error(w, "forbidden", http.StatusForbidden)
	}))
	defer imds.Close()
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
		"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_WEB_IDENTITY_TOKEN_FILE": "",
		"AWS_EC2_METADATA_DISABLED": "", "AWS_EC2_METADATA_SERVICE_ENDPOINT": imds.URL,
	} {
		t.Setenv(k, v)
	}
	emu := awslocaltest.Backend(t)
	var mu sync.Mutex
	var logged []string
	b, err := awslocal.Start(t.Context(), awslocal.Options{Backend: awslocal.Endpoint, Endpoint: emu.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	creds, err := b.Config.Credentials.Retrieve(t.Context())
	if err != nil || creds.AccessKeyID != "test" {
		t.Errorf("credentials = %+v, %v; want the test credentials", creds, err)
	}
	b.Config.Logger = logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, fmt.Sprintf(string(c)+": "+format, v...))
	})
	if _, err := sqs.NewFromConfig(b.Config).ListQueues(t.Context(), &sqs.ListQueuesInput{}); err != nil {
		t.Fatal(err)
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("the instance metadata service was asked %d times, want never", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logged) > 0 {
		t.Errorf("the SDK logged %q, want nothing", logged)
	}
}

func TestUnknownBackendIsAnError(t *testing.T) {
	t.Parallel()
	_, err := awslocal.Start(context.Background(), awslocal.Options{Backend: "mainframe"})
	if err == nil || err.Error() != `awslocal: unknown backend "mainframe" (want embedded, localstack or endpoint)` {
		t.Errorf("Start = %v", err)
	}
	_, err = awslocal.Start(context.Background(), awslocal.Options{Backend: awslocal.Endpoint})
	if err == nil && os.Getenv("AWS_ENDPOINT_URL") == "" {
		t.Error("the endpoint backend without an endpoint must be an error")
	}
}
