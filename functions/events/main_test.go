package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/sqsworker/sqsworker/functions/internal/config"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/jobevents"
)

// recordingBus keeps what the emulator's EventBridge accepted.
type recordingBus struct {
	*eventbridge.Client
	mu     sync.Mutex
	events []jobevents.Event
	source []string
}

func (b *recordingBus) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, o ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	out, err := b.Client.PutEvents(ctx, in, o...)
	if err == nil {
		b.mu.Lock()
		for _, e := range in.Entries {
			var ev jobevents.Event
			if err := json.Unmarshal([]byte(aws.ToString(e.Detail)), &ev); err != nil {
				return nil, err
			}
			b.events = append(b.events, ev)
			b.source = append(b.source, aws.ToString(e.Source)+"/"+aws.ToString(e.EventBusName)+"/"+aws.ToString(e.DetailType))
		}
		b.mu.Unlock()
	}
	return out, err
}

// The function's handler on the emulator's EventBridge, with the sample stream event: two
// finishing writes, two events, no failures; invoked again with the same event (a redelivery),
// the same event ids.
func TestEventsFunctionPublishesTheSample(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := awslocaltest.Backend(t)
	eb := eventbridge.NewFromConfig(b.Config)
	bus := awslocal.UniqueName("jobs-bus")
	if _, err := eb.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String(bus)}); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadEvents(func(k string) string { return map[string]string{config.EnvEventBus: bus}[k] })
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingBus{Client: eb}
	pub, err := newPublisher(rec, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("../../events/streams/job-finished.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		resp, err := pub.HandleDynamoDB(ctx, ev)
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("response %+v, %v", resp, err)
		}
	}
	if len(rec.events) != 4 {
		t.Fatalf("%d events published, want 2 per invocation", len(rec.events))
	}
	a, d := rec.events[0], rec.events[1]
	if a.JobID != "01JDQ3ZV5XG8K2M4N6P8R0T2V5" || a.Kind != "report.build" || a.State != "succeeded" || a.ResultBytes != 11 ||
		a.Table != "myapp-jobs" || a.PreviousState != "running" || a.FinishedAt.UnixMilli() != 1764583202345 {
		t.Errorf("first event %+v", a)
	}
	if d.JobID != "01JDQ41B" || d.Key != "order-42-welcome" || d.State != "dead" || d.Reason != "exhausted" || d.Runs != 5 {
		t.Errorf("second event %+v", d)
	}
	if rec.events[2].ID != a.ID || rec.events[3].ID != d.ID || a.ID == d.ID {
		t.Errorf("a redelivery must publish the same event ids: %s %s / %s %s", a.ID, d.ID, rec.events[2].ID, rec.events[3].ID)
	}
	if rec.source[0] != "sqsworker/"+bus+"/Job Finished" {
		t.Errorf("entry source/bus/detail-type %q", rec.source[0])
	}
	for i := range ev.Records {
		if !jobevents.Filter(&ev.Records[i]) {
			t.Errorf("record %d does not pass the mapping's filter", i)
		}
	}
}

func TestEventsConfig(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{config.EnvEventBus: "bad bus!"}, "SQSWORKER_EVENT_BUS"},
		{map[string]string{config.EnvEventSource: "aws.events"}, "SQSWORKER_EVENT_SOURCE"},
		{map[string]string{"SQSWORKER_LOG_LEVEL": "loud"}, "SQSWORKER_LOG_LEVEL"},
	} {
		_, err := setup(context.Background(), func(k string) string { return tt.env[k] }, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("setup(%v) = %v, want an error naming %s", tt.env, err, tt.want)
		}
	}
	cfg, err := config.LoadEvents(func(string) string { return "" })
	if err != nil || cfg.EventBus != "default" || cfg.Source != "sqsworker" {
		t.Errorf("defaults: %+v, %v", cfg, err)
	}
	if _, err := config.LoadEvents(func(k string) string {
		return map[string]string{config.EnvEventBus: "arn:aws:events:us-east-1:123456789012:event-bus/myapp-jobs"}[k]
	}); err != nil {
		t.Errorf("a bus ARN: %v", err)
	}
}
