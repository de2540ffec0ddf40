package console_test

import (
	"context"
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

// fakeCloudWatch answers as CloudWatch does: one datum per period, at the period's start.
type fakeCloudWatch struct {
	start   time.Time
	queries int
}

func (f *fakeCloudWatch) ListMetrics(_ context.Context, in *cloudwatch.ListMetricsInput, _ ...func(*cloudwatch.Options)) (*cloudwatch.ListMetricsOutput, error) {
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
	for _, q := range in.MetricDataQueries {
		f.queries++
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
