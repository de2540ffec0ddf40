package producer

import (
	"context"
	"testing"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// TestWithTenant: the tenant becomes the message group on a standard queue (an SQS fair queue)
// and the envelope's meta "tenant"; WithGroupID, before or after, keeps its group; a tenant SQS
// would refuse as a group is refused.
func TestWithTenant(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		url       string
		opts      []Option
		wantGroup string
	}{
		{"standard queue: the group is the tenant", stdURL, []Option{WithTenant("acme")}, "acme"},
		{"group before keeps its group", stdURL, []Option{WithGroupID("g1"), WithTenant("acme")}, "g1"},
		{"group after keeps its group", stdURL, []Option{WithTenant("acme"), WithGroupID("g2")}, "g2"},
		{"fifo: the tenant orders too", fifoURL, []Option{WithTenant("acme")}, "acme"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := &fakeSQS{}
			p := newTestProducer(t, api, tc.url)
			if _, err := p.Enqueue(context.Background(), emailArgs{To: "a@b.c"}, tc.opts...); err != nil {
				t.Fatal(err)
			}
			sent := api.sendCalls()
			if len(sent) != 1 || sent[0].Group != tc.wantGroup {
				t.Fatalf("sent %+v, want group %q", sent, tc.wantGroup)
			}
			env, err := jobs.DecodeEnvelope([]byte(sent[0].Body))
			if err != nil || env.Meta[jobs.MetaTenant] != "acme" {
				t.Errorf("envelope meta %v, %v; want tenant acme", env.Meta, err)
			}
		})
	}
	p := newTestProducer(t, &fakeSQS{}, stdURL)
	_, err := p.Enqueue(context.Background(), emailArgs{}, WithTenant("a b"))
	mustContain(t, err, `message group id "a b"`)
}
