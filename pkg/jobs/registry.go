package jobs

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxAttempts is a kind's MaxAttempts unless set with [WithMaxAttempts].
const DefaultMaxAttempts = 5

// Option configures a kind in [Register].
type Option func(*KindOptions)

// KindOptions are a kind's settings. The zero value means the defaults.
type KindOptions struct {
	// MaxAttempts is how many attempts a job gets before it is dead-lettered as exhausted.
	// Defaults to 5. An envelope's max_attempts overrides it per job.
	MaxAttempts int
	// Timeout bounds one attempt: the job's context is cancelled after it. Defaults to 0: only
	// the invocation's deadline applies.
	Timeout time.Duration
	// Policy computes the backoff after a failure. Defaults to Exponential{} (full jitter,
	// 5 s base, 15 min cap).
	Policy Policy
	// Queue names the queue of the stack the kind's jobs are sent to (see [WithQueue]).
	// Defaults to "": the stack's default queue.
	Queue string
	// Slice bounds one run of a job that saves checkpoints: once a job has run Slice and saved
	// a checkpoint, its slice ends (see ErrSliceEnded) and it continues in a new run. Defaults to
	// 0: the worker's default slice (worker.Config.Slice), else only the invocation's deadline
	// ends it. Jobs that never call Checkpoint are not affected.
	Slice time.Duration
	// MaxContinuations bounds how many times a job may be continued (slices that ended, sleeps);
	// beyond it the job is dead-lettered as "exhausted" (ErrContinuationsExhausted). Defaults to
	// DefaultMaxContinuations (1,000).
	MaxContinuations int
	// MaxRunTime bounds a job's total run time over all its runs; beyond it the job is
	// dead-lettered as "exhausted" (ErrRunTimeExhausted). It is counted from the job's record
	// (a job table is needed). Defaults to DefaultMaxRunTime (24 hours).
	MaxRunTime time.Duration
}

// WithMaxAttempts sets the kind's MaxAttempts (at least 1).
func WithMaxAttempts(n int) Option { return func(o *KindOptions) { o.MaxAttempts = n } }

// WithTimeout sets the kind's per-attempt timeout.
func WithTimeout(d time.Duration) Option { return func(o *KindOptions) { o.Timeout = d } }

// WithPolicy sets the kind's retry policy.
func WithPolicy(p Policy) Option { return func(o *KindOptions) { o.Policy = p } }

// WithQueue routes the kind's jobs to the named queue of the stack ("critical", "bulk"): a
// producer given this registry as its router (pkg/producer Config.Routes) sends them there
// without the caller knowing the queue's URL, and a worker that receives one from another
// queue runs it all the same and counts it as misrouted. The name is a queue name of the
// stack's queue set (pkg/queues: a lowercase letter, then up to 19 lowercase letters, digits
// or '_'); whether the stack has such a queue is checked where the set is known (producer.New,
// the worker function's cold start). Without it the kind goes to the default queue.
func WithQueue(name string) Option { return func(o *KindOptions) { o.Queue = name } }

// WithSlice sets the kind's slice: the longest a run of a checkpointing job lasts before it is
// continued in a new run (see KindOptions.Slice). At least a second.
func WithSlice(d time.Duration) Option { return func(o *KindOptions) { o.Slice = d } }

// WithMaxContinuations sets how many times a job of the kind may be continued (at least 1).
func WithMaxContinuations(n int) Option { return func(o *KindOptions) { o.MaxContinuations = n } }

// WithMaxRunTime sets a job's longest total run time over all its runs (at least a second).
func WithMaxRunTime(d time.Duration) Option { return func(o *KindOptions) { o.MaxRunTime = d } }

// Kind is a registered kind: its options and its type-erased worker.
type Kind struct {
	name string
	opts KindOptions
	run  func(ctx context.Context, info *Info) error
}

// Name returns the kind.
func (k *Kind) Name() string { return k.name }

// Options returns the kind's options with defaults filled in.
func (k *Kind) Options() KindOptions { return k.opts }

// Run decodes info.RawArgs into the kind's Args type and calls the worker. A decode failure is
// returned as an *[ArgsError].
func (k *Kind) Run(ctx context.Context, info *Info) error { return k.run(ctx, info) }

// Registry maps kinds to workers. Register every kind before the first job is handled; after
// that, a Registry is safe for concurrent use.
//
// Lookups take no lock: the kinds are an immutable map that Register replaces with a copy (a
// lock's reader count, shared by every goroutine preparing jobs, costs more than the lookup).
type Registry struct {
	mu    sync.Mutex                       // serializes Register
	kinds atomic.Pointer[map[string]*Kind] // never changed once stored
}

