package dynamooutbox_test

// Measurements of the DynamoDB outbox on the embedded emulator (docs/BENCHMARKS.md):
//
//	go test -run '^$' -bench OutboxLatency -benchtime 100x ./pkg/outbox/dynamooutbox
//	go test -run '^$' -bench OutboxThroughput -benchtime 2000x -count 3 ./pkg/outbox/dynamooutbox
//
// BenchmarkOutboxLatency: commit → message in SQS (its SentTimestamp), one job at a time, through
// the stream path (our stream poller, as the event source mapping) and through the sweeper
// alone. BenchmarkOutboxThroughput: jobs per second through a sweeper pass and through stream
// batches of 100. Both report the AWS calls per job, counted on the wire.

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// counter is an HTTP transport that counts AWS calls by their X-Amz-Target (service.Action).
type counter struct {
	next http.RoundTripper
	mu   sync.Mutex
	n    map[string]int
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	target := r.Header.Get("X-Amz-Target")
	if i := strings.IndexByte(target, '.'); i >= 0 {
		svc := target[:i]
		switch {
		case strings.HasPrefix(svc, "DynamoDBStreams"):
			svc = "Streams"
		case strings.HasPrefix(svc, "DynamoDB"):
			svc = "DynamoDB"
		case strings.Contains(svc, "SQS"):
			svc = "SQS"
		}
		target = svc + "." + target[i+1:]
	}
	c.mu.Lock()
	c.n[target]++
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

func (c *counter) reset() {
	c.mu.Lock()
	c.n = map[string]int{}
	c.mu.Unlock()
}

// snapshot returns, per job, the calls counted since the last reset, by action and by service,
// as benchmark metrics named prefix+what.
func (c *counter) snapshot(jobs int, prefix string) map[string]float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]float64{}
	for k, v := range c.n {
		svc, action, _ := strings.Cut(k, ".")
		out[prefix+svc+"-calls/job"] += float64(v) / float64(jobs)
		if svc != "Streams" {
			out[prefix+action+"/job"] = float64(v) / float64(jobs)
		}
	}
	return out
}

func report(b *testing.B, metrics ...map[string]float64) {
	for _, m := range metrics {
		for unit, v := range m {
			b.ReportMetric(v, unit)
		}
	}
}

// benchEnv is an outbox, a queue and clients whose calls are counted.
type benchEnv struct {
	ob      *dynamooutbox.Outbox
	ddb     *dynamodb.Client
	sqs     *sqs.Client
	streams *dynamodbstreams.Client
	prod    *producer.Producer
	queue   string
	stream  string
	calls   *counter
}

func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	ctx := context.Background()
	be := awslocaltest.Backend(b)
	calls := &counter{next: http.DefaultTransport, n: map[string]int{}}
	cfg := be.Config.Copy()
	cfg.HTTPClient = &http.Client{Transport: calls}
	e := &benchEnv{calls: calls, sqs: sqs.NewFromConfig(cfg), streams: dynamodbstreams.NewFromConfig(cfg),
		ddb: dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })}
	name := awslocal.UniqueName("bench")
	st, err := awslocal.Provision(ctx, e.sqs, awslocal.StackOptions{Name: name})
	if err != nil {
		b.Fatal(err)
	}
	e.queue = st.QueueURL
	table := awslocal.OutboxTableName(name)
	streamARN, err := dynamooutbox.CreateTable(ctx, e.ddb, table)
	if err != nil {
		b.Fatal(err)
	}
	e.stream = streamARN
	if e.ob, err = dynamooutbox.New(dynamooutbox.Config{Client: e.ddb, Table: table, Logger: quiet()}); err != nil {
		b.Fatal(err)
	}
	if e.prod, err = producer.New(producer.Config{SQS: e.sqs, QueueURL: e.queue}); err != nil {
		b.Fatal(err)
	}
	return e
}

func (e *benchEnv) relay(b *testing.B, id string, cfg outbox.RelayConfig) *outbox.Relay {
	cfg.Store, cfg.Producers, cfg.ID, cfg.Logger = e.ob, []*producer.Producer{e.prod}, id, quiet()
	r, err := outbox.NewRelay(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// sentAt receives one message and returns its SentTimestamp.
func (e *benchEnv) sentAt(b *testing.B) time.Time {
	for {
		out, err := e.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(e.queue), MaxNumberOfMessages: 1,
			WaitTimeSeconds: 5, MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameSentTimestamp}})
		if err != nil {
			b.Fatal(err)
		}
		if len(out.Messages) == 0 {
			continue
		}
		m := out.Messages[0]
		e.sqs.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(e.queue), ReceiptHandle: m.ReceiptHandle})
		ms, _ := strconv.ParseInt(m.Attributes[string(sqstypes.MessageSystemAttributeNameSentTimestamp)], 10, 64)
		return time.UnixMilli(ms)
	}
}

