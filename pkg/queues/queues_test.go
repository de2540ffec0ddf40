package queues_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/queues"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

const base = "https://sqs.eu-west-1.amazonaws.com/123456789012/"

func mustSet(t *testing.T, qs ...queues.Queue) *queues.Set {
	t.Helper()
	s, err := queues.New(qs...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func threeQueues(t *testing.T) *queues.Set {
	return mustSet(t,
		queues.Queue{Name: "critical", URL: base + "shop-jobs-critical", Weight: 6},
		queues.Queue{Name: "default", URL: base + "shop-jobs", Weight: 3},
		queues.Queue{Name: "bulk", URL: base + "shop-jobs-bulk"},
	)
}

func TestNewKeepsOrderDefaultsAndLooksUp(t *testing.T) {
	t.Parallel()
	s := threeQueues(t)
	if got := strings.Join(s.Names(), ","); got != "critical,default,bulk" {
		t.Errorf("Names() = %s, want the order given", got)
	}
	if d := s.Default(); d.Name != "default" || d.URL != base+"shop-jobs" {
		t.Errorf("Default() = %+v, want the queue named default", d)
	}
	if q, _ := s.Get("bulk"); q.Weight != 1 {
		t.Errorf("bulk's weight = %d, want the default 1", q.Weight)
	}
	if q, err := s.Get(""); err != nil || q.Name != "default" {
		t.Errorf(`Get("") = %+v, %v; want the default`, q, err)
	}
	for _, key := range []string{base + "shop-jobs-bulk", "arn:aws:sqs:eu-west-1:123456789012:shop-jobs-bulk", "http://localhost:4566/000000000000/shop-jobs-bulk"} {
		if q, ok := s.Find(key); !ok || q.Name != "bulk" {
			t.Errorf("Find(%s) = %+v, %v; want bulk", key, q, ok)
		}
	}
	if _, ok := s.Find(base + "shop-jobs-other"); ok {
		t.Error("Find found a queue outside the set")
	}
	all := s.All()
	all[0].Name = "changed"
	if s.Names()[0] != "critical" {
		t.Error("changing All's slice changed the set")
	}
}

func TestNewWithoutADefaultNameUsesTheFirstQueue(t *testing.T) {
	t.Parallel()
	s := mustSet(t, queues.Queue{Name: "high", URL: base + "a"}, queues.Queue{Name: "low", URL: base + "b"})
	if s.Default().Name != "high" {
		t.Errorf("Default() = %s, want the first queue", s.Default().Name)
	}
	single, err := queues.Single(base + "shop-jobs.fifo")
	if err != nil || single.Len() != 1 || single.Default().Name != queues.DefaultName || !single.Default().FIFO() {
		t.Errorf("Single = %+v, %v; want one FIFO queue named default", single, err)
	}
}

func TestNewRejectsBadSetsWithEveryProblem(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		queues   []queues.Queue
		mentions []string
	}{
		{"no queue", nil, []string{"no queue"}},
		{"two queues with one name", []queues.Queue{{Name: "bulk", URL: base + "a"}, {Name: "bulk", URL: base + "b"}},
			[]string{`two queues are named "bulk"`, "queues 1 and 2"}},
		{"one SQS queue twice", []queues.Queue{{Name: "a", URL: base + "q"}, {Name: "b", URL: "http://localhost:4566/000000000000/q"}},
			[]string{`"a" and "b" are the same SQS queue q`}},
		{"bad name", []queues.Queue{{Name: "Critical", URL: base + "a"}}, []string{`"Critical"`, "not allowed"}},
		{"reserved name", []queues.Queue{{Name: "dlq", URL: base + "a"}}, []string{"reserved"}},
		{"not a URL", []queues.Queue{{Name: "a", URL: "shop-jobs"}}, []string{`"shop-jobs" is not a queue URL`}},
		{"empty URL", []queues.Queue{{Name: "a"}}, []string{"URL is empty"}},
		{"ARN of another queue", []queues.Queue{{Name: "a", URL: base + "a", ARN: "arn:aws:sqs:eu-west-1:123456789012:b"}}, []string{"is not the ARN of a"}},
		{"weight", []queues.Queue{{Name: "a", URL: base + "a", Weight: 1001}}, []string{"weight 1001", "1–1000"}},
		{"everything at once", []queues.Queue{{Name: "A", URL: "x"}, {Name: "b", URL: base + "b", Weight: -1}},
			[]string{`"A"`, `"x" is not a queue URL`, "weight -1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := queues.New(tc.queues...)
			if !errors.Is(err, queues.ErrInvalid) {
				t.Fatalf("New = %v, want ErrInvalid", err)
			}
			for _, m := range tc.mentions {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
		})
	}
}

func TestGetUnknownQueueListsTheQueues(t *testing.T) {
	t.Parallel()
	_, err := threeQueues(t).Get("urgent")
	if !errors.Is(err, queues.ErrUnknownQueue) || !strings.Contains(err.Error(), `"urgent" (the stack's queues: critical, default, bulk)`) {
		t.Errorf("Get(urgent) = %v, want ErrUnknownQueue listing the queues", err)
	}
}

func TestParseAndStringRoundTrip(t *testing.T) {
	t.Parallel()
	in := " critical=" + base + "shop-jobs-critical , default=" + base + "shop-jobs,"
	s, err := queues.Parse(in)
	if err != nil {
		t.Fatal(err)
	}
	want := "critical=" + base + "shop-jobs-critical,default=" + base + "shop-jobs"
	if s.String() != want {
		t.Errorf("String() = %s, want %s", s, want)
	}
	back, err := queues.Parse(s.String())
	if err != nil || back.String() != want {
		t.Errorf("Parse(String()) = %v, %v", back, err)
	}
	for in, mention := range map[string]string{
		"critical":                        `entry "critical": want name=url`,
		"":                                "no queue",
		"a=" + base + "x,a=" + base + "y": `two queues are named "a"`,
		"a=" + base + "x,b=not-a-url":     `"not-a-url" is not a queue URL`,
		"a=" + base + "x,Bulk=" + base + "y,bad-one": `entry "bad-one"`,
	} {
		if _, err := queues.Parse(in); !errors.Is(err, queues.ErrInvalid) || !strings.Contains(err.Error(), mention) {
			t.Errorf("Parse(%q) = %v, want ErrInvalid mentioning %q", in, err, mention)
		}
	}
}

type emailArgs struct{}

func (emailArgs) Kind() string { return "email.send" }

type importArgs struct{}

func (importArgs) Kind() string { return "import.run" }

type reportArgs struct{}

func (reportArgs) Kind() string { return "report.build" }

func workFunc[T jobs.Args]() jobs.Worker[T] {
	return jobs.WorkFunc[T](func(context.Context, *jobs.Job[T]) error { return nil })
}

func TestRouteFollowsTheRegistryAndTheOverride(t *testing.T) {
	t.Parallel()
	s := threeQueues(t)
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, workFunc[emailArgs](), jobs.WithQueue("critical"))
	jobs.MustRegister(reg, workFunc[importArgs](), jobs.WithQueue("bulk"))
	jobs.MustRegister(reg, workFunc[reportArgs]())
	for _, tc := range []struct{ kind, override, want string }{
		{"email.send", "", "critical"},
		{"import.run", "", "bulk"},
		{"report.build", "", "default"},
		{"not.registered", "", "default"},
		{"email.send", "bulk", "bulk"},
		{"report.build", "critical", "critical"},
		{"import.run", "bulk", "bulk"},
	} {
		q, err := s.Route(reg, tc.kind, tc.override)
		if err != nil || q.Name != tc.want {
			t.Errorf("Route(%s, %q) = %s, %v; want %s", tc.kind, tc.override, q.Name, err, tc.want)
		}
	}
	if q, err := s.Route(nil, "email.send", ""); err != nil || q.Name != "default" {
		t.Errorf("Route without a router = %s, %v; want default", q.Name, err)
	}
	if err := s.CheckRoutes(reg); err != nil {
		t.Errorf("CheckRoutes = %v, want nil", err)
	}
}

func TestRouteRejectsUnknownQueuesAndMixedFIFO(t *testing.T) {
	t.Parallel()
	s := mustSet(t,
		queues.Queue{Name: "default", URL: base + "shop-jobs"},
		queues.Queue{Name: "orders", URL: base + "shop-jobs-orders.fifo"},
		queues.Queue{Name: "bulk", URL: base + "shop-jobs-bulk"},
	)
	routes := queues.Routes{"email.send": "critical", "order.ship": "orders", "import.run": "urgent"}
	if _, err := s.Route(routes, "email.send", ""); !errors.Is(err, queues.ErrUnknownQueue) ||
		!strings.Contains(err.Error(), `kind email.send is routed to queue "critical"`) {
		t.Errorf("Route to a missing queue = %v, want ErrUnknownQueue naming the kind", err)
	}
	if _, err := s.Route(routes, "report.build", "nope"); !errors.Is(err, queues.ErrUnknownQueue) {
		t.Errorf("override to a missing queue = %v, want ErrUnknownQueue", err)
	}
	_, err := s.Route(routes, "order.ship", "bulk")
	if !errors.Is(err, queues.ErrMixedFIFO) || !strings.Contains(err.Error(), "kind order.ship goes to FIFO queue orders, and the job asks for standard queue bulk") {
		t.Errorf("FIFO kind to a standard queue = %v, want ErrMixedFIFO", err)
	}
	if _, err := s.Route(routes, "report.build", "orders"); !errors.Is(err, queues.ErrMixedFIFO) {
		t.Errorf("standard kind to a FIFO queue = %v, want ErrMixedFIFO", err)
	}
	err = s.CheckRoutes(routes)
	if !errors.Is(err, queues.ErrUnknownQueue) {
		t.Fatalf("CheckRoutes = %v, want ErrUnknownQueue", err)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "email.send") || !strings.Contains(lines[1], "import.run") {
		t.Errorf("CheckRoutes = %q, want one line per bad kind, sorted", err)
	}
}

func TestParseRoutesAndChain(t *testing.T) {
	t.Parallel()
	r, err := queues.ParseRoutes(" email.send=critical, import.run = bulk ,")
	if err != nil || r.String() != "email.send=critical,import.run=bulk" {
		t.Fatalf("ParseRoutes = %v, %v", r, err)
	}
	for in, mention := range map[string]string{
		"email.send":                        "want kind=queue",
		"Email=critical":                    "not allowed",
		"email.send=Critical":               "not allowed",
		"email.send=a,email.send=b":         "routed twice",
		"email.send=critical,x=dlq,y=b=c=d": "reserved",
	} {
		if _, err := queues.ParseRoutes(in); !errors.Is(err, queues.ErrInvalid) || !strings.Contains(err.Error(), mention) {
			t.Errorf("ParseRoutes(%q) = %v, want ErrInvalid mentioning %q", in, err, mention)
		}
	}
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, workFunc[emailArgs](), jobs.WithQueue("bulk"))
	c := queues.Chain{reg, r}
	if c.QueueOf("email.send") != "bulk" || c.QueueOf("import.run") != "bulk" || c.QueueOf("other") != "" {
		t.Errorf("Chain routes email.send→%s import.run→%s other→%q", c.QueueOf("email.send"), c.QueueOf("import.run"), c.QueueOf("other"))
	}
	if got := queues.Routes(c.Routes()).String(); got != "email.send=bulk,import.run=bulk" {
		t.Errorf("Chain.Routes() = %s, want the registry's route to win", got)
	}
}

