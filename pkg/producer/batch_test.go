package producer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

func emailRequests(n int) []Request {
	reqs := make([]Request, n)
	for i := range reqs {
		reqs[i] = Request{Args: emailArgs{To: fmt.Sprintf("user%d@example.com", i)}, Options: []Option{WithKey(fmt.Sprintf("k%d", i))}}
	}
	return reqs
}

// failEntries answers a batch call with the given entries failed and the rest successful.
func failEntries(call int, in *sqs.SendMessageBatchInput, code string, senderFault bool, ids ...string) *sqs.SendMessageBatchOutput {
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		failed := false
		for _, id := range ids {
			failed = failed || aws.ToString(e.Id) == id
		}
		if failed {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String(code), Message: aws.String("nope"), SenderFault: senderFault})
		} else {
			out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String(fmt.Sprintf("m%d-%s", call, aws.ToString(e.Id)))})
		}
	}
	return out
}

func TestEnqueueBatchChunksByCount(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 9, 10, 11, 25} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			api := &fakeSQS{}
			p := newTestProducer(t, api, stdURL)
			results, err := p.EnqueueBatch(context.Background(), emailRequests(n))
			if err != nil {
				t.Fatal(err)
			}
			calls := api.batchCalls()
			if want := (n + 9) / 10; len(calls) != want {
				t.Fatalf("%d SendMessageBatch calls, want %d", len(calls), want)
			}
			for c, entries := range calls {
				for k, e := range entries {
					i := c*10 + k
					env := decodeBody(t, e.Body)
					if e.ID != fmt.Sprint(k) || env.ID != results[i].ID || env.Key != fmt.Sprintf("k%d", i) {
						t.Errorf("call %d entry %d: id %q, envelope %+v, result %+v", c, k, e.ID, env, results[i])
					}
					if results[i].MessageID != fmt.Sprintf("m%d-%d", c+1, k) || results[i].Err != nil {
						t.Errorf("result %d = %+v", i, results[i])
					}
				}
			}
		})
	}
}

func TestEnqueueBatchChunksBySize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		jobs      int
		dataBytes int
		wantCalls []int // entries per call
	}{
		{"3 x 400 KiB", 3, 400 << 10, []int{2, 1}},
		{"12 x 150 KiB", 12, 150 << 10, []int{6, 6}},
		{"3 x max size", 3, MaxMessageSize - 200, []int{1, 1, 1}},
		{"20 x 50 KiB", 20, 50 << 10, []int{10, 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			api := &fakeSQS{}
			p := newTestProducer(t, api, stdURL)
			reqs := make([]Request, tt.jobs)
			for i := range reqs {
				reqs[i] = Request{Args: blobArgs{Data: strings.Repeat("x", tt.dataBytes)}}
			}
			results, err := p.EnqueueBatch(context.Background(), reqs)
			if err != nil {
				t.Fatal(err)
			}
			if err := JoinErrors(results); err != nil {
				t.Fatal(err)
			}
			calls := api.batchCalls()
			var got []int
			for _, entries := range calls {
				got = append(got, len(entries))
				size := 0
				for _, e := range entries {
					size += e.size()
				}
				if size > MaxBatchRequestSize {
					t.Errorf("request of %d bytes, above %d", size, MaxBatchRequestSize)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.wantCalls) {
				t.Errorf("entries per call = %v, want %v", got, tt.wantCalls)
			}
		})
	}
}

func TestEnqueueBatchInvalidJobsAreNotSent(t *testing.T) {
	t.Parallel()
	api := &fakeSQS{}
	p := newTestProducer(t, api, stdURL)
	reqs := emailRequests(4)
	reqs[1] = Request{Args: badKindArgs{}}
	reqs[2].Options = append(reqs[2].Options, WithDelay(time.Hour))
	results, err := p.EnqueueBatch(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, results[1].Err, "producer: job 1 (job): args producer.badKindArgs: kind \"Bad Kind\"")
	mustContain(t, results[2].Err, "producer: job 2 (email.send): delay 1h0m0s is longer than SQS's 15-minute maximum")
	if !errors.Is(results[2].Err, ErrNeedsScheduler) {
		t.Errorf("%v does not wrap ErrNeedsScheduler", results[2].Err)
	}
	calls := api.batchCalls()
	if len(calls) != 1 || len(calls[0]) != 2 {
		t.Fatalf("calls = %v, want one call of 2 entries", calls)
	}
	for _, i := range []int{0, 3} {
		if results[i].Err != nil || results[i].MessageID == "" {
			t.Errorf("result %d = %+v", i, results[i])
		}
	}
	if err := JoinErrors(results); err == nil || !strings.Contains(err.Error(), "job 1") || !strings.Contains(err.Error(), "job 2") {
		t.Errorf("JoinErrors = %v", err)
	}
}

