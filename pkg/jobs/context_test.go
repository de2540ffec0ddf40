package jobs_test

import (
	"context"
	"testing"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

const (
	tpJob      = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	tpExplicit = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tpInner    = "00-11111111111111111111111111111111-2222222222222222-00"
)

func TestInfoFromContext(t *testing.T) {
	t.Parallel()
	if info, ok := jobs.InfoFromContext(context.Background()); ok || info != nil {
		t.Errorf("InfoFromContext(Background) = %v, %v; want nil, false", info, ok)
	}
	want := &jobs.Info{ID: "job-1", Kind: "email.send", Attempt: 2}
	ctx := jobs.WithInfo(context.Background(), want)
	got, ok := jobs.InfoFromContext(ctx)
	if !ok || got != want {
		t.Errorf("InfoFromContext = %p, %v; want %p, true", got, ok, want)
	}
	// Still found under derived contexts and other values.
	derived, cancel := context.WithCancel(jobs.WithTraceParent(ctx, tpExplicit))
	defer cancel()
	if got, ok := jobs.InfoFromContext(derived); !ok || got != want {
		t.Errorf("InfoFromContext(derived) = %p, %v; want %p, true", got, ok, want)
	}
	// The innermost job wins (a job run from inside another job's context).
	inner := &jobs.Info{ID: "job-2"}
	if got, _ := jobs.InfoFromContext(jobs.WithInfo(ctx, inner)); got != inner {
		t.Errorf("InfoFromContext(nested) = %+v, want the inner job", got)
	}
}

func TestTraceParentFromContext(t *testing.T) {
	t.Parallel()
	bg := context.Background()
	jobCtx := jobs.WithInfo(bg, &jobs.Info{ID: "job-1", TraceParent: tpJob})
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"nothing", bg, ""},
		{"explicit", jobs.WithTraceParent(bg, tpExplicit), tpExplicit},
		{"job's", jobCtx, tpJob},
		{"job without traceparent", jobs.WithInfo(bg, &jobs.Info{ID: "job-1"}), ""},
		{"explicit wins over job's", jobs.WithTraceParent(jobCtx, tpExplicit), tpExplicit},
		{"innermost explicit wins", jobs.WithTraceParent(jobs.WithTraceParent(bg, tpExplicit), tpInner), tpInner},
	} {
		if got := jobs.TraceParentFromContext(tc.ctx); got != tc.want {
			t.Errorf("%s: TraceParentFromContext = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestInfoContext(t *testing.T) {
	t.Parallel()
	type k struct{}
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), k{}, "outer"))
	info := &jobs.Info{ID: "j1"}
	ctx := &jobs.InfoContext{Context: parent, Info: info}
	if got, ok := jobs.InfoFromContext(ctx); !ok || got != info {
		t.Errorf("InfoFromContext = %v, %v", got, ok)
	}
	if ctx.Value(k{}) != "outer" {
		t.Error("other values must come from the parent")
	}
	child, stop := context.WithCancel(ctx)
	defer stop()
	cancel()
	<-child.Done() // cancellation flows through
	if got, _ := jobs.InfoFromContext(child); got != info {
		t.Error("children see the info")
	}
}
