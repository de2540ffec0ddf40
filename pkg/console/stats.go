package console

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/metrics"
)

// Stats gives the overview its per-kind charts and the age of each queue's oldest message.
// *CloudWatchStats reads the worker's EMF metrics (on AWS); *TableStats reads the job table
// (on an emulator, which has no metrics).
type Stats interface {
	// Rates returns per-kind counts of q.Buckets buckets of q.Step from q.Start.
	Rates(ctx context.Context, q RatesQuery) (Rates, error)
	// OldestAge returns the age of the oldest message of the job queue or of the DLQ; ok is
	// false when it is not known (no data).
	OldestAge(ctx context.Context, queue QueueRole) (age time.Duration, ok bool, err error)
}

// QueueRole names one of the two queues.
type QueueRole int

// The two queues of a stack.
const (
	JobQueue QueueRole = iota
	DeadLetterQueue
)

// RatesQuery selects the buckets of Rates.
type RatesQuery struct {
	// Start is the start of the first bucket.
	Start time.Time
	// Step is each bucket's length (whole minutes for CloudWatch).
	Step time.Duration
	// Buckets is the number of buckets, 1-1440.
	Buckets int
}

// Rates are per-kind counts per bucket.
type Rates struct {
	// Source says where the counts come from, for the page ("CloudWatch metrics", "job table").
	Source string
	// Unit is what one count is, for the page: "job" (each job counted once, by its latest
	// state: TableStats) or "attempt" (each attempt, by its outcome: CloudWatchStats). Empty
	// means "job".
	Unit string
	// Kinds are the kinds with data, sorted by kind.
	Kinds []KindRates
}

// KindRates are one kind's counts, one value per bucket in each slice.
type KindRates struct {
	Kind         string
	Succeeded    []float64
	Failed       []float64
	Retried      []float64
	DeadLettered []float64
}

func newKindRates(kind string, n int) *KindRates {
	return &KindRates{Kind: kind, Succeeded: make([]float64, n), Failed: make([]float64, n),
		Retried: make([]float64, n), DeadLettered: make([]float64, n)}
}

func (q RatesQuery) check() error {
	if q.Step <= 0 || q.Buckets < 1 || q.Buckets > 1440 || q.Start.IsZero() {
		return fmt.Errorf("console: bad RatesQuery: step %v, %d buckets, start %v", q.Step, q.Buckets, q.Start)
	}
	return nil
}

// bucket returns the bucket of t, or -1 outside the query's range.
func (q RatesQuery) bucket(t time.Time) int {
	if t.Before(q.Start) {
		return -1
	}
	i := int(t.Sub(q.Start) / q.Step)
	if i >= q.Buckets {
		return -1
	}
	return i
}

// CloudWatchAPI is the part of the CloudWatch client CloudWatchStats uses;
// *cloudwatch.Client implements it.
type CloudWatchAPI interface {
	ListMetrics(ctx context.Context, in *cloudwatch.ListMetricsInput, optFns ...func(*cloudwatch.Options)) (*cloudwatch.ListMetricsOutput, error)
	GetMetricData(ctx context.Context, in *cloudwatch.GetMetricDataInput, optFns ...func(*cloudwatch.Options)) (*cloudwatch.GetMetricDataOutput, error)
}

var _ CloudWatchAPI = (*cloudwatch.Client)(nil)

