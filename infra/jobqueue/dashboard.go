package jobqueue

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/jsii-runtime-go"
)

// MetricsNamespace is pkg/metrics.DefaultNamespace; the worker's EMF metrics carry the
// dimensions Service, Queue (the queue's name) and Kind.
const MetricsNamespace = "sqsworker"

// dashboard shows the worker's metrics per kind (found by SEARCH, since kinds are not known at
// synthesis), queue depth and age, DLQ depth and duration percentiles.
func (jq *JobQueue) dashboard() {
	p := jq.Props
	five := awscdk.Duration_Minutes(jsii.Number(5))
	queue := QueueName(p.Name, p.FIFO)
	search := func(label, metric, stat string) awscloudwatch.IMetric {
		return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression: jsii.String(fmt.Sprintf(`SEARCH('{%s,Service,Queue,Kind} MetricName="%s" Queue="%s"', '%s', 300)`,
				MetricsNamespace, metric, queue, stat)),
			UsingMetrics: &map[string]awscloudwatch.IMetric{},
			Label:        jsii.String(label),
			Period:       five,
		})
	}
	graph := func(title string, metrics ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(title), Left: &metrics, Width: jsii.Number(12), Height: jsii.Number(6),
		})
	}
	stat := func(s string) *awscloudwatch.MetricOptions {
		return &awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String(s)}
	}
	jq.Dashboard = awscloudwatch.NewDashboard(jq.Construct, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: jsii.String(DashboardName(p.Name)),
	})
	// Each AddWidgets call is one row.
	jq.Dashboard.AddWidgets(
		graph("Jobs succeeded / failed per kind", search("succeeded", "JobsSucceeded", "Sum"), search("failed", "JobsFailed", "Sum")),
		graph("Jobs retried / dead-lettered per kind", search("retried", "JobsRetried", "Sum"), search("dead-lettered", "JobsDeadLettered", "Sum")),
	)
	jq.Dashboard.AddWidgets(
		graph("Job duration p50 / p99 per kind (ms)", search("p50", "JobDuration", "p50"), search("p99", "JobDuration", "p99")),
		graph("Queue latency p99 per kind (ms)", search("p99", "JobQueueLatency", "p99")),
	)
	jq.Dashboard.AddWidgets(
		graph("Queue depth and DLQ depth",
			jq.Queue.MetricApproximateNumberOfMessagesVisible(stat("Maximum")),
			jq.Queue.MetricApproximateNumberOfMessagesNotVisible(stat("Maximum")),
			jq.DLQ.MetricApproximateNumberOfMessagesVisible(stat("Maximum"))),
		graph("Age of the oldest message (s)", jq.Queue.MetricApproximateAgeOfOldestMessage(stat("Maximum"))),
	)
	jq.Dashboard.AddWidgets(
		graph("Worker duration p50 / p90 / p99 (ms)",
			jq.Worker.MetricDuration(stat("p50")), jq.Worker.MetricDuration(stat("p90")), jq.Worker.MetricDuration(stat("p99"))),
		graph("Worker invocations, errors, throttles",
			jq.Worker.MetricInvocations(stat("Sum")), jq.Worker.MetricErrors(stat("Sum")), jq.Worker.MetricThrottles(stat("Sum"))),
	)
}
