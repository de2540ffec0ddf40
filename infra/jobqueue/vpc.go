package jobqueue

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
)

// VpcAccessActions are the EC2 calls Lambda makes with a function's execution role to attach the
// function to a VPC (its Hyperplane network interfaces), as the Lambda developer guide lists them
// ("Giving Lambda functions access to resources in an Amazon VPC", Required IAM permissions,
// read 2026-12-02): the ec2 actions of the AWS managed policy AWSLambdaVPCAccessExecutionRole
// (v3). They have no resource-level scoping that Lambda documents (DescribeNetworkInterfaces
// works only on "*"), so they are allowed on "*".
var VpcAccessActions = []string{
	"ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets",
	"ec2:DeleteNetworkInterface", "ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses",
}

// grantVpcAccess lets Lambda attach fn, which runs as role, to its VPC: a policy <id> of its own
// on role allowing VpcAccessActions on "*", which fn depends on, so that CloudFormation creates
// the function only once the permissions exist (without them Lambda refuses the create). Every
// function the construct puts in a VPC calls it: CDK attaches AWSLambdaVPCAccessExecutionRole
// only to a role it creates itself, and these functions have roles of the construct's own.
//
// Not that managed policy: it also allows logs:CreateLogGroup, CreateLogStream and PutLogEvents
// on every log group, where these roles write only to their own log group. A policy of its own
// rather than a statement in the role's default policy, so that the cdk-nag suppression of its
// "*" covers this policy only.
func (jq *JobQueue) grantVpcAccess(id string, role awsiam.Role, fn awslambda.Function) awsiam.Policy {
	pol := awsiam.NewPolicy(jq.Construct, jsii.String(id), &awsiam.PolicyProps{
		Roles: &[]awsiam.IRole{role},
		Statements: &[]awsiam.PolicyStatement{awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings(VpcAccessActions...),
			Resources: jsii.Strings("*"),
		})},
	})
	fn.Node().AddDependency(pol)
	suppress(pol, nagRule{
		ID: "AwsSolutions-IAM5",
		Reason: "The EC2 network-interface actions Lambda needs to attach a function to its VPC (those of AWSLambdaVPCAccessExecutionRole, " +
			"without its logs actions on every log group): Lambda documents them on \"*\" only. This policy holds nothing else.",
		AppliesTo: []any{"Resource::*"},
	})
	return pol
}
