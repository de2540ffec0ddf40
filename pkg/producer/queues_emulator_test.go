package producer

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/queues"
	"github.com/sqsworker/sqsworker/pkg/schedule"
)

var _ QueueScheduler = (*schedule.Client)(nil)

// TestEmulatorRoutesKindsToTheirQueues sends jobs through one producer to a stack of three
// queues on the embedded emulator and reads each queue: every kind is in its queue, WithQueue
// moved one job, and the batch went to the right queues too.
func TestEmulatorRoutesKindsToTheirQueues(t *testing.T) {
	t.Parallel()
	client := sqs.NewFromConfig(mustShared(t).Config)
	ctx := context.Background()
	set, _, err := awslocal.ProvisionQueues(ctx, client, awslocal.StackOptions{Name: awslocal.UniqueName("route")},
		queues.Spec{Name: "critical"}, queues.Spec{Name: "bulk"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{SQS: client, Queues: set, Routes: stackRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range []jobs.Args{resetArgs{"ada"}, importArgs{"a.csv"}, emailArgs{To: "x@y.z"}} {
		if _, err := p.Enqueue(ctx, args); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Enqueue(ctx, importArgs{"now.csv"}, WithQueue("critical")); err != nil {
		t.Fatal(err)
	}
	results, err := p.EnqueueBatch(ctx, []Request{{Args: resetArgs{"bob"}}, {Args: importArgs{"b.csv"}}, {Args: emailArgs{To: "q@r.s"}}})
	if err := JoinErrors(results); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"critical": "import.run now.csv,password.reset ada,password.reset bob",
		"bulk":     "import.run a.csv,import.run b.csv",
		"default":  "email.send q@r.s,email.send x@y.z",
	}
	for name, w := range want {
		q, _ := set.Get(name)
		var got []string
		for _, m := range receive(t, client, q.URL, 10) {
			env, err := jobs.ParseEnvelope(aws.ToString(m.Body))
			if err != nil {
				t.Fatal(err)
			}
			var arg string
			for _, field := range []string{`"user":"`, `"file":"`, `"to":"`} {
				if _, rest, ok := strings.Cut(string(env.Args), field); ok {
					arg, _, _ = strings.Cut(rest, `"`)
				}
			}
			got = append(got, env.Kind+" "+arg)
		}
		sort.Strings(got)
		if strings.Join(got, ",") != w {
			t.Errorf("queue %s holds %v, want %s", name, got, w)
		}
	}
}
