package demo

import (
	"context"
	"sync"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/longjob"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// The demo's long job (docs/LONG-JOBS.md): a backfill of 20 rows, 100 ms each, whose kind has a
// one-second slice. It runs in about three slices: each saves its cursor as it goes, ends when
// its slice is over, and the worker sends it again to continue from the cursor, without
// spending an attempt. Its row shows one attempt; its record, the continuations.

// backfillArgs are the long job's args.
type backfillArgs struct {
	Rows int `json:"rows"`
}

func (backfillArgs) Kind() string { return longJobKind }

const (
	longJobKind  = "demo.backfill"
	longJobLabel = "long job: 2 s of work in 1 s slices, continued from its cursor"
	longJobRows  = 20
)

// longJobs counts the backfills that completed, per key (the job's side effect: once).
type longJobs struct {
	mu   sync.Mutex
	done map[string]int
}

// registerLongJob registers the long job's kind.
func registerLongJob(reg *jobs.Registry) (*longJobs, error) {
	l := &longJobs{done: map[string]int{}}
	err := jobs.Register(reg, jobs.WorkFunc[backfillArgs](func(ctx context.Context, job *jobs.Job[backfillArgs]) error {
		err := longjob.Iterate(ctx, 0, func(ctx context.Context, row int) (int, bool, error) {
			time.Sleep(100 * time.Millisecond) // copy one row
			return row + 1, row+1 == job.Args.Rows, nil
		}, longjob.Options{Every: -1})
		if err == nil {
			l.mu.Lock()
			l.done[job.Key]++
			l.mu.Unlock()
		}
		return err
	}), jobs.WithSlice(time.Second))
	return l, err
}

// runs returns how many times the backfill of key completed.
func (l *longJobs) runs(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done[key]
}

// enqueueLongJob sends the long job; the tracker follows it by its id (each continuation is a new
// message).
func enqueueLongJob(ctx context.Context, prod *producer.Producer, track *tracker) error {
	res, err := prod.Enqueue(ctx, backfillArgs{Rows: longJobRows})
	if err != nil {
		return err
	}
	track.expectJob(longJobLabel, res.ID, res.Kind, res.Key)
	return nil
}
