package console

import (
	"context"
	"sync"
	"time"
)

// memo runs one call per key at a time and reuses its result for a while: concurrent callers
// of a key share the call in progress (single flight), and later callers get its result until
// it is older than the ttl they ask for. Errors are not reused. The zero value is ready.
type memo[K comparable, V any] struct {
	// reuse, when set, says whether a result may serve later callers (a call in progress is
	// always shared).
	reuse func(V) bool

	mu    sync.Mutex
	items map[K]*memoItem[V]
}

type memoItem[V any] struct {
	done    chan struct{} // closed once v and err are set
	started time.Time
	at      time.Time // when the call ended
	v       V
	err     error
}

// get returns key's value: the last one when it was computed less than ttl ago and its call
// started at or after notBefore, else that of a call in progress, else that of a new call of
// fn. fn runs with ctx detached from the caller's cancellation (other callers may wait for it),
// bounded by timeout; the caller stops waiting when its own ctx ends. now is the clock.
func (m *memo[K, V]) get(ctx context.Context, key K, now func() time.Time, ttl time.Duration, notBefore time.Time,
	timeout time.Duration, fn func(context.Context) (V, error)) (V, error) {
	m.mu.Lock()
	if m.items == nil {
		m.items = map[K]*memoItem[V]{}
	}
	t := now()
	it := m.items[key]
	if it != nil {
		select {
		case <-it.done:
			if it.err != nil || t.Sub(it.at) >= ttl || it.started.Before(notBefore) || m.reuse != nil && !m.reuse(it.v) {
				it = nil // failed, stale or too old for this caller: call again
			}
		default:
			if it.started.Before(notBefore) {
				it = nil // started too early for this caller; the new call replaces it
			}
		}
	}
	if it == nil {
		for k, old := range m.items { // forget what no caller can reuse
			select {
			case <-old.done:
				if t.Sub(old.at) >= ttl {
					delete(m.items, k)
				}
			default:
			}
		}
		it = &memoItem[V]{done: make(chan struct{}), started: t}
		m.items[key] = it
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		go func() {
			defer cancel()
			v, err := fn(cctx)
			m.mu.Lock()
			it.v, it.err, it.at = v, err, now()
			m.mu.Unlock()
			close(it.done)
		}()
	}
	m.mu.Unlock()
	select {
	case <-it.done:
		return it.v, it.err
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	}
}

// forget drops key's value (a call in progress goes on, for its callers): the next caller calls
// again.
func (m *memo[K, V]) forget(key K) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.items, key)
}
