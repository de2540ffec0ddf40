package jobqueue

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

// Environment of a stack of several queues (functions/internal/config, pkg/queues).
const (
	// EnvQueues is the stack's queue set, "name=url,…" (queues.Parse): the worker serves every
	// queue of it, the API and the relays send each job to its queue.
	EnvQueues = "SQSWORKER_QUEUES"
	// EnvRoutes routes kinds to queues, "kind=queue,…" (queues.ParseRoutes): Props.Routes.
	EnvRoutes = "SQSWORKER_ROUTES"
)

// DefaultQueueName is the name of the stack's default queue in its queue set (pkg/queues'
// DefaultName): the queue of Props' own settings, <Name>-jobs.
const DefaultQueueName = "default"

// MaxQueueNameLength is the longest QueueProps.Name (pkg/jobs' MaxQueueNameLength).
const MaxQueueNameLength = 20

// QueueProps is one named queue of the stack, beside the default queue (Props.Queues): its own
// queue <Name>-jobs-<queue> and DLQ <Name>-jobs-<queue>-dlq, visibility, redrive budget, event
// source mapping (batch, window, MaximumConcurrency: the capacity reserved for it), alarms and
// dashboard row. Zero fields take the value of Props' default queue.
type QueueProps struct {
	// Name names the queue in the stack: a lowercase letter, then up to 19 lowercase letters,
	// digits or '_' (pkg/jobs ValidateQueueName; not "default", "dlq" or "jobs"). Required.
	Name string
	// FIFO makes the queue and its DLQ FIFO queues (content-based deduplication). Defaults to
	// false, whatever Props.FIFO says of the default queue.
	FIFO bool
	// MaxAttempts is the largest MaxAttempts of the kinds routed here. Defaults to
	// Props.MaxAttempts.
	MaxAttempts int
	// MaxReceiveCount is the redrive policy's maxReceiveCount. Defaults to, and at least,
	// 3 × MaxAttempts.
	MaxReceiveCount int
	// VisibilityTimeout of the queue. Defaults to 6 × Props.Timeout + BatchingWindow, and at
	// least that (AWS's rule for SQS event sources).
	VisibilityTimeout time.Duration
	// BatchSize of the queue's event source. Defaults to Props.BatchSize (FIFO: at most 10).
	BatchSize int
	// BatchingWindow of the queue's event source. Defaults to Props.BatchingWindow (FIFO: none).
	BatchingWindow time.Duration
	// MaxConcurrency is the queue's event source MaximumConcurrency, 2–1000: the worker
	// instances this queue may take at once, whatever the other queues do. Defaults to
	// Props.MaxConcurrency (DefaultMaxConcurrency in provisioned mode, which named queues do not
	// use).
	MaxConcurrency int
	// OldestMessageAlarm is the age of the oldest message that sets off the queue's alarm.
	// Defaults to 15 minutes, as the default queue's.
	OldestMessageAlarm time.Duration
}

// NamedQueue is a queue of Props.Queues, as built.
type NamedQueue struct {
	Props QueueProps // with defaults applied
	Queue awssqs.Queue
	DLQ   awssqs.Queue
}

// withDefaults returns q with the zero fields taken from p (p with its defaults).
func (q QueueProps) withDefaults(p Props) QueueProps {
	if q.MaxAttempts == 0 {
		q.MaxAttempts = p.MaxAttempts
	}
	if q.MaxReceiveCount == 0 {
		q.MaxReceiveCount = 3 * q.MaxAttempts
	}
	if q.BatchSize == 0 {
		q.BatchSize = p.BatchSize
	}
	if q.BatchingWindow == 0 && !q.FIFO {
		q.BatchingWindow = p.BatchingWindow
	}
	if q.VisibilityTimeout == 0 {
		q.VisibilityTimeout = 6*p.Timeout + q.BatchingWindow
	}
	if q.MaxConcurrency == 0 {
		q.MaxConcurrency = p.MaxConcurrency
		if q.MaxConcurrency == 0 {
			q.MaxConcurrency = DefaultMaxConcurrency
		}
	}
	if q.OldestMessageAlarm == 0 {
		q.OldestMessageAlarm = 15 * time.Minute
	}
	return q
}

