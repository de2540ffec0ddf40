package flow

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// ErrConfig is wrapped by every configuration error: a limit or a setting that cannot work.
var ErrConfig = errors.New("flow: invalid config")

// KeyFunc derives a limit's key from a job: jobs of one key share the limit, jobs of different
// keys do not (per tenant, per account, per endpoint). It must not return an empty key; a key
// function that returns an error or an empty key, or panics, dead-letters the job with the reason
// jobs.ReasonFlowKey. Keys longer than 512 bytes are hashed in the table.
type KeyFunc func(job *jobs.Info) (string, error)

// Concurrency limits how many jobs of Kind run at the same time, across every worker of the
// table (Lambda instances and pollers alike): at most Limit per key.
type Concurrency struct {
	// Kind is the kind of the jobs the limit applies to. Required.
	Kind string
	// Name names the limit's slots in the table. Limits of several kinds with the same Name
	// share their slots (a partner API that two kinds call, say); they must then agree on Limit
	// and on having a Key or not. Defaults to Kind. Same rules as a kind's name.
	Name string
	// Limit is the most jobs running at once per key: 1 to MaxLimit. Required.
	Limit int
	// Key derives the key from the job (TenantKey, ArgsKey). Defaults to nil: one limit for
	// every job of the name.
	Key KeyFunc
}

// Rate limits how many jobs of Kind start per Period, across every worker of the table: at most
// Burst at once, then Limit per Period, spaced evenly (a token bucket, kept as the generic cell
// rate algorithm: in any window of length W at most Burst + Limit·W/Period jobs start).
type Rate struct {
	// Kind is the kind of the jobs the limit applies to. Required.
	Kind string
	// Name names the limit's bucket in the table; limits of several kinds with the same Name
	// share it and must agree on Limit, Period, Burst and having a Key. Defaults to Kind.
	Name string
	// Limit is the jobs per Period, at least 1. Required.
	Limit int
	// Period is at least one second. Required.
	Period time.Duration
	// Burst is how many jobs may start at once after a quiet time. Defaults to 1: starts are
	// spaced Period/Limit apart.
	Burst int
	// Key derives the key from the job. Defaults to nil: one bucket for every job of the name.
	Key KeyFunc
}

// TenantKey is a KeyFunc for per-tenant limits: the job's tenant (the envelope's meta "tenant",
// which producer.WithTenant sets), or else its message group (a fair queue's tenant, when the
// consumer reports it). A job with neither has no key: it is dead-lettered as flow_key.
func TenantKey(job *jobs.Info) (string, error) {
	if t := job.Meta[jobs.MetaTenant]; t != "" {
		return t, nil
	}
	if job.GroupID != "" {
		return job.GroupID, nil
	}
	return "", errors.New("the job has no tenant (meta \"tenant\", set by producer.WithTenant) and no message group")
}

// ArgsKey returns a KeyFunc that decodes the job's args into T and applies key to them: for
// example flow.ArgsKey(func(a SendArgs) string { return a.Account }). The args are decoded
// once per limit per job.
func ArgsKey[T any](key func(args T) string) KeyFunc {
	return func(job *jobs.Info) (string, error) {
		var a T
		if err := json.Unmarshal(job.RawArgs, &a); err != nil {
			return "", fmt.Errorf("decode args: %w", err)
		}
		return key(a), nil
	}
}

// limitKind tells concurrency and rate limits apart.
type limitKind uint8

const (
	kindConcurrency limitKind = iota
	kindRate
)

func (k limitKind) String() string {
	if k == kindRate {
		return "rate"
	}
	return "concurrency"
}

// limit is one validated limit of a kind.
type limit struct {
	kind   limitKind
	name   string
	limit  int
	period time.Duration // rate
	burst  int           // rate
	key    KeyFunc
}

// compile validates the limits and groups them by kind, concurrency limits first (in the order
// given), then rate limits.
func compile(conc []Concurrency, rates []Rate) (map[string][]limit, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...))
	}
	byKind := map[string][]limit{}
	type shared struct {
		l     limit
		kind  string
		keyed bool
	}
	names := map[string]shared{} // "<type>#<name>" → the first limit that used it
	add := func(what, kind string, l limit) {
		if err := jobs.ValidateKind(kind); err != nil {
			bad("%s limit: kind: %v", what, err)
			return
		}
		if l.name == "" {
			l.name = kind
		} else if err := jobs.ValidateKind(l.name); err != nil {
			bad("%s limit of %s: name %q: follow a kind's rules (%v)", what, kind, l.name, err)
			return
		}
		for _, o := range byKind[kind] {
			if o.kind == l.kind && o.name == l.name {
				bad("%s limit of %s: name %q is used twice for the kind", what, kind, l.name)
				return
			}
		}
		id := l.kind.String() + "#" + l.name
		if s, ok := names[id]; ok {
			if s.l.limit != l.limit || s.l.period != l.period || s.l.burst != l.burst || s.keyed != (l.key != nil) {
				bad("%s limit %q of %s differs from the one of %s with the same name: limits that share a name share their slots and must agree", what, l.name, kind, s.kind)
				return
			}
		} else {
			names[id] = shared{l: l, kind: kind, keyed: l.key != nil}
		}
		byKind[kind] = append(byKind[kind], l)
	}
	for _, c := range conc {
		if c.Limit < 1 || c.Limit > MaxLimit {
			bad("concurrency limit of %s: Limit %d is out of range 1-%d", c.Kind, c.Limit, MaxLimit)
			continue
		}
		add("concurrency", c.Kind, limit{kind: kindConcurrency, name: c.Name, limit: c.Limit, key: c.Key})
	}
	for _, r := range rates {
		if r.Burst == 0 {
			r.Burst = 1
		}
		switch {
		case r.Limit < 1:
			bad("rate limit of %s: Limit %d must be at least 1", r.Kind, r.Limit)
			continue
		case r.Period < time.Second:
			bad("rate limit of %s: Period %s must be at least 1s", r.Kind, r.Period)
			continue
		case r.Period > 24*time.Hour:
			bad("rate limit of %s: Period %s is above 24h", r.Kind, r.Period)
			continue
		case r.Burst < 1:
			bad("rate limit of %s: Burst %d must be at least 1", r.Kind, r.Burst)
			continue
		case r.Burst > 1_000_000:
			bad("rate limit of %s: Burst %d is above 1,000,000", r.Kind, r.Burst)
			continue
		case interval(r.Limit, r.Period) < 1:
			bad("rate limit of %s: %d per %s is more than one per microsecond", r.Kind, r.Limit, r.Period)
			continue
		}
		add("rate", r.Kind, limit{kind: kindRate, name: r.Name, limit: r.Limit, period: r.Period, burst: r.Burst, key: r.Key})
	}
	// Concurrency limits first: they are acquired before rate tokens are taken.
	for k, ls := range byKind {
		sorted := make([]limit, 0, len(ls))
		for _, l := range ls {
			if l.kind == kindConcurrency {
				sorted = append(sorted, l)
			}
		}
		for _, l := range ls {
			if l.kind == kindRate {
				sorted = append(sorted, l)
			}
		}
		byKind[k] = sorted
	}
	return byKind, errors.Join(errs...)
}
