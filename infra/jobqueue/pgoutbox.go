package jobqueue

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/jsii-runtime-go"
)

// Defaults of PostgresOutboxProps.
const (
	DefaultPgRelayAsset           = "../dist/pgrelay-arm64.zip"
	DefaultPgRelayTimeout         = time.Minute
	DefaultPgRelayMemoryMB        = 256
	DefaultPgRelaySchedule        = time.Minute
	DefaultPgOutboxTable          = "sqsworker_outbox"
	DefaultPgOutboxOldestAgeAlarm = 15 * time.Minute
	minPgRelayTimeout             = 20 * time.Second // the function keeps 12 s before its deadline
	pgRelayDeadlineMarginSeconds  = 12
)

// PgRelayTableActions are the job-table calls of the PostgreSQL relay (functions/pgrelay): its
// producer records each sent job queued (pkg/status RecordEnqueued, or RecordScheduledJob for a
// job delayed through Scheduler), one conditional PutItem each. It reads nothing.
var PgRelayTableActions = []string{"dynamodb:PutItem"}

// PgRelaySecretActions are its calls on DatabaseSecret: it reads the secret's value at each new
// connection (cached five minutes), and nothing else.
var PgRelaySecretActions = []string{"secretsmanager:GetSecretValue"}

// Alarm name suffixes of the PostgreSQL outbox (AlarmName(Props.Name, suffix)).
const (
	AlarmOutboxDeadRows    = "outbox-dead-rows"
	AlarmOutboxRelayErrors = "outbox-relay-errors"
	AlarmOutboxStale       = "outbox-stale"
)

// Environment of functions/pgrelay (functions/internal/config.LoadPGRelay), beside EnvQueueURL,
// EnvTable, EnvLogLevel, EnvScheduleGroup, EnvQueueARN, EnvSchedulerRoleARN, EnvSchedulerDLQARN
// and the outbox's EnvOutboxTable, EnvOutboxLease and EnvOutboxMaxAttempts (outbox.go), which it
// reads with the same meaning (its table is a PostgreSQL table).
const (
	EnvOutboxDSN         = "SQSWORKER_OUTBOX_DSN"
	EnvOutboxSecretARN   = "SQSWORKER_OUTBOX_SECRET_ARN"
	EnvOutboxSSLMode     = "SQSWORKER_OUTBOX_SSLMODE"
	EnvOutboxSSLRootCert = "SQSWORKER_OUTBOX_SSLROOTCERT"
	EnvOutboxBatchSize   = "SQSWORKER_OUTBOX_BATCH_SIZE"
)

// The relay's EMF metrics (functions/pgrelay): namespace MetricsNamespace, dimensions Service
// (the function's name) and Table (the outbox table).
const (
	MetricOutboxDeadRows     = "OutboxDeadRows"
	MetricOutboxRelayErrors  = "OutboxRelayErrors"
	MetricOutboxOldestAge    = "OutboxOldestPendingAge"
	MetricOutboxSent         = "OutboxSent"
	MetricOutboxPendingRows  = "OutboxPendingRows"
	metricsNamespaceOfRelays = MetricsNamespace
)

