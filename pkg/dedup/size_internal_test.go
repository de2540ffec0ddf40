package dedup

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/internal/ddbsize"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// TestItemSizes measures the items by DynamoDB's size rules (docs/TABLE.md, "Deduplication
// items"): a unique key derived from the args, a throttle window, a debounced job with a
// 237-byte envelope; each under the 1 KB one write unit covers.
func TestItemSizes(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	e := &Enqueuer{reserveLease: DefaultReserveLease}
	id := "01JDQ3ZV5XG8K2M4N6P8R0T2V5"
	key := "args:d588783a4cd579c2d4bd01f7ae9da3b9a553eb992dac4c4955aca051820ed324"
	uniq := e.uniqueItem(itemPK(UniqueKeyPrefix, "report.export", key), producer.Message{ID: id, Key: id}, now, Unique{Window: time.Hour})
	keyed := e.uniqueItem(itemPK(UniqueKeyPrefix, "report.export", "user-7"), producer.Message{ID: id, Key: "export-user-7-2026-12"}, now, Unique{Window: time.Hour})
	thr := map[string]types.AttributeValue{
		attrPK: avS(itemPK(ThrottleKeyPrefix, "email.digest", "tenant-7@1764583200000")), attrExp: avN(1764586800), attrTCount: avN(10),
	}
	env := `{"v":1,"id":"` + id + `","kind":"search.reindex","args":{"doc":42,"rev":17,"by":"ada@example.com"},"enqueued_at":"2026-12-01T10:00:00.000Z","meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}`
	deb := map[string]types.AttributeValue{
		attrPK:   avS(itemPK(DebounceKeyPrefix, "search.reindex", "args:6ed279118eb397a33078a6d944b4edd282f895f7afcfb77a6f253e5786283927")),
		attrDJob: avS(id), attrDFirst: avN(now.UnixMilli()), attrDLast: avN(now.UnixMilli()), attrDDeadline: avN(now.UnixMilli()),
		attrDSeq: avN(100), attrDEnv: avS(env), attrExp: avN(1764586800),
	}
	for _, it := range []struct {
		name string
		item map[string]types.AttributeValue
	}{{"unique, key from the args", uniq}, {"unique, key and job key of their own", keyed}, {"throttle window", thr}, {"debounced job, 237-byte envelope", deb}} {
		size := ddbsize.ItemSize(it.item)
		t.Logf("%-40s %d bytes", it.name, size)
		if size > 1024 {
			t.Errorf("%s: %d bytes, above one write unit", it.name, size)
		}
	}
	t.Logf("envelope %d bytes", len(env))
}

// TestArgsKeyFields: a key derived from some of the args' fields is the same for jobs that agree
// on them, differs when they do not, and is refused when none of the fields is in the args (a
// typo would give every job of the kind one key).
func TestArgsKeyFields(t *testing.T) {
	t.Parallel()
	a, err := argsKey("report.export", json.RawMessage(`{"account":"a1","month":"2026-11","note":"x"}`), []string{"account", "month"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := argsKey("report.export", json.RawMessage(`{"month":"2026-11","account":"a1","note":"y"}`), []string{"account", "month"})
	if err != nil || a != b {
		t.Errorf("same fields, other note: %q, %v; want %q", b, err, a)
	}
	if c, err := argsKey("report.export", json.RawMessage(`{"account":"a2","month":"2026-11"}`), []string{"account", "month"}); err != nil || c == a {
		t.Errorf("another account: %q, %v; want a key other than %q", c, err, a)
	}
	if _, err := argsKey("report.export", json.RawMessage(`{"account":"a1"}`), []string{"acount"}); err == nil || !strings.Contains(err.Error(), "none of the fields") {
		t.Errorf("a field no job has: %v, want an error saying none of the fields is in the args", err)
	}
}
