// Command infra is the CDK app of sqsworker: one stack holding one jobqueue.JobQueue, configured
// from cdk.json context (override with `cdk synth -c key=value`). See README.md.
package main

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"

	"github.com/sqsworker/sqsworker/infra/jobqueue"
)

func main() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	if _, err := build(app); err != nil {
		fmt.Fprintln(os.Stderr, err)
		jsii.Close()
		os.Exit(1)
	}
	app.Synth(nil)
}

// build adds the stack named by the "stack" context value (default "sqsworker") to app and
// returns it.
func build(app awscdk.App) (awscdk.Stack, error) {
	get := func(key string) string {
		switch v := app.Node().TryGetContext(jsii.String(key)).(type) {
		case nil:
			return ""
		case string:
			return v
		default:
			return fmt.Sprint(v)
		}
	}
	props, err := PropsFromContext(get)
	if err != nil {
		return nil, err
	}
	// The stack is named after props.Name: check both before creating it, since CDK panics on a
	// stack name CloudFormation would refuse.
	if !stackName.MatchString(props.Name) || len(props.Name) > 128 {
		return nil, fmt.Errorf("infra: context stack=%q names the CloudFormation stack, whose name must start with a letter and contain only letters, digits and hyphens (at most 128)", props.Name)
	}
	if err := props.Validate(); err != nil {
		return nil, err
	}
	stackProps := &awscdk.StackProps{Description: jsii.String("sqsworker job system " + props.Name)}
	// Environment-agnostic unless the CLI knows both the account and the region.
	if account, region := os.Getenv("CDK_DEFAULT_ACCOUNT"), os.Getenv("CDK_DEFAULT_REGION"); account != "" && region != "" {
		stackProps.Env = &awscdk.Environment{Account: jsii.String(account), Region: jsii.String(region)}
	}
	stack := awscdk.NewStack(app, jsii.String(props.Name), stackProps)
	// kmsKeyArn: an existing customer-managed key for the queue and DLQ (default: SSE-SQS). Its
	// key policy must let this account's IAM policies grant use of it (the default key policy does).
	if arn := get("kmsKeyArn"); arn != "" {
		if !keyARN.MatchString(arn) {
			return nil, fmt.Errorf("infra: context kmsKeyArn=%q is not a KMS key ARN (arn:aws:kms:<region>:<account>:key/<key id>; an alias will not do)", arn)
		}
		props.EncryptionKey = awskms.Key_FromKeyArn(stack, jsii.String("JobsKey"), jsii.String(arn))
	}
	if _, err := jobqueue.New(stack, "Jobs", props); err != nil {
		return nil, err
	}
	return stack, nil
}