func TestRoutingCountsJobsOffTheirKindsQueue(t *testing.T) {
	t.Parallel()
	s := threeQueues(t)
	routing := s.Routing(queues.Routes{"email.send": "critical", "import.run": "gone"})
	arn := func(name string) string { return "arn:aws:sqs:eu-west-1:123456789012:" + name }
	for _, tc := range []struct {
		kind, arn string
		want      bool
	}{
		{"email.send", arn("shop-jobs-critical"), false},
		{"email.send", arn("shop-jobs-bulk"), true},
		{"report.build", arn("shop-jobs"), false},
		{"report.build", arn("shop-jobs-critical"), true},
		{"import.run", arn("shop-jobs"), true}, // routed to a queue the stack lacks
		{"email.send", arn("another-stack-jobs"), false},
		{"", arn("shop-jobs-bulk"), false},
	} {
		if got := routing.Misrouted(tc.kind, tc.arn); got != tc.want {
			t.Errorf("Misrouted(%s, %s) = %v, want %v", tc.kind, tc.arn, got, tc.want)
		}
	}
	if routing.QueueName(arn("shop-jobs-bulk")) != "bulk" || routing.QueueName(arn("x")) != "" {
		t.Error("QueueName does not name the set's queues")
	}
}

func TestSQSNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		queue     string
		fifo      bool
		name, dlq string
	}{
		{"", false, "shop-jobs", "shop-jobs-dlq"},
		{"default", true, "shop-jobs.fifo", "shop-jobs-dlq.fifo"},
		{"critical", false, "shop-jobs-critical", "shop-jobs-critical-dlq"},
		{"orders", true, "shop-jobs-orders.fifo", "shop-jobs-orders-dlq.fifo"},
	} {
		if n, d := queues.SQSName("shop", tc.queue, tc.fifo), queues.DLQSQSName("shop", tc.queue, tc.fifo); n != tc.name || d != tc.dlq {
			t.Errorf("names of %q (fifo %v) = %s, %s; want %s, %s", tc.queue, tc.fifo, n, d, tc.name, tc.dlq)
		}
	}
}

