package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/flow"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/poller"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// This file runs several pollers, each a worker "process" of its own (its own flow middleware,
// idempotency middleware, worker and poller, as separate containers would have), against one
// queue and one job table of the embedded emulator, and records what the jobs themselves see.

// workArgs is the test job: it records its run and sleeps.
type workArgs struct {
	Key   string `json:"key"`
	Sleep int    `json:"sleep_ms"`
	Block bool   `json:"block,omitempty"` // block until its process is killed (first run only)
}

func (workArgs) Kind() string { return "test.work" }

// otherArgs is a kind without limits.
type otherArgs struct {
	N int `json:"n"`
}

func (otherArgs) Kind() string { return "test.other" }

// ledger records, from inside the jobs, how many of one key run at once, when each started, and
// how often each job ran and completed.
type ledger struct {
	mu        sync.Mutex
	running   map[string]int
	peak      map[string]int
	starts    map[string][]time.Time
	runs      map[string]int // job id → runs started
	completed map[string]int // job id → runs that returned nil
	attempts  map[string][]int
	firstAt   map[string]time.Time
}

func newLedger() *ledger {
	return &ledger{running: map[string]int{}, peak: map[string]int{}, starts: map[string][]time.Time{},
		runs: map[string]int{}, completed: map[string]int{}, attempts: map[string][]int{}, firstAt: map[string]time.Time{}}
}

func (l *ledger) start(key, id string, attempt int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	l.running[key]++
	l.peak[key] = max(l.peak[key], l.running[key])
	l.starts[key] = append(l.starts[key], now)
	l.runs[id]++
	l.attempts[id] = append(l.attempts[id], attempt)
	if _, ok := l.firstAt[id]; !ok {
		l.firstAt[id] = now
	}
	return l.runs[id]
}

func (l *ledger) end(key, id string, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running[key]--
	if ok {
		l.completed[id]++
	}
}

func (l *ledger) completedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.completed {
		n += c
	}
	return n
}

// killSwitch fails every AWS call of a process once it is killed, as if the process had died:
// no heartbeat, no renewal, no release, no delete, no settlement.
type killSwitch struct{ dead atomic.Bool }

var errKilled = errors.New("process killed")

type killableSQS struct {
	*sqs.Client
	k *killSwitch
}

func (c killableSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, o ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	if c.k.dead.Load() {
		return nil, errKilled
	}
	return c.Client.ReceiveMessage(ctx, in, o...)
}

func (c killableSQS) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, o ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	if c.k.dead.Load() {
		return nil, errKilled
	}
	return c.Client.DeleteMessageBatch(ctx, in, o...)
}

func (c killableSQS) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, o ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	if c.k.dead.Load() {
		return nil, errKilled
	}
	return c.Client.ChangeMessageVisibilityBatch(ctx, in, o...)
}

func (c killableSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, o ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	if c.k.dead.Load() {
		return nil, errKilled
	}
	return c.Client.SendMessageBatch(ctx, in, o...)
}

type killableDDB struct {
	*dynamodb.Client
	k     *killSwitch
	calls *ddbCalls
}

// ddbCalls counts the DynamoDB calls of every process of a cluster.
type ddbCalls struct{ updates, gets, puts atomic.Int64 }

func (c killableDDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if c.k.dead.Load() {
		return nil, errKilled
	}
	c.calls.updates.Add(1)
	return c.Client.UpdateItem(ctx, in, o...)
}

func (c killableDDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if c.k.dead.Load() {
		return nil, errKilled
	}
	c.calls.gets.Add(1)
	return c.Client.GetItem(ctx, in, o...)
}

func (c killableDDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if c.k.dead.Load() {
		return nil, errKilled
	}
	c.calls.puts.Add(1)
	return c.Client.PutItem(ctx, in, o...)
}

