package main

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/queues"
)

// TestUIWorksOnEveryQueue: `sqsworker ui` on a stack of several queues works on each queue's
// DLQ (built as `dlq --queue` builds it), refuses a queue the stack lacks, and its Enqueue page
// sends a kind to the queue --routes names.
func TestUIWorksOnEveryQueue(t *testing.T) {
	b := backend(t)
	client := sqs.NewFromConfig(b.Config)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stack := awslocal.UniqueName("cli-ui-queues")
	set, _, err := awslocal.ProvisionQueues(ctx, client, awslocal.StackOptions{Name: stack}, queues.Spec{Name: "critical"}, queues.Spec{Name: "bulk"})
	if err != nil {
		t.Fatal(err)
	}
	bulk, _ := set.Get("bulk")
	bulkURL, bulkDLQ := b.QueueURL(bulk.URL), b.QueueURL(bulk.DLQURL)
	body := `{"v":1,"id":"01JD5Q2Y7V3M8K4N6P0R2T4W6X","kind":"import.run","key":"b","args":{"file":"b.csv"}}`
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(bulkDLQ), MessageBody: aws.String(body)}); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr syncBuffer
	const tok = "cli-test-token-0123456789"
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"ui", "--stack", stack, "--endpoint", b.URL, "--addr", "127.0.0.1:0", "--token", tok,
			"--routes", "import.run=bulk"}, &stdout, &stderr)
	}()
	var base string
	for deadline := time.Now().Add(30 * time.Second); base == ""; time.Sleep(50 * time.Millisecond) {
		if m := consoleLine.FindStringSubmatch(stdout.String()); m != nil {
			base = m[1]
			break
		}
		select {
		case code := <-done:
			t.Fatalf("ui exited %d\n%s\n%s", code, stdout.String(), stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("ui printed no address:\n%s\n%s", stdout.String(), stderr.String())
		}
	}
	if code, page := uiGet(t, base+"dlq?queue=bulk", tok); code != 200 || !strings.Contains(page, "01JD5Q2Y7V3M8K4N6P0R2T4W6X") || !strings.Contains(page, stack+"-jobs-bulk-dlq") {
		t.Fatalf("bulk's Dead letters page: %d\n%s", code, page)
	}
	if code, page := uiGet(t, base+"dlq", tok); code != 200 || strings.Contains(page, "01JD5Q2Y7V3M8K4N6P0R2T4W6X") || !strings.Contains(page, `href="/dlq?queue=critical"`) {
		t.Errorf("the default Dead letters page: %d\n%s", code, page)
	}
	post := func(path string, form url.Values) int {
		t.Helper()
		return uiPost(t, base+path, tok, form)
	}
	if code := post("dlq/purge", url.Values{"queue": {"nope"}, "confirm": {stack + "-jobs-dlq"}}); code != http.StatusNotFound {
		t.Errorf("purge of a queue the stack lacks: %d, want 404", code)
	}
	if code := post("job/redrive", url.Values{"queue": {"bulk"}, "id": {"01JD5Q2Y7V3M8K4N6P0R2T4W6X"}}); code != http.StatusSeeOther {
		t.Fatalf("redrive of bulk's dead letter: %d\n%s", code, stderr.String())
	}
	if code := post("enqueue", url.Values{"kind": {"import.run"}, "args": {`{"file":"c.csv"}`}, "key": {"routed"}}); code != http.StatusSeeOther {
		t.Fatalf("enqueue: %d\n%s", code, stderr.String())
	}
	// Both are on bulk's queue: the redriven job and the routed one.
	kinds := map[string]string{}
	for deadline := time.Now().Add(30 * time.Second); len(kinds) < 2 && time.Now().Before(deadline); {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(bulkURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 60})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			if env, err := jobs.ParseEnvelope(aws.ToString(m.Body)); err == nil {
				kinds[env.Key] = env.Kind
			}
		}
	}
	if kinds["b"] != "import.run" || kinds["routed"] != "import.run" {
		t.Errorf("bulk's queue holds %v, want the redriven job (key b) and the routed one (key routed)", kinds)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("ui did not stop")
	}
}
