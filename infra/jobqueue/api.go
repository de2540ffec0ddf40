package jobqueue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// Defaults and limits of ApiProps.
const (
	DefaultApiAsset    = "../dist/api-arm64.zip"
	DefaultApiMemoryMB = 256
	DefaultApiTimeout  = 10 * time.Second
	// ApiMaxArgsBytesLimit is the largest args limit functions/api accepts (its
	// config.MaxArgsBytesLimit: SQS's 1 MiB less 8 KiB for the worker and 4 KiB of envelope).
	ApiMaxArgsBytesLimit = 1<<20 - 12<<10
	// ApiSchemaMount is where Lambda mounts the schema layer (ApiProps.SchemaDir): /opt.
	ApiSchemaMount = "/opt"
	// apiEnvBudget is what the API's variables may take of Lambda's 4 KB for all of a
	// function's environment (the queue URL and table name are counted at their longest).
	apiEnvBudget = 4096 - 512
)

// Environment variables of the API function (functions/internal/config).
const (
	EnvAPIKinds        = "SQSWORKER_API_KINDS"
	EnvAPIMaxArgsBytes = "SQSWORKER_API_MAX_ARGS_BYTES"
	EnvAPISchemas      = "SQSWORKER_API_SCHEMAS"
	EnvAPIShowDetails  = "SQSWORKER_API_SHOW_DETAILS"
	// EnvAPIDedup is the allow-list of deduplication rules per kind (ApiKind.Dedup):
	// "kind=rule+rule,kind=rule", written only when a kind allows one.
	EnvAPIDedup = "SQSWORKER_API_DEDUP"
)

// Deduplication rules of pkg/dedup a kind of the API may allow (ApiKind.Dedup); a request asks
// for one with the field of that name ("unique", "debounce", "throttle").
const (
	ApiRuleUnique   = "unique"
	ApiRuleDebounce = "debounce"
	ApiRuleThrottle = "throttle"
)

// Alarm suffixes of the API (AlarmName(Name, suffix)).
const (
	AlarmApi5xx       = "api-5xx"
	AlarmApiThrottles = "api-throttles"
)

// ApiPublicUrlRule is the id of the cdk-nag finding an ApiProps.AuthType NONE raises on the
// function URL (an error, in the construct's own pack "Sqsworker"): the stack synthesizes only
// once it is suppressed with a reason, NagSuppressions.AddResourceSuppressions(jq.Api.Url, …).
const ApiPublicUrlRule = "Sqsworker-ApiPublicUrl"

// ApiTableActions (on the table) and ApiIndexActions (on the by_id index) are what the API
// function calls on the job table when its status is on: pkg/status Table.GetByID (GET
// /jobs/{id}) queries by_id and reads the items with BatchGetItem; ReserveQueued (each POST)
// is a conditional PutItem, plus a GetItem where a backend does not return the old item with the
// conditional failure; ReleaseQueued (after a failed send) and MarkSent (after a repeat sent a
// queued job again) are UpdateItems.
var (
	ApiTableActions = []string{"dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"}
	ApiIndexActions = []string{"dynamodb:Query"}
)

// ApiSchedulerActions are the EventBridge Scheduler calls of the API when a kind allows
// debounce, on the stack's job schedule group's schedules only: pkg/dedup keeps each debounced
// job in one one-time schedule through pkg/schedule's Client, ScheduleJob (CreateSchedule; a
// ConflictException means it exists, nothing is read), RescheduleJob (UpdateSchedule, which
// replaces the whole schedule on every later enqueue of the key) and CancelJob (DeleteSchedule,
// for a schedule that lost the race to start the key's job); for a kind Routes sends to a named
// queue, ScheduleJobOn and RescheduleJobOn, the same calls with that queue as the target (sent
// to by the scheduler role, not the API). It neither reads nor lists schedules. With them the
// API gets iam:PassRole on the scheduler role, to Scheduler only. The rules' items (unique keys,
// debounced keys, throttle counters) are in the job table, under keys of their own, written with
// the GetItem, PutItem and UpdateItem of ApiTableActions: no further DynamoDB grant.
var ApiSchedulerActions = []string{"scheduler:CreateSchedule", "scheduler:DeleteSchedule", "scheduler:UpdateSchedule"}