// CloudWatchStats reads the metrics the worker writes in EMF (pkg/metrics: JobsSucceeded,
// JobsFailed, JobsRetried and JobsDeadLettered with the dimensions Service, Queue and Kind)
// with GetMetricData, and the queues' ApproximateAgeOfOldestMessage from the AWS/SQS namespace.
// The kinds are found with ListMetrics (metrics with data in the last two weeks); at most
// MaxKinds of them are charted.
//
// GetMetricData is billed per metric requested ($0.01 per 1,000 in us-east-1), so every answer
// is reused for CacheFor (a minute by default: the metrics are per minute), whoever asks: every
// tab and viewer of a console share one set of calls, and concurrent callers share the call in
// progress. With K kinds, an overview left open costs one ListMetrics call and 4·K + 2 metrics
// a minute (docs/CONSOLE.md works it out per day). It is safe for concurrent use.
type CloudWatchStats struct {
	// CloudWatch is the CloudWatch client. Required.
	CloudWatch CloudWatchAPI
	// Namespace is the worker's metric namespace. Defaults to metrics.DefaultNamespace.
	Namespace string
	// Queue is the job queue's name: the worker's Queue dimension, and the AWS/SQS QueueName.
	// Required.
	Queue string
	// DLQ is the dead-letter queue's name, for its oldest message's age.
	DLQ string
	// CacheFor is how long an answer (the kinds found, a window's rates, a queue's oldest age)
	// is reused. Defaults to 1 minute, CloudWatch's resolution for these metrics; a longer one
	// costs less.
	CacheFor time.Duration
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time

	series memo[string, [][]cwtypes.Dimension]
	rates  memo[RatesQuery, Rates]
	ages   memo[QueueRole, oldestAge]
}

// oldestAge is a cached OldestAge answer.
type oldestAge struct {
	age time.Duration
	ok  bool
}

// cloudWatchTimeout bounds one shared CloudWatch read.
const cloudWatchTimeout = time.Minute

func (s *CloudWatchStats) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *CloudWatchStats) ttl() time.Duration {
	if s.CacheFor > 0 {
		return s.CacheFor
	}
	return time.Minute
}

func (s *CloudWatchStats) namespace() string {
	if s.Namespace == "" {
		return metrics.DefaultNamespace
	}
	return s.Namespace
}

// MaxKinds is the most kinds CloudWatchStats charts (the first, by name).
const MaxKinds = 100

// maxQueriesPerCall is GetMetricData's limit of MetricDataQueries per request.
const maxQueriesPerCall = 500

// Rates implements Stats: the Sum of each metric per bucket, summed over the Service
// dimension's values. An answer is reused for CacheFor.
func (s *CloudWatchStats) Rates(ctx context.Context, q RatesQuery) (Rates, error) {
	if err := q.check(); err != nil {
		return Rates{}, err
	}
	if s.CloudWatch == nil || s.Queue == "" {
		return Rates{}, errors.New("console: CloudWatchStats needs CloudWatch and Queue")
	}
	if q.Step%time.Minute != 0 {
		return Rates{}, fmt.Errorf("console: CloudWatch periods are whole minutes, not %v", q.Step)
	}
	q.Start = q.Start.UTC() // one cache key per instant
	return s.rates.get(ctx, q, s.now, s.ttl(), time.Time{}, cloudWatchTimeout, func(ctx context.Context) (Rates, error) {
		series, err := s.series.get(ctx, "", s.now, s.ttl(), time.Time{}, cloudWatchTimeout, s.listSeries)
		if err != nil {
			return Rates{}, err
		}
		return s.readRates(ctx, q, series)
	})
}

// listSeries finds the dimensions of every kind's metrics with ListMetrics.
func (s *CloudWatchStats) listSeries(ctx context.Context) ([][]cwtypes.Dimension, error) {
	ns := s.namespace()
	// Every batch document carries every count (zeros included), so the kinds that have
	// JobsSucceeded are every kind the worker saw.
	var series [][]cwtypes.Dimension
	var token *string
	for {
		out, err := s.CloudWatch.ListMetrics(ctx, &cloudwatch.ListMetricsInput{
			Namespace: aws.String(ns), MetricName: aws.String(metrics.MetricJobsSucceeded), NextToken: token,
			Dimensions: []cwtypes.DimensionFilter{{Name: aws.String(metrics.DimensionQueue), Value: aws.String(s.Queue)}},
		})
		if err != nil {
			return nil, fmt.Errorf("console: list the worker's metrics: %w", err)
		}
		for _, m := range out.Metrics {
			if dimension(m.Dimensions, metrics.DimensionKind) != "" && dimension(m.Dimensions, metrics.DimensionQueue) == s.Queue {
				series = append(series, m.Dimensions)
			}
		}
		if token = out.NextToken; token == nil || *token == "" {
			break
		}
	}
	sort.SliceStable(series, func(i, j int) bool {
		return dimension(series[i], metrics.DimensionKind) < dimension(series[j], metrics.DimensionKind)
	})
	return series, nil
}

