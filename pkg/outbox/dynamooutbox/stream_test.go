package dynamooutbox_test

// The stream relay's reporting (what becomes a batch item failure, and what does not), the
// FIFO limits of a batch, and how released jobs come due, against the emulator. The stream
// records are built from the items the transactions wrote, as the event source mapping delivers
// them (the emulator's transactions emit no stream records: docs/OUTBOX.md).

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// streamEvent is the batch of INSERT records of jobs, with sequence numbers 100, 200, ….
func streamEvent(js ...dynamooutbox.Job) events.DynamoDBEvent {
	var ev events.DynamoDBEvent
	for i, j := range js {
		ev.Records = append(ev.Records, events.DynamoDBEventRecord{
			EventName: "INSERT", EventSource: "aws:dynamodb",
			Change: events.DynamoDBStreamRecord{SequenceNumber: seq(i), NewImage: dynamooutbox.ToStreamImage(j.Items[0].Put.Item)},
		})
	}
	return ev
}

func seq(i int) string { return fmt.Sprint(100 * (i + 1)) }

func failedSeqs(resp events.DynamoDBEventResponse) []string {
	var out []string
	for _, f := range resp.BatchItemFailures {
		out = append(out, f.ItemIdentifier)
	}
	slices.Sort(out)
	return out
}

// streamRig is a stream relay whose DynamoDB calls go through a probe, and whose sends are
// counted.
type streamRig struct {
	probe   *probeDDB
	api     *countingSQS
	sr      *dynamooutbox.StreamRelay
	mu      sync.Mutex
	batches []outbox.Stats
}

func (e *env) streamRig(cfg dynamooutbox.StreamRelayConfig, now func() time.Time) *streamRig {
	e.t.Helper()
	rig := &streamRig{probe: newProbe(e.ddb), api: &countingSQS{SQSAPI: e.sqs}}
	ob, err := dynamooutbox.New(dynamooutbox.Config{Client: rig.probe, Table: e.ob.Table(), Logger: quiet(), Now: now})
	if err != nil {
		e.t.Fatal(err)
	}
	p, err := producer.New(producer.Config{SQS: rig.api, QueueURL: e.stack.QueueURL, MaxRetries: -1})
	if err != nil {
		e.t.Fatal(err)
	}
	relay, err := outbox.NewRelay(outbox.RelayConfig{Store: ob, Producers: []*producer.Producer{p}, ID: "stream", Now: now, Logger: quiet(),
		Backoff: jobs.PolicyFunc(func(int) time.Duration { return time.Second })})
	if err != nil {
		e.t.Fatal(err)
	}
	cfg.Outbox, cfg.Relay, cfg.Now, cfg.Logger = ob, relay, now, quiet()
	cfg.OnBatch = func(st outbox.Stats) {
		rig.mu.Lock()
		rig.batches = append(rig.batches, st)
		rig.mu.Unlock()
	}
	if rig.sr, err = dynamooutbox.NewStreamRelay(cfg); err != nil {
		e.t.Fatal(err)
	}
	return rig
}

// failClaims makes the claims (conditional UpdateItems that add an attempt) of the items whose
// key (partition/sort) contains one of the given strings fail with err before DynamoDB sees them.
func failClaims(err error, keys ...string) func(op string, in any) error {
	return func(op string, in any) error {
		u, ok := in.(*dynamodb.UpdateItemInput)
		if !ok || !strings.HasPrefix(aws.ToString(u.UpdateExpression), "SET #at = #at + :one") {
			return nil
		}
		pk := u.Key[dynamooutbox.AttrPK].(*types.AttributeValueMemberS).Value
		sk := u.Key[dynamooutbox.AttrSK].(*types.AttributeValueMemberS).Value
		for _, k := range keys {
			if strings.Contains(pk+"/"+sk, k) {
				return err
			}
		}
		return nil
	}
}

// throttle fails the claims of those items as DynamoDB's throttling does.
func throttle(keys ...string) func(op string, in any) error {
	return failClaims(&types.ProvisionedThroughputExceededException{Message: aws.String("throttled by the test")}, keys...)
}

// awsTypeError is what DynamoDB answers an UpdateItem that adds to an attribute that is not a
// number (the emulator instead leaves the attribute as it is).
func awsTypeError() error {
	return &smithy.GenericAPIError{Code: "ValidationException", Message: "An operand in the update expression has an incorrect data type"}
}