// NamedQueueName and NamedDLQName are the SQS names of a named queue and its DLQ (pkg/queues'
// SQSName and DLQSQSName): <name>-jobs-<queue>, <name>-jobs-<queue>-dlq, ".fifo" for FIFO.
func NamedQueueName(name, queue string, fifo bool) string { return suffix(name+"-jobs-"+queue, fifo) }
func NamedDLQName(name, queue string, fifo bool) string {
	return suffix(name+"-jobs-"+queue+"-dlq", fifo)
}

// Alarm suffixes of a named queue: <Name>-jobs-<queue>-dlq-visible and
// <Name>-jobs-<queue>-oldest-message, as the default queue's AlarmDLQVisible and
// AlarmOldestMessage.
func queueAlarmSuffix(queue, suffix string) string { return queue + "-" + suffix }

// validQueueName applies pkg/jobs' ValidateQueueName (this module does not import the library).
func validQueueName(name string) error {
	if name == "" {
		return fmt.Errorf("the name is empty")
	}
	if len(name) > MaxQueueNameLength {
		return fmt.Errorf("name %q is %d characters, at most %d", name, len(name), MaxQueueNameLength)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || i > 0 && (c >= '0' && c <= '9' || c == '_')) {
			return fmt.Errorf("name %q has %q at %d: want a lowercase letter, then lowercase letters, digits or '_'", name, c, i)
		}
	}
	switch name {
	case DefaultQueueName:
		return fmt.Errorf("name %q is the default queue's (Props' own settings): name the others", name)
	case "dlq", "jobs":
		return fmt.Errorf("name %q is reserved (it names other queues of a stack)", name)
	}
	return nil
}