// readRates reads the rates of the series with GetMetricData.
func (s *CloudWatchStats) readRates(ctx context.Context, q RatesQuery, series [][]cwtypes.Dimension) (Rates, error) {
	ns := s.namespace()
	byKind := map[string]*KindRates{}
	var kinds []string
	type target struct {
		kind string
		pick func(*KindRates) []float64
	}
	names := []struct {
		metric string
		pick   func(*KindRates) []float64
	}{
		{metrics.MetricJobsSucceeded, func(k *KindRates) []float64 { return k.Succeeded }},
		{metrics.MetricJobsFailed, func(k *KindRates) []float64 { return k.Failed }},
		{metrics.MetricJobsRetried, func(k *KindRates) []float64 { return k.Retried }},
		{metrics.MetricJobsDeadLettered, func(k *KindRates) []float64 { return k.DeadLettered }},
	}
	var queries []cwtypes.MetricDataQuery
	targets := map[string]target{}
	for _, dims := range series {
		kind := dimension(dims, metrics.DimensionKind)
		if _, ok := byKind[kind]; !ok {
			if len(kinds) == MaxKinds {
				continue
			}
			byKind[kind] = newKindRates(kind, q.Buckets)
			kinds = append(kinds, kind)
		}
		for _, n := range names {
			id := "m" + strconv.Itoa(len(queries))
			queries = append(queries, cwtypes.MetricDataQuery{
				Id: aws.String(id), ReturnData: aws.Bool(true),
				MetricStat: &cwtypes.MetricStat{
					Metric: &cwtypes.Metric{Namespace: aws.String(ns), MetricName: aws.String(n.metric), Dimensions: dims},
					Period: aws.Int32(int32(q.Step / time.Second)), Stat: aws.String("Sum"),
				},
			})
			targets[id] = target{kind: kind, pick: n.pick}
		}
	}
	end := q.Start.Add(time.Duration(q.Buckets) * q.Step)
	for len(queries) > 0 {
		chunk := queries[:min(len(queries), maxQueriesPerCall)]
		queries = queries[len(chunk):]
		var next *string
		for {
			out, err := s.CloudWatch.GetMetricData(ctx, &cloudwatch.GetMetricDataInput{
				MetricDataQueries: chunk, StartTime: aws.Time(q.Start), EndTime: aws.Time(end),
				ScanBy: cwtypes.ScanByTimestampAscending, NextToken: next,
			})
			if err != nil {
				return Rates{}, fmt.Errorf("console: read the worker's metrics: %w", err)
			}
			for _, res := range out.MetricDataResults {
				t, ok := targets[aws.ToString(res.Id)]
				if !ok {
					continue
				}
				vals := t.pick(byKind[t.kind])
				// One value per period on AWS; a backend that returns raw datapoints (the
				// embedded emulator ignores Period and Stat) is summed into the same buckets.
				for i, ts := range res.Timestamps {
					if i < len(res.Values) {
						if b := q.bucket(ts); b >= 0 {
							vals[b] += res.Values[i]
						}
					}
				}
			}
			if next = out.NextToken; next == nil || *next == "" {
				break
			}
		}
	}
	r := Rates{Source: "CloudWatch metrics (namespace " + ns + ")", Unit: "attempt"}
	for _, k := range kinds {
		r.Kinds = append(r.Kinds, *byKind[k])
	}
	return r, nil
}

