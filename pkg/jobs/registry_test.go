package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

type sendEmail struct {
	To      string `json:"to"`
	Subject string `json:"subject,omitempty"`
}

func (sendEmail) Kind() string { return "email.send" }

type buildReport struct {
	Month string `json:"month"`
}

func (buildReport) Kind() string { return "report.build" }

// chargeCard has its Kind on the pointer: Job[*chargeCard].Args is a pointer.
type chargeCard struct {
	Cents int `json:"cents"`
}

func (*chargeCard) Kind() string { return "billing:charge" }

type upperCaseKind struct{}

func (upperCaseKind) Kind() string { return "Email.Send" }

type emptyKind struct{}

func (emptyKind) Kind() string { return "" }

type regKindA struct{}

func (regKindA) Kind() string { return "concurrent.a" }

type regKindB struct{}

func (regKindB) Kind() string { return "concurrent.b" }

type regKindC struct{}

func (regKindC) Kind() string { return "concurrent.c" }

type regKindD struct{}

func (regKindD) Kind() string { return "concurrent.d" }

func nopWorker[T jobs.Args]() jobs.Worker[T] {
	return jobs.WorkFunc[T](func(context.Context, *jobs.Job[T]) error { return nil })
}

func TestRegisterLookupFillsDefaults(t *testing.T) {
	t.Parallel()
	r := jobs.NewRegistry()
	if err := jobs.Register(r, nopWorker[sendEmail]()); err != nil {
		t.Fatalf("Register: %v", err)
	}
	k, ok := r.Lookup("email.send")
	if !ok || k == nil {
		t.Fatal(`Lookup("email.send") found nothing`)
	}
	if k.Name() != "email.send" {
		t.Errorf("Name() = %q", k.Name())
	}
	o := k.Options()
	if o.MaxAttempts != jobs.DefaultMaxAttempts || jobs.DefaultMaxAttempts != 5 {
		t.Errorf("MaxAttempts = %d (DefaultMaxAttempts %d), want 5", o.MaxAttempts, jobs.DefaultMaxAttempts)
	}
	if o.Timeout != 0 {
		t.Errorf("Timeout = %s, want 0", o.Timeout)
	}
	if p, ok := o.Policy.(jobs.Exponential); !ok || p.Base != 0 || p.Cap != 0 || p.Rand != nil {
		t.Errorf("Policy = %#v, want Exponential{}", o.Policy)
	}
	for _, missing := range []string{"", "email", "email.send ", "EMAIL.SEND", "report.build"} {
		if k, ok := r.Lookup(missing); ok || k != nil {
			t.Errorf("Lookup(%q) = %v, %v; want nil, false", missing, k, ok)
		}
	}
}

func TestRegisterAppliesOptions(t *testing.T) {
	t.Parallel()
	r := jobs.NewRegistry()
	policy := jobs.PolicyFunc(func(attempt int) time.Duration { return time.Duration(attempt) * time.Hour })
	err := jobs.Register(r, nopWorker[sendEmail](),
		jobs.WithMaxAttempts(3), jobs.WithTimeout(30*time.Second), jobs.WithPolicy(policy))
	if err != nil {
		t.Fatal(err)
	}
	k, _ := r.Lookup("email.send")
	o := k.Options()
	if o.MaxAttempts != 3 || o.Timeout != 30*time.Second || o.Policy == nil || o.Policy.Backoff(2) != 2*time.Hour {
		t.Errorf("Options() = %+v, want MaxAttempts 3, Timeout 30s, the given policy", o)
	}
	// Later options override earlier ones.
	if err := jobs.Register(r, nopWorker[buildReport](), jobs.WithMaxAttempts(2), jobs.WithMaxAttempts(9)); err != nil {
		t.Fatal(err)
	}
	if k, _ := r.Lookup("report.build"); k.Options().MaxAttempts != 9 {
		t.Errorf("MaxAttempts = %d, want the last option's 9", k.Options().MaxAttempts)
	}
}

func TestRegisterRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		register func(r *jobs.Registry) error
		mentions []string
	}{
		{"duplicate kind", func(r *jobs.Registry) error {
			return jobs.Register(r, nopWorker[sendEmail](), jobs.WithMaxAttempts(7))
		}, []string{"email.send", "already registered"}},
		{"invalid kind", func(r *jobs.Registry) error {
			return jobs.Register(r, nopWorker[upperCaseKind]())
		}, []string{"upperCaseKind", "Email.Send", "not allowed"}},
		{"empty kind", func(r *jobs.Registry) error {
			return jobs.Register(r, nopWorker[emptyKind]())
		}, []string{"emptyKind", "empty"}},
		{"nil worker", func(r *jobs.Registry) error {
			return jobs.Register[buildReport](r, nil)
		}, []string{"report.build", "nil"}},
		{"MaxAttempts negative", func(r *jobs.Registry) error {
			return jobs.Register(r, nopWorker[buildReport](), jobs.WithMaxAttempts(-1))
		}, []string{"report.build", "MaxAttempts", "-1", "at least 1"}},
		{"Timeout negative", func(r *jobs.Registry) error {
			return jobs.Register(r, nopWorker[buildReport](), jobs.WithTimeout(-time.Second))
		}, []string{"report.build", "Timeout", "-1s", "negative"}},
		{"queue name invalid", func(r *jobs.Registry) error {
			return jobs.Register(r, nopWorker[buildReport](), jobs.WithQueue("Critical"))
		}, []string{"report.build", `"Critical"`, "not allowed"}},
		{"queue name reserved", func(r *jobs.Registry) error {
			return jobs.Register(r, nopWorker[buildReport](), jobs.WithQueue("dlq"))
		}, []string{"report.build", `"dlq"`, "reserved"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := jobs.NewRegistry()
			jobs.MustRegister(r, nopWorker[sendEmail]())
			err := tc.register(r)
			if err == nil {
				t.Fatal("Register succeeded, want an error")
			}
			for _, m := range tc.mentions {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
			// A failed Register leaves the registry as it was.
			var names []string
			for _, k := range r.Kinds() {
				names = append(names, k.Name())
			}
			if !slices.Equal(names, []string{"email.send"}) {
				t.Errorf("after the failure Kinds() = %q, want [email.send]", names)
			}
			if k, _ := r.Lookup("email.send"); k.Options().MaxAttempts != jobs.DefaultMaxAttempts {
				t.Errorf("the first registration was changed: %+v", k.Options())
			}
		})
	}
}

func TestMustRegisterPanicsWithTheError(t *testing.T) {
	t.Parallel()
	r := jobs.NewRegistry()
	jobs.MustRegister(r, nopWorker[sendEmail]())
	defer func() {
		v := recover()
		err, ok := v.(error)
		if !ok || !strings.Contains(err.Error(), "already registered") {
			t.Errorf("recover() = %v, want the Register error", v)
		}
	}()
	jobs.MustRegister(r, nopWorker[sendEmail]())
	t.Error("MustRegister did not panic on a duplicate kind")
}

func TestRegistryKindsSorted(t *testing.T) {
	t.Parallel()
	r := jobs.NewRegistry()
	if ks := r.Kinds(); len(ks) != 0 {
		t.Errorf("empty registry Kinds() = %v", ks)
	}
	jobs.MustRegister(r, nopWorker[buildReport]())
	jobs.MustRegister(r, nopWorker[*chargeCard]())
	jobs.MustRegister(r, nopWorker[sendEmail]())
	var names []string
	for _, k := range r.Kinds() {
		names = append(names, k.Name())
	}
	if want := []string{"billing:charge", "email.send", "report.build"}; !slices.Equal(names, want) {
		t.Errorf("Kinds() = %q, want %q", names, want)
	}
}

func TestZeroRegistryIsUsable(t *testing.T) {
	t.Parallel()
	var r jobs.Registry
	if _, ok := r.Lookup("email.send"); ok {
		t.Error("zero registry found a kind")
	}
	if err := jobs.Register(&r, nopWorker[sendEmail]()); err != nil {
		t.Fatalf("Register on a zero Registry: %v", err)
	}
	if _, ok := r.Lookup("email.send"); !ok {
		t.Error("kind not found after Register")
	}
}

type ctxKey struct{}

