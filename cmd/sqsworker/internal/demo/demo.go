package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/sqsworker/sqsworker/examples/examplejobs"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/poller"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/schedule"
	"github.com/sqsworker/sqsworker/pkg/status"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// Options configures Run. The zero value runs on a fresh embedded emulator.
type Options struct {
	// Backend to run on. Defaults to a new embedded emulator, closed when Run returns.
	Backend *awslocal.Backend
	// Stack names the queues. Defaults to a unique "demo-…" name.
	Stack string
	// Timeout bounds the wait for every message to settle. Defaults to 2 minutes.
	Timeout time.Duration
	// Logger receives the worker's and the poller's logs. Defaults to discarding them.
	Logger *slog.Logger
	// Serve, when set, is called once the report is printed, while the poller, the worker and
	// the dispatcher keep running on the demo's stack (sqsworker demo --ui serves the console
	// from it); Run stops them when it returns.
	Serve func(ctx context.Context, rep *Report) error
}

// Row is one message of the demo and what became of it.
type Row struct {
	Label     string // what the message is
	MessageID string
	JobID     string
	Kind      string
	Key       string
	Attempts  int
	Outcome   string
	Reason    string
	// Runs is how many times the job key's work really ran (its side effect).
	Runs int
	// Status is the job's final record in the table (nil for a body that is not a job).
	Status *status.Job
}

// DeadLetter is one message found in the DLQ.
type DeadLetter struct {
	Failure worker.Failure
	Body    string
}

// Report is what Run saw.
type Report struct {
	// Backend is the backend the demo ran on.
	Backend *awslocal.Backend
	Stack   *awslocal.Stack
	Table   string
	Rows    []Row
	DLQ     []DeadLetter
	Elapsed time.Duration
	// Outbox is what the transactional outbox's two orders did.
	Outbox *OutboxReport
	// OutboxSkipped says why there is no PostgreSQL outbox row ("" when there is one).
	OutboxSkipped string
	// Batch is what the batch of batch.go did.
	Batch *BatchReport
	// FlowPeak is the most webhooks of one tenant that ran at once (their limit is 1).
	FlowPeak int
}

