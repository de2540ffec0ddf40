package queues

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// DefaultName is the name of a stack's default queue: the queue of every kind without a queue of
// its own, and the stack's original queue, "<stack>-jobs".
const DefaultName = "default"

// Weight bounds of a queue (see Queue.Weight).
const (
	DefaultWeight = 1
	MaxWeight     = 1000
)

// ErrInvalid is wrapped by every error about a queue set that cannot be built: a bad or repeated
// name, URL or weight.
var ErrInvalid = errors.New("queues: invalid queue set")

// ErrUnknownQueue is wrapped by every error that names a queue the set does not have: a kind
// routed to it, a WithQueue option, a --queue flag.
var ErrUnknownQueue = errors.New("queues: no such queue in the stack")

// ErrMixedFIFO is wrapped by the error of a kind sent to a FIFO queue and a standard one: its
// jobs are built for one or the other (a FIFO job needs a message group and cannot be delayed
// by SQS), so a kind's queues are all FIFO or all standard.
var ErrMixedFIFO = errors.New("queues: a kind's queues must be all FIFO or all standard")

// Queue is one queue of a stack.
type Queue struct {
	// Name is the queue's name in the stack: DefaultName or a name of the jobs.ValidateQueueName
	// rule ("critical", "bulk"). Required.
	Name string
	// URL is the SQS queue URL. Required. A URL ending in ".fifo" is a FIFO queue.
	URL string
	// ARN is the queue's ARN, when known: a producer needs it to schedule the queue's delayed
	// jobs through EventBridge Scheduler. Defaults to the ARN of an AWS queue URL (ARNOf), else
	// "": unknown.
	ARN string
	// DLQURL is the URL of the queue's dead-letter queue, when known. Defaults to "": the target
	// of the queue's redrive policy, looked up where it is needed.
	DLQURL string
	// Weight is the queue's share of a poller's receives under weighted priority (pkg/poller):
	// 1 to 1,000. Defaults to 1.
	Weight int
}

// FIFO reports whether the queue is a FIFO queue.
func (q Queue) FIFO() bool { return strings.HasSuffix(q.SQSName(), ".fifo") }

// SQSName returns the queue's name in SQS: the last element of its URL (or of its ARN when it has
// no URL), such as "shop-jobs-critical".
func (q Queue) SQSName() string {
	if q.URL != "" {
		return NameOf(q.URL)
	}
	return NameOf(q.ARN)
}

// NameOf returns the SQS queue name in a queue URL (https://sqs.region.amazonaws.com/account/name)
// or ARN (arn:aws:sqs:region:account:name); any other string is returned as it is.
func NameOf(urlOrARN string) string {
	s := strings.TrimSpace(urlOrARN)
	if strings.HasPrefix(s, "arn:") {
		return s[strings.LastIndexByte(s, ':')+1:]
	}
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
		if j := strings.IndexAny(s, "?#"); j >= 0 {
			s = s[:j]
		}
		s = strings.TrimRight(s, "/")
		if strings.IndexByte(s, '/') < 0 {
			return ""
		}
		return s[strings.LastIndexByte(s, '/')+1:]
	}
	return s
}

// Set is a stack's queues: their names, URLs, which is the default, and the routes of kinds to
// them. Build it with New or Parse; it is immutable and safe for concurrent use.
type Set struct {
	queues []Queue
	byName map[string]int
	bySQS  map[string]int // SQS name → index
	def    int
}

// New checks qs and returns their set. The queue named DefaultName is the default; a set without
// one has its first queue as default. Every problem is reported, each wrapping ErrInvalid: no
// queue, a name that breaks jobs.ValidateQueueName (DefaultName is allowed), two queues with one
// name or one URL, a URL that is not a queue URL, an ARN that names another queue, a weight out of
// 1–1,000 (0 means 1).
func New(qs ...Queue) (*Set, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...))
	}
	if len(qs) == 0 {
		bad("no queue: a stack has at least its default queue")
	}
	s := &Set{queues: make([]Queue, 0, len(qs)), byName: make(map[string]int, len(qs)), bySQS: make(map[string]int, len(qs))}
	for i, q := range qs {
		q.Name = strings.TrimSpace(q.Name)
		q.URL = strings.TrimSpace(q.URL)
		label := fmt.Sprintf("queue %d (%q)", i+1, q.Name)
		if err := ValidateName(q.Name); err != nil {
			bad("%s: %v", label, err)
		} else if j, dup := s.byName[q.Name]; dup {
			bad("two queues are named %q (queues %d and %d): a queue name names one queue", q.Name, j+1, i+1)
		}
		if err := checkURL(q.URL); err != nil {
			bad("%s: %v", label, err)
		} else if j, dup := s.bySQS[q.SQSName()]; dup {
			bad("queues %q and %q are the same SQS queue %s", s.queues[j].Name, q.Name, q.SQSName())
		}
		if q.ARN != "" && (!strings.HasPrefix(q.ARN, "arn:") || len(strings.Split(q.ARN, ":")) != 6 || strings.Split(q.ARN, ":")[2] != "sqs" || NameOf(q.ARN) != NameOf(q.URL)) {
			bad("%s: ARN %q is not the ARN of %s", label, q.ARN, NameOf(q.URL))
		}
		if q.DLQURL != "" {
			if err := checkURL(q.DLQURL); err != nil {
				bad("%s: DLQ: %v", label, err)
			}
		}
		if q.ARN == "" {
			q.ARN, _ = ARNOf(q.URL)
		}
		if q.Weight == 0 {
			q.Weight = DefaultWeight
		}
		if q.Weight < 1 || q.Weight > MaxWeight {
			bad("%s: weight %d is out of range 1–%d", label, q.Weight, MaxWeight)
		}
		if _, dup := s.byName[q.Name]; !dup {
			s.byName[q.Name] = len(s.queues)
		}
		if _, dup := s.bySQS[q.SQSName()]; !dup && q.SQSName() != "" {
			s.bySQS[q.SQSName()] = len(s.queues)
		}
		s.queues = append(s.queues, q)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if i, ok := s.byName[DefaultName]; ok {
		s.def = i
	}
	return s, nil
}