// PostgresOutboxProps deploys the relay of a PostgreSQL transactional outbox
// (pkg/outbox/pgoutbox): the functions/pgrelay Lambda function, invoked every Schedule by an
// EventBridge Scheduler schedule, drains the outbox table into the stack's queue until nothing is
// due or it is near its deadline. It gets what a producer gets (GrantEnqueue), the job table's
// item actions (it records sent jobs as queued), read access to DatabaseSecret, and the VPC
// wiring below. Alarms: dead rows, relay errors (the function's own errors and the EMF count),
// and a pending row older than OldestPendingAlarm.
//
// The outbox table itself is the application's: create it with pgoutbox.Migrate, `sqsworker
// outbox migrate`, or pkg/outbox/pgoutbox/schema.sql in the application's migration tool.
type PostgresOutboxProps struct {
	// Asset is the pgrelay zip built by `make build` (default ../dist/pgrelay-arm64.zip).
	Asset string
	// DatabaseSecret holds the database's credentials in the RDS format ({"username",
	// "password", "host", "port", "dbname"}: rds.DatabaseInstance's Secret() is one); the
	// function reads it (and reads it again after a rotation). Either it or DSN is required.
	DatabaseSecret awssecretsmanager.ISecret
	// DatabaseSecretKey is the customer-managed KMS key DatabaseSecret is encrypted with, when
	// CDK cannot know it: a secret imported by ARN or name (Secret_FromSecretCompleteArn,
	// Secret_FromSecretNameV2) whose key is not the AWS managed key aws/secretsmanager. The
	// function then gets kms:Decrypt on it, through Secrets Manager only (kms:ViaService
	// secretsmanager.<region>.amazonaws.com), as it gets on the key of a secret that names its
	// own (created in the stack, or imported with Secret_FromSecretAttributes and its
	// EncryptionKey). Without it, an imported secret that names no key is read as one under
	// aws/secretsmanager, which needs no grant; under a customer key its every read would be
	// refused. The grant is in the function's role: a key of another account must also allow
	// the role in its key policy. Needs DatabaseSecret; a key ARN, not an alias. Defaults to nil.
	DatabaseSecretKey awskms.IKey
	// DSN is the database's connection string, when there is no secret (a database that
	// needs no password from the function, such as one with trust or certificate
	// authentication). It is visible in the function's configuration: put no password in it.
	// The function generates no IAM authentication tokens.
	DSN string
	// SSLMode of the connection built from DatabaseSecret (default require: encrypted, the
	// server's certificate not verified, since the function ships no CA bundle). To verify,
	// add a layer with the RDS CA bundle (PostgresOutbox.Function.AddLayers), set SSLRootCert
	// to its path and SSLMode to verify-full.
	SSLMode string
	// SSLRootCert is the sslrootcert of the connection built from DatabaseSecret: an absolute
	// path to a PEM file of CAs (a layer's files are under /opt, such as
	// /opt/rds/global-bundle.pem), or "system". Default: none.
	SSLRootCert string
	// Table is the outbox table, optionally schema-qualified (default sqsworker_outbox).
	Table string
	// Vpc places the function in the database's VPC (nil: no VPC, for a database reachable
	// from Lambda's network). VpcSubnets picks the subnets (default: CDK's, the private ones),
	// SecurityGroups the function's groups (default: one new group, all egress). With Vpc the
	// function's role also gets the EC2 network-interface actions Lambda needs to attach it
	// (VpcAccessActions, in the policy PostgresOutbox.VpcAccess).
	Vpc            awsec2.IVpc
	VpcSubnets     *awsec2.SubnetSelection
	SecurityGroups []awsec2.ISecurityGroup
	// Database, when set (an rds.DatabaseInstance, DatabaseCluster or DatabaseProxy), lets the
	// function in on its default port. Needs Vpc.
	Database awsec2.IConnectable
	// Schedule is how often the relay runs (default and minimum one minute, whole minutes).
	Schedule time.Duration
	// Timeout of the function (default 1 minute; 20 s to 15 minutes). Each invocation drains
	// until 12 s before it; keep it at least Schedule so that a busy outbox is always drained.
	Timeout time.Duration
	// MemoryMB of the function (default 256).
	MemoryMB int
	// BatchSize, MaxAttempts and Lease configure the relay (0: the relay's defaults, 100, 10,
	// 30 s). Lease must exceed the time one pass takes to send a batch.
	BatchSize   int
	MaxAttempts int
	Lease       time.Duration
	// LogLevel is passed as SQSWORKER_LOG_LEVEL when set.
	LogLevel string
	// OldestPendingAlarm is the age of the oldest pending row that raises the outbox-stale
	// alarm (default 15 minutes).
	OldestPendingAlarm time.Duration
}

