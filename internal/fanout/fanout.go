// Package fanout runs the parts of one piece of CPU work on several goroutines at once (the
// worker's decoding and preparing of a large batch) and waits for them.
package fanout

import (
	"sync"
	"sync/atomic"
)

// Run calls fn(0), …, fn(n-1) at once: all but the last on goroutines of their own, the last on
// the calling goroutine. It returns when every call has returned. A panic in any call is raised
// again on the calling goroutine once all have returned (the first to be recovered, when several
// panic), as if the work had run on it.
func Run(n int, fn func(i int)) {
	if n <= 0 {
		return
	}
	var wg sync.WaitGroup
	var panicked atomic.Pointer[panicValue]
	for i := range n - 1 {
		wg.Go(func() {
			defer func() {
				if v := recover(); v != nil {
					panicked.CompareAndSwap(nil, &panicValue{v})
				}
			}()
			fn(i)
		})
	}
	func() {
		defer func() {
			if v := recover(); v != nil {
				panicked.CompareAndSwap(nil, &panicValue{v})
			}
		}()
		fn(n - 1)
	}()
	wg.Wait()
	if p := panicked.Load(); p != nil {
		panic(p.v)
	}
}

// panicValue is a recovered panic.
type panicValue struct{ v any }