// Run provisions the queues, enqueues the demo's jobs, runs the poller and the worker until every
// message is settled, and writes what happened to w.
func Run(ctx context.Context, w io.Writer, opts Options) (*Report, error) {
	start := time.Now()
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	backend := opts.Backend
	if backend == nil {
		var err error
		if backend, err = awslocal.Start(ctx, awslocal.Options{}); err != nil {
			return nil, err
		}
		defer backend.Close()
	}
	if opts.Stack == "" {
		opts.Stack = awslocal.UniqueName("demo")
	}
	client := sqs.NewFromConfig(backend.Config)
	stack, err := awslocal.Provision(ctx, client, awslocal.StackOptions{Name: opts.Stack, MaxReceiveCount: 3 * examplejobs.MaxAttempts})
	if err != nil {
		return nil, err
	}
	ddb := backend.DynamoDB()
	table, err := awslocal.ProvisionTable(ctx, ddb, opts.Stack)
	if err != nil {
		return nil, err
	}
	// The emulator's queue URLs name a fixed host: print them as reachable at the backend.
	fmt.Fprintf(w, "backend   %s (%s)\nqueue     %s\ndlq       %s\ntable     %s\n\n", backend.URL, backend.Kind,
		backend.QueueURL(stack.QueueURL), backend.QueueURL(stack.DLQURL), table)

	sch := scheduler.NewFromConfig(backend.Config)
	group, err := awslocal.ProvisionScheduleGroup(ctx, sch, opts.Stack)
	if err != nil {
		return nil, err
	}
	// Local schedules fire on the dispatcher's clock, which the demo moves forward (below).
	var offset atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	sched, err := schedule.NewClient(schedule.Config{Scheduler: sch, Group: group, QueueARN: stack.QueueARN,
		RoleARN: awslocal.SchedulerRoleARN(opts.Stack), Now: clock})
	if err != nil {
		return nil, err
	}
	st, err := status.New(status.Config{Client: ddb, Table: table})
	if err != nil {
		return nil, err
	}
	store, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: ddb, Table: table})
	if err != nil {
		return nil, err
	}
	// The batch of batch.go: its children are counted by the batch Store around the store.
	batchWake := make(chan struct{}, 1)
	bc, counted, err := batchStore(ddb, table, opts.Stack, store, func() {
		select {
		case batchWake <- struct{}{}:
		default:
		}
	}, opts.Logger)
	if err != nil {
		return nil, err
	}
	// A short lease (renewed while a job runs) so that a duplicate arriving while its twin runs
	// comes back within seconds.
	idem, err := idempotency.NewMiddleware(idempotency.MiddlewareConfig{Store: counted, Logger: opts.Logger, Lease: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	effects := examplejobs.NewSideEffects()
	reg := jobs.NewRegistry()
	if err := Register(reg, jobs.Exponential{Base: time.Second, Cap: 2 * time.Second}, effects); err != nil {
		return nil, err
	}
	fd, err := newFlowDemo(reg, ddb, table, opts.Logger) // flow.go: a kind limited per tenant
	if err != nil {
		return nil, err
	}
	long, err := registerLongJob(reg) // longjob.go
	if err != nil {
		return nil, err
	}
	track := newTracker()
	h, err := worker.New(worker.Config{
		Registry: reg, SQS: client, QueueURL: stack.QueueURL, DLQURL: stack.DLQURL,
		Middleware: []worker.Middleware{fd.mw, idem}, Logger: opts.Logger, OnBatch: track.observe,
	})
	if err != nil {
		return nil, err
	}
	prod, err := producer.New(producer.Config{SQS: client, QueueURL: stack.QueueURL, Scheduler: sched, Status: st})
	if err != nil {
		return nil, err
	}
	if err := enqueue(ctx, client, prod, store, stack, track); err != nil {
		return nil, err
	}
	stopQueues, err := demoQueues(ctx, w, backend, opts.Stack, client, []worker.Middleware{idem}, effects, track, opts.Logger) // queues.go
	if err != nil {
		return nil, err
	}
	var queuesOnce sync.Once
	var queuesErr error
	stopQueuesOnce := func() error { queuesOnce.Do(func() { queuesErr = stopQueues() }); return queuesErr }
	defer stopQueuesOnce()
	if err := enqueueLongJob(ctx, prod, track); err != nil {
		return nil, err
	}
	if err := fd.enqueue(ctx, prod, track); err != nil {
		return nil, err
	}
	later, err := enqueueLater(ctx, w, prod, sched, st, track)
	if err != nil {
		return nil, err
	}
	if err := demoDedup(ctx, w, prod, ddb, table, st, sched, clock, track); err != nil { // dedup.go
		return nil, err
	}
	relay, ob, orep, err := orders(ctx, w, backend, stack, client, prod, sched, st, track, opts.Logger, batchWake)
	if err != nil {
		return nil, err
	}
	brep, err := enqueueBatch(ctx, w, bc, prod, track)
	if err != nil {
		return nil, err
	}
	stopOutbox, outboxSkipped, err := demoPostgresOutbox(ctx, w, prod, track, opts.Logger) // outbox_pg.go
	if err != nil {
		return nil, err
	}
	defer stopOutbox()
	fmt.Fprintf(w, "enqueued  %d jobs; running the poller, the worker, the local schedule dispatcher and the outbox relay…\n", track.count())
	disp, err := schedule.NewDispatcher(schedule.DispatcherConfig{Scheduler: sch, SQS: client, Group: group,
		Interval: time.Second, Now: clock, Logger: opts.Logger})
	if err != nil {
		return nil, err
	}

	p, err := poller.New(poller.Config{
		SQS: client, QueueURL: stack.QueueURL, Handler: h,
		BatchSize: 10, Concurrency: 2, WaitTime: time.Second, Logger: opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	runErr := make(chan error, 3)
	go func() { runErr <- p.Run(runCtx) }()
	go func() { runErr <- disp.Run(runCtx) }()
	go func() { runErr <- relay.Run(runCtx) }()
	deadline := time.After(opts.Timeout)
	for phase, wait := range []chan struct{}{track.sent, track.done} {
		select {
		case <-wait:
		case <-deadline:
			stop()
			<-runErr
			<-runErr
			<-runErr
			return nil, fmt.Errorf("demo: not every job settled within %s", opts.Timeout)
		case err := <-runErr:
			stop()
			return nil, fmt.Errorf("demo: the poller or the dispatcher stopped: %w", err)
		}
		if phase == 0 {
			fmt.Fprintf(w, "\nevery message sent so far is settled. Demo mode: moving the local dispatcher's clock %s\n"+
				"forward, so the 16-minute schedule and the rate(1 minute) schedule come due now (on AWS,\n"+
				"EventBridge Scheduler fires them on time; locally the dispatcher fires what the emulator stores)…\n\n", later)
			offset.Store(int64(later))
		}
	}
	if err := stopQueuesOnce(); err != nil { // every job settled: the queues row's claim is checked
		return nil, err
	}
	if opts.Serve == nil {
		if err := stopRunning(stop, runErr); err != nil {
			return nil, err
		}
	}

	if err := brep.finish(ctx, bc); err != nil {
		return nil, err
	}
	rep := &Report{Backend: backend, Stack: stack, Table: table, Rows: track.rows(), OutboxSkipped: outboxSkipped, Batch: brep,
		FlowPeak: fd.peakRunning()}
	for i := range rep.Rows {
		r := &rep.Rows[i]
		if r.Kind == "" {
			continue
		}
		r.Runs = effects.Runs(r.Kind, r.Key)
		if r.Kind == longJobKind {
			r.Runs = long.runs(r.Key)
		}
		job, err := st.Get(ctx, r.Kind, r.Key)
		switch {
		case errors.Is(err, status.ErrNotFound): // a message that named no job (a body that is no envelope)
		case err != nil:
			return nil, err
		default:
			r.Status = &job
		}
	}
	fd.fillRuns(rep.Rows)
	dead := 0
	for _, r := range rep.Rows {
		if r.Outcome == worker.OutcomeDeadLettered {
			dead++
		}
	}
	if rep.DLQ, err = readDLQ(ctx, client, stack.DLQURL, dead); err != nil {
		return nil, err
	}
	pos := map[string]int{}
	for i, r := range rep.Rows {
		pos[r.MessageID] = i
	}
	sort.SliceStable(rep.DLQ, func(i, j int) bool {
		return pos[rep.DLQ[i].Failure.SourceMessageID] < pos[rep.DLQ[j].Failure.SourceMessageID]
	})
	refused, err := orep.checkRefused(ctx, ob, st, rep.Rows)
	if err != nil {
		return nil, err
	}
	rep.Rows, rep.Outbox = append(rep.Rows, refused), orep
	rep.Elapsed = time.Since(start)
	rep.print(w)
	fd.print(w)
	orep.print(w)
	brep.print(w)
	if opts.Serve != nil {
		serveErr := opts.Serve(runCtx, rep)
		if err := stopRunning(stop, runErr); err != nil {
			return rep, err
		}
		return rep, serveErr
	}
	return rep, nil
}

// stopRunning stops the poller, the dispatcher and the outbox relay, and waits for them.
func stopRunning(stop context.CancelFunc, runErr chan error) error {
	stop()
	for range 3 {
		if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("demo: %w", err)
		}
	}
	return nil
}

// enqueue sends the demo's messages: jobs through the producer, and two raw bodies as a producer
// in another language might send them.
func enqueue(ctx context.Context, client *sqs.Client, prod *producer.Producer, store idempotency.Store, stack *awslocal.Stack, track *tracker) error {
	welcome := examplejobs.EmailArgs{To: "ada@example.com", Subject: "Welcome"}
	invoice := examplejobs.InvoiceArgs{Invoice: 1001}
	reqs := []producer.Request{
		{Args: welcome, Options: []producer.Option{producer.WithKey("welcome-ada")}},
		{Args: welcome, Options: []producer.Option{producer.WithKey("welcome-ada")}},
		{Args: examplejobs.EmailArgs{To: "grace@example.com", Subject: "Your invoice"}},
		{Args: examplejobs.ReportArgs{Name: "monthly-sales"}},
		{Args: examplejobs.ResizeArgs{URL: "s3://photos/broken.jpg"}},
		{Args: examplejobs.RefundArgs{Order: "order-42", Refunded: true}},
		{Args: examplejobs.RefundArgs{Order: "order-43"}},
		{Args: invoice},
	}
	labels := []string{twinLabel, twinLabel, "succeeds", "fails twice, then succeeds",
		"poison: fails every attempt", "cancels itself", "succeeds", "redelivered after a worker crashed holding it"}
	results, err := prod.EnqueueBatch(ctx, reqs)
	if err != nil {
		return err
	}
	if err := producer.JoinErrors(results); err != nil {
		return err
	}
	for i, r := range results {
		track.expect(r.MessageID, labels[i], r.ID, r.Kind, r.Key)
	}
	// Simulate a worker that claimed the invoice job and crashed: its claim holds for a few
	// seconds, during which the redelivered message is deferred; then the job runs, once.
	inv := results[len(results)-1]
	args, _ := json.Marshal(invoice)
	hash, err := jobs.PayloadHash(inv.Kind, args)
	if err != nil {
		return err
	}
	now := time.Now()
	if _, err := store.Claim(ctx, idempotency.ClaimRequest{Kind: inv.Kind, Key: inv.Key, JobID: inv.ID, PayloadHash: hash,
		Token: "crashed-worker", Now: now, LeaseUntil: now.Add(3 * time.Second), ExpiresAt: now.Add(time.Hour)}); err != nil {
		return err
	}
	raw := []struct{ body, label string }{
		{"hello from a shell script", "malformed body (plain SendMessage)"},
		{`{"v":1,"id":"legacy-1","kind":"invoice.print","args":{"invoice":7}}`, "unknown kind (plain SendMessage)"},
	}
	for _, m := range raw {
		out, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(stack.QueueURL), MessageBody: aws.String(m.body)})
		if err != nil {
			return err
		}
		track.expect(aws.ToString(out.MessageId), m.label, "", "", "")
	}
	return nil
}

