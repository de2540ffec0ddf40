package jobqueue

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// JobQueue is a deployed job system. Each feature area lives in its own file: queues.go,
// table.go, worker.go, scheduling.go, payload.go, alarms.go, dashboard.go, api.go, pgoutbox.go,
// outputs.go, outbox.go (relays.go: what the two outbox relays share); New calls them in order.
type JobQueue struct {
	constructs.Construct
	Props         Props // with defaults applied
	Queue         awssqs.Queue
	DLQ           awssqs.Queue
	Table         awsdynamodb.Table
	Worker        awslambda.Function
	WorkerRole    awsiam.Role
	LogGroup      awslogs.LogGroup
	ScheduleGroup awsscheduler.ScheduleGroup // nil when DisableScheduling
	SchedulerRole awsiam.Role                // nil when DisableScheduling
	SchedulerDLQ  awssqs.Queue               // nil when DisableScheduling: where failed schedule deliveries go
	PayloadBucket awss3.Bucket               // nil unless Props.PayloadBucket
	AlarmTopic    awssns.Topic
	Alarms        []awscloudwatch.Alarm
	Dashboard     awscloudwatch.Dashboard
	Api           *Api    // nil unless Props.Api: the HTTP producer (api.go)
	Outbox        *Outbox // nil without Props.Outbox
	Events        *Events // nil without Props.Events
	// OutboxScheduleGroup holds the outbox relays' recurring schedules
	// (OutboxScheduleGroupName; relays.go): nil unless Props.Outbox or Props.PostgresOutbox.
	OutboxScheduleGroup awsscheduler.ScheduleGroup

	// PostgresOutbox is the PostgreSQL outbox's relay (pgoutbox.go), nil unless Props.PostgresOutbox.
	PostgresOutbox *PostgresOutbox

	// NamedQueues are the queues of Props.Queues (namedqueues.go), in its order; Queue and DLQ
	// are the default queue's.
	NamedQueues []*NamedQueue
}

func secs(d interface{ Seconds() float64 }) awscdk.Duration {
	return awscdk.Duration_Seconds(jsii.Number(d.Seconds()))
}

// New validates props and builds the job system under scope. It returns an error (and creates
// nothing) when the props break a rule (Props.Validate) or the worker asset is missing.
func New(scope constructs.Construct, id string, props Props) (*JobQueue, error) {
	if err := props.Validate(); err != nil {
		return nil, err
	}
	p := props.withDefaults()
	if _, err := os.Stat(p.WorkerAsset); err != nil {
		return nil, fmt.Errorf("jobqueue: worker asset %s is missing: run `make build` at the repository root first (%v)", p.WorkerAsset, err)
	}
	if err := checkPgRelayAsset(p); err != nil {
		return nil, err
	}

	jq := &JobQueue{Construct: constructs.NewConstruct(scope, jsii.String(id)), Props: p}
	jq.queues()
	jq.namedQueues()
	jq.table()
	jq.worker()
	jq.scheduling()
	jq.payload()
	jq.grantWorker()
	jq.alarms()
	jq.dashboard()
	jq.api()
	jq.postgresOutbox()
	jq.outputs()
	if err := jq.addOutbox(); err != nil {
		return nil, err
	}
	jq.wireNamedQueues()
	jq.batches()
	jq.addEvents()
	return jq, nil
}