// ApiProps deploys functions/api, the HTTP producer (POST /jobs, GET /jobs/{id}), behind a
// Lambda function URL. Deny by default: only Kinds are enqueued, the URL takes only SigV4-signed
// requests of principals given GrantInvokeApi, and GET shows no job details.
type ApiProps struct {
	// Kinds is the allow-list: the only kinds POST /jobs enqueues. Required, at least one.
	Kinds []ApiKind
	// MaxArgsBytes limits the args (compacted JSON) of the kinds without a limit of their own.
	// Defaults to 0: the function's default, 64 KiB.
	MaxArgsBytes int
	// SchemaDir is a directory deployed as a Lambda layer, so its files are under /opt: the
	// ApiKind.SchemaFile paths are relative to it. Defaults to "": no layer.
	SchemaDir string
	// AuthType of the function URL. Defaults to awslambda.FunctionUrlAuthType_AWS_IAM:
	// SigV4-signed requests of principals with lambda:InvokeFunctionUrl (GrantInvokeApi).
	// FunctionUrlAuthType_NONE makes the URL public, only when set explicitly, and then raises
	// the cdk-nag error ApiPublicUrlRule, which must be suppressed with a reason.
	AuthType awslambda.FunctionUrlAuthType
	// ReservedConcurrency, when set, reserves this many concurrent executions of the account for
	// the API and caps it there: it can never be starved by other functions, at most this many
	// requests run at once, and the rest get 429 from Lambda (the api-throttles alarm). Lambda
	// refuses a reservation that leaves the account fewer than 100 unreserved executions, so it
	// needs an account quota of at least 100 + the stack's reservations (new accounts often have
	// far less than the usual 1,000). Defaults to 0: no reservation, the API scales with the
	// account's unreserved concurrency. See infra/README.md, "Reserved concurrency".
	ReservedConcurrency int
	// ShowDetails lets GET /jobs/{id} show the key, the last error, the stored result and the
	// dead-letter reason (SQSWORKER_API_SHOW_DETAILS). Defaults to false.
	ShowDetails bool
	// DisableStatus deploys the API without the job table: GET /jobs/{id} answers 501 and a
	// repeated Idempotency-Key is not recognised by the API (the worker still runs a key once).
	// Defaults to false: SQSWORKER_TABLE is set and the function gets ApiTableActions and
	// ApiIndexActions.
	DisableStatus bool
	// Asset is the API zip `make build` writes (default ../dist/api-arm64.zip).
	Asset string
	// MemoryMB of the function (default 256) and its Timeout (default 10s, whole seconds up to
	// 15m).
	MemoryMB int
	Timeout  time.Duration
	// LogLevel is passed as SQSWORKER_LOG_LEVEL when set.
	LogLevel string
}

// ApiKind is one allowed kind.
type ApiKind struct {
	// Kind is the job kind. Required.
	Kind string
	// MaxArgsBytes limits its args (compacted JSON). Defaults to ApiProps.MaxArgsBytes.
	MaxArgsBytes int
	// Schema is an inline JSON Schema document its args must match (it counts against Lambda's
	// 4 KB environment; use SchemaFile for large ones). Defaults to none.
	Schema string
	// SchemaFile is a schema file's path relative to ApiProps.SchemaDir. Defaults to none.
	SchemaFile string
	// Dedup lists the deduplication rules of pkg/dedup a request may ask for this kind
	// (docs/FUNCTIONS.md, "Deduplication"): ApiRuleUnique, ApiRuleDebounce, ApiRuleThrottle,
	// each once. Any rule needs the job table (not ApiProps.DisableStatus). ApiRuleDebounce also
	// needs scheduling (not Props.DisableScheduling: debounced jobs wait in one-time schedules of
	// the stack's group, each of which sends its job to the kind's queue, Props.Routes, with the
	// scheduler role, which may send to every queue of Props.Queues), and gives the API
	// ApiSchedulerActions on the group's schedules, iam:PassRole on the scheduler role and the
	// scheduler's environment. Defaults to none: a request that asks for a rule is refused (403),
	// and the template is as without it.
	Dedup []string
}

// Api is the deployed HTTP producer (JobQueue.Api; nil when Props.Api is nil).
type Api struct {
	Function awslambda.Function
	Url      awslambda.FunctionUrl
	Role     awsiam.Role
	LogGroup awslogs.LogGroup
	// Schemas is the layer of ApiProps.SchemaDir, or nil.
	Schemas awslambda.LayerVersion
}