func TestEnqueueBatchAllInvalid(t *testing.T) {
	t.Parallel()
	api := &fakeSQS{}
	p := newTestProducer(t, api, fifoURL)
	results, err := p.EnqueueBatch(context.Background(), emailRequests(3)) // no group ids
	if err != nil {
		t.Fatalf("EnqueueBatch error %v, want per-job errors only", err)
	}
	for i, r := range results {
		mustContain(t, r.Err, fmt.Sprintf("producer: job %d (email.send): no message group id", i))
	}
	if len(api.batchCalls()) != 0 {
		t.Error("invalid jobs were sent")
	}
	if results, err := p.EnqueueBatch(context.Background(), nil); err != nil || len(results) != 0 {
		t.Errorf("empty batch: %v, %v", results, err)
	}
}

func TestEnqueueBatchPartialFailure(t *testing.T) {
	t.Parallel()
	api := &fakeSQS{onBatch: func(call int, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
		return failEntries(call, in, "InvalidParameterValue", true, "3", "7"), nil
	}}
	p := newTestProducer(t, api, stdURL)
	results, err := p.EnqueueBatch(context.Background(), emailRequests(10))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(api.batchCalls()); n != 1 {
		t.Errorf("%d calls: a sender fault must not be retried", n)
	}
	for i, r := range results {
		if i != 3 && i != 7 {
			if r.Err != nil || r.MessageID != fmt.Sprintf("m1-%d", i) {
				t.Errorf("result %d = %+v", i, r)
			}
			continue
		}
		mustContain(t, r.Err, fmt.Sprintf("producer: job %d (email.send, id %s): SQS rejected the message: InvalidParameterValue: nope (sender fault, after 1 attempt)", i, r.ID))
		var ee *EntryError
		if !errors.As(r.Err, &ee) || ee.Code != "InvalidParameterValue" || ee.Retryable() || r.MessageID != "" {
			t.Errorf("result %d: %+v, entry error %+v", i, r, ee)
		}
	}
}

func TestEnqueueBatchRetriesThrottledEntries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		code        string
		senderFault bool
	}{
		{"RequestThrottled", "RequestThrottled", true},
		{"KmsThrottled", "KmsThrottled", true},
		{"qualified code", "AWS.SimpleQueueService.RequestThrottled", true},
		{"InternalError", "InternalError", false},
		{"ServiceUnavailable", "ServiceUnavailable", false},
		{"any server fault", "Whatever", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			api := &fakeSQS{onBatch: func(call int, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
				switch call {
				case 1:
					return failEntries(call, in, tt.code, tt.senderFault, "2", "5"), nil
				case 2: // entry 5 throttled again
					return failEntries(call, in, tt.code, tt.senderFault, "5"), nil
				}
				return succeedAll(call, in), nil
			}}
			sleeps := &sleepRecorder{}
			p := newTestProducer(t, api, stdURL, func(c *Config) { c.Sleep = sleeps.sleep })
			results, err := p.EnqueueBatch(context.Background(), emailRequests(8))
			if err != nil {
				t.Fatal(err)
			}
			if err := JoinErrors(results); err != nil {
				t.Fatal(err)
			}
			calls := api.batchCalls()
			if len(calls) != 3 || len(calls[1]) != 2 || len(calls[2]) != 1 {
				t.Fatalf("calls have %v entries, want [8 2 1]", entryCounts(calls))
			}
			if calls[1][0].Body != calls[0][2].Body || calls[1][1].Body != calls[0][5].Body || calls[2][0].Body != calls[0][5].Body {
				t.Error("retries did not resend the failed entries")
			}
			if results[2].MessageID != "m2-2" || results[5].MessageID != "m3-5" || results[0].MessageID != "m1-0" {
				t.Errorf("message ids %q %q %q", results[0].MessageID, results[2].MessageID, results[5].MessageID)
			}
			// base 50ms, then 100ms; equal jitter with Rand 0.5 waits 3/4 of each.
			if want := []time.Duration{37500 * time.Microsecond, 75 * time.Millisecond}; fmt.Sprint(sleeps.waits) != fmt.Sprint(want) {
				t.Errorf("waits = %v, want %v", sleeps.waits, want)
			}
		})
	}
}

func entryCounts(calls [][]sentEntry) []int {
	var n []int
	for _, c := range calls {
		n = append(n, len(c))
	}
	return n
}