// PostgresOutbox is the deployed relay of a PostgreSQL outbox.
type PostgresOutbox struct {
	Function awslambda.Function
	Role     awsiam.Role
	LogGroup awslogs.LogGroup
	// Schedule, in the group OutboxScheduleGroupName, invokes the function every
	// PostgresOutboxProps.Schedule.
	Schedule awsscheduler.CfnSchedule
	// ScheduleRole is the role the schedule invokes the function with.
	ScheduleRole awsiam.Role
	// VpcAccess is the policy on Role that lets Lambda attach the function to
	// PostgresOutboxProps.Vpc (VpcAccessActions; vpc.go), nil without a VPC.
	VpcAccess awsiam.Policy
}

var pgTable = regexp.MustCompile(`^([a-z_][a-z0-9_]*\.)?[a-z_][a-z0-9_]*$`)

func (o PostgresOutboxProps) withDefaults() PostgresOutboxProps {
	if o.Asset == "" {
		o.Asset = DefaultPgRelayAsset
	}
	if o.Table == "" {
		o.Table = DefaultPgOutboxTable
	}
	if o.Schedule == 0 {
		o.Schedule = DefaultPgRelaySchedule
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultPgRelayTimeout
	}
	if o.MemoryMB == 0 {
		o.MemoryMB = DefaultPgRelayMemoryMB
	}
	if o.OldestPendingAlarm == 0 {
		o.OldestPendingAlarm = DefaultPgOutboxOldestAgeAlarm
	}
	return o
}

// validate reports every rule o (after defaults) breaks.
func (o PostgresOutboxProps) validate() error {
	o = o.withDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("jobqueue: PostgresOutbox: "+format, args...))
	}
	switch {
	case o.DatabaseSecret == nil && o.DSN == "":
		bad("DatabaseSecret or DSN is required: the outbox's database")
	case o.DatabaseSecret != nil && o.DSN != "":
		bad("DatabaseSecret and DSN are both set: give one")
	}
	if o.DatabaseSecretKey != nil {
		if o.DatabaseSecret == nil {
			bad("DatabaseSecretKey needs DatabaseSecret: it is the key that secret is encrypted with")
		} else if arn := o.DatabaseSecretKey.KeyArn(); arn != nil && strings.Contains(*arn, ":alias/") {
			bad("DatabaseSecretKey is an alias (%s): give the key itself (awskms.Key_FromKeyArn with arn:…:key/<key id>), since an IAM grant on an alias's ARN does not cover the key", *arn)
		}
	}
	if !pgTable.MatchString(o.Table) {
		bad("Table=%q: a lower-case table name, optionally schema-qualified", o.Table)
	}
	switch o.SSLMode {
	case "", "disable", "allow", "prefer", "require", "verify-ca", "verify-full":
	default:
		bad("SSLMode=%q is not a PostgreSQL sslmode", o.SSLMode)
	}
	if o.SSLRootCert != "" && o.SSLRootCert != "system" && o.SSLRootCert[0] != '/' {
		bad("SSLRootCert=%q: an absolute path to a PEM file of CAs (a layer's files are under /opt), or \"system\"", o.SSLRootCert)
	}
	if o.Database != nil && o.Vpc == nil {
		bad("Database needs Vpc: the function joins the database's VPC to reach it")
	}
	if (o.VpcSubnets != nil || len(o.SecurityGroups) > 0) && o.Vpc == nil {
		bad("VpcSubnets and SecurityGroups need Vpc")
	}
	if o.Schedule < time.Minute || o.Schedule%time.Minute != 0 {
		bad("Schedule=%s must be whole minutes, at least 1m (EventBridge Scheduler's rate)", o.Schedule)
	}
	if o.Timeout < minPgRelayTimeout || o.Timeout > 15*time.Minute || o.Timeout%time.Second != 0 {
		bad("Timeout=%s must be whole seconds between %s and 15m (the relay keeps %d s before its deadline)", o.Timeout, minPgRelayTimeout, pgRelayDeadlineMarginSeconds)
	}
	if o.MemoryMB < 128 || o.MemoryMB > 10240 {
		bad("MemoryMB=%d must be between 128 and 10240", o.MemoryMB)
	}
	if o.BatchSize < 0 || o.BatchSize > 10000 {
		bad("BatchSize=%d must be between 1 and 10000 (0: the relay's default)", o.BatchSize)
	}
	if o.MaxAttempts < 0 || o.MaxAttempts > 1000 {
		bad("MaxAttempts=%d must be between 1 and 1000 (0: the relay's default)", o.MaxAttempts)
	}
	if o.Lease != 0 && (o.Lease < time.Second || o.Lease > time.Hour) {
		bad("Lease=%s must be between 1s and 1h (0: the relay's default)", o.Lease)
	}
	if o.OldestPendingAlarm < time.Minute {
		bad("OldestPendingAlarm=%s must be at least 1m", o.OldestPendingAlarm)
	}
	return errors.Join(errs...)
}

