package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/internal/testenv/awscost"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/dedup"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/schedule"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// metered is a producer (with the queued record) and an Enqueuer on the env's queue and table
// whose AWS calls are counted and whose DynamoDB writes are billed by DynamoDB's rules
// (internal/testenv/awscost: the item before and after each write, from a strongly consistent
// read, since the emulator reports no consumed capacity).
type metered struct {
	counter *awscost.Counter
	ledger  *awscost.Ledger
	prod    *producer.Producer
	enq     *dedup.Enqueuer
	mu      sync.Mutex
	failed  error
	sched   map[string]int64
}

func newMetered(t *testing.T, e *env) *metered {
	t.Helper()
	b := awslocaltest.Backend(t)
	m := &metered{sched: map[string]int64{}, ledger: awscost.NewLedger(map[string]awscost.Schema{e.table: awscost.SchemaFromCreateTable(idempotency.TableInput(e.table))})}
	m.counter = &awscost.Counter{Next: b.Config.HTTPClient, OnWrite: func(w awscost.Write) {
		if w.Status != http.StatusOK && !w.ConditionFailed {
			return
		}
		schema, _ := m.ledger.Schema(w.Table)
		key := schema.Key(w)
		out, err := e.ddb.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(w.Table), Key: key, ConsistentRead: aws.Bool(true)})
		if err == nil {
			_, err = m.ledger.Record(w.Table, key, out.Item, w.ConditionFailed)
		}
		if err != nil {
			m.mu.Lock()
			m.failed = errors.Join(m.failed, err)
			m.mu.Unlock()
		}
	}}
	t.Cleanup(func() {
		if m.failed != nil {
			t.Errorf("ledger: %v", m.failed)
		}
	})
	cfg := b.Config.Copy()
	cfg.HTTPClient = m.counter
	ddb := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	st, err := status.New(status.Config{Client: ddb, Table: e.table, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if m.prod, err = producer.New(producer.Config{SQS: sqs.NewFromConfig(cfg), QueueURL: e.stack.QueueURL, Status: st, Clock: e.clock.Now}); err != nil {
		t.Fatal(err)
	}
	sc, err := schedule.NewClient(schedule.Config{Scheduler: &countingScheduler{Client: scheduler.NewFromConfig(cfg), m: m}, Group: e.sched.Group(), QueueARN: e.stack.QueueARN,
		RoleARN: "arn:aws:iam::000000000000:role/sqsworker-scheduler", Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if m.enq, err = dedup.New(dedup.Config{Producer: m.prod, DynamoDB: ddb, Table: e.table, Jobs: st, Scheduler: sc,
		LocalScheduler: true, Now: e.clock.Now}); err != nil {
		t.Fatal(err)
	}
	return m
}

// countingScheduler counts the Scheduler calls by name (a REST API: the Counter, which reads
// X-Amz-Target, sees them as "other").
type countingScheduler struct {
	*scheduler.Client
	m *metered
}

func (c *countingScheduler) count(op string) {
	c.m.mu.Lock()
	c.m.sched[op]++
	c.m.mu.Unlock()
}

func (c *countingScheduler) CreateSchedule(ctx context.Context, in *scheduler.CreateScheduleInput, o ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error) {
	c.count("scheduler.CreateSchedule")
	return c.Client.CreateSchedule(ctx, in, o...)
}

func (c *countingScheduler) UpdateSchedule(ctx context.Context, in *scheduler.UpdateScheduleInput, o ...func(*scheduler.Options)) (*scheduler.UpdateScheduleOutput, error) {
	c.count("scheduler.UpdateSchedule")
	return c.Client.UpdateSchedule(ctx, in, o...)
}

func (c *countingScheduler) DeleteSchedule(ctx context.Context, in *scheduler.DeleteScheduleInput, o ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error) {
	c.count("scheduler.DeleteSchedule")
	return c.Client.DeleteSchedule(ctx, in, o...)
}

// cost is what one operation cost: the calls by name, and the write units.
type cost struct {
	calls map[string]int64
	wru   int
}

func (m *metered) measure(t *testing.T, op func()) cost {
	t.Helper()
	m.counter.Reset()
	m.mu.Lock()
	clear(m.sched)
	m.mu.Unlock()
	before, idx, _ := m.ledger.Totals()
	for _, n := range idx {
		before += n
	}
	op()
	after, idx, _ := m.ledger.Totals()
	for _, n := range idx {
		after += n
	}
	calls := m.counter.Calls()
	delete(calls, "other")
	m.mu.Lock()
	for op, n := range m.sched {
		calls[op] = n
	}
	m.mu.Unlock()
	return cost{calls: calls, wru: after - before}
}

func (c cost) String() string {
	names := make([]string, 0, len(c.calls))
	for n := range c.calls {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%d %s", c.calls[n], n)
	}
	return fmt.Sprintf("%s | %d WRU", strings.Join(parts, ", "), c.wru)
}

// TestUniqueEnqueueCost measures, on the embedded emulator, the calls and write units each rule
// adds to an enqueue, against the producer's own Send with its queued record in the same run.
// A unique enqueue of a free key adds one conditional PutItem (1 write unit) and no read; the
// rest is printed for docs/BENCHMARKS.md (go test -run TestUniqueEnqueueCost -v ./pkg/dedup).
func TestUniqueEnqueueCost(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, envOptions{})
	m := newMetered(t, e)
	rows := []struct {
		name string
		c    cost
	}{}
	add := func(name string, c cost) {
		rows = append(rows, struct {
			name string
			c    cost
		}{name, c})
	}

	base := m.measure(t, func() {
		msg, err := m.prod.Prepare(ctx, exportArgs{User: "base"})
		if err != nil {
			t.Fatal(err)
		}
		if res, err := m.prod.Send(ctx, []producer.Message{msg}); err != nil || res[0].Err != nil || res[0].StatusErr != nil {
			t.Fatalf("baseline send: %v %+v", err, res)
		}
	})
	add("baseline: producer Prepare + Send, queued record (Config.Status)", base)

	anyState := dedup.Unique{Key: "cost-any", Window: time.Hour}
	active := dedup.Unique{Key: "cost-active", Window: time.Hour, States: dedup.WhileActive}
	enqueue := func(rule dedup.Rule, want dedup.Outcome) func() {
		return func() {
			res, err := m.enq.Enqueue(ctx, exportArgs{User: "u"}, rule)
			if err != nil && !errors.Is(err, dedup.ErrThrottled) || res.Outcome != want {
				t.Fatalf("%T: %+v, %v; want %s", rule, res, err, want)
			}
		}
	}
	free := m.measure(t, enqueue(anyState, dedup.Enqueued))
	add("unique, key free (either rule)", free)
	add("unique duplicate, any state, in the first job's lease", m.measure(t, enqueue(anyState, dedup.Duplicate)))
	m.measure(t, enqueue(active, dedup.Enqueued))
	add("unique duplicate, WhileActive (its record is read)", m.measure(t, enqueue(active, dedup.Duplicate)))
	e.clock.Add(2 * time.Minute)
	add("unique duplicate, any state, after the lease (its record is read)", m.measure(t, enqueue(anyState, dedup.Duplicate)))
	e.work(e.receive())
	add("unique, WhileActive, the holder succeeded (taken over)", m.measure(t, enqueue(active, dedup.Enqueued)))
	thr := dedup.Throttle{Key: "cost", Limit: 1, Period: time.Hour}
	add("throttle, accepted", m.measure(t, enqueue(thr, dedup.Enqueued)))
	add("throttle, dropped", m.measure(t, enqueue(thr, dedup.Throttled)))
	deb := dedup.Debounce{Key: "cost", Period: time.Minute}
	add("debounce, first enqueue (starts the job)", m.measure(t, enqueue(deb, dedup.Debounced)))
	add("debounce, next enqueue (moves the job)", m.measure(t, enqueue(deb, dedup.Debounced)))

	for _, r := range rows {
		t.Logf("%-66s %s", r.name, r.c)
	}

	// The claim of the issue: a unique enqueue adds one write unit and no read.
	if got := free.calls["dynamodb.PutItem"] - base.calls["dynamodb.PutItem"]; got != 1 {
		t.Errorf("a unique enqueue adds %d PutItem, want 1", got)
	}
	if free.calls["dynamodb.GetItem"] != 0 || free.calls["dynamodb.Query"] != 0 {
		t.Errorf("a unique enqueue of a free key reads: %v", free)
	}
	if got := free.wru - base.wru; got != 1 {
		t.Errorf("a unique enqueue adds %d write units, want 1", got)
	}
	if free.calls["sqs.SendMessageBatch"] != base.calls["sqs.SendMessageBatch"] || len(free.calls) != len(base.calls) {
		t.Errorf("a unique enqueue sends otherwise than the producer: %v against %v", free, base)
	}
}

// benchSeq makes the benchmark's keys unique across its runs (-count).
var benchSeq atomic.Int64

// BenchmarkUniqueEnqueue times, on the embedded emulator, the producer's own Prepare + Send with
// its queued record (the baseline), an enqueue under a new unique key each time (the write and
// the send), and a duplicate (the refused write; the emulator adds the read that AWS's ALL_OLD
// answer saves). go test -run '^$' -bench UniqueEnqueue -benchtime 2000x ./pkg/dedup
func BenchmarkUniqueEnqueue(b *testing.B) {
	ctx := context.Background()
	e := newEnv(b, envOptions{})
	b.Run("producer", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			msg, err := e.prod.Prepare(ctx, exportArgs{User: "base", N: i})
			if err != nil {
				b.Fatal(err)
			}
			if res, err := e.prod.Send(ctx, []producer.Message{msg}); err != nil || res[0].Err != nil {
				b.Fatal(err, res[0].Err)
			}
		}
	})
	b.Run("unique", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			key := fmt.Sprint("bench-", benchSeq.Add(1))
			res, err := e.enq.Enqueue(ctx, exportArgs{User: "u", N: i}, dedup.Unique{Key: key, Window: time.Hour})
			if err != nil || res.Outcome != dedup.Enqueued {
				b.Fatal(err, res.Outcome)
			}
		}
	})
	b.Run("duplicate", func(b *testing.B) {
		rule := dedup.Unique{Key: fmt.Sprint("bench-dup-", benchSeq.Add(1)), Window: time.Hour}
		if _, err := e.enq.Enqueue(ctx, exportArgs{User: "d"}, rule); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			res, err := e.enq.Enqueue(ctx, exportArgs{User: "d"}, rule)
			if err != nil || res.Outcome != dedup.Duplicate {
				b.Fatal(err, res.Outcome)
			}
		}
	})
}