// validateQueues reports the rules Props.Queues and Props.Routes break (p with defaults).
func (p Props) validateQueues() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("jobqueue: "+format, args...)) }
	seen := map[string]int{}
	ids := map[string]int{} // construct id part (pascal) → queue index
	total := p.MaxConcurrency
	for i, q := range p.Queues {
		label := fmt.Sprintf("Queues[%d] (%q)", i, q.Name)
		if err := validQueueName(q.Name); err != nil {
			bad("%s: %v", label, err)
			continue
		}
		if j, dup := seen[q.Name]; dup {
			bad("Queues[%d] and Queues[%d] are both named %q: a queue name names one queue", j, i, q.Name)
			continue
		}
		seen[q.Name] = i
		if j, dup := ids[pascal(q.Name)]; dup {
			// "bulk_2" and "bulk2" would both build the construct Queue<Bulk2> (and its alarms and
			// outputs): CDK would refuse the second in the middle of synthesis.
			bad("Queues[%d] (%q) and Queues[%d] (%q) differ only in their underscores: both would be the construct Queue%s; rename one",
				j, p.Queues[j].Name, i, q.Name, pascal(q.Name))
			continue
		}
		ids[pascal(q.Name)] = i
		q = q.withDefaults(p)
		total += q.MaxConcurrency
		if q.MaxAttempts < 1 {
			bad("%s: MaxAttempts=%d must be at least 1", label, q.MaxAttempts)
		}
		if q.MaxReceiveCount < 3*q.MaxAttempts || q.MaxReceiveCount > 1000 {
			bad("%s: MaxReceiveCount=%d must be at least 3 × MaxAttempts = %d and at most 1000", label, q.MaxReceiveCount, 3*q.MaxAttempts)
		}
		if min := 6*p.Timeout + q.BatchingWindow; q.VisibilityTimeout < min || q.VisibilityTimeout > 12*time.Hour || q.VisibilityTimeout%time.Second != 0 {
			bad("%s: VisibilityTimeout=%s must be whole seconds, at least 6 × Timeout + BatchingWindow = %s and at most 12h", label, q.VisibilityTimeout, min)
		}
		if q.BatchingWindow < 0 || q.BatchingWindow > 5*time.Minute || q.BatchingWindow%time.Second != 0 {
			bad("%s: BatchingWindow=%s must be whole seconds between 0 and 5m", label, q.BatchingWindow)
		}
		if q.MaxConcurrency < 2 || q.MaxConcurrency > 1000 {
			bad("%s: MaxConcurrency=%d must be between 2 and 1000 (the event source's MaximumConcurrency)", label, q.MaxConcurrency)
		}
		if q.OldestMessageAlarm < time.Minute {
			bad("%s: OldestMessageAlarm=%s must be at least 1m", label, q.OldestMessageAlarm)
		}
		switch {
		case q.FIFO && (q.BatchSize < 1 || q.BatchSize > 10):
			bad("%s: BatchSize=%d: a FIFO queue's event source takes 1–10", label, q.BatchSize)
		case q.FIFO && q.BatchingWindow != 0:
			bad("%s: BatchingWindow=%s: a FIFO queue's event source takes no batching window", label, q.BatchingWindow)
		case !q.FIFO && (q.BatchSize < 1 || q.BatchSize > 10000):
			bad("%s: BatchSize=%d: a standard queue's event source takes 1–10000", label, q.BatchSize)
		case !q.FIFO && q.BatchSize > 10 && q.BatchingWindow < time.Second:
			bad("%s: BatchSize=%d above 10 needs a BatchingWindow of at least 1s", label, q.BatchSize)
		}
	}
	if len(p.Queues) > 0 && p.ReservedConcurrency > 0 && !p.Provisioned() && p.ReservedConcurrency < total {
		bad("ReservedConcurrency=%d is below the sum of the queues' MaxConcurrency, %d: every queue's event source may scale at once, and throttled invokes use up receive counts", p.ReservedConcurrency, total)
	}
	for _, kind := range slices.Sorted(maps.Keys(p.Routes)) {
		queue := p.Routes[kind]
		if !validKind(kind) {
			bad("Routes: %q is not a kind (^[a-z0-9][a-z0-9._:-]{0,127}$)", kind)
		}
		if _, ok := seen[queue]; !ok && queue != DefaultQueueName {
			names := []string{DefaultQueueName}
			for _, q := range p.Queues {
				names = append(names, q.Name)
			}
			bad("Routes: kind %s is routed to queue %q, which the stack does not have (its queues: %s)", kind, queue, strings.Join(names, ", "))
		}
	}
	return errs
}

// pascal turns a queue name into a construct id part: "bulk_import" → "BulkImport".
func pascal(name string) string {
	var b strings.Builder
	up := true
	for _, r := range name {
		if r == '_' {
			up = true
			continue
		}
		if up && r >= 'a' && r <= 'z' {
			r -= 'a' - 'A'
		}
		up = false
		b.WriteRune(r)
	}
	return b.String()
}

// namedQueues builds the queues of Props.Queues and their DLQs, as queues() builds the default
// one (encryption, TLS only, MaxMessageSize, 14 days in the DLQ).
func (jq *JobQueue) namedQueues() {
	p := jq.Props
	for _, qp := range p.Queues {
		qp = qp.withDefaults(p)
		props := func(name string) *awssqs.QueueProps {
			o := &awssqs.QueueProps{
				QueueName:           jsii.String(name),
				Encryption:          awssqs.QueueEncryption_SQS_MANAGED,
				EnforceSSL:          jsii.Bool(true),
				MaxMessageSizeBytes: jsii.Number(MaxMessageSize),
			}
			if p.EncryptionKey != nil {
				o.Encryption, o.EncryptionMasterKey = awssqs.QueueEncryption_KMS, p.EncryptionKey
			}
			if qp.FIFO {
				o.Fifo, o.ContentBasedDeduplication = jsii.Bool(true), jsii.Bool(true)
			}
			return o
		}
		id := "Queue" + pascal(qp.Name)
		dlqProps := props(NamedDLQName(p.Name, qp.Name, qp.FIFO))
		dlqProps.RetentionPeriod = secs(DLQRetention)
		nq := &NamedQueue{Props: qp, DLQ: awssqs.NewQueue(jq.Construct, jsii.String(id+"DLQ"), dlqProps)}
		qProps := props(NamedQueueName(p.Name, qp.Name, qp.FIFO))
		qProps.VisibilityTimeout = secs(qp.VisibilityTimeout)
		qProps.DeadLetterQueue = &awssqs.DeadLetterQueue{Queue: nq.DLQ, MaxReceiveCount: jsii.Number(float64(qp.MaxReceiveCount))}
		nq.Queue = awssqs.NewQueue(jq.Construct, jsii.String(id), qProps)
		jq.NamedQueues = append(jq.NamedQueues, nq)
	}
}

