package console

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/dlq"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/queues"
	"github.com/sqsworker/sqsworker/pkg/schedule"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// StatusAPI is the part of *status.Table the console uses.
type StatusAPI interface {
	Get(ctx context.Context, kind, key string) (status.Job, error)
	GetByID(ctx context.Context, jobID string) (status.Job, error)
	List(ctx context.Context, q status.ListQuery) (status.Page, error)
}

// DLQAPI is the part of *dlq.DLQ the console uses.
type DLQAPI interface {
	Peek(ctx context.Context, limit int) ([]dlq.Message, error)
	Show(ctx context.Context, jobID string) (dlq.Message, error)
	RedriveJob(ctx context.Context, jobID string, keepAttempts bool) error
	RedriveAll(ctx context.Context, opts dlq.RedriveOptions) (dlq.RedriveResult, error)
	WaitMoveTask(ctx context.Context, handle string, opts dlq.WaitOptions) (dlq.MoveTask, error)
	Purge(ctx context.Context, confirm string) error
	DeleteMessage(ctx context.Context, messageID string, opts dlq.DeleteOptions) (dlq.Message, error)
}

// SchedulesAPI is the part of *schedule.Client the console uses.
type SchedulesAPI interface {
	Group() string
	ListPage(ctx context.Context, q schedule.ListQuery) (schedule.RecurringPage, error)
	Get(ctx context.Context, name string) (schedule.Recurring, error)
	Upsert(ctx context.Context, r schedule.Recurring) error
	Delete(ctx context.Context, name string) error
	ListJobs(ctx context.Context, q schedule.JobListQuery) (schedule.JobPage, error)
	GetJob(ctx context.Context, jobID string) (schedule.JobSchedule, error)
}

// ProducerAPI is the part of *producer.Producer the console uses.
type ProducerAPI interface {
	EnqueueRaw(ctx context.Context, kind string, args json.RawMessage, opts ...producer.Option) (producer.Result, error)
	Cancel(ctx context.Context, kind, key, jobID string) error
	FIFO() bool
}

// QueueAttributesAPI is the part of the SQS client the overview uses; *sqs.Client implements it.
type QueueAttributesAPI interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

var (
	_ StatusAPI    = (*status.Table)(nil)
	_ DLQAPI       = (*dlq.DLQ)(nil)
	_ SchedulesAPI = (*schedule.Client)(nil)
	_ ProducerAPI  = (*producer.Producer)(nil)
)

// ErrConfig is wrapped by New's errors: a Config field is missing or wrong.
var ErrConfig = errors.New("console: invalid config")

