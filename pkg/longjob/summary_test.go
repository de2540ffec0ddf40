package longjob_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/longjob"
	"github.com/sqsworker/sqsworker/pkg/payload"
)

func TestSummarize(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ptr := payload.Pointer{Bucket: "b", Key: "p/j/cursor/3-t", Class: payload.FormatCurrent.Class()}.Body()
	for _, tt := range []struct {
		name string
		rec  idempotency.Record
		show bool
		text string
	}{
		{"no long job", idempotency.Record{}, false, "none"},
		{"run time only", idempotency.Record{RunTime: 1500 * time.Millisecond}, true, "none"},
		{"inline", idempotency.Record{Cursor: idempotency.Cursor{Value: `{"page":4}`, Bytes: 10, Seq: 41, At: now.Add(-190 * time.Second)}, Continuations: 3},
			true, "10 B, checkpoint #41, saved 3m10s ago"},
		{"in S3", idempotency.Record{Cursor: idempotency.Cursor{Pointer: ptr, Bytes: 40 << 10, Seq: 3, At: now.Add(-250 * time.Millisecond)}},
			true, "40.0 KiB, checkpoint #3, saved 0.25s ago, in S3 (s3://b/p/j/cursor/3-t)"},
		{"removed", idempotency.Record{Cursor: idempotency.Cursor{Bytes: 2 << 20, Seq: 9, At: now.Add(-26 * time.Hour)}},
			true, "2.0 MiB, checkpoint #9, saved 26h0m0s ago; removed (the job finished, or restarted)"},
		{"saved in the future (a clock ahead)", idempotency.Record{Cursor: idempotency.Cursor{Value: "1", Bytes: 1, Seq: 1, At: now.Add(time.Minute)}},
			true, "1 B, checkpoint #1, saved 0s ago"},
	} {
		s, show := longjob.Summarize(tt.rec, now)
		if show != tt.show || s.CursorText() != tt.text {
			t.Errorf("%s: shown %v, %q; want %v, %q", tt.name, show, s.CursorText(), tt.show, tt.text)
		}
	}
}

type objects map[string][]byte

func (o objects) Get(_ context.Context, p payload.Pointer) ([]byte, error) {
	if b, ok := o[p.Key]; ok {
		return b, nil
	}
	return nil, payload.ErrNotFound
}

func TestLoadCursor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ptr := payload.Pointer{Bucket: "b", Key: "k", Class: payload.FormatCurrent.Class()}.Body()
	if b, err := longjob.LoadCursor(ctx, idempotency.Record{Cursor: idempotency.Cursor{Value: "7", Seq: 1}}, nil); err != nil || string(b) != "7" {
		t.Errorf("inline: %s, %v", b, err)
	}
	if b, err := longjob.LoadCursor(ctx, idempotency.Record{Cursor: idempotency.Cursor{Pointer: ptr, Seq: 1}}, objects{"k": []byte(`"big"`)}); err != nil || string(b) != `"big"` {
		t.Errorf("in S3: %s, %v", b, err)
	}
	if _, err := longjob.LoadCursor(ctx, idempotency.Record{Cursor: idempotency.Cursor{Pointer: ptr, Seq: 1}}, nil); err == nil {
		t.Error("a cursor in S3 without a store: no error")
	}
	if _, err := longjob.LoadCursor(ctx, idempotency.Record{Cursor: idempotency.Cursor{Seq: 4}}, nil); !errors.Is(err, longjob.ErrNoCursor) {
		t.Errorf("a removed cursor: %v, want ErrNoCursor", err)
	}
	if _, err := longjob.LoadCursor(ctx, idempotency.Record{Cursor: idempotency.Cursor{Pointer: "junk", Seq: 1}}, objects{}); err == nil {
		t.Error("a bad pointer: no error")
	}
}

// Iterate refuses a nil step, and outside a job with a job table fails before any step.
func TestIterateErrors(t *testing.T) {
	t.Parallel()
	step := func(context.Context, int) (int, bool, error) { t.Error("a step ran"); return 0, true, nil }
	if err := longjob.Iterate[int](context.Background(), 0, nil, longjob.Options{}); err == nil {
		t.Error("nil step: no error")
	}
	if err := longjob.Iterate(context.Background(), 0, step, longjob.Options{}); !errors.Is(err, jobs.ErrNoCheckpointer) {
		t.Errorf("outside a job: %v, want ErrNoCheckpointer", err)
	}
}