func (a ApiProps) withDefaults() ApiProps {
	if a.Asset == "" {
		a.Asset = DefaultApiAsset
	}
	if a.MemoryMB == 0 {
		a.MemoryMB = DefaultApiMemoryMB
	}
	if a.Timeout == 0 {
		a.Timeout = DefaultApiTimeout
	}
	if a.AuthType == "" {
		a.AuthType = awslambda.FunctionUrlAuthType_AWS_IAM
	}
	return a
}

// validKind mirrors pkg/jobs.ValidateKind: ^[a-z0-9][a-z0-9._:-]{0,127}$.
func validKind(k string) bool {
	if k == "" || len(k) > 128 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && strings.IndexByte("._:-", c) >= 0) {
			return false
		}
	}
	return true
}

// validate reports every rule a breaks. It also checks the API's own inputs on disk: the asset
// and the schema files (each must be a JSON object or boolean), so that a missing one fails here
// with its name rather than as a jsii error or a cold-start exit.
func (a ApiProps) validate() []error {
	a = a.withDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("jobqueue: Api."+format, args...)) }
	if len(a.Kinds) == 0 {
		bad("Kinds is empty: list the kinds the API may enqueue (deny by default: it enqueues nothing else)")
	}
	if _, err := os.Stat(a.Asset); err != nil {
		bad("Asset %s is missing: run `make build` at the repository root first (%v)", a.Asset, err)
	}
	if a.AuthType != awslambda.FunctionUrlAuthType_AWS_IAM && a.AuthType != awslambda.FunctionUrlAuthType_NONE {
		bad("AuthType=%q must be awslambda.FunctionUrlAuthType_AWS_IAM or FunctionUrlAuthType_NONE", a.AuthType)
	}
	if a.ReservedConcurrency < 0 {
		bad("ReservedConcurrency=%d must not be negative (0: no reservation)", a.ReservedConcurrency)
	}
	if a.MemoryMB < 128 || a.MemoryMB > 10240 {
		bad("MemoryMB=%d must be between 128 and 10240", a.MemoryMB)
	}
	if a.Timeout < time.Second || a.Timeout > 15*time.Minute || a.Timeout%time.Second != 0 {
		bad("Timeout=%s must be whole seconds between 1s and 15m", a.Timeout)
	}
	size := func(what string, n int) {
		if n != 0 && (n < 2 || n > ApiMaxArgsBytesLimit) {
			bad("%s=%d must be between 2 and %d bytes", what, n, ApiMaxArgsBytesLimit)
		}
	}
	size("MaxArgsBytes", a.MaxArgsBytes)
	if a.SchemaDir != "" {
		if st, err := os.Stat(a.SchemaDir); err != nil || !st.IsDir() {
			bad("SchemaDir %s is not a directory (%v)", a.SchemaDir, err)
		}
	}
	seen := map[string]bool{}
	for i, k := range a.Kinds {
		if !validKind(k.Kind) {
			bad("Kinds[%d].Kind=%q is not a kind (^[a-z0-9][a-z0-9._:-]{0,127}$)", i, k.Kind)
		}
		if seen[k.Kind] {
			bad("Kinds[%d]: kind %q is listed twice", i, k.Kind)
		}
		seen[k.Kind] = true
		size(fmt.Sprintf("Kinds[%d].MaxArgsBytes", i), k.MaxArgsBytes)
		rules := map[string]bool{}
		for _, r := range k.Dedup {
			switch {
			case r != ApiRuleUnique && r != ApiRuleDebounce && r != ApiRuleThrottle:
				bad("Kinds[%d].Dedup (%s): %q is not a rule (want %q, %q or %q)", i, k.Kind, r, ApiRuleUnique, ApiRuleDebounce, ApiRuleThrottle)
			case rules[r]:
				bad("Kinds[%d].Dedup (%s): %q is listed twice", i, k.Kind, r)
			}
			rules[r] = true
		}
		if len(k.Dedup) > 0 && a.DisableStatus {
			bad("Kinds[%d].Dedup (%s) needs the job table, which DisableStatus leaves out: unique keys, debounced keys and throttle counters are kept in it", i, k.Kind)
		}
		switch {
		case k.Schema != "" && k.SchemaFile != "":
			bad("Kinds[%d] (%s) has both Schema and SchemaFile: choose one", i, k.Kind)
		case k.Schema != "":
			if err := checkSchema([]byte(k.Schema)); err != nil {
				bad("Kinds[%d].Schema (%s): %v", i, k.Kind, err)
			}
		case k.SchemaFile != "":
			rel := filepath.ToSlash(k.SchemaFile)
			if a.SchemaDir == "" {
				bad("Kinds[%d].SchemaFile (%s) needs SchemaDir, the directory it is relative to", i, k.Kind)
				continue
			}
			if path.IsAbs(rel) || path.Clean(rel) != rel || strings.HasPrefix(rel, "../") || rel == ".." {
				bad("Kinds[%d].SchemaFile=%q must be a clean path relative to SchemaDir", i, k.SchemaFile)
				continue
			}
			b, err := os.ReadFile(filepath.Join(a.SchemaDir, filepath.FromSlash(rel)))
			if err == nil {
				err = checkSchema(b)
			}
			if err != nil {
				bad("Kinds[%d].SchemaFile (%s): %v", i, k.Kind, err)
			}
		}
	}
	if n := envSize(a.environment(longestApiRefs)); n > apiEnvBudget {
		bad("Kinds: the API's environment would be about %d bytes, above Lambda's 4 KB for all variables: move the larger inline schemas to SchemaDir files", n)
	}
	return errs
}