// cluster is a queue, a job table and the processes that work them.
type cluster struct {
	t      testing.TB
	sqs    *sqs.Client
	ddb    *dynamodb.Client
	stack  *awslocal.Stack
	table  string
	flow   *flow.Table // the operators' view (not killable)
	ledger *ledger
	prod   *producer.Producer
	cfg    clusterConfig
	calls  ddbCalls // the processes' DynamoDB calls (flow and idempotency)

	mu    sync.Mutex
	procs []*process
}

type clusterConfig struct {
	processes   int
	concurrency int // poller slots per process
	batch       int
	flow        func(*flow.Config)
	maxReceives int
	noFlow      bool // leave the flow middleware out (a baseline)
}

// process is one worker process: poller → worker → flow → idempotency → job.
type process struct {
	kill   *killSwitch
	killed chan struct{}
	flow   *flow.Middleware
	slots  *slotSpy
	cancel context.CancelFunc
	done   chan struct{}
}

// slotSpy remembers the lease of every slot acquired, by job id.
type slotSpy struct {
	flow.Store
	mu     sync.Mutex
	leases map[string]time.Time
}

func (s *slotSpy) AcquireSlot(ctx context.Context, req flow.SlotRequest) (flow.SlotResult, error) {
	res, err := s.Store.AcquireSlot(ctx, req)
	if err == nil && res.Acquired {
		s.mu.Lock()
		s.leases[req.JobID] = res.Slot.LeaseUntil
		s.mu.Unlock()
	}
	return res, err
}

func (s *slotSpy) lease(id string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leases[id]
}

