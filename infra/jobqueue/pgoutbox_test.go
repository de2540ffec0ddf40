package jobqueue

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/sqsworker/sqsworker/infra/internal/cfnread"
)

var pgOutboxStack synth

// pgOutboxApp is a stack with a VPC, a database secret and a database security group (standing
// for an RDS instance), and the job system with a PostgreSQL outbox relay wired to them.
func pgOutboxApp(t *testing.T) (assertions.Template, *JobQueue) {
	return pgOutboxStack.getWith(t, func(stack awscdk.Stack) Props {
		vpc := awsec2.NewVpc(stack, jsii.String("Vpc"), &awsec2.VpcProps{MaxAzs: jsii.Number(2), NatGateways: jsii.Number(0)})
		dbSG := awsec2.NewSecurityGroup(stack, jsii.String("DatabaseSG"), &awsec2.SecurityGroupProps{Vpc: vpc})
		db := awsec2.NewConnections(&awsec2.ConnectionsProps{SecurityGroups: &[]awsec2.ISecurityGroup{dbSG}, DefaultPort: awsec2.Port_Tcp(jsii.Number(5432))})
		secret := awssecretsmanager.NewSecret(stack, jsii.String("DatabaseSecret"), nil)
		return Props{Name: "pg", PostgresOutbox: &PostgresOutboxProps{
			Asset: assetPath, DatabaseSecret: secret, Vpc: vpc, Database: db,
			VpcSubnets: &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PRIVATE_ISOLATED},
			Table:      "app.outbox", MaxAttempts: 7, LogLevel: "debug",
			SSLMode: "verify-full", SSLRootCert: "/opt/rds/global-bundle.pem",
		}}
	})
}

func TestPostgresOutboxFunction(t *testing.T) {
	tmpl, jq := pgOutboxApp(t)
	if jq.PostgresOutbox == nil || jq.PostgresOutbox.Function == nil {
		t.Fatal("no relay built")
	}
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
			"Runtime": "provided.al2023", "Architectures": []any{"arm64"}, "Handler": "bootstrap", "Timeout": 60, "MemorySize": 256,
			"Environment": map[string]any{"Variables": map[string]any{
				EnvQueueURL:          map[string]any{"Ref": assertions.Match_AnyValue()},
				EnvTable:             map[string]any{"Ref": assertions.Match_AnyValue()},
				EnvOutboxSecretARN:   map[string]any{"Ref": assertions.Match_StringLikeRegexp(jsii.String("DatabaseSecret"))},
				EnvOutboxTable:       "app.outbox",
				EnvOutboxMaxAttempts: "7",
				EnvLogLevel:          "debug",
				EnvOutboxSSLMode:     "verify-full",
				EnvOutboxSSLRootCert: "/opt/rds/global-bundle.pem",
				EnvScheduleGroup:     assertions.Match_AnyValue(),
				EnvQueueARN:          assertions.Match_AnyValue(),
				EnvSchedulerRoleARN:  assertions.Match_AnyValue(),
				EnvSchedulerDLQARN:   assertions.Match_AnyValue(),
			}},
			"VpcConfig": map[string]any{"SubnetIds": assertions.Match_AnyValue(), "SecurityGroupIds": assertions.Match_AnyValue()},
		})
	})
	// Every minute, no retries, in the relays' schedule group.
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Scheduler::Schedule"), map[string]any{
			"ScheduleExpression": "rate(1 minute)",
			"State":              "ENABLED",
			"GroupName":          map[string]any{"Ref": assertions.Match_StringLikeRegexp(jsii.String("^JobsOutboxScheduleGroup"))},
			"Target": map[string]any{
				"Arn":         map[string]any{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^JobsPgRelay[0-9A-F]{8}$")), "Arn"}},
				"RoleArn":     map[string]any{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^JobsPgRelayScheduleRole")), "Arn"}},
				"RetryPolicy": map[string]any{"MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": 60},
			},
		})
	})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Scheduler::ScheduleGroup"), map[string]any{"Name": "pg-outbox"})
	})
	// The database lets the relay in on its port.
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::EC2::SecurityGroupIngress"), map[string]any{
			"IpProtocol": "tcp", "FromPort": 5432, "ToPort": 5432,
			"SourceSecurityGroupId": map[string]any{"Fn::GetAtt": assertions.Match_ArrayWith(&[]any{assertions.Match_StringLikeRegexp(jsii.String("PgRelaySecurityGroup"))})},
		})
	})
	check(t, func() {
		tmpl.HasOutput(jsii.String("JobsPgRelayFunctionName"), map[string]any{"Value": map[string]any{"Ref": assertions.Match_AnyValue()}})
	})
}