// validateApiDedup reports the deduplication rules of p.Api the rest of p cannot serve: a
// debounce needs the stack's schedule group. A debounce of a kind Routes sends to a named queue
// is served: pkg/dedup's schedule of the job targets that queue (schedule.Client's
// ScheduleJobOn and RescheduleJobOn, the queue's ARN from SQSWORKER_QUEUES), and the scheduler
// role may send to every queue (wireNamedQueues).
func (p Props) validateApiDedup() []error {
	if p.Api == nil {
		return nil
	}
	var errs []error
	for i, k := range p.Api.Kinds {
		if !slices.Contains(k.Dedup, ApiRuleDebounce) {
			continue
		}
		if p.DisableScheduling {
			errs = append(errs, fmt.Errorf("jobqueue: Api.Kinds[%d].Dedup (%s) allows %q, which needs scheduling: debounced jobs wait in EventBridge Scheduler one-time schedules of the stack's group, which DisableScheduling leaves out", i, k.Kind, ApiRuleDebounce))
		}
	}
	return errs
}

// debounces reports whether a kind allows ApiRuleDebounce: the API then needs the scheduler.
func (a ApiProps) debounces() bool {
	for _, k := range a.Kinds {
		if slices.Contains(k.Dedup, ApiRuleDebounce) {
			return true
		}
	}
	return false
}

// dedupList is SQSWORKER_API_DEDUP: "kind=rule+rule" for each kind that allows a rule, in the
// order of Kinds, the rules sorted; "" when none does.
func (a ApiProps) dedupList() string {
	var entries []string
	for _, k := range a.Kinds {
		if len(k.Dedup) == 0 {
			continue
		}
		rules := slices.Sorted(slices.Values(k.Dedup))
		entries = append(entries, k.Kind+"="+strings.Join(slices.Compact(rules), "+"))
	}
	return strings.Join(entries, ",")
}

// apiRefs are the stack's values the API's environment names (tokens at synthesis).
type apiRefs struct {
	queueURL, table                                         string
	scheduleGroup, queueARN, schedulerRoleARN, schedulerDLQ string
}

// longestApiRefs are apiRefs at their longest, for the environment's size: SQS names of 80
// characters, a table name of 255, a schedule group of 64, a role name of 64, in the longest
// partition and region.
var longestApiRefs = apiRefs{
	queueURL:         "https://sqs.us-gov-west-1.amazonaws.com/123456789012/" + strings.Repeat("q", 80),
	table:            strings.Repeat("t", 255),
	scheduleGroup:    strings.Repeat("g", 64),
	queueARN:         "arn:aws-us-gov:sqs:us-gov-west-1:123456789012:" + strings.Repeat("q", 80),
	schedulerRoleARN: "arn:aws-us-gov:iam::123456789012:role/" + strings.Repeat("r", 64),
	schedulerDLQ:     "arn:aws-us-gov:sqs:us-gov-west-1:123456789012:" + strings.Repeat("d", 80),
}