// A claim that fails with an error (throttling) becomes a batch item failure with that record's
// sequence number, so that the mapping retries from it; the other records' jobs are sent. The
// retry, from that record on, sends the job once.
func TestEmulatorStreamRelayReportsAFailedClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, dynamooutbox.Config{Status: noStatus{}})
	a, b, c := e.job(emailArgs{Order: "a"}), e.job(emailArgs{Order: "b"}), e.job(emailArgs{Order: "c"})
	if err := e.placeOrder("o", a, b, c); err != nil {
		t.Fatal(err)
	}
	rig := e.streamRig(dynamooutbox.StreamRelayConfig{}, time.Now)
	rig.probe.setFail(throttle(b.ID()))
	ev := streamEvent(a, b, c)
	resp, err := rig.sr.HandleDynamoDB(e.ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	if got := failedSeqs(resp); !slices.Equal(got, []string{seq(1)}) {
		t.Errorf("batch item failures %v, want [%s] (b's record)", got, seq(1))
	}
	if n := rig.api.counts(); n[a.ID()] != 1 || n[c.ID()] != 1 || n[b.ID()] != 0 {
		t.Errorf("sent %v; want a and c once, b not", n)
	}
	if g, err := e.ob.Get(e.ctx, b.ID()); err != nil || g.State != outbox.StatePending || g.Attempts != 0 || g.LockedBy != "" {
		t.Errorf("b after its failed claim: %+v, %v; want pending, unclaimed", g, err)
	}
	// The mapping retries from b's record (ReportBatchItemFailures: from the lowest failed).
	rig.probe.setFail(nil)
	ev.Records = ev.Records[1:]
	resp, err = rig.sr.HandleDynamoDB(e.ctx, ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("retry: %+v, %v", resp, err)
	}
	for id, n := range rig.api.counts() {
		if n != 1 {
			t.Errorf("job %s sent %d times", id, n)
		}
	}
	if n := len(rig.api.counts()); n != 3 {
		t.Errorf("%d jobs sent, want 3", n)
	}
}

// FIFO through HandleDynamoDB: a failed claim inside a group reports every record of that
// group (the mapping retries from the lowest of them), stops the group there, and leaves the
// other group alone; the retry sends the rest of the group in order, nothing twice.
func TestEmulatorStreamRelayReportsAFailedFIFOClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, dynamooutbox.Config{Status: noStatus{}})
	g1 := e.job(emailArgs{Order: "g", N: 1}, producer.WithGroupID("g"))
	h1 := e.job(emailArgs{Order: "h", N: 1}, producer.WithGroupID("h"))
	g2 := e.job(emailArgs{Order: "g", N: 2}, producer.WithGroupID("g"))
	g3 := e.job(emailArgs{Order: "g", N: 3}, producer.WithGroupID("g"))
	if err := e.placeOrder("o", g1, h1, g2, g3); err != nil {
		t.Fatal(err)
	}
	rig := e.streamRig(dynamooutbox.StreamRelayConfig{}, time.Now)
	rig.probe.setFail(throttle(g2.ID()))
	ev := streamEvent(g1, h1, g2, g3)
	resp, err := rig.sr.HandleDynamoDB(e.ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := failedSeqs(resp), []string{seq(0), seq(2), seq(3)}; !slices.Equal(got, want) {
		t.Errorf("batch item failures %v, want %v (group g's records)", got, want)
	}
	if n := rig.api.counts(); n[g1.ID()] != 1 || n[h1.ID()] != 1 || n[g2.ID()] != 0 || n[g3.ID()] != 0 {
		t.Errorf("sent %v; want g1 and h1, not g2 or g3", n)
	}
	rig.probe.setFail(nil)
	resp, err = rig.sr.HandleDynamoDB(e.ctx, ev) // from the lowest failed sequence number: all of it
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("retry: %+v, %v", resp, err)
	}
	counts := rig.api.counts()
	for _, j := range []dynamooutbox.Job{g1, h1, g2, g3} {
		if counts[j.ID()] != 1 {
			t.Errorf("job %s sent %d times, want once", j.ID(), counts[j.ID()])
		}
	}
	var order []string
	for _, env := range e.drainQueue(4) {
		var a emailArgs
		if err := jsonUnmarshal(env.Args, &a); err != nil {
			t.Fatal(err)
		}
		if a.Order == "g" {
			order = append(order, env.ID)
		}
	}
	if want := []string{g1.ID(), g2.ID(), g3.ID()}; !slices.Equal(order, want) {
		t.Errorf("group g arrived as %v, want %v", order, want)
	}
}

