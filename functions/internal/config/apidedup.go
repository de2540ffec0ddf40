package config

import (
	"fmt"
	"sort"
	"strings"
)

// EnvAPIDedup is the API's allow-list of deduplication rules per kind (pkg/dedup):
// comma-separated entries "kind=rule" or "kind=rule+rule", the rules unique, debounce and
// throttle. A kind not listed takes none: a request that asks for one is refused (403).
const EnvAPIDedup = "SQSWORKER_API_DEDUP"

// Deduplication rules a kind may be allowed (API.Dedup).
const (
	RuleUnique   = "unique"
	RuleDebounce = "debounce"
	RuleThrottle = "throttle"
)

// APIScheduler is where the API's debounced jobs wait: EventBridge Scheduler one-time schedules
// in ScheduleGroup (SQSWORKER_SCHEDULE_GROUP) that send to QueueARN (SQSWORKER_QUEUE_ARN)
// with the role RoleARN (SQSWORKER_SCHEDULER_ROLE_ARN), and DLQARN (SQSWORKER_SCHEDULER_DLQ_ARN,
// optional) for the firings Scheduler could not deliver.
type APIScheduler struct {
	ScheduleGroup, QueueARN, RoleARN, DLQARN string
}

// apiDedup parses SQSWORKER_API_DEDUP into c.Dedup, and the scheduler settings a debounce
// needs; a rule needs the job table (SQSWORKER_TABLE), and a debounce the scheduler's settings.
func apiDedup(getenv func(string) string, c *API, errs *[]error) {
	s := strings.TrimSpace(getenv(EnvAPIDedup))
	if s == "" {
		return
	}
	c.Dedup = map[string][]string{}
	debounce := false
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		kind, rules, ok := strings.Cut(entry, "=")
		kind = strings.TrimSpace(kind)
		if !ok || strings.TrimSpace(rules) == "" {
			*errs = append(*errs, fmt.Errorf("%s: entry %q: want kind=rule, the rules unique, debounce or throttle joined by +", EnvAPIDedup, entry))
			continue
		}
		if _, listed := c.Kind(kind); !listed {
			*errs = append(*errs, fmt.Errorf("%s: kind %q has rules but is not on %s", EnvAPIDedup, kind, EnvAPIKinds))
			continue
		}
		if _, twice := c.Dedup[kind]; twice {
			*errs = append(*errs, fmt.Errorf("%s: kind %q is listed twice", EnvAPIDedup, kind))
			continue
		}
		var list []string
		seen := map[string]bool{}
		for _, r := range strings.Split(rules, "+") {
			r = strings.TrimSpace(r)
			switch r {
			case RuleUnique, RuleDebounce, RuleThrottle:
			default:
				*errs = append(*errs, fmt.Errorf("%s: kind %q: %q is not a rule (want unique, debounce or throttle)", EnvAPIDedup, kind, r))
				continue
			}
			if !seen[r] {
				seen[r] = true
				list = append(list, r)
			}
			debounce = debounce || r == RuleDebounce
		}
		sort.Strings(list)
		c.Dedup[kind] = list
	}
	if len(c.Dedup) > 0 && c.Table == "" {
		*errs = append(*errs, fmt.Errorf("%s needs %s: unique keys, debounced jobs and throttles are kept in the job table", EnvAPIDedup, EnvTable))
	}
	if debounce {
		c.Scheduler = APIScheduler{
			ScheduleGroup: strings.TrimSpace(getenv(EnvScheduleGroup)), QueueARN: strings.TrimSpace(getenv(EnvQueueARN)),
			RoleARN: strings.TrimSpace(getenv(EnvSchedulerRoleARN)), DLQARN: strings.TrimSpace(getenv(EnvSchedulerDLQARN)),
		}
		for _, need := range []struct{ name, value string }{
			{EnvScheduleGroup, c.Scheduler.ScheduleGroup}, {EnvQueueARN, c.Scheduler.QueueARN}, {EnvSchedulerRoleARN, c.Scheduler.RoleARN},
		} {
			if need.value == "" {
				*errs = append(*errs, fmt.Errorf("%s allows debounce, which needs %s: debounced jobs wait in EventBridge Scheduler one-time schedules", EnvAPIDedup, need.name))
			}
		}
	}
}