func TestEnqueueBatchRetriesExhausted(t *testing.T) {
	t.Parallel()
	api := &fakeSQS{onBatch: func(call int, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
		return failEntries(call, in, "ServiceUnavailable", false, "1"), nil
	}}
	sleeps := &sleepRecorder{}
	p := newTestProducer(t, api, stdURL, func(c *Config) {
		c.MaxRetries = 2
		c.Sleep = sleeps.sleep
		c.RetryBaseDelay = 10 * time.Millisecond
		c.RetryMaxDelay = 15 * time.Millisecond
		c.Rand = func() float64 { return 0 }
	})
	results, err := p.EnqueueBatch(context.Background(), emailRequests(3))
	if err != nil {
		t.Fatal(err)
	}
	if got := entryCounts(api.batchCalls()); fmt.Sprint(got) != "[3 1 1]" {
		t.Errorf("entries per call = %v, want [3 1 1]", got)
	}
	mustContain(t, results[1].Err, "SQS rejected the message: ServiceUnavailable: nope (server fault, after 3 attempts)")
	var ee *EntryError
	if !errors.As(results[1].Err, &ee) || ee.Attempts != 3 || !ee.Retryable() {
		t.Errorf("entry error %+v", ee)
	}
	if fmt.Sprint(sleeps.waits) != "[5ms 7.5ms]" { // capped at 15ms, half of it with Rand 0
		t.Errorf("waits = %v", sleeps.waits)
	}

	// With retries disabled, the first rejection is final.
	api2 := &fakeSQS{onBatch: api.onBatch}
	p2 := newTestProducer(t, api2, stdURL, func(c *Config) { c.MaxRetries = -1 })
	results, _ = p2.EnqueueBatch(context.Background(), emailRequests(3))
	mustContain(t, results[1].Err, "after 1 attempt)")
	if n := len(api2.batchCalls()); n != 1 {
		t.Errorf("%d calls with retries disabled", n)
	}
}

func TestEnqueueBatchRetryAbandoned(t *testing.T) {
	t.Parallel()
	api := &fakeSQS{onBatch: func(call int, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
		return failEntries(call, in, "RequestThrottled", true, "0"), nil
	}}
	sleeps := &sleepRecorder{err: context.Canceled}
	p := newTestProducer(t, api, stdURL, func(c *Config) { c.Sleep = sleeps.sleep })
	results, err := p.EnqueueBatch(context.Background(), emailRequests(2))
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, results[0].Err, "RequestThrottled", "retry abandoned: context canceled")
	if !errors.Is(results[0].Err, context.Canceled) || results[1].Err != nil {
		t.Errorf("results = %+v", results)
	}
}

func TestEnqueueBatchWholeCallFailure(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	t.Run("every call fails", func(t *testing.T) {
		t.Parallel()
		api := &fakeSQS{onBatch: func(int, *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) { return nil, boom }}
		p := newTestProducer(t, api, stdURL)
		reqs := emailRequests(12)
		reqs[4] = Request{Args: sliceArgs{}}
		results, err := p.EnqueueBatch(context.Background(), reqs)
		mustContain(t, err, "producer: EnqueueBatch: no job sent: boom")
		for i, r := range results {
			if i == 4 {
				mustContain(t, r.Err, "must encode to a JSON object")
				continue
			}
			mustContain(t, r.Err, fmt.Sprintf("producer: job %d (email.send, id %s): not sent: SQS SendMessageBatch: boom", i, r.ID))
			if !errors.Is(r.Err, boom) {
				t.Errorf("result %d does not wrap the call error", i)
			}
		}
	})
	t.Run("one chunk fails", func(t *testing.T) {
		t.Parallel()
		api := &fakeSQS{onBatch: func(call int, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
			if call == 1 {
				return nil, boom
			}
			return succeedAll(call, in), nil
		}}
		p := newTestProducer(t, api, stdURL)
		results, err := p.EnqueueBatch(context.Background(), emailRequests(15))
		if err != nil {
			t.Fatalf("EnqueueBatch error %v: some jobs were sent", err)
		}
		for i, r := range results {
			if (r.Err != nil) != (i < 10) {
				t.Errorf("result %d = %+v", i, r)
			}
		}
	})
	t.Run("retry call fails", func(t *testing.T) {
		t.Parallel()
		api := &fakeSQS{onBatch: func(call int, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
			if call == 1 {
				return failEntries(call, in, "RequestThrottled", true, "1"), nil
			}
			return nil, boom
		}}
		p := newTestProducer(t, api, stdURL)
		results, err := p.EnqueueBatch(context.Background(), emailRequests(2))
		if err != nil {
			t.Fatal(err)
		}
		mustContain(t, results[1].Err, "RequestThrottled", "retry failed: SQS SendMessageBatch: boom")
		if results[0].Err != nil {
			t.Errorf("result 0 = %+v", results[0])
		}
	})
	t.Run("context done", func(t *testing.T) {
		t.Parallel()
		api := &fakeSQS{}
		p := newTestProducer(t, api, stdURL)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		results, err := p.EnqueueBatch(ctx, emailRequests(3))
		if !errors.Is(err, context.Canceled) || len(api.batchCalls()) != 0 {
			t.Fatalf("err = %v, %d calls", err, len(api.batchCalls()))
		}
		for _, r := range results {
			if !errors.Is(r.Err, context.Canceled) {
				t.Errorf("result %+v", r)
			}
		}
	})
}