// Stream records of jobs the sweeper has already claimed send nothing and report no failure:
// the claim decides, and a refused claim is not an error.
func TestEmulatorStreamRecordsOfSweptJobsSendNothing(t *testing.T) {
	t.Parallel()
	for _, fifo := range []bool{false, true} {
		t.Run(fmt.Sprintf("fifo=%v", fifo), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, fifo, dynamooutbox.Config{Status: noStatus{}})
			var opts []producer.Option
			if fifo {
				opts = append(opts, producer.WithGroupID("g"))
			}
			a, b := e.job(emailArgs{Order: "a"}, opts...), e.job(emailArgs{Order: "b"}, opts...)
			if err := e.placeOrder("o", a, b); err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			swept, err := e.ob.Claim(e.ctx, outbox.Claim{Owner: "sweeper", Max: 10, Now: now, Until: now.Add(time.Hour)})
			if err != nil || len(swept) != 2 {
				t.Fatalf("the sweeper's claim: %d entries, %v", len(swept), err)
			}
			rig := e.streamRig(dynamooutbox.StreamRelayConfig{}, time.Now)
			resp, err := rig.sr.HandleDynamoDB(e.ctx, streamEvent(a, b))
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Errorf("HandleDynamoDB: %+v, %v; want no failure", resp, err)
			}
			if n := rig.api.counts(); len(n) != 0 {
				t.Errorf("the stream relay sent %v", n)
			}
			if len(rig.batches) != 1 || rig.batches[0] != (outbox.Stats{}) {
				t.Errorf("OnBatch got %+v; want one batch that claimed nothing", rig.batches)
			}
			for _, j := range []dynamooutbox.Job{a, b} {
				if g, err := e.ob.Get(e.ctx, j.ID()); err != nil || g.LockedBy != "sweeper" || g.Attempts != 1 {
					t.Errorf("%s: %+v, %v; want still the sweeper's", j.ID(), g, err)
				}
			}
		})
	}
}

// StreamRelayConfig.MaxPerGroup bounds each group's claims in a batch, whatever the other
// groups leave of the batch's total.
func TestEmulatorStreamMaxPerGroup(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, dynamooutbox.Config{Status: noStatus{}})
	var g []dynamooutbox.Job
	for i := range 5 {
		g = append(g, e.job(emailArgs{Order: "g", N: i}, producer.WithGroupID("g")))
	}
	h := e.job(emailArgs{Order: "h"}, producer.WithGroupID("h"))
	if err := e.placeOrder("o", append(g, h)...); err != nil {
		t.Fatal(err)
	}
	rig := e.streamRig(dynamooutbox.StreamRelayConfig{MaxPerGroup: 2}, time.Now)
	if resp, err := rig.sr.HandleDynamoDB(e.ctx, streamEvent(g[0], h)); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("HandleDynamoDB: %+v, %v", resp, err)
	}
	counts := rig.api.counts()
	if counts[g[0].ID()] != 1 || counts[g[1].ID()] != 1 || counts[h.ID()] != 1 || len(counts) != 3 {
		t.Errorf("sent %d jobs (%v); want g's first two and h", len(counts), counts)
	}
}

// A FIFO job released because the head of its group failed on the stream path is due at once
// once the head is: with SweepAfter a minute, the sweeper sends the head's retry and the
// released job in the same pass, seconds later, not a minute after the commit.
func TestEmulatorReleasedFIFOJobsAreDueAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, dynamooutbox.Config{Status: noStatus{}, SweepAfter: time.Minute})
	a1 := e.job(emailArgs{Order: "a", N: 1}, producer.WithGroupID("a"))
	a2 := e.job(emailArgs{Order: "a", N: 2}, producer.WithGroupID("a"))
	if err := e.placeOrder("o", a1, a2); err != nil {
		t.Fatal(err)
	}
	clk := &clock{now: a1.Entry.CreatedAt} // the stream relay runs in the commit's millisecond
	rig := e.streamRig(dynamooutbox.StreamRelayConfig{}, clk.Now)
	var once sync.Once
	rig.api.reject = func(body string) bool {
		reject := false
		if strings.Contains(body, a1.ID()) {
			once.Do(func() { reject = true })
		}
		return reject
	}
	if resp, err := rig.sr.HandleDynamoDB(e.ctx, streamEvent(a1, a2)); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("HandleDynamoDB: %+v, %v", resp, err)
	}
	if len(rig.batches) != 1 || rig.batches[0].Failed != 1 || rig.batches[0].Released != 1 {
		t.Fatalf("stream batch %+v; want a1 failed and a2 released", rig.batches)
	}
	clk.Add(2 * time.Second) // a1's backoff (1 s) has passed; SweepAfter has not
	sweeper := e.relay("sweeper", clk.Now, rig.api, outbox.RelayConfig{})
	st, err := sweeper.RunOnce(e.ctx)
	if err != nil || st.Sent != 2 {
		t.Fatalf("sweep 2 s after the commit: %+v, %v; want a1 and a2 sent", st, err)
	}
	got := e.drainQueue(2)
	if len(got) != 2 || got[0].ID != a1.ID() || got[1].ID != a2.ID() {
		t.Errorf("queue holds %v, want a1 then a2", got)
	}
}

