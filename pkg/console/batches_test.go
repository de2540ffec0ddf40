package console_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/batch"
	"github.com/sqsworker/sqsworker/pkg/console"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// batchStack is a job table with a batch (3 children, none started, hostile description and
// child key) and a chain of 2 steps, on the embedded emulator, and the console's Config for them.
type batchStack struct {
	client *batch.Client
	batch  string
	chain  string
	cfg    console.Config
}

func newBatchStack(t *testing.T) *batchStack {
	t.Helper()
	ctx := context.Background()
	b := awslocaltest.Backend(t)
	ddb, sqsClient := b.DynamoDB(), sqs.NewFromConfig(b.Config)
	name := awslocal.UniqueName("cbatch")
	stack, err := awslocal.Provision(ctx, sqsClient, awslocal.StackOptions{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	table, err := awslocal.ProvisionTable(ctx, ddb, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dynamooutbox.CreateTable(ctx, ddb, awslocal.OutboxTableName(name)); err != nil {
		t.Fatal(err)
	}
	ob, err := dynamooutbox.New(dynamooutbox.Config{Client: ddb, Table: awslocal.OutboxTableName(name)})
	if err != nil {
		t.Fatal(err)
	}
	client, err := batch.New(batch.Config{Client: ddb, Table: table, Outbox: ob})
	if err != nil {
		t.Fatal(err)
	}
	prod, err := producer.New(producer.Config{SQS: sqsClient, QueueURL: stack.QueueURL})
	if err != nil {
		t.Fatal(err)
	}
	prep := func(kind string, opts ...producer.Option) producer.Message {
		m, err := prod.PrepareRaw(ctx, kind, []byte(`{}`), opts...)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	cb := prep("album.ready")
	bt, err := client.Start(ctx, batch.Spec{Callback: &cb, Description: "album " + hostileScript + " " + hostileImg + " " + hostileBidi})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bt.Track(ctx, prep("image.resize", producer.WithKey("key "+hostileBidi+hostileScript)), prep("image.resize"), prep("image.resize")); err != nil {
		t.Fatal(err)
	}
	if err := bt.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	chain, err := client.StartChain(ctx, batch.ChainSpec{Description: "order " + hostileBidi}, prep("order.charge"), prep("order.ship"))
	if err != nil {
		t.Fatal(err)
	}
	return &batchStack{client: client, batch: bt.ID(), chain: chain, cfg: console.Config{Title: name, Batches: client, Token: token,
		Logger: slog.New(slog.DiscardHandler)}}
}

// TestBrowserBatches opens the Batches page, a batch and a chain in headless Chromium: the
// progress bars show the counts, hostile text is escaped and runs nothing, no CSP violation; a
// signed-in operator cancels the batch with its form and the page shows the cancelled children.
func TestBrowserBatches(t *testing.T) {
	path := chromium(t)
	s := newBatchStack(t)
	c, err := console.New(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	b := newBrowser(t, path)
	b.open(srv.URL + "/batches")
	b.check("/batches")
	if n := eval[int](b, `document.querySelectorAll("#batches progress.batch-progress").length`); n != 1 {
		t.Errorf("the Batches page shows %d progress bars, want 1", n)
	}
	if v := eval[int](b, `document.querySelector("#batches progress").value`); v != 0 {
		t.Errorf("progress %d, want 0 (no child finished)", v)
	}
	checkEscaped(t, "/batches as the browser shows it", eval[string](b, `document.documentElement.innerText`), true)
	for _, p := range []string{"/batch?id=" + s.batch, "/chain?id=" + s.chain} {
		b.open(srv.URL + p)
		b.check(p)
		checkEscaped(t, p+" as the browser shows it", eval[string](b, `document.documentElement.innerText`), true)
	}
	b.open(srv.URL + "/batch?id=" + s.batch)
	if forms := eval[int](b, `document.querySelectorAll("#cancel-batch-form").length`); forms != 0 {
		t.Error("the batch page offers Cancel to a visitor who has not signed in")
	}
	b.open(srv.URL + signInLink(t, c))
	b.open(srv.URL + "/batch?id=" + s.batch)
	b.do("cancel the batch", chromedp.SendKeys(chromedp.CSS(`#cancel-batch-form input[name="reason"]`), "not needed"),
		chromedp.Click(chromedp.CSS("#cancel-batch")), chromedp.WaitVisible(chromedp.CSS("#notice")))
	if n := b.text("#notice"); !strings.Contains(n, "3 children that had not started are cancelled") {
		t.Errorf("the notice after the cancel: %q", n)
	}
	if counts := b.text("#batch-counts"); !strings.Contains(counts, "100% of 3: 0 succeeded, 0 dead, 3 cancelled, 0 running") {
		t.Errorf("the batch after the cancel: %q", counts)
	}
	if st := b.text("#batch-state"); st != batch.StateDone {
		t.Errorf("the batch's state after the cancel: %q", st)
	}
	b.check("after the cancel")
}

// TestBatchesPagesRefuse: a read-only console shows the pages without the cancel forms and refuses
// a cancel posted anyway; a signed-in cancel without the CSRF token is refused; a bad id is a 404;
// a console without a batch client says so.
func TestBatchesPagesRefuse(t *testing.T) {
	s := newBatchStack(t)
	ro := s.cfg
	ro.ReadOnly, ro.Token = true, ""
	roc, err := console.New(ro)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = roc.Close() })
	cl := newClient(t, roc)
	code, body := cl.get("/batch?id=" + s.batch)
	if code != http.StatusOK || strings.Contains(body, `id="cancel-batch-form"`) {
		t.Errorf("read-only batch page: %d, with a cancel form: %v", code, strings.Contains(body, "cancel-batch-form"))
	}
	if code, _, _ := cl.post("/batch/cancel", url.Values{"id": {s.batch}}); code != http.StatusForbidden {
		t.Errorf("a cancel posted to the read-only console: %d, want 403", code)
	}
	if code, _ := cl.get("/batch?id=a:b"); code != http.StatusNotFound {
		t.Errorf("a bad batch id: %d, want 404", code)
	}
	c, err := console.New(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	cl = newClient(t, c)
	cl.signIn()
	if code, _, _ := cl.post("/batch/cancel", url.Values{"id": {s.batch}}); code != http.StatusForbidden {
		t.Errorf("a cancel without the CSRF token: %d, want 403", code)
	}
	if d, _ := s.client.Get(context.Background(), s.batch, 0); !d.CancelledAt.IsZero() {
		t.Error("a refused cancel cancelled the batch")
	}
	_, page := cl.get("/chain?id=" + s.chain)
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if csrf == nil {
		t.Fatalf("the chain page has no cancel form for a signed-in operator:\n%s", page)
	}
	if code, loc, _ := cl.post("/chain/cancel", url.Values{"id": {s.chain}, "csrf": {csrf[1]}}); code != http.StatusSeeOther || !strings.HasPrefix(loc, "/chain?") {
		t.Errorf("the chain's cancel: %d %s", code, loc)
	}
	if d, _ := s.client.GetChain(context.Background(), s.chain); d.State != batch.ChainCancelled {
		t.Errorf("the chain after its cancel: %s", d.State)
	}
	none, err := console.New(console.Config{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = none.Close() })
	if _, body := newClient(t, none).get("/batches"); !strings.Contains(body, "no batch client") {
		t.Errorf("a console without a batch client: %s", body)
	}
}

// TestBatchPagesShardedCounts: the Batches page and a batch's page show a batch whose children
// are counted on 4 counter shards with the counts summed over the shards (6 children, the 4
// finished ones on at least 2 shards: 3 succeeded, 1 dead, 2 running), and its shard count.
func TestBatchPagesShardedCounts(t *testing.T) {
	ctx := context.Background()
	b := awslocaltest.Backend(t)
	ddb, sqsClient := b.DynamoDB(), sqs.NewFromConfig(b.Config)
	name := awslocal.UniqueName("cshard")
	stack, err := awslocal.Provision(ctx, sqsClient, awslocal.StackOptions{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	table, err := awslocal.ProvisionTable(ctx, ddb, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dynamooutbox.CreateTable(ctx, ddb, awslocal.OutboxTableName(name)); err != nil {
		t.Fatal(err)
	}
	ob, err := dynamooutbox.New(dynamooutbox.Config{Client: ddb, Table: awslocal.OutboxTableName(name)})
	if err != nil {
		t.Fatal(err)
	}
	client, err := batch.New(batch.Config{Client: ddb, Table: table, Outbox: ob})
	if err != nil {
		t.Fatal(err)
	}
	prod, err := producer.New(producer.Config{SQS: sqsClient, QueueURL: stack.QueueURL})
	if err != nil {
		t.Fatal(err)
	}
	// Six children whose first four (the ones that finish) hash to at least two of the 4
	// counter shards (pkg/batch counts a child on idempotency.Shard(its id, 4)): ids are
	// random, so draw again when all four would land on one shard (1 time in 64).
	var children []producer.Message
	for distinct := map[int]bool{}; len(distinct) < 2; {
		children, distinct = children[:0], map[int]bool{}
		for i := range 6 {
			m, err := prod.PrepareRaw(ctx, "image.resize", []byte(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			if i < 4 {
				distinct[idempotency.Shard(m.ID, 4)] = true
			}
			children = append(children, m)
		}
	}
	bt, err := client.Start(ctx, batch.Spec{CounterShards: 4})
	if err != nil {
		t.Fatal(err)
	}
	kids, err := bt.Track(ctx, children...)
	if err != nil {
		t.Fatal(err)
	}
	if err := bt.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	inner, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: ddb, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	store, err := client.WrapStore(inner)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	shards := map[string]bool{}
	for i, k := range kids[:4] {
		env, err := jobs.ParseEnvelope(k.Body)
		if err != nil {
			t.Fatal(err)
		}
		shards[env.Meta[batch.MetaBatchShard]] = true
		if _, err := store.Claim(ctx, idempotency.ClaimRequest{Kind: k.Kind, Key: k.Key, JobID: k.ID, Token: "t", Now: now,
			LeaseUntil: now.Add(time.Minute), Meta: env.Meta}); err != nil {
			t.Fatal(err)
		}
		st := idempotency.StateSucceeded
		if i == 3 {
			st = idempotency.StateDead
		}
		if err := store.Finish(ctx, idempotency.Finish{Kind: k.Kind, Key: k.Key, JobID: k.ID, Token: "t", State: st,
			Now: now, ExpiresAt: now.Add(time.Hour), Meta: env.Meta}); err != nil {
			t.Fatal(err)
		}
	}
	if len(shards) < 2 || shards[""] {
		t.Fatalf("the finished children's counter shards: %v, want 2 or more", shards)
	}
	c, err := console.New(console.Config{Title: name, Batches: client, Token: token, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	cl := newClient(t, c)
	if code, body := cl.get("/batches"); code != http.StatusOK ||
		!strings.Contains(body, `<progress value="66" max="100" class="batch-progress">66%</progress> 66%</td>`+"\n"+`<td>6</td><td>2</td><td>3</td><td>1</td><td>0</td>`) {
		t.Errorf("the Batches page (%d) does not show 6 children: 2 running, 3 succeeded, 1 dead:\n%s", code, body)
	}
	code, body := cl.get("/batch?id=" + bt.ID())
	for _, want := range []string{`<span id="batch-counts">66% of 6: 3 succeeded, 1 dead, 0 cancelled, 2 running</span>`,
		`<td id="counter-shards">4 (the counts are their sums)</td>`, kids[3].ID} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("the batch's page (%d): no %q in\n%s", code, want, body)
		}
	}
}