// checkSchema checks that b is a JSON object or boolean (the function compiles it at cold start).
func checkSchema(b []byte) error {
	b = bytes.TrimSpace(b)
	if !json.Valid(b) {
		return errors.New("not valid JSON")
	}
	if b[0] != '{' && string(b) != "true" && string(b) != "false" {
		return errors.New("a JSON Schema is an object or a boolean")
	}
	return nil
}

// environment returns the API's variables for the stack's values r (the table's unless
// DisableStatus, the scheduler's only when a kind allows debounce).
func (a ApiProps) environment(r apiRefs) map[string]string {
	env := map[string]string{EnvQueueURL: r.queueURL}
	if !a.DisableStatus {
		env[EnvTable] = r.table
	}
	if d := a.dedupList(); d != "" {
		env[EnvAPIDedup] = d
	}
	if a.debounces() {
		// The fields of the schedule.Config of debounced jobs (functions/internal/config).
		env[EnvScheduleGroup] = r.scheduleGroup
		env[EnvQueueARN] = r.queueARN
		env[EnvSchedulerRoleARN] = r.schedulerRoleARN
		env[EnvSchedulerDLQARN] = r.schedulerDLQ
	}
	kinds := make([]string, len(a.Kinds))
	schemas := map[string]json.RawMessage{}
	for i, k := range a.Kinds {
		kinds[i] = k.Kind
		if k.MaxArgsBytes != 0 {
			kinds[i] += "=" + strconv.Itoa(k.MaxArgsBytes)
		}
		switch {
		case k.Schema != "":
			var buf bytes.Buffer
			if json.Compact(&buf, []byte(k.Schema)) == nil {
				schemas[k.Kind] = buf.Bytes()
			}
		case k.SchemaFile != "":
			b, _ := json.Marshal(ApiSchemaMount + "/" + filepath.ToSlash(k.SchemaFile))
			schemas[k.Kind] = b
		}
	}
	env[EnvAPIKinds] = strings.Join(kinds, ",")
	if len(schemas) > 0 {
		b, _ := json.Marshal(schemas) // sorted keys: a stable template
		env[EnvAPISchemas] = string(b)
	}
	if a.MaxArgsBytes != 0 {
		env[EnvAPIMaxArgsBytes] = strconv.Itoa(a.MaxArgsBytes)
	}
	if a.ShowDetails {
		env[EnvAPIShowDetails] = "true"
	}
	if a.LogLevel != "" {
		env[EnvLogLevel] = a.LogLevel
	}
	return env
}

// envSize is the size Lambda counts for env: keys and values.
func envSize(env map[string]string) int {
	n := 0
	for k, v := range env {
		n += len(k) + len(v)
	}
	return n
}

