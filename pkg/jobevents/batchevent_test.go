package jobevents

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// batchImg is the stream image of a batch item in state st (pkg/batch's shape, docs/TABLE.md).
func batchImg(st string, extra map[string]events.DynamoDBAttributeValue) map[string]events.DynamoDBAttributeValue {
	img := map[string]events.DynamoDBAttributeValue{
		"pk": events.NewStringAttribute("batch:01BATCH"), "st": events.NewStringAttribute(st),
		"desc": events.NewStringAttribute("thumbnails"), "tot": events.NewNumberAttribute("3"),
		"ok": events.NewNumberAttribute("2"), "dead": events.NewNumberAttribute("1"), "cxl": events.NewNumberAttribute("0"),
		"cb": events.NewStringAttribute("01CALLBACK"), "cbk": events.NewStringAttribute("thumbs.done"),
		"cat": events.NewNumberAttribute("1764583200000"), "sat": events.NewNumberAttribute("1764583201000"),
	}
	if st == "done" {
		img["dat"] = events.NewNumberAttribute("1764583202345")
	}
	for k, v := range extra {
		img[k] = v
	}
	return img
}

func batchRecord(name string, old, new map[string]events.DynamoDBAttributeValue) events.DynamoDBEventRecord {
	r := events.DynamoDBEventRecord{EventName: name,
		EventSourceArn: "arn:aws:dynamodb:eu-west-1:123456789012:table/myapp-jobs/stream/2026-12-01T00:00:00.000"}
	r.Change.OldImage, r.Change.NewImage, r.Change.SequenceNumber = old, new, "7"
	return r
}

func TestBatchFromRecord(t *testing.T) {
	t.Parallel()
	finished := time.UnixMilli(1764583202345).UTC()
	tests := []struct {
		name    string
		r       events.DynamoDBEventRecord
		want    bool // an event
		counts  bool // with its counts (every event here has them)
		wantErr bool
	}{
		{name: "the last child finishes the sealed batch", r: batchRecord("MODIFY", batchImg("sealed", nil), batchImg("done", nil)), want: true, counts: true},
		{name: "a batch created done (sealed without children)", r: batchRecord("INSERT", nil, batchImg("done", nil)), want: true, counts: true},
		{name: "the seal finds every child finished", r: batchRecord("MODIFY", batchImg("open", nil), batchImg("done", nil)), want: true, counts: true},
		{name: "a sharded batch: its completion wrote the summed counts", counts: true,
			r:    batchRecord("MODIFY", batchImg("sealed", nil), batchImg("done", map[string]events.DynamoDBAttributeValue{"nsh": events.NewNumberAttribute("8")})),
			want: true},
		{name: "a later write to a finished batch (a redriven child's count)", r: batchRecord("MODIFY", batchImg("done", nil), batchImg("done", nil))},
		{name: "a sealed batch counting a child", r: batchRecord("MODIFY", batchImg("sealed", nil), batchImg("sealed", nil))},
		{name: "its deletion (TTL)", r: batchRecord("REMOVE", batchImg("done", nil), nil)},
		{name: "one of its other items", r: batchRecord("INSERT", nil, batchImg("done", map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute("batch:01BATCH:cb")}))},
		{name: "a job record in a final state is no batch", r: batchRecord("MODIFY", batchImg("running", map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute("report.build#k")}),
			batchImg("succeeded", map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute("report.build#k")}))},
		{name: "done without its time", r: batchRecord("MODIFY", batchImg("sealed", nil), batchImg("done", map[string]events.DynamoDBAttributeValue{"dat": events.NewStringAttribute("soon")})), wantErr: true},
		{name: "a MODIFY without its old image", r: batchRecord("MODIFY", nil, batchImg("done", nil)), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, ok, err := BatchFromRecord(&tt.r)
			if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, ErrMalformed)) {
				t.Fatalf("err = %v, want an ErrMalformed error: %v", err, tt.wantErr)
			}
			if ok != tt.want {
				t.Fatalf("ok = %v, want %v (event %+v)", ok, tt.want, ev)
			}
			if !ok {
				return
			}
			if !Filter(&tt.r) {
				t.Error("the mapping's filter drops it")
			}
			if ev.BatchID != "01BATCH" || ev.State != "done" || ev.Description != "thumbnails" || ev.CallbackJobID != "01CALLBACK" ||
				ev.CallbackKind != "thumbs.done" || !ev.FinishedAt.Equal(finished) || ev.SealedAt == nil || ev.CreatedAt == nil ||
				ev.Table != "myapp-jobs" || ev.ID != EventID("batch:01BATCH", "done", finished) || ev.V != SchemaVersion {
				t.Errorf("event %+v", ev)
			}
			if tt.counts {
				if ev.Total == nil || *ev.Total != 3 || *ev.Succeeded != 2 || *ev.Dead != 1 || *ev.Cancelled != 0 {
					t.Errorf("counts %v %v %v %v, want 3 2 1 0", ev.Total, ev.Succeeded, ev.Dead, ev.Cancelled)
				}
			}
			// A job event is not made of it.
			if jev, jok, jerr := FromRecord(&tt.r); jok || jerr != nil {
				t.Errorf("FromRecord = %+v, %v, %v; want skipped", jev, jok, jerr)
			}
		})
	}
}

func TestBatchFromRecordWithoutCounts(t *testing.T) {
	t.Parallel()
	img := batchImg("done", nil)
	delete(img, "tot")
	r := batchRecord("MODIFY", batchImg("sealed", nil), img)
	ev, ok, err := BatchFromRecord(&r)
	if err != nil || !ok || ev.Total != nil || ev.Succeeded != nil || ev.Dead != nil || ev.Cancelled != nil {
		t.Errorf("a done batch item without counts: %+v, %v, %v; want an event without counts", ev, ok, err)
	}
}

func TestHandleDynamoDBPublishesBatchEvents(t *testing.T) {
	t.Parallel()
	bus := &fakeBus{}
	p := newPublisher(t, bus)
	in := batch(2)
	in.Records = append(in.Records, batchRecord("MODIFY", batchImg("sealed", nil), batchImg("done", nil)))
	resp, err := p.HandleDynamoDB(context.Background(), in)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("response %+v, %v", resp, err)
	}
	if len(bus.types) != 3 || bus.types[0] != DetailType || bus.types[2] != BatchDetailType {
		t.Fatalf("detail types %v, want two job events then a batch's", bus.types)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(bus.details[2]), &got); err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"v", "event_id", "batch_id", "state", "total", "succeeded", "dead", "cancelled", "callback_job_id", "callback_kind", "finished_at", "table"} {
		if _, ok := got[field]; !ok {
			t.Errorf("the batch event's detail %s has no %q", bus.details[2], field)
		}
	}
	if st := p.Stats(); st.Published != 3 || st.Skipped != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestInfraMirrorsTheFilterAndDetailTypes: the CDK module (infra/, a module of its own that does
// not import this one) writes the same filter criteria and names the same detail-types.
func TestInfraMirrorsTheFilterAndDetailTypes(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join("..", "..", "infra", "jobqueue", "events.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"`" + FilterPattern + "`", `"` + DetailType + `"`, `"` + BatchDetailType + `"`, `"` + DefaultSource + `"`} {
		if !strings.Contains(string(src), want) {
			t.Errorf("infra/jobqueue/events.go does not say %s", want)
		}
	}
}