// OldestAge implements Stats with AWS/SQS ApproximateAgeOfOldestMessage: the latest one-minute
// Maximum of the last 15 minutes. An answer is reused for CacheFor.
func (s *CloudWatchStats) OldestAge(ctx context.Context, queue QueueRole) (time.Duration, bool, error) {
	name := s.Queue
	if queue == DeadLetterQueue {
		name = s.DLQ
	}
	if name == "" || s.CloudWatch == nil {
		return 0, false, nil
	}
	a, err := s.ages.get(ctx, queue, s.now, s.ttl(), time.Time{}, cloudWatchTimeout, func(ctx context.Context) (oldestAge, error) {
		age, ok, err := s.readOldestAge(ctx, name)
		return oldestAge{age, ok}, err
	})
	return a.age, a.ok, err
}

// readOldestAge reads a queue's ApproximateAgeOfOldestMessage.
func (s *CloudWatchStats) readOldestAge(ctx context.Context, name string) (time.Duration, bool, error) {
	now := s.now()
	out, err := s.CloudWatch.GetMetricData(ctx, &cloudwatch.GetMetricDataInput{
		StartTime: aws.Time(now.Add(-15 * time.Minute)), EndTime: aws.Time(now),
		ScanBy: cwtypes.ScanByTimestampDescending,
		MetricDataQueries: []cwtypes.MetricDataQuery{{
			Id: aws.String("age"), ReturnData: aws.Bool(true),
			MetricStat: &cwtypes.MetricStat{
				Metric: &cwtypes.Metric{Namespace: aws.String("AWS/SQS"), MetricName: aws.String("ApproximateAgeOfOldestMessage"),
					Dimensions: []cwtypes.Dimension{{Name: aws.String("QueueName"), Value: aws.String(name)}}},
				Period: aws.Int32(60), Stat: aws.String("Maximum"),
			},
		}},
	})
	if err != nil {
		return 0, false, fmt.Errorf("console: read the age of the oldest message of %s: %w", name, err)
	}
	for _, res := range out.MetricDataResults {
		latest, found := time.Time{}, false
		var v float64
		for i, ts := range res.Timestamps {
			if i < len(res.Values) && (!found || ts.After(latest)) {
				latest, v, found = ts, res.Values[i], true
			}
		}
		if found {
			return time.Duration(v * float64(time.Second)), true, nil
		}
	}
	return 0, false, nil
}

func dimension(dims []cwtypes.Dimension, name string) string {
	for _, d := range dims {
		if aws.ToString(d.Name) == name {
			return aws.ToString(d.Value)
		}
	}
	return ""
}

// ScanAPI is the part of the DynamoDB client TableStats uses; *dynamodb.Client implements it.
type ScanAPI interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

var _ ScanAPI = (*dynamodb.Client)(nil)

// TableStats derives the overview's numbers from the job table, for backends without
// CloudWatch metrics (the embedded emulator). It scans the table (a projection of a few
// attributes), at most once per CacheFor; use it on local and small tables only: on AWS,
// CloudWatchStats costs nothing per job.
//
// The table keeps each job's latest state, not every attempt, so the charts count jobs by the
// state of their last write, in the bucket of that write: succeeded (succeeded), failed
// (retrying or dead), retried (retrying) and dead-lettered (dead). The oldest message's age is
// that of the oldest record waiting to run (queued or retrying) for the job queue, and of the
// oldest dead record for the DLQ.
type TableStats struct {
	// DynamoDB is the DynamoDB client. Required.
	DynamoDB ScanAPI
	// Table is the job table's name. Required.
	Table string
	// MaxItems bounds the items one scan reads. Defaults to 100,000.
	MaxItems int
	// CacheFor is how long one scan's result is reused. Defaults to 2 s.
	CacheFor time.Duration
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time

	mu      sync.Mutex
	scanned time.Time
	items   []tableItem
}

type tableItem struct {
	kind  string
	state idempotency.State
	upd   time.Time
}