// TestPostgresOutboxGrants compares the relay's role and its schedule's, action by action and
// resource by resource, with what functions/pgrelay calls: SendMessage (its producer), PutItem on
// the job table (pkg/status RecordEnqueued and RecordScheduledJob: the queued or scheduled record
// of each sent job), CreateSchedule in the job group for delays beyond 15 minutes (pkg/schedule
// ScheduleJob) with iam:PassRole, GetSecretValue on the secret, its log group; the schedule's
// role may invoke the function's unqualified ARN only.
func TestPostgresOutboxGrants(t *testing.T) {
	tmpl, _ := pgOutboxApp(t)
	checkGrants(t, "JobsPgRelayRole", grants(t, tmpl, "JobsPgRelayRole"), map[string][]string{
		"JobsPgRelayLogs.Arn":  {"logs:CreateLogStream", "logs:PutLogEvents"},
		queueArn:               sendOnly,
		tableArn:               {"dynamodb:PutItem"},
		"DatabaseSecret":       {"secretsmanager:GetSecretValue"},
		schedulesOf("pg-jobs"): {"scheduler:CreateSchedule"},
		schedRole:              {"iam:PassRole"},
		"*":                    vpcAccess,
	})
	checkGrants(t, "JobsPgRelayScheduleRole", grants(t, tmpl, "JobsPgRelayScheduleRole"), map[string][]string{
		"JobsPgRelay.Arn": {"lambda:InvokeFunction"},
	})
}

// vpcAccess is what Lambda's developer guide lists for the role of a function in a VPC
// (the EC2 actions of AWSLambdaVPCAccessExecutionRole), written out apart from VpcAccessActions.
var vpcAccess = []string{"ec2:AssignPrivateIpAddresses", "ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface",
	"ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets", "ec2:UnassignPrivateIpAddresses"}

// TestPostgresOutboxVpcAccess: in a VPC, the relay's role (the construct's own, so CDK attaches
// no AWSLambdaVPCAccessExecutionRole to it) has a policy of its own allowing exactly vpcAccess on
// "*", and the function depends on it, so that the permissions exist when CloudFormation creates
// the function; without a VPC there is no such policy and no EC2 action.
func TestPostgresOutboxVpcAccess(t *testing.T) {
	tmpl, jq := pgOutboxApp(t)
	if jq.PostgresOutbox.VpcAccess == nil {
		t.Fatal("PostgresOutbox.VpcAccess is nil with a VPC")
	}
	var polID string
	for id, p := range *tmpl.FindResources(jsii.String("AWS::IAM::Policy"), nil) {
		if !strings.HasPrefix(id, "JobsPgRelayVpcAccess") {
			continue
		}
		if polID != "" {
			t.Fatalf("two VPC access policies, %s and %s", polID, id)
		}
		polID = id
		props := (*p)["Properties"].(map[string]any)
		if got, want := render(props["Roles"]), `[{"Ref":"`+roleLogicalID(t, tmpl, "JobsPgRelayRole")+`"}]`; got != want {
			t.Errorf("VPC access policy on %s, want %s (the relay's role)", got, want)
		}
		sts := props["PolicyDocument"].(map[string]any)["Statement"].([]any)
		if len(sts) != 1 {
			t.Fatalf("VPC access policy has %d statements, want 1: %v", len(sts), sts)
		}
		st := sts[0].(map[string]any)
		var acts []string
		for _, a := range list(st["Action"]) {
			acts = append(acts, a.(string))
		}
		slices.Sort(acts)
		if !slices.Equal(acts, vpcAccess) || st["Resource"] != "*" || st["Effect"] != "Allow" || st["Condition"] != nil {
			t.Errorf("VPC access statement %v, want Allow %v on *", st, vpcAccess)
		}
	}
	if polID == "" {
		t.Fatal("no VPC access policy")
	}
	n := 0
	for id, fn := range *tmpl.FindResources(jsii.String("AWS::Lambda::Function"), nil) {
		if !strings.HasPrefix(id, "JobsPgRelay") {
			continue
		}
		n++
		if deps := render((*fn)["DependsOn"]); !strings.Contains(deps, `"`+polID+`"`) {
			t.Errorf("function %s depends on %s, not on the VPC access policy %s", id, deps, polID)
		}
	}
	if n != 1 {
		t.Errorf("%d relay functions", n)
	}

	tmpl, jq = pgSecretByName.getWith(t, pgSecretByNameProps)
	if jq.PostgresOutbox.VpcAccess != nil {
		t.Error("PostgresOutbox.VpcAccess is set without a VPC")
	}
	for _, st := range roleStatements(t, tmpl, "JobsPgRelayRole") {
		for _, a := range st.Actions {
			if strings.HasPrefix(a, "ec2:") {
				t.Errorf("without a VPC the relay is allowed %s", a)
			}
		}
	}
}

