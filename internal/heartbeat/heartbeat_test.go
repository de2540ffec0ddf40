package heartbeat_test

import (
	"context"
	"slices"
	"testing"

	"github.com/sqsworker/sqsworker/internal/heartbeat"
)

type recorder struct{ got [][]string }

func (r *recorder) Stop(handles []string) { r.got = append(r.got, slices.Clone(handles)) }

func TestStop(t *testing.T) {
	t.Parallel()
	// Without a Stopper: nothing happens, nothing panics.
	heartbeat.Stop(context.Background(), []string{"rh-1"})

	r := &recorder{}
	ctx := heartbeat.NewContext(context.Background(), r)
	heartbeat.Stop(ctx, nil) // no handles: the Stopper is not called
	heartbeat.Stop(ctx, []string{"rh-1", "rh-2"})
	heartbeat.Stop(context.WithoutCancel(ctx), []string{"rh-3"}) // derived contexts carry it
	want := [][]string{{"rh-1", "rh-2"}, {"rh-3"}}
	if !slices.EqualFunc(r.got, want, slices.Equal[[]string]) {
		t.Fatalf("Stop calls = %v, want %v", r.got, want)
	}
}