// scheduledDelay is the delay of the demo's job that goes through a one-time schedule.
const scheduledDelay = 16 * time.Minute

// enqueueLater sends the delayed jobs and creates the recurring schedule. It returns how far the
// dispatcher's clock must move for all of them to come due.
func enqueueLater(ctx context.Context, w io.Writer, prod *producer.Producer, sched *schedule.Client, st *status.Table, track *tracker) (time.Duration, error) {
	res, err := prod.EnqueueIn(ctx, examplejobs.EmailArgs{To: "lin@example.com", Subject: "Reminder"}, 20*time.Second)
	if err != nil {
		return 0, err
	}
	track.expect(res.MessageID, "delayed 20 s (SQS DelaySeconds)", res.ID, res.Kind, res.Key)

	res, err = prod.EnqueueIn(ctx, examplejobs.InvoiceArgs{Invoice: 2002}, scheduledDelay)
	if err != nil {
		return 0, err
	}
	if res.StatusErr != nil {
		return 0, res.StatusErr
	}
	track.expectJob("delayed 16 min (one-time EventBridge schedule)", res.ID, res.Kind, res.Key)
	job, err := st.Get(ctx, res.Kind, res.Key)
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(w, "scheduled %s %s for %s as schedule %s; its status in the table: %s\n",
		res.Kind, res.ID, res.RunAt.UTC().Format(time.TimeOnly), res.Schedule, job.State)

	const every = "rate(1 minute)"
	if err := sched.Upsert(ctx, schedule.Recurring{Name: "demo-rollup", Expression: every, Kind: examplejobs.RollupArgs{}.Kind(),
		Args: []byte(`{"window":"1m"}`)}); err != nil {
		return 0, err
	}
	track.expectKind("fired by the recurring schedule demo-rollup, "+every, examplejobs.RollupArgs{}.Kind())
	fmt.Fprintf(w, "created   recurring schedule demo-rollup: %s → metrics.rollup\n", every)
	return scheduledDelay + 5*time.Second, nil
}