// roleLogicalID returns the logical id of the one role named prefix and CDK's hash.
func roleLogicalID(t *testing.T, tmpl assertions.Template, prefix string) string {
	t.Helper()
	var ids []string
	for id := range *tmpl.FindResources(jsii.String("AWS::IAM::Role"), nil) {
		if cfnread.LogicalName(id) == prefix {
			ids = append(ids, id)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("roles %v for %s", ids, prefix)
	}
	return ids[0]
}

// TestPostgresOutboxScheduleTrust: only EventBridge Scheduler, for this account and for schedules
// in the relays' own schedule group, may assume the schedule's role.
func TestPostgresOutboxScheduleTrust(t *testing.T) {
	tmpl, _ := pgOutboxApp(t)
	checkSchedulerTrust(t, tmpl, "JobsPgRelayScheduleRole", "JobsOutboxScheduleGroup.Arn")
}

var pgSecretByName synth

// pgSecretByNameProps: a relay without a VPC reading a secret imported by name.
func pgSecretByNameProps(stack awscdk.Stack) Props {
	secret := awssecretsmanager.Secret_FromSecretNameV2(stack, jsii.String("DatabaseSecret"), jsii.String("app-db"))
	return Props{Name: "pgs", DisableScheduling: true, PostgresOutbox: &PostgresOutboxProps{Asset: assetPath, DatabaseSecret: secret}}
}

// TestPostgresOutboxSecretGrant: a secret imported by name is granted with the "-??????" of its
// random suffix (as CDK's GrantRead), GetSecretValue only, and no KMS action (its key is
// aws/secretsmanager unless DatabaseSecretKey says otherwise: TestPostgresOutboxSecretKeyGrant).
func TestPostgresOutboxSecretGrant(t *testing.T) {
	tmpl, _ := pgSecretByName.getWith(t, pgSecretByNameProps)
	checkGrants(t, "JobsPgRelayRole", grants(t, tmpl, "JobsPgRelayRole"), map[string][]string{
		"JobsPgRelayLogs.Arn": {"logs:CreateLogStream", "logs:PutLogEvents"},
		queueArn:              sendOnly,
		tableArn:              {"dynamodb:PutItem"},
		"arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:app-db-??????": {"secretsmanager:GetSecretValue"},
	})

}

func TestPostgresOutboxAlarms(t *testing.T) {
	tmpl, _ := pgOutboxApp(t)
	for name, metric := range map[string]string{AlarmOutboxDeadRows: MetricOutboxDeadRows, AlarmOutboxStale: MetricOutboxOldestAge} {
		check(t, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
				"AlarmName": AlarmName("pg", name), "Namespace": "sqsworker", "MetricName": metric,
				"Dimensions":   assertions.Match_ArrayWith(&[]any{map[string]any{"Name": "Table", "Value": "app.outbox"}}),
				"AlarmActions": assertions.Match_AnyValue(),
			})
		})
	}
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
			"AlarmName": AlarmName("pg", AlarmOutboxRelayErrors), "Threshold": 1,
			"Metrics": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{"Expression": "FILL(relay, 0) + FILL(fn, 0)"})}),
		})
	})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
			"AlarmName": AlarmName("pg", AlarmOutboxStale), "Threshold": 900,
		})
	})
}

// cdk-nag over the construct's resources (the test's own VPC and secret are not the construct's),
// alone and beside a payload bucket (whose grants add suppressions to the relay's policy too).
func TestPostgresOutboxNag(t *testing.T) {
	for _, payloads := range []bool{false, true} {
		pgNag(t, payloads)
	}
}

func pgNag(t *testing.T, payloads bool) {
	app := newTestApp(t)
	stack := awscdk.NewStack(app, jsii.String("PgNag"), nil)
	vpc := awsec2.NewVpc(stack, jsii.String("Vpc"), &awsec2.VpcProps{MaxAzs: jsii.Number(2), NatGateways: jsii.Number(0)})
	vpc.AddFlowLog(jsii.String("FlowLog"), nil)
	secret := awssecretsmanager.Secret_FromSecretCompleteArn(stack, jsii.String("DatabaseSecret"),
		jsii.String("arn:aws:secretsmanager:us-east-1:123456789012:secret:db-AbCdEf"))
	if _, err := New(stack, "Jobs", Props{Name: "pgnag", WorkerAsset: assetPath, PayloadBucket: payloads, PostgresOutbox: &PostgresOutboxProps{
		Asset: assetPath, DatabaseSecret: secret, Vpc: vpc, VpcSubnets: &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PRIVATE_ISOLATED},
	}}); err != nil {
		t.Fatal(err)
	}
	awscdk.Aspects_Of(stack).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	ann := assertions.Annotations_FromStack(stack)
	for _, m := range *ann.FindError(jsii.String("/PgNag/Jobs/*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))) {
		t.Errorf("payloads %v: error %s: %v", payloads, *m.Id, m.Entry.Data)
	}
}

