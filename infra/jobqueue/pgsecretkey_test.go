package jobqueue

import (
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/jsii-runtime-go"
)

const (
	importedSecretKeyArn = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	importedSecretArn    = "arn:aws:secretsmanager:us-east-1:111122223333:secret:app-db-AbCdEf"
	// viaSecretsManager is the condition of every kms:Decrypt the relay gets: through Secrets
	// Manager in the stack's region only.
	viaSecretsManager = `{"StringEquals":{"kms:ViaService":{"Fn::Join":["",["secretsmanager.",{"Ref":"AWS::Region"},".amazonaws.com"]]}}}`
)

var pgSecretStackKey, pgSecretAttrsKey, pgSecretPropKey synth

// TestPostgresOutboxSecretKeyGrant: whatever way the relay's secret says it is encrypted with a
// customer key, the relay's role gets kms:Decrypt on exactly that key, conditioned on
// kms:ViaService secretsmanager.<region>.amazonaws.com, and nothing else on it: a secret created
// in the stack with a key of the stack, a secret imported with Secret_FromSecretAttributes and its
// EncryptionKey (CDK's key.GrantDecrypt wrote nothing for an imported key, issue 23.3), and a
// secret imported by its ARN with the key given as PostgresOutboxProps.DatabaseSecretKey.
func TestPostgresOutboxSecretKeyGrant(t *testing.T) {
	for _, tc := range []struct {
		name   string
		s      *synth
		props  func(awscdk.Stack) Props
		key    string // the key's ARN, rendered
		secret string // the secret's ARN, rendered
	}{
		{"stack key", &pgSecretStackKey, func(stack awscdk.Stack) Props {
			key := awskms.NewKey(stack, jsii.String("SecretKey"), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
			secret := awssecretsmanager.NewSecret(stack, jsii.String("DatabaseSecret"), &awssecretsmanager.SecretProps{EncryptionKey: key})
			return Props{Name: "pgk", DisableScheduling: true, PostgresOutbox: &PostgresOutboxProps{Asset: assetPath, DatabaseSecret: secret}}
		}, "SecretKey.Arn", "DatabaseSecret"},
		{"imported with its key", &pgSecretAttrsKey, func(stack awscdk.Stack) Props {
			key := awskms.Key_FromKeyArn(stack, jsii.String("SecretKey"), jsii.String(importedSecretKeyArn))
			secret := awssecretsmanager.Secret_FromSecretAttributes(stack, jsii.String("DatabaseSecret"), &awssecretsmanager.SecretAttributes{
				SecretCompleteArn: jsii.String(importedSecretArn), EncryptionKey: key,
			})
			return Props{Name: "pga", DisableScheduling: true, PostgresOutbox: &PostgresOutboxProps{Asset: assetPath, DatabaseSecret: secret}}
		}, importedSecretKeyArn, importedSecretArn},
		{"imported by ARN, key as a prop", &pgSecretPropKey, func(stack awscdk.Stack) Props {
			secret := awssecretsmanager.Secret_FromSecretCompleteArn(stack, jsii.String("DatabaseSecret"), jsii.String(importedSecretArn))
			return Props{Name: "pgp", DisableScheduling: true, PostgresOutbox: &PostgresOutboxProps{Asset: assetPath, DatabaseSecret: secret,
				DatabaseSecretKey: awskms.Key_FromKeyArn(stack, jsii.String("SecretKey"), jsii.String(importedSecretKeyArn))}}
		}, importedSecretKeyArn, importedSecretArn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, _ := tc.s.getWith(t, tc.props)
			checkGrants(t, "JobsPgRelayRole", grants(t, tmpl, "JobsPgRelayRole"), map[string][]string{
				"JobsPgRelayLogs.Arn": {"logs:CreateLogStream", "logs:PutLogEvents"},
				queueArn:              sendOnly,
				tableArn:              {"dynamodb:PutItem"},
				tc.secret:             {"secretsmanager:GetSecretValue"},
				tc.key:                {"kms:Decrypt"},
			})
			for _, st := range roleStatements(t, tmpl, "JobsPgRelayRole") {
				for _, r := range st.Resources {
					if r == tc.key && st.Condition != viaSecretsManager {
						t.Errorf("kms:Decrypt on %s with condition %s, want %s", r, st.Condition, viaSecretsManager)
					}
				}
			}
			checkNoKeyPolicyGrant(t, tmpl)
		})
	}
}

// checkNoKeyPolicyGrant: the relay's key grant is in its role's policy only, not also in a key
// policy of the stack.
func checkNoKeyPolicyGrant(t *testing.T, tmpl assertions.Template) {
	t.Helper()
	for id, k := range *tmpl.FindResources(jsii.String("AWS::KMS::Key"), nil) {
		for _, st := range (*k)["Properties"].(map[string]any)["KeyPolicy"].(map[string]any)["Statement"].([]any) {
			if p, _ := st.(map[string]any)["Principal"].(map[string]any); render(p["AWS"]) == "JobsPgRelayRole.Arn" {
				t.Errorf("key %s's policy names the relay too: %v", id, st)
			}
		}
	}
}
