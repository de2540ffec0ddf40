package worker

import (
	"encoding/json"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqsworker/sqsworker/internal/sqsevent"
	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// TEMPORARY until the fast decoders land.
func parseEnvelope(body string) (jobs.Envelope, error) { return jobs.DecodeEnvelope([]byte(body)) }

func decodePayload(p []byte) ([]sqsevent.Record, error) {
	var ev events.SQSEvent
	if err := json.Unmarshal(p, &ev); err != nil {
		return nil, err
	}
	return sqsevent.FromEvent(ev, nil), nil
}
