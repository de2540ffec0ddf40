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
// those. The function, its log group and the roles have no name of ours: CloudFormation generates
// them from the stack name and logical id (and shortens them to fit: 64 for functions and roles),
// so they put no limit on Name.
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
	return out
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
	var strictest *derivedName
	room := 0
	for _, d := range p.derivedNames() {
		if r := d.limit - (len(d.name) - len(p.Name)); strictest == nil || r < room {
			strictest, room = &d, r
		}
	}
	if len(p.Name) > room {
		d := strictest
		return fmt.Errorf("Name is %d characters, at most %d fit: the %s %q would be %d characters, above %s's limit of %d",
			len(p.Name), room, d.what, d.name, len(d.name), d.service, d.limit)
	}
	return nil
}
