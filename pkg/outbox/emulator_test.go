package outbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// Four relays race over one outbox on the emulator: every entry reaches the queue exactly once.
func TestEmulatorRelaysRaceAndSendEachEntryOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := sqs.NewFromConfig(awslocaltest.Backend(t).Config)
	stack, err := awslocal.Provision(ctx, client, awslocal.StackOptions{Name: awslocal.UniqueName(t.Name())})
	if err != nil {
		t.Fatal(err)
	}
	p, err := producer.New(producer.Config{SQS: client, QueueURL: stack.QueueURL})
	if err != nil {
		t.Fatal(err)
	}
	const n = 400
	s := outbox.NewMemoryStore()
	for i := 0; i < n; i += 20 {
		var tx []outbox.Entry
		for k := i; k < i+20; k++ {
			m, err := p.Prepare(ctx, orderArgs{Order: fmt.Sprint(k)})
			if err != nil {
				t.Fatal(err)
			}
			tx = append(tx, outbox.Entry{Message: m, CreatedAt: time.Now()})
		}
		if err := s.Add(tx...); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var total outbox.Stats
	for i := range 4 {
		r, err := outbox.NewRelay(outbox.RelayConfig{Store: s, Producers: []*producer.Producer{p}, ID: fmt.Sprintf("relay-%d", i), BatchSize: 25, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			st, err := r.Drain(ctx)
			if err != nil {
				t.Errorf("relay %d: %v", i, err)
			}
			mu.Lock()
			total.Sent += st.Sent
			mu.Unlock()
		})
	}
	wg.Wait()
	if total.Sent != n || s.Len() != 0 {
		t.Fatalf("relays sent %d of %d; %d left in the outbox", total.Sent, n, s.Len())
	}
	seen := map[string]int{}
	deadline := time.Now().Add(60 * time.Second)
	for len(seen) < n && time.Now().Before(deadline) {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(stack.QueueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 300})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			env, err := jobs.ParseEnvelope(aws.ToString(m.Body))
			if err != nil {
				t.Fatal(err)
			}
			seen[env.ID]++
		}
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("job %s reached the queue %d times", id, c)
		}
	}
	if len(seen) != n {
		t.Errorf("%d distinct jobs in the queue, want %d", len(seen), n)
	}
}