// twinLabel names the two messages of one job sent twice with the same key: whichever arrives
// first runs, the other is acknowledged as a duplicate.
const twinLabel = "same job sent twice (key welcome-ada)"

// tracker follows every message until it is settled: succeeded, skipped, or delivered to the DLQ.
// Messages sent by the demo are matched by message id; jobs fired later by the scheduler by job id
// (one-time schedules) or by kind (the first firing of a recurring schedule).
type tracker struct {
	mu      sync.Mutex
	order   []string // match keys: "m:<message id>", "j:<job id>", "k:<kind>"
	byKey   map[string]*Row
	settled map[string]bool
	// sent closes when every message the demo sent itself is settled; done when everything is.
	sent, done         chan struct{}
	sentClosed, closed bool
}

func newTracker() *tracker {
	return &tracker{byKey: map[string]*Row{}, settled: map[string]bool{}, sent: make(chan struct{}), done: make(chan struct{})}
}

func (t *tracker) add(match string, r *Row) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.order = append(t.order, match)
	t.byKey[match] = r
}

func (t *tracker) expect(msgID, label, jobID, kind, key string) {
	t.add("m:"+msgID, &Row{Label: label, MessageID: msgID, JobID: jobID, Kind: kind, Key: key})
}

// expectJob follows a job the scheduler will send (its message id is not known yet).
func (t *tracker) expectJob(label, jobID, kind, key string) {
	t.add("j:"+jobID, &Row{Label: label, JobID: jobID, Kind: kind, Key: key})
}