// Config configures a Console. Every part is optional: a page whose part is missing says so
// (a stack without a job table has no Jobs page, say). The zero value of every field is its
// default.
type Config struct {
	// Title names the job system in the pages' titles, e.g. the stack's name. Defaults to
	// "sqsworker".
	Title string
	// Status reads the job table (*status.Table). Without it there are no Jobs and Job pages.
	Status StatusAPI
	// DLQ inspects and redrives the dead-letter queue of QueueURL, the default queue
	// (*dlq.DLQ). Without it there is no Dead letters page.
	DLQ DLQAPI
	// Schedules manages the stack's schedules (*schedule.Client). Without it there is no
	// Schedules page.
	Schedules SchedulesAPI
	// Batches lists, shows and cancels batches and chains (*batch.Client). Without it there is no
	// Batches page.
	Batches BatchesAPI
	// Producer enqueues jobs and cancels them (*producer.Producer, with Config.Status set to the
	// job table and Config.Scheduler to the schedule client, so that cancel reaches both).
	// Without it there is no Enqueue page and no cancel action.
	Producer ProducerAPI
	// Flow pauses and resumes kinds and the queue (with Queues, each queue of the set), and lists
	// the flow limits with their holders (*flow.Control on the job table). Without it there is
	// no Flow page.
	Flow FlowAPI
	// SQS reads the queues' depths for the overview, with QueueURL and DLQURL.
	SQS QueueAttributesAPI
	// QueueURL and DLQURL are the job queue and its dead-letter queue. DLQURL also gives the
	// name a purge must be confirmed with.
	QueueURL, DLQURL string
	// Stats gives the overview its per-kind charts and the oldest message's age:
	// *CloudWatchStats on AWS, *TableStats on an emulator. Without it the overview shows the
	// queue depths only.
	Stats Stats
	// Prefix is the path the handler is mounted under, such as "/ops/jobs" (no trailing slash):
	// every link and form starts with it, and requests outside it get 404. Defaults to "" (the
	// root). The handler expects the full path: mount it without http.StripPrefix.
	Prefix string
	// ReadOnly hides every action and refuses every POST. A read-only console has no sign-in:
	// its pages that peek at the DLQ are open to whoever reaches it (cross-site requests
	// excepted), so put it behind your own authentication.
	ReadOnly bool
	// Token is the secret that allows actions, and the pages that peek at the DLQ (a peek
	// counts as a receive of each message and hides it for a moment: see PeekCacheFor): a
	// browser signs in with it (the sign-in form, or a one-time link from SignInLink) and gets a
	// session; a script sends it in an "Authorization: Bearer" header. Required unless
	// ReadOnly; NewToken makes one.
	Token string
	// SessionLifetime is how long a sign-in lasts: the session cookie's Max-Age, and the
	// console's own end of the session (a copy of the cookie stops working then too). Signing
	// out ends it at once. 1m-720h; defaults to 12 h.
	SessionLifetime time.Duration
	// SecureCookie marks the session cookie Secure, so that the browser sends it over HTTPS
	// only. Set it when the console is served over HTTPS through a proxy that terminates TLS
	// (the console then sees plain HTTP). Defaults to false: the cookie is Secure only when the
	// request itself came over TLS (http.Request.TLS). X-Forwarded-Proto is not read: a client
	// could send it.
	SecureCookie bool
	// ShowArgs shows job args and message bodies; by default they are hidden, as the worker's
	// logs hide them (they may hold personal data). The body of a dead letter that is no job (not
	// an envelope) is shown to a signed-in operator all the same, who needs it to decide to
	// delete it.
	ShowArgs bool
	// Emulator says the backend is an emulator, not AWS (`sqsworker ui --endpoint`, `run`, the
	// demo): the pages then label the queues' visible and in-flight counts as approximate, since
	// the embedded emulator moves a message whose visibility ended back to visible only when
	// something receives from its queue (docs/ARCHITECTURE.md §6), and word an unreachable
	// backend's advice for an emulator. Defaults to false (AWS).
	Emulator bool
	// Hosts, when set, are the only Host header values (host or host:port) the console answers;
	// other requests get 421. `sqsworker ui` sets the address it listens on, which blocks DNS
	// rebinding. Defaults to any host (put the console behind your own routing).
	Hosts []string
	// Identity names who made a request, for the action log line: set it to read your own
	// authentication's user. Defaults to "token" for a request that presented the token.
	Identity func(r *http.Request) string
	// Logger receives one line per action. Defaults to slog.Default().
	Logger *slog.Logger
	// Refresh is how often the overview refreshes itself. Defaults to 5 s.
	Refresh time.Duration
	// PageSize is the number of rows of a page of every list, 1-1000. Defaults to 50.
	PageSize int
	// PeekLimit is the most dead letters one peek of the Dead letters page reads (it pages
	// through them), 10-10000. Defaults to 1000.
	PeekLimit int
	// PeekCacheFor is how long one peek of the DLQ serves every viewer (the Dead letters page,
	// the dead letter on a job's page, every tab and reload): a peek receives each message,
	// which raises its ApproximateReceiveCount and hides it while the peek runs, so the console
	// takes at most one peek per PeekCacheFor, and concurrent viewers share the one in
	// progress. A peek that found nothing is not reused (it received nothing). 1s-10m; defaults
	// to 10 s.
	PeekCacheFor time.Duration
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time

	// Queues, when set, is the stack's queue set (pkg/queues): the overview shows a row for
	// each of its queues and one for each queue's DLQ (its URL from the set; a queue without one
	// has no DLQ row), with SQS. QueueURL and DLQURL stay those of the default queue, where
	// the Dead letters page opens; with QueueDLQs it works on the other queues' DLQs too.
	// Defaults to nil: the rows of QueueURL and DLQURL.
	Queues *queues.Set
	// QueueDLQs are the DLQ tools of the other queues of Queues, by queue name ("bulk": a
	// *dlq.DLQ on that queue's DLQ, redriving to that queue): the Dead letters page then works
	// on every one of them (a queue selector, each action on the selected queue's DLQ, a peek
	// per DLQ), and the overview's DLQ rows link to them. Each name must be a queue of Queues
	// with a DLQ, other than the default's (that is DLQ's); requires DLQ and Queues. Defaults to
	// nil: the Dead letters page works on DLQ alone.
	QueueDLQs map[string]DLQAPI
}

