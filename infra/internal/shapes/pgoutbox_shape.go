package shapes

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/jsii-runtime-go"

	"github.com/sqsworker/sqsworker/infra/jobqueue"
)

// postgresOutboxShape is a stack with a PostgreSQL outbox relay in a VPC, reading an RDS secret
// imported by its ARN and encrypted with a customer key (DatabaseSecretKey), and let into a
// database's security group.
func postgresOutboxShape(stack awscdk.Stack) jobqueue.Props {
	// No custom resource (and so no third function) for the default security group.
	vpc := awsec2.NewVpc(stack, jsii.String("Vpc"), &awsec2.VpcProps{MaxAzs: jsii.Number(2), NatGateways: jsii.Number(0),
		RestrictDefaultSecurityGroup: jsii.Bool(false)})
	dbSG := awsec2.NewSecurityGroup(stack, jsii.String("DatabaseSG"), &awsec2.SecurityGroupProps{Vpc: vpc})
	secret := awssecretsmanager.Secret_FromSecretCompleteArn(stack, jsii.String("DatabaseSecret"),
		jsii.String("arn:aws:secretsmanager:us-east-1:111122223333:secret:app-db-AbCdEf"))
	key := awskms.Key_FromKeyArn(stack, jsii.String("DatabaseSecretKey"),
		jsii.String("arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"))
	return jobqueue.Props{Name: "pgoutbox", PostgresOutbox: &jobqueue.PostgresOutboxProps{
		DatabaseSecret: secret, DatabaseSecretKey: key, Vpc: vpc, VpcSubnets: &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PRIVATE_ISOLATED},
		Database: awsec2.NewConnections(&awsec2.ConnectionsProps{SecurityGroups: &[]awsec2.ISecurityGroup{dbSG}, DefaultPort: awsec2.Port_Tcp(jsii.Number(5432))}),
		Table:    "app.outbox", BatchSize: 200, MaxAttempts: 20, SSLMode: "require",
	}}
}