// Every DynamoDB call of the outbox, whatever its path (enqueue, sweep, stream, write-back,
// inspection, a poison's death, table creation), carries the per-call option that keeps the SDK
// from losing a response and repeating a conditional write (internal/sdkhttp).
func TestEmulatorEveryCallKeepsTheConnection(t *testing.T) {
	t.Parallel()
	for _, fifo := range []bool{false, true} {
		t.Run(fmt.Sprintf("fifo=%v", fifo), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, fifo, dynamooutbox.Config{Status: noStatus{}})
			probe := newProbe(e.ddb)
			table := e.ob.Table() + "-probe"
			if _, err := dynamooutbox.CreateTable(e.ctx, tableProbe{TableAPI: e.ddb, probeDDB: probe}, table); err != nil {
				t.Fatal(err)
			}
			ob, err := dynamooutbox.New(dynamooutbox.Config{Client: probe, Table: table, Logger: quiet()})
			if err != nil {
				t.Fatal(err)
			}
			var opts []producer.Option
			if fifo {
				opts = append(opts, producer.WithGroupID("g"))
			}
			var js []dynamooutbox.Job
			for i := range 4 {
				j, err := ob.Prepare(e.ctx, e.prod, emailArgs{Order: "k", N: i}, opts...)
				if err != nil {
					t.Fatal(err)
				}
				js = append(js, j)
			}
			if _, err := ob.Transact(e.ctx, nil, js...); err != nil {
				t.Fatal(err)
			}
			// A poison whose attempts is not a number: its death reads it (GetItem on AWS).
			poison, _ := ob.Prepare(e.ctx, e.prod, emailArgs{Order: "poison"}, opts...)
			item := poison.Items[0].Put.Item
			item[dynamooutbox.AttrAttempts] = &types.AttributeValueMemberS{Value: "one"}
			if _, err := e.ddb.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
				t.Fatal(err)
			}
			probe.setFail(failClaims(awsTypeError(), poison.ID()))
			p, _ := producer.New(producer.Config{SQS: e.sqs, QueueURL: e.stack.QueueURL})
			rel, _ := outbox.NewRelay(outbox.RelayConfig{Store: ob, Producers: []*producer.Producer{p}, ID: "r", Logger: quiet(),
				Backoff: jobs.PolicyFunc(func(int) time.Duration { return 0 })})
			sr, _ := dynamooutbox.NewStreamRelay(dynamooutbox.StreamRelayConfig{Outbox: ob, Relay: rel, Logger: quiet()})
			// Claim one and fail it (an UpdateItem write-back); then the stream path and the
			// sweeper send the rest (DeleteItem) and kill the poison.
			now := time.Now()
			got, err := ob.Claim(e.ctx, outbox.Claim{Owner: "r", Max: 1, Now: now, Until: now.Add(time.Minute)})
			if err != nil || len(got) != 1 {
				t.Fatalf("claim: %v, %v", got, err)
			}
			if err := ob.Complete(e.ctx, "r", []outbox.Outcome{{ID: got[0].ID(), Attempts: got[0].Attempts, Error: "x", AvailableAt: now}}); err != nil {
				t.Fatal(err)
			}
			if _, err := sr.HandleDynamoDB(e.ctx, streamEvent(js[1])); err != nil {
				t.Fatal(err)
			}
			if _, err := rel.Drain(e.ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := ob.Get(e.ctx, poison.ID()); err != nil {
				t.Fatal(err)
			}
			if _, err := ob.List(e.ctx, outbox.ListQuery{State: outbox.StateDead}); err != nil {
				t.Fatal(err)
			}
			if n, err := ob.CountDead(e.ctx); err != nil || n != 1 {
				t.Errorf("CountDead = %d, %v; want the poison", n, err)
			}
			if err := ob.Retry(e.ctx, poison.ID()); err != nil {
				t.Fatal(err)
			}
			if n, err := ob.CountDead(e.ctx); err != nil || n != 0 {
				t.Errorf("CountDead after the retry = %d, %v", n, err)
			}
			calls, unwrapped := probe.counts()
			for _, op := range []string{"CreateTable", "DescribeTable", "TransactWriteItems", "Query", "UpdateItem", "DeleteItem", "GetItem", "BatchGetItem"} {
				if calls[op] == 0 {
					t.Errorf("no %s call was made: the test does not cover it", op)
				}
			}
			if len(unwrapped) != 0 {
				t.Errorf("calls without sdkhttp.KeepConnection: %v (of %v)", unwrapped, calls)
			}
		})
	}
}