// Console is the console's http.Handler. It is safe for concurrent use. Close stops a redrive
// it runs in the background.
type Console struct {
	cfg       Config
	mux       *http.ServeMux
	log       *slog.Logger
	pages     *pageSet
	sessions  sessionStore
	dlqName   string
	queueName string
	cop       *http.CrossOriginProtection

	// dlq is Config.DLQ's queue, where the Dead letters page opens (nil without a DLQ); dlqs
	// are every DLQ the console works on, in the queue set's order (dlq among them).
	dlq  *dlqTarget
	dlqs []*dlqTarget

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewToken returns a random token for Config.Token: 32 hex digits (128 bits).
func NewToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// minTokenLength is the shortest Config.Token accepted.
const minTokenLength = 16

// New checks cfg and returns the console.
func New(cfg Config) (*Console, error) {
	if cfg.Title == "" {
		cfg.Title = "sqsworker"
	}
	cfg.Prefix = strings.TrimRight(cfg.Prefix, "/")
	if cfg.Prefix != "" && !strings.HasPrefix(cfg.Prefix, "/") {
		return nil, fmt.Errorf("%w: Prefix %q must start with '/'", ErrConfig, cfg.Prefix)
	}
	if strings.ContainsAny(cfg.Prefix, "?#{}") {
		return nil, fmt.Errorf("%w: Prefix %q may not contain '?', '#', '{' or '}'", ErrConfig, cfg.Prefix)
	}
	if !cfg.ReadOnly && len(cfg.Token) < minTokenLength {
		return nil, fmt.Errorf("%w: Token is required unless ReadOnly, at least %d characters (console.NewToken makes one)", ErrConfig, minTokenLength)
	}
	if cfg.DLQ != nil && cfg.DLQURL == "" {
		return nil, fmt.Errorf("%w: DLQ needs DLQURL (its name confirms a purge)", ErrConfig)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Refresh == 0 {
		cfg.Refresh = 5 * time.Second
	}
	if cfg.Refresh < 500*time.Millisecond {
		return nil, fmt.Errorf("%w: Refresh %v is below 500ms", ErrConfig, cfg.Refresh)
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = 50
	}
	if cfg.PageSize < 1 || cfg.PageSize > status.MaxListLimit {
		return nil, fmt.Errorf("%w: PageSize %d is outside 1-%d", ErrConfig, cfg.PageSize, status.MaxListLimit)
	}
	if cfg.PeekLimit == 0 {
		cfg.PeekLimit = 1000
	}
	if cfg.PeekLimit < 10 || cfg.PeekLimit > 10000 {
		return nil, fmt.Errorf("%w: PeekLimit %d is outside 10-10000", ErrConfig, cfg.PeekLimit)
	}
	if cfg.PeekCacheFor == 0 {
		cfg.PeekCacheFor = 10 * time.Second
	}
	if cfg.PeekCacheFor < time.Second || cfg.PeekCacheFor > 10*time.Minute {
		return nil, fmt.Errorf("%w: PeekCacheFor %v is outside 1s-10m", ErrConfig, cfg.PeekCacheFor)
	}
	if cfg.SessionLifetime == 0 {
		cfg.SessionLifetime = defaultSessionLifetime
	}
	if cfg.SessionLifetime < minSessionLifetime || cfg.SessionLifetime > maxSessionLifetime {
		return nil, fmt.Errorf("%w: SessionLifetime %v is outside %v-%v", ErrConfig, cfg.SessionLifetime, minSessionLifetime, maxSessionLifetime)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	pages, err := loadPages()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Console{
		cfg: cfg, log: cfg.Logger, pages: pages,
		dlqName: dlq.QueueName(cfg.DLQURL), queueName: dlq.QueueName(cfg.QueueURL),
		cop: http.NewCrossOriginProtection(),
		ctx: ctx, cancel: cancel,
	}
	if cfg.DLQURL == "" {
		c.dlqName = ""
	}
	if cfg.QueueURL == "" {
		c.queueName = ""
	}
	if c.dlqs, err = newDLQTargets(cfg, c.dlqName, c.queueName); err != nil {
		return nil, err
	}
	for _, t := range c.dlqs {
		// An empty peek received nothing, so it changed nothing: the next viewer may peek again.
		t.peeks.reuse = func(sn *snapshot) bool { return len(sn.msgs) > 0 }
		if t.isDefault {
			c.dlq = t
		}
	}
	c.routes()
	return c, nil
}

// Close stops a redrive running in the background (it stops between batches, losing nothing:
// every message is then in one of the two queues) and waits for it.
func (c *Console) Close() error {
	c.cancel()
	c.wg.Wait()
	return nil
}

// ServeHTTP serves the console.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	if len(c.cfg.Hosts) > 0 && !c.hostAllowed(r.Host) {
		http.Error(w, "console: this host name is not served here (DNS rebinding?); open the console at the address it printed", http.StatusMisdirectedRequest)
		return
	}
	c.mux.ServeHTTP(w, r)
}

// hostAllowed reports whether the Host header is one of Config.Hosts (with or without a port).
func (c *Console) hostAllowed(host string) bool {
	bare := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		bare = h
	}
	for _, a := range c.cfg.Hosts {
		if strings.EqualFold(a, host) || strings.EqualFold(a, bare) {
			return true
		}
	}
	return false
}

