//go:build benche2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/internal/awsendpoint"
	"github.com/sqsworker/sqsworker/internal/ddbtable"
	"github.com/sqsworker/sqsworker/internal/sdkhttp"
	"github.com/sqsworker/sqsworker/internal/testenv/awscost"
	"github.com/sqsworker/sqsworker/internal/testenv/kumoserve"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/poller"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// Settings, from the environment (make bench-e2e passes them through).
var (
	numJobs    = envInt("BENCH_E2E_N", 5000)     // jobs per run
	numRounds  = envInt("BENCH_E2E_ROUNDS", 3)   // rounds of every scenario, interleaved
	costJobs   = envInt("BENCH_E2E_COST_N", 500) // jobs of the untimed write-unit pass
	profileDir = os.Getenv("BENCH_E2E_PROFILE")  // CPU profiles of both processes in the last round
	only       = os.Getenv("BENCH_E2E_ONLY")     // a regexp on "scenario/batches"
	runTimeout = 10 * time.Minute                // one run; generous: the machine is shared
	batchesSet = []int{1, 4}                     // concurrent batches
	noopKind   = "bench.noop"                    // the jobs' kind
	floorTTL   = int64(24 * time.Hour / time.Second)
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

type noopArgs struct {
	N int `json:"n"`
}

func (noopArgs) Kind() string { return noopKind }

// scenario is one consumer under test.
type scenario struct {
	name  string
	table func(name string) *dynamodb.CreateTableInput // its DynamoDB table, if any
	run   func(ctx context.Context, b *bench, r *resources, batches int) error
}

var scenarios = []scenario{
	{name: "raw", run: runRaw},
	{name: "raw+attrs", run: runRawAttrs},
	{name: "floor", table: floorTable, run: runFloor},
	{name: "poller", run: runPoller},
	{name: "idem", table: idempotency.TableInput, run: runIdempotent},
}

// bench is the shared state of a benchmark: the emulator, the clients, the job bodies.
type bench struct {
	t        *testing.T
	emuPID   int
	pprofURL string
	bodies   []string
	// counted clients: every call goes through counter.
	counter *awscost.Counter
	sqs     *sqs.Client
	ddb     *dynamodb.Client
	// plain clients, not counted: provisioning, preloading, the cost pass's reads.
	plainSQS *sqs.Client
	plainDDB *dynamodb.Client
	cfg      aws.Config
}

// resources are one run's queue and table.
type resources struct {
	stack *awslocal.Stack
	table string
	n     int
	// done is when the last of the n messages was deleted (the consumers' shutdown after it is
	// not timed).
	done time.Time
}

func TestBenchE2E(t *testing.T) {
	ctx := context.Background()
	pprofAddr := freeAddr(t)
	t.Setenv("KUMO_PPROF", "true")
	t.Setenv("KUMO_PPROF_ADDR", pprofAddr)
	srv := kumoserve.Start(t)
	bin, _ := kumoserve.Binary()

	b := &bench{t: t, emuPID: srv.PID(), pprofURL: "http://" + pprofAddr}
	cfg, err := awslocal.NewConfig(ctx, srv.URL, "us-east-1", 64, true)
	if err != nil {
		t.Fatal(err)
	}
	b.cfg = cfg
	b.plainSQS = sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.HTTPClient = sdkhttp.KeepConnection(o.HTTPClient) })
	b.plainDDB = dynamodb.NewFromConfig(cfg, awsendpoint.DynamoDB(cfg))
	b.counter = &awscost.Counter{Next: cfg.HTTPClient}
	b.sqs, b.ddb = b.clients(b.counter)
	for i := range numJobs {
		env := jobs.Envelope{V: 1, ID: jobs.NewID(), Kind: noopKind, Args: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`),
			EnqueuedAt: time.Now().UTC()}
		body, err := env.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		b.bodies = append(b.bodies, string(body))
	}
	var filter *regexp.Regexp
	if only != "" {
		filter = regexp.MustCompile(only)
	}

	out := os.Stdout
	fmt.Fprintln(out, header("sqsworker end-to-end benchmark"))
	fmt.Fprintf(out, "emulator: %s (pid %d) at %s\n", bin, b.emuPID, srv.URL)
	fmt.Fprintf(out, "jobs per run: %d; rounds: %d; %d CPUs; %s\n", numJobs, numRounds, runtime.NumCPU(), runtime.Version())
	fmt.Fprintf(out, "load average before: %s\n\n", LoadAverage())

	var runs []Run
	elapsed := map[string]time.Duration{} // the longest run of each scenario, for the profiles
	for round := 1; round <= numRounds; round++ {
		for _, batches := range batchesSet {
			for _, sc := range scenarios {
				id := fmt.Sprintf("%s/%d", sc.name, batches)
				if filter != nil && !filter.MatchString(id) {
					continue
				}
				prof := ""
				if profileDir != "" && round == numRounds {
					prof = filepath.Join(profileDir, fmt.Sprintf("%s-%d", sc.name, batches))
				}
				r := b.timed(ctx, sc, batches, round, prof, elapsed[id])
				elapsed[id] = max(elapsed[id], r.Elapsed)
				runs = append(runs, r)
				fmt.Fprintf(out, "round %d  %-9s batches %d  %7.0f jobs/s  client %6.1f µs/job  emulator %6.1f µs/job  %s\n",
					round, sc.name, batches, r.JobsPerSecond(), r.ClientMicros(), r.EmulatorMicros(), awscost.Format(r.Calls))
			}
		}
	}
	fmt.Fprintf(out, "\nload average after: %s\n\n", LoadAverage())

	// The write units of each scenario that writes, in an untimed pass.
	units := map[string]string{}
	for _, sc := range scenarios {
		if sc.table == nil || (filter != nil && !filter.MatchString(sc.name+"/1")) {
			continue
		}
		table, ix, writes, jobsDone := b.costPass(ctx, sc)
		per := float64(table) / float64(jobsDone)
		s := fmt.Sprintf("%.2f", per)
		for name, u := range ix {
			per += float64(u) / float64(jobsDone)
			s += fmt.Sprintf(" + %.2f %s", float64(u)/float64(jobsDone), name)
		}
		units[sc.name] = fmt.Sprintf("%.2f (%s)", per, s)
		fmt.Fprintf(out, "write units, %s: %d jobs, %d writes: %s per job\n", sc.name, jobsDone, writes, units[sc.name])
	}

	fmt.Fprintln(out, "\n"+header("medians"))
	PrintSummaries(out, Summarize(runs), units)
	fmt.Fprintln(out, "\n"+header("ratios (each the median over rounds of the ratio within a round)"))
	var cs []Comparison
	for _, batches := range batchesSet {
		cs = append(cs, Compare(runs, "poller", "raw", batches), Compare(runs, "poller", "raw+attrs", batches),
			Compare(runs, "idem", "floor", batches), Compare(runs, "floor", "raw", batches))
	}
	PrintComparisons(out, cs)
	if profileDir != "" {
		fmt.Fprintf(out, "\nprofiles of the last round in %s (go tool pprof -top <file>)\n", profileDir)
	}
}

// clients returns SQS and DynamoDB clients whose calls go through c (and through the SDK
// connection-close workaround our library applies to its own calls, see internal/sdkhttp).
func (b *bench) clients(c *awscost.Counter) (*sqs.Client, *dynamodb.Client) {
	cfg := b.cfg.Copy()
	cfg.HTTPClient = sdkhttp.KeepConnection(c)
	return sqs.NewFromConfig(cfg), dynamodb.NewFromConfig(cfg, awsendpoint.DynamoDB(cfg))
}

// provision creates a run's queue (with its DLQ) and table, and preloads n job bodies.
func (b *bench) provision(ctx context.Context, sc scenario, n int) *resources {
	t := b.t
	stack, err := awslocal.Provision(ctx, b.plainSQS, awslocal.StackOptions{Name: awslocal.UniqueName("e2e-" + sc.name)})
	if err != nil {
		t.Fatal(err)
	}
	r := &resources{stack: stack, n: n}
	if sc.table != nil {
		r.table = awslocal.UniqueName("e2e-" + sc.name)
		if _, err := ddbtable.Create(ctx, b.plainDDB, sc.table(r.table), ddbtable.Wait{}); err != nil {
			t.Fatal(err)
		}
		if sc.name == "idem" {
			if err := idempotency.EnableTTL(ctx, b.plainDDB, r.table); err != nil {
				t.Fatal(err)
			}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			for i := w * 10; i < n; i += 40 {
				var entries []sqstypes.SendMessageBatchRequestEntry
				for j := i; j < min(i+10, n); j++ {
					entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j - i)), MessageBody: aws.String(b.bodies[j])})
				}
				out, err := b.plainSQS.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(stack.QueueURL), Entries: entries})
				if err == nil && len(out.Failed) > 0 {
					err = fmt.Errorf("preload: %d entries failed", len(out.Failed))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	return r
}

func (b *bench) teardown(ctx context.Context, r *resources) {
	for _, u := range []string{r.stack.QueueURL, r.stack.DLQURL} {
		if _, err := b.plainSQS.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(u)}); err != nil {
			b.t.Errorf("delete queue: %v", err)
		}
	}
	if r.table != "" {
		if _, err := b.plainDDB.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(r.table)}); err != nil {
			b.t.Errorf("delete table: %v", err)
		}
	}
}

// timed runs one scenario on a fresh preloaded queue and measures it. With prof set, it writes
// CPU profiles of this process (prof-client.pprof) and of the emulator (prof-emulator.pprof);
// expect is the longest earlier run, to size the emulator's profile.
func (b *bench) timed(ctx context.Context, sc scenario, batches, round int, prof string, expect time.Duration) Run {
	t := b.t
	r := b.provision(ctx, sc, numJobs)
	defer b.teardown(ctx, r)
	runtime.GC() // the preload's garbage is not the run's
	var emuProf chan error
	if prof != "" {
		if err := os.MkdirAll(filepath.Dir(prof), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(prof + "-client.pprof")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		secs := int((expect + time.Second).Seconds()) + 1
		emuProf = make(chan error, 1)
		go func() {
			emuProf <- fetch(b.pprofURL+"/debug/pprof/profile?seconds="+strconv.Itoa(secs), prof+"-emulator.pprof")
		}()
		time.Sleep(100 * time.Millisecond) // let the emulator's profile start
	}
	b.counter.Reset()
	client0, err := CPUTime(0)
	if err != nil {
		t.Fatal(err)
	}
	emu0, err := CPUTime(b.emuPID)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, runTimeout)
	err = sc.run(rctx, b, r, batches)
	cancel()
	elapsed := time.Since(start)
	if !r.done.IsZero() {
		elapsed = r.done.Sub(start)
	}
	client1, _ := CPUTime(0)
	emu1, _ := CPUTime(b.emuPID)
	calls := b.counter.Calls()
	if prof != "" {
		pprof.StopCPUProfile()
		if err := <-emuProf; err != nil {
			t.Errorf("emulator profile: %v", err)
		}
	}
	if err != nil {
		t.Fatalf("%s, %d batches: %v", sc.name, batches, err)
	}
	return Run{Scenario: sc.name, Batches: batches, Round: round, Jobs: r.n, Elapsed: elapsed,
		ClientCPU: client1 - client0, EmulatorCPU: emu1 - emu0, Calls: calls}
}

// costPass runs sc once, untimed, on costJobs jobs, with every DynamoDB write followed by a
// strongly consistent read of its item (not counted), so that the ledger bills each write on the
// item before and after it. It returns the write units on the table and per index, the writes,
// and the jobs.
func (b *bench) costPass(ctx context.Context, sc scenario) (int, map[string]int, int, int) {
	t := b.t
	r := b.provision(ctx, sc, costJobs)
	defer b.teardown(ctx, r)
	schema := awscost.SchemaFromCreateTable(sc.table(r.table))
	ledger := awscost.NewLedger(map[string]awscost.Schema{r.table: schema})
	var mu sync.Mutex
	var failure error
	counter := &awscost.Counter{Next: b.cfg.HTTPClient, OnWrite: func(w awscost.Write) {
		if w.Status != http.StatusOK && !w.ConditionFailed {
			return // not written, not billed (throttling, validation)
		}
		key := schema.Key(w)
		out, err := b.plainDDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(w.Table), Key: key, ConsistentRead: aws.Bool(true)})
		if err == nil {
			_, err = ledger.Record(w.Table, key, out.Item, w.ConditionFailed)
		}
		if err != nil {
			mu.Lock()
			failure = errors.Join(failure, err)
			mu.Unlock()
		}
	}}
	saved := *b
	b.counter = counter
	b.sqs, b.ddb = b.clients(counter)
	defer func() { *b = saved }()
	rctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	if err := sc.run(rctx, b, r, 1); err != nil {
		t.Fatalf("%s cost pass: %v", sc.name, err)
	}
	if failure != nil {
		t.Fatalf("%s cost pass: %v", sc.name, failure)
	}
	table, ix, writes := ledger.Totals()
	return table, ix, writes, r.n
}

// fetch saves url's body to path.
func fetch(url, path string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// --- the raw SDK scenarios ---

// rawLoop runs batches goroutines that each receive up to 10 messages (with attrs, asking for all
// system and message attributes, as the poller does for Lambda's event), call each (in order) and
// delete them with one DeleteMessageBatch, until r.n messages are deleted.
func rawLoop(ctx context.Context, b *bench, r *resources, batches int, attrs bool, each func(ctx context.Context, m *sqstypes.Message) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var deleted atomic.Int64
	errs := make(chan error, batches)
	var wg sync.WaitGroup
	for range batches {
		wg.Go(func() {
			for ctx.Err() == nil {
				in := &sqs.ReceiveMessageInput{QueueUrl: aws.String(r.stack.QueueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1}
				if attrs {
					in.MessageSystemAttributeNames = []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}
					in.MessageAttributeNames = []string{"All"}
				}
				out, err := b.sqs.ReceiveMessage(ctx, in)
				if err != nil {
					if ctx.Err() == nil {
						errs <- fmt.Errorf("receive: %w", err)
						cancel()
					}
					return
				}
				if len(out.Messages) == 0 {
					continue
				}
				entries := make([]sqstypes.DeleteMessageBatchRequestEntry, 0, len(out.Messages))
				for i := range out.Messages {
					m := &out.Messages[i]
					if each != nil {
						if err := each(ctx, m); err != nil {
							errs <- err
							cancel()
							return
						}
					}
					entries = append(entries, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
				}
				del, err := b.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(r.stack.QueueURL), Entries: entries})
				if err != nil {
					errs <- fmt.Errorf("delete: %w", err)
					cancel()
					return
				}
				k := int64(len(del.Successful))
				if now := deleted.Add(k); now >= int64(r.n) {
					if now-k < int64(r.n) { // this batch completed the run
						r.done = time.Now()
					}
					cancel()
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func runRaw(ctx context.Context, b *bench, r *resources, batches int) error {
	return rawLoop(ctx, b, r, batches, false, nil)
}

// runRawAttrs is runRaw asking for the attributes the poller asks for: what a Lambda event
// carries of each message.
func runRawAttrs(ctx context.Context, b *bench, r *resources, batches int) error {
	return rawLoop(ctx, b, r, batches, true, nil)
}

// floorTable is the raw idempotent floor's table: a partition key and nothing else.
func floorTable(name string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
	}
}

// runFloor is the floor of an idempotent worker: per message, the job id from the body, one
// conditional PutItem that claims it, and one UpdateItem of 3 attributes that records the
// outcome.
func runFloor(ctx context.Context, b *bench, r *resources, batches int) error {
	table := aws.String(r.table)
	return rawLoop(ctx, b, r, batches, false, func(ctx context.Context, m *sqstypes.Message) error {
		var env struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &env); err != nil || env.ID == "" {
			return fmt.Errorf("floor: body: %v", err)
		}
		now := time.Now()
		key := map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: env.ID}}
		_, err := b.ddb.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: table,
			Item: map[string]ddbtypes.AttributeValue{
				"pk":    key["pk"],
				"st":    &ddbtypes.AttributeValueMemberS{Value: "running"},
				"lease": &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(5*time.Minute).UnixMilli(), 10)},
			},
			ConditionExpression: aws.String("attribute_not_exists(pk)"),
		})
		var ccf *ddbtypes.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return nil // a duplicate
		}
		if err != nil {
			return fmt.Errorf("floor: claim: %w", err)
		}
		_, err = b.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                table,
			Key:                      key,
			UpdateExpression:         aws.String("SET st = :s, upd = :u, #e = :e"),
			ExpressionAttributeNames: map[string]string{"#e": "exp"},
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
				":s": &ddbtypes.AttributeValueMemberS{Value: "succeeded"},
				":u": &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(now.UnixMilli(), 10)},
				":e": &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(now.Unix()+floorTTL, 10)},
			},
		})
		if err != nil {
			return fmt.Errorf("floor: finish: %w", err)
		}
		return nil
	})
}

// --- our scenarios ---

// deleteCounter is the poller's SQS client: it counts the messages deleted and closes done once
// n are.
type deleteCounter struct {
	*sqs.Client
	n       int64
	deleted atomic.Int64
	once    sync.Once
	done    chan struct{}
}

func (c *deleteCounter) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, o ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	out, err := c.Client.DeleteMessageBatch(ctx, in, o...)
	if err == nil && c.deleted.Add(int64(len(out.Successful))) >= c.n {
		c.once.Do(func() { close(c.done) })
	}
	return out, err
}

func runPoller(ctx context.Context, b *bench, r *resources, batches int) error {
	return runOurs(ctx, b, r, batches, nil)
}

func runIdempotent(ctx context.Context, b *bench, r *resources, batches int) error {
	store, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: b.ddb, Table: r.table})
	if err != nil {
		return err
	}
	mw, err := idempotency.NewMiddleware(idempotency.MiddlewareConfig{Store: store, Logger: logger()})
	if err != nil {
		return err
	}
	return runOurs(ctx, b, r, batches, []worker.Middleware{mw})
}

// logger is what a container would use: JSON lines at the default level (Info), here discarded.
func logger() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }

// runOurs runs the poller with the worker (and mws) until r.n messages are deleted.
func runOurs(ctx context.Context, b *bench, r *resources, batches int, mws []worker.Middleware) error {
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[noopArgs](func(context.Context, *jobs.Job[noopArgs]) error { return nil }))
	client := &deleteCounter{Client: b.sqs, n: int64(r.n), done: make(chan struct{})}
	h, err := worker.New(worker.Config{Registry: reg, SQS: client, QueueURL: r.stack.QueueURL, DLQURL: r.stack.DLQURL,
		Middleware: mws, Logger: logger()})
	if err != nil {
		return err
	}
	p, err := poller.New(poller.Config{SQS: client, QueueURL: r.stack.QueueURL, Handler: h, Concurrency: batches,
		BatchSize: 10, WaitTime: time.Second, Logger: logger()})
	if err != nil {
		return err
	}
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- p.Run(pctx) }()
	select {
	case <-client.done:
		r.done = time.Now()
	case err := <-errc:
		return fmt.Errorf("poller stopped early: %v", err)
	case <-ctx.Done():
		return fmt.Errorf("%d of %d messages deleted: %w", client.deleted.Load(), r.n, ctx.Err())
	}
	stop()
	return <-errc
}