// api builds the HTTP producer when Props.Api is set: the function with its allow-list, its
// role and log group, the function URL, its grants and alarms, and the output JobsApiUrl.
func (jq *JobQueue) api() {
	if jq.Props.Api == nil {
		return
	}
	a := jq.Props.Api.withDefaults()
	p := jq.Props
	c := constructs.NewConstruct(jq.Construct, jsii.String("Api"))
	api := &Api{}
	jq.Api = api

	api.LogGroup = awslogs.NewLogGroup(c, jsii.String("Logs"), &awslogs.LogGroupProps{
		Retention:     p.LogRetention,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	// Its own role, without the AWSLambdaBasicExecutionRole managed policy: it may write only to
	// its log group, send to the queue, and (status on) make the table calls of ApiTableActions.
	api.Role = awsiam.NewRole(c, jsii.String("Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("sqsworker HTTP producer " + p.Name),
	})
	api.LogGroup.GrantWrite(api.Role)

	refs := apiRefs{queueURL: *jq.Queue.QueueUrl(), table: *jq.Table.TableName()}
	if a.debounces() { // Validate: only with scheduling
		refs.scheduleGroup = ScheduleGroupName(p.Name)
		refs.queueARN, refs.schedulerRoleARN, refs.schedulerDLQ = *jq.Queue.QueueArn(), *jq.SchedulerRole.RoleArn(), *jq.SchedulerDLQ.QueueArn()
	}
	envStr := a.environment(refs)
	env := make(map[string]*string, len(envStr))
	for k, v := range envStr {
		env[k] = jsii.String(v)
	}
	fnProps := &awslambda.FunctionProps{
		Role:         api.Role,
		LogGroup:     api.LogGroup,
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         awslambda.Code_FromAsset(jsii.String(a.Asset), nil),
		MemorySize:   jsii.Number(float64(a.MemoryMB)),
		Timeout:      secs(a.Timeout),
		Environment:  &env,
		Description:  jsii.String("sqsworker HTTP producer: POST /jobs, GET /jobs/{id}"),
	}
	if a.ReservedConcurrency > 0 {
		fnProps.ReservedConcurrentExecutions = jsii.Number(float64(a.ReservedConcurrency))
	}
	if a.SchemaDir != "" {
		api.Schemas = awslambda.NewLayerVersion(c, jsii.String("Schemas"), &awslambda.LayerVersionProps{
			Code:                    awslambda.Code_FromAsset(jsii.String(a.SchemaDir), nil),
			CompatibleArchitectures: &[]awslambda.Architecture{awslambda.Architecture_ARM_64()},
			CompatibleRuntimes:      &[]awslambda.Runtime{awslambda.Runtime_PROVIDED_AL2023()},
			Description:             jsii.String("JSON Schemas of the sqsworker API's kinds (under /opt)"),
			RemovalPolicy:           awscdk.RemovalPolicy_DESTROY,
		})
		fnProps.Layers = &[]awslambda.ILayerVersion{api.Schemas}
	}
	api.Function = awslambda.NewFunction(c, jsii.String("Function"), fnProps)
	api.Url = api.Function.AddFunctionUrl(&awslambda.FunctionUrlOptions{AuthType: a.AuthType})
	if a.AuthType == awslambda.FunctionUrlAuthType_NONE {
		awscdk.Aspects_Of(c).Add(newPublicURLPack(api.Url), nil)
	}

	// Sending is all it needs of GrantEnqueue: it refuses delays beyond SQS's 15 minutes, so it
	// schedules nothing but debounced jobs (Scheduler actions and iam:PassRole only when a kind
	// allows debounce: grantApiDebounce), and its producer looks nothing up (sqs:SendMessage
	// only, SendOnlyActions).
	jq.grantSendOnly(jq.Queue, api.Function)
	if !a.DisableStatus {
		table := jq.Table.TableArn()
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
			Grantee: api.Function, Actions: jsii.Strings(ApiTableActions...), ResourceArns: &[]*string{table},
		})
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
			Grantee: api.Function, Actions: jsii.Strings(ApiIndexActions...), ResourceArns: jsii.Strings(*table + "/index/" + IndexByID),
		})
		// The API records every job (queued) before it sends it: the worker's first claim then
		// goes straight to the update that takes an existing record (one write, not a refused
		// put and an update).
		jq.Worker.AddEnvironment(jsii.String(EnvExpectRecords), jsii.String("true"), nil)
	}
	if a.debounces() {
		jq.grantApiDebounce(api)
	}

	sumOver := &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Sum")}
	jq.alarm("Api5xxAlarm", AlarmApi5xx, "The HTTP producer answered 5xx: SQS or DynamoDB failed (the function's log says which), or the function failed or timed out.",
		api.Function.Metric(jsii.String("Url5xxCount"), sumOver), 1)
	jq.alarm("ApiThrottlesAlarm", AlarmApiThrottles, "The HTTP producer was throttled (callers got 429): more requests at once than Api.ReservedConcurrency, or than the account's unreserved concurrency left.",
		api.Function.MetricThrottles(sumOver), 1)

	o := awscdk.NewCfnOutput(jq.Construct, jsii.String("ApiUrl"), &awscdk.CfnOutputProps{
		Value: api.Url.Url(), Description: jsii.String("The HTTP producer's function URL (POST /jobs, GET /jobs/{id})"),
	})
	o.OverrideLogicalId(jsii.String(*jq.Construct.Node().Id() + "ApiUrl"))
}

