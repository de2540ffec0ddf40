package idempotency_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/payload"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// Checkpoint's errors: outside a job, a cursor over the record's limit without a cursor store,
// and after the job returned; none of them writes anything.
func TestCheckpointErrors(t *testing.T) {
	t.Parallel()
	if err := jobs.Checkpoint(context.Background(), 1); !errors.Is(err, jobs.ErrNoCheckpointer) {
		t.Errorf("Checkpoint outside a job = %v, want ErrNoCheckpointer", err)
	}
	if _, err := jobs.Cursor(context.Background(), new(int)); !errors.Is(err, jobs.ErrNoCheckpointer) {
		t.Errorf("Cursor outside a job = %v, want ErrNoCheckpointer", err)
	}
	stores(t, func(t *testing.T, newStore func() idempotency.Store) {
		store := newStore()
		r := newRig(t, store, 5, nil)
		var tooLarge, late error
		var kept context.Context
		r.work = func(ctx context.Context, job *jobs.Job[chargeArgs]) error {
			tooLarge = jobs.Checkpoint(ctx, strings.Repeat("x", idempotency.MaxCursorBytes)) // + 2 quotes
			kept = ctx
			return nil
		}
		r.deliver(context.Background(), message("m1", "job-1", "", chargeArgs{Order: "o"}, 1))
		if !errors.Is(tooLarge, jobs.ErrCursorTooLarge) || !strings.Contains(tooLarge.Error(), "16386 bytes") ||
			!strings.Contains(tooLarge.Error(), "at most 16384") || !strings.Contains(tooLarge.Error(), "MiddlewareConfig.Cursors") {
			t.Errorf("a cursor over the limit: %v; want ErrCursorTooLarge naming both sizes and the S3 option", tooLarge)
		}
		late = jobs.Checkpoint(kept, 1)
		if !errors.Is(late, jobs.ErrNoCheckpointer) {
			t.Errorf("Checkpoint after the job returned = %v, want ErrNoCheckpointer", late)
		}
		rec, err := store.Get(context.Background(), "payment.charge", "job-1")
		if err != nil || rec.State != idempotency.StateSucceeded || rec.Cursor.Seq != 0 {
			t.Errorf("record %+v, %v; want succeeded without a cursor", rec, err)
		}
	})
}

// A failed job is retried from its last checkpoint; one that returned jobs.Restart starts over;
// the cursor numbers go on across runs, and a success removes the cursor's value.
func TestRetryFromCheckpointAndRestart(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, newStore func() idempotency.Store) {
		store := newStore()
		r := newRig(t, store, 5, nil)
		var seen []string // the cursor each run found
		r.work = func(ctx context.Context, job *jobs.Job[chargeArgs]) error {
			var at int
			found, err := jobs.Cursor(ctx, &at)
			if err != nil {
				return err
			}
			seen = append(seen, map[bool]string{true: strconv.Itoa(at), false: "none"}[found])
			switch len(seen) {
			case 1:
				if err := jobs.Checkpoint(ctx, 10); err != nil {
					return err
				}
				if err := jobs.Checkpoint(ctx, 20); err != nil {
					return err
				}
				return errors.New("boom after 20")
			case 2:
				if err := jobs.Checkpoint(ctx, 30); err != nil {
					return err
				}
				return jobs.Restart(errors.New("the export is corrupt: start over"))
			}
			return jobs.Checkpoint(ctx, 5) // the third run: starts from none, saves, succeeds
		}
		ctx := context.Background()
		for i := 1; i <= 3; i++ {
			r.deliver(ctx, message("m1", "job-1", "", chargeArgs{Order: "o"}, i))
		}
		if strings.Join(seen, ",") != "none,20,none" {
			t.Errorf("runs found cursors %v; want none, 20 (the failure's last), none (after a restart)", seen)
		}
		rec, err := store.Get(ctx, "payment.charge", "job-1")
		if err != nil {
			t.Fatal(err)
		}
		if rec.State != idempotency.StateSucceeded || rec.Runs != 3 || rec.Cursor.Saved() || rec.Cursor.Seq != 4 || rec.Continuations != 0 {
			t.Errorf("record %+v; want succeeded after 3 attempts, the cursor's value removed, its number 4, no continuations", rec)
		}
		if st := r.mw.Stats(); st.Checkpoints != 4 {
			t.Errorf("Stats.Checkpoints = %d, want 4", st.Checkpoints)
		}
	})
}

