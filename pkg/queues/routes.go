package queues

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// Router names the queue of each kind: "" for the default queue. *jobs.Registry implements it
// (jobs.WithQueue at registration), and so do Routes (a map, for producers without the workers'
// registry) and Chain.
type Router interface {
	QueueOf(kind string) string
}

// RouteLister is a Router that can list its routes, so that they can be checked against a set
// before the first job is sent (CheckRoutes). *jobs.Registry, Routes and Chain implement it.
type RouteLister interface {
	Router
	// Routes returns kind → queue name for every kind routed to a queue other than the default.
	Routes() map[string]string
}

var (
	_ RouteLister = (*jobs.Registry)(nil)
	_ RouteLister = Routes(nil)
	_ RouteLister = Chain(nil)
)

// Routes maps kinds to queue names; kinds it does not list go to the default queue.
type Routes map[string]string

// QueueOf returns the kind's queue, "" for the default.
func (r Routes) QueueOf(kind string) string { return r[kind] }

// Routes returns a copy of r.
func (r Routes) Routes() map[string]string { return maps.Clone(r) }

// String returns the routes in the form ParseRoutes reads, sorted by kind.
func (r Routes) String() string {
	kinds := slices.Sorted(maps.Keys(r))
	var b strings.Builder
	for i, k := range kinds {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(r[k])
	}
	return b.String()
}

// ParseRoutes reads routes written as "kind=queue,kind=queue" (the functions' SQSWORKER_ROUTES):
// each kind a valid kind listed once, each queue a valid queue name. Whether the stack has the
// queues is CheckRoutes' question.
func ParseRoutes(s string) (Routes, error) {
	r := Routes{}
	var errs []error
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		kind, queue, ok := strings.Cut(entry, "=")
		kind, queue = strings.TrimSpace(kind), strings.TrimSpace(queue)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%w: route %q: want kind=queue", ErrInvalid, entry))
			continue
		case jobs.ValidateKind(kind) != nil:
			errs = append(errs, fmt.Errorf("%w: route %q: %v", ErrInvalid, entry, jobs.ValidateKind(kind)))
			continue
		case ValidateName(queue) != nil:
			errs = append(errs, fmt.Errorf("%w: route %q: %v", ErrInvalid, entry, ValidateName(queue)))
			continue
		}
		if prev, dup := r[kind]; dup {
			errs = append(errs, fmt.Errorf("%w: kind %s is routed twice (to %s and %s): a kind has one queue", ErrInvalid, kind, prev, queue))
			continue
		}
		r[kind] = queue
	}
	return r, errors.Join(errs...)
}

// Chain is a Router that asks its routers in order: a kind's queue is the first one any of them
// names. A worker's registry chained with Routes from the environment, say.
type Chain []Router

// QueueOf returns the first queue a router of c names for kind, or "".
func (c Chain) QueueOf(kind string) string {
	for _, r := range c {
		if r == nil {
			continue
		}
		if q := r.QueueOf(kind); q != "" {
			return q
		}
	}
	return ""
}

// Routes returns the routes of c's listing routers, the earlier ones winning.
func (c Chain) Routes() map[string]string {
	out := map[string]string{}
	for i := len(c) - 1; i >= 0; i-- {
		if l, ok := c[i].(RouteLister); ok {
			maps.Copy(out, l.Routes())
		}
	}
	return out
}

// Route returns the queue of a job of kind: the queue named by override (a per-job choice, such as
// producer.WithQueue) when not empty, else the queue r routes the kind to (r may be nil), else the
// default. A queue the set does not have is an error wrapping ErrUnknownQueue; an override that
// sends the kind to a FIFO queue when its route is a standard one (or the reverse) is an error
// wrapping ErrMixedFIFO.
func (s *Set) Route(r Router, kind, override string) (Queue, error) {
	routed := ""
	if r != nil {
		routed = r.QueueOf(kind)
	}
	home, err := s.Get(routed)
	if err != nil {
		return Queue{}, fmt.Errorf("kind %s is routed to queue %q: %w", kind, routed, err)
	}
	if override == "" || override == home.Name {
		return home, nil
	}
	q, err := s.Get(override)
	if err != nil {
		return Queue{}, fmt.Errorf("kind %s: %w", kind, err)
	}
	if q.FIFO() != home.FIFO() {
		return Queue{}, fmt.Errorf("%w: kind %s goes to %s queue %s, and the job asks for %s queue %s", ErrMixedFIFO, kind,
			fifoWord(home.FIFO()), home.Name, fifoWord(q.FIFO()), q.Name)
	}
	return q, nil
}

func fifoWord(fifo bool) string {
	if fifo {
		return "FIFO"
	}
	return "standard"
}

// CheckRoutes reports every kind r routes to a queue the set does not have, each wrapping
// ErrUnknownQueue, sorted by kind. A Router that cannot list its routes (not a RouteLister) is
// checked job by job instead, by Route.
func (s *Set) CheckRoutes(r Router) error {
	l, ok := r.(RouteLister)
	if !ok || l == nil {
		return nil
	}
	routes := l.Routes()
	var errs []error
	for _, kind := range slices.Sorted(maps.Keys(routes)) {
		if _, err := s.Get(routes[kind]); err != nil {
			errs = append(errs, fmt.Errorf("kind %s is routed to queue %q: %w", kind, routes[kind], err))
		}
	}
	return errors.Join(errs...)
}

// Routing tells a worker whether a job arrived on its kind's queue. worker.Config.Routing takes
// it (the worker does not import this package: it asks through its own interface).
type Routing struct {
	set    *Set
	router Router
}

// Routing returns the Routing of the set for the routes of r.
func (s *Set) Routing(r Router) *Routing { return &Routing{set: s, router: r} }

// Misrouted reports whether a job of kind that arrived from the queue queueARN (the event source)
// belongs on another queue of the set: its kind is routed elsewhere. A queue outside the set, and
// an empty kind, are never misrouted (not this set's to judge).
func (r *Routing) Misrouted(kind, queueARN string) bool {
	if kind == "" {
		return false
	}
	src, ok := r.set.Find(queueARN)
	if !ok {
		return false
	}
	want := ""
	if r.router != nil {
		want = r.router.QueueOf(kind)
	}
	home, err := r.set.Get(want)
	if err != nil {
		return true // routed to a queue the stack does not have: it cannot have arrived there
	}
	return home.Name != src.Name
}

// QueueName returns the name in the set of the queue a URL or ARN names, or "" when the set does
// not have it (for metrics and logs).
func (r *Routing) QueueName(queueARN string) string {
	q, _ := r.set.Find(queueARN)
	return q.Name
}