// checkPgRelayAsset reports a missing relay asset when p.PostgresOutbox is set (New calls it
// before building anything).
func checkPgRelayAsset(p Props) error {
	if p.PostgresOutbox == nil {
		return nil
	}
	asset := p.PostgresOutbox.withDefaults().Asset
	if _, err := os.Stat(asset); err != nil {
		return fmt.Errorf("jobqueue: PostgresOutbox: relay asset %s is missing: run `make build` at the repository root first (%v)", asset, err)
	}
	return nil
}

// postgresOutbox builds the relay when Props.PostgresOutbox is set (after the alarm topic).
func (jq *JobQueue) postgresOutbox() {
	if jq.Props.PostgresOutbox == nil {
		return
	}
	o := jq.Props.PostgresOutbox.withDefaults()
	c := jq.Construct
	po := &PostgresOutbox{}
	po.LogGroup = awslogs.NewLogGroup(c, jsii.String("PgRelayLogs"), &awslogs.LogGroupProps{
		Retention:     jq.Props.LogRetention,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	po.Role = awsiam.NewRole(c, jsii.String("PgRelayRole"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("sqsworker PostgreSQL outbox relay " + jq.Props.Name),
	})
	po.LogGroup.GrantWrite(po.Role)

	env := map[string]*string{
		EnvQueueURL:    jq.Queue.QueueUrl(),
		EnvTable:       jq.Table.TableName(),
		EnvOutboxTable: jsii.String(o.Table),
	}
	if o.DatabaseSecret != nil {
		env[EnvOutboxSecretARN] = o.DatabaseSecret.SecretArn()
	} else {
		env[EnvOutboxDSN] = jsii.String(o.DSN)
	}
	if o.SSLMode != "" {
		env[EnvOutboxSSLMode] = jsii.String(o.SSLMode)
	}
	if o.SSLRootCert != "" {
		env[EnvOutboxSSLRootCert] = jsii.String(o.SSLRootCert)
	}
	if o.BatchSize > 0 {
		env[EnvOutboxBatchSize] = jsii.String(strconv.Itoa(o.BatchSize))
	}
	if o.MaxAttempts > 0 {
		env[EnvOutboxMaxAttempts] = jsii.String(strconv.Itoa(o.MaxAttempts))
	}
	if o.Lease > 0 {
		env[EnvOutboxLease] = jsii.String(o.Lease.String())
	}
	if o.LogLevel != "" {
		env[EnvLogLevel] = jsii.String(o.LogLevel)
	}
	if jq.PayloadBucket != nil {
		env[EnvPayloadBucket] = jq.PayloadBucket.BucketName() // GrantEnqueue gives s3:PutObject on it
	}
	if jq.ScheduleGroup != nil {
		env[EnvScheduleGroup] = jq.ScheduleGroup.ScheduleGroupName()
		env[EnvQueueARN] = jq.Queue.QueueArn()
		env[EnvSchedulerRoleARN] = jq.SchedulerRole.RoleArn()
		env[EnvSchedulerDLQARN] = jq.SchedulerDLQ.QueueArn()
	}
	fnProps := &awslambda.FunctionProps{
		Role:         po.Role,
		LogGroup:     po.LogGroup,
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         awslambda.Code_FromAsset(jsii.String(o.Asset), nil),
		MemorySize:   jsii.Number(float64(o.MemoryMB)),
		Timeout:      secs(o.Timeout),
		Environment:  &env,
		Description:  jsii.String("sqsworker: relays the PostgreSQL outbox " + o.Table + " to " + QueueName(jq.Props.Name, jq.Props.FIFO)),
	}
	if o.Vpc != nil {
		fnProps.Vpc = o.Vpc
		fnProps.VpcSubnets = o.VpcSubnets
		if len(o.SecurityGroups) > 0 {
			fnProps.SecurityGroups = &o.SecurityGroups
		}
	}
	po.Function = awslambda.NewFunction(c, jsii.String("PgRelay"), fnProps)
	if o.Vpc != nil {
		po.VpcAccess = jq.grantVpcAccess("PgRelayVpcAccess", po.Role, po.Function)
	}
	if o.Database != nil {
		o.Database.Connections().AllowDefaultPortFrom(po.Function, jsii.String("sqsworker outbox relay"))
	}
	// Exactly what the function calls: send (and schedule long delays, and write large jobs to
	// the payload bucket), record sent jobs queued, read the secret.
	jq.grantRelayEnqueue(po.Function, true)
	awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee: po.Function, Actions: jsii.Strings(PgRelayTableActions...), ResourceArns: jsii.Strings(*jq.Table.TableArn()),
	})
	if o.DatabaseSecret != nil {
		grantSecretValue(o.DatabaseSecret, o.DatabaseSecretKey, po.Function)
	}

	// Every Schedule, with no retries: the next run is the retry, and a late one would only
	// overlap it (which is safe, but useless). The schedule's role is the construct's own (CDK
	// would make one per stack, outside the construct), and trusts Scheduler for the relays'
	// group only (relays.go).
	po.ScheduleRole, po.Schedule = jq.relaySchedule("PgRelaySchedule", po.Function, o.Schedule, "", o.Schedule,
		"EventBridge Scheduler runs the PostgreSQL outbox relay of "+jq.Props.Name,
		"sqsworker: run the PostgreSQL outbox relay of "+jq.Props.Name)

	// Alarms, on the relay's EMF metrics and on the function's own errors.
	metric := func(name, stat string) awscloudwatch.IMetric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace:     jsii.String(metricsNamespaceOfRelays),
			MetricName:    jsii.String(name),
			DimensionsMap: &map[string]*string{"Service": po.Function.FunctionName(), "Table": jsii.String(o.Table)},
			Statistic:     jsii.String(stat),
			Period:        awscdk.Duration_Minutes(jsii.Number(5)),
		})
	}
	jq.alarm("OutboxDeadRowsAlarm", AlarmOutboxDeadRows,
		"The PostgreSQL outbox has dead rows: jobs the relay gave up on (sqsworker outbox list --state dead --dsn …; retry them once fixed).",
		metric(MetricOutboxDeadRows, "Maximum"), 1)
	errorsExpr := awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression: jsii.String("FILL(relay, 0) + FILL(fn, 0)"),
		UsingMetrics: &map[string]awscloudwatch.IMetric{
			"relay": metric(MetricOutboxRelayErrors, "Sum"),
			"fn":    po.Function.MetricErrors(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: awscdk.Duration_Minutes(jsii.Number(5))}),
		},
		Label:  jsii.String("relay errors"),
		Period: awscdk.Duration_Minutes(jsii.Number(5)),
	})
	jq.alarm("OutboxRelayErrorsAlarm", AlarmOutboxRelayErrors,
		"The PostgreSQL outbox relay failed (database unreachable, bad credentials, or the function itself): jobs wait in the outbox.",
		errorsExpr, 1)
	jq.alarm("OutboxStaleAlarm", AlarmOutboxStale,
		fmt.Sprintf("The oldest pending row of the PostgreSQL outbox is over %s old: the relay is not keeping up, or not running.", o.OldestPendingAlarm),
		metric(MetricOutboxOldestAge, "Maximum"), o.OldestPendingAlarm.Seconds())

	// cdk-nag: the grants above name this stack's schedule group with a wildcard for the per-job
	// schedules (the VPC access policy carries its own suppression, vpc.go).
	rules := []nagRule{{
		ID:     "AwsSolutions-IAM5",
		Reason: "The relay manages one-time schedules of delayed jobs in this stack's group only: schedule/<group>/*, since their names are per job.",
		AppliesTo: []any{map[string]any{"regex": "/^Resource::arn:<AWS::Partition>:scheduler:<AWS::Region>:<AWS::AccountId>:schedule\\/" +
			ScheduleGroupName(jq.Props.Name) + "\\/\\*$/"}},
	}}
	if dp := po.Role.Node().TryFindChild(jsii.String("DefaultPolicy")); dp != nil && jq.ScheduleGroup != nil {
		suppress(dp, rules...)
	}
	out := awscdk.NewCfnOutput(c, jsii.String("PgRelayFunctionName"), &awscdk.CfnOutputProps{
		Value: po.Function.FunctionName(), Description: jsii.String("The PostgreSQL outbox relay function"),
	})
	out.OverrideLogicalId(jsii.String(*c.Node().Id() + "PgRelayFunctionName"))
	jq.PostgresOutbox = po
}