// With a payload bucket, the relay knows it (GrantEnqueue lets it write there).
func TestPostgresOutboxPayloadBucket(t *testing.T) {
	tmpl := assertions.Template_FromStack(func() awscdk.Stack {
		stack := awscdk.NewStack(newTestApp(t), jsii.String("PgPayload"), nil)
		if _, err := New(stack, "Jobs", Props{Name: "pgp", WorkerAsset: assetPath, PayloadBucket: true,
			PostgresOutbox: &PostgresOutboxProps{Asset: assetPath, DSN: "postgres://relay@db/app"}}); err != nil {
			t.Fatal(err)
		}
		return stack
	}(), nil)
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
			"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(&map[string]any{
				EnvOutboxDSN:     "postgres://relay@db/app",
				EnvPayloadBucket: map[string]any{"Ref": assertions.Match_AnyValue()},
			})},
		})
	})
}

func TestPostgresOutboxValidate(t *testing.T) {
	secret := awssecretsmanager.Secret_FromSecretNameV2(awscdk.NewStack(newTestApp(t), jsii.String("V"), nil), jsii.String("S"), jsii.String("db"))
	ok := PostgresOutboxProps{DSN: "postgres://relay@db/app"}
	if err := (Props{Name: "t", PostgresOutbox: &ok}).Validate(); err != nil {
		t.Fatalf("a DSN alone: %v", err)
	}
	for _, tt := range []struct {
		name string
		o    PostgresOutboxProps
		want string
	}{
		{"no database", PostgresOutboxProps{}, "DatabaseSecret or DSN is required"},
		{"both", PostgresOutboxProps{DSN: "x", DatabaseSecret: secret}, "both set"},
		{"bad table", PostgresOutboxProps{DSN: "x", Table: "Outbox"}, `Table="Outbox"`},
		{"bad sslmode", PostgresOutboxProps{DSN: "x", SSLMode: "yes"}, `SSLMode="yes"`},
		{"relative root cert", PostgresOutboxProps{DSN: "x", SSLRootCert: "rds.pem"}, `SSLRootCert="rds.pem"`},
		{"key without secret", PostgresOutboxProps{DSN: "x", DatabaseSecretKey: awskms.Key_FromKeyArn(secret.Stack(), jsii.String("K"), jsii.String(importedSecretKeyArn))},
			"DatabaseSecretKey needs DatabaseSecret"},
		{"alias key", PostgresOutboxProps{DatabaseSecret: secret, DatabaseSecretKey: awskms.Alias_FromAliasName(secret.Stack(), jsii.String("A"), jsii.String("alias/db"))},
			"DatabaseSecretKey is an alias"},
		{"database without vpc", PostgresOutboxProps{DSN: "x", Database: awsec2.NewConnections(nil)}, "Database needs Vpc"},
		{"schedule too short", PostgresOutboxProps{DSN: "x", Schedule: 30 * time.Second}, "Schedule=30s"},
		{"schedule not minutes", PostgresOutboxProps{DSN: "x", Schedule: 90 * time.Second}, "Schedule=1m30s"},
		{"timeout too short", PostgresOutboxProps{DSN: "x", Timeout: 10 * time.Second}, "Timeout=10s"},
		{"lease", PostgresOutboxProps{DSN: "x", Lease: time.Millisecond}, "Lease=1ms"},
		{"attempts", PostgresOutboxProps{DSN: "x", MaxAttempts: -1}, "MaxAttempts=-1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.o
			err := Props{Name: "t", PostgresOutbox: &o}.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := New(awscdk.NewStack(newTestApp(t), jsii.String("M"), nil), "Jobs", Props{Name: "m", WorkerAsset: assetPath,
		PostgresOutbox: &PostgresOutboxProps{DSN: "x", Asset: "/nonexistent/pgrelay.zip"}}); err == nil || !strings.Contains(err.Error(), "make build") {
		t.Errorf("New with a missing relay asset = %v", err)
	}
}