func (s *TableStats) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// scan returns the table's items, from the cache when fresh.
func (s *TableStats) scan(ctx context.Context) ([]tableItem, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cache := s.CacheFor
	if cache == 0 {
		cache = 2 * time.Second
	}
	if !s.scanned.IsZero() && s.now().Sub(s.scanned) < cache {
		return s.items, nil
	}
	if s.DynamoDB == nil || s.Table == "" {
		return nil, errors.New("console: TableStats needs DynamoDB and Table")
	}
	limit := s.MaxItems
	if limit <= 0 {
		limit = 100_000
	}
	var items []tableItem
	now := s.now()
	in := &dynamodb.ScanInput{
		TableName:            aws.String(s.Table),
		ProjectionExpression: aws.String("#kind, #st, #upd, #exp"),
		ExpressionAttributeNames: map[string]string{"#kind": idempotency.AttrKind, "#st": idempotency.AttrState,
			"#upd": idempotency.AttrUpdated, "#exp": idempotency.AttrExpires},
	}
	for len(items) < limit {
		out, err := s.DynamoDB.Scan(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("console: scan the job table %s: %w", s.Table, err)
		}
		for _, it := range out.Items {
			var ti tableItem
			if v, ok := it[idempotency.AttrKind].(*ddbtypes.AttributeValueMemberS); ok {
				ti.kind = v.Value
			}
			if v, ok := it[idempotency.AttrState].(*ddbtypes.AttributeValueMemberS); ok {
				ti.state = idempotency.State(v.Value)
			}
			if v, ok := it[idempotency.AttrUpdated].(*ddbtypes.AttributeValueMemberN); ok {
				if ms, err := strconv.ParseInt(v.Value, 10, 64); err == nil {
					ti.upd = time.UnixMilli(ms)
				}
			}
			if v, ok := it[idempotency.AttrExpires].(*ddbtypes.AttributeValueMemberN); ok {
				if sec, err := strconv.ParseInt(v.Value, 10, 64); err == nil && !time.Unix(sec, 0).After(now) {
					continue // expired: no longer counts, whatever DynamoDB's TTL lag
				}
			}
			if ti.kind != "" {
				items = append(items, ti)
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	s.items, s.scanned = items, s.now()
	return items, nil
}

// Rates implements Stats from the job table (see TableStats).
func (s *TableStats) Rates(ctx context.Context, q RatesQuery) (Rates, error) {
	if err := q.check(); err != nil {
		return Rates{}, err
	}
	items, err := s.scan(ctx)
	if err != nil {
		return Rates{}, err
	}
	byKind := map[string]*KindRates{}
	for _, it := range items {
		b := q.bucket(it.upd)
		if b < 0 {
			continue
		}
		k := byKind[it.kind]
		if k == nil {
			k = newKindRates(it.kind, q.Buckets)
			byKind[it.kind] = k
		}
		switch it.state {
		case idempotency.StateSucceeded:
			k.Succeeded[b]++
		case idempotency.StateRetrying:
			k.Failed[b]++
			k.Retried[b]++
		case idempotency.StateDead:
			k.Failed[b]++
			k.DeadLettered[b]++
		}
	}
	r := Rates{Source: "job table " + s.Table, Unit: "job"}
	for _, k := range byKind {
		r.Kinds = append(r.Kinds, *k)
	}
	sort.Slice(r.Kinds, func(i, j int) bool { return r.Kinds[i].Kind < r.Kinds[j].Kind })
	return r, nil
}

// OldestAge implements Stats from the job table (see TableStats).
func (s *TableStats) OldestAge(ctx context.Context, queue QueueRole) (time.Duration, bool, error) {
	items, err := s.scan(ctx)
	if err != nil {
		return 0, false, err
	}
	var oldest time.Time
	for _, it := range items {
		waiting := it.state == idempotency.StateQueued || it.state == idempotency.StateRetrying
		if queue == DeadLetterQueue {
			waiting = it.state == idempotency.StateDead
		}
		if waiting && !it.upd.IsZero() && (oldest.IsZero() || it.upd.Before(oldest)) {
			oldest = it.upd
		}
	}
	if oldest.IsZero() {
		return 0, false, nil
	}
	return max(0, s.now().Sub(oldest)), true, nil
}