func TestParseSpec(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]queues.Spec{
		"critical":                       {Name: "critical", Weight: 1},
		" bulk:weight=2 ":                {Name: "bulk", Weight: 2},
		"orders:fifo,max-receive=30":     {Name: "orders", Weight: 1, FIFO: true, MaxReceiveCount: 30},
		"slow:visibility=5m,weight=1000": {Name: "slow", Weight: 1000, Visibility: 5 * time.Minute},
		"default:weight=3":               {Name: "default", Weight: 3},
	} {
		got, err := queues.ParseSpec(in)
		if err != nil || got != want {
			t.Errorf("ParseSpec(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if back, err := queues.ParseSpec(got.String()); err != nil || back != got {
			t.Errorf("ParseSpec(%q.String()=%q) = %+v, %v", in, got.String(), back, err)
		}
	}
	for in, mention := range map[string]string{
		"":                       "empty",
		"Bulk":                   "not allowed",
		"bulk:weight=0":          "weight=0",
		"bulk:weight":            "weight=",
		"bulk:weight=1,weight=2": "given twice",
		"bulk:fifo=yes":          "takes no value",
		"bulk:visibility=1.5s":   "whole seconds",
		"bulk:visibility=13h":    "12h",
		"bulk:max-receive=0":     "1 to 1000",
		"bulk:priority=high":     `unknown option "priority=high"`,
	} {
		if _, err := queues.ParseSpec(in); !errors.Is(err, queues.ErrInvalid) || !strings.Contains(err.Error(), mention) {
			t.Errorf("ParseSpec(%q) = %v, want ErrInvalid mentioning %q", in, err, mention)
		}
	}
}

