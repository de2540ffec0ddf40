package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

const (
	stdURL  = "https://sqs.us-east-1.amazonaws.com/123456789012/jobs"
	fifoURL = "https://sqs.us-east-1.amazonaws.com/123456789012/jobs.fifo"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

type orderArgs struct {
	Order string `json:"order"`
}

func (orderArgs) Kind() string { return "order.confirm" }

// fakeSQS answers SendMessageBatch, failing the entries reject says to fail.
type fakeSQS struct {
	mu     sync.Mutex
	bodies []string
	delays []int32 // DelaySeconds of each accepted entry
	reject func(body string) bool
	calls  atomic.Int64
}

func (f *fakeSQS) SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return nil, errors.New("not used")
}

func (f *fakeSQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	n := f.calls.Add(1)
	out := &sqs.SendMessageBatchOutput{}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range in.Entries {
		if f.reject != nil && f.reject(*e.MessageBody) {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InvalidParameterValue"), Message: aws.String("no"), SenderFault: true})
			continue
		}
		f.bodies = append(f.bodies, *e.MessageBody)
		f.delays = append(f.delays, e.DelaySeconds)
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String(fmt.Sprintf("m%d-%s", n, *e.Id))})
	}
	return out, nil
}

func (f *fakeSQS) sent() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.bodies...)
}

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newProducer(t *testing.T, api producer.SQSAPI, url string, clk *clock) *producer.Producer {
	t.Helper()
	p, err := producer.New(producer.Config{SQS: api, QueueURL: url, Clock: clk.Now, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func prepare(t *testing.T, p *producer.Producer, clk *clock, order string, opts ...producer.Option) outbox.Entry {
	t.Helper()
	m, err := p.Prepare(context.Background(), orderArgs{Order: order}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return outbox.Entry{Message: m, CreatedAt: clk.Now()}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestNewRelayValidatesConfig(t *testing.T) {
	t.Parallel()
	p := newProducer(t, &fakeSQS{}, stdURL, &clock{now: t0})
	s := outbox.NewMemoryStore()
	tests := []struct {
		name string
		cfg  outbox.RelayConfig
		want string
	}{
		{"no store", outbox.RelayConfig{Producers: []*producer.Producer{p}}, "RelayConfig.Store is nil"},
		{"no producers", outbox.RelayConfig{Store: s}, "RelayConfig.Producers is empty"},
		{"nil producer", outbox.RelayConfig{Store: s, Producers: []*producer.Producer{nil}}, "Producers[0] is nil"},
		{"two for a queue", outbox.RelayConfig{Store: s, Producers: []*producer.Producer{p, p}}, "two producers for"},
		{"negative lease", outbox.RelayConfig{Store: s, Producers: []*producer.Producer{p}, Lease: -1}, "must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := outbox.NewRelay(tt.cfg)
			if !errors.Is(err, outbox.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewRelay = %v, want ErrInvalid with %q", err, tt.want)
			}
		})
	}
	r, err := outbox.NewRelay(outbox.RelayConfig{Store: s, Producers: []*producer.Producer{p}})
	if err != nil || r.ID() == "" {
		t.Fatalf("NewRelay with defaults: %v, id %q", err, r.ID())
	}
}

func TestRelaySendsAndEmptiesTheOutbox(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	api := &fakeSQS{}
	p := newProducer(t, api, stdURL, clk)
	s := outbox.NewMemoryStore()
	var want []string
	for i := range 25 {
		e := prepare(t, p, clk, fmt.Sprint(i))
		want = append(want, e.Message.Body)
		if err := s.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	r, err := outbox.NewRelay(outbox.RelayConfig{Store: s, Producers: []*producer.Producer{p}, BatchSize: 10, Now: clk.Now, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.Drain(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Claimed != 25 || st.Sent != 25 || st.Passes != 4 || s.Len() != 0 {
		t.Errorf("Drain stats %+v, store holds %d", st, s.Len())
	}
	if got := api.sent(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("sent %d bodies, not the prepared ones in order", len(got))
	}
	// 3 SendMessageBatch calls of 10, 10 and 5: the relay batches.
	if n := api.calls.Load(); n != 3 {
		t.Errorf("%d SendMessageBatch calls, want 3", n)
	}
}

func TestRelayRetriesWithBackoffThenDies(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	api := &fakeSQS{reject: func(body string) bool { return strings.Contains(body, `"order":"poison"`) }}
	p := newProducer(t, api, stdURL, clk)
	s := outbox.NewMemoryStore()
	poison, good := prepare(t, p, clk, "poison"), prepare(t, p, clk, "good")
	if err := s.Add(poison, good); err != nil {
		t.Fatal(err)
	}
	var waits []int
	r, err := outbox.NewRelay(outbox.RelayConfig{Store: s, Producers: []*producer.Producer{p}, Now: clk.Now, MaxAttempts: 3, Logger: quiet(),
		Backoff: jobs.PolicyFunc(func(attempt int) time.Duration {
			waits = append(waits, attempt)
			return time.Duration(attempt) * time.Minute
		})})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, _ := r.RunOnce(ctx)
	if st.Sent != 1 || st.Failed != 1 {
		t.Fatalf("first pass %+v", st)
	}
	e, _ := s.Get(ctx, poison.ID())
	if !e.AvailableAt.Equal(t0.Add(time.Minute)) || !strings.Contains(e.LastError, "InvalidParameterValue") || e.Attempts != 1 {
		t.Errorf("after the first failure: %+v", e)
	}
	if st, _ := r.RunOnce(ctx); st.Claimed != 0 {
		t.Errorf("claimed %d before the retry was due", st.Claimed)
	}
	clk.Add(time.Minute)
	r.RunOnce(ctx) // attempt 2, waits 2 minutes
	clk.Add(2 * time.Minute)
	st, _ = r.RunOnce(ctx) // attempt 3 = MaxAttempts
	if st.Dead != 1 {
		t.Fatalf("third pass %+v", st)
	}
	e, _ = s.Get(ctx, poison.ID())
	if e.State != outbox.StateDead || e.Attempts != 3 || !strings.Contains(e.LastError, "SQS rejected the message") {
		t.Errorf("dead entry %+v", e)
	}
	if fmt.Sprint(waits) != "[1 2]" {
		t.Errorf("backoff asked for attempts %v, want [1 2]", waits)
	}
	clk.Add(time.Hour)
	if st, _ := r.Drain(ctx); st.Claimed != 0 {
		t.Errorf("a dead entry was claimed again: %+v", st)
	}
}

func TestRelayKeepsFIFOOrderAcrossFailures(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	failA2 := atomic.Bool{}
	failA2.Store(true)
	api := &fakeSQS{reject: func(body string) bool { return failA2.Load() && strings.Contains(body, `"order":"a2"`) }}
	p := newProducer(t, api, fifoURL, clk)
	s := outbox.NewMemoryStore()
	for _, o := range []string{"a1", "b1", "a2", "b2", "a3", "b3"} {
		if err := s.Add(prepare(t, p, clk, o, producer.WithGroupID(o[:1]))); err != nil {
			t.Fatal(err)
		}
	}
	r, err := outbox.NewRelay(outbox.RelayConfig{Store: s, Producers: []*producer.Producer{p}, Now: clk.Now, Logger: quiet(),
		Backoff: jobs.PolicyFunc(func(int) time.Duration { return time.Second })})
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.RunOnce(context.Background())
	if err != nil || st.Sent != 4 || st.Failed != 1 || st.Released != 1 {
		t.Fatalf("pass 1: %+v, %v", st, err)
	}
	failA2.Store(false)
	clk.Add(time.Second)
	if _, err := r.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, b := range api.sent() {
		env, err := jobs.ParseEnvelope(b)
		if err != nil {
			t.Fatal(err)
		}
		order = append(order, strings.Trim(string(env.Args)[len(`{"order":`):len(env.Args)-1], `"`))
	}
	var a, b []string
	for _, o := range order {
		if o[0] == 'a' {
			a = append(a, o)
		} else {
			b = append(b, o)
		}
	}
	if fmt.Sprint(a) != "[a1 a2 a3]" || fmt.Sprint(b) != "[b1 b2 b3]" {
		t.Errorf("sent in order %v: group a %v, group b %v", order, a, b)
	}
	if s.Len() != 0 {
		t.Errorf("%d entries left", s.Len())
	}
}

// failingComplete fails the first n write-backs after letting them through to nothing: a relay
// that crashed between the send and the write-back.
type failingComplete struct {
	outbox.Store
	left atomic.Int64
}

func (f *failingComplete) Complete(ctx context.Context, owner string, o []outbox.Outcome) error {
	if f.left.Add(-1) >= 0 {
		return errors.New("relay crashed before the write-back")
	}
	return f.Store.Complete(ctx, owner, o)
}

func TestRelayCrashAfterSendResendsTheSameJob(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	api := &fakeSQS{}
	p := newProducer(t, api, stdURL, clk)
	mem := outbox.NewMemoryStore()
	e := prepare(t, p, clk, "42")
	if err := mem.Add(e); err != nil {
		t.Fatal(err)
	}
	s := &failingComplete{Store: mem}
	s.left.Store(1)
	r1, _ := outbox.NewRelay(outbox.RelayConfig{Store: s, Producers: []*producer.Producer{p}, ID: "r1", Now: clk.Now, Logger: quiet()})
	r2, _ := outbox.NewRelay(outbox.RelayConfig{Store: s, Producers: []*producer.Producer{p}, ID: "r2", Now: clk.Now, Logger: quiet()})
	if _, err := r1.RunOnce(context.Background()); err == nil || !strings.Contains(err.Error(), "will be sent again once their claim expires") {
		t.Fatalf("r1 pass: %v", err)
	}
	if st, _ := r2.RunOnce(context.Background()); st.Claimed != 0 {
		t.Fatalf("r2 claimed inside r1's lease: %+v", st)
	}
	clk.Add(outbox.DefaultLease)
	if st, err := r2.RunOnce(context.Background()); err != nil || st.Sent != 1 {
		t.Fatalf("r2 after the lease: %+v, %v", st, err)
	}
	sent := api.sent()
	if len(sent) != 2 || sent[0] != sent[1] || !strings.Contains(sent[0], `"id":"`+e.ID()+`"`) {
		t.Errorf("sent %q, want the same job twice", sent)
	}
	if mem.Len() != 0 {
		t.Errorf("%d entries left", mem.Len())
	}
}

func TestRelayStopsCleanly(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	api := &fakeSQS{}
	p := newProducer(t, api, stdURL, clk)
	s := outbox.NewMemoryStore()
	wake := make(chan struct{}, 1)
	r, _ := outbox.NewRelay(outbox.RelayConfig{Store: s, Producers: []*producer.Producer{p}, Now: clk.Now, Wake: wake, PollInterval: time.Hour, Logger: quiet()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	if err := s.Add(prepare(t, p, clk, "woken")); err != nil {
		t.Fatal(err)
	}
	wake <- struct{}{} // the poll interval is an hour: only the wake can send it
	deadline := time.Now().Add(30 * time.Second)
	for s.Len() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if s.Len() != 0 {
		t.Fatal("the wake did not start a pass")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v after cancel, want nil", err)
	}
}

func TestRelayReleasesWhatAStopLeftUnsent(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	api := &fakeSQS{}
	p := newProducer(t, api, stdURL, clk)
	s := outbox.NewMemoryStore()
	e := prepare(t, p, clk, "1")
	if err := s.Add(e); err != nil {
		t.Fatal(err)
	}
	r, _ := outbox.NewRelay(outbox.RelayConfig{Store: s, Producers: []*producer.Producer{p}, Now: clk.Now, Logger: quiet()})
	claimed, err := s.Claim(context.Background(), outbox.Claim{Owner: r.ID(), Max: 10, Now: t0, Until: t0.Add(time.Minute)})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v, %v", claimed, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the relay is stopping before it sends
	st, err := r.Publish(ctx, claimed)
	if err != nil || st.Released != 1 || api.calls.Load() != 0 {
		t.Fatalf("Publish = %+v, %v, %d sends; want the entry released unsent", st, err, api.calls.Load())
	}
	got, _ := s.Get(context.Background(), e.ID())
	if got.Attempts != 0 || got.LockedBy != "" || got.LastError != "" {
		t.Errorf("after the stop the entry is %+v: want no attempt spent and no claim", got)
	}
}

// A stop that arrives while a send is in flight does not cut the send off: SQS may accept it
// without the answer arriving, and the entries would be sent twice.
func TestRelayStopDoesNotCutASendOff(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	ctx, cancel := context.WithCancel(context.Background())
	api := &cancellingSQS{cancel: cancel}
	p := newProducer(t, api, stdURL, clk)
	s := outbox.NewMemoryStore()
	if err := s.Add(prepare(t, p, clk, "1")); err != nil {
		t.Fatal(err)
	}
	r, _ := outbox.NewRelay(outbox.RelayConfig{Store: s, Producers: []*producer.Producer{p}, Now: clk.Now, Logger: quiet()})
	st, err := r.RunOnce(ctx)
	if err != nil || st.Sent != 1 || api.cut.Load() {
		t.Fatalf("RunOnce = %+v, %v (send cut off: %v); want the send to complete", st, err, api.cut.Load())
	}
	if s.Len() != 0 {
		t.Errorf("%d entries left: the write-back after a stop did not happen", s.Len())
	}
}

// A batch that crashes every relay that claims it (so no write-back ever happens) ends dead
// once it was claimed more than MaxAttempts times, without being sent again.
func TestRelayGivesUpOnEntriesWhoseClaimsAreNeverWrittenBack(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	api := &fakeSQS{}
	p := newProducer(t, api, stdURL, clk)
	s := outbox.NewMemoryStore()
	e := prepare(t, p, clk, "crash")
	if err := s.Add(e); err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // three relays crash with it in hand
		if _, err := s.Claim(context.Background(), outbox.Claim{Owner: fmt.Sprint("crashed-", i), Max: 1, Now: clk.Now(), Until: clk.Now().Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		clk.Add(time.Minute)
	}
	r, _ := outbox.NewRelay(outbox.RelayConfig{Store: s, Producers: []*producer.Producer{p}, Now: clk.Now, MaxAttempts: 3, Logger: quiet()})
	st, err := r.RunOnce(context.Background())
	if err != nil || st.Dead != 1 || api.calls.Load() != 0 {
		t.Fatalf("RunOnce = %+v, %v, %d sends; want it dead and unsent", st, err, api.calls.Load())
	}
	got, _ := s.Get(context.Background(), e.ID())
	if got.State != outbox.StateDead || !strings.Contains(got.LastError, "claimed 4 times without a write-back") {
		t.Errorf("entry %+v", got)
	}
}

// cancellingSQS cancels the relay's context during the send, then answers success, noting
// whether the send's own context was cut off by it.
type cancellingSQS struct {
	fakeSQS
	cancel context.CancelFunc
	cut    atomic.Bool
}

func (c *cancellingSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	c.cancel()
	if ctx.Err() != nil {
		c.cut.Store(true)
		return nil, ctx.Err()
	}
	return c.fakeSQS.SendMessageBatch(ctx, in, opts...)
}