func TestKindRunDecodesArgsAndPassesInfo(t *testing.T) {
	t.Parallel()
	r := jobs.NewRegistry()
	var got *jobs.Job[sendEmail]
	var gotCtx context.Context
	jobs.MustRegister(r, jobs.WorkFunc[sendEmail](func(ctx context.Context, job *jobs.Job[sendEmail]) error {
		got, gotCtx = job, ctx
		return nil
	}))
	info := &jobs.Info{
		ID: "job-1", Kind: "email.send", Key: "welcome-1", Attempt: 2, MaxAttempts: 5,
		TraceParent: tpJob, Meta: map[string]string{"tenant": "acme"},
		RawArgs: json.RawMessage(`{"to":"a@b.c","subject":"Hi","unknown":true}`),
	}
	ctx := context.WithValue(context.Background(), ctxKey{}, "v")
	k, _ := r.Lookup("email.send")
	if err := k.Run(ctx, info); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got == nil {
		t.Fatal("worker not called")
	}
	if got.Info != info {
		t.Errorf("job.Info = %p, want the Info passed to Run (%p)", got.Info, info)
	}
	if got.Args != (sendEmail{To: "a@b.c", Subject: "Hi"}) {
		t.Errorf("job.Args = %+v", got.Args)
	}
	// Info's fields are promoted on the job.
	if got.ID != "job-1" || got.Attempt != 2 || got.Key != "welcome-1" || got.Meta["tenant"] != "acme" {
		t.Errorf("job = %+v", got)
	}
	if gotCtx.Value(ctxKey{}) != "v" {
		t.Error("the worker did not get Run's context")
	}
}

func TestKindRunPointerArgs(t *testing.T) {
	t.Parallel()
	r := jobs.NewRegistry()
	var got *chargeCard
	jobs.MustRegister(r, jobs.WorkFunc[*chargeCard](func(_ context.Context, job *jobs.Job[*chargeCard]) error {
		got = job.Args
		return nil
	}))
	k, ok := r.Lookup("billing:charge")
	if !ok {
		t.Fatal("pointer kind not registered under its Kind()")
	}
	if err := k.Run(context.Background(), &jobs.Info{RawArgs: json.RawMessage(`{"cents":250}`)}); err != nil {
		t.Fatal(err)
	}
	if got == nil || got.Cents != 250 {
		t.Errorf("job.Args = %+v, want &{Cents:250}", got)
	}
}

func TestKindRunReturnsWorkerError(t *testing.T) {
	t.Parallel()
	for _, want := range []error{errBoom, jobs.Cancel(errBoom), jobs.RetryAfter(time.Minute, errBoom), jobs.ErrSkipped} {
		r := jobs.NewRegistry()
		jobs.MustRegister(r, jobs.WorkFunc[sendEmail](func(context.Context, *jobs.Job[sendEmail]) error { return want }))
		k, _ := r.Lookup("email.send")
		if err := k.Run(context.Background(), &jobs.Info{RawArgs: json.RawMessage(`{}`)}); err != want {
			t.Errorf("Run = %v, want the worker's error %v unchanged", err, want)
		}
	}
}

func TestKindRunBadArgsIsArgsError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		raw  json.RawMessage
	}{
		{"wrong field type", json.RawMessage(`{"to":42}`)},
		{"array", json.RawMessage(`["a@b.c"]`)},
		{"string", json.RawMessage(`"a@b.c"`)},
		{"not JSON", json.RawMessage(`{to:1}`)},
		{"empty", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := jobs.NewRegistry()
			called := false
			jobs.MustRegister(r, jobs.WorkFunc[sendEmail](func(context.Context, *jobs.Job[sendEmail]) error {
				called = true
				return nil
			}))
			k, _ := r.Lookup("email.send")
			err := k.Run(context.Background(), &jobs.Info{ID: "job-1", Kind: "email.send", RawArgs: tc.raw})
			var ae *jobs.ArgsError
			if !errors.As(err, &ae) {
				t.Fatalf("Run = %v, want an *ArgsError", err)
			}
			if ae.Kind != "email.send" || !strings.Contains(err.Error(), "email.send") || ae.Err == nil {
				t.Errorf("ArgsError = %+v (%q), want it to name the kind and keep the cause", ae, err)
			}
			if called {
				t.Error("the worker ran with args that do not decode")
			}
		})
	}
}

