package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/chromedp/chromedp"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/console"
	"github.com/sqsworker/sqsworker/pkg/queues"
)

// queueStack provisions a stack of three queues on the emulator, with 3 jobs waiting on bulk, 1
// on critical and 2 dead letters in bulk's DLQ, and a read-only console over its queue set.
func queueStack(t *testing.T) (*console.Console, *queues.Set) {
	t.Helper()
	b := awslocaltest.Backend(t)
	client := sqs.NewFromConfig(b.Config)
	ctx := context.Background()
	set, _, err := awslocal.ProvisionQueues(ctx, client, awslocal.StackOptions{Name: awslocal.UniqueName("console-q")},
		queues.Spec{Name: "critical"}, queues.Spec{Name: "bulk"})
	if err != nil {
		t.Fatal(err)
	}
	send := func(url string, n int) {
		for i := range n {
			if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(fmt.Sprint(i))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	bulk, _ := set.Get("bulk")
	critical, _ := set.Get("critical")
	send(bulk.URL, 3)
	send(critical.URL, 1)
	send(bulk.DLQURL, 2)
	def := set.Default()
	c, err := console.New(console.Config{SQS: client, Queues: set, QueueURL: def.URL, DLQURL: def.DLQURL, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	return c, set
}

func TestOverviewShowsEveryQueueAndItsDLQ(t *testing.T) {
	c, set := queueStack(t)
	code, body := newClient(t, c).get("/api/overview")
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var doc struct {
		Queues []struct {
			Role    string `json:"role"`
			Name    string `json:"name"`
			Visible *int   `json:"visible"`
			Error   string `json:"error"`
		} `json:"queues"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	stack := strings.TrimSuffix(set.Default().SQSName(), "-jobs")
	want := []struct {
		role, name string
		visible    int
	}{
		{"job queue default", stack + "-jobs", 0}, {"dead-letter queue default", stack + "-jobs-dlq", 0},
		{"job queue critical", stack + "-jobs-critical", 1}, {"dead-letter queue critical", stack + "-jobs-critical-dlq", 0},
		{"job queue bulk", stack + "-jobs-bulk", 3}, {"dead-letter queue bulk", stack + "-jobs-bulk-dlq", 2},
	}
	if len(doc.Queues) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(doc.Queues), len(want), doc.Queues)
	}
	for i, w := range want {
		q := doc.Queues[i]
		if q.Role != w.role || q.Name != w.name || q.Visible == nil || *q.Visible != w.visible || q.Error != "" {
			t.Errorf("row %d = %+v, want %s %s with %d visible", i, q, w.role, w.name, w.visible)
		}
	}
}

// TestBrowserOverviewRowPerQueue: in headless Chromium the overview's table has a row per queue
// and per DLQ, and its refresh (which redraws the counts from /api/overview) keeps them.
func TestBrowserOverviewRowPerQueue(t *testing.T) {
	path := chromium(t)
	c, _ := queueStack(t)
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	b := newBrowser(t, path)
	b.open(srv.URL + "/")
	rows := eval[int](b, `document.querySelectorAll('#queues tbody tr').length`)
	if rows != 6 {
		t.Errorf("the overview shows %d queue rows, want 6 (three queues, three DLQs)", rows)
	}
	text := b.text("#queues")
	for _, want := range []string{"job queue bulk", "dead-letter queue bulk", "job queue critical", "job queue default"} {
		if !strings.Contains(text, want) {
			t.Errorf("the queue table lacks %q: %s", want, text)
		}
	}
	b.do("wait for a refresh", chromedp.WaitVisible(chromedp.CSS(`body[data-refreshed]`)))
	if n := eval[int](b, `document.querySelectorAll('#queues tbody tr').length`); n != 6 {
		t.Errorf("after a refresh the overview shows %d rows, want 6", n)
	}
	b.shot("overview-queues")
	b.check("overview")
}
