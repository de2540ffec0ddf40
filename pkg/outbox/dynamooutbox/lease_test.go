package dynamooutbox_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// slowClaimsDB answers every successful claim (the UpdateItem that adds an attempt) `delay` late,
// as a loaded or throttled table does: the write is done, its answer comes later.
type slowClaimsDB struct {
	dynamooutbox.DynamoDBAPI
	delay time.Duration
}

func (s slowClaimsDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := s.DynamoDBAPI.UpdateItem(ctx, in, o...)
	if err == nil && strings.HasPrefix(aws.ToString(in.UpdateExpression), "SET #at = #at + :one") {
		time.Sleep(s.delay) // the simulated latency of the answer, not a wait for a condition
	}
	return out, err
}

// TestEmulatorRelaysSlowerThanTheirLeaseSendEachJobOnce: four sweeper relays whose claims take
// longer than their lease (a pass of 100 claims, each answered 40 ms late, one at a time: 4 s
// against a 3 s lease), and nothing killed: every job reaches the queue once. Without the lease
// check before the send (and the lease counted from each claim write), a relay sends entries whose
// claim has run out while another relay has claimed and sends them too.
//
// SQSWORKER_LEASE_TEST_JOBS sets the number of jobs (default 300); the test logs what it measured.
func TestEmulatorRelaysSlowerThanTheirLeaseSendEachJobOnce(t *testing.T) {
	t.Parallel()
	n := 300
	if v := os.Getenv("SQSWORKER_LEASE_TEST_JOBS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			t.Fatalf("SQSWORKER_LEASE_TEST_JOBS=%q: want a positive number", v)
		}
	}
	e := newEnv(t, false, dynamooutbox.Config{Status: noStatus{}})
	ob, err := dynamooutbox.New(dynamooutbox.Config{Client: slowClaimsDB{DynamoDBAPI: e.ddb, delay: 40 * time.Millisecond},
		Table: e.ob.Table(), Concurrency: 1, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += 100 {
		var batch []dynamooutbox.Job
		for k := i; k < min(i+100, n); k++ {
			batch = append(batch, e.job(emailArgs{Order: "order", N: k}))
		}
		if _, err := e.ob.Transact(e.ctx, nil, batch...); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total outbox.Stats
	)
	start := time.Now()
	for i := range 4 {
		p, err := producer.New(producer.Config{SQS: e.sqs, QueueURL: e.stack.QueueURL, MaxRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		r, err := outbox.NewRelay(outbox.RelayConfig{Store: ob, Producers: []*producer.Producer{p}, ID: "relay-" + strconv.Itoa(i),
			BatchSize: 100, Lease: 3 * time.Second, PollInterval: 50 * time.Millisecond, Logger: quiet(),
			OnPass: func(st outbox.Stats) {
				mu.Lock()
				total.LeaseShort += st.LeaseShort
				total.Sent += st.Sent
				mu.Unlock()
			}})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = r.Run(ctx) })
	}
	deadline := time.Now().Add(5 * time.Minute)
	for len(e.pending()) > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond) // polling a condition
	}
	cancel()
	wg.Wait()
	elapsed := time.Since(start)
	if left := len(e.pending()); left > 0 {
		t.Fatalf("%d jobs still in the outbox after the deadline", left)
	}

	counts := map[string]int{}
	sends, empty := 0, 0
	for empty < 3 {
		out, err := e.sqs.ReceiveMessage(e.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(e.stack.QueueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 600})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			empty++
			continue
		}
		empty = 0
		for _, m := range out.Messages {
			env, err := jobs.ParseEnvelope(aws.ToString(m.Body))
			if err != nil {
				t.Fatal(err)
			}
			counts[env.ID]++
			sends++
		}
	}
	dups := 0
	for _, c := range counts {
		dups += c - 1
	}
	mu.Lock()
	t.Logf("%d jobs, 4 relays, lease 3 s, claims answered 40 ms late one at a time: %d sends, %d distinct jobs, %d sent twice or more (%d extra sends); %d released for a short claim; %s",
		n, sends, len(counts), countOver(counts, 1), dups, total.LeaseShort, elapsed.Round(100*time.Millisecond))
	mu.Unlock()
	if len(counts) != n || dups != 0 {
		t.Errorf("%d of %d jobs reached the queue, %d extra sends; want each job once", len(counts), n, dups)
	}
}

func countOver(counts map[string]int, k int) int {
	c := 0
	for _, v := range counts {
		if v > k {
			c++
		}
	}
	return c
}

// TestSlowClaimStopsAtAQuarterOfTheLease: on a table whose claims are answered 100 ms late, a
// claim of up to 50 entries (5 s of writes) with an 8 s lease stops before it has them all (at a
// quarter of the lease, 2 s), so that the entries it claimed first still have most of their lease
// when the relay sends them; every lease ends where the claim asked.
func TestSlowClaimStopsAtAQuarterOfTheLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, dynamooutbox.Config{Status: noStatus{}})
	var batch []dynamooutbox.Job
	for k := range 50 {
		batch = append(batch, e.job(emailArgs{Order: "order", N: k}))
	}
	if _, err := e.ob.Transact(e.ctx, nil, batch...); err != nil {
		t.Fatal(err)
	}
	ob, err := dynamooutbox.New(dynamooutbox.Config{Client: slowClaimsDB{DynamoDBAPI: e.ddb, delay: 100 * time.Millisecond},
		Table: e.ob.Table(), Concurrency: 1, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	c := outbox.Claim{Owner: "r", Max: 50, Now: now, Until: now.Add(8 * time.Second)}
	entries, err := ob.Claim(e.ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < 2 || len(entries) == 50 {
		t.Fatalf("claimed %d of 50 entries at 100 ms each; want the claim to stop after a quarter of its 8 s lease", len(entries))
	}
	for _, en := range entries {
		if !en.LockedUntil.Equal(c.Until.Truncate(time.Millisecond)) {
			t.Errorf("entry %s locked until %v, want %v", en.ID(), en.LockedUntil, c.Until)
		}
	}
}
