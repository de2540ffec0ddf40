package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/payload"
	"github.com/sqsworker/sqsworker/pkg/queues"
)

// awsClients are the clients a stack command uses, for one endpoint.
type awsClients struct {
	// where names the endpoint in messages: its URL, or "AWS (<region>)".
	where string
	// local reports whether the endpoint is an emulator or another non-AWS endpoint (what
	// `sqsworker up` provisions), so that hints may suggest it.
	local bool
	sqs   *sqs.Client
	ddb   *dynamodb.Client
	s3    *s3.Client
	// cfn reads the stack's CloudFormation outputs (the scheduler's role, see schedulerRole); nil
	// on an endpoint, where it is never needed (emulators) or the URL is not CloudFormation's.
	cfn stackDescriber
	// cfg is the AWS configuration the clients were made from (for the clients a command
	// makes itself, such as pause's Lambda client).
	cfg aws.Config
}

// connect returns clients for --endpoint (else AWS_ENDPOINT_URL), or for AWS itself with the
// default credential chain when neither is set. Unlike `up` and `demo`, the stack commands never
// start the embedded emulator: it would be empty, since its state ends with the process.
func connect(ctx context.Context, g *globals) (*awsClients, error) {
	endpoint := g.endpoint
	if endpoint == "" {
		endpoint = os.Getenv("AWS_ENDPOINT_URL")
	}
	if endpoint != "" {
		u, err := url.Parse(endpoint)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, &usageError{fmt.Errorf("--endpoint %q is not a URL (want one such as http://localhost:4566)", endpoint)}
		}
		b, err := awslocal.Start(ctx, awslocal.Options{Backend: awslocal.Endpoint, Endpoint: endpoint, Region: g.region})
		if err != nil {
			return nil, err
		}
		// b.DynamoDB skips the DynamoDB CRC32 check on emulators, which send no such header (the
		// SDK would warn on every call); AWS endpoints keep it.
		return &awsClients{
			where: endpoint,
			local: !awslocal.IsAWSEndpoint(endpoint),
			sqs:   sqs.NewFromConfig(b.Config),
			ddb:   b.DynamoDB(),
			s3:    b.S3(),
			cfg:   b.Config,
		}, nil
	}
	cfg, err := awslocal.NewConfig(ctx, "", g.region, 0, false)
	if err != nil {
		return nil, err
	}
	if cfg.Region == "" {
		return nil, errors.New("no AWS region: pass --region, or set AWS_REGION or a region in your AWS profile")
	}
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		return nil, fmt.Errorf("no AWS credentials found (%v)\n"+
			"  configure them (aws configure, aws sso login, AWS_PROFILE or AWS_ACCESS_KEY_ID), or pass --endpoint for an emulator",
			firstLine(err.Error()))
	}
	return &awsClients{
		where: "AWS (" + cfg.Region + ")",
		sqs:   sqs.NewFromConfig(cfg),
		ddb:   dynamodb.NewFromConfig(cfg),
		s3:    s3.NewFromConfig(cfg),
		cfn:   cloudformation.NewFromConfig(cfg),
		cfg:   cfg,
	}, nil
}

// payloadStore returns the store of the stack's payload bucket, or nil when the stack has none:
// --payload-bucket when given (an error if it cannot be reached); else on AWS the CloudFormation
// stack's output <id>PayloadBucketName (infra/jobqueue/payload.go; one DescribeStacks call);
// else <stack>-payloads, what `sqsworker up --payloads` creates, when it exists (one HeadBucket
// call). A bucket looked for but not found, or not readable, is no bucket: the command then
// works as for a stack without one.
func payloadStore(ctx context.Context, c *awsClients, g *globals, stack string) (*payload.Store, error) {
	if g.payloadBucket != "" {
		if _, err := c.s3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(g.payloadBucket)}); err != nil {
			return nil, fmt.Errorf("--payload-bucket %s on %s: %w", g.payloadBucket, c.where, err)
		}
		return payload.New(payload.Config{S3: c.s3, Bucket: g.payloadBucket})
	}
	name := ""
	if c.cfn != nil {
		out, err := c.cfn.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(stack)})
		if err != nil || len(out.Stacks) == 0 {
			return nil, nil
		}
		for _, o := range out.Stacks[0].Outputs {
			if strings.HasSuffix(aws.ToString(o.OutputKey), "PayloadBucketName") {
				name = aws.ToString(o.OutputValue)
			}
		}
		if name == "" {
			return nil, nil
		}
	} else {
		name = awslocal.BucketName(stack)
		if _, err := c.s3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(name)}); err != nil {
			return nil, nil
		}
	}
	return payload.New(payload.Config{S3: c.s3, Bucket: name})
}