// contentSecurityPolicy allows the console's own script, style and images only: no inline
// script or style, no framing, forms to the console only.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// path returns the console's path p (starting with "/") under the prefix.
func (c *Console) path(p string) string { return c.cfg.Prefix + p }

// routes registers every page, action and asset.
func (c *Console) routes() {
	m := http.NewServeMux()
	get := func(p string, h http.HandlerFunc) { m.HandleFunc("GET "+c.path(p), c.refuseTokenInURL(h)) }
	post := func(p, name string, h actionFunc) { m.HandleFunc("POST "+c.path(p), c.action(name, h)) }
	get("/{$}", c.overviewPage)
	get("/api/overview", c.overviewAPI)
	get("/jobs", c.jobsPage)
	get("/find", c.findJob)
	get("/job", c.jobPage)
	get("/dlq", c.dlqPage)
	get("/dlq/redrive", c.redrivePage)
	get("/dlq/message", c.messagePage)
	get("/api/redrive", c.redriveAPI)
	get("/schedules", c.schedulesPage)
	get("/enqueue", c.enqueuePage)
	get("/batches", c.batchesPage)
	get("/batch", c.batchPage)
	get("/chain", c.chainPage)
	get("/signin", c.signInPage)
	m.HandleFunc("POST "+c.path("/signin"), c.signIn)
	m.HandleFunc("POST "+c.path("/signout"), c.signOut)
	m.Handle("GET "+c.path("/static/"), http.StripPrefix(c.path("/static/"), staticHandler()))

	post("/job/redrive", "job.redrive", c.redriveJobAction)
	post("/job/cancel", "job.cancel", c.cancelJobAction)
	post("/job/stop", "job.stop", c.stopJobAction)
	post("/job/copy", "job.copy", c.copyJobAction)
	post("/dlq/redrive-all", "dlq.redrive_all", c.redriveAllAction)
	post("/dlq/purge", "dlq.purge", c.purgeAction)
	post("/dlq/delete", "dlq.delete_message", c.deleteMessageAction)
	post("/schedules/create", "schedule.create", c.createScheduleAction)
	post("/schedules/enable", "schedule.enable", c.enableScheduleAction)
	post("/schedules/disable", "schedule.disable", c.disableScheduleAction)
	post("/schedules/delete", "schedule.delete", c.deleteScheduleAction)
	post("/enqueue", "job.enqueue", c.enqueueAction)
	post("/batch/cancel", "batch.cancel", c.cancelBatchAction)
	post("/chain/cancel", "chain.cancel", c.cancelChainAction)
	get("/flow", c.flowPage)
	post("/flow/pause-kind", "flow.pause_kind", c.pauseKindAction)
	post("/flow/resume-kind", "flow.resume_kind", c.resumeKindAction)
	post("/flow/pause-queue", "flow.pause_queue", c.pauseQueueAction)
	post("/flow/resume-queue", "flow.resume_queue", c.resumeQueueAction)
	m.HandleFunc(c.path("/"), c.notFound)
	if c.cfg.Prefix != "" {
		m.HandleFunc("GET "+c.cfg.Prefix, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, c.path("/"), http.StatusMovedPermanently)
		})
	}
	c.mux = m
}