// A cursor larger than the record holds goes to S3 through MiddlewareConfig.Cursors: the record
// keeps the object's pointer and the cursor's size, the next run reads it back, a newer cursor's
// object replaces it (the old one is marked done), a success marks the last one done too, and a
// cursor over the store's limit is refused.
func TestLargeCursorThroughS3(t *testing.T) {
	t.Parallel()
	b := awslocaltest.Backend(t)
	client := b.S3()
	bucket, err := awslocal.ProvisionBucket(context.Background(), client, awslocal.UniqueName("cursors"))
	if err != nil {
		t.Fatal(err)
	}
	objects, err := payload.New(payload.Config{S3: client, Bucket: bucket, MaxSize: 100 << 10})
	if err != nil {
		t.Fatal(err)
	}
	store := idempotency.NewMemoryStore()
	r := newRig(t, store, 5, func(c *idempotency.MiddlewareConfig) { c.Cursors = objects })
	big := strings.Repeat("c", 40<<10)
	var got []int // the length of the cursor each run found
	var overLimit error
	r.work = func(ctx context.Context, job *jobs.Job[chargeArgs]) error {
		var cur string
		if _, err := jobs.Cursor(ctx, &cur); err != nil {
			return err
		}
		got = append(got, len(cur))
		if len(got) == 1 {
			if err := jobs.Checkpoint(ctx, big); err != nil {
				return err
			}
			return errors.New("fail after a large checkpoint")
		}
		if cur != big {
			return jobs.Cancel(errors.New("the cursor read back differs"))
		}
		overLimit = jobs.Checkpoint(ctx, strings.Repeat("x", 101<<10))
		return jobs.Checkpoint(ctx, big+"2")
	}
	ctx := context.Background()
	r.deliver(ctx, message("m1", "job-1", "", chargeArgs{Order: "o"}, 1))
	first, err := store.Get(ctx, "payment.charge", "job-1")
	if err != nil {
		t.Fatal(err)
	}
	if first.Cursor.Value != "" || first.Cursor.Pointer == "" || first.Cursor.Bytes != len(big)+2 {
		t.Fatalf("record's cursor after a 40 KiB checkpoint: %+v; want a pointer and the size", first.Cursor)
	}
	r.deliver(ctx, message("m1", "job-1", "", chargeArgs{Order: "o"}, 2))
	if len(got) != 2 || got[1] != len(big) {
		t.Fatalf("runs found cursors of %v bytes; want 0, then the 40 KiB one from S3", got)
	}
	if !errors.Is(overLimit, jobs.ErrCursorTooLarge) {
		t.Errorf("a cursor over the cursor store's limit: %v, want ErrCursorTooLarge", overLimit)
	}
	rec, err := store.Get(ctx, "payment.charge", "job-1")
	if err != nil || rec.State != idempotency.StateSucceeded || rec.Cursor.Saved() {
		t.Fatalf("record %+v, %v; want succeeded with the cursor's value removed", rec, err)
	}
	p1, err := payload.ParsePointer(first.Cursor.Pointer)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p1.Key, objects.Key("job-1")+"/cursor/1-") {
		t.Errorf("cursor object key %q, want under the job's payload key", p1.Key)
	}
	for _, key := range listKeys(t, client, bucket) {
		tags, err := client.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		if len(tags.TagSet) != 1 || aws.ToString(tags.TagSet[0].Key) != payload.DoneTagKey {
			t.Errorf("cursor object %s has tags %v; want it marked done (replaced, then the job succeeded)", key, tags.TagSet)
		}
	}
}

func listKeys(t *testing.T, client *s3.Client, bucket string) []string {
	t.Helper()
	out, err := client.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	if len(keys) != 2 {
		t.Errorf("bucket holds %v, want the two cursor objects", keys)
	}
	return keys
}

// A cancellation requested while a job runs wins over its continuation: a job that then sleeps
// (or whose slice ends) is recorded cancelled and dead-lettered as cancelled, not re-sent;
// noticed by the checkpoint's write, or by the finishing write itself.
func TestCancelRequestWinsOverContinuation(t *testing.T) {
	t.Parallel()
	for _, noticed := range []bool{true, false} {
		t.Run(map[bool]string{true: "noticed", false: "at-the-finish"}[noticed], func(t *testing.T) {
			t.Parallel()
			stores(t, func(t *testing.T, newStore func() idempotency.Store) {
				store := newStore()
				r := newRig(t, store, 5, func(c *idempotency.MiddlewareConfig) { c.CancelCheck = -1 })
				r.work = func(ctx context.Context, job *jobs.Job[chargeArgs]) error {
					if err := jobs.Checkpoint(ctx, 1); err != nil {
						return err
					}
					requestCancel(t, store, "job-1", "stop it", r.clock.Now())
					if noticed {
						_ = jobs.Checkpoint(ctx, 2) // its write returns the record with the request
					}
					return jobs.Sleep(time.Hour)
				}
				out := r.deliver(context.Background(), message("m1", "job-1", "", chargeArgs{Order: "o"}, 1))
				if len(out) != 1 || out[0].Outcome != worker.OutcomeDeadLettered || out[0].Reason != jobs.ReasonCancelled {
					t.Fatalf("outcomes %+v; want dead-lettered as cancelled", out)
				}
				rec, err := store.Get(context.Background(), "payment.charge", "job-1")
				if err != nil || rec.State != idempotency.StateCancelled || rec.Continuations != 0 {
					t.Errorf("record %+v, %v; want cancelled, no continuation", rec, err)
				}
			})
		})
	}
}