// needs says which of a stack's resources a command uses.
type needs uint8

const (
	needQueue needs = 1 << iota
	needDLQ
	needTable
	// optTable resolves the table when it exists and leaves stackRefs.Table empty otherwise.
	optTable
)

// stackRefs are the resources of one stack a command works on.
type stackRefs struct {
	Name string
	FIFO bool
	// Queue is the queue of the stack's set the command works on (--queue): "" for the default.
	Queue string
	// Queue and DLQ are the job queue and its dead-letter queue (name and URL; empty when not
	// asked for).
	QueueName, QueueURL string
	DLQName, DLQURL     string
	// Table is the job table's name (empty when not asked for, or optional and absent).
	Table string
}

// resolveStack finds a stack's resources by the names `sqsworker up` gives them
// (awslocal.QueueName, DLQName and TableName): the stack is FIFO when fifo is set or when
// "<stack>-jobs.fifo" exists. A missing resource is an error naming it and the command that
// creates it.
//
// The CDK stack will publish its resources as CloudFormation outputs; a reader of those outputs
// replaces this function then, with the same result type, so that stacks named otherwise work
// too. Nothing else in the CLI derives resource names.
func resolveStack(ctx context.Context, c *awsClients, stack string, fifo bool, n needs) (*stackRefs, error) {
	return resolveQueue(ctx, c, stack, "", fifo, n)
}

// resolveQueue is resolveStack for one queue of the stack's queue set (--queue): "" or
// queues.DefaultName for the default queue, "<stack>-jobs"; "critical" for "<stack>-jobs-critical"
// and its DLQ "<stack>-jobs-critical-dlq" (queues.SQSName).
func resolveQueue(ctx context.Context, c *awsClients, stack, queue string, fifo bool, n needs) (*stackRefs, error) {
	if queue != "" {
		if err := queues.ValidateName(queue); err != nil {
			return nil, &usageError{fmt.Errorf("--queue: %v", err)}
		}
	}
	refs := &stackRefs{Name: stack, FIFO: fifo, Queue: queue}
	if n&(needQueue|needDLQ) != 0 {
		if !fifo {
			// A FIFO queue is recognised by its name; a standard one is the default.
			switch _, err := queueURL(ctx, c, queues.SQSName(stack, queue, true)); {
			case err == nil:
				refs.FIFO = true
			case !errors.Is(err, errNoQueue):
				return nil, err
			}
		}
		refs.QueueName = queues.SQSName(stack, queue, refs.FIFO)
		refs.DLQName = queues.DLQSQSName(stack, queue, refs.FIFO)
	}
	if n&needQueue != 0 {
		u, err := queueURL(ctx, c, refs.QueueName)
		if err != nil && queue != "" && queue != queues.DefaultName && errors.Is(err, errNoQueue) {
			return nil, c.missingQueue(ctx, stack, queue)
		}
		if err != nil {
			return nil, c.missing(err, "queue "+refs.QueueName, stack, refs.FIFO)
		}
		refs.QueueURL = c.reachable(u)
	}
	if n&needDLQ != 0 {
		u, err := queueURL(ctx, c, refs.DLQName)
		if err != nil {
			return nil, c.missing(err, "dead-letter queue "+refs.DLQName, stack, refs.FIFO)
		}
		refs.DLQURL = c.reachable(u)
	}
	if n&(needTable|optTable) != 0 {
		name := awslocal.TableName(stack)
		_, err := c.ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		var nf *ddbtypes.ResourceNotFoundException
		switch {
		case err == nil:
			refs.Table = name
		case errors.As(err, &nf) && n&needTable == 0:
		case errors.As(err, &nf):
			return nil, c.missing(errNoTable, "job table "+name, stack, refs.FIFO)
		default:
			return nil, fmt.Errorf("describe table %s: %w", name, err)
		}
	}
	return refs, nil
}