var _ worker.Routing = (*queues.Routing)(nil)

func TestARNOf(t *testing.T) {
	t.Parallel()
	for u, want := range map[string]string{
		base + "shop-jobs": "arn:aws:sqs:eu-west-1:123456789012:shop-jobs",
		"https://sqs.cn-north-1.amazonaws.com.cn/123456789012/q.fifo": "arn:aws-cn:sqs:cn-north-1:123456789012:q.fifo",
		"https://sqs.us-gov-west-1.amazonaws.com/123456789012/q":      "arn:aws-us-gov:sqs:us-gov-west-1:123456789012:q",
		"http://localhost:4566/000000000000/q":                        "",
		"https://sqs.eu-west-1.amazonaws.com/12345/q":                 "",
		"https://sqs.eu-west-1.amazonaws.com/123456789012/q/extra":    "",
		"https://eu-west-1.queue.example.com/123456789012/q":          "",
	} {
		got, ok := queues.ARNOf(u)
		if got != want || ok != (want != "") {
			t.Errorf("ARNOf(%s) = %q, %v; want %q", u, got, ok, want)
		}
	}
	s := mustSet(t, queues.Queue{Name: "a", URL: base + "a"})
	if s.Default().ARN != "arn:aws:sqs:eu-west-1:123456789012:a" {
		t.Errorf("New did not derive the ARN of an AWS URL: %+v", s.Default())
	}
}
