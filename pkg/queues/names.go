package queues

// SQSName returns the SQS name of a stack's queue, as `sqsworker up` and the CDK construct name
// them: "<stack>-jobs" for the default queue (queue DefaultName or ""), "<stack>-jobs-<queue>"
// for the others, with ".fifo" for a FIFO queue.
func SQSName(stack, queue string, fifo bool) string {
	n := stack + "-jobs"
	if queue != "" && queue != DefaultName {
		n += "-" + queue
	}
	return withFIFO(n, fifo)
}

// DLQSQSName returns the SQS name of the dead-letter queue of a stack's queue:
// "<stack>-jobs-dlq" for the default queue's, "<stack>-jobs-<queue>-dlq" for the others', with
// ".fifo" for a FIFO queue.
func DLQSQSName(stack, queue string, fifo bool) string {
	n := stack + "-jobs"
	if queue != "" && queue != DefaultName {
		n += "-" + queue
	}
	return withFIFO(n+"-dlq", fifo)
}

// MaxSQSNameLength is SQS's longest queue name, ".fifo" included.
const MaxSQSNameLength = 80

func withFIFO(name string, fifo bool) string {
	if fifo {
		return name + ".fifo"
	}
	return name
}