// expectKind follows the first job of a kind (a recurring schedule's firing).
func (t *tracker) expectKind(label, kind string) {
	t.add("k:"+kind, &Row{Label: label, Kind: kind})
}

func (t *tracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.order)
}

func (t *tracker) observe(_ context.Context, outcomes []worker.Outcome) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, o := range outcomes {
		match := "m:" + o.MessageID
		r, ok := t.byKey[match]
		if !ok {
			match = "j:" + o.JobID
			r, ok = t.byKey[match]
		}
		if !ok && !t.settled["k:"+o.Kind] {
			match = "k:" + o.Kind
			r, ok = t.byKey[match]
		}
		if !ok {
			continue
		}
		r.Attempts = max(r.Attempts, o.Attempt)
		r.Outcome, r.Reason = o.Outcome, o.Reason
		if r.MessageID == "" {
			r.MessageID = o.MessageID
		}
		if o.JobID != "" && r.JobID == "" {
			r.JobID, r.Kind, r.Key = o.JobID, o.Kind, o.Key
		}
		if !o.Failed && o.Outcome != worker.OutcomeContinued { // a continued job comes back as a new message
			t.settled[match] = true
		}
	}
	all, sent := true, true
	for _, m := range t.order {
		if !t.settled[m] {
			all = false
			if m[0] == 'm' {
				sent = false
			}
		}
	}
	if !t.sentClosed && sent {
		t.sentClosed = true
		close(t.sent)
	}
	if !t.closed && all {
		t.closed = true
		close(t.done)
	}
}

func (t *tracker) rows() []Row {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Row, 0, len(t.order))
	for _, m := range t.order {
		out = append(out, *t.byKey[m])
	}
	return out
}

// readDLQ receives the dead letters (and leaves them there: they become visible again after a
// short visibility).
func readDLQ(ctx context.Context, client *sqs.Client, url string, want int) ([]DeadLetter, error) {
	var out []DeadLetter
	seen := map[string]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for len(out) < want && time.Now().Before(deadline) {
		res, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, VisibilityTimeout: 1, WaitTimeSeconds: 1,
			MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			return nil, fmt.Errorf("demo: read the DLQ: %w", err)
		}
		for _, m := range res.Messages {
			if seen[aws.ToString(m.MessageId)] {
				continue
			}
			seen[aws.ToString(m.MessageId)] = true
			d := DeadLetter{Body: aws.ToString(m.Body)}
			if a, ok := m.MessageAttributes[worker.FailureAttribute]; ok {
				if err := json.Unmarshal([]byte(aws.ToString(a.StringValue)), &d.Failure); err != nil {
					return nil, fmt.Errorf("demo: DLQ message %s: bad %s: %w", aws.ToString(m.MessageId), worker.FailureAttribute, err)
				}
			}
			out = append(out, d)
		}
	}
	if len(out) < want {
		return out, errors.New("demo: the DLQ holds fewer messages than were dead-lettered")
	}
	return out, nil
}

func (r *Report) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tKIND\tATTEMPTS\tOUTCOME\tRAN\tSTATUS IN TABLE\tWHAT IT IS")
	for _, row := range r.Rows {
		outcome := row.Outcome
		if row.Reason != "" {
			outcome += " (" + row.Reason + ")"
		}
		ran, st := "-", "-"
		if row.Kind != "" {
			ran = fmt.Sprintf("%d×", row.Runs)
		}
		if row.Status != nil {
			st = fmt.Sprintf("%s, %d run(s)", row.Status.State, row.Status.Runs)
			if c := row.Status.Continuations; c > 0 {
				st += fmt.Sprintf(", %d continuation(s)", c) // a long job (longjob.go)
			}
		}
		if row.Outcome == neverEnqueued {
			ran = "0×"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", dash(row.JobID), dash(row.Kind), row.Attempts, outcome, ran, st, row.Label)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nDLQ: %d messages, each with its reason in the %s attribute\n", len(r.DLQ), worker.FailureAttribute)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REASON\tKIND\tJOB\tATTEMPTS\tERROR\tBODY")
	for _, d := range r.DLQ {
		f := d.Failure
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", f.Reason, dash(f.Kind), dash(f.JobID), f.Attempts, clip(f.Error, 60), clip(d.Body, 40))
	}
	tw.Flush()
	settled := 0
	for _, row := range r.Rows {
		if row.Outcome != neverEnqueued {
			settled++
		}
	}
	fmt.Fprintf(w, "\nall %d jobs settled in %s\n", settled, r.Elapsed.Round(100*time.Millisecond))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