// TestRegistryConcurrentUse runs lookups, listings and jobs while kinds are being registered;
// go test -race reports any unsynchronised access.
func TestRegistryConcurrentUse(t *testing.T) {
	t.Parallel()
	r := jobs.NewRegistry()
	var mu sync.Mutex
	runs := 0
	jobs.MustRegister(r, jobs.WorkFunc[sendEmail](func(_ context.Context, job *jobs.Job[sendEmail]) error {
		mu.Lock()
		runs++
		mu.Unlock()
		if job.Args.To == "" {
			return errors.New("no recipient")
		}
		return nil
	}))
	registrations := []func() error{
		func() error { return jobs.Register(r, nopWorker[regKindA]()) },
		func() error { return jobs.Register(r, nopWorker[regKindB]()) },
		func() error { return jobs.Register(r, nopWorker[regKindC]()) },
		func() error { return jobs.Register(r, nopWorker[regKindD]()) },
		func() error { return jobs.Register(r, nopWorker[regKindA]()) }, // duplicate: exactly one of the two A's wins
	}
	errs := make([]error, len(registrations))
	var wg sync.WaitGroup
	for i, reg := range registrations {
		wg.Go(func() { errs[i] = reg() })
	}
	const readers, perReader = 8, 200
	for g := range readers {
		wg.Go(func() {
			for i := range perReader {
				k, ok := r.Lookup("email.send")
				if !ok {
					t.Error("email.send disappeared")
					return
				}
				if err := k.Run(context.Background(), &jobs.Info{ID: fmt.Sprint(g, i), RawArgs: json.RawMessage(`{"to":"a@b.c"}`)}); err != nil {
					t.Errorf("Run: %v", err)
					return
				}
				_ = r.Kinds()
				r.Lookup("concurrent.a")
			}
		})
	}
	wg.Wait()
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
			if !strings.Contains(err.Error(), "already registered") {
				t.Errorf("unexpected Register error: %v", err)
			}
		}
	}
	if failed != 1 {
		t.Errorf("%d registrations failed, want exactly the duplicate", failed)
	}
	if n := len(r.Kinds()); n != 5 {
		t.Errorf("%d kinds registered, want 5", n)
	}
	if runs != readers*perReader {
		t.Errorf("%d runs, want %d", runs, readers*perReader)
	}
}

func TestRegistryRoutesKindsToTheirQueues(t *testing.T) {
	t.Parallel()
	r := jobs.NewRegistry()
	jobs.MustRegister(r, nopWorker[sendEmail](), jobs.WithQueue("critical"))
	jobs.MustRegister(r, nopWorker[buildReport](), jobs.WithQueue("bulk"))
	jobs.MustRegister(r, nopWorker[*chargeCard]())
	for kind, want := range map[string]string{"email.send": "critical", "report.build": "bulk", "billing:charge": "", "not.registered": ""} {
		if got := r.QueueOf(kind); got != want {
			t.Errorf("QueueOf(%q) = %q, want %q", kind, got, want)
		}
	}
	routes := r.Routes()
	if len(routes) != 2 || routes["email.send"] != "critical" || routes["report.build"] != "bulk" {
		t.Errorf("Routes() = %v, want the two kinds with a queue", routes)
	}
	routes["email.send"] = "bulk" // the caller's copy
	if r.QueueOf("email.send") != "critical" {
		t.Error("changing the map Routes returned changed the registry")
	}
	if k, _ := r.Lookup("email.send"); k.Options().Queue != "critical" {
		t.Errorf("Options().Queue = %q, want critical", k.Options().Queue)
	}
}

func TestValidateQueueName(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"a", "default", "critical", "bulk_2", strings.Repeat("q", 20)} {
		if err := jobs.ValidateQueueName(ok); err != nil {
			t.Errorf("ValidateQueueName(%q) = %v, want nil", ok, err)
		}
	}
	for name, mention := range map[string]string{
		"":                      "empty",
		"Critical":              "not allowed",
		"1st":                   "not allowed",
		"_a":                    "not allowed",
		"a-b":                   "not allowed",
		"a.b":                   "not allowed",
		"dlq":                   "reserved",
		"jobs":                  "reserved",
		strings.Repeat("q", 21): "limit is 20",
	} {
		err := jobs.ValidateQueueName(name)
		if err == nil || !strings.Contains(err.Error(), mention) {
			t.Errorf("ValidateQueueName(%q) = %v, want an error mentioning %q", name, err, mention)
		}
	}
}