// queueSet returns the stack's queue set as SQSWORKER_QUEUES writes it: the default queue, then
// the named queues in Props.Queues' order.
func (jq *JobQueue) queueSet() *string {
	parts := []*string{jsii.String(DefaultQueueName + "="), jq.Queue.QueueUrl()}
	for _, nq := range jq.NamedQueues {
		parts = append(parts, jsii.String(","+nq.Props.Name+"="), nq.Queue.QueueUrl())
	}
	return awscdk.Fn_Join(jsii.String(""), &parts)
}

// routes returns Props.Routes as SQSWORKER_ROUTES writes it, sorted by kind.
func (jq *JobQueue) routes() string {
	var parts []string
	for _, kind := range slices.Sorted(maps.Keys(jq.Props.Routes)) {
		parts = append(parts, kind+"="+jq.Props.Routes[kind])
	}
	return strings.Join(parts, ",")
}

// grantNamedQueuesSend lets grantee send to every named queue (and look it up: grantSend) or send
// only (grantSendOnly).
func (jq *JobQueue) grantNamedQueuesSend(grantee awsiam.IGrantable, lookUp bool) {
	for _, nq := range jq.NamedQueues {
		if lookUp {
			jq.grantSend(nq.Queue, grantee)
		} else {
			jq.grantSendOnly(nq.Queue, grantee)
		}
	}
}