// NewRegistry returns an empty registry (as is the zero Registry).
func NewRegistry() *Registry { return &Registry{} }

// snapshot returns the current kinds (nil when none is registered).
func (r *Registry) snapshot() map[string]*Kind {
	if m := r.kinds.Load(); m != nil {
		return *m
	}
	return nil
}

// Register adds a worker for the kind of T (read from T's zero value). It fails when the kind is
// invalid, already registered, or an option is out of range.
func Register[T Args](r *Registry, w Worker[T], opts ...Option) error {
	var zero T
	name := zero.Kind()
	if err := ValidateKind(name); err != nil {
		return fmt.Errorf("jobs: register %T: %w", zero, err)
	}
	if f, isFunc := w.(WorkFunc[T]); w == nil || (isFunc && f == nil) {
		return fmt.Errorf("jobs: register %s: worker is nil", name)
	}
	var o KindOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.MaxAttempts < 1 {
		return fmt.Errorf("jobs: register %s: MaxAttempts %d must be at least 1", name, o.MaxAttempts)
	}
	if o.Timeout < 0 {
		return fmt.Errorf("jobs: register %s: Timeout %s must not be negative", name, o.Timeout)
	}
	if o.Policy == nil {
		o.Policy = Exponential{}
	}
	if err := ValidateQueueName(o.Queue); o.Queue != "" && err != nil {
		return fmt.Errorf("jobs: register %s: %w", name, err)
	}
	if err := o.checkLong(); err != nil {
		return fmt.Errorf("jobs: register %s: %w", name, err)
	}
	k := &Kind{name: name, opts: o, run: func(ctx context.Context, info *Info) error {
		job := &Job[T]{Info: info}
		if err := decodeArgs(info.RawArgs, &job.Args); err != nil {
			return &ArgsError{Kind: name, Err: err}
		}
		return w.Work(ctx, job)
	}}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.snapshot()
	if _, dup := old[name]; dup {
		return fmt.Errorf("jobs: kind %s is already registered", name)
	}
	kinds := make(map[string]*Kind, len(old)+1)
	maps.Copy(kinds, old)
	kinds[name] = k
	r.kinds.Store(&kinds)
	return nil
}

// MustRegister is [Register] that panics on error, for use at program start.
func MustRegister[T Args](r *Registry, w Worker[T], opts ...Option) {
	if err := Register(r, w, opts...); err != nil {
		panic(err)
	}
}

// Lookup returns the registered kind.
func (r *Registry) Lookup(kind string) (*Kind, bool) {
	k, ok := r.snapshot()[kind]
	return k, ok
}

// QueueOf returns the queue the kind is routed to ([WithQueue]), or "" for the default queue
// (and for a kind that is not registered). It makes *Registry a router of pkg/queues and
// pkg/producer.
func (r *Registry) QueueOf(kind string) string {
	if k, ok := r.snapshot()[kind]; ok {
		return k.opts.Queue
	}
	return ""
}

// Routes returns the kinds routed to a queue other than the default ([WithQueue]): kind →
// queue name. The map is the caller's.
func (r *Registry) Routes() map[string]string {
	out := map[string]string{}
	for name, k := range r.snapshot() {
		if k.opts.Queue != "" {
			out[name] = k.opts.Queue
		}
	}
	return out
}

// Kinds returns the registered kinds, sorted.
func (r *Registry) Kinds() []*Kind {
	kinds := r.snapshot()
	out := make([]*Kind, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// checkLong validates and defaults the options of continued jobs.
func (o *KindOptions) checkLong() error {
	switch {
	case o.Slice != 0 && o.Slice < time.Second:
		return fmt.Errorf("Slice %s must be 0 (none) or at least 1s", o.Slice)
	case o.MaxContinuations < 0:
		return fmt.Errorf("MaxContinuations %d must not be negative (0: the default, %d)", o.MaxContinuations, DefaultMaxContinuations)
	case o.MaxRunTime != 0 && o.MaxRunTime < time.Second:
		return fmt.Errorf("MaxRunTime %s must be 0 (the default, %s) or at least 1s", o.MaxRunTime, DefaultMaxRunTime)
	}
	if o.MaxContinuations == 0 {
		o.MaxContinuations = DefaultMaxContinuations
	}
	if o.MaxRunTime == 0 {
		o.MaxRunTime = DefaultMaxRunTime
	}
	return nil
}