// grantApiDebounce gives the API what its debounced jobs call (ApiKind.Dedup with
// ApiRuleDebounce): ApiSchedulerActions on the schedules of the stack's job group, and
// iam:PassRole on the scheduler role to Scheduler only, each in a statement of its own.
func (jq *JobQueue) grantApiDebounce(api *Api) {
	awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee: api.Function, Actions: jsii.Strings(ApiSchedulerActions...), ResourceArns: jsii.Strings(jq.jobSchedulesArn()),
	})
	jq.grantPassSchedulerRole(api.Function)
	suppress(api.Role.Node().TryFindChild(jsii.String("DefaultPolicy")), nagRule{
		ID: "AwsSolutions-IAM5",
		Reason: "A kind of the API allows debounce: the API may create, move and delete schedules in this stack's group only, " +
			"schedule/<this stack's group>/*, since one-time schedule names are per job.",
		AppliesTo: []any{map[string]any{"regex": "/^Resource::arn:<AWS::Partition>:scheduler:<AWS::Region>:<AWS::AccountId>:schedule\\/" + ScheduleGroupName(jq.Props.Name) + "\\/\\*$/"}},
	})
}

// GrantInvokeApi lets grantee call the API's function URL with SigV4-signed requests: as AWS
// documents for AWS_IAM function URLs, lambda:InvokeFunctionUrl with the condition
// lambda:FunctionUrlAuthType = AWS_IAM, and (required for URLs created since October 2025)
// lambda:InvokeFunction with lambda:InvokedViaFunctionUrl = true, both on the function only. It
// panics when Props.Api is not set.
func (jq *JobQueue) GrantInvokeApi(grantee awsiam.IGrantable) awsiam.Grant {
	if jq.Api == nil {
		panic("jobqueue: GrantInvokeApi needs Props.Api: the stack has no HTTP producer")
	}
	return jq.Api.Function.GrantInvokeUrl(grantee)
}

// publicURLPack is the construct's own cdk-nag pack, added to the Api scope only when the URL's
// auth type is NONE: one error finding, ApiPublicUrlRule, on that URL. cdk-nag's machinery
// reports it (so `cdk synth` stops with it) and honours a NagSuppressions suppression with a
// reason.
type publicURLPack struct {
	cdknag.NagPack
	url awscdk.CfnResource
}

func newPublicURLPack(url awslambda.FunctionUrl) cdknag.NagPack {
	p := &publicURLPack{url: url.Node().DefaultChild().(awscdk.CfnResource)}
	cdknag.NewNagPack_Override(p, &cdknag.NagPackProps{Verbose: jsii.Bool(true), Reports: jsii.Bool(false)})
	p.SetPackName(jsii.String("Sqsworker"))
	return p
}

// Visit applies the rule to the URL's CfnUrl only.
func (p *publicURLPack) Visit(node constructs.IConstruct) {
	if *node.Node().Path() != *p.url.Node().Path() {
		return
	}
	p.ApplyRule(&publicURLRule{node: p.url})
}

// publicURLRule is the IApplyRule of ApiPublicUrlRule.
type publicURLRule struct {
	node awscdk.CfnResource
}

func (r *publicURLRule) Rule(awscdk.CfnResource) any { return cdknag.NagRuleCompliance_NON_COMPLIANT }
func (r *publicURLRule) Explanation() *string {
	return jsii.String("With AuthType NONE anyone who finds the URL can enqueue the allowed kinds and read job states, unsigned and " +
		"untraceable to a principal; Lambda's throttling is the only limit. Keep AWS_IAM (callers sign with SigV4 and need " +
		"GrantInvokeApi), or suppress this rule with the reason the URL may be public (for example an authorizer in front of it).")
}
func (r *publicURLRule) SetExplanation(*string) {}
func (r *publicURLRule) IgnoreSuppressionCondition() cdknag.INagSuppressionIgnore {
	return nil
}
func (r *publicURLRule) SetIgnoreSuppressionCondition(cdknag.INagSuppressionIgnore) {}
func (r *publicURLRule) Info() *string {
	return jsii.String("The sqsworker HTTP producer's function URL is public (AuthType NONE).")
}
func (r *publicURLRule) SetInfo(*string)                 {}
func (r *publicURLRule) Level() cdknag.NagMessageLevel   { return cdknag.NagMessageLevel_ERROR }
func (r *publicURLRule) SetLevel(cdknag.NagMessageLevel) {}
func (r *publicURLRule) Node() awscdk.CfnResource        { return r.node }
func (r *publicURLRule) SetNode(awscdk.CfnResource)      {}
func (r *publicURLRule) RuleSuffixOverride() *string     { return jsii.String("ApiPublicUrl") }
func (r *publicURLRule) SetRuleSuffixOverride(*string)   {}