// Single returns the set of a stack with one queue, its default: what a producer or poller
// configured with one QueueURL works on.
func Single(queueURL string) (*Set, error) { return New(Queue{Name: DefaultName, URL: queueURL}) }

// ValidateName reports whether name may name a queue of a set: DefaultName, or a name of the
// jobs.ValidateQueueName rule.
func ValidateName(name string) error {
	if name == DefaultName {
		return nil
	}
	return jobs.ValidateQueueName(name)
}

func checkURL(s string) error {
	if s == "" {
		return errors.New("the URL is empty")
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || strings.Trim(u.Path, "/") == "" {
		return fmt.Errorf("%q is not a queue URL (want https://sqs.<region>.amazonaws.com/<account>/<queue>)", s)
	}
	return nil
}

// Len returns the number of queues (0 for a nil Set).
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.queues)
}

// All returns the queues in the set's order (the order they were given: strict priority's order,
// highest first). The slice is the caller's.
func (s *Set) All() []Queue { return slices.Clone(s.queues) }

// Names returns the queue names in the set's order.
func (s *Set) Names() []string {
	out := make([]string, len(s.queues))
	for i, q := range s.queues {
		out[i] = q.Name
	}
	return out
}

// Default returns the default queue.
func (s *Set) Default() Queue { return s.queues[s.def] }

// Get returns the named queue; "" names the default. A name the set does not have is an error
// wrapping ErrUnknownQueue that lists the names it has.
func (s *Set) Get(name string) (Queue, error) {
	if name == "" {
		return s.Default(), nil
	}
	i, ok := s.byName[name]
	if !ok {
		return Queue{}, fmt.Errorf("%w: %q (the stack's queues: %s)", ErrUnknownQueue, name, strings.Join(s.Names(), ", "))
	}
	return s.queues[i], nil
}

// Find returns the queue a URL or ARN names (compared by SQS queue name, so that an ARN finds the
// queue of a URL), and whether the set has it.
func (s *Set) Find(urlOrARN string) (Queue, bool) {
	i, ok := s.bySQS[NameOf(urlOrARN)]
	if !ok {
		return Queue{}, false
	}
	return s.queues[i], true
}

// String returns the set in the form Parse reads: "name=url,name=url", in the set's order.
func (s *Set) String() string {
	var b strings.Builder
	for i, q := range s.queues {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(q.Name)
		b.WriteByte('=')
		b.WriteString(q.URL)
	}
	return b.String()
}

// Parse reads a queue set written as "name=url,name=url" (the functions' SQSWORKER_QUEUES, what
// Set.String writes): whitespace around entries is ignored, and the set is checked as New checks
// it.
func Parse(s string) (*Set, error) {
	var qs []Queue
	var errs []error
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		name, u, ok := strings.Cut(entry, "=")
		if !ok {
			errs = append(errs, fmt.Errorf("%w: entry %q: want name=url", ErrInvalid, entry))
			continue
		}
		qs = append(qs, Queue{Name: strings.TrimSpace(name), URL: strings.TrimSpace(u)})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return New(qs...)
}

// ARNOf returns the ARN of the queue an AWS queue URL names
// (https://sqs.<region>.amazonaws.com/<account>/<name>, or .amazonaws.com.cn in China), and
// whether the URL is one; the URL of an emulator or another endpoint has no ARN to derive.
func ARNOf(queueURL string) (string, bool) {
	u, err := url.Parse(queueURL)
	if err != nil || u.Scheme != "https" {
		return "", false
	}
	host := strings.ToLower(u.Hostname())
	partition := "aws"
	rest, ok := strings.CutSuffix(host, ".amazonaws.com")
	if !ok {
		if rest, ok = strings.CutSuffix(host, ".amazonaws.com.cn"); !ok {
			return "", false
		}
		partition = "aws-cn"
	}
	region, ok := strings.CutPrefix(rest, "sqs.")
	if !ok || region == "" || strings.Contains(region, ".") {
		return "", false
	}
	if strings.HasPrefix(region, "us-gov-") {
		partition = "aws-us-gov"
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) != 2 || len(parts[0]) != 12 || parts[1] == "" {
		return "", false
	}
	for _, c := range parts[0] {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return "arn:" + partition + ":sqs:" + region + ":" + parts[0] + ":" + parts[1], true
}