// PgRelaySecretKeyActions are its calls on the customer key of DatabaseSecret, through Secrets
// Manager (which decrypts the secret's value with the caller's permissions).
var PgRelaySecretKeyActions = []string{"kms:Decrypt"}

// grantSecretValue lets grantee read secret's value: secretsmanager:GetSecretValue on the secret
// (the ARN CDK's GrantRead uses, with "-??????" for the random suffix when the secret was
// imported by name), and kms:Decrypt (PgRelaySecretKeyActions) through Secrets Manager only
// (kms:ViaService secretsmanager.<region>.amazonaws.com, as GrantRead conditions it) on the
// secret's customer key: the one it names (EncryptionKey) and key, DatabaseSecretKey, when set.
// Not GrantRead itself: it adds secretsmanager:DescribeSecret, which the relay never calls.
//
// The key grant is a statement in grantee's identity policy, for every key. CDK's
// key.GrantDecrypt with a ViaServicePrincipal writes nothing for an imported key (a
// ViaServicePrincipal adds no statement to a principal's policy, and an imported key's policy
// cannot be changed), so the relay got no kms:Decrypt on the key of an imported secret, even one
// imported with its EncryptionKey (issue 23.3). Same-account keys honour the identity policy
// when their key policy delegates to the account, as CDK's and KMS's default key policies do.
func grantSecretValue(secret awssecretsmanager.ISecret, key awskms.IKey, grantee awsiam.IGrantable) {
	arn := secret.SecretFullArn()
	if arn == nil {
		arn = jsii.String(*secret.SecretArn() + "-??????")
	}
	awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee: grantee, Actions: jsii.Strings(PgRelaySecretActions...), ResourceArns: &[]*string{arn},
	})
	var keys []*string
	for _, k := range []awskms.IKey{secret.EncryptionKey(), key} {
		if k == nil {
			continue
		}
		if a := k.KeyArn(); !slices.ContainsFunc(keys, func(b *string) bool { return *b == *a }) {
			keys = append(keys, a)
		}
	}
	if len(keys) == 0 {
		return
	}
	region := awscdk.Stack_Of(secret).Region()
	awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee: grantee, Actions: jsii.Strings(PgRelaySecretKeyActions...), ResourceArns: &keys,
		Conditions: &map[string]*map[string]any{
			"StringEquals": {"kms:ViaService": "secretsmanager." + *region + ".amazonaws.com"},
		},
	})
}