// wireNamedQueues connects the named queues to the rest of the stack, once everything is built:
// the worker's event source per queue (its capacity), its sends (re-sends to the queue, dead
// letters to the queue's DLQ) and environment; the scheduler role's, the API's and the relays'
// sends and environment; alarms, dashboard rows and outputs per queue.
func (jq *JobQueue) wireNamedQueues() {
	p := jq.Props
	if len(jq.NamedQueues) == 0 {
		return // one queue: every route can only name it, and the functions need not know
	}
	set := jq.queueSet()
	routes := jq.routes()
	addEnv := func(fn awslambda.Function) {
		fn.AddEnvironment(jsii.String(EnvQueues), set, nil)
		if routes != "" {
			fn.AddEnvironment(jsii.String(EnvRoutes), jsii.String(routes), nil)
		}
	}
	// The worker serves every queue: one event source each, with the queue's own batch, window
	// and MaximumConcurrency (the event source grants consuming the queue). It re-sends to the
	// queue a job came from and dead-letters to that queue's DLQ.
	addEnv(jq.Worker)
	for _, nq := range jq.NamedQueues {
		q := nq.Props
		es := &awslambdaeventsources.SqsEventSourceProps{
			BatchSize:               jsii.Number(float64(q.BatchSize)),
			ReportBatchItemFailures: jsii.Bool(true),
			MaxConcurrency:          jsii.Number(float64(q.MaxConcurrency)),
		}
		if q.BatchingWindow > 0 {
			es.MaxBatchingWindow = secs(q.BatchingWindow)
		}
		jq.Worker.AddEventSource(awslambdaeventsources.NewSqsEventSource(nq.Queue, es))
		jq.grantSend(nq.Queue, jq.Worker)
		jq.grantSend(nq.DLQ, jq.Worker)
	}
	if jq.SchedulerRole != nil {
		jq.grantNamedQueuesSend(jq.SchedulerRole, false)
	}
	if jq.Api != nil {
		jq.grantNamedQueuesSend(jq.Api.Function, false)
		addEnv(jq.Api.Function)
	}
	if jq.Outbox != nil {
		addEnv(jq.Outbox.Relay)
	}
	if jq.PostgresOutbox != nil {
		addEnv(jq.PostgresOutbox.Function)
	}

	maxOver := &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Maximum")}
	stat := func(s string) *awscloudwatch.MetricOptions {
		return &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String(s)}
	}
	for _, nq := range jq.NamedQueues {
		q := nq.Props
		id := pascal(q.Name)
		jq.alarm(id+"DLQVisibleAlarm", queueAlarmSuffix(q.Name, AlarmDLQVisible),
			fmt.Sprintf("The DLQ of queue %s has visible messages: dead jobs need attention (sqsworker dlq --queue %s).", q.Name, q.Name),
			nq.DLQ.MetricApproximateNumberOfMessagesVisible(maxOver), 1)
		jq.alarm(id+"OldestMessageAlarm", queueAlarmSuffix(q.Name, AlarmOldestMessage),
			fmt.Sprintf("The oldest job of queue %s has waited over %s: its event source's MaxConcurrency (%d) does not keep up.", q.Name, q.OldestMessageAlarm, q.MaxConcurrency),
			nq.Queue.MetricApproximateAgeOfOldestMessage(maxOver), q.OldestMessageAlarm.Seconds())
		name := NamedQueueName(p.Name, q.Name, q.FIFO)
		search := func(label, metric, st string) awscloudwatch.IMetric {
			return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
				Expression: jsii.String(fmt.Sprintf(`SEARCH('{%s,Service,Queue,Kind} MetricName="%s" Queue="%s"', '%s', 300)`,
					MetricsNamespace, metric, name, st)),
				UsingMetrics: &map[string]awscloudwatch.IMetric{},
				Label:        jsii.String(label),
				Period:       awscdk.Duration_Minutes(jsii.Number(5)),
			})
		}
		graph := func(title string, metrics ...awscloudwatch.IMetric) awscloudwatch.IWidget {
			return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
				Title: jsii.String(title), Left: &metrics, Width: jsii.Number(12), Height: jsii.Number(6),
			})
		}
		jq.Dashboard.AddWidgets(
			graph("Queue "+q.Name+": depth, in flight, DLQ depth",
				nq.Queue.MetricApproximateNumberOfMessagesVisible(stat("Maximum")),
				nq.Queue.MetricApproximateNumberOfMessagesNotVisible(stat("Maximum")),
				nq.DLQ.MetricApproximateNumberOfMessagesVisible(stat("Maximum")),
				nq.Queue.MetricApproximateAgeOfOldestMessage(stat("Maximum"))),
			graph("Queue "+q.Name+": jobs succeeded / failed / misrouted per kind",
				search("succeeded", "JobsSucceeded", "Sum"), search("failed", "JobsFailed", "Sum"), search("misrouted", "JobsMisrouted", "Sum")),
		)
	}

	out := func(id string, v *string, desc string) {
		o := awscdk.NewCfnOutput(jq.Construct, jsii.String(id), &awscdk.CfnOutputProps{Value: v, Description: jsii.String(desc)})
		o.OverrideLogicalId(jsii.String(*jq.Construct.Node().Id() + id))
	}
	out("Queues", set, "The stack's queue set, name=url,… (SQSWORKER_QUEUES)")
	for _, nq := range jq.NamedQueues {
		id := "Queue" + pascal(nq.Props.Name)
		out(id+"Url", nq.Queue.QueueUrl(), "The URL of queue "+nq.Props.Name)
		out(id+"Arn", nq.Queue.QueueArn(), "The ARN of queue "+nq.Props.Name)
		out(id+"DLQUrl", nq.DLQ.QueueUrl(), "The URL of queue "+nq.Props.Name+"'s DLQ")
	}
}