func TestEnqueueBatchUnreportedEntry(t *testing.T) {
	t.Parallel()
	api := &fakeSQS{onBatch: func(call int, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
		out := succeedAll(call, in)
		out.Successful = out.Successful[1:] // entry 0 vanishes
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: aws.String("bogus")})
		return out, nil
	}}
	p := newTestProducer(t, api, stdURL)
	results, err := p.EnqueueBatch(context.Background(), emailRequests(2))
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, results[0].Err, "response did not report this message")
	if results[1].Err != nil || len(api.batchCalls()) != 1 {
		t.Errorf("results %+v, %d calls", results, len(api.batchCalls()))
	}
}

func TestEnqueueBatchFIFOAndTrace(t *testing.T) {
	t.Parallel()
	api := &fakeSQS{onBatch: func(call int, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
		out := succeedAll(call, in)
		for i := range out.Successful {
			out.Successful[i].SequenceNumber = aws.String(fmt.Sprintf("seq-%d", i))
		}
		return out, nil
	}}
	p := newTestProducer(t, api, fifoURL)
	ctx := jobs.WithTraceParent(context.Background(), "00-trace-01")
	reqs := []Request{
		{Args: emailArgs{To: "a"}, Options: []Option{WithGroupID("g1"), WithKey("k1")}},
		{Args: emailArgs{To: "b"}, Options: []Option{WithGroupID("g2"), WithMeta("tenant", "acme")}},
		{Args: emailArgs{To: "c"}, Options: []Option{WithGroupID("g1"), WithDeduplicationID("dd")}},
	}
	results, err := p.EnqueueBatch(ctx, reqs)
	if err != nil || JoinErrors(results) != nil {
		t.Fatal(err, JoinErrors(results))
	}
	entries := api.batchCalls()[0]
	wants := []struct{ group, dedup string }{{"g1", "email.send:k1"}, {"g2", "email.send:" + results[1].ID}, {"g1", "dd"}}
	for i, w := range wants {
		if entries[i].Group != w.group || entries[i].Dedup != w.dedup || results[i].SequenceNumber != fmt.Sprintf("seq-%d", i) {
			t.Errorf("entry %d: group %q dedup %q seq %q", i, entries[i].Group, entries[i].Dedup, results[i].SequenceNumber)
		}
		env := decodeBody(t, entries[i].Body)
		if env.Meta["traceparent"] != "00-trace-01" {
			t.Errorf("entry %d meta = %v", i, env.Meta)
		}
	}
	if env := decodeBody(t, entries[1].Body); env.Meta["tenant"] != "acme" || len(env.Meta) != 2 {
		t.Errorf("entry 1 meta = %v", env.Meta)
	}
}

func TestProducerConcurrentUse(t *testing.T) {
	t.Parallel()
	api := &fakeSQS{}
	p := newTestProducer(t, api, stdURL)
	ctx := jobs.WithTraceParent(context.Background(), "tp")
	const workers, each = 4, 20
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			for i := range each {
				var err error
				if i%2 == 0 {
					_, err = p.Enqueue(ctx, emailArgs{To: fmt.Sprintf("w%d-%d", w, i)}, WithMeta("w", fmt.Sprint(w)))
				} else {
					var results []Result
					results, err = p.EnqueueBatch(ctx, emailRequests(3))
					if err == nil {
						err = JoinErrors(results)
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range api.sendCalls() {
		env := decodeBody(t, s.Body)
		if want := `{"to":"w` + env.Meta["w"] + "-"; !strings.HasPrefix(string(env.Args), want) {
			t.Errorf("envelope args %s do not match meta %v: buffers shared between calls?", env.Args, env.Meta)
		}
	}
	want := workers*(each/2) + workers*(each/2)*3 // Enqueue calls + 3 jobs per EnqueueBatch call
	if n := len(api.sendCalls()) + 3*len(api.batchCalls()); n != want {
		t.Errorf("%d jobs sent, want %d", n, want)
	}
}