// stackName matches a CloudFormation stack name (its length is checked apart).
var stackName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]*$`)

// keyARN matches a KMS key ARN: a single-Region key id (a UUID) or a multi-Region one (mrk-…).
var keyARN = regexp.MustCompile(`^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/(mrk-[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$`)

// PropsFromContext reads the context keys documented in README.md.
func PropsFromContext(get func(string) string) (jobqueue.Props, error) {
	p := jobqueue.Props{Name: "sqsworker"}
	var errs []error
	str := func(key string, dst *string) {
		if v := get(key); v != "" {
			*dst = v
		}
	}
	boolean := func(key string, dst *bool) {
		if v := get(key); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("context %s=%q is not a boolean", key, v))
			}
			*dst = b
		}
	}
	integer := func(key string, dst *int) {
		if v := get(key); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("context %s=%q is not an integer", key, v))
			}
			*dst = n
		}
	}
	duration := func(key string, dst *time.Duration) {
		if v := get(key); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("context %s=%q is not a Go duration", key, v))
			}
			*dst = d
		}
	}
	str("stack", &p.Name)
	boolean("fifo", &p.FIFO)
	integer("maxAttempts", &p.MaxAttempts)
	integer("maxReceiveCount", &p.MaxReceiveCount)
	duration("visibilityTimeout", &p.VisibilityTimeout)
	str("workerAsset", &p.WorkerAsset)
	integer("memoryMB", &p.MemoryMB)
	duration("timeout", &p.Timeout)
	integer("reservedConcurrency", &p.ReservedConcurrency)
	str("logLevel", &p.LogLevel)
	integer("concurrency", &p.Concurrency)
	duration("deadlineMargin", &p.DeadlineMargin)
	integer("batchSize", &p.BatchSize)
	duration("batchingWindow", &p.BatchingWindow)
	integer("maxConcurrency", &p.MaxConcurrency)
	integer("minPollers", &p.MinPollers)
	integer("maxPollers", &p.MaxPollers)
	var retention string
	str("logRetention", &retention)
	p.LogRetention = awslogs.RetentionDays(retention)
	boolean("deletionProtection", &p.DeletionProtection)
	boolean("disableScheduling", &p.DisableScheduling)
	boolean("workerEnqueues", &p.WorkerEnqueues)
	boolean("workerStatusQueries", &p.WorkerStatusQueries)
	boolean("payloadBucket", &p.PayloadBucket)
	switch v := get("recursiveLoop"); strings.ToLower(v) {
	case "":
	case "terminate":
		p.RecursiveLoop = awslambda.RecursiveLoop_TERMINATE
	case "allow":
		p.RecursiveLoop = awslambda.RecursiveLoop_ALLOW
	default:
		errs = append(errs, fmt.Errorf("context recursiveLoop=%q is neither Terminate nor Allow", v))
	}
	str("alarmEmail", &p.AlarmEmail)
	// The HTTP producer: apiKinds ("email.send,report.build=262144") turns it on, with an
	// AWS_IAM function URL (a public one needs a suppression in code: see jobqueue.ApiProps).
	if v := get("apiKinds"); v != "" {
		a := &jobqueue.ApiProps{}
		for _, entry := range strings.Split(v, ",") {
			kind, size, hasSize := strings.Cut(strings.TrimSpace(entry), "=")
			k := jobqueue.ApiKind{Kind: kind}
			if hasSize {
				n, err := strconv.Atoi(size)
				if err != nil {
					errs = append(errs, fmt.Errorf("context apiKinds: entry %q: the size is not an integer (bytes)", entry))
				}
				k.MaxArgsBytes = n
			}
			a.Kinds = append(a.Kinds, k)
		}
		// apiDedup ("report.export=unique+debounce,search.reindex=throttle"): the deduplication
		// rules each kind allows (ApiKind.Dedup; Validate checks the rules themselves).
		if v := get("apiDedup"); v != "" {
			seen := map[string]bool{}
			for _, entry := range strings.Split(v, ",") {
				kind, rules, ok := strings.Cut(strings.TrimSpace(entry), "=")
				kind = strings.TrimSpace(kind)
				i := slices.IndexFunc(a.Kinds, func(k jobqueue.ApiKind) bool { return k.Kind == kind })
				switch {
				case !ok || strings.TrimSpace(rules) == "":
					errs = append(errs, fmt.Errorf("context apiDedup: entry %q: want kind=rule, the rules unique, debounce and throttle joined by +", entry))
				case i < 0:
					errs = append(errs, fmt.Errorf("context apiDedup: kind %q is not in apiKinds: rules are for kinds the API may enqueue", kind))
				case seen[kind]:
					errs = append(errs, fmt.Errorf("context apiDedup: kind %q is listed twice: join its rules with +", kind))
				default:
					seen[kind] = true
					for _, r := range strings.Split(rules, "+") {
						a.Kinds[i].Dedup = append(a.Kinds[i].Dedup, strings.TrimSpace(r))
					}
				}
			}
		}
		boolean("apiShowDetails", &a.ShowDetails)
		integer("apiReservedConcurrency", &a.ReservedConcurrency)
		str("apiAsset", &a.Asset)
		p.Api = a
	}
	if get("apiDedup") != "" && p.Api == nil {
		errs = append(errs, fmt.Errorf("context apiDedup needs apiKinds: it allows rules to kinds of the API"))
	}
	// Several queues: queues ("critical:20,bulk:5,orders:fifo": name, then optionally the event
	// source's MaxConcurrency and fifo) and routes ("email.send=critical,import.csv=bulk"); the
	// rest of QueueProps is set in code.
	if v := get("queues"); v != "" {
		for _, entry := range strings.Split(v, ",") {
			parts := strings.Split(strings.TrimSpace(entry), ":")
			q := jobqueue.QueueProps{Name: parts[0]}
			for _, opt := range parts[1:] {
				if opt == "fifo" {
					q.FIFO = true
					continue
				}
				n, err := strconv.Atoi(opt)
				if err != nil {
					errs = append(errs, fmt.Errorf("context queues: entry %q: %q is neither fifo nor a MaxConcurrency", entry, opt))
				}
				q.MaxConcurrency = n
			}
			p.Queues = append(p.Queues, q)
		}
	}
	if v := get("routes"); v != "" {
		p.Routes = map[string]string{}
		for _, entry := range strings.Split(v, ",") {
			kind, queue, ok := strings.Cut(strings.TrimSpace(entry), "=")
			if !ok {
				errs = append(errs, fmt.Errorf("context routes: entry %q: want kind=queue", entry))
				continue
			}
			p.Routes[kind] = queue
		}
	}
	var outbox bool
	if boolean("outbox", &outbox); outbox {
		p.Outbox = &jobqueue.OutboxProps{}
		str("relayAsset", &p.Outbox.RelayAsset)
	}
	// Completion events: events=true publishes on the account's default bus, eventBus=stack on a
	// bus the stack creates (<stack>-jobs).
	var events bool
	if boolean("events", &events); events {
		p.Events = &jobqueue.EventsProps{}
		str("eventsAsset", &p.Events.Asset)
		switch v := get("eventBus"); v {
		case "", "default":
		case "stack":
			p.Events.CreateBus = true
		default:
			errs = append(errs, fmt.Errorf("context eventBus=%q: want default or stack", v))
		}
	}
	if len(errs) > 0 {
		return p, fmt.Errorf("infra: %v", errs)
	}
	return p, nil
}
