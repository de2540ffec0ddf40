package fanout

import (
	"sync/atomic"
	"testing"
)

func TestRun(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 2, 7} {
		var calls [8]atomic.Int32
		Run(n, func(i int) { calls[i].Add(1) })
		for i := range calls {
			want := int32(0)
			if i < n {
				want = 1
			}
			if got := calls[i].Load(); got != want {
				t.Errorf("n=%d: fn(%d) called %d times, want %d", n, i, got, want)
			}
		}
	}
}

func TestRunRaisesAPanicOnTheCaller(t *testing.T) {
	t.Parallel()
	for _, bad := range []int{0, 2} { // on a goroutine of its own, and on the caller's
		var finished atomic.Int32
		func() {
			defer func() {
				if v := recover(); v != "part failed" {
					t.Errorf("part %d: recovered %v, want the part's panic", bad, v)
				}
				if got := finished.Load(); got != 2 {
					t.Errorf("part %d: the panic was raised before the other parts returned (%d of 2)", bad, got)
				}
			}()
			Run(3, func(i int) {
				if i == bad {
					panic("part failed")
				}
				finished.Add(1)
			})
		}()
	}
}