func newCluster(t testing.TB, cfg clusterConfig) *cluster {
	t.Helper()
	b := awslocaltest.Backend(t)
	ctx := context.Background()
	sqsClient := sqs.NewFromConfig(b.Config)
	ddb := dynamodb.NewFromConfig(b.Config, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	name := awslocal.UniqueName("flowc")
	if cfg.maxReceives == 0 {
		cfg.maxReceives = 15
	}
	stack, err := awslocal.Provision(ctx, sqsClient, awslocal.StackOptions{Name: name, MaxReceiveCount: cfg.maxReceives, VisibilityTimeout: 3})
	if err != nil {
		t.Fatal(err)
	}
	table, err := awslocal.ProvisionTable(ctx, ddb, name)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := flow.NewTable(flow.TableConfig{Client: ddb, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	prod, err := producer.New(producer.Config{SQS: sqsClient, QueueURL: stack.QueueURL})
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, sqs: sqsClient, ddb: ddb, stack: stack, table: table, flow: tbl, ledger: newLedger(), prod: prod, cfg: cfg}
	for range cfg.processes {
		c.start()
	}
	t.Cleanup(c.stopAll)
	return c
}

// start starts one more process.
func (c *cluster) start() *process {
	t := c.t
	p := &process{kill: &killSwitch{}, killed: make(chan struct{}), done: make(chan struct{})}
	ddb := killableDDB{Client: c.ddb, k: p.kill, calls: &c.calls}
	sq := killableSQS{Client: c.sqs, k: p.kill}
	logger := slog.New(slog.DiscardHandler)
	tbl, err := flow.NewTable(flow.TableConfig{Client: ddb, Table: c.table})
	if err != nil {
		t.Fatal(err)
	}
	p.slots = &slotSpy{Store: tbl, leases: map[string]time.Time{}}
	fcfg := flow.Config{Store: p.slots, Lease: 3 * time.Second, MinDelay: 200 * time.Millisecond, Logger: logger,
		PauseCheck: 200 * time.Millisecond, PausedDelay: time.Second}
	if c.cfg.flow != nil {
		c.cfg.flow(&fcfg)
	}
	p.flow, err = flow.NewMiddleware(fcfg)
	if err != nil {
		t.Fatal(err)
	}
	store, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: ddb, Table: c.table})
	if err != nil {
		t.Fatal(err)
	}
	idem, err := idempotency.NewMiddleware(idempotency.MiddlewareConfig{Store: store, Lease: 3 * time.Second, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	reg := jobs.NewRegistry()
	l := c.ledger
	jobs.MustRegister(reg, jobs.WorkFunc[workArgs](func(ctx context.Context, job *jobs.Job[workArgs]) error {
		run := l.start(job.Args.Key, job.ID, job.Attempt)
		if job.Args.Block && run == 1 {
			<-p.killed // this process dies while the job runs: the job ends with it
			l.end(job.Args.Key, job.ID, false)
			return errKilled
		}
		time.Sleep(time.Duration(job.Args.Sleep) * time.Millisecond) // the job's work
		l.end(job.Args.Key, job.ID, true)
		return nil
	}), jobs.WithMaxAttempts(3))
	jobs.MustRegister(reg, jobs.WorkFunc[otherArgs](func(ctx context.Context, job *jobs.Job[otherArgs]) error {
		l.start("other", job.ID, job.Attempt)
		l.end("other", job.ID, true)
		return nil
	}), jobs.WithMaxAttempts(3))
	mws := []worker.Middleware{p.flow, idem}
	if c.cfg.noFlow {
		mws = mws[1:]
	}
	h, err := worker.New(worker.Config{Registry: reg, SQS: sq, QueueURL: c.stack.QueueURL, DLQURL: c.stack.DLQURL,
		Middleware: mws, Logger: logger, Concurrency: 10})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := poller.New(poller.Config{SQS: sq, QueueURL: c.stack.QueueURL, Handler: h, Concurrency: max(c.cfg.concurrency, 1),
		BatchSize: max(c.cfg.batch, 1), WaitTime: time.Second, VisibilityTimeout: 3 * time.Second, Logger: logger,
		Backoff: func(int) time.Duration { return 50 * time.Millisecond }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go func() {
		defer close(p.done)
		_ = pl.Run(ctx)
	}()
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return p
}

// killProcess makes a process die: every AWS call of it fails from now on, and its running jobs
// end.
func (c *cluster) killProcess(p *process) {
	p.kill.dead.Store(true)
	close(p.killed)
	p.cancel()
}

func (c *cluster) stopAll() {
	c.mu.Lock()
	procs := c.procs
	c.mu.Unlock()
	for _, p := range procs {
		p.cancel()
	}
	for _, p := range procs {
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			c.t.Errorf("a process did not stop")
		}
	}
}

// enqueue sends jobs in batches and returns their ids.
func (c *cluster) enqueue(args []jobs.Args, opts ...producer.Option) []string {
	c.t.Helper()
	var ids []string
	for start := 0; start < len(args); start += 10 {
		part := args[start:min(start+10, len(args))]
		msgs := make([]producer.Request, len(part))
		for i, a := range part {
			msgs[i] = producer.Request{Args: a, Options: opts}
		}
		res, err := c.prod.EnqueueBatch(context.Background(), msgs)
		if err != nil {
			c.t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				c.t.Fatal(r.Err)
			}
			ids = append(ids, r.ID)
		}
	}
	return ids
}

// waitFor polls cond until it holds, or fails the test after a generous deadline.
func (c *cluster) waitFor(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("waited 90s for %s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
}

// dlq returns the bodies in the DLQ.
func (c *cluster) dlq() []string {
	out, err := c.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(c.stack.DLQURL),
		MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"}})
	if err != nil {
		c.t.Fatal(err)
	}
	var bodies []string
	for _, m := range out.Messages {
		bodies = append(bodies, aws.ToString(m.Body)+" "+aws.ToString(m.MessageAttributes[worker.FailureAttribute].StringValue))
	}
	return bodies
}

// checkOnceEach: every job ran to completion exactly once, with attempt 1 (deferrals spent
// none), except those listed in rerun, which completed once after one killed run.
func (c *cluster) checkOnceEach(ids []string, rerun map[string]bool) {
	c.t.Helper()
	l := c.ledger
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		wantRuns, wantAttempts := 1, []int{1}
		if rerun[id] {
			wantRuns, wantAttempts = 2, []int{1, 2}
		}
		if l.completed[id] != 1 || l.runs[id] != wantRuns || fmt.Sprint(l.attempts[id]) != fmt.Sprint(wantAttempts) {
			c.t.Errorf("job %s: completed %d, runs %d, attempts %v; want completed once, %d runs, attempts %v",
				id, l.completed[id], l.runs[id], l.attempts[id], wantRuns, wantAttempts)
		}
	}
}

func deferrals(procs []*process) (slot, token, paused int64) {
	for _, p := range procs {
		s := p.flow.Stats()
		slot += s.SlotDenied
		token += s.TokenDenied
		paused += s.Paused
	}
	return
}

// TestConcurrencyLimitAcrossProcesses: four processes compete for three tenants' jobs with a
// limit of 3 per tenant: the most jobs of one tenant the jobs themselves saw running at once is
// at most 3, every job ran once with attempt 1 (the deferrals spent no attempt), and nothing went
// to the DLQ.
func TestConcurrencyLimitAcrossProcesses(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterConfig{processes: 4, concurrency: 2, batch: 10, flow: func(f *flow.Config) {
		f.Concurrency = []flow.Concurrency{{Kind: "test.work", Limit: 3, Key: flow.TenantKey}}
	}})
	var ids []string
	for _, tenant := range []string{"t1", "t2", "t3"} {
		var args []jobs.Args
		for range 20 {
			args = append(args, workArgs{Key: tenant, Sleep: 150})
		}
		ids = append(ids, c.enqueue(args, producer.WithTenant(tenant))...)
	}
	c.waitFor("60 jobs", func() bool { return c.ledger.completedCount() >= len(ids) })
	c.checkOnceEach(ids, nil)
	c.ledger.mu.Lock()
	for tenant, peak := range c.ledger.peak {
		if peak > 3 {
			t.Errorf("tenant %s: %d jobs ran at once, limit 3", tenant, peak)
		}
	}
	c.ledger.mu.Unlock()
	if slot, _, _ := deferrals(c.procs); slot == 0 {
		t.Error("no job was ever deferred: the test did not put the limit under pressure")
	}
	if d := c.dlq(); len(d) != 0 {
		t.Errorf("DLQ: %v", d)
	}
}

// TestKilledHolderSlotReturns: with a limit of 1, the process running a job is killed mid-job
// (no renewal, no release, no delete): its message comes back, and its slot returns when its
// lease ends, not before (the job's second run starts after the dead holder's lease); every job
// ran once but the killed one, which completed once on its second run; the limit held throughout.
func TestKilledHolderSlotReturns(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterConfig{processes: 3, concurrency: 1, batch: 1, flow: func(f *flow.Config) {
		f.Concurrency = []flow.Concurrency{{Kind: "test.work", Limit: 1, Key: flow.ArgsKey(func(a workArgs) string { return a.Key })}}
	}})
	blocked := c.enqueue([]jobs.Args{workArgs{Key: "k", Block: true}})[0]
	c.waitFor("the blocking job to start", func() bool {
		c.ledger.mu.Lock()
		defer c.ledger.mu.Unlock()
		return c.ledger.runs[blocked] == 1
	})
	var victim *process
	for _, p := range c.procs {
		if !p.slots.lease(blocked).IsZero() {
			victim = p
		}
	}
	if victim == nil {
		t.Fatal("no process holds the blocking job's slot")
	}
	deadLease := victim.slots.lease(blocked)
	var args []jobs.Args
	for range 8 {
		args = append(args, workArgs{Key: "k", Sleep: 50})
	}
	ids := c.enqueue(args)
	c.killProcess(victim)
	c.waitFor("every job", func() bool { return c.ledger.completedCount() >= len(ids)+1 })
	c.checkOnceEach(append(ids, blocked), map[string]bool{blocked: true})
	c.ledger.mu.Lock()
	starts := append([]time.Time(nil), c.ledger.starts["k"]...)
	peak := c.ledger.peak["k"]
	c.ledger.mu.Unlock()
	if peak > 1 {
		t.Errorf("%d jobs of key k ran at once, limit 1", peak)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
	if len(starts) < 2 || starts[1].Before(deadLease) {
		t.Errorf("a job started at %s, before the dead holder's lease ended at %s", starts[1], deadLease)
	}
	pruned := int64(0)
	for _, p := range c.procs {
		pruned += p.flow.Stats().Pruned
	}
	if pruned != 1 {
		t.Errorf("%d dead holders pruned, want 1", pruned)
	}
	if d := c.dlq(); len(d) != 0 {
		t.Errorf("DLQ: %v", d)
	}
}

// TestRateLimitAcrossProcesses: four processes start jobs of one kind limited to 2 per second
// with a burst of 2: in every window of two seconds the jobs saw at most 2·2 + 2 starts; every
// job ran once with attempt 1. (The bound holds for the times the limiter granted; a job starts
// a little later, after its idempotency claim. Windows of a whole number of token intervals and
// an interval (500 ms) well above that lag keep the bound exact for the starts: a window of the
// starts holds the grants of a window at most that lag longer, which holds no more tokens.)
func TestRateLimitAcrossProcesses(t *testing.T) {
	t.Parallel()
	const rate, burst, window = 2, 2, 2 * time.Second
	c := newCluster(t, clusterConfig{processes: 4, concurrency: 2, batch: 10, flow: func(f *flow.Config) {
		f.Rates = []flow.Rate{{Kind: "test.work", Limit: rate, Period: time.Second, Burst: burst}}
	}})
	var args []jobs.Args
	for range 24 {
		args = append(args, workArgs{Key: "r"})
	}
	ids := c.enqueue(args)
	c.waitFor("24 jobs", func() bool { return c.ledger.completedCount() >= len(ids) })
	c.checkOnceEach(ids, nil)
	c.ledger.mu.Lock()
	starts := append([]time.Time(nil), c.ledger.starts["r"]...)
	c.ledger.mu.Unlock()
	sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
	worst := 0
	for i := range starts {
		n := sort.Search(len(starts), func(j int) bool { return !starts[j].Before(starts[i].Add(window)) }) - i
		worst = max(worst, n)
	}
	if limit := rate*int(window/time.Second) + burst; worst > limit {
		t.Errorf("%d starts in %s, limit %d·%s + burst %d = %d", worst, window, rate, window, burst, limit)
	}
	if _, token, _ := deferrals(c.procs); token == 0 {
		t.Error("no job was ever deferred: the test did not put the limit under pressure")
	}
}

// TestPausedKindRunsNothingUntilResumed: a paused kind's jobs do not run (another kind's do),
// they are deferred again and again without going to the DLQ, even past the queue's
// maxReceiveCount (their copies are re-sent from the third receive); once resumed they all run,
// once each, with attempt 1.
func TestPausedKindRunsNothingUntilResumed(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterConfig{processes: 2, concurrency: 2, batch: 10, maxReceives: 3})
	ctx := context.Background()
	if err := c.flow.PauseKind(ctx, flow.Pause{Kind: "test.work", By: "test"}); err != nil {
		t.Fatal(err)
	}
	var paused, other []jobs.Args
	for i := range 10 {
		paused = append(paused, workArgs{Key: "p" + strconv.Itoa(i)})
		other = append(other, otherArgs{N: i})
	}
	pausedIDs := c.enqueue(paused)
	otherIDs := c.enqueue(other)
	c.waitFor("the other kind", func() bool { return c.ledger.completedCount() >= len(otherIDs) })
	// Every paused job is deferred more than maxReceiveCount (3) times before the resume.
	c.waitFor("many deferrals", func() bool { _, _, p := deferrals(c.procs); return p >= 50 })
	c.ledger.mu.Lock()
	for _, id := range pausedIDs {
		if c.ledger.runs[id] != 0 {
			t.Errorf("paused job %s ran", id)
		}
	}
	c.ledger.mu.Unlock()
	if d := c.dlq(); len(d) != 0 {
		t.Fatalf("paused jobs went to the DLQ: %v", d)
	}
	if was, err := c.flow.ResumeKind(ctx, "test.work"); err != nil || !was {
		t.Fatalf("resume: %v, %v", was, err)
	}
	c.waitFor("the paused jobs after the resume", func() bool { return c.ledger.completedCount() >= len(otherIDs)+len(pausedIDs) })
	c.checkOnceEach(append(pausedIDs, otherIDs...), nil)
}