func percentiles(b *testing.B, d []time.Duration) {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	at := func(p float64) float64 {
		return float64(d[min(len(d)-1, int(p*float64(len(d))))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

// BenchmarkOutboxLatency commits one job at a time, each after a random pause (uniform in 0–1.2 s:
// commits do not wait for the relay's poll), and measures commit → SentTimestamp.
func BenchmarkOutboxLatency(b *testing.B) {
	for _, path := range []string{"stream", "sweeper"} {
		b.Run(path, func(b *testing.B) {
			e := newBenchEnv(b)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var runner *dynamooutbox.Runner
			var err error
			rc := dynamooutbox.RunnerConfig{Outbox: e.ob, Producers: []*producer.Producer{e.prod}, ID: "bench", Logger: quiet(),
				Relay: outbox.RelayConfig{PollInterval: time.Second}}
			if path == "stream" {
				// The stream relay alone: the sweeper polls once an hour.
				rc.Streams, rc.StreamARN, rc.Relay.PollInterval = e.streams, e.stream, time.Hour
			}
			if runner, err = dynamooutbox.NewRunner(rc); err != nil {
				b.Fatal(err)
			}
			go runner.Run(ctx)
			time.Sleep(100 * time.Millisecond) // the stream poller's first iterator (LATEST)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				time.Sleep(rand.N(1200 * time.Millisecond))
				j, err := e.ob.Prepare(ctx, e.prod, emailArgs{Order: "lat", N: i})
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				if path == "stream" {
					// The emulator's transactions emit no stream record: the same item, put alone.
					_, err = e.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: j.Items[0].Put.TableName, Item: j.Items[0].Put.Item})
				} else {
					_, err = e.ob.Transact(ctx, nil, j)
				}
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, e.sentAt(b).Sub(start.Truncate(time.Millisecond)))
			}
			b.StopTimer()
			percentiles(b, lat)
		})
	}
}

// BenchmarkOutboxThroughput relays b.N jobs committed 25 to a transaction, through sweeper passes
// of 100 and through stream batches of 100 records, and reports jobs per second and AWS calls per
// job (the write, then the relay).
func BenchmarkOutboxThroughput(b *testing.B) {
	for _, path := range []string{"sweeper", "stream"} {
		b.Run(path, func(b *testing.B) {
			e := newBenchEnv(b)
			ctx := context.Background()
			e.calls.reset()
			var recs []events.DynamoDBEventRecord
			for i := 0; i < b.N; i += 25 {
				var tx []dynamooutbox.Job
				for k := i; k < min(i+25, b.N); k++ {
					j, err := e.ob.Prepare(ctx, e.prod, emailArgs{Order: "tput", N: k})
					if err != nil {
						b.Fatal(err)
					}
					tx = append(tx, j)
					recs = append(recs, events.DynamoDBEventRecord{EventName: "INSERT", Change: events.DynamoDBStreamRecord{
						SequenceNumber: strconv.Itoa(k), NewImage: dynamooutbox.ToStreamImage(j.Items[0].Put.Item)}})
				}
				if _, err := e.ob.Transact(ctx, nil, tx...); err != nil {
					b.Fatal(err)
				}
			}
			write := e.calls.snapshot(b.N, "write-")
			e.calls.reset()
			r := e.relay(b, "bench", outbox.RelayConfig{BatchSize: 100})
			b.ResetTimer()
			start := time.Now()
			sent := 0
			if path == "sweeper" {
				st, err := r.Drain(ctx)
				if err != nil {
					b.Fatal(err)
				}
				sent = st.Sent
			} else {
				sr, err := dynamooutbox.NewStreamRelay(dynamooutbox.StreamRelayConfig{Outbox: e.ob, Relay: r, Logger: quiet(),
					OnBatch: func(st outbox.Stats) { sent += st.Sent }})
				if err != nil {
					b.Fatal(err)
				}
				for i := 0; i < len(recs); i += 100 {
					if _, err := sr.HandleDynamoDB(ctx, events.DynamoDBEvent{Records: recs[i:min(i+100, len(recs))]}); err != nil {
						b.Fatal(err)
					}
				}
			}
			el := time.Since(start)
			b.StopTimer()
			if sent != b.N {
				b.Fatalf("sent %d of %d", sent, b.N)
			}
			b.ReportMetric(float64(b.N)/el.Seconds(), "jobs/s")
			report(b, write, e.calls.snapshot(b.N, "relay-"))
		})
	}
}
