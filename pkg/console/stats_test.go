package console_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/console"
	"github.com/sqsworker/sqsworker/pkg/metrics"
)

// TestCloudWatchStats writes the worker's metrics as CloudWatch holds them once it has read the
// EMF lines (same namespace, names and dimensions), to the emulator's CloudWatch, and reads
// them back per kind. The emulator cannot take a datum's Timestamp from the Go SDK (it expects
// a string where the SDK's JSON protocol sends a number) and stores every datum at the time of
// the call, so every count lands in the last bucket here; TestCloudWatchStatsBuckets checks
// the bucketing with AWS's answer shape.
func TestCloudWatchStats(t *testing.T) {
	b := awslocaltest.Backend(t)
	cw := cloudwatch.NewFromConfig(b.Config)
	ctx := context.Background()
	queue := awslocal.UniqueName("cw") + "-jobs"
	ns := "sqsworker-test-" + awslocal.UniqueName("ns")
	now := time.Now().UTC().Truncate(time.Minute)
	start := now.Add(-55 * time.Minute)
	put := func(kind, metric string, _ time.Time, v float64) { // the time is not sent: see above
		t.Helper()
		_, err := cw.PutMetricData(ctx, &cloudwatch.PutMetricDataInput{Namespace: aws.String(ns), MetricData: []cwtypes.MetricDatum{{
			MetricName: aws.String(metric), Value: aws.Float64(v), Unit: cwtypes.StandardUnitCount,
			Dimensions: []cwtypes.Dimension{
				{Name: aws.String(metrics.DimensionService), Value: aws.String("sqsworker")},
				{Name: aws.String(metrics.DimensionQueue), Value: aws.String(queue)},
				{Name: aws.String(metrics.DimensionKind), Value: aws.String(kind)},
			},
		}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	// email.send: 3 succeeded in the first bucket, 2 in the last; image.resize: 1 failure that
	// retried, then one dead-lettered.
	for _, m := range []string{metrics.MetricJobsSucceeded, metrics.MetricJobsFailed, metrics.MetricJobsRetried, metrics.MetricJobsDeadLettered} {
		put("email.send", m, start.Add(time.Minute), 0)
		put("image.resize", m, start.Add(time.Minute), 0)
	}
	put("email.send", metrics.MetricJobsSucceeded, start.Add(2*time.Minute), 3)
	put("email.send", metrics.MetricJobsSucceeded, now.Add(-time.Minute), 2)
	put("image.resize", metrics.MetricJobsFailed, start.Add(20*time.Minute), 1)
	put("image.resize", metrics.MetricJobsRetried, start.Add(20*time.Minute), 1)
	put("image.resize", metrics.MetricJobsDeadLettered, start.Add(40*time.Minute), 1)
	put("other.kind", metrics.MetricJobsSucceeded, start.Add(time.Minute), 1) // another queue's
	if _, err := cw.PutMetricData(ctx, &cloudwatch.PutMetricDataInput{Namespace: aws.String(ns), MetricData: []cwtypes.MetricDatum{{
		MetricName: aws.String(metrics.MetricJobsSucceeded), Value: aws.Float64(9),
		Dimensions: []cwtypes.Dimension{{Name: aws.String(metrics.DimensionQueue), Value: aws.String("other-queue")},
			{Name: aws.String(metrics.DimensionKind), Value: aws.String("not.mine")}},
	}}}); err != nil {
		t.Fatal(err)
	}

	s := &console.CloudWatchStats{CloudWatch: cw, Namespace: ns, Queue: queue}
	r, err := s.Rates(ctx, console.RatesQuery{Start: start, Step: 5 * time.Minute, Buckets: 12})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]console.KindRates{}
	for _, k := range r.Kinds {
		got[k.Kind] = k
	}
	if _, ok := got["not.mine"]; ok {
		t.Error("another queue's kind is charted")
	}
	e, i := got["email.send"], got["image.resize"]
	if len(e.Succeeded) != 12 || e.Succeeded[11] != 5 || sum(e.Succeeded) != 5 || sum(e.Failed) != 0 {
		t.Errorf("email.send %+v", e)
	}
	if i.Failed[11] != 1 || i.Retried[11] != 1 || i.DeadLettered[11] != 1 || sum(i.Succeeded) != 0 {
		t.Errorf("image.resize %+v", i)
	}
	if _, err := s.Rates(ctx, console.RatesQuery{Start: start, Step: 30 * time.Second, Buckets: 4}); err == nil {
		t.Error("a period of 30 s: no error")
	}
}

func sum(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s
}

// fakeCloudWatch answers as CloudWatch does: one datum per period, at the period's start. It
// counts the ListMetrics calls and the metrics GetMetricData is asked for (what AWS bills).
type fakeCloudWatch struct {
	start time.Time

	mu      sync.Mutex
	lists   int
	queries int
}

func (f *fakeCloudWatch) counts() (lists, queries int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists, f.queries
}

func (f *fakeCloudWatch) ListMetrics(_ context.Context, in *cloudwatch.ListMetricsInput, _ ...func(*cloudwatch.Options)) (*cloudwatch.ListMetricsOutput, error) {
	f.mu.Lock()
	f.lists++
	f.mu.Unlock()
	dims := func(kind string) []cwtypes.Dimension {
		return []cwtypes.Dimension{{Name: aws.String("Service"), Value: aws.String("svc")},
			{Name: aws.String("Queue"), Value: in.Dimensions[0].Value}, {Name: aws.String("Kind"), Value: aws.String(kind)}}
	}
	if in.NextToken == nil {
		return &cloudwatch.ListMetricsOutput{Metrics: []cwtypes.Metric{{Dimensions: dims("b.kind")}}, NextToken: aws.String("p2")}, nil
	}
	return &cloudwatch.ListMetricsOutput{Metrics: []cwtypes.Metric{{Dimensions: dims("a.kind")}}}, nil
}

func (f *fakeCloudWatch) GetMetricData(_ context.Context, in *cloudwatch.GetMetricDataInput, _ ...func(*cloudwatch.Options)) (*cloudwatch.GetMetricDataOutput, error) {
	out := &cloudwatch.GetMetricDataOutput{}
	f.mu.Lock()
	f.queries += len(in.MetricDataQueries)
	f.mu.Unlock()
	for _, q := range in.MetricDataQueries {
		v := 1.0
		if aws.ToString(q.MetricStat.Metric.MetricName) == metrics.MetricJobsDeadLettered {
			v = 4
		}
		out.MetricDataResults = append(out.MetricDataResults, cwtypes.MetricDataResult{Id: q.Id,
			Timestamps: []time.Time{f.start.Add(5 * time.Minute), f.start.Add(50 * time.Minute), f.start.Add(-time.Hour)},
			Values:     []float64{v, 2 * v, 100}})
	}
	return out, nil
}

func TestCloudWatchStatsBuckets(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	fake := &fakeCloudWatch{start: start}
	s := &console.CloudWatchStats{CloudWatch: fake, Queue: "q"}
	r, err := s.Rates(context.Background(), console.RatesQuery{Start: start, Step: 5 * time.Minute, Buckets: 12})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kinds) != 2 || r.Kinds[0].Kind != "a.kind" || r.Kinds[1].Kind != "b.kind" || fake.queries != 8 {
		t.Fatalf("kinds %+v after %d queries, want a.kind and b.kind (sorted) after 8", r.Kinds, fake.queries)
	}
	k := r.Kinds[0]
	if k.Succeeded[1] != 1 || k.Succeeded[10] != 2 || sum(k.Succeeded) != 3 || k.DeadLettered[1] != 4 || k.DeadLettered[10] != 8 {
		t.Errorf("buckets %+v (a datum outside the window must be left out)", k)
	}
}

// TestCloudWatchStatsCached: the overview's refreshes, from any number of tabs, share one
// ListMetrics listing and one GetMetricData read per window and per queue for CacheFor (a minute
// by default), concurrent ones included; once it has passed, the next refresh reads again.
func TestCloudWatchStatsCached(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	fake := &fakeCloudWatch{start: start}
	var now atomic.Int64
	now.Store(start.Add(50 * time.Minute).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()).UTC() }
	s := &console.CloudWatchStats{CloudWatch: fake, Queue: "q", DLQ: "q-dlq", Now: clock}
	c, err := console.New(console.Config{Stats: s, Token: token, Now: clock, Logger: slog.New(slog.DiscardHandler),
		QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/q", DLQURL: "https://sqs.us-east-1.amazonaws.com/123456789012/q-dlq"})
	if err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, c)
	refresh := func(n int) {
		t.Helper()
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				if code, body := cl.get("/api/overview"); code != http.StatusOK || !strings.Contains(body, `"kind":"a.kind"`) {
					t.Errorf("/api/overview: %d %s", code, body)
				}
			})
		}
		wg.Wait()
	}
	// One listing is two ListMetrics pages; one read is 2 kinds × 4 metrics, plus one metric per
	// queue for the oldest message's age.
	const lists, reads = 2, 2*4 + 2
	refresh(10) // ten tabs at once
	refresh(1)
	now.Add(int64(59 * time.Second))
	refresh(3)
	if l, q := fake.counts(); l != lists || q != reads {
		t.Errorf("14 refreshes within a minute: %d ListMetrics calls and %d metrics read, want %d and %d", l, q, lists, reads)
	}
	now.Add(int64(2 * time.Second)) // the minute has passed
	refresh(4)
	if l, q := fake.counts(); l != 2*lists || q != 2*reads {
		t.Errorf("after a minute: %d ListMetrics calls and %d metrics read, want %d and %d", l, q, 2*lists, 2*reads)
	}
	// Another window is another read, the listing is shared.
	if code, _ := cl.get("/api/overview?window=24h"); code != http.StatusOK {
		t.Fatal(code)
	}
	if l, q := fake.counts(); l != 2*lists || q != 2*reads+8 {
		t.Errorf("the day window: %d ListMetrics calls and %d metrics read, want %d and %d", l, q, 2*lists, 2*reads+8)
	}
}