var (
	errNoQueue = errors.New("queue does not exist")
	errNoTable = errors.New("table does not exist")
)

// queueURL looks a queue up by name; errNoQueue when it does not exist.
func queueURL(ctx context.Context, c *awsClients, name string) (string, error) {
	out, err := c.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		var qe *sqstypes.QueueDoesNotExist
		if errors.As(err, &qe) || apiErrorCode(err) == "AWS.SimpleQueueService.NonExistentQueue" {
			return "", errNoQueue
		}
		return "", fmt.Errorf("look up queue %s: %w", name, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// reachable returns a queue URL an emulator returned as reachable at its endpoint (see
// awslocal.QueueURLAt); on AWS, the URL as it is.
func (c *awsClients) reachable(queueURL string) string {
	if !c.local {
		return queueURL
	}
	return awslocal.QueueURLAt(c.where, queueURL)
}

// missing explains a missing resource, or passes another error on.
func (c *awsClients) missing(err error, what, stack string, fifo bool) error {
	if !errors.Is(err, errNoQueue) && !errors.Is(err, errNoTable) {
		return err
	}
	if !c.local {
		// `up` provisions emulators and LocalStack; on AWS the CDK app in infra/ deploys stacks.
		return fmt.Errorf("%s not found on %s: is the stack name (or --region) right? Deploy the stack with `make deploy CDK_CTX='-c stack=%s'` (infra/README.md)", what, c.where, stack)
	}
	up := "sqsworker up --stack " + stack
	if fifo {
		up += " --fifo"
	}
	return fmt.Errorf("%s not found on %s: is the stack name right? Create the stack with `%s --endpoint %s`", what, c.where, up, c.where)
}

// apiErrorCode returns the error code of an AWS API error in err's chain, or "".
func apiErrorCode(err error) string {
	var ae interface{ ErrorCode() string }
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// explain turns the errors every AWS call may meet into messages that say what to do: an
// endpoint that cannot be reached, credentials AWS rejects. Other errors pass unchanged.
func explain(err error) error {
	var ue *usageError
	var de *databaseError
	if err == nil || errors.As(err, &ue) || errors.As(err, &de) {
		return err
	}
	// Only an HTTP request's failure (the SDK's, wrapped in a *url.Error) is the AWS endpoint's:
	// another connection's (PostgreSQL's) says where it went itself.
	var uerr *url.Error
	isHTTP := errors.As(err, &uerr)
	var op *net.OpError
	if isHTTP && errors.As(err, &op) && op.Op == "dial" {
		target := ""
		if u, perr := url.Parse(uerr.URL); perr == nil {
			target = " " + u.Scheme + "://" + u.Host
		}
		return fmt.Errorf("cannot reach the AWS endpoint%s: %v\n"+
			"  is the emulator running? Check --endpoint and AWS_ENDPOINT_URL", target, op.Err)
	}
	var dns *net.DNSError
	if isHTTP && errors.As(err, &dns) {
		return fmt.Errorf("cannot reach the AWS endpoint: %v\n  check --endpoint, AWS_ENDPOINT_URL and --region", dns)
	}
	switch apiErrorCode(err) {
	case "UnrecognizedClientException", "InvalidClientTokenId", "ExpiredToken", "ExpiredTokenException",
		"InvalidSignatureException", "SignatureDoesNotMatch", "IncompleteSignature", "MissingAuthenticationToken":
		return fmt.Errorf("AWS rejected the credentials: %v\n  refresh or configure them (aws sso login, AWS_PROFILE), or pass --endpoint for an emulator", err)
	case "AccessDenied", "AccessDeniedException":
		return fmt.Errorf("access denied: %v\n  the credentials lack a permission this command needs", err)
	}
	return err
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
