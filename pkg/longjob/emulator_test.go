package longjob_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/longjob"
	"github.com/sqsworker/sqsworker/pkg/poller"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// backfill is the job of the emulator tests: it goes over items 0…N-1 in steps of Chunk items
// (processed concurrently, each an idempotent marker write), saving its cursor (the next item)
// at most every 100 ms, and records where each of its runs started. A step that started finishes
// its writes even when the slice ends meanwhile (they do not take the job's context), so that
// each write's outcome is known: the step after it is the one that stops.
func backfill(it *items) jobs.WorkFunc[backfillArgs] {
	return func(ctx context.Context, job *jobs.Job[backfillArgs]) error {
		from := -1
		if _, err := jobs.Cursor(ctx, &from); err != nil {
			return err
		}
		it.mu.Lock()
		it.runs = append(it.runs, from)
		it.mu.Unlock()
		n, chunk := job.Args.N, max(job.Args.Chunk, 1)
		return longjob.Iterate(ctx, 0, func(ctx context.Context, cur int) (int, bool, error) {
			end := min(cur+chunk, n)
			var wg sync.WaitGroup
			errs := make([]error, end-cur)
			for i := cur; i < end; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
					defer cancel()
					errs[i-cur] = it.process(wctx, job.ID, i)
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				return cur, false, err
			}
			return end, end == n, nil
		}, longjob.Options{Every: 100 * time.Millisecond})
	}
}

// TestBackfillAcrossInvocations runs a job over 10,000 items under two pollers whose handler
// invocations last 1.5 s (as a Lambda function's timeout): the job's slice ends before each
// deadline, it is re-sent and continued from its cursor many times, and completes with every
// item's marker written exactly once, none missing, no run starting over, no attempt spent and
// nothing dead-lettered.
func TestBackfillAcrossInvocations(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	it := &items{ddb: s.ddb, table: s.table, written: map[int]int{}}
	mw, err := idempotency.NewMiddleware(idempotency.MiddlewareConfig{Store: s.store, Logger: logger(), AbandonGrace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, backfill(it))
	h, err := worker.New(worker.Config{Registry: reg, SQS: s.sqs, QueueURL: s.stack.QueueURL, DLQURL: s.stack.DLQURL,
		Middleware: []worker.Middleware{mw}, DeadlineMargin: 300 * time.Millisecond, SliceGrace: 300 * time.Millisecond,
		AbandonGrace: 2 * time.Second, Logger: logger()})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		s.startPoller(h, poller.Config{InvocationTimeout: 1500 * time.Millisecond, Concurrency: 2, VisibilityTimeout: 20 * time.Second})
	}

	const n = 10000
	res, err := s.prod.Enqueue(context.Background(), backfillArgs{N: n, Chunk: 25})
	if err != nil {
		t.Fatal(err)
	}
	j := s.waitState(res.ID, idempotency.StateSucceeded, 10*time.Minute)
	t.Logf("%s; record: runs %d, continuations %d, run time %s, cursor #%d (%d bytes)", it, j.Runs, j.Continuations, j.RunTime,
		j.Cursor.Seq, j.Cursor.Bytes)

	it.mu.Lock()
	defer it.mu.Unlock()
	for i := range n {
		if c := it.written[i]; c != 1 {
			t.Errorf("item %d written %d times, want once", i, c)
		}
	}
	if len(it.written) != n {
		t.Errorf("%d items written, want %d", len(it.written), n)
	}
	if len(it.runs) < 4 {
		t.Errorf("the job ran %d times, want several continuations (1.5 s invocations)", len(it.runs))
	}
	if it.runs[0] != -1 {
		t.Errorf("the first run started from cursor %d, want none", it.runs[0])
	}
	for k := 1; k < len(it.runs); k++ {
		if it.runs[k] <= 0 || it.runs[k] < it.runs[k-1] {
			t.Errorf("run %d started from cursor %d after a run from %d: it started over or went back (runs from %v)", k, it.runs[k], it.runs[k-1], it.runs)
		}
	}
	// Only the steps after a run's last checkpoint are done again: at most one chunk per slice.
	if r := it.refused.Load(); r > int64(25*len(it.runs)) {
		t.Errorf("%d marker writes found their item done: more than one chunk per run was redone", r)
	}
	if j.Runs != 1 || j.Continuations != len(it.runs)-1 {
		t.Errorf("record: runs %d, continuations %d; want 1 attempt and %d continuations", j.Runs, j.Continuations, len(it.runs)-1)
	}
	if j.Cursor.Saved() || j.Cursor.Seq < int64(len(it.runs)-1) {
		t.Errorf("record's cursor after success: %+v; want its value removed, its number kept", j.Cursor)
	}
	if j.RunTime <= 0 {
		t.Errorf("record's run time %s, want the runs' sum", j.RunTime)
	}
	if got := s.countMarkers(res.ID); got != n {
		t.Errorf("the table holds %d markers of the job, want %d", got, n)
	}
	s.dlqEmpty()
}

// countMarkers counts the item markers of a job in the table (a Scan).
func (s *stack) countMarkers(job string) int {
	s.t.Helper()
	prefix := "item#" + job + "#"
	n := 0
	var start map[string]ddbtypes.AttributeValue
	for {
		out, err := s.ddb.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(s.table), ExclusiveStartKey: start})
		if err != nil {
			s.t.Fatal(err)
		}
		for _, item := range out.Items {
			if pk, ok := item["pk"].(*ddbtypes.AttributeValueMemberS); ok && strings.HasPrefix(pk.Value, prefix) {
				n++
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return n
		}
		start = out.LastEvaluatedKey
	}
}
