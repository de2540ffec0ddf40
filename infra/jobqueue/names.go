package jobqueue

import (
	"fmt"
	"strings"
)

// QueueName, DLQName, TableName, ScheduleGroupName and SchedulerDLQName mirror pkg/awslocal (this
// module does not import the library).
func QueueName(name string, fifo bool) string { return suffix(name+"-jobs", fifo) }
func DLQName(name string, fifo bool) string   { return suffix(name+"-jobs-dlq", fifo) }
func TableName(name string) string            { return name + "-jobs" }
func ScheduleGroupName(name string) string    { return name + "-jobs" }
func SchedulerDLQName(name string) string     { return name + "-jobs-scheduler-dlq" }

// DashboardName is the name of the stack's dashboard.
func DashboardName(name string) string { return name + "-jobs" }

// AlarmName is the name of the stack's alarm with the given suffix (AlarmDLQVisible, …):
// <name>-jobs-<suffix>. The alarm topic's policy lets alarms named AlarmName(name, "*") publish.
func AlarmName(name, suffix string) string { return name + "-jobs-" + suffix }

func suffix(s string, fifo bool) string {
	if fifo {
		return s + ".fifo"
	}
	return s
}

// Name limits of the services, checked 2026-12-01 with the docs search (and, where it carries
// them, cfn-lint 1.51's copy of the CloudFormation resource schemas):
//   - SQS CreateQueue: up to 80 characters, alphanumerics, '-' and '_', a FIFO name ending in
//     ".fifo" (counted) — https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_CreateQueue.html
//   - DynamoDB tables: 3–255 characters of [a-zA-Z0-9_.-] —
//     https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.NamingRulesDataTypes.html
//   - EventBridge Scheduler groups: 1–64 characters of [0-9a-zA-Z-_.] —
//     https://docs.aws.amazon.com/scheduler/latest/APIReference/API_CreateScheduleGroup.html
//   - CloudWatch dashboards: up to 255 characters of [A-Za-z0-9_-] —
//     https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_PutDashboard.html
//   - CloudWatch alarms: 1–255 characters —
//     https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_PutMetricAlarm.html
//
// The characters every one of them accepts are letters, digits, '-' and '_', so Name may use only
// those. The functions (worker, API, relays), their log groups, the roles, the recurring
// schedules of the outbox relays and the payload bucket have no name of ours: CloudFormation
// generates them from the stack name and logical id, shortened to fit (64 for functions, roles
// and schedules; for the bucket, S3's 3–63 lower-case characters: CloudFormation's "Name type"
// page, https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-properties-name.html,
// gives stack123123123123-s3bucket-abcdefghijk1 as an example), so they put no limit on Name.
//
// What each part adds (derivedNames): the DynamoDB outbox its table <Name>-outbox and its
// failures queue <Name>-outbox-relay-failures (SQS: Name ≤ 58); either outbox the schedule
// group of the relays' schedules <Name>-outbox (Scheduler: Name ≤ 57); the API and the outboxes
// alarms <Name>-jobs-<suffix> (alarmSuffixes); the payload bucket nothing.
type derivedName struct {
	what    string // "the schedule group name"
	name    string
	service string
	limit   int
}

// derivedNames lists the names built from p.Name that have a length limit.
func (p Props) derivedNames() []derivedName {
	longestAlarm := ""
	for _, s := range alarmSuffixes {
		if len(s) > len(longestAlarm) {
			longestAlarm = s
		}
	}
	out := []derivedName{
		{"queue name", QueueName(p.Name, p.FIFO), "SQS", 80},
		{"DLQ name", DLQName(p.Name, p.FIFO), "SQS", 80},
		{"table name", TableName(p.Name), "DynamoDB", 255},
		{"dashboard name", DashboardName(p.Name), "CloudWatch", 255},
		{"alarm name", AlarmName(p.Name, longestAlarm), "CloudWatch", 255},
	}
	if !p.DisableScheduling {
		out = append(out,
			derivedName{"schedule group name", ScheduleGroupName(p.Name), "EventBridge Scheduler", 64},
			derivedName{"scheduler DLQ name", SchedulerDLQName(p.Name), "SQS", 80})
	}
	if p.Outbox != nil {
		out = append(out,
			derivedName{"outbox table name", OutboxTableName(p.Name), "DynamoDB", 255},
			derivedName{"outbox failures queue name", OutboxFailuresQueueName(p.Name), "SQS", 80})
	}
	if p.Outbox != nil || p.PostgresOutbox != nil {
		out = append(out, derivedName{"outbox schedule group name", OutboxScheduleGroupName(p.Name), "EventBridge Scheduler", 64})
	}
	for _, q := range p.Queues { // namedqueues.go: <Name>-jobs-<queue>-dlq(.fifo), the longest
		out = append(out, derivedName{fmt.Sprintf("queue %s's DLQ name", q.Name), NamedDLQName(p.Name, q.Name, q.FIFO), "SQS", 80})
	}
	return append(out, p.eventsNames()...)
}

// validateName checks p.Name (after defaults) against every name derived from it: one error
// naming the first character no derived name accepts, or the derived name that leaves Name the
// least room.
func validateName(p Props) error {
	if p.Name == "" {
		return fmt.Errorf("Name is required (it prefixes the queue, DLQ, table and schedule group names)")
	}
	if i := strings.IndexFunc(p.Name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}); i >= 0 {
		return fmt.Errorf("Name %q has %q: use only letters, digits, '-' and '_' (the characters SQS queue names and CloudWatch dashboard names allow)",
			p.Name, []rune(p.Name[i:])[0])
	}
	d, room := p.strictestName()
	if len(p.Name) > room {
		return fmt.Errorf("Name is %d characters, at most %d fit: the %s %q would be %d characters, above %s's limit of %d",
			len(p.Name), room, d.what, d.name, len(d.name), d.service, d.limit)
	}
	return nil
}

// strictestName returns the derived name that leaves Name the least room, and that room.
func (p Props) strictestName() (derivedName, int) {
	var strictest derivedName
	room := -1
	for _, d := range p.derivedNames() {
		if r := d.limit - (len(d.name) - len(p.Name)); room < 0 || r < room {
			strictest, room = d, r
		}
	}
	return strictest, room
}

// MaxNameLength is the longest Name that p's other settings allow (Name itself is ignored): the
// room the strictest name derived from it leaves (names.go). With the defaults it is 59 (the
// schedule group <Name>-jobs, EventBridge Scheduler's 64).
func MaxNameLength(p Props) int {
	_, room := p.withDefaults().strictestName()
	return room
}