// TestDeferredTooLongGoesToTheDLQ: a job that cannot get its slot (the one slot held by a long
// job) is deferred again and again, its message re-sent from the third receive with the start of
// its wait, and once it has waited MaxDeferral it is dead-lettered with the reason
// deferred_too_long: never run, never lost, never looping past its bound. The holder completes
// once.
func TestDeferredTooLongGoesToTheDLQ(t *testing.T) {
	t.Parallel()
	const bound = 9 * time.Second // more receives than maxReceiveCount (3): only re-sent copies keep it out of the DLQ until then
	c := newCluster(t, clusterConfig{processes: 2, concurrency: 2, batch: 1, maxReceives: 3, flow: func(f *flow.Config) {
		f.Concurrency = []flow.Concurrency{{Kind: "test.work", Limit: 1}}
		f.MaxDeferral = bound
	}})
	holder := c.enqueue([]jobs.Args{workArgs{Key: "h", Sleep: 16_000}})[0]
	c.waitFor("the holder to start", func() bool {
		c.ledger.mu.Lock()
		defer c.ledger.mu.Unlock()
		return c.ledger.runs[holder] == 1
	})
	sent := time.Now()
	waiter := c.enqueue([]jobs.Args{workArgs{Key: "w"}})[0]
	var dead []sqstypes.Message
	c.waitFor("the waiter's dead letter", func() bool {
		out, err := c.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(c.stack.DLQURL),
			MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		dead = append(dead, out.Messages...)
		return len(dead) > 0
	})
	at := time.Now()
	if len(dead) != 1 {
		t.Fatalf("%d dead letters, want the waiter's", len(dead))
	}
	env, err := jobs.ParseEnvelope(aws.ToString(dead[0].Body))
	if err != nil || env.ID != waiter {
		t.Fatalf("dead letter %s (%v), want job %s", aws.ToString(dead[0].Body), err, waiter)
	}
	f, err := decodeFailure(aws.ToString(dead[0].MessageAttributes[worker.FailureAttribute].StringValue))
	if err != nil || f.Reason != jobs.ReasonDeferredTooLong {
		t.Fatalf("failure %+v (%v), want the reason %s", f, err, jobs.ReasonDeferredTooLong)
	}
	if waited := at.Sub(sent); waited < bound {
		t.Errorf("dead-lettered %s after it was sent, before its bound %s", waited, bound)
	}
	var slot int64
	for _, p := range c.procs {
		slot += p.flow.Stats().SlotDenied
	}
	if slot < 3 {
		t.Errorf("%d deferrals for want of the slot; want several (re-sent copies among them)", slot)
	}
	c.waitFor("the holder to complete", func() bool { return c.ledger.completedCount() >= 1 })
	c.ledger.mu.Lock()
	defer c.ledger.mu.Unlock()
	if c.ledger.runs[waiter] != 0 || c.ledger.completed[holder] != 1 {
		t.Errorf("waiter ran %d times (want 0), holder completed %d times (want 1)", c.ledger.runs[waiter], c.ledger.completed[holder])
	}
}

// decodeFailure reads a dead letter's failure attribute.
func decodeFailure(s string) (worker.Failure, error) {
	var f worker.Failure
	err := json.Unmarshal([]byte(s), &f)
	return f, err
}
