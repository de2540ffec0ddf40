package batch_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/batch"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/payload"
)

// BigResult is a chain step whose result is larger than a job record keeps; ReadResult reads it.
type BigResult struct{}

func (BigResult) Kind() string { return "test.big_result" }

type ReadResult struct{}

func (ReadResult) Kind() string { return "test.read_result" }

// TestLargeResultThroughS3: a step's result above idempotency.MaxResultBytes goes to S3 through
// the payload store (SetResult), its record keeps a reference, and the next step reads the whole
// result (PreviousResult); without a store, SetResult refuses it with ErrTooLarge.
func TestLargeResultThroughS3(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	b := awslocaltest.Backend(t)
	bucket, err := awslocal.ProvisionBucket(r.ctx, b.S3(), awslocal.UniqueName("results"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := payload.New(payload.Config{S3: b.S3(), Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	big := []byte(`"` + strings.Repeat("x", 3*idempotency.MaxResultBytes) + `"`)
	var mu sync.Mutex
	var got []byte
	var noStoreErr error
	jobs.MustRegister(r.reg, jobs.WorkFunc[BigResult](func(ctx context.Context, j *jobs.Job[BigResult]) error {
		err := batch.SetResult(ctx, nil, big)
		mu.Lock()
		noStoreErr = err
		mu.Unlock()
		return batch.SetResult(ctx, store, big)
	}))
	jobs.MustRegister(r.reg, jobs.WorkFunc[ReadResult](func(ctx context.Context, j *jobs.Job[ReadResult]) error {
		prev, ok, err := batch.PreviousResult(ctx, store)
		if err != nil || !ok {
			return jobs.Cancel(errors.Join(err, errors.New("no previous result")))
		}
		mu.Lock()
		got = prev
		mu.Unlock()
		return nil
	}))
	first, err := r.prod.Prepare(r.ctx, BigResult{})
	if err != nil {
		t.Fatal(err)
	}
	second, err := r.prod.Prepare(r.ctx, ReadResult{})
	if err != nil {
		t.Fatal(err)
	}
	id, err := r.client.StartChain(r.ctx, batch.ChainSpec{}, first, second)
	if err != nil {
		t.Fatal(err)
	}
	r.start(1, 0)
	r.waitFor("the chain", time.Minute, func() bool {
		d, err := r.client.GetChain(r.ctx, id)
		return err == nil && d.State != batch.ChainRunning
	})
	d, err := r.client.GetChain(r.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if d.State != batch.ChainSucceeded {
		t.Fatalf("chain: %+v", d.ChainInfo)
	}
	mu.Lock()
	defer mu.Unlock()
	if !errors.Is(noStoreErr, batch.ErrTooLarge) {
		t.Errorf("SetResult of %d bytes without a store: %v, want ErrTooLarge", len(big), noStoreErr)
	}
	if !bytes.Equal(got, big) {
		t.Errorf("the next step read %d bytes, want the %d of the result", len(got), len(big))
	}
	if rec := d.Steps[0].Result; len(rec) > idempotency.MaxResultBytes || !strings.Contains(rec, "sqsworker_result_s3") {
		t.Errorf("step 1's record keeps %d bytes (%.80s), want a reference to S3", len(rec), rec)
	}
}
