package worker

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// fakeSQS records the worker's calls. sendErr fails every SendMessageBatch; failIDs fail entries
// whose message body is in the set.
type fakeSQS struct {
	mu         sync.Mutex
	visibility map[string]int32 // receipt handle → last visibility set
	sent       map[string][]sqstypes.SendMessageBatchRequestEntry
	calls      map[string]int
	sendErr    error
	failBodies map[string]bool
}

func newFakeSQS() *fakeSQS {
	return &fakeSQS{visibility: map[string]int32{}, sent: map[string][]sqstypes.SendMessageBatchRequestEntry{}, calls: map[string]int{}}
}

func (f *fakeSQS) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["ChangeMessageVisibilityBatch"]++
	if len(in.Entries) > 10 {
		return nil, errors.New("TooManyEntriesInBatchRequest")
	}
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		f.visibility[aws.ToString(e.ReceiptHandle)] = e.VisibilityTimeout
		out.Successful = append(out.Successful, sqstypes.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (f *fakeSQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["SendMessageBatch"]++
	if f.sendErr != nil {
		return nil, f.sendErr
	}
	if len(in.Entries) > 10 {
		return nil, errors.New("TooManyEntriesInBatchRequest")
	}
	out := &sqs.SendMessageBatchOutput{}
	for i, e := range in.Entries {
		if f.failBodies[aws.ToString(e.MessageBody)] {
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), Message: aws.String("injected")})
			continue
		}
		f.sent[aws.ToString(in.QueueUrl)] = append(f.sent[aws.ToString(in.QueueUrl)], e)
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String("sent-" + strconv.Itoa(i))})
	}
	return out, nil
}

func (f *fakeSQS) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["GetQueueUrl"]++
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String("https://sqs.test/" + aws.ToString(in.QueueName))}, nil
}

func (f *fakeSQS) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["GetQueueAttributes"]++
	name := aws.ToString(in.QueueUrl)[len("https://sqs.test/"):]
	dlq := name + "-dlq"
	if base, ok := strings.CutSuffix(name, ".fifo"); ok {
		dlq = base + "-dlq.fifo"
	}
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:` + dlq + `","maxReceiveCount":"15"}`,
	}}, nil
}

func (f *fakeSQS) callCount(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name]
}

func (f *fakeSQS) visibilityOf(handle string) (int32, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.visibility[handle]
	return v, ok
}

func (f *fakeSQS) sentTo(url string) []sqstypes.SendMessageBatchRequestEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sqstypes.SendMessageBatchRequestEntry(nil), f.sent[url]...)
}
